"""What a finished request's span carries (issue #46, "On the span"): its id, its accept
length (mean and the runtime's histogram), the draft tokens accepted and proposed at each
draft position (the chain rule over the histogram; proposed where K is known and the
runtime drafted K on every step), the breakdown buckets it fell in, and the GenAI semantic
conventions' names for the figures they name. The real OpenTelemetry SDK records the spans
(its in-memory exporter) from real `Requests`; the live checks against the runtimes' own
per-request figures are in tests/test_trace_join_vllm.py and tests/test_trace_join_sglang.py.
"""
from __future__ import annotations

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from spectrace import config as config_mod
from spectrace import signals as S
from spectrace.export.resource import build_resource
from spectrace.families.requests import FinishedRequest, Requests, draft_identity


@pytest.fixture
def span_of():
    """span_of(request, K, env) -> the attributes of the one span it recorded."""
    made = []

    def make(r: FinishedRequest, positions: int = 3, env: dict | None = None,
             draft: dict | None = None) -> dict:
        exporter = InMemorySpanExporter()
        provider = TracerProvider()
        provider.add_span_processor(SimpleSpanProcessor(exporter))
        made.append(provider)
        cfg = config_mod.from_env(env or {}, request_sample_ratio=1.0)
        requests = Requests(cfg, provider.get_tracer("test"), positions=lambda: positions,
                            draft=draft)
        requests.finished(r)
        requests.folded()
        spans = exporter.get_finished_spans()
        assert [s.name for s in spans] == [S.SPAN_REQUEST]
        return dict(spans[0].attributes)
    yield make
    for p in made:
        p.shutdown()


def test_a_request_with_a_histogram_carries_every_figure(span_of):
    # 4 verify steps: 0, 1, 2 and 3 correct drafts -> 1 + 2 + 3 = 6 accepted
    r = FinishedRequest("req-1", 4, 6, [1, 1, 1, 1], 0.0, None, prompt_tokens=510,
                        cached_tokens=100, grammar="json_schema")
    assert span_of(r) == {
        "spectrace.request.id": "req-1",
        "spectrace.request.verify_steps": 4,
        "spectrace.request.accepted_tokens": 6,
        "spectrace.request.mean_accept_length": 2.5,
        "spectrace.request.sampling": "greedy",
        "gen_ai.request.temperature": 0.0,
        "spectrace.request.draft_tokens": 12,
        "spectrace.request.accepted_histogram": (1, 1, 1, 1),
        # position 0: the 3 steps with 1+ correct; 1: the 2 with 2+; 2: the 1 with 3
        "spectrace.request.accepted_per_position": (3, 2, 1),
        "spectrace.request.proposed_per_position": (4, 4, 4),
        "gen_ai.usage.input_tokens": 510,
        "gen_ai.usage.cache_read.input_tokens": 100,
        "spectrace.request.prefix_cache": "<50%",
        # from 511 tokens at its first step to 510 + 4 + 6 = 520 after its last
        "spectrace.request.context": ("<512", "512-1k"),
        "spectrace.request.grammar": "json",
    }


def test_a_request_without_a_histogram_has_no_per_position_acceptance(span_of):
    r = FinishedRequest("req-2", 5, 3, None, 0.7, 20)
    assert span_of(r) == {
        "spectrace.request.id": "req-2",
        "spectrace.request.verify_steps": 5,
        "spectrace.request.accepted_tokens": 3,
        "spectrace.request.mean_accept_length": 1.6,
        "spectrace.request.sampling": "0.5<=t<1",
        "gen_ai.request.temperature": 0.7,
        "gen_ai.request.top_k": 20.0,
        "spectrace.request.draft_tokens": 15,
        "spectrace.request.proposed_per_position": (5, 5, 5),
        "spectrace.request.prefix_cache": "unknown",
        "spectrace.request.grammar": "none",
    }


def test_a_histogram_that_does_not_sum_to_the_steps_is_left_out(span_of):
    attrs = span_of(FinishedRequest("req-3", 4, 2, [1, 1], 0.0, None))
    assert S.SPAN_ATTR_REQUEST_HISTOGRAM not in attrs
    assert S.SPAN_ATTR_REQUEST_ACCEPTED_PER_POSITION not in attrs


