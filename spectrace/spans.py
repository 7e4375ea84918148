"""Sampled step spans and their children (draft, verify, draft-extend).

A step span is started only for the sampled fraction of speculative steps and made
current, so an anomaly inside the step is recorded on it; children open only under a
sampled step, so an unsampled step costs no span at all. The step span in flight is held
by the process's Recorder (one eagle worker per process, one step at a time), and so is
its last child when it ends with the step (`tail_span`: SGLang v2's draft-extend).
"""
from __future__ import annotations

from typing import NamedTuple

from opentelemetry import context as otel_context
from opentelemetry import trace as otel_trace

from . import signals
from .process import STATE


class StepSpan(NamedTuple):
    """A sampled step span in flight, and the context token that made it current."""

    span: otel_trace.Span
    token: object


def start_step(rec, attrs: dict, start_time: int | None = None) -> StepSpan:
    """Start a step span (at `start_time`, ns since the epoch, when the step began before
    the hook ran) and make it current; returns the context for `end_step`."""
    span = rec.tel.tracer.start_span(signals.SPAN_STEP, attributes=attrs, start_time=start_time)
    token = otel_context.attach(otel_trace.set_span_in_context(span))
    rec.step_span = span
    return StepSpan(span, token)


def end_step(step: StepSpan) -> None:
    rec = STATE.recorder
    if rec is not None:
        rec.step_span = None
        tail, rec.tail_span = rec.tail_span, None
        if tail is not None:
            tail.end()
    otel_context.detach(step.token)
    step.span.end()


def verify_starts(rec):
    """Under a sampled step whose draft phases are not wrapped (SGLang v2, where they are
    told apart by verify's boundaries): the draft span, from the step's start to now, and
    the verify span, started now and returned."""
    tracer = rec.tel.tracer
    tracer.start_span(signals.SPAN_DRAFT,
                      start_time=getattr(rec.step_span, "start_time", None)).end()
    return tracer.start_span(signals.SPAN_VERIFY)


def verify_ends(rec, span) -> None:
    """The verify span ends; the draft-extend span starts (`end_step` ends it)."""
    span.end()
    if rec.step_span is not None:
        rec.tail_span = rec.tel.tracer.start_span(signals.SPAN_DRAFT_EXTEND)

