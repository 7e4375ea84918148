"""Hooks both SGLang eagle-worker generations share (v1 `EAGLEWorker`, v2 `EAGLEWorkerV2`):
the constructor (identity, telemetry, series, whether SGLang simulates acceptance), and the start of a speculative step
(audit once, skip prefill, count, sample a span).

What spectrace keeps on a worker for its whole life is its `WorkerState` (`objstate`);
what the hooks of one step pass each other is the step in flight (`families.steps`).
"""
from __future__ import annotations

import sys
from typing import NamedTuple

from .. import counting, signals
from ..rules.synthetic import sglang_simulated
from ..families import step_cost
from ..families.steps import StepSpan
from ..objstate import ATTR, state_of
from ..patching import WrapPoint
from ..process import STATE, note_identity, on_reset, recorder
from ..runtimes import runtime_version
from . import sglang_identity, sglang_settings
from ..rules.context import trained_context
from .sglang_target import audit_pair

class WorkerState:
    """What spectrace keeps on one eagle worker (`objstate`)."""

    __slots__ = ("audited",)

    def __init__(self) -> None:
        self.audited = False


def worker_state(worker) -> WorkerState:
    return state_of(worker, WorkerState)


def before_init(instance, named: dict):
    """On entry to the worker's constructor (the draft model loads inside it): fix the
    process's identity from its arguments by name (with whether it counts its request-steps
    once or is a copy of its attention group's rank 0, the speculative algorithm and the
    worker class), then start its telemetry."""
    note_identity(**sglang_identity.ranks(named), **sglang_identity.models(named),
                  **sglang_identity.algorithm(named, instance),
                  counted=counting.scope(sglang_identity.placement(named)),
                  port_offset=sglang_identity.port_offset(named),
                  settings=sglang_settings.read(sglang_identity.server_args(named)))
    recorder()


def _after_init(ctx, worker, result) -> None:
    """Once the worker exists: its speculative-step count fixes the series to create, and
    SGLang's simulated-acceptance switch, as verify will read it, is checked."""
    rec = recorder()
    steps = getattr(worker, "speculative_num_steps", None)
    if isinstance(steps, int) and steps > 0:
        rec.acceptance.prepare(steps)
    topk = getattr(worker, "topk", None)
    if isinstance(topk, int):
        rec.steps.note_topk(type(worker).__name__, topk)
    finding = sglang_simulated(*simulated_acceptance())
    if finding is not None:
        rec.finding(finding)


SPEC_UTILS = "sglang.srt.speculative.spec_utils"


def simulated_acceptance() -> tuple:
    """(SIMULATE_ACC_LEN, SIMULATE_ACC_METHOD) as this process's SGLang uses them: the
    constants `spec_utils` read from `envs` at import, which verify reads (0.5.5 -
    0.5.23); else SGLang's `envs` object; (None, None) when this release has neither."""
    module = sys.modules.get(SPEC_UTILS)
    if module is None:
        try:
            import importlib
            module = importlib.import_module(SPEC_UTILS)
        except Exception:  # noqa: BLE001 - a release without it: look at envs
            module = None
    if module is not None and hasattr(module, "SIMULATE_ACC_LEN"):
        return module.SIMULATE_ACC_LEN, getattr(module, "SIMULATE_ACC_METHOD", None)
    try:
        from sglang.srt.environ import envs
        return (envs.SGLANG_SIMULATE_ACC_LEN.get(),
                envs.SGLANG_SIMULATE_ACC_METHOD.get())
    except Exception:  # noqa: BLE001 - neither: nothing to read
        return None, None


def init_point(cls: str, hook: str) -> WrapPoint:
    """The constructor wrap point of an eagle worker class."""
    return WrapPoint(f"{cls}.__init__", hook, before=before_init, after=_after_init,
                     reads="all")


def audit_once(worker, target_model, draft_model, audit=None) -> None:
    """Audit the target's aux capture against the draft, once per worker, at its first
    forward (SGLang configures capture after the worker's constructor returns). `audit`:
    the algorithm's own audit `(target, draft) -> findings` (DFlash / DSpark), else
    EAGLE-3's (`sglang_target.audit_pair`)."""
    st = worker_state(worker)
    if st.audited:
        return
    st.audited = True
    if target_model is None or draft_model is None:
        return
    rec = recorder()
    rec.draft.note_context(trained_context(getattr(draft_model, "config", None)))
    if audit is None:
        algorithm = getattr(getattr(worker, "server_args", None), "speculative_algorithm",
                            None)
        findings = audit_pair(target_model, draft_model,
                              algorithm=algorithm if isinstance(algorithm, str) else None)
    else:
        findings = audit(target_model, draft_model)
    for f in findings:
        rec.finding(f)


_IS_EXTEND: dict = {}  # ForwardMode member -> its is_extend(), asked once per member
on_reset(_IS_EXTEND.clear)


def is_prefill(batch) -> bool:
    """A prefill (extend) batch, not a speculative step: `forward_mode.is_extend()` (read
    once per ForwardMode member: the enum method costs about 1 µs a call) or SGLang's
    `is_extend_in_batch`."""
    mode = batch.forward_mode
    try:
        extend = _IS_EXTEND[mode]
    except KeyError:
        extend = _IS_EXTEND[mode] = bool(mode.is_extend())
    except TypeError:  # an unhashable mode: ask it every time
        extend = mode.is_extend()
    return extend or getattr(batch, "is_extend_in_batch", False)


class StepContext(NamedTuple):
    """What a step's hooks pass to `end_step`: its span and its cost measurement, when
    sampled (either may be None)."""

    span: StepSpan | None
    cost: step_cost.StepCost | None


