"""Hooks both SGLang eagle-worker generations share (v1 `EAGLEWorker`, v2 `EAGLEWorkerV2`):
the constructor (identity, telemetry, series, whether SGLang simulates acceptance), and the start of a speculative step
(audit once, skip prefill, count, sample a span).

State a worker's hooks pass to each other lives on the worker (`WorkerState`), so it goes
when the worker does.
"""
from __future__ import annotations

import sys

from .. import counting, signals, spans
from ..detectors.synthetic import sglang_simulated
from ..patching import WrapPoint
from ..process import STATE, note_identity, on_reset, recorder
from ..runtimes import runtime_version
from . import sglang_identity
from .sglang_target import audit_pair

STATE_ATTR = "_spectrace_worker"


class WorkerState:
    """What spectrace keeps on one eagle worker."""

    __slots__ = ("audited",)

    def __init__(self) -> None:
        self.audited = False


def worker_state(worker) -> WorkerState:
    st = worker.__dict__.get(STATE_ATTR)
    if st is None:
        st = worker.__dict__[STATE_ATTR] = WorkerState()
    return st


def _before_init(instance, named: dict):
    """On entry to the worker's constructor (the draft model loads inside it): fix the
    process's identity from its arguments by name (with whether it counts its request-steps
    once or is a copy of its attention group's rank 0), then start its telemetry."""
    note_identity(**sglang_identity.ranks(named), **sglang_identity.models(named),
                  counted=counting.scope(sglang_identity.placement(named)),
                  port_offset=sglang_identity.port_offset(named))
    recorder()


def _after_init(ctx, worker, result) -> None:
    """Once the worker exists: its speculative-step count fixes the series to create, and
    SGLang's simulated-acceptance switch, as verify will read it, is checked."""
    steps = getattr(worker, "speculative_num_steps", None)
    if isinstance(steps, int) and steps > 0:
        recorder().acceptance.prepare(steps)
    finding = sglang_simulated(*simulated_acceptance())
    if finding is not None:
        recorder().finding(finding)


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
    return WrapPoint(f"{cls}.__init__", hook, before=_before_init, after=_after_init,
                     reads="all")


def audit_once(worker, target_model, draft_model) -> None:
    """Audit the target's aux capture against the draft, once per worker, at its first
    forward (SGLang configures capture after the worker's constructor returns)."""
    st = worker_state(worker)
    if st.audited:
        return
    st.audited = True
    if target_model is None or draft_model is None:
        return
    algorithm = getattr(getattr(worker, "server_args", None), "speculative_algorithm", None)
    rec = recorder()
    for f in audit_pair(target_model, draft_model,
                        algorithm=algorithm if isinstance(algorithm, str) else None):
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


def begin_step(worker_kind: str, worker, batch, audit) -> spans.StepSpan | None:
    """The step hook both workers share: audit once, skip prefill, count the step, and
    start a span for a sampled one (returns its context for `spans.end_step`)."""
    st = worker.__dict__.get(STATE_ATTR)
    if st is None or not st.audited:
        audit(worker)
    if is_prefill(batch):
        return None  # prefill: not a speculative step
    rec = STATE.recorder or recorder()
    if rec.begin_step(worker_kind):
        return spans.start_step(rec, step_attrs(worker_kind, worker, batch))
    return None


def step_attrs(worker_kind: str, worker, batch) -> dict:
    """Step-span attributes from the worker's settings and the batch (a `ScheduleBatch` or
    `ModelWorkerBatch`: `reqs` when present, else the length of `seq_lens`)."""
    reqs = getattr(batch, "reqs", None)
    return {signals.SPAN_ATTR_WORKER: worker_kind,
            signals.SPAN_ATTR_RUNTIME: signals.RUNTIME_SGLANG,
            signals.SPAN_ATTR_RUNTIME_VERSION: runtime_version("sglang"),
            signals.SPAN_ATTR_SGLANG_VERSION: runtime_version("sglang"),
            signals.SPAN_ATTR_BATCH_SIZE: len(reqs) if reqs is not None
            else int(batch.seq_lens.shape[0]),
            signals.SPAN_ATTR_NUM_STEPS: worker.speculative_num_steps,
            signals.SPAN_ATTR_TOPK: worker.topk,
            signals.SPAN_ATTR_NUM_DRAFT_TOKENS: worker.speculative_num_draft_tokens}
