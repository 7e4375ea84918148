"""Adapter for vLLM's model runners (in the worker process): the target's aux-capture
audit once both models are loaded, and draft/target token agreement.

- `load_model()` of the V1 GPU runner, the CPU runner (its subclass, with its own
  `load_model`) and the V2 GPU runner ("MRV2"): when it returns, the target
  (`runner.model`) and the draft (`runner.drafter.model`, MRV2 `runner.speculator.model`)
  are loaded and the target's aux layers set, so the pair is audited there, once.
- `_sample(logits, spec_decode_metadata)` of the V1 runner (GPU and CPU; MRV2 samples
  elsewhere and has no agreement here): on every Nth speculative step
  (`SPECTRACE_AGREEMENT_EVERY`) the target's own prediction at each draft position
  (argmax of its logits there) is compared with the draft token, on the device, before
  vLLM's rejection sampler runs; a few counts come back without blocking
  (`detectors.tokens`). Unlike the accepted tokens, this sees past the first rejection.
  The drafts are the real ones here even with async scheduling (vLLM reads them from the
  device input ids), where the scheduler only has placeholders.
"""
from __future__ import annotations

from ..detectors.tokens import compare_positions
from ..patching import WrapPoint
from ..process import STATE
from .draft_checks import capturing
from .vllm_identity import worker_recorder
from .vllm_target import audit_pair

STATE_ATTR = "_spectrace_runner"


class RunnerState:
    """What spectrace keeps on one model runner."""

    __slots__ = ("audited", "spec_steps")

    def __init__(self) -> None:
        self.audited = False
        self.spec_steps = 0


def runner_state(runner) -> RunnerState:
    st = runner.__dict__.get(STATE_ATTR)
    if st is None:
        st = runner.__dict__[STATE_ATTR] = RunnerState()
    return st


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


def _before_sample(runner, logits, meta):
    if meta is None:
        return None  # no drafts in this step
    rec = STATE.recorder or worker_recorder(getattr(runner, "vllm_config", None))
    every = rec.cfg.agreement_every
    st = runner_state(runner)
    step = st.spec_steps
    st.spec_steps = step + 1
    if not every or step % every:
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


# -- wrap points ----------------------------------------------------------------------------
_LOAD = WrapPoint("GPUModelRunner.load_model", "vllm.runner.load_model", after=_after_load_model)
GPU_RUNNER = (
    _LOAD,
    WrapPoint("GPUModelRunner._sample", "vllm.runner.sample", before=_before_sample,
              reads=("logits", "spec_decode_metadata")),
)
CPU_RUNNER = (
    WrapPoint("CPUModelRunner.load_model", "vllm.runner.load_model", after=_after_load_model),
)
GPU_RUNNER_V2 = (_LOAD,)
