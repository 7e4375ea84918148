"""Finished requests: how many, by their own mean accept length (and a request label), the
breakdowns counted per request (`breakdowns.REQUEST`: sampling, the request label), and a
span for a sampled fraction of them carrying the runtime's request id (so a request found
in the runtime's traces or logs leads to its acceptance).

`finished` keeps a reference; the counting and the spans happen when the metric reader
collects, in its own thread (a span costs tens of µs to make).

A request that came with a W3C trace context (the runtime's carrier, `trace_parent`) gets
its span in the caller's trace, as a child of the caller's span; the caller's sampled flag
then decides instead of `SPECTRACE_REQUEST_SAMPLE_RATIO` (a head-sampled trace shows
spectrace's span whenever it shows the request, and an unsampled one gets none).

The span carries the request's acceptance (mean, the runtime's histogram, accepted and
proposed drafts per position by the chain rule), the breakdown buckets it fell in, and the
GenAI semantic conventions' names where they name the figure (`span_attributes`), and the
draft's identity (spectrace's resource attributes, repeated: `draft_identity`).
"""
from __future__ import annotations

import random
import threading
import time
from collections import deque
from typing import NamedTuple

from opentelemetry.metrics import Observation

from .. import names
from ..rules.outliers import RATE_BOUNDS, rate_of
from ..rules import context as ctx
from ..rules.requests import (LabelCap, grammar_bucket, label_text, prefix_cache_bucket,
                              request_bucket, sampling_bucket)
from ..safety import DROPPED, INTERNAL_ERRORS
from ..names import COUNTER, MetricSpec
from . import breakdowns
from .breakdowns import BucketCounts
from .instruments import CollectionReads, by_attributes, histogram, observe
from .trace_parent import parent_of

MAX_PENDING_SPANS = 4096  # sampled requests waiting for `emit_spans`; more are dropped
# requests with steps that drafted nothing, waiting for their release (a bound: a request
# that never reaches it would otherwise be kept for ever)
MAX_NO_DRAFT = 65536

SPEC_REQUESTS = MetricSpec(
    "spectrace.spec.requests", COUNTER, "{request}",
    "Finished requests with speculative steps, by their mean accept length (bonus "
    "included) in quarter-token buckets (`mean_accept_length`: 1.00-1.25 ... >=5.00); with "
    "`SPECTRACE_REQUEST_LABEL` set, also by that request field's value (`request_label`, "
    "at most `SPECTRACE_REQUEST_LABEL_CAP` values, later ones `other`).",
    (names.ATTR_REQUEST_LENGTH, names.ATTR_REQUEST_LABEL), counted_once=True)
SPEC_REQUEST_LABEL_OVERFLOW = MetricSpec(
    "spectrace.spec.request_label_overflow", COUNTER, "{request}",
    "Finished requests whose `request_label` value came after `SPECTRACE_REQUEST_LABEL_CAP` "
    "distinct values and was counted as `other` (0 from the start while a label is set; "
    "`request_label_key`: the field).", (names.ATTR_REQUEST_LABEL_KEY,), counted_once=True)
SPEC_REQUEST_ACCEPTANCE = MetricSpec(
    "spectrace.spec.request_acceptance", names.HISTOGRAM, "1",
    "Finished requests by their own acceptance rate: accepted draft tokens over the draft "
    "tokens they could accept (K per verify step; vLLM's own count with "
    "--per-request-spec-decode-metrics), in fixed buckets up to 0.96 and 0.99 (the tails "
    "`spectrace report` names requests from: rules.outliers).", (), counted_once=True,
    bounds=RATE_BOUNDS)
SPEC_REQUEST_INVALID_TRACEPARENT = MetricSpec(
    "spectrace.spec.request_invalid_traceparent", COUNTER, "{request}",
    "Finished requests whose W3C `traceparent` was malformed (wrong version, bad hex, "
    "all-zero ids) and was ignored as the W3C spec says: their span, when recorded, "
    "starts a trace of its own. Counted among requests that came with a trace context "
    "the runtime kept (vLLM with --otlp-traces-endpoint, SGLang with --enable-trace).",
    (), counted_once=True)
METRICS = (SPEC_REQUESTS, SPEC_REQUEST_LABEL_OVERFLOW, SPEC_REQUEST_ACCEPTANCE,
           SPEC_REQUEST_INVALID_TRACEPARENT)