def batch_size(batch) -> int:
    reqs = getattr(batch, "reqs", None)
    return len(reqs) if reqs is not None else int(batch.seq_lens.shape[0])


def begin_step(worker_kind: str, worker, batch, audit) -> StepContext | None:
    """The step hook both workers share: audit once, skip prefill, count the step, start a
    span for a sampled one and a cost measurement for a measured one (returns their
    context for `end_step`)."""
    st = worker.__dict__.get(ATTR)
    if st is None or not st.audited:
        audit(worker)
    rec = STATE.recorder or recorder()  # per step: no call when it exists
    speculative = not is_prefill(batch)
    if rec.inflight.last_end is not None:  # a measured CPU step before this one
        rec.cost.step_starts(speculative)  # a prefill in between: no between-steps interval
    if not speculative:
        return None
    span = None
    if rec.steps.begin(worker_kind):
        span = rec.steps.start_span(step_attrs(worker, batch))
    cost = rec.cost.start(worker, batch_size(batch), getattr(batch.seq_lens, "is_cuda", False)) \
        if rec.cost.due() else None
    if span is None and cost is None:
        return None
    return StepContext(span, cost)


def end_step(ctx: StepContext) -> None:
    rec = STATE.recorder
    if rec is None:
        return
    if ctx.cost is not None:
        rec.cost.end(ctx.cost)
    if ctx.span is not None:
        rec.steps.end_span(ctx.span)


def phase_hook(span_name: str, phase: int):
    """A `before` hook for a phase of the step (draft, verify, draft-extend): its child
    span under a sampled step span, its cost under a measured step (`end_phase`)."""
    def before(instance):
        return start_phase(span_name, phase)
    return before


def start_phase(span_name: str, phase: int) -> step_cost.PhaseCost | None:
    rec = STATE.recorder
    if rec is None:
        return None
    return rec.cost.start_phase(phase, rec.steps.child_span(span_name))


def end_phase(ctx: step_cost.PhaseCost) -> None:
    rec = STATE.recorder
    if rec is not None:
        rec.cost.stop_phase(ctx)
    if ctx.span is not None:
        ctx.span.end()


# -- the target's forward: inside verify, and the short prefill chunks (the cost model) -------
def _before_target_forward(worker, batch, forward_batch, is_verify):
    """The target worker's forward. Called from verify (`is_verify`, the only caller that
    passes it) inside a measured step: timed against its tokens, the rows of the batch it
    runs (requests x draft tokens; SGLang v2 passes a `ForwardBatch`, v1 its batch).
    Otherwise a prefill (extend) chunk: a plain forward, timed as a point of the forward's
    cost curve when it is short (`StepCosts.start_plain_forward`, issue 49)."""
    rec = STATE.recorder
    if rec is None:
        return None
    if not is_verify:
        return _plain_forward(rec, batch if batch is not None else forward_batch)
    if rec.inflight.cost is None:
        return None
    ids = (forward_batch if forward_batch is not None else batch).input_ids
    return rec.cost.start_forward(int(ids.shape[0]))


def _plain_forward(rec, batch):
    """A prefill chunk's forward (`ScheduleBatch` in v2, `ModelWorkerBatch` in v1): its new
    tokens (the input ids' length: metadata, no device read) and the tokens its requests
    held before it (`prefix_lens`, v1 `extend_prefix_lens`: lists on the host)."""
    mode = getattr(batch, "forward_mode", None)
    # EXTEND only: `is_extend()` also holds for TARGET_VERIFY and MIXED, which are not plain
    if getattr(mode, "name", None) != "EXTEND" or batch.input_ids is None:
        return None
    prefix = getattr(batch, "prefix_lens", None)
    if prefix is None:
        prefix = getattr(batch, "extend_prefix_lens", None) or ()
    return rec.cost.start_plain_forward(int(batch.input_ids.shape[0]), sum(prefix),
                                        len(prefix) or 1,
                                        getattr(batch.input_ids, "is_cuda", False))


def _after_target_forward(ctx, worker, result) -> None:
    rec = STATE.recorder
    if rec is None:
        return
    if isinstance(ctx, step_cost.PlainForward):
        rec.cost.stop_plain_forward(ctx)
    else:
        rec.cost.stop_forward(ctx)


# `sglang.srt.managers.tp_worker`: the target worker both eagle worker generations verify with
TARGET_WORKER = (
    WrapPoint("TpModelWorker.forward_batch_generation", "sglang.target_forward",
              before=_before_target_forward, after=_after_target_forward,
              after_needs_ctx=True,
              reads=(("batch", "model_worker_batch"), "forward_batch", "is_verify")),
)


def step_attrs(worker, batch) -> dict:
    """Step-span attributes from the worker's settings and the batch (a `ScheduleBatch` or
    `ModelWorkerBatch`: `reqs` when present, else the length of `seq_lens`). The worker
    attribute names the worker's own class (StandaloneWorkerV2, FrozenKVMTPWorkerV2 run
    EAGLEWorkerV2's step hook and are counted under its kind, so its verify samples them)."""
    return {signals.SPAN_ATTR_WORKER: type(worker).__name__,
            signals.SPAN_ATTR_RUNTIME: signals.RUNTIME_SGLANG,
            signals.SPAN_ATTR_RUNTIME_VERSION: runtime_version("sglang"),
            signals.SPAN_ATTR_SGLANG_VERSION: runtime_version("sglang"),
            signals.SPAN_ATTR_BATCH_SIZE: batch_size(batch),
            signals.SPAN_ATTR_NUM_STEPS: worker.speculative_num_steps,
            signals.SPAN_ATTR_TOPK: worker.topk,
            signals.SPAN_ATTR_NUM_DRAFT_TOKENS: worker.speculative_num_draft_tokens}
