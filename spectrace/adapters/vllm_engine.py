"""Adapter for vLLM's EngineCore (V1 engine): speculative steps, accept counts and step
spans, from the scheduler, in the EngineCore process.

`Scheduler.update_from_output(scheduler_output, model_runner_output)` runs once per step
with everything on the CPU and counts the step. The accept counts come from one of two
places, both once per step and without per-request Python in the step:

- vLLM logs its stats (`vllm serve` by default): the same call hands vLLM's own
  per-step `SpecDecodingStats` to `Scheduler.make_stats`, whose hook keeps its three
  figures (request-steps, draft tokens, accepted per position): O(1), and spectrace's
  totals are vLLM's by construction.
- It does not (`LLM(...)` by default, `--disable-log-stats`): the hook keeps references
  to the drafts each request was scheduled with (`scheduled_spec_decode_tokens`) and to
  the index of its tokens, plus the lengths of the sampled lists (`sampled_token_ids`:
  the accepted drafts plus one token from the target; vLLM trims them in place when a
  request stops), snapshotted at C speed; the Recorder applies vLLM's own rule
  (`num_accepted = len(sampled) - 1`) when it folds, in its reader thread. vLLM also skips
  requests aborted while their step ran, which spectrace then still counts.

The step span starts when `EngineCore.step` (or `step_with_batch_queue`) does and ends
with the scheduler's bookkeeping: one span per sampled speculative step, covering
schedule, target forward, verification, drafting and bookkeeping as the engine sees them
(the draft and target run in the worker process, which has no span of its own).

CUDA graph: vLLM decides each step's CUDA-graph mode in the worker's model runner; the
EngineCore sees it only when vLLM runs with `--cudagraph-metrics`, as the step's
`ModelRunnerOutput.cudagraph_stats.runtime_mode` (`NONE`, `PIECEWISE`, `FULL`: a str on
the CPU), kept beside the step's counts; without it the step's bucket is `unknown`.

A finished request's own figures come from vLLM's per-request accumulator
(`Request.spec_decode_metrics`, a `RequestSpecDecodeMetrics`: verify steps by accepted draft
tokens, which vLLM fills each step when it is started with
`--per-request-spec-decode-metrics summary` or `detailed`), read once per request at
`Scheduler._free_request`, which every finished or aborted request goes through. Without
that option vLLM keeps no per-request figure and spectrace records none (logged once, at
INFO). The request's W3C trace headers (`Request.trace_headers`) go with it, so its span
joins the caller's trace: vLLM carries them to the EngineCore only when it traces itself
(`--otlp-traces-endpoint`; without it `AsyncLLM.add_request` drops them).
"""
from __future__ import annotations

import logging
import time
from operator import itemgetter

from .. import signals
from ..rules.context import trained_context
from ..rules.synthetic import vllm_synthetic
from ..families.acceptance import PositionCounts
from ..families.requests import FinishedRequest
from ..patching import WrapPoint
from ..process import STATE, on_reset
from ..runtimes import runtime_version
from .vllm_identity import engine_recorder

_log = logging.getLogger("spectrace")
WORKER = signals.WORKER_VLLM
_LESS_ONE = bytes([0] + list(range(255)))  # byte value n -> max(n - 1, 0)


