"""Speculative steps: how many each worker ran, which are sampled as spans, and the step in
flight, the one place where the hooks of one step pass each other state.

`StepInFlight` is that place. A process runs one speculative worker (SGLang's eagle
worker, vLLM's model runner or EngineCore scheduler) and one step at a time, in one
thread, so one record per process is enough; each field says which hook sets it, which
reads it, and when it is cleared. Hooks go through its methods; nothing else keeps
per-step state (no module slots, context variables or sentinels). State that belongs to a
runtime object for its whole life (a worker audited, a draft's widths) is kept on that
object instead (`objstate`).

Step spans: a step span is started only for the sampled fraction of speculative steps and
made current, so an anomaly inside the step is recorded on it; its children open only
under a sampled step, so an unsampled step costs no span at all.
"""
from __future__ import annotations

import random
from typing import NamedTuple

from opentelemetry import context as otel_context
from opentelemetry import trace as otel_trace

from .. import names
from ..names import COUNTER, GAUGE, MetricSpec
from .instruments import by_attributes, observe

SPEC_STEPS = MetricSpec(
    "spectrace.spec.steps", COUNTER, "{step}",
    "Speculative decode steps (draft + verify rounds) seen by SGLang's eagle worker or "
    "vLLM's EngineCore.", (names.ATTR_WORKER,), counted_once=True)
SPEC_TOPK = MetricSpec(
    "spectrace.spec.topk", GAUGE, "1",
    "The draft's top-k per speculative step (1: chain drafting), by worker.",
    (names.ATTR_WORKER,))
METRICS = (SPEC_STEPS, SPEC_TOPK)


class StepInFlight:
    """What the hooks of the step in flight pass each other.

    - `span`, `tail`: the sampled step span (set by `Steps.start_span` at the step's start,
      cleared by `Steps.end_span` at its end) and its last child when that child ends with
      the step (SGLang v2's draft-extend, started when verify ends).
    - `cost`: the measured step (`step_cost.StepCost`), set by `StepCosts.start` at the
      step's start, read by the phase hooks, cleared by `StepCosts.end` (or by the next
      step's start when a measured step raised).
    - `last_end`: (host time, row) when the last measured step ended on a CPU clock, for
      the time between steps; cleared by a step that is not speculative (prefill).
    - `seq_lens`: the sequence lengths of the batch SGLang's scheduler is resolving, kept
      by its resolve hook and taken by the accept-count hook that the resolve calls;
      `graphed`, beside them, whether that batch's verify ran as a CUDA-graph replay, and
      `width`, the tokens its verify checked per request (SGLang's
      `speculative_num_draft_tokens` of the result: K + 1 for a chain, 1 with no draft).
    - `tree_due`: a tree agreement due in this verify call (set by verify's `before`,
      taken by the tree-compaction hook inside it, cleared by verify's cleanup).
    - `started_ns`: when vLLM's engine step began (its `step` hook), for the step span
      the scheduler's bookkeeping starts.
    - `plain`: (tokens, context, requests) of a short step without drafts that vLLM's
      `execute_model` hook saw, for its `_model_forward` hook to time as a plain forward
      (`StepCosts.start_plain_forward`); taken there.
    """

    __slots__ = ("span", "tail", "cost", "last_end", "seq_lens", "graphed", "width",
                 "tree_due", "started_ns", "plain")

    def __init__(self) -> None:
        self.span = self.tail = self.cost = self.last_end = None
        self.seq_lens = self.graphed = self.width = self.tree_due = self.started_ns = None
        self.plain = None

    def keep_seq_lens(self, lens, graphed=None, width=None) -> None:
        self.seq_lens, self.graphed, self.width = lens, graphed, width

    def take_seq_lens(self) -> tuple:
        """(the lengths, graphed) `keep_seq_lens` kept, both cleared (`width` with them:
        read it first)."""
        kept = self.seq_lens, self.graphed
        self.seq_lens = self.graphed = self.width = None
        return kept

    def due_tree(self, due) -> None:
        self.tree_due = due

    def take_tree(self):
        due, self.tree_due = self.tree_due, None
        return due

    def engine_step_started(self, ns: int) -> None:
        self.started_ns = ns


class StepSpan(NamedTuple):
    """A sampled step span in flight, and the context token that made it current."""

    span: otel_trace.Span
    token: object


class Steps:
    """Step counts per worker kind, the draft's top-k per worker class, the sampling of
    step spans and the step in flight."""

    def __init__(self, cfg, tracer) -> None:
        self.cfg = cfg
        self.tracer = tracer
        self.counts: dict[str, int] = {}
        self.topk: dict[str, int] = {}
        self.inflight = StepInFlight()
        self._rand = random.random

    def register(self, meter, scope: dict) -> None:
        observe(meter, SPEC_STEPS, lambda: by_attributes(self.counts, names.ATTR_WORKER), scope)
        observe(meter, SPEC_TOPK, lambda: by_attributes(self.topk, names.ATTR_WORKER), scope)

    # -- hot path -----------------------------------------------------------------------
    def begin(self, worker: str) -> bool:
        """Count one speculative step; True when it is sampled as a span."""
        counts = self.counts
        counts[worker] = counts.get(worker, 0) + 1
        r = self.cfg.step_sample_ratio
        return r > 0 and (r >= 1 or self._rand() < r)

    def count(self, worker: str) -> int:
        """Steps counted so far under `worker` (for every-Nth-step sampling)."""
        return self.counts.get(worker, 0)

    def note_topk(self, worker: str, topk: int) -> None:
        self.topk[worker] = topk

    @property
    def sampled(self) -> bool:
        """The step in flight is sampled as a span."""
        return self.inflight.span is not None

    def start_span(self, attrs: dict, start_time: int | None = None) -> StepSpan:
        """Start a step span (at `start_time`, ns since the epoch, when the step began before
        the hook ran) and make it current; returns the context for `end_span`."""
        span = self.tracer.start_span(names.SPAN_STEP, attributes=attrs, start_time=start_time)
        token = otel_context.attach(otel_trace.set_span_in_context(span))
        self.inflight.span = span
        return StepSpan(span, token)

    def end_span(self, step: StepSpan) -> None:
        inflight = self.inflight
        inflight.span = None
        tail, inflight.tail = inflight.tail, None
        if tail is not None:
            tail.end()
        otel_context.detach(step.token)
        step.span.end()

    def child_span(self, name: str):
        """A child span of the sampled step in flight, or None when it is not sampled."""
        return None if self.inflight.span is None else self.tracer.start_span(name)

    def verify_starts(self):
        """Under a sampled step whose draft phases are not wrapped (SGLang v2, where they are
        told apart by verify's boundaries): the draft span, from the step's start to now,
        and the verify span, started now and returned."""
        self.tracer.start_span(names.SPAN_DRAFT, start_time=getattr(
            self.inflight.span, "start_time", None)).end()
        return self.tracer.start_span(names.SPAN_VERIFY)

    def verify_ends(self, span) -> None:
        """The verify span ends; the draft-extend span starts (`end_span` ends it)."""
        span.end()
        if self.inflight.span is not None:
            self.inflight.tail = self.tracer.start_span(names.SPAN_DRAFT_EXTEND)

