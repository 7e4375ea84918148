"""Acceptance by prefix-cache hits and by structured output (`families.breakdowns`
PREFIX_CACHE and GRAMMAR): the fixed buckets, the Recorder's per-request counts reaching
every view of the report, and SGLang 0.5.23's own `Req` objects (with its `SamplingParams`)
read by the release hook. The real servers: tests/test_e2e_prefix_grammar.py.
"""
from __future__ import annotations

import json
import os

import pytest

from spectrace import process as process_mod
from spectrace import signals as S
from spectrace.families.breakdowns import GRAMMAR, PREFIX_CACHE
from spectrace.families.requests import FinishedRequest
from spectrace.file_layout import SPANS_FILE
from spectrace.report import build_report, render_text
from spectrace.report.html import render_html
from spectrace.rules.requests import grammar_bucket, prefix_cache_bucket
from tests.test_request_labels import flush, recorder  # noqa: F401 - the fixture


# -- the buckets ----------------------------------------------------------------------------
@pytest.mark.parametrize("cached,prompt,bucket", [
    (0, 100, "none"), (1, 100, "<50%"), (49, 100, "<50%"), (50, 100, ">=50%"),
    (99, 100, ">=50%"), (100, 100, ">=50%"),
    (5, None, "unknown"), (5, 0, "unknown"), (None, 100, "unknown"), (-1, 100, "unknown")])
def test_prefix_cache_bucket(cached, prompt, bucket):
    assert prefix_cache_bucket(cached, prompt) == bucket


@pytest.mark.parametrize("kind,bucket", [
    (None, "none"), ("", "none"),
    ("json_schema", "json"), ("JSON", "json"), ("JSON_OBJECT", "json"),  # SGLang, vLLM
    ("regex", "regex"), ("REGEX", "regex"), ("ebnf", "grammar"), ("GRAMMAR", "grammar"),
    ("CHOICE", "choice"), ("structural_tag", "structural_tag"),
    ("STRUCTURAL_TAG", "structural_tag"), ("a-new-kind", "grammar")])
def test_grammar_bucket(kind, bucket):
    assert grammar_bucket(kind) == bucket


def test_every_bucket_is_declared():
    assert PREFIX_CACHE.buckets == ("none", "<50%", ">=50%")
    assert set(GRAMMAR.buckets) == {grammar_bucket(k) for k in (
        None, "json", "regex", "grammar", "choice", "structural_tag")}
    # their rules (tests/test_breakdowns.py): the prefix cache a warning with an alert,
    # structured output info without one
    assert PREFIX_CACHE.rule.ordered and PREFIX_CACHE.alert
    assert not GRAMMAR.rule.ordered and not GRAMMAR.alert


# -- the Recorder and the report ------------------------------------------------------------
def _finished(i, hist, prompt, cached, grammar):
    steps = sum(hist)
    accepted = sum(j * n for j, n in enumerate(hist))
    return FinishedRequest(f"r{i}", steps, accepted, list(hist), 0.0, None, None, None,
                           prompt, cached, grammar)