class StepCounts:
    """One step's accepted draft tokens per request, read when iterated (at fold time):
    `len(sampled) - sampled_per_step` for each request scheduled with drafts that got
    tokens back, from the lengths snapshotted before vLLM could trim the lists. When every
    request of the step was scheduled with drafts and got tokens (a pure decode step, the
    common case) the counts are the lengths less one, computed in C (`bytes.translate`).

    `cached`: the step's `scheduled_cached_reqs` (vLLM's per-request token counts at
    scheduling), for `context`. `sampled`: vLLM's own lists, kept instead of `lens` when
    vLLM logs stats and the counts serve the context breakdown only (read at fold time:
    see `context`)."""

    __slots__ = ("spec", "index", "lens", "per_step", "cached", "sampled")

    def __init__(self, spec: dict, index: dict, lens: list | None, per_step: int,
                 cached=None, sampled: list | None = None) -> None:
        self.spec, self.index, self.lens, self.per_step = spec, index, lens, per_step
        self.cached, self.sampled = cached, sampled

    def __iter__(self):
        lens, index, spec = self.lens, self.index, self.spec
        if (self.per_step == 1 and len(spec) == len(lens) == len(index) and 0 not in lens
                and max(lens) < 256 and index.keys() == spec.keys()):
            return iter(bytes(lens).translate(_LESS_ONE))
        return self._per_request()

    def _per_request(self):
        lens, index, per_step = self.lens, self.index, self.per_step
        for req_id, drafts in self.spec.items():
            i = index.get(req_id)
            if not drafts or i is None or i >= len(lens) or not lens[i]:
                continue
            yield max(lens[i] - per_step, 0)

    def context(self) -> tuple[list, list]:
        """(accepted draft tokens, context length) of each request-step, aligned, called at
        fold time. A request's context length is the scheduler's own count of its
        computed tokens when the step was scheduled (`num_computed_tokens`) plus the token
        it sampled last: its prompt and output so far, as SGLang's `seq_lens`; -1 where the
        step's cached-request data does not name it. Under async scheduling the computed
        count already includes the step before's drafts, rejected ones too (at most K
        tokens more). With `sampled` (vLLM logs stats) the lengths are read now: the lists
        of requests that stopped inside their drafts were trimmed by vLLM, so their last
        step counts the tokens vLLM kept (`Acceptance` uses vLLM's own counts of the step
        instead when the step's requests share one bucket)."""
        index, per_step, cached, spec = self.index, self.per_step, self.cached, self.spec
        if (per_step == 1 and cached is not None and len(spec) == len(index) > 1
                and index.keys() == spec.keys()):
            try:  # a pure decode step, every request named: in C (numpy, itemgetter)
                return _decode_context(self.lens, self.sampled, index, cached)
            except (KeyError, ValueError):
                pass
        lens = self.lens if self.sampled is None else list(map(len, self.sampled))
        computed = (dict(zip(cached.req_ids, cached.num_computed_tokens))
                    if cached is not None else {})
        counts, lengths = [], []
        for req_id, drafts in spec.items():
            i = index.get(req_id)
            if not drafts or i is None or i >= len(lens) or not lens[i]:
                continue
            counts.append(max(lens[i] - per_step, 0))
            n = computed.get(req_id)
            lengths.append(n + 1 if isinstance(n, int) else -1)
        return counts, lengths


def _decode_context(lens, sampled, index: dict, cached):
    """`StepCounts.context` of a step where every request has drafts, in the runner's
    index order; raises KeyError or ValueError where the per-request path must decide
    (a request without tokens back, or one the cached data does not name)."""
    import numpy
    n = len(index)
    got = numpy.fromiter(lens if sampled is None else map(len, sampled), numpy.int64)
    if got.shape[0] != n or not got.all():
        raise ValueError("not a pure decode step")
    order = numpy.fromiter(index.values(), numpy.int64, n)
    names, computed = cached.req_ids, cached.num_computed_tokens
    if len(names) != n or list(index) != names:  # another order: match by request id
        computed = itemgetter(*index)(dict(zip(names, computed)))
    return (got[order] - 1).tolist(), numpy.asarray(computed, dtype=numpy.int64) + 1


def _before_engine_step(engine_core):
    """Note when this engine step began, for its step span (the step in flight)."""
    rec = STATE.recorder
    if rec is not None:
        rec.inflight.engine_step_started(time.time_ns())


