"""One trace per request on vLLM's real CPU server (issue #46): vLLM traces itself
(`--otlp-traces-endpoint`) and spectrace exports over OTLP, both to one real OTLP
receiver. A request sent with a caller's `traceparent` yields vLLM's `llm_request` span
and spectrace's `spectrace.request` span under the caller's trace id, each a child of the
caller's span (vLLM makes `llm_request` in the API server when the request's output is
final, after the EngineCore freed it: its id is not known where spectrace's span is made,
so it cannot be the parent). The span's acceptance is vLLM's own per-request figure
(`--per-request-spec-decode-metrics summary`: the response's
`metrics.speculative_decoding`). An unsampled caller's trace gets no span; a malformed
`traceparent` is ignored (a root span), the request served, and counted once.
"""
from __future__ import annotations

import time

import pytest

from spectrace import signals as S
from tests.otlp_receivers import GrpcReceiver, attributes

pytestmark = pytest.mark.vllm

CALLER_TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"
CALLER_SPAN = "00f067aa0ba902b7"
UNSAMPLED_TRACE = "5cf92f3577b34da6a3ce929d0e0e4737"
MALFORMED = f"00-{CALLER_TRACE[:-1]}g-{CALLER_SPAN}-01"  # bad hex
PROMPT = [3, 7, 11]


class Run:
    def __init__(self, receiver, responses: dict, log: str) -> None:
        self.received = receiver.received
        self.responses = responses
        self.log = log

    def spans(self, name: str) -> list:
        return [s for _, s in list(self.received.spans) if s.name == name]

    def request_span(self, response: dict):
        """spectrace's span of this response's request (vLLM's engine request id is the
        response's id followed by `-<index>-<random>`)."""
        out = [s for s in self.spans(S.SPAN_REQUEST)
               if str(attributes(s.attributes)[S.SPAN_ATTR_REQUEST_ID]).startswith(
                   response["id"] + "-")]
        assert len(out) == 1, f"{len(out)} spans for {response['id']} (log {self.log})"
        return out[0]

    def llm_request_span(self, response: dict):
        out = [s for s in self.spans("llm_request")
               if str(attributes(s.attributes).get("gen_ai.request.id", "")).startswith(
                   response["id"])]
        assert len(out) == 1, f"{len(out)} llm_request spans for {response['id']}"
        return out[0]


@pytest.fixture(scope="module")
def traced(tiny_models, vllm_server):
    receiver = GrpcReceiver()
    try:
        run = vllm_server(tiny_models("partial"), env={
            "SPECTRACE_EXPORTERS": "file,otlp", "SPECTRACE_METRIC_INTERVAL": "0.5",
            "SPECTRACE_REQUEST_SAMPLE_RATIO": "1",
            "OTEL_EXPORTER_OTLP_ENDPOINT": receiver.endpoint,
            "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"},
            extra_args=["--per-request-spec-decode-metrics", "summary",
                        "--otlp-traces-endpoint", receiver.endpoint])
        server = run.server
        responses = {
            "sampled": server.complete(PROMPT, 24, headers={
                "traceparent": f"00-{CALLER_TRACE}-{CALLER_SPAN}-01",
                "tracestate": "caller=1"}),
            "unsampled": server.complete(PROMPT, 24, headers={
                "traceparent": f"00-{UNSAMPLED_TRACE}-{CALLER_SPAN}-00"}),
            "malformed": server.complete(PROMPT, 24, headers={"traceparent": MALFORMED}),
        }
        out = Run(receiver, responses, str(run.log_path))
        invalid = S.SPEC_REQUEST_INVALID_TRACEPARENT.name
        deadline = time.time() + 120  # spectrace's two spans, vLLM's two, the counter at 1
        while time.time() < deadline:
            if (len(out.spans(S.SPAN_REQUEST)) >= 2 and len(out.spans("llm_request")) >= 2
                    and any(v >= 1 for _, v in out.received.metric_points(invalid))):
                break
            time.sleep(0.25)
        # no wait for what must not come: the requests finished in order (sampled, unsampled,
        # malformed), spectrace's spans are made from a queue in that order and each
        # tracer's batch processor exports in order, so once the malformed request's
        # spans are here a span of the unsampled one would have come before them
        yield out
    finally:
        vllm_server.stop_all()
        receiver.stop()


def test_sampled_caller_joins_vllms_request_span(traced):
    response = traced.responses["sampled"]
    ours, vllms = traced.request_span(response), traced.llm_request_span(response)
    assert ours.trace_id.hex() == vllms.trace_id.hex() == CALLER_TRACE
    assert ours.parent_span_id.hex() == vllms.parent_span_id.hex() == CALLER_SPAN
    assert ours.trace_state == "caller=1"


