"""Adapter for SGLang's v2 eagle worker (`sglang.srt.speculative.eagle_worker_v2`:
`EAGLEWorkerV2`), SGLang 0.5.5 - 0.5.23, chosen by feature detection.

Step cost and spans: the step's phases are told apart by verify's boundaries (the draft
runs from the step's start until verify starts; the draft-extend from verify's end to the
step's end), so the draft worker's `draft` and `_draft_extend_for_decode` are not wrapped:
two wrapped calls fewer in every step, and the same phases for every draft worker class.

Accept counts: read where SGLang already has them on the CPU, `on_verify_complete_cpu`
(0.5.12+); on 0.5.5 - 0.5.8 the scheduler's `_resolve_spec_overlap_token_ids`
(`SCHEDULER`). Draft/target agreement is computed on the device in `verify`; for trees
(0.5.16+) from the predictions SGLang passes to `_finalize_accept_tree_path`
(`VERIFY_COMMON`).

Context length: the scheduler resolves each verified batch in `_resolve_spec_v2_tokens`
(0.5.23; `RESULT_PROCESSOR`), which calls `on_verify_complete_cpu` with that batch's
counts; its `seq_lens_cpu` (SGLang's host copy of the sequence lengths, rebound to a new
tensor every step, absent where the attention backend opts out of it) is handed to that
call's hook through the step in flight (`StepInFlight.keep_seq_lens`, taken once) and kept
by reference beside the counts, bucketed at collection time. Batch size needs nothing
more: it is the number of counts a step hands over. CUDA graph: the result being resolved
is the one verify returned (`GenerationBatchResult`), whose `can_run_cuda_graph` is a plain
bool the target's model runner set on the CPU; it travels with the lengths.
"""
from __future__ import annotations

from typing import NamedTuple

from .. import signals
from ..rules.tokens import compare_chain_tokens, compare_tree_top1_path
from ..families import step_cost
from ..families.requests import FinishedRequest
from ..patching import WrapPoint
from ..process import STATE, recorder
from . import sglang_worker

WORKER = signals.WORKER_V2


def _scheduler_has_counts(module) -> bool:
    """0.5.5 - 0.5.8: the counts reach the CPU in the scheduler's output processor (newer
    releases hand them to `EAGLEWorkerV2.on_verify_complete_cpu` instead)."""
    try:
        from sglang.srt.speculative.eagle_worker_v2 import EAGLEWorkerV2
    except ImportError:
        return True
    return "on_verify_complete_cpu" not in vars(EAGLEWorkerV2)


# -- hooks ------------------------------------------------------------------------------
def _audit(worker) -> None:
    target = getattr(getattr(worker, "target_worker", None), "model_runner", None)
    draft = getattr(worker, "draft_runner", None) or getattr(
        getattr(worker, "draft_worker", None), "draft_runner", None)
    sglang_worker.audit_once(worker, getattr(target, "model", None),
                             getattr(draft, "model", None))


# The batch a worker's step and verify take (`model_worker_batch` in older releases).
BATCH = ("batch", "model_worker_batch")


def _before_step(instance, batch):
    return sglang_worker.begin_step(WORKER, instance, batch, _audit)


class TreeDue(NamedTuple):
    """A tree verify whose agreement is due (read by the `_finalize_accept_tree_path` hook)."""

    num_steps: int
    num_draft_tokens: int


class VerifyContext(NamedTuple):
    """What a verify call's hooks pass each other (its `before`, `after` and `cleanup`)."""

    span: object | None          # the verify span, under a sampled step
    draft_tokens: object | None  # a chain agreement is due: the draft tokens to compare
    tree_due: bool               # a tree agreement is due (`StepInFlight.tree_due`)
    timed: bool                  # under a measured step: verify's end is a phase boundary


def _before_resolve_v2(processor, result, batch) -> None:
    """The sequence lengths of the batch being resolved, whether its verify ran as a
    CUDA-graph replay and how many tokens it verified per request, until its
    `on_verify_complete_cpu` takes them (SGLang's scheduler resolves one batch at a time,
    in one thread; 0.5.16 and 0.5.23 call it from every `_resolve_spec_v2_tokens`, so the
    next resolve overwrites any a failed call left). One token per request is a step
    adaptive speculation ran with K = 0 (`_build_trivial_verify_input`: no draft), which
    SGLang still counts in each request's `spec_verify_ct`: its requests are noted to be
    taken off when they finish."""
    rec = STATE.recorder or recorder()
    width = getattr(result, "speculative_num_draft_tokens", None)
    rec.inflight.keep_seq_lens(getattr(batch, "seq_lens_cpu", None),
                               getattr(result, "can_run_cuda_graph", None), width)
    if width == 1:
        rec.requests.no_draft(batch.reqs)