def _after_scheduler_init(ctx, scheduler, result) -> None:
    """A scheduler with speculative tokens starts this process's telemetry, with the
    per-position and accept-length series at 0, and checks whether vLLM accepts
    synthetically (the speculative config its rejection sampler is built from); any
    other exports nothing."""
    k = getattr(scheduler, "num_spec_tokens", 0)
    if isinstance(k, int) and k > 0:
        rec = engine_recorder(scheduler.vllm_config)
        rec.acceptance.prepare(k)
        spec = getattr(scheduler.vllm_config, "speculative_config", None)
        draft = getattr(spec, "draft_model_config", None)
        if getattr(spec, "model", None) and draft is not getattr(spec, "target_model_config",
                                                                  None):
            # the draft's own config.json: what the long-context finding names (judged here)
            rec.draft.note_context(trained_context(getattr(draft, "hf_config", None)))
        finding = vllm_synthetic(getattr(spec, "rejection_sample_method", None),
                                 getattr(spec, "synthetic_acceptance_rates", None),
                                 getattr(spec, "synthetic_acceptance_length", None))
        if finding is not None:
            rec.finding(finding)
        level = getattr(scheduler, "spec_decode_metrics_level", None)
        if level is None:
            _log.info("spectrace: this vLLM release keeps no per-request acceptance; "
                      "spectrace records none")
        elif level == "none":
            _log.info("spectrace: vLLM keeps no per-request acceptance: start it with "
                      "--per-request-spec-decode-metrics summary for spectrace's "
                      "per-request figures")


def _before_update(scheduler, out, result):
    """Count the step and, when vLLM keeps no stats of its own, keep its accept counts (by
    reference); returns the context of a sampled step's span, else None."""
    new_reqs = getattr(out, "scheduled_new_reqs", None)
    if new_reqs and getattr(scheduler, "spec_decode_metrics_level", "none") != "none":
        for new in new_reqs:  # once per request: its first scheduling
            _FIRST_COMPUTED.setdefault(new.req_id, new.num_computed_tokens)
    spec = out.scheduled_spec_decode_tokens
    if not spec:
        return None  # no request was scheduled with drafts (prefill, or no speculation)
    rec = STATE.recorder or engine_recorder(scheduler.vllm_config)  # per step: no call
    k = scheduler.num_spec_tokens
    sampled = result.sampled_token_ids
    if sampled:
        acceptance = rec.acceptance
        per_step = getattr(scheduler, "num_sampled_tokens_per_step", 1)
        cached = getattr(out, "scheduled_cached_reqs", None)
        graph = getattr(getattr(result, "cudagraph_stats", None), "runtime_mode", None)
        if not scheduler.log_stats:
            counts = StepCounts(spec, result.req_id_to_index, list(map(len, sampled)),
                                per_step, cached)
            acceptance.add(counts, k, counts.context if acceptance.wants_lengths else None,
                           graph)
        else:  # references only; make_stats's hook pairs them
            rec.inflight.keep_seq_lens(StepCounts(
                spec, result.req_id_to_index, None, per_step, cached, sampled)
                if acceptance.wants_lengths else None, graph)
    steps = rec.steps
    if steps.begin(WORKER):
        return steps.start_span({
            signals.SPAN_ATTR_WORKER: WORKER,
            signals.SPAN_ATTR_RUNTIME: signals.RUNTIME_VLLM,
            signals.SPAN_ATTR_RUNTIME_VERSION: runtime_version(signals.RUNTIME_VLLM),
            signals.SPAN_ATTR_BATCH_SIZE: len(out.num_scheduled_tokens),
            signals.SPAN_ATTR_NUM_STEPS: k, signals.SPAN_ATTR_TOPK: 1,
            signals.SPAN_ATTR_NUM_DRAFT_TOKENS: k + 1}, start_time=steps.inflight.started_ns)
    return None


def _end_update(step) -> None:
    rec = STATE.recorder
    if rec is not None:
        rec.steps.end_span(step)


def _before_make_stats(scheduler, stats):
    """vLLM's own counts of this step (None when it logs no stats: see `_before_update`),
    with the step's per-request references for the context breakdown (kept by
    update_from_output's hook; make_stats runs inside every update_from_output, so they
    are taken, or dropped, in the same step)."""
    rec = STATE.recorder
    step, graph = rec.inflight.take_seq_lens() if rec is not None else (None, None)
    if stats is not None:
        (rec or engine_recorder(scheduler.vllm_config)).acceptance.add_positions(
            PositionCounts(stats.num_drafts, stats.num_draft_tokens,
                           stats.num_accepted_tokens_per_pos),
            None if step is None else step.context, graph)


