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

import inspect

from .. import signals
from ..instrumentation import STATE, recorder
from ..safety import guarded_wrapper
from . import worker_common as wc

WORKER = signals.WORKER_V1
STEP_METHODS = ("forward_batch_generation", "forward_batch_speculative_generation")

_init_signature = None  # of the original EAGLEWorker.__init__, to read tp_rank by name


def install(module, patcher) -> None:
    global _init_signature
    where = module.__name__
    worker = getattr(module, "EAGLEWorker", None)
    if worker is None:
        patcher.missing.append(f"{where}.EAGLEWorker")
        return
    w = f"{where}.EAGLEWorker"
    if "__init__" in vars(worker):
        _init_signature = inspect.signature(vars(worker)["__init__"])
    patcher.wrap(worker, "__init__", guarded_wrapper(
        "v1.__init__", before=_before_init,
        after=lambda ctx, worker, args, kwargs, result: wc.after_worker_init(worker)), w)
    step = next((m for m in STEP_METHODS if m in vars(worker)), None)
    if step is None:
        patcher.missing.append(f"{w}.{' / '.join(STEP_METHODS)}")
    else:
        patcher.wrap(worker, step, guarded_wrapper(
            f"v1.{step}", before=_before_step, cleanup=wc.step_span_end), w)
    patcher.wrap(worker, "draft", guarded_wrapper(
        "v1.draft", before=wc.child_span_hook(signals.SPAN_DRAFT), cleanup=wc.child_span_end), w)
    patcher.wrap(worker, "verify", guarded_wrapper(
        "v1.verify", before=_before_verify, after=_after_verify, cleanup=_end_verify), w)
    patcher.wrap(worker, "forward_draft_extend_after_decode", guarded_wrapper(
        "v1.draft_extend", before=wc.child_span_hook(signals.SPAN_DRAFT_EXTEND),
        cleanup=wc.child_span_end), w)


# -- hooks ------------------------------------------------------------------------------
def _before_init(instance, args, kwargs):
    named = kwargs
    if _init_signature is not None:
        named = wc.named_args(_init_signature, instance, args, kwargs)
    wc.start_worker((), named)


def _audit(worker) -> None:
    """v1 is itself the draft's TpModelWorker: `model_runner` is the draft runner."""
    target = getattr(getattr(worker, "target_worker", None), "model_runner", None)
    draft = getattr(worker, "model_runner", None)
    wc.audit_once(worker, getattr(target, "model", None), getattr(draft, "model", None))




def _before_step(instance, args, kwargs):
    return wc.begin_step(WORKER, instance, args[0] if args else kwargs["batch"], _audit)


_before_verify = wc.child_span_hook(signals.SPAN_VERIFY)


def _end_verify(span) -> None:
    span.end()


def _after_verify(span, instance, args, kwargs, result):
    out = result[1]  # EagleVerifyOutput
    counts = getattr(out, "num_correct_drafts_per_req_cpu", None)
    if counts is None:
        counts = out.accept_length_per_req_cpu
    (STATE.recorder or recorder()).acceptance.add(counts, instance.speculative_num_steps)
