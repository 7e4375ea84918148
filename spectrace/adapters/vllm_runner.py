"""Adapter for vLLM's model runners (in the worker process): the target's aux-capture
audit once both models are loaded, and draft/target token agreement.

- `load_model()` of the V1 GPU runner, the CPU runner (its subclass, with its own
  `load_model`) and the V2 GPU runner ("MRV2"): when it returns, the target
  (`runner.model`) and the draft (`runner.drafter.model`, MRV2 `runner.speculator.model`)
  are loaded and the target's aux layers set, so the pair is audited there, once.
- `_sample(logits, spec_decode_metadata)` of the V1 runner (GPU and CPU; MRV2 samples
  elsewhere: its agreement and step cost are `vllm_mrv2`'s): on every Nth speculative step
  (`SPECTRACE_AGREEMENT_EVERY`) the target's own prediction at each draft position
  (argmax of its logits there) is compared with the draft token, on the device, before
  vLLM's rejection sampler runs; a few counts come back without blocking
  (`rules.tokens`). Unlike the accepted tokens, this sees past the first rejection.
  The drafts are the real ones here even with async scheduling (vLLM reads them from the
  device input ids), where the scheduler only has placeholders.
- Step cost (`step_cost`, every `SPECTRACE_STEP_COST_EVERY`th speculative step) on the V1
  runner (GPU and CPU: the CPU runner inherits these methods). vLLM splits a step in two
  calls the worker always makes in turn (`execute_model` refuses to run before
  `sample_tokens` has consumed its state): `execute_model(scheduler_output)` prepares the
  inputs, runs the target on every scheduled token (the drafts to verify included) and
  computes its logits; `sample_tokens` samples (the rejection sampler), drafts the next
  step's tokens (`propose_draft_token_ids`, which calls `self.drafter.propose`) and does
  the bookkeeping. So a measured step is `step` (from `execute_model`'s start to
  `sample_tokens`' end), `verify` (`execute_model`), within it `target_forward`
  (`_model_forward`, the model's own call, timed against the step's scheduled tokens:
  the cost model's forward), `draft` (`propose_draft_token_ids`),
  and, on the CPU, `between` (from `sample_tokens`' end to the next speculative
  `execute_model`: the EngineCore's bookkeeping and scheduling); there is no separate
  draft-extend phase (the proposer's first, target-fed forward is inside `propose`). A
  step without drafts to verify (`scheduled_spec_decode_tokens` empty: prefill only, or
  the first decode after it) is not measured. Batch bucket: the requests scheduled; K:
  the runner's `num_spec_tokens` (`num_speculative_tokens`).
"""
from __future__ import annotations

from ..rules.tokens import compare_positions
from ..families import step_cost
from ..objstate import ATTR, state_of
from ..patching import WrapPoint
from ..process import STATE
from .draft_checks import capturing
from .vllm_identity import worker_recorder
from .vllm_target import audit_pair


class RunnerState:
    """What spectrace keeps on one model runner (`objstate`)."""

    # speculative_num_steps: the runner's K, as `StepCosts.end` reads it off the
    # "worker" a step cost is measured for (SGLang's workers have their own); tokens: the
    # measured step's scheduled tokens, which its target forward processes
    __slots__ = ("audited", "spec_steps", "speculative_num_steps", "tokens")

    def __init__(self) -> None:
        self.audited = False
        self.spec_steps = 0
        self.speculative_num_steps = 0
        self.tokens = 0


def runner_state(runner) -> RunnerState:
    return state_of(runner, RunnerState)


def _unwrap(model):
    """The model itself, not vLLM's CUDA-graph wrapper around it."""
    unwrap = getattr(model, "unwrap", None)
    return unwrap() if callable(unwrap) else model


def _after_load_model(ctx, runner, result) -> None:
    drafter = getattr(runner, "drafter", None) or getattr(runner, "speculator", None)
    draft = getattr(drafter, "model", None)
    st = runner_state(runner)
    if draft is None or st.audited:
        return  # no EAGLE-style draft on this rank, or audited already
    st.audited = True
    get_model = getattr(runner, "get_model", None)
    target = _unwrap(get_model() if callable(get_model) else runner.model)
    method = getattr(getattr(runner, "speculative_config", None), "method", None)
    rec = worker_recorder(getattr(runner, "vllm_config", None))
    for f in audit_pair(target, _unwrap(draft), method if isinstance(method, str) else None):
        rec.finding(f)


def agreement_due(rec, owner) -> bool:
    """Count a step with drafts to verify on `owner` (a runner; MRV2's rejection sampler);
    True on every Nth (`SPECTRACE_AGREEMENT_EVERY`), when its drafts are compared."""
    every = rec.cfg.agreement_every
    st = owner.__dict__.get(ATTR) or runner_state(owner)
    step = st.spec_steps
    st.spec_steps = step + 1
    return bool(every) and not step % every


def _before_sample(runner, logits, meta):
    if meta is None:
        return None  # no drafts in this step
    rec = STATE.recorder or worker_recorder(getattr(runner, "vllm_config", None))
    if not agreement_due(rec, runner):
        return None
    per_request = meta.num_draft_tokens
    k, bs = per_request[0], len(per_request)
    if not k or per_request.count(k) != bs:
        return None  # requests with different draft counts: not compared this step
    if logits.is_cuda and capturing():
        return None
    predicted = logits.argmax(dim=-1)[meta.target_logits_indices]
    counts, event = compare_positions(meta.draft_token_ids.view(bs, k), predicted.view(bs, k))
    rec.agreement.add(counts, event, bs)
    return None


# -- step cost -------------------------------------------------------------------------------
def _before_execute(runner, scheduler_output):
    """Start of a step (V1 runner: K is its `num_spec_tokens`)."""
    return start_step(runner, scheduler_output, "num_spec_tokens")