# request id -> the computed tokens vLLM first scheduled it with (`NewRequestData`): its
# prefix-cache hit, local and external, vLLM's own `PrefillStats.num_cached_tokens` (which
# the request no longer holds when it finishes: vLLM takes it with its first output). Kept
# only while vLLM keeps per-request figures; popped when the request is freed. Keyed by
# request id, not kept on the request: the value must outlive the field vLLM clears.
_FIRST_COMPUTED: dict[str, int] = {}
on_reset(_FIRST_COMPUTED.clear)


def _before_free_request(scheduler, request) -> None:
    """A finished (or aborted) request: vLLM's own per-request counts, when it keeps them
    (histogram index j = verify steps that accepted j draft tokens), with its prefix-cache
    hit, its grammar's kind and its trace headers (a reference, parsed off this thread)."""
    cached = _FIRST_COMPUTED.pop(request.request_id, None)
    metrics = getattr(request, "spec_decode_metrics", None)
    hist = getattr(metrics, "histogram", None)
    if not hist:
        return
    steps = sum(hist)
    if not steps:
        return
    params = getattr(request, "sampling_params", None)
    temperature = getattr(params, "temperature", None)
    if getattr(getattr(params, "sampling_type", None), "name", None) == "GREEDY":
        temperature = 0.0  # vLLM's own greedy rule (its epsilon, not ours)
    rec = engine_recorder(scheduler.vllm_config)
    label = rec.cfg.request_label
    rec.requests.finished(FinishedRequest(
        request.request_id, steps, sum(j * n for j, n in enumerate(hist)), list(hist),
        temperature, getattr(params, "top_k", None), _label(request, label) if label else None,
        getattr(metrics, "num_draft_tokens", None) or None,
        getattr(request, "num_prompt_tokens", None),
        cached, _grammar_kind(request), getattr(request, "trace_headers", None)))


def _grammar_kind(request) -> str | None:
    """The kind of a request's structured-output constraint (`StructuredOutputOptions`'s
    name in its key, which vLLM computed when it built the grammar), None without one."""
    structured = getattr(request, "structured_output_request", None)
    if structured is None:
        return None
    try:
        return structured.structured_output_key[0].name
    except (AttributeError, IndexError, TypeError, ValueError):
        return "grammar"


def _label(request, name: str):
    """The SPECTRACE_REQUEST_LABEL field of a vLLM request: its scheduling `priority` or its
    LoRA adapter's name (vLLM's requests carry no routing or cache key: `none`)."""
    if name == "priority":
        return getattr(request, "priority", None)
    if name == "lora":
        return getattr(getattr(request, "lora_request", None), "lora_name", None)
    return None


# -- wrap points ----------------------------------------------------------------------------
SCHEDULER = (
    WrapPoint("Scheduler.__init__", "vllm.scheduler.__init__", after=_after_scheduler_init),
    WrapPoint("Scheduler.update_from_output", "vllm.scheduler.update_from_output",
              before=_before_update, reads=("scheduler_output", "model_runner_output"),
              cleanup=_end_update),
    WrapPoint("Scheduler.make_stats", "vllm.scheduler.make_stats", before=_before_make_stats,
              reads=("spec_decoding_stats",)),
    WrapPoint("Scheduler._free_request", "vllm.scheduler.request_finished",
              before=_before_free_request, reads=("request",), required=False),
)

# Only the step span's start time: without it the span starts at the bookkeeping.
ENGINE_CORE = (
    WrapPoint("EngineCore.step", "vllm.engine_core.step", before=_before_engine_step,
              required=False),
    WrapPoint("EngineCore.step_with_batch_queue", "vllm.engine_core.step",
              before=_before_engine_step, required=False),
)