class FinishedRequest(NamedTuple):
    """What a runtime says about a request when it finishes."""
    request_id: str
    verify_steps: int
    accepted_tokens: int
    correct_histogram: list  # request-steps by correct draft tokens (index), or None
    temperature: float | None
    top_k: int | None
    label: object = None  # the SPECTRACE_REQUEST_LABEL field's value, when one is set
    draft_tokens: int | None = None  # the runtime's own count, else verify steps x K
    prompt_tokens: int | None = None  # its prompt's length
    cached_tokens: int | None = None  # of them, served from the prefix cache
    grammar: str | None = None  # the kind of its structured-output constraint, None: none
    # the W3C trace context it came with (`traceparent`, `tracestate`), as the runtime kept
    # it (a carrier, or an OpenTelemetry context the runtime extracted): a reference,
    # parsed off the decode loop (`trace_parent`)
    trace_carrier: object = None


def draft_tokens_of(r: FinishedRequest, positions: int) -> int | None:
    """The draft tokens a request could accept: the runtime's count, else steps x K."""
    if r.draft_tokens:
        return r.draft_tokens
    return r.verify_steps * positions if positions > 0 else None


def per_position(r: FinishedRequest, positions: int):
    """(accepted, proposed) draft tokens per draft position of a request, from its
    histogram (index j: verify steps with j correct drafts) by the chain rule: a step with j
    correct drafts accepted positions 0..j-1, so position i accepted the steps with more than
    i. Proposed: a draft at every position on every verify step, where K (`positions`) is
    known and the draft tokens the runtime counted are steps x K (a runtime that drafted
    fewer on some steps, vLLM near a request's end, does not say which positions: None).
    Accepted is None without a histogram that sums to the verify steps."""
    proposed = None
    if positions > 0 and (not r.draft_tokens or r.draft_tokens == r.verify_steps * positions):
        proposed = [r.verify_steps] * positions
    hist = r.correct_histogram
    if not hist or sum(hist) != r.verify_steps:
        return None, proposed
    accepted, above = [], r.verify_steps
    for i in range(max(positions, len(hist) - 1)):
        above -= hist[i] if i < len(hist) else 0
        accepted.append(above)
    return accepted, proposed


def context_buckets(r: FinishedRequest) -> list[str] | None:
    """The context buckets a request's steps fell in (`rules.context`), from its length at
    its first verify step (its prompt and the prefill's token) to its length when it
    finished less one (its prompt, a token a step and the accepted drafts): the last step
    began within K + 1 tokens of that, so at a bucket's edge this may name one bucket more
    than its steps were counted in. None without its prompt's length."""
    if not isinstance(r.prompt_tokens, int) or r.prompt_tokens <= 0:
        return None
    lo = ctx.BUCKETS.index(ctx.bucket_of(r.prompt_tokens + 1))
    hi = ctx.BUCKETS.index(ctx.bucket_of(r.prompt_tokens + r.verify_steps + r.accepted_tokens))
    return list(ctx.BUCKETS[lo:max(lo, hi) + 1])


# the resource attributes that say which draft a process runs, repeated on its request
# spans: with the host's tracer provider (SGLang --enable-trace, an application's own) the
# spans go out under the host's resource, which names no draft
DRAFT_IDENTITY = (names.RES_DRAFT_MODEL, names.RES_DRAFT_HASH, names.RES_SPEC_ALGORITHM)


def draft_identity(resource) -> dict:
    """The draft identity attributes of spectrace's resource of this process ({} without)."""
    attrs = getattr(resource, "attributes", None) or {}
    return {k: attrs[k] for k in DRAFT_IDENTITY if attrs.get(k)}


