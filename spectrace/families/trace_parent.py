"""The caller's W3C trace context of a finished request, as the parent of spectrace's
request span: so the span lands in the trace the caller (gateway, client) started, beside
the runtime's own request spans, instead of starting a trace of its own.

The carrier is what the runtime already keeps per request (vLLM's `Request.trace_headers`;
SGLang's trace context of its request span `Req <rid>`, a W3C carrier or an extracted
OpenTelemetry context), read when the request finishes and parsed here, in the
metric reader's thread: nothing is added to the decode loop. Parsing is OpenTelemetry's
W3C TraceContext propagator, which ignores a malformed `traceparent` (wrong version, bad
hex, all-zero ids) as the W3C spec says; such a request gets a root span, as without a
header, and is counted once (`spectrace.spec.request_invalid_traceparent`).
"""
from __future__ import annotations

from typing import Mapping, NamedTuple

from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

TRACEPARENT = "traceparent"
_PROPAGATOR = TraceContextTextMapPropagator()


class Parent(NamedTuple):
    """`context`: what `start_span` takes as its parent (None: a root span); `sampled`: the
    caller's sampled flag (True without a valid parent); `invalid`: a `traceparent` was
    sent but is malformed."""
    context: Context | None
    sampled: bool
    invalid: bool


ROOT = Parent(None, True, False)


def parent_of(carrier: Mapping[str, str] | Context | None) -> Parent:
    """The parent a request's span takes from its carrier (W3C `traceparent`/`tracestate`),
    or from a context the runtime already extracted (SGLang's, holding its request span)."""
    if not carrier:
        return ROOT
    if isinstance(carrier, Context):  # a dict too: before the carrier's reading
        span_context = trace.get_current_span(carrier).get_span_context()
        return Parent(carrier, span_context.trace_flags.sampled, False) \
            if span_context.is_valid else ROOT
    header = _header(carrier)
    if header is None:
        return ROOT
    ctx = _PROPAGATOR.extract({TRACEPARENT: header, **_tracestate(carrier)})
    span_context = trace.get_current_span(ctx).get_span_context()
    if not span_context.is_valid:
        return Parent(None, True, True)
    return Parent(ctx, span_context.trace_flags.sampled, False)


def _header(carrier: Mapping[str, str]) -> str | None:
    """The `traceparent` value, its key in any case (HTTP header names are not
    case-sensitive; a runtime may keep them as received)."""
    value = carrier.get(TRACEPARENT)
    if value is None:
        for key, v in carrier.items():
            if isinstance(key, str) and key.lower() == TRACEPARENT:
                value = v
                break
    if isinstance(value, (list, tuple)):
        value = value[0] if value else None
    return value if isinstance(value, str) else ("" if value is not None else None)


def _tracestate(carrier: Mapping[str, str]) -> dict:
    for key, v in carrier.items():
        if isinstance(key, str) and key.lower() == "tracestate" and isinstance(v, str):
            return {"tracestate": v}
    return {}