def test_k_unknown_gives_the_histograms_positions_and_no_proposed(span_of):
    """Before the process counted a step K is unknown: the positions are the histogram's
    (a short one says nothing was accepted beyond it), the proposed drafts unsaid."""
    attrs = span_of(FinishedRequest("req-4", 3, 2, [1, 2], 1.0, None), positions=0)
    assert attrs[S.SPAN_ATTR_REQUEST_ACCEPTED_PER_POSITION] == (2,)
    assert S.SPAN_ATTR_REQUEST_PROPOSED_PER_POSITION not in attrs
    assert S.SPAN_ATTR_REQUEST_DRAFT_TOKENS not in attrs


def test_a_short_histogram_pads_the_positions_to_k(span_of):
    attrs = span_of(FinishedRequest("req-5", 3, 2, [1, 2], 1.0, None), positions=3)
    assert attrs[S.SPAN_ATTR_REQUEST_HISTOGRAM] == (1, 2)
    assert attrs[S.SPAN_ATTR_REQUEST_ACCEPTED_PER_POSITION] == (2, 0, 0)


def test_fewer_drafts_than_steps_times_k_leave_proposed_unsaid(span_of):
    """vLLM drafts fewer near a request's end and counts them (`num_draft_tokens`): which
    positions went unproposed is not known, so no proposed per position."""
    r = FinishedRequest("req-6", 4, 6, [1, 1, 1, 1], 0.0, None, draft_tokens=10)
    attrs = span_of(r)
    assert attrs[S.SPAN_ATTR_REQUEST_DRAFT_TOKENS] == 10
    assert attrs[S.SPAN_ATTR_REQUEST_ACCEPTED_PER_POSITION] == (3, 2, 1)
    assert S.SPAN_ATTR_REQUEST_PROPOSED_PER_POSITION not in attrs
    assert span_of(r._replace(draft_tokens=12))[
        S.SPAN_ATTR_REQUEST_PROPOSED_PER_POSITION] == (4, 4, 4)


def test_the_label_is_on_the_span_when_one_is_set(span_of):
    r = FinishedRequest("req-7", 1, 0, [1], 0.0, None, label="tenant-a", prompt_tokens=100,
                        cached_tokens=60)
    attrs = span_of(r, env={"SPECTRACE_REQUEST_LABEL": "routing_key"})
    assert attrs[S.SPAN_ATTR_REQUEST_LABEL] == "tenant-a"
    assert attrs[S.SPAN_ATTR_REQUEST_PREFIX_CACHE] == ">=50%"
    assert attrs[S.SPAN_ATTR_REQUEST_CONTEXT] == ("<512",)


def test_the_gen_ai_names_are_the_semantic_conventions_own():
    from opentelemetry.semconv._incubating.attributes import gen_ai_attributes as G
    assert (S.SPAN_ATTR_REQUEST_PROMPT_TOKENS, S.SPAN_ATTR_REQUEST_CACHED_TOKENS,
            S.SPAN_ATTR_REQUEST_TEMPERATURE, S.SPAN_ATTR_REQUEST_TOP_K) == (
        G.GEN_AI_USAGE_INPUT_TOKENS, G.GEN_AI_USAGE_CACHE_READ_INPUT_TOKENS,
        G.GEN_AI_REQUEST_TEMPERATURE, G.GEN_AI_REQUEST_TOP_K)


def test_the_span_repeats_the_processs_draft_identity(span_of):
    """The draft named on spectrace's resource rides on the span too: under a host's
    tracer provider (SGLang --enable-trace) the span goes out with the host's resource."""
    cfg = config_mod.from_env({})
    resource = build_resource(cfg, {"draft_model": "/m/draft", "draft_hash": "ab12",
                                    "spec_algorithm": "EAGLE3", "model": "/m/target"}, "scheduler")
    draft = draft_identity(resource)
    assert draft == {"spectrace.draft_model": "/m/draft", "spectrace.draft_hash": "ab12",
                     "spectrace.spec_algorithm": "EAGLE3"}
    attrs = span_of(FinishedRequest("req-8", 1, 1, [0, 1], 0.0, None), draft=draft)
    assert {k: attrs[k] for k in draft} == draft
    assert draft_identity(build_resource(cfg, {}, "scheduler")) == {}
    assert draft_identity(None) == {}
