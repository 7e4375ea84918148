"""SGLang's speculative algorithms beyond the EAGLE worker: one worker class per algorithm
(0.5.23: `speculative/spec_info.py`, `SpeculativeAlgorithm.create_worker`), and plugin
algorithms (`SpeculativeAlgorithm.register`).

Every worker hands its accept counts to the scheduler on the CPU through
`on_verify_complete_cpu`: `BaseSpecWorker`'s no-op default (DFlash, DSpark, Uno,
multi-layer EAGLE, plugins), `EAGLEWorkerV2`'s (EAGLE, EAGLE-3, STANDALONE, FROZEN_KV_MTP:
`sglang_v2`) or `NGRAMWorker`'s own. So counts reach spectrace for every algorithm, plugins
included. Each row of `ALGORITHMS` says what else its worker gets: which of its methods are
wrapped here (a constructor that skips `EAGLEWorkerV2.__init__`, a
`forward_batch_generation` of its own), how many draft positions a request-step has, and
whether draft/target token agreement and the EAGLE-3 checks apply (DFlash / DSpark: their
own draft-input checks, `sglang_dflash`). Only methods a class
defines itself are wrapped (`patching`), so an inherited one is never counted twice.

The rows are SGLang 0.5.23's (checked against its source by tests/test_wrap_points.py);
older releases have some of these modules with other methods, so the points are not
required: a method a release lacks is skipped without a warning.
"""
from __future__ import annotations

import functools
from typing import NamedTuple

from .. import signals
from ..rules.tokens import compare_chain_tokens
from ..patching import WrapPoint
from ..objstate import peek
from ..process import recorder
from ..runtimes import runtime_version
from . import sglang_dflash, sglang_v2, sglang_worker

# How many draft positions one request-step has (the per-position series' length).
NUM_STEPS = "speculative_num_steps"          # a chain or tree of that depth (EAGLE family)
DRAFT_TOKENS = "speculative_num_draft_tokens - 1"  # the proposals besides the verified one


class Algorithm(NamedTuple):
    """One SGLang speculative algorithm and what spectrace does with its worker."""

    name: str        # `--speculative-algorithm` (or what selects it)
    module: str      # the worker's module
    worker: str      # the worker class
    counts_at: str   # the class whose `on_verify_complete_cpu` receives the counts
    positions: str   # NUM_STEPS | DRAFT_TOKENS
    own_init: bool   # its constructor skips EAGLEWorkerV2's: identity wrapped here
    own_step: bool   # overrides forward_batch_generation: steps, spans, audit wrapped here
    agreement: str   # where draft/target agreement comes from, or why there is none
    eagle3: bool     # may carry an EAGLE-3 draft (fc, aux hidden states): EAGLE-3 checks apply
    block_draft: bool = False  # a DFlash / DSpark draft (fc over the target's aux states):
    #                            its aux audit (`sglang_dflash`) at the first step


SPEC = "sglang.srt.speculative."
ALGORITHMS = (
    Algorithm("EAGLE / EAGLE3 / NEXTN", SPEC + "eagle_worker_v2", "EAGLEWorkerV2",
              "EAGLEWorkerV2", NUM_STEPS, False, False, "EAGLEWorkerV2.verify", True),
    Algorithm("STANDALONE", SPEC + "standalone_worker_v2", "StandaloneWorkerV2",
              "EAGLEWorkerV2", NUM_STEPS, True, False, "EAGLEWorkerV2.verify", False),
    Algorithm("FROZEN_KV_MTP", SPEC + "frozen_kv_mtp_worker_v2", "FrozenKVMTPWorkerV2",
              "EAGLEWorkerV2", NUM_STEPS, True, True, "EAGLEWorkerV2.verify", False),
    Algorithm("EAGLE + --enable-multi-layer-eagle", SPEC + "multi_layer_eagle_worker_v2",
              "MultiLayerEagleWorkerV2", "BaseSpecWorker", NUM_STEPS, True, True,
              "its own verify (run_eagle_verify): chains (top-k 1); trees none", False),
    Algorithm("DFLASH", SPEC + "dflash_worker_v2", "DFlashWorkerV2", "BaseSpecWorker",
              DRAFT_TOKENS, True, True, "DFlashWorkerV2._accept_block: the block as a chain",
              False, True),
    Algorithm("DSPARK", SPEC + "dspark_components.dspark_worker_v2", "DSparkWorkerV2",
              "BaseSpecWorker", DRAFT_TOKENS, True, True,
              "none: its accept runs inside the target-verify CUDA graph (docs/algorithms.md)",
              False, True),
    Algorithm("UNO", SPEC + "uno_worker_v2", "UnoWorkerV2", "BaseSpecWorker", DRAFT_TOKENS,
              True, True, "none: no draft model", False),
    Algorithm("NGRAM", SPEC + "ngram_worker", "NGRAMWorker", "NGRAMWorker", DRAFT_TOKENS,
              True, True, "none: no draft model (corpus lookups)", False),
    Algorithm("plugin (SpeculativeAlgorithm.register)", SPEC + "base_spec_worker",
              "BaseSpecWorker", "BaseSpecWorker", NUM_STEPS, False, False,
              "none: unknown worker", False),
)
BY_WORKER = {a.worker: a for a in ALGORITHMS}


