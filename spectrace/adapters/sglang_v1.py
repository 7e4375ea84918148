"""Adapter for SGLang's v1 eagle worker (`sglang.srt.speculative.eagle_worker.EAGLEWorker`),
chosen by feature detection; the module exists up to SGLang 0.5.12 (removed in 0.5.16).

Same signals and span names as the v2 adapter, worker kind `EAGLEWorker`:
- step: `forward_batch_generation` (0.5.5+) or `forward_batch_speculative_generation`
  (<= 0.5.2); prefill (extend) batches are not speculative steps;
- child spans `draft`, `verify`, `forward_draft_extend_after_decode`;
- accept counts (bonus excluded): the list `verify` returns on the CPU
  (`EagleVerifyOutput.num_correct_drafts_per_req_cpu` 0.5.12, `accept_length_per_req_cpu`
  <= 0.5.8), kept by reference: O(1) per step, no device sync. SGLang cuts that list at a
  request's finish (EOS, max_new_tokens), so a request's last step counts only the drafts
  that were used; `meta_info`'s counters include the accepted drafts past the finish
  (measured on 0.5.12, partial model: 42 instead of 48 accepted for 48 request-steps).
  Reading each request's own counter instead would cost O(batch) per step.

No draft/target token agreement for v1: the target's per-position predictions (`predict`,
from `argmax(next_token_logits)`) stay local to `EagleVerifyInput.verify`; what comes out
(`accept_tokens` / `verified_id`, and `next_token_logits` sliced to `accept_indices`)
holds the accepted positions only. Recomputing the argmax before verify would repeat
SGLang's largest verify kernel. For a top-k 1 chain, per-position acceptance (which v1
reports) follows from the counts alone.
"""
from __future__ import annotations

from .. import signals
from ..families import step_cost
from ..patching import WrapPoint
from ..process import recorder
from . import sglang_worker

WORKER = signals.WORKER_V1


def _audit(worker) -> None:
    """v1 is itself the draft's TpModelWorker: `model_runner` is the draft runner."""
    target = getattr(getattr(worker, "target_worker", None), "model_runner", None)
    draft = getattr(worker, "model_runner", None)
    sglang_worker.audit_once(worker, getattr(target, "model", None),
                             getattr(draft, "model", None))


def _before_step(instance, batch):
    return sglang_worker.begin_step(WORKER, instance, batch, _audit)


def _after_verify(span, instance, result):
    out = result[1]  # EagleVerifyOutput
    counts = getattr(out, "num_correct_drafts_per_req_cpu", None)
    if counts is None:
        counts = out.accept_length_per_req_cpu
    recorder().acceptance.add(counts, instance.speculative_num_steps)


WORKER_POINTS = (
    sglang_worker.init_point("EAGLEWorker", "v1.__init__"),
    WrapPoint("EAGLEWorker.forward_batch_generation", "v1.forward_batch_generation",
              before=_before_step, reads=("batch",), cleanup=sglang_worker.end_step,
              alternatives=("forward_batch_speculative_generation",)),
    WrapPoint("EAGLEWorker.draft", "v1.draft",
              before=sglang_worker.phase_hook(signals.SPAN_DRAFT, step_cost.DRAFT),
              cleanup=sglang_worker.end_phase),
    WrapPoint("EAGLEWorker.verify", "v1.verify",
              before=sglang_worker.phase_hook(signals.SPAN_VERIFY, step_cost.VERIFY),
              after=_after_verify, cleanup=sglang_worker.end_phase),
    WrapPoint("EAGLEWorker.forward_draft_extend_after_decode", "v1.draft_extend",
              before=sglang_worker.phase_hook(signals.SPAN_DRAFT_EXTEND, step_cost.DRAFT_EXTEND),
              cleanup=sglang_worker.end_phase),
)