def verify_hook(kind: str, trees: bool = True):
    """The `before` hook of an EAGLE-style verify (EAGLEWorkerV2's; MultiLayerEagleWorkerV2's,
    which calls the same `run_eagle_verify`), and the boundaries of the step's phases:
    what ran before verify in the step is the draft, what runs after it the draft-extend
    (so the draft worker's own methods need no wrap points; `StepCosts.boundary`,
    `Steps.verify_starts`). And the agreement every `agreement_every`th step counted under
    `kind`; `trees`: its verify compacts a tree through `_finalize_accept_tree_path`
    (multi-layer EAGLE's does not: chains only)."""
    def before(instance, batch) -> VerifyContext | None:
        rec = STATE.recorder or recorder()  # per step: no call when it exists
        inflight = rec.inflight
        timed = inflight.cost is not None  # a measured step (`StepCosts.measuring`)
        if timed:
            rec.cost.boundary(step_cost.DRAFT)
        steps = rec.steps
        span = None if inflight.span is None else steps.verify_starts()
        every = rec.cfg.agreement_every
        if every and steps.counts.get(kind, 0) % every == 0:
            if instance.topk == 1:
                return VerifyContext(span, batch.spec_info.draft_token, False, timed)
            if trees:
                inflight.due_tree(TreeDue(instance.speculative_num_steps,
                                          instance.speculative_num_draft_tokens))
                return VerifyContext(span, None, True, timed)
        if span is None and not timed:
            return None
        return VerifyContext(span, None, False, timed)
    return before


_before_verify = verify_hook(WORKER)


def _after_verify(ctx: VerifyContext, instance, result) -> None:
    if ctx.draft_tokens is None:
        return
    bs = int(result.accept_lens.shape[0])
    if bs == 0:
        return
    counts, event = compare_chain_tokens(ctx.draft_tokens, result.next_token_ids, bs,
                                         instance.speculative_num_draft_tokens)
    recorder().agreement.add(counts, event, bs)


def _end_verify(ctx: VerifyContext) -> None:
    rec = STATE.recorder
    if rec is None:
        return
    if ctx.tree_due:
        rec.inflight.take_tree()  # not taken inside verify (no tree compacted): clear it
    if ctx.timed:
        rec.cost.boundary(step_cost.VERIFY)
    if ctx.span is not None:
        rec.steps.verify_ends(ctx.span)


def _before_finalize_tree(module, batch, predict, bs):
    rec = STATE.recorder
    due = None if rec is None else rec.inflight.take_tree()
    if due is None:
        return
    if bs == 0:
        return
    info = batch.spec_info
    counts, event = compare_tree_top1_path(info.draft_token, predict, info.retrieve_next_token,
                                           bs, due.num_draft_tokens, due.num_steps)
    recorder().agreement.add(counts, event, bs)


def _before_verify_complete_cpu(instance, counts):
    """The step's K is the one its own verify ran with: the result's tokens per request
    less one for a chain (adaptive speculation is top-k 1 only; with overlap scheduling
    the worker's `speculative_num_steps` is already the next batch's here), else the
    worker's. K = 0 (`candidate_steps` [0] for this batch size: a plain decode step) is
    counted as steps with no draft, never as request-steps (`add_no_draft`)."""
    rec = STATE.recorder or recorder()
    width = rec.inflight.width
    lens, graphed = rec.inflight.take_seq_lens()
    chain = getattr(instance, "topk", 0) == 1
    steps = (width - 1 if chain and isinstance(width, int) and width > 0
             else instance.speculative_num_steps)
    if steps:
        rec.acceptance.add(counts, steps, lens, graphed)
    else:
        rec.acceptance.add_no_draft(counts)


def _before_resolve_overlap(scheduler, res):
    return res  # the result object whose counts the call resolves, for the after hook


def _after_resolve_overlap(res, scheduler, returned) -> None:
    counts = getattr(res, "accept_length_per_req_cpu", None)
    if counts is None:  # 0.5.5 sets only accept_lens (asserted to be on the CPU here)
        counts = [x - 1 for x in res.accept_lens.tolist()]
    worker = getattr(scheduler, "draft_worker", None)
    steps = int(getattr(worker, "speculative_num_steps", 0) or 0)
    recorder().acceptance.add(counts, steps)


