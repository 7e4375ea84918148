"""A finished request's span joins the caller's trace (issue #46): with a valid W3C
`traceparent` kept by the runtime, spectrace's `spectrace.request` span is a child of the
caller's span; the caller's sampled flag decides whether it is recorded at all (instead of
SPECTRACE_REQUEST_SAMPLE_RATIO); a malformed header is ignored as the W3C spec says (a
root span, as without one) and counted once. The real OpenTelemetry SDK records the spans
(its in-memory exporter) and the real Requests family makes them; the live joins with
vLLM's and SGLang's own request spans are in tests/test_trace_join_vllm.py and
tests/test_trace_join_sglang.py.
"""
from __future__ import annotations

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from spectrace import config as config_mod
from spectrace import signals as S
from spectrace.families.requests import FinishedRequest, Requests
from spectrace.families.trace_parent import parent_of

TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"
SPAN_ID = "00f067aa0ba902b7"
SAMPLED = f"00-{TRACE_ID}-{SPAN_ID}-01"
UNSAMPLED = f"00-{TRACE_ID}-{SPAN_ID}-00"
MALFORMED = {
    "wrong version": f"ff-{TRACE_ID}-{SPAN_ID}-01",
    "bad hex": f"00-{TRACE_ID[:-1]}g-{SPAN_ID}-01",
    "all-zero trace id": f"00-{'0' * 32}-{SPAN_ID}-01",
    "all-zero span id": f"00-{TRACE_ID}-{'0' * 16}-01",
    "too short": f"00-{TRACE_ID}-{SPAN_ID}",
    "empty": "",
}


@pytest.fixture
def family():
    """family(ratio) -> (Requests, the spans it recorded)."""
    made = []

    def make(ratio: float = 1.0):
        exporter = InMemorySpanExporter()
        provider = TracerProvider()
        provider.add_span_processor(SimpleSpanProcessor(exporter))
        made.append(provider)
        cfg = config_mod.from_env({}, request_sample_ratio=ratio)
        return Requests(cfg, provider.get_tracer("test"), positions=lambda: 3), exporter
    yield make
    for p in made:
        p.shutdown()


def finish(requests: Requests, carrier: dict | None, rid: str = "req-1") -> None:
    requests.finished(FinishedRequest(rid, 4, 6, [0, 1, 2, 1], 0.0, None,
                                      trace_carrier=carrier))
    requests.folded()


def test_a_valid_traceparent_parents_the_span_on_the_callers_span(family):
    requests, spans = family()
    finish(requests, {"traceparent": SAMPLED, "tracestate": "vendor=1"})
    [span] = spans.get_finished_spans()
    assert span.name == S.SPAN_REQUEST
    assert format(span.context.trace_id, "032x") == TRACE_ID
    assert format(span.parent.span_id, "016x") == SPAN_ID and span.parent.is_remote
    assert span.context.trace_state.get("vendor") == "1"
    assert span.attributes[S.SPAN_ATTR_REQUEST_MEAN_LENGTH] == 2.5
    assert requests.invalid_traceparents == 0


def test_the_header_name_is_not_case_sensitive(family):
    requests, spans = family()
    finish(requests, {"Traceparent": SAMPLED})
    [span] = spans.get_finished_spans()
    assert format(span.context.trace_id, "032x") == TRACE_ID


def test_an_unsampled_caller_gets_no_span_whatever_the_ratio(family):
    requests, spans = family(ratio=1.0)
    finish(requests, {"traceparent": UNSAMPLED})
    assert spans.get_finished_spans() == ()
    assert requests.totals.by_mean_length  # the request is counted all the same


def test_a_sampled_caller_gets_its_span_whatever_the_ratio(family):
    requests, spans = family(ratio=0.0)
    finish(requests, {"traceparent": SAMPLED})
    assert len(spans.get_finished_spans()) == 1
    finish(requests, None, "req-2")  # no caller: the ratio (0) decides
    assert len(spans.get_finished_spans()) == 1


@pytest.mark.parametrize("why", sorted(MALFORMED))
def test_a_malformed_traceparent_is_ignored_and_counted_once(family, why):
    requests, spans = family()
    assert parent_of({"traceparent": MALFORMED[why]}).invalid
    finish(requests, {"traceparent": MALFORMED[why]})
    [span] = spans.get_finished_spans()
    assert span.parent is None  # a root span, as without a header
    assert format(span.context.trace_id, "032x") != TRACE_ID
    requests.folded()  # a second collection counts nothing again
    assert requests.invalid_traceparents == 1


def test_no_carrier_or_no_traceparent_is_a_root_span_not_counted(family):
    requests, spans = family()
    finish(requests, None, "a")
    finish(requests, {"tracestate": "vendor=1"}, "b")
    assert [s.parent for s in spans.get_finished_spans()] == [None, None]
    assert requests.invalid_traceparents == 0


@pytest.mark.parametrize("flags", [trace.TraceFlags.SAMPLED, trace.TraceFlags.DEFAULT])
def test_a_runtimes_extracted_context_is_the_parent(family, flags):
    """SGLang's scheduler holds its request span's context, already extracted."""
    requests, spans = family()
    runtime_span = trace.SpanContext(int(TRACE_ID, 16), int(SPAN_ID, 16), is_remote=True,
                                     trace_flags=trace.TraceFlags(flags))
    finish(requests, trace.set_span_in_context(trace.NonRecordingSpan(runtime_span)))
    got = spans.get_finished_spans()
    if flags == trace.TraceFlags.SAMPLED:
        [span] = got
        assert format(span.parent.span_id, "016x") == SPAN_ID
        assert format(span.context.trace_id, "032x") == TRACE_ID
    else:
        assert got == ()
    assert requests.invalid_traceparents == 0
