"""Adapter for vLLM's V2 model runner ("MRV2", `vllm/v1/worker/gpu/`, in the worker
process): step cost and draft/target token agreement, plus the aux audit its `load_model`
shares with the V1 runner (`vllm_runner`). MRV2 is vLLM's GPU default for dense targets
from 0.26 and for every target from 0.29 (`VLLM_USE_V2_MODEL_RUNNER=1|0` forces it either
way); vLLM's CPU build runs it too (its `v1/worker/cpu/model_runner.py` `CPUModelRunner`
subclasses it and overrides none of the methods below). docs/vllm-versions.md has it
release by release.

- Step cost. A step is the two calls the worker makes in turn, as on the V1 runner (the
  same hooks, `vllm_runner.start_step`): `execute_model(scheduler_output)` prepares the
  inputs and runs the target on every scheduled token, inline (also for its warm-up,
  `dummy_run=True`, whose scheduler output has no drafts: not counted); `sample_tokens`
  computes the logits and samples (`self.sample`: the rejection sampler), then drafts
  inline, `self.speculator.propose(...)`, then does the bookkeeping. So a measured step is
  `step` (`execute_model`'s start to `sample_tokens`' end), `verify` (`execute_model`),
  `draft` (the speculator's `propose`, wrapped on each speculator class that defines it,
  one table per module below), and on the CPU `between_steps`. K: the runner's
  `num_speculative_steps`.
  vLLM's own step timing (`async_utils.StepTimingCollector`, 0.28+) records CUDA events
  only inside `collect()`, which vLLM opens once, while it captures CUDA graphs for
  adaptive verification, and closes with a synchronize of its own: there are no samples
  of serving steps to read, so spectrace times the same boundaries with its own clocks.
  Its `forward_start()` is still called on every step, right before the target runs
  (eagerly, piecewise or as a full CUDA-graph replay: a Python call either way), so a
  measured step's `target_forward` runs from there to `execute_model`'s end, against the
  step's scheduled tokens: the cost model's forward, as `_model_forward` on the V1
  runner. 0.26 and 0.27 have no collector: no forward, and the speed-up is a bound.
- Agreement. `RejectionSampler.__call__(logits, input_batch)` gets the target's logits at
  `input_batch.logits_indices`, each request's K + 1 rows in order; the verify input at
  those rows (`input_batch.input_ids[logits_indices]`, where vLLM itself reads the drafts)
  is the last sampled token then the K drafts. On every Nth step that verifies drafts
  (`SPECTRACE_AGREEMENT_EVERY`), when every request has the same K (one bonus row each),
  the target's argmax at row k is compared with the draft at row k + 1, on the device,
  before the rejection sampler runs; a few counts come back without blocking
  (`rules.tokens`).
"""
from __future__ import annotations

from ..families import step_cost
from ..rules.tokens import compare_chain_tokens
from ..patching import WrapPoint
from ..process import STATE
from .draft_checks import capturing
from .vllm_runner import (
    _LOAD, _after_execute, _after_phase, _after_sample_tokens, _before_phase,
    _before_sample_tokens, agreement_due, start_step,
)


def _reported_to():
    """The Recorder whose agreement totals this module adds to (None before the worker's
    first speculative step: `execute_model` creates it). The one place this module
    reaches the Recorder; its step cost goes through `vllm_runner`'s hooks."""
    return STATE.recorder


def _before_execute(runner, scheduler_output):
    """Start of a step (K: the runner's `num_speculative_steps`)."""
    return start_step(runner, scheduler_output, "num_speculative_steps")


def _before_forward_start(collector):
    """The target's forward of a measured step starts (`StepTimingCollector.forward_start`,
    called by `execute_model` right before the model runs); `_after_execute` ends it."""
    rec = STATE.recorder
    cost = None if rec is None else rec.inflight.cost
    if cost is not None and cost.forward is None:
        cost.forward = rec.cost.start_forward(cost.worker.tokens)
    return None