# -- wrap points ----------------------------------------------------------------------------
WORKER_POINTS = (
    sglang_worker.init_point("EAGLEWorkerV2", "v2.__init__"),
    WrapPoint("EAGLEWorkerV2.forward_batch_generation", "v2.forward_batch_generation",
              before=_before_step, reads=(BATCH,), cleanup=sglang_worker.end_step),
    WrapPoint("EAGLEWorkerV2.verify", "v2.verify", before=_before_verify, reads=(BATCH,),
              after=_after_verify, cleanup=_end_verify, after_needs_ctx=True),
    WrapPoint("EAGLEWorkerV2.on_verify_complete_cpu", "v2.on_verify_complete_cpu",
              before=_before_verify_complete_cpu, reads=("num_correct_drafts_per_req",),
              required=False),
)

# 0.5.16+: for trees (top-k > 1) SGLang compacts the target's predictions to the accepted
# path inside `verify` (`_finalize_accept_tree_path`, looked up by name in its module at
# call time); its `predict` argument still holds every tree node's prediction.
VERIFY_COMMON = (
    WrapPoint("_finalize_accept_tree_path", "v2.tree_agreement", before=_before_finalize_tree,
              reads=("batch", "predict", "bs"), required=False),
)

SCHEDULER = (
    WrapPoint("SchedulerOutputProcessorMixin._resolve_spec_overlap_token_ids",
              "v2.resolve_spec_overlap", before=_before_resolve_overlap, reads=("result",),
              after=_after_resolve_overlap, after_needs_ctx=True, required=False,
              when=_scheduler_has_counts),
)

# SPECTRACE_REQUEST_LABEL -> the `Req` attribute holding it (what the HTTP request sets:
# `routing_key` also from the `x-smg-routing-key` header; `lora` is the loaded adapter's
# uuid, `Req.lora_id`, not its name)
LABEL_FIELDS = {"routing_key": "routing_key", "extra_key": "extra_key",
                "priority": "priority", "lora": "lora_id"}


def _before_release(processor, req) -> None:
    """A finished request (`_prepare_kv_cache_release`, once per finished request): its
    own speculative counters, as SGLang reports them in meta_info (`spec_verify_ct`,
    `cached_tokens`), its prompt's length, its grammar's kind and its trace context."""
    steps = getattr(req, "spec_verify_ct", 0)
    if not steps:
        return
    rec = recorder()
    idle = rec.requests.take_no_draft(req.rid)  # its K = 0 steps (`_before_resolve_v2`)
    hist = getattr(req, "spec_correct_drafts_histogram", None)
    if idle:
        steps -= idle
        if hist:  # SGLang filed each under 0 correct drafts
            hist = [max(hist[0] - idle, 0)] + list(hist[1:])
        if steps <= 0:
            return  # it never verified a draft token
    params = getattr(req, "sampling_params", None)
    label = rec.cfg.request_label
    rec.requests.finished(FinishedRequest(
        req.rid, steps, req.spec_num_correct_drafts, hist,
        getattr(params, "temperature", None), getattr(params, "top_k", None),
        getattr(req, LABEL_FIELDS[label], None) if label else None, None,
        len(getattr(req, "origin_input_ids", None) or ()) or None,
        getattr(req, "cached_tokens", None), _grammar_kind(params), _trace_context(req)))


def _trace_context(req):
    """SGLang's trace context of a request, with `--enable-trace`: its request span
    `Req <rid>` (a child of the caller's `traceparent`), as the scheduler's copy holds it
    (`TraceReqContext.root_span_context`, an extracted context; the async exporter's
    `_root_span_carrier`, a W3C carrier). None while SGLang does not trace: the caller's
    header then stays in its tokenizer process."""
    ctx = getattr(getattr(req, "time_stats", None), "trace_ctx", None)
    if ctx is None or getattr(ctx, "tracing_enable", False) is not True:
        return None
    carrier = getattr(ctx, "_root_span_carrier", None)
    return carrier if carrier else getattr(ctx, "root_span_context", None)


# the `SamplingParams` fields that give a request a grammar, in the order SGLang's grammar
# manager reads them (`process_req_with_grammar`)
GRAMMAR_FIELDS = ("json_schema", "regex", "ebnf", "structural_tag")


def _grammar_kind(params) -> str | None:
    """The field naming a request's structured-output constraint, None without one."""
    for name in GRAMMAR_FIELDS:
        if getattr(params, name, None) is not None:
            return name
    return None


RESULT_PROCESSOR = (
    WrapPoint("SchedulerBatchResultProcessor._resolve_spec_v2_tokens", "v2.resolve_v2_tokens",
              before=_before_resolve_v2, reads=("result", "batch"), required=False),
    WrapPoint("SchedulerBatchResultProcessor._prepare_kv_cache_release",
              "v2.request_finished", before=_before_release, reads=("req",), required=False),
)
