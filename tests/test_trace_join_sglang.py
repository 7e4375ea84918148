"""One trace per request on SGLang's real CPU server (issue #46): SGLang traces itself
(`--enable-trace --otlp-traces-endpoint`) and spectrace exports over OTLP, both to one real
OTLP receiver. A request sent with a caller's `traceparent` yields SGLang's request span
`Req <rid>` (a child of the caller's span, made in its tokenizer process) and spectrace's
`spectrace.request` under the caller's trace id, spectrace's a child of SGLang's request
span (the scheduler's copy of SGLang's trace context holds that span's id). The span's
acceptance is SGLang's own per-request figure (meta_info `spec_verify_ct`,
`spec_num_correct_drafts`). An unsampled caller's trace gets no span from spectrace.

A malformed `traceparent` is ignored by SGLang's tokenizer (the same W3C propagator): its
`Req` span starts a trace of its own and spectrace's span is its child; the header itself
never reaches the scheduler, so spectrace cannot count it there. With SGLang's tracing off
the header stays in the tokenizer process too: spectrace's span is a root span.
"""
from __future__ import annotations

import time

import pytest

from harness.server import start_server
from spectrace import signals as S
from tests.otlp_receivers import GrpcReceiver, attributes

pytestmark = pytest.mark.sglang

CALLER_TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"
CALLER_SPAN = "00f067aa0ba902b7"
UNSAMPLED_TRACE = "5cf92f3577b34da6a3ce929d0e0e4737"
MALFORMED = f"00-{CALLER_TRACE[:-1]}g-{CALLER_SPAN}-01"  # bad hex
PROMPT = [3, 7, 11]


class Run:
    def __init__(self, received, responses: dict, log: str) -> None:
        self.received = received
        self.responses = responses
        self.log = log

    def spans(self, name: str | None = None) -> list:
        return [s for _, s in list(self.received.spans) if name is None or s.name == name]

    def request_span(self, response: dict):
        rid = response["meta_info"]["id"]
        out = [s for s in self.spans(S.SPAN_REQUEST)
               if attributes(s.attributes)[S.SPAN_ATTR_REQUEST_ID] == rid]
        assert len(out) == 1, f"{len(out)} spans for {rid} (log {self.log})"
        return out[0]

    def sglang_request_span(self, response: dict):
        """SGLang's root span of the request (`Req <rid[:8]>`, attribute `rid`)."""
        rid = response["meta_info"]["id"]
        out = [s for s in self.spans() if s.name.strip().startswith("Req ")
               and attributes(s.attributes).get("rid") == rid]
        assert len(out) == 1, f"{len(out)} SGLang request spans for {rid} (log {self.log})"
        return out[0]


@pytest.fixture(scope="module")
def traced(tiny_models, tmp_path_factory):
    receiver = GrpcReceiver()
    log = str(tmp_path_factory.mktemp("trace-join") / "server.log")
    server = None
    try:
        server = start_server(tiny_models("partial"), log, env_extra={
            "SPECTRACE_ENABLED": "1", "SPECTRACE_EXPORTERS": "otlp",
            "SPECTRACE_METRIC_INTERVAL": "0.5", "SPECTRACE_REQUEST_SAMPLE_RATIO": "1",
            "OTEL_EXPORTER_OTLP_ENDPOINT": receiver.endpoint,
            "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"},
            extra_args=["--enable-trace", "--otlp-traces-endpoint", receiver.endpoint])
        responses = {
            "sampled": server.generate(PROMPT, 16, headers={
                "traceparent": f"00-{CALLER_TRACE}-{CALLER_SPAN}-01"}),
            "unsampled": server.generate(PROMPT, 16, headers={
                "traceparent": f"00-{UNSAMPLED_TRACE}-{CALLER_SPAN}-00"}),
            "malformed": server.generate(PROMPT, 16, headers={"traceparent": MALFORMED}),
        }
        out = Run(receiver.received, responses, log)
        deadline = time.time() + 120  # spectrace's two spans and SGLang's two request spans
        while time.time() < deadline:
            if (len(out.spans(S.SPAN_REQUEST)) >= 2
                    and sum(s.name.strip().startswith("Req ") for s in out.spans()) >= 2):
                break
            time.sleep(0.25)
        # no wait for what must not come: the requests finished in order (sampled, unsampled,
        # malformed), spectrace's spans are made from a queue in that order and each
        # tracer's batch processor exports in order, so once the malformed request's
        # spans are here a span of the unsampled one would have come before them
        yield out
    finally:
        if server is not None:
            server.stop()
        receiver.stop()


def test_sampled_caller_trace_holds_sglangs_request_span_and_spectraces(traced):
    response = traced.responses["sampled"]
    ours, sglangs = traced.request_span(response), traced.sglang_request_span(response)
    assert ours.trace_id.hex() == sglangs.trace_id.hex() == CALLER_TRACE
    assert sglangs.parent_span_id.hex() == CALLER_SPAN
    assert ours.parent_span_id == sglangs.span_id  # a child of SGLang's request span