def _after_execute_mrv2(ctx, runner, result) -> None:
    """The target's forward (when `forward_start` began one), then `verify`, are over."""
    rec = STATE.recorder
    cost = None if rec is None else rec.inflight.cost
    if cost is not None and cost.forward is not None:
        forward, cost.forward = cost.forward, None
        if result is None:  # else the step ends here, unmeasured (`_after_execute`)
            rec.cost.stop_forward(forward)
    _after_execute(ctx, runner, result)


def _before_rejection_sample(sampler, logits, input_batch):
    """Agreement of this step's drafts with the target's argmax, every Nth step that
    verifies drafts (the counter is kept on the sampler)."""
    rec = _reported_to()
    if rec is None or not agreement_due(rec, sampler):
        return None
    # numpy, on the host (0.22+); None: no drafts
    per_request = getattr(input_batch, "num_draft_tokens_per_req", None)
    bs = input_batch.num_reqs
    if per_request is None or not bs:
        return None
    k = int(per_request[0])
    n = k + 1
    rows = input_batch.logits_indices
    # one bonus row each and the same K everywhere; adaptive verification compacts rows
    if (not k or input_batch.num_draft_tokens != bs * k or logits.shape[0] != bs * n
            or rows.shape[0] != bs * n):
        return None
    if logits.is_cuda and capturing():
        return None
    drafts = input_batch.input_ids[rows]
    counts, event = compare_chain_tokens(drafts, logits.argmax(dim=-1), bs, n)
    rec.agreement.add(counts, event, bs)
    return None


# -- wrap points ----------------------------------------------------------------------------
RUNNER = (
    _LOAD,
    # step cost: a step is execute_model then sample_tokens (see the module's docstring)
    WrapPoint("GPUModelRunner.execute_model", "vllm.mrv2.execute_model",
              before=_before_execute, after=_after_execute_mrv2, after_needs_ctx=True,
              reads=("scheduler_output",)),
    WrapPoint("GPUModelRunner.sample_tokens", "vllm.mrv2.sample_tokens",
              before=_before_sample_tokens, after=_after_sample_tokens, after_needs_ctx=True),
)

# the target's forward (0.28+): from vLLM's own forward-start mark to execute_model's end
STEP_TIMING = (
    WrapPoint("StepTimingCollector.forward_start", "vllm.mrv2.forward_start",
              before=_before_forward_start, required=False),  # absent in 0.26, 0.27
)

REJECTION_SAMPLER = (
    WrapPoint("RejectionSampler.__call__", "vllm.mrv2.rejection_sampler",
              before=_before_rejection_sample, reads=("logits", "input_batch")),
)


def _draft_phase(cls: str) -> tuple[WrapPoint, ...]:
    """The `draft` phase of a measured step: `cls.propose` (its subclasses inherit it)."""
    return (WrapPoint(f"{cls}.propose", "vllm.mrv2.propose", before=_before_phase(
        step_cost.DRAFT), after=_after_phase, after_needs_ctx=True),)


# one table per speculator module (`ADAPTERS`: which module, which releases; all of
# them: tests/test_vllm_wrap_points.py)
AUTOREGRESSIVE = _draft_phase("AutoRegressiveSpeculator")
TARGET_DEPENDENT_AR = _draft_phase("TargetDependentARSpeculator")
DFLASH = _draft_phase("DFlashSpeculator")
MULTI_MODULE_MTP = _draft_phase("MultiModuleMTPSpeculator")
EXTRACT_HIDDEN_STATES = _draft_phase("ExtractHiddenStatesSpeculator")
PLAIN_DRAFT_MODEL = _draft_phase("PlainDraftModelSpeculator")
STANDALONE_AR = _draft_phase("StandaloneARSpeculator")
NGRAM = _draft_phase("NgramGPUSpeculator")