def positions(worker) -> int:
    """The draft positions of the worker's request-steps, by its row (a plugin's: its
    `speculative_num_steps` when it has one, else its draft tokens less one, else 0)."""
    row = BY_WORKER.get(type(worker).__name__)
    if row is None or row.positions == NUM_STEPS:
        steps = getattr(worker, "speculative_num_steps", None)
        if isinstance(steps, int) and steps >= 0:
            return steps
    tokens = getattr(worker, "speculative_num_draft_tokens", None)
    return tokens - 1 if isinstance(tokens, int) and tokens > 0 else 0


# -- hooks ------------------------------------------------------------------------------
def _before_counts(instance, counts) -> None:
    recorder().acceptance.add(counts, positions(instance))


def _after_init(ctx, worker, result) -> None:
    n = positions(worker)
    if n > 0:
        recorder().acceptance.prepare(n)


def _audit(worker) -> None:
    """The aux audit: DFlash / DSpark's for their workers (`sglang_dflash`), else EAGLE-3's
    for a worker whose draft may be an EAGLE-3 one (`audit_pair` judges only EAGLE-3 draft
    classes: nothing for drafts without fc)."""
    row = BY_WORKER.get(type(worker).__name__)
    if row is not None and row.block_draft:
        target, draft = sglang_dflash.models(worker)
        sglang_worker.audit_once(worker, target, draft, functools.partial(
            sglang_dflash.audit_pair, algorithm=row.name))
        return
    target = getattr(getattr(worker, "target_worker", None), "model_runner", None)
    draft = getattr(worker, "draft_worker", None)
    runner = getattr(draft, "draft_runner", None) or getattr(draft, "model_runner", None)
    sglang_worker.audit_once(worker, getattr(target, "model", None),
                             getattr(runner, "model", None))


def step_attrs(worker, batch) -> dict:
    """Step-span attributes; settings a worker lacks (DFlash has no top-k) are left out."""
    reqs = getattr(batch, "reqs", None)
    attrs = {signals.SPAN_ATTR_WORKER: type(worker).__name__,
             signals.SPAN_ATTR_RUNTIME: signals.RUNTIME_SGLANG,
             signals.SPAN_ATTR_RUNTIME_VERSION: runtime_version("sglang"),
             signals.SPAN_ATTR_SGLANG_VERSION: runtime_version("sglang"),
             signals.SPAN_ATTR_BATCH_SIZE: len(reqs) if reqs is not None
             else int(batch.seq_lens.shape[0])}
    for attr, name in ((signals.SPAN_ATTR_NUM_STEPS, "speculative_num_steps"),
                       (signals.SPAN_ATTR_TOPK, "topk"),
                       (signals.SPAN_ATTR_NUM_DRAFT_TOKENS, "speculative_num_draft_tokens")):
        value = getattr(worker, name, None)
        if isinstance(value, int):
            attrs[attr] = value
    return attrs


def step_hook(kind: str):
    """The step hook of a worker that is not an EAGLEWorkerV2: audit once, skip prefill,
    count the step under `kind` (its class), sample a span (no step cost: the advisor's
    model is the EAGLE worker's draft / verify / draft-extend phases)."""
    def before(instance, batch):
        st = peek(instance)
        if st is None or not st.audited:
            _audit(instance)
        if sglang_worker.is_prefill(batch):
            return None
        steps = recorder().steps
        if steps.begin(kind):
            return sglang_worker.StepContext(steps.start_span(step_attrs(instance, batch)), None)
        return None
    return before