def test_requests_reach_both_breakdowns_in_every_view(recorder):  # noqa: F811
    rec, tel = recorder()
    rec.acceptance.add([1, 1], 3)  # the report reads the K the step counts carry
    rec.requests.finished(_finished(0, [0, 4, 0, 0], 64, 0, None))        # none, none
    rec.requests.finished(_finished(1, [2, 2, 0, 0], 64, 20, "json_schema"))  # <50%, json
    rec.requests.finished(_finished(2, [0, 0, 0, 6], 64, 63, None))        # >=50%, none
    rec.requests.finished(_finished(3, [1, 0, 0, 0], None, None, "regex"))  # unknown, regex
    metrics = flush(tel)
    by_prefix = {(p["attributes"][S.ATTR_PREFIX_CACHE], p["attributes"][S.ATTR_LENGTH]):
                 p["value"] for p in metrics[PREFIX_CACHE.accept_length.name]}
    assert by_prefix == {("none", 2): 4, ("<50%", 1): 2, ("<50%", 2): 2, (">=50%", 4): 6,
                         ("unknown", 1): 1}
    by_grammar = {(p["attributes"][S.ATTR_GRAMMAR], p["attributes"][S.ATTR_LENGTH]):
                  p["value"] for p in metrics[GRAMMAR.accept_length.name]}
    assert by_grammar == {("none", 2): 4, ("none", 4): 6, ("json", 1): 2, ("json", 2): 2,
                          ("regex", 1): 1}

    # each sampled request's span carries its own figures (a request found by id leads to them)
    with open(os.path.join(tel.directory, SPANS_FILE)) as fh:
        spans = {x["attributes"][S.SPAN_ATTR_REQUEST_ID]: x["attributes"] for x in map(
            json.loads, fh)}
    assert [(a.get(S.SPAN_ATTR_REQUEST_CACHED_TOKENS), a.get(S.SPAN_ATTR_REQUEST_PROMPT_TOKENS),
             a[S.SPAN_ATTR_REQUEST_GRAMMAR]) for _, a in sorted(spans.items())] == [
        (0, 64, "none"), (20, 64, "json"), (63, 64, "none"), (None, None, "regex")]

    report = build_report(tel.directory)
    proc = report.to_json()["processes"][0]
    assert [(r["prefix_cache"], r["drafts"], r["mean_acceptance_length"])
            for r in proc["by_prefix_cache"]] == [
        ("none", 4, 2.0), ("<50%", 4, 1.5), (">=50%", 6, 4.0), ("unknown", 1, 1.0)]
    assert [(r["grammar"], r["drafts"], r["mean_acceptance_length"])
            for r in proc["by_grammar"]] == [
        ("none", 10, 3.2), ("json", 4, 1.5), ("regex", 1, 1.0)]
    text = render_text(report)
    assert f"acceptance by {PREFIX_CACHE.title}:" in text
    assert f"acceptance by {GRAMMAR.title}:" in text
    assert ">=50%: mean accept length 4.00" in text and "json: mean accept length 1.50" in text
    import io

    from rich.console import Console

    from spectrace.report.watch import render
    console = Console(file=io.StringIO(), width=150, record=True)
    console.print(render(report, 1.0))  # the --watch screen
    live = console.export_text()
    assert ">=50%: mean accept length 4.00" in live and "json: mean accept length 1.50" in live
    page = render_html(report)
    assert 'data-key="by_prefix_cache.2.mean_acceptance_length"' in page
    assert 'data-key="by_grammar.1.mean_acceptance_length"' in page
    json.dumps(report.to_json())  # the --json view serialises


# -- SGLang's own request objects -----------------------------------------------------------
@pytest.mark.sglang
def test_sglang_release_reads_the_reqs_cache_hit_prompt_and_grammar(recorder,  # noqa: F811
                                                                    monkeypatch):
    """SGLang 0.5.23's `Req` and `SamplingParams` as its scheduler builds them (the grammar
    fields are the request's own; `cached_tokens` is what the scheduler adds at prefill
    and `meta_info.cached_tokens` reports), through the hook on `_prepare_kv_cache_release`."""
    from sglang.srt.managers.schedule_batch import Req
    from sglang.srt.sampling.sampling_params import SamplingParams

    from spectrace.adapters import sglang_v2
    rec, tel = recorder()
    monkeypatch.setattr(process_mod.STATE, "recorder", rec)
    schema = json.dumps({"type": "object", "properties": {"a": {"type": "string"}}})
    cases = [(SamplingParams(temperature=0), 0),
             (SamplingParams(temperature=0, json_schema=schema), 3),
             (SamplingParams(temperature=0, regex="[ab]+"), 9),
             (SamplingParams(temperature=0, ebnf='root ::= "a"'), 10)]
    for i, (params, cached) in enumerate(cases):
        req = Req(f"rid-{i}", "", list(range(10)), params)
        req.cached_tokens = cached
        req.spec_verify_ct, req.spec_num_correct_drafts = 2, 2
        req.spec_correct_drafts_histogram = [0, 2]
        sglang_v2._before_release(None, req)
    metrics = flush(tel)
    assert {p["attributes"][S.ATTR_PREFIX_CACHE]: p["value"]
            for p in metrics[PREFIX_CACHE.accept_length.name]} == {
        "none": 2, "<50%": 2, ">=50%": 4}
    assert {p["attributes"][S.ATTR_GRAMMAR]: p["value"]
            for p in metrics[GRAMMAR.accept_length.name]} == {
        "none": 2, "json": 2, "regex": 2, "grammar": 2}