def span_attributes(r: FinishedRequest, positions: int, label: str | None,
                    draft: dict | None = None) -> dict:
    """A finished request's span attributes (`emit_spans`, in the collecting thread);
    `draft`: the process's draft identity (`draft_identity`)."""
    attrs = {
        names.SPAN_ATTR_REQUEST_ID: str(r.request_id),
        names.SPAN_ATTR_REQUEST_STEPS: r.verify_steps,
        names.SPAN_ATTR_REQUEST_ACCEPTED: r.accepted_tokens,
        names.SPAN_ATTR_REQUEST_MEAN_LENGTH: 1 + r.accepted_tokens / r.verify_steps,
        names.SPAN_ATTR_REQUEST_SAMPLING: sampling_bucket(r.temperature, r.top_k)}
    if r.temperature is not None:
        attrs[names.SPAN_ATTR_REQUEST_TEMPERATURE] = float(r.temperature)
    if r.top_k is not None:
        attrs[names.SPAN_ATTR_REQUEST_TOP_K] = float(r.top_k)
    drafts = draft_tokens_of(r, positions)
    if drafts:
        attrs[names.SPAN_ATTR_REQUEST_DRAFT_TOKENS] = drafts
    accepted, proposed = per_position(r, positions)
    if accepted is not None:
        attrs[names.SPAN_ATTR_REQUEST_HISTOGRAM] = [int(n) for n in r.correct_histogram]
        attrs[names.SPAN_ATTR_REQUEST_ACCEPTED_PER_POSITION] = accepted
    if proposed is not None:
        attrs[names.SPAN_ATTR_REQUEST_PROPOSED_PER_POSITION] = proposed
    if r.prompt_tokens is not None and r.cached_tokens is not None:
        attrs[names.SPAN_ATTR_REQUEST_PROMPT_TOKENS] = r.prompt_tokens
        attrs[names.SPAN_ATTR_REQUEST_CACHED_TOKENS] = r.cached_tokens
    attrs[names.SPAN_ATTR_REQUEST_PREFIX_CACHE] = prefix_cache_bucket(r.cached_tokens,
                                                                      r.prompt_tokens)
    context = context_buckets(r)
    if context is not None:
        attrs[names.SPAN_ATTR_REQUEST_CONTEXT] = context
    attrs[names.SPAN_ATTR_REQUEST_GRAMMAR] = grammar_bucket(r.grammar)
    if label:
        attrs[names.SPAN_ATTR_REQUEST_LABEL] = label_text(r.label)
    if draft:
        attrs.update(draft)
    return attrs


class RequestTotals:
    """Finished requests: by their own mean accept length (and label value, `label_cap`
    set), a count; their request-steps by accept length in each per-request breakdown
    (`by`). `add` keeps a reference; `fold` counts."""

    def __init__(self, request_breakdowns=None, label_cap: int | None = None,
                 positions=lambda: 0) -> None:
        if request_breakdowns is None:  # every declared one (a label's with a cap only)
            request_breakdowns = [b for b in breakdowns.BREAKDOWNS if b.source == breakdowns.REQUEST
                                  and (label_cap or not b.capped)]
        self._pending: deque = deque()
        self._lock = threading.Lock()
        # (mean-length bucket, label value or None) -> requests
        self.by_mean_length: dict[tuple[str, str | None], int] = {}
        self.labels = LabelCap(label_cap) if label_cap else None
        self.breakdowns = tuple(request_breakdowns)
        self.by: dict[str, BucketCounts] = {b.name: BucketCounts() for b in self.breakdowns}
        self.positions = positions  # K, the draft tokens per verify step
        self.new_rates: list[float] = []  # acceptance rates folded since last taken

    def add(self, r: FinishedRequest) -> None:
        self._pending.append(r)

    def fold(self) -> None:
        labels = self.labels
        with self._lock:
            while self._pending:
                r = self._pending.popleft()
                if r.verify_steps <= 0:
                    continue
                label = None if labels is None else labels(label_text(r.label))
                hist = r.correct_histogram or []
                if sum(hist) != r.verify_steps:  # no usable histogram: the mean only
                    hist = []
                for b in self.breakdowns:
                    bucket = label if b.capped else b.of_request(r)
                    counts = self.by[b.name]
                    for correct, n in enumerate(hist):
                        if n:
                            counts.add(bucket, correct + 1, n)
                key = (request_bucket(1 + r.accepted_tokens / r.verify_steps), label)
                self.by_mean_length[key] = self.by_mean_length.get(key, 0) + 1
                rate = rate_of(r.accepted_tokens, draft_tokens_of(r, self.positions()))
                if rate is not None:
                    self.new_rates.append(rate)

    def take_rates(self) -> list[float]:
        with self._lock:
            rates, self.new_rates = self.new_rates, []
        return rates