def test_span_acceptance_is_sglangs_own_per_request_figure(traced):
    meta = traced.responses["sampled"]["meta_info"]
    ours = attributes(traced.request_span(traced.responses["sampled"]).attributes)
    assert ours[S.SPAN_ATTR_REQUEST_STEPS] == meta["spec_verify_ct"]
    assert ours[S.SPAN_ATTR_REQUEST_ACCEPTED] == meta["spec_num_correct_drafts"]
    assert ours[S.SPAN_ATTR_REQUEST_MEAN_LENGTH] == (
        1 + meta["spec_num_correct_drafts"] / meta["spec_verify_ct"])


def test_span_histogram_and_positions_are_sglangs_own(traced):
    """The span's histogram is SGLang's `spec_correct_drafts_histogram` (meta_info), its
    accepted drafts per position that histogram's by the chain rule (a step with j correct
    accepted positions 0..j-1), its proposed ones its verify steps at each of the K
    positions; the draft identity is on the span (SGLang's resource names none)."""
    meta = traced.responses["sampled"]["meta_info"]
    span = traced.request_span(traced.responses["sampled"])
    ours = attributes(span.attributes)
    hist, steps = meta["spec_correct_drafts_histogram"], meta["spec_verify_ct"]
    assert ours[S.SPAN_ATTR_REQUEST_HISTOGRAM] == hist
    k = 3  # the harness's --speculative-num-steps
    assert ours[S.SPAN_ATTR_REQUEST_ACCEPTED_PER_POSITION] == [
        sum(hist[i + 1:]) for i in range(k)]
    assert sum(ours[S.SPAN_ATTR_REQUEST_ACCEPTED_PER_POSITION]) == meta[
        "spec_num_correct_drafts"]
    assert ours[S.SPAN_ATTR_REQUEST_PROPOSED_PER_POSITION] == [steps] * k
    assert ours[S.SPAN_ATTR_REQUEST_PROMPT_TOKENS] == meta["prompt_tokens"]
    assert ours[S.SPAN_ATTR_REQUEST_CACHED_TOKENS] == meta["cached_tokens"]
    [resource] = [res for res, s in traced.received.spans if s is span]
    # SGLang's own tracer provider exports the span (its resource): the span names the draft
    assert ours[S.RES_DRAFT_MODEL] and S.RES_DRAFT_MODEL not in resource


def test_unsampled_caller_trace_gets_no_span_from_spectrace(traced):
    assert traced.responses["unsampled"]["meta_info"]["completion_tokens"] == 16
    assert [s.name for s in traced.spans(S.SPAN_REQUEST)
            if s.trace_id.hex() == UNSAMPLED_TRACE] == []


def test_malformed_traceparent_is_ignored_and_served(traced):
    response = traced.responses["malformed"]
    assert response["meta_info"]["completion_tokens"] == 16
    ours, sglangs = traced.request_span(response), traced.sglang_request_span(response)
    assert not sglangs.parent_span_id  # SGLang ignored the header: a trace of its own
    assert ours.trace_id == sglangs.trace_id and ours.parent_span_id == sglangs.span_id
    assert ours.trace_id.hex() not in (CALLER_TRACE, UNSAMPLED_TRACE)



# -- SGLang not tracing: the header stays in its tokenizer process --------------------------
@pytest.fixture(scope="module")
def untraced(tiny_models, tmp_path_factory, traced):
    """After `traced` (one server at a time): the same server without `--enable-trace`."""
    receiver = GrpcReceiver()
    log = str(tmp_path_factory.mktemp("trace-off") / "server.log")
    server = None
    try:
        server = start_server(tiny_models("partial"), log, env_extra={
            "SPECTRACE_ENABLED": "1", "SPECTRACE_EXPORTERS": "otlp",
            "SPECTRACE_METRIC_INTERVAL": "0.5", "SPECTRACE_REQUEST_SAMPLE_RATIO": "1",
            "OTEL_EXPORTER_OTLP_ENDPOINT": receiver.endpoint,
            "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"})
        response = server.generate(PROMPT, 16, headers={
            "traceparent": f"00-{CALLER_TRACE}-{CALLER_SPAN}-01"})
        out = Run(receiver.received, {"sampled": response}, log)
        deadline = time.time() + 120
        while time.time() < deadline and not out.spans(S.SPAN_REQUEST):
            time.sleep(0.25)
        yield out
    finally:
        if server is not None:
            server.stop()
        receiver.stop()


def test_without_sglang_tracing_the_span_is_a_root_span(untraced):
    ours = untraced.request_span(untraced.responses["sampled"])
    assert not ours.parent_span_id and ours.trace_id.hex() != CALLER_TRACE