BATCH = sglang_v2.BATCH


# -- token agreement where a worker's own verify exposes drafts and target predictions -----
def _before_accept_block(instance, candidates, next_token_logits, bs, target_predict):
    """DFlash's accept (`DFlashWorkerV2._accept_block`): the block's candidates (column 0
    the verified token, then the drafts) against the target's top-1 predictions, which
    SGLang passes or computes inside from the same logits (then computed here too, on the
    device, only on a sampled step), as a chain: every `agreement_every`th step."""
    rec = recorder()
    every = rec.cfg.agreement_every
    if not every or rec.steps.count("DFlashWorkerV2") % every or not bs:
        return
    predicted = target_predict
    if predicted is None:
        if next_token_logits is None:
            return
        predicted = next_token_logits.argmax(dim=-1)
    counts, event = compare_chain_tokens(candidates, predicted, bs, int(instance.block_size))
    rec.agreement.add(counts, event, bs)


AGREEMENT_POINTS = {
    "MultiLayerEagleWorkerV2": WrapPoint(
        "MultiLayerEagleWorkerV2.verify", "MultiLayerEagleWorkerV2.verify",
        before=sglang_v2.verify_hook("MultiLayerEagleWorkerV2", trees=False),
        reads=(BATCH,), after=sglang_v2._after_verify, cleanup=sglang_v2._end_verify,
        after_needs_ctx=True, required=False),
    "DFlashWorkerV2": WrapPoint(
        "DFlashWorkerV2._accept_block", "DFlashWorkerV2._accept_block",
        before=_before_accept_block,
        reads=("candidates", "next_token_logits", "bs", "target_predict"), required=False),
}


def init_point(row: Algorithm) -> WrapPoint:
    """The constructor: identity, telemetry, the series for its positions."""
    return WrapPoint(f"{row.worker}.__init__", f"{row.worker}.__init__",
                     before=sglang_worker.before_init, after=_after_init, reads="all",
                     required=False)


def step_point(row: Algorithm) -> WrapPoint:
    """`forward_batch_generation`: an EAGLEWorkerV2 subclass counts its steps as the EAGLE
    worker's (so `EAGLEWorkerV2.verify`'s agreement sampling sees them), any other worker
    under its own class."""
    before = (sglang_v2._before_step if row.counts_at == "EAGLEWorkerV2"
              else step_hook(row.worker))
    return WrapPoint(f"{row.worker}.forward_batch_generation",
                     f"{row.worker}.forward_batch_generation", before=before, reads=(BATCH,),
                     cleanup=sglang_worker.end_step, required=False)


def counts_point(cls: str) -> WrapPoint:
    return WrapPoint(f"{cls}.on_verify_complete_cpu", f"{cls}.on_verify_complete_cpu",
                     before=_before_counts, reads=("num_correct_drafts_per_req",),
                     required=False)


def table(module: str) -> tuple[WrapPoint, ...]:
    """The wrap points of one worker module, from the rows whose worker lives there."""
    points: list[WrapPoint] = []
    for row in ALGORITHMS:
        if row.module != module:
            continue
        if row.own_init:
            points.append(init_point(row))
        if row.own_step:
            points.append(step_point(row))
        if row.counts_at == row.worker and row.counts_at != "EAGLEWorkerV2":
            points.append(counts_point(row.worker))
        if row.worker in AGREEMENT_POINTS:
            points.append(AGREEMENT_POINTS[row.worker])
    return tuple(points)


BASE_SPEC_WORKER = table(SPEC + "base_spec_worker")
STANDALONE = table(SPEC + "standalone_worker_v2")
FROZEN_KV_MTP = table(SPEC + "frozen_kv_mtp_worker_v2")
MULTI_LAYER_EAGLE = table(SPEC + "multi_layer_eagle_worker_v2")
DFLASH = table(SPEC + "dflash_worker_v2")
DSPARK = table(SPEC + "dspark_components.dspark_worker_v2")
UNO = table(SPEC + "uno_worker_v2")
NGRAM = table(SPEC + "ngram_worker")