class Requests:
    """The requests family of one process: totals, their metrics, and the sampled request
    spans."""

    def __init__(self, cfg, tracer, positions=lambda: 0, draft: dict | None = None) -> None:
        """`positions`: K, the draft tokens per verify step (for a request's acceptance
        rate where the runtime counts none itself); `draft`: the draft identity its spans
        carry (`draft_identity`)."""
        self.cfg = cfg
        self.tracer = tracer
        self.draft = dict(draft or {})
        self.totals = RequestTotals(
            (b for b in breakdowns.BREAKDOWNS if b.source == breakdowns.REQUEST and b.enabled(cfg)),
            cfg.request_label_cap if cfg.request_label else None, positions)
        self._rates = None  # the per-request acceptance histogram (`register`)
        self._spans: deque = deque()  # (finished at, FinishedRequest) to record
        self._spans_lock = threading.Lock()
        self._rand = random.random
        self._no_draft: dict = {}  # request id -> its steps with no draft (`no_draft`)
        self.invalid_traceparents = 0  # requests whose traceparent was malformed

    def no_draft(self, reqs) -> None:
        """These requests ran a step with no draft token (adaptive K = 0), which the
        runtime counts among their verify steps (SGLang's `spec_verify_ct`): taken off when
        each finishes (`take_no_draft`). Only on such steps; SGLang skips retracted and
        finished requests there, and so does this."""
        kept = self._no_draft
        if len(kept) > MAX_NO_DRAFT:  # requests that never reached their release hook
            kept.clear()
            DROPPED.add("no_draft")
        for req in reqs:
            if not (getattr(req, "is_retracted", False) or req.finished()):
                kept[req.rid] = kept.get(req.rid, 0) + 1

    def take_no_draft(self, rid) -> int:
        return self._no_draft.pop(rid, 0)

    def finished(self, r: FinishedRequest) -> None:
        """A request finished: count it; keep a sampled one, or one with a trace context
        (its caller decides, in `emit_spans`), with when it finished, for its span
        (`emit_spans`, off the decode loop)."""
        self.totals.add(r)
        if r.verify_steps > 0 and (r.trace_carrier or self._ratio_keeps()):
            if len(self._spans) < MAX_PENDING_SPANS:
                self._spans.append((time.time_ns(), r))
            else:
                DROPPED.add("spans")

    def emit_spans(self) -> None:
        """Record the sampled finished requests as spans that start and end when each
        finished: at every metric collection (the collecting thread), and before a final
        flush exports spans (`export.final_flush`)."""
        label = self.cfg.request_label
        with self._spans_lock:
            pending = self._spans
            while pending:
                t, r = pending.popleft()
                parent = None
                if r.trace_carrier:
                    parent, sampled, invalid = parent_of(r.trace_carrier)
                    if invalid:
                        self.invalid_traceparents += 1
                    if not sampled or (parent is None and not self._ratio_keeps()):
                        continue  # the caller's trace is unsampled, or the ratio decides
                attrs = span_attributes(r, self.totals.positions(), label, self.draft)
                self.tracer.start_span(names.SPAN_REQUEST, context=parent, attributes=attrs,
                                       start_time=t).end(end_time=t)

    def _ratio_keeps(self) -> bool:
        """SPECTRACE_REQUEST_SAMPLE_RATIO's draw, for a request without a valid parent."""
        ratio = self.cfg.request_sample_ratio
        return ratio > 0 and (ratio >= 1 or self._rand() < ratio)

    def folded(self) -> RequestTotals:
        """The totals with every finished request counted (its acceptance rate in the
        histogram, recorded here, in the collecting thread) and their spans recorded."""
        self.totals.fold()
        if self._rates is not None:
            record, attrs = self._rates
            for rate in self.totals.take_rates():
                record(rate, attrs)
        try:
            self.emit_spans()
        except Exception as exc:  # noqa: BLE001 - the counts are observed all the same
            INTERNAL_ERRORS.record("emit:request_spans", exc)
        return self.totals

    def register(self, meter, scope: dict) -> None:
        self._rates = (histogram(meter, SPEC_REQUEST_ACCEPTANCE).record, dict(scope))
        read = CollectionReads(self.folded).reader
        observe(meter, SPEC_REQUESTS, read(self._observe_requests), scope)
        if self.cfg.request_label:
            key = {names.ATTR_REQUEST_LABEL_KEY: self.cfg.request_label}
            observe(meter, SPEC_REQUEST_LABEL_OVERFLOW,
                    read(lambda t: [Observation(t.labels.overflow, key)]), scope)
        else:
            observe(meter, SPEC_REQUEST_LABEL_OVERFLOW, lambda: [], scope)
        observe(meter, SPEC_REQUEST_INVALID_TRACEPARENT,
                read(lambda t: [Observation(self.invalid_traceparents)]), scope)
        for b in self.totals.breakdowns:
            observe(meter, b.accept_length, read(lambda t, b=b: by_attributes(
                t.by[b.name].lengths, b.attribute, names.ATTR_LENGTH)), scope)
            observe(meter, b.accepted_tokens, read(lambda t, b=b: by_attributes(
                t.by[b.name].accepted, b.attribute)), scope)

    @staticmethod
    def _observe_requests(totals: RequestTotals):
        out = []
        for (b, label), v in sorted(totals.by_mean_length.items(),
                                    key=lambda kv: (kv[0][0], kv[0][1] or "")):
            attrs = {names.ATTR_REQUEST_LENGTH: b}
            if label is not None:
                attrs[names.ATTR_REQUEST_LABEL] = label
            out.append(Observation(v, attrs))
        return out