def start_step(runner, scheduler_output, k_attr: str):
    """Start of a step: count it towards the next measured one (steps with drafts to verify
    only) and start its `step` and `verify` phases when it is measured (one clock start
    for both; K: the runner's attribute `k_attr`, read on a measured step only). Returns
    the verify phase in flight, or None. Both model runners' `execute_model` (the V2
    runner's: `vllm_mrv2`)."""
    rec = STATE.recorder or worker_recorder(getattr(runner, "vllm_config", None))
    costs = rec.cost
    speculative = bool(scheduler_output.scheduled_spec_decode_tokens)
    if rec.inflight.last_end is not None:  # a measured CPU step before this one
        costs.step_starts(speculative)  # not speculative: no between-steps interval
    # a short step without drafts: its forward is a plain one (`_before_model_forward`)
    rec.inflight.plain = None if speculative else _plain_load(scheduler_output)
    if not speculative:
        return None
    if not costs.due():
        costs.abandon()  # a measured step that never ended (it raised) ends here
        return None
    st = runner_state(runner)
    st.speculative_num_steps = getattr(runner, k_attr)
    st.tokens = scheduler_output.total_num_scheduled_tokens
    cost = costs.start(st, len(scheduler_output.num_scheduled_tokens),
                       runner.device.type == "cuda")
    return step_cost.PhaseCost(None, cost.started, step_cost.slot(
        step_cost.VERIFY, cost.bucket, st.speculative_num_steps))


def _plain_load(scheduler_output) -> tuple[int, int, int] | None:
    """(tokens, context, requests) of a step without drafts to verify (a prefill, or the
    first decode after it) when it is short enough to be a point of the forward's cost
    curve (`step_cost.PLAIN_FORWARD_TOKENS`); the context is what its requests had computed
    before it (host-side lists, read only for such a step: at most that many requests)."""
    tokens = scheduler_output.total_num_scheduled_tokens
    if not 0 < tokens <= step_cost.PLAIN_FORWARD_TOKENS:
        return None
    context = sum(r.num_computed_tokens for r in scheduler_output.scheduled_new_reqs)
    context += sum(scheduler_output.scheduled_cached_reqs.num_computed_tokens)
    return tokens, context, len(scheduler_output.num_scheduled_tokens)


def _after_execute(ctx, runner, result) -> None:
    """The target's pass is over: `verify`. vLLM returns None when `sample_tokens` follows;
    anything else (a pipeline stage's intermediate tensors, an empty output) ends the step
    here, unmeasured."""
    rec = STATE.recorder
    if rec is None or rec.inflight.cost is None:  # not a measured step
        return
    if result is not None:
        rec.cost.abandon()
        return
    rec.cost.stop_phase(ctx)


def _before_phase(phase: int):
    def before(runner):
        rec = STATE.recorder
        return None if rec is None else rec.cost.start_phase(phase)
    return before


def _after_phase(ctx, runner, result) -> None:
    rec = STATE.recorder
    if rec is not None:
        rec.cost.stop_phase(ctx)


def _before_model_forward(runner):
    """The target's forward (`_model_forward`, inside `execute_model`) of a measured step:
    timed against the step's scheduled tokens (its drafts included); of a short step
    without drafts (`_plain_load`): timed as a plain forward (issue 49)."""
    rec = STATE.recorder
    if rec is None:
        return None
    cost = rec.inflight.cost
    if cost is not None:
        return rec.cost.start_forward(cost.worker.tokens)
    plain = rec.inflight.plain
    if plain is None:
        return None
    rec.inflight.plain = None
    return rec.cost.start_plain_forward(*plain, runner.device.type == "cuda")


def _after_model_forward(ctx, runner, result) -> None:
    rec = STATE.recorder
    if rec is None:
        return
    if isinstance(ctx, step_cost.PlainForward):
        rec.cost.stop_plain_forward(ctx)
    else:
        rec.cost.stop_forward(ctx)


def _before_sample_tokens(runner):
    rec = STATE.recorder
    return None if rec is None else rec.inflight.cost


def _after_sample_tokens(cost, runner, result) -> None:
    """The measured step is over (`step`, and on the CPU when it ended)."""
    rec = STATE.recorder
    if rec is not None and rec.inflight.cost is cost:
        rec.cost.end(cost)


# -- wrap points ----------------------------------------------------------------------------
_LOAD = WrapPoint("GPUModelRunner.load_model", "vllm.runner.load_model", after=_after_load_model)
GPU_RUNNER = (
    _LOAD,
    WrapPoint("GPUModelRunner._sample", "vllm.runner.sample", before=_before_sample,
              reads=("logits", "spec_decode_metadata")),
    # step cost: a step is execute_model then sample_tokens (see the module's docstring)
    WrapPoint("GPUModelRunner.execute_model", "vllm.runner.execute_model",
              before=_before_execute, after=_after_execute, after_needs_ctx=True,
              reads=("scheduler_output",)),
    WrapPoint("GPUModelRunner._model_forward", "vllm.runner.model_forward",
              before=_before_model_forward, after=_after_model_forward, after_needs_ctx=True),
    WrapPoint("GPUModelRunner.propose_draft_token_ids", "vllm.runner.propose_draft",
              before=_before_phase(step_cost.DRAFT), after=_after_phase, after_needs_ctx=True),
    WrapPoint("GPUModelRunner.sample_tokens", "vllm.runner.sample_tokens",
              before=_before_sample_tokens, after=_after_sample_tokens, after_needs_ctx=True),
)
CPU_RUNNER = (
    WrapPoint("CPUModelRunner.load_model", "vllm.runner.load_model", after=_after_load_model),
)