def test_span_acceptance_is_vllms_own_per_request_figure(traced):
    response = traced.responses["sampled"]
    theirs = response["metrics"]["speculative_decoding"]
    ours = attributes(traced.request_span(response).attributes)
    assert ours[S.SPAN_ATTR_REQUEST_MEAN_LENGTH] == theirs["mean_acceptance_length"]
    assert ours[S.SPAN_ATTR_REQUEST_STEPS] == theirs["num_spec_steps"]
    assert ours[S.SPAN_ATTR_REQUEST_ACCEPTED] == theirs["num_accepted_draft_tokens"]
    assert ours[S.SPAN_ATTR_REQUEST_DRAFT_TOKENS] == theirs["num_draft_tokens"]


def chain_rule(histogram: list, k: int) -> list:
    """Draft tokens accepted at positions 0..k-1 of a request whose verify steps accepted j
    drafts `histogram[j]` times (a step with j accepted positions 0..j-1)."""
    return [sum(histogram[i + 1:]) for i in range(k)]


def test_span_histogram_and_positions_are_vllms_own(traced):
    """The span's histogram is vLLM's `acceptance_histogram`, its accepted drafts per
    position that histogram's by the chain rule, its proposed ones K at every verify step
    where vLLM drafted K on every one (its `num_draft_tokens`), else left out; the draft
    identity is on the span."""
    response = traced.responses["sampled"]
    theirs = response["metrics"]["speculative_decoding"]
    span = traced.request_span(response)
    ours = attributes(span.attributes)
    k, steps = theirs["num_spec_tokens"], theirs["num_spec_steps"]
    assert ours[S.SPAN_ATTR_REQUEST_HISTOGRAM] == theirs["acceptance_histogram"]
    assert ours[S.SPAN_ATTR_REQUEST_ACCEPTED_PER_POSITION] == chain_rule(
        theirs["acceptance_histogram"], k)
    assert sum(ours[S.SPAN_ATTR_REQUEST_ACCEPTED_PER_POSITION]) == theirs[
        "num_accepted_draft_tokens"]
    if theirs["num_draft_tokens"] == steps * k:
        assert ours[S.SPAN_ATTR_REQUEST_PROPOSED_PER_POSITION] == [steps] * k
    else:
        assert S.SPAN_ATTR_REQUEST_PROPOSED_PER_POSITION not in ours
    assert ours[S.SPAN_ATTR_REQUEST_PROMPT_TOKENS] == response["usage"]["prompt_tokens"]
    assert ours[S.SPAN_ATTR_REQUEST_TEMPERATURE] == 0.0  # the harness's greedy requests
    assert ours[S.RES_DRAFT_MODEL]  # the draft identity, repeated from the resource


def test_unsampled_caller_trace_gets_no_span(traced):
    assert traced.responses["unsampled"]["choices"][0]["text"]
    assert [s.name for _, s in traced.received.spans
            if s.trace_id.hex() == UNSAMPLED_TRACE] == []


def test_malformed_traceparent_is_ignored_served_and_counted_once(traced):
    response = traced.responses["malformed"]
    assert response["choices"][0]["text"]
    ours = traced.request_span(response)
    assert not ours.parent_span_id  # a root span of a trace of its own
    assert ours.trace_id.hex() not in (CALLER_TRACE, UNSAMPLED_TRACE)
    points = traced.received.metric_points(S.SPEC_REQUEST_INVALID_TRACEPARENT.name)
    assert points and max(v for _, v in points) == 1



# -- vLLM not tracing: the header does not reach the EngineCore -----------------------------
@pytest.fixture(scope="module")
def untraced(tiny_models, vllm_server, traced):
    """After `traced` (one server at a time): the same server without
    `--otlp-traces-endpoint`."""
    receiver = GrpcReceiver()
    try:
        run = vllm_server(tiny_models("partial"), env={
            "SPECTRACE_EXPORTERS": "otlp", "SPECTRACE_METRIC_INTERVAL": "0.5",
            "SPECTRACE_REQUEST_SAMPLE_RATIO": "1",
            "OTEL_EXPORTER_OTLP_ENDPOINT": receiver.endpoint,
            "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"},
            extra_args=["--per-request-spec-decode-metrics", "summary"])
        response = run.server.complete(PROMPT, 24, headers={
            "traceparent": f"00-{CALLER_TRACE}-{CALLER_SPAN}-01"})
        out = Run(receiver, {"sampled": response}, str(run.log_path))
        deadline = time.time() + 120
        while time.time() < deadline and not out.spans(S.SPAN_REQUEST):
            time.sleep(0.25)
        yield out, run.server.log()
    finally:
        vllm_server.stop_all()
        receiver.stop()


def test_without_vllm_tracing_the_span_is_a_root_span(untraced):
    """vLLM's `AsyncLLM.add_request` drops the trace headers (and logs that it did) when it
    does not trace: the EngineCore's request carries none."""
    run, log = untraced
    ours = run.request_span(run.responses["sampled"])
    assert not ours.parent_span_id and ours.trace_id.hex() != CALLER_TRACE
    assert "Received a request with trace context but tracing is disabled" in log
