"""Adapter for SGLang's v2 eagle worker (`sglang.srt.speculative.eagle_worker_v2`:
`EAGLEWorkerV2` + `EagleDraftWorker`), SGLang 0.5.5 - 0.5.23, chosen by feature detection.

Accept counts: read where SGLang already has them on the CPU, `on_verify_complete_cpu`
(0.5.12+); on 0.5.5 - 0.5.8 the scheduler's `_resolve_spec_overlap_token_ids` (see
`install_scheduler`). Draft/target agreement is computed on the device in `verify`.
"""
from __future__ import annotations

from .. import signals
from ..instrumentation import STATE, recorder
from ..safety import guarded_wrapper
from . import worker_common as wc

WORKER = signals.WORKER_V2


def install(module, patcher) -> None:
    where = module.__name__
    worker = getattr(module, "EAGLEWorkerV2", None)
    if worker is None:
        patcher.missing.append(f"{where}.EAGLEWorkerV2")
        return
    w = f"{where}.EAGLEWorkerV2"
    patcher.wrap(worker, "__init__", guarded_wrapper(
        "v2.__init__", before=_before_init,
        after=lambda ctx, worker, args, kwargs, result: wc.after_worker_init(worker)), w)
    patcher.wrap(worker, "forward_batch_generation", guarded_wrapper(
        "v2.forward_batch_generation", before=_before_step, cleanup=wc.step_span_end), w)
    patcher.wrap(worker, "verify", guarded_wrapper(
        "v2.verify", before=_before_verify, after=_after_verify,
        cleanup=_end_verify, after_needs_ctx=True), w)
    if "on_verify_complete_cpu" in vars(worker):
        patcher.wrap(worker, "on_verify_complete_cpu", guarded_wrapper(
            "v2.on_verify_complete_cpu", before=_before_verify_complete_cpu), w)
    draft = getattr(module, "EagleDraftWorker", None)
    if draft is None:
        patcher.missing.append(f"{where}.EagleDraftWorker")
        return
    d = f"{where}.EagleDraftWorker"
    patcher.wrap(draft, "draft", guarded_wrapper(
        "v2.draft", before=wc.child_span_hook(signals.SPAN_DRAFT), cleanup=wc.child_span_end), d)
    patcher.wrap(draft, "_draft_extend_for_decode", guarded_wrapper(
        "v2.draft_extend", before=wc.child_span_hook(signals.SPAN_DRAFT_EXTEND),
        cleanup=wc.child_span_end), d)


def install_verify_common(module, patcher) -> None:
    """0.5.16+: for trees (top-k > 1) SGLang compacts the target's predictions to the
    accepted path inside `verify` (`_finalize_accept_tree_path`, looked up by name in its
    module at call time); its `predict` argument still holds every tree node's prediction,
    which the top-1-path agreement needs."""
    if "_finalize_accept_tree_path" not in vars(module):
        return
    patcher.wrap(module, "_finalize_accept_tree_path", guarded_wrapper(
        "v2.tree_agreement", before=_before_finalize_tree), module.__name__)


def install_scheduler(module, patcher) -> None:
    """0.5.5 - 0.5.8: accept counts reach the CPU in the scheduler's output processor."""
    mixin = getattr(module, "SchedulerOutputProcessorMixin", None)
    if mixin is None or "_resolve_spec_overlap_token_ids" not in vars(mixin):
        return  # newer SGLang: on_verify_complete_cpu is used instead
    try:
        from sglang.srt.speculative.eagle_worker_v2 import EAGLEWorkerV2
        if "on_verify_complete_cpu" in vars(EAGLEWorkerV2):
            return
    except ImportError:
        pass
    patcher.wrap(mixin, "_resolve_spec_overlap_token_ids", guarded_wrapper(
        "v2.resolve_spec_overlap", after=_after_resolve_overlap),
        f"{module.__name__}.SchedulerOutputProcessorMixin")


# -- hooks ------------------------------------------------------------------------------
def _before_init(instance, args, kwargs):
    wc.start_worker(args, kwargs)


def _audit(worker) -> None:
    target = getattr(getattr(worker, "target_worker", None), "model_runner", None)
    draft = getattr(worker, "draft_runner", None) or getattr(
        getattr(worker, "draft_worker", None), "draft_runner", None)
    wc.audit_once(worker, getattr(target, "model", None), getattr(draft, "model", None))


def _batch(args, kwargs):
    if args:
        return args[0]
    return kwargs.get("batch", kwargs.get("model_worker_batch"))


def _before_step(instance, args, kwargs):
    return wc.begin_step(WORKER, instance, _batch(args, kwargs), _audit)


def _before_verify(instance, args, kwargs):
    """ctx: None, or (verify span or None, the draft tokens to compare or None)."""
    rec = STATE.recorder or recorder()
    span = None if rec.step_span is None else rec.tel.tracer.start_span(signals.SPAN_VERIFY)
    every = rec.cfg.agreement_every
    if every and rec.steps.get(WORKER, 0) % every == 0:
        if instance.topk == 1:
            return span, _batch(args, kwargs).spec_info.draft_token
        _tree_due[:] = [(instance.speculative_num_steps, instance.speculative_num_draft_tokens)]
    return None if span is None else (span, None)


_tree_due: list = []  # at most one (steps, draft tokens): a tree verify whose agreement is due


def _before_finalize_tree(module, args, kwargs):
    if not _tree_due:
        return
    steps, n = _tree_due.pop()
    batch, predict, bs = args[0], args[3], args[5]
    if bs == 0:
        return
    info = batch.spec_info
    counts, event = wc.compare_tree_top1_path(info.draft_token, predict,
                                              info.retrieve_next_token, bs, n, steps)
    recorder().agreement.add(counts, event, bs)


def _after_verify(ctx, instance, args, kwargs, result):
    if ctx is None or ctx[1] is None:
        return
    bs = int(result.accept_lens.shape[0])
    if bs == 0:
        return
    counts, event = wc.compare_chain_tokens(ctx[1], result.next_token_ids, bs,
                                            instance.speculative_num_draft_tokens)
    recorder().agreement.add(counts, event, bs)


def _end_verify(ctx) -> None:
    if ctx[0] is not None:
        ctx[0].end()


def _before_verify_complete_cpu(instance, args, kwargs):
    counts = args[0] if args else kwargs["num_correct_drafts_per_req"]
    (STATE.recorder or recorder()).acceptance.add(counts, instance.speculative_num_steps)


def _after_resolve_overlap(ctx, scheduler, args, kwargs, result):
    res = args[0] if args else kwargs["result"]
    counts = getattr(res, "accept_length_per_req_cpu", None)
    if counts is None:  # 0.5.5 sets only accept_lens (asserted to be on the CPU here)
        counts = [x - 1 for x in res.accept_lens.tolist()]
    worker = getattr(scheduler, "draft_worker", None)
    steps = int(getattr(worker, "speculative_num_steps", 0) or 0)
    recorder().acceptance.add(counts, steps)
