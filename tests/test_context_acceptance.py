"""Acceptance by context length without a server: the buckets, the Recorder's fold (the
lengths kept by reference, counted at collection), the long-context rule and its floor,
and the report's views of it (text, JSON, HTML). The real-server case is in
tests/test_e2e_context.py."""
from __future__ import annotations

import json

import numpy
import pytest

from spectrace import signals
from spectrace.rules import context as ctx
from spectrace.file_layout import METRICS_FILE, RESOURCE_FILE
from spectrace.families.acceptance import AcceptanceTotals
from spectrace.report import build_report, render_text
from spectrace.report.html import render_html


def test_bucket_edges():
    lengths = [0, 1, 511, 512, 1023, 1024, 2047, 2048, 131071, 131072, 10 ** 7]
    names = [ctx.BUCKETS[i] for i in ctx.bucket_index(lengths)]
    assert names == ["<512", "<512", "<512", "512-1k", "512-1k", "1k-2k", "1k-2k", "2k-4k",
                     "64k-128k", ">=128k", ">=128k"]
    assert names == [ctx.bucket_of(x) for x in lengths]


def test_fold_counts_by_bucket_and_length_and_keeps_the_totals():
    acc = AcceptanceTotals()
    rng = numpy.random.default_rng(0)
    expected: dict = {}
    for _ in range(50):
        bs = int(rng.integers(1, 300))
        counts = rng.integers(0, 4, bs).tolist()
        lengths = rng.integers(1, 200_000, bs)
        acc.add(counts, 3, lengths)  # a numpy array (SGLang: a CPU tensor)
        for c, n in zip(counts, lengths):
            key = (ctx.bucket_of(int(n)), c + 1)
            expected[key] = expected.get(key, 0) + 1
    acc.add([1, 2], 3)               # no lengths: in the totals, not by context
    acc.add([1, 2, 3], 3, [10, 20])  # lengths that do not match: unknown
    acc.fold()
    expected[(ctx.UNKNOWN, 2)] = expected.get((ctx.UNKNOWN, 2), 0) + 1
    expected[(ctx.UNKNOWN, 3)] = expected.get((ctx.UNKNOWN, 3), 0) + 1
    expected[(ctx.UNKNOWN, 4)] = expected.get((ctx.UNKNOWN, 4), 0) + 1
    assert acc.by["context"].lengths == expected
    assert sum(acc.by["context"].lengths.values()) == acc.drafts - 2
    assert sum(acc.by["context"].accepted.values()) == acc.accepted - 3


def buckets(**mal_drafts) -> tuple:
    """BucketFigures from name=(mean accept length, request-steps), chain of 3 steps."""
    counts = {}
    for name, (mal, drafts) in mal_drafts.items():
        bucket = {"b512": "<512", "b1k": "512-1k", "b2k": "1k-2k", "b4k": "2k-4k"}[name]
        accepted = round((mal - 1) * drafts)
        counts[(bucket, 2)] = accepted  # one accepted draft token each ...
        counts[(bucket, 1)] = drafts - accepted  # ... or none
    return ctx.bucket_figures(counts)


def test_long_context_fires_names_the_trained_length_and_respects_the_floor():
    f = ctx.long_context_finding(buckets(b512=(2.0, 300), b2k=(1.0, 300)),
                                 {"max_position_embeddings": 1024})
    assert f is not None and f.code == signals.LONG_CONTEXT and f.severity == "warning"
    assert "1k-2k" in f.message and "<512" in f.message and "1.00" in f.message
    assert "max_position_embeddings 1024" in f.message
    assert f.details["long_drafts"] == 300 and f.details["floor"] == ctx.FLOOR
    assert "names no trained length" in ctx.long_context_finding(
        buckets(b512=(2.0, 300), b2k=(1.0, 300))).message
    # below the floor in either bucket, neighbouring buckets, or a small drop: silent
    assert ctx.long_context_finding(buckets(b512=(2.0, 300), b2k=(1.0, ctx.FLOOR - 1))) is None
    assert ctx.long_context_finding(buckets(b512=(2.0, ctx.FLOOR - 1), b2k=(1.0, 300))) is None
    assert ctx.long_context_finding(buckets(b512=(2.0, 300), b1k=(1.0, 300))) is None
    assert ctx.long_context_finding(buckets(b512=(2.0, 300), b2k=(1.6, 300))) is None
    assert ctx.long_context_finding(buckets(b512=(2.0, 300))) is None


def test_trained_context_reads_config_dicts_and_objects():
    cfg = {"max_position_embeddings": 2048, "sliding_window": None,
           "rope_scaling": {"factor": 4.0, "original_max_position_embeddings": 512}}
    assert ctx.trained_context(cfg) == {"max_position_embeddings": 2048,
                                        "rope_scaling_factor": 4.0,
                                        "original_max_position_embeddings": 512}

    class Config:
        max_position_embeddings = 4096
        sliding_window = 1024
    assert ctx.trained_context(Config()) == {"max_position_embeddings": 4096,
                                             "sliding_window": 1024}
    assert ctx.trained_context(None) == {}


def _write_process(tmp_path, by_context: dict, draft_context: dict | None = None) -> str:
    drafts = sum(by_context.values())
    accepted = sum((n - 1) * v for (_, n), v in by_context.items())
    metrics = {
        signals.SPEC_DRAFTS.name: [{"attributes": {}, "value": drafts}],
        signals.SPEC_ACCEPTED_TOKENS.name: [{"attributes": {}, "value": accepted}],
        signals.SPEC_ACCEPT_LENGTH_BY_CONTEXT.name: [
            {"attributes": {"context": b, "length": n}, "value": v}
            for (b, n), v in by_context.items()],
        signals.EAGLE3_DRAFT_CONTEXT.name: [
            {"attributes": {"kind": k}, "value": v} for k, v in (draft_context or {}).items()],
    }
    d = tmp_path / "sglang-h-1"
    d.mkdir()
    (d / RESOURCE_FILE).write_text(json.dumps({"attributes": {"process.pid": 1}}))
    (d / METRICS_FILE).write_text(json.dumps({"time": 1.0, "metrics": metrics}) + "\n")
    return str(tmp_path)


def test_report_shows_buckets_and_the_finding_in_every_view(tmp_path):
    d = _write_process(tmp_path, {("<512", 2): 250, ("1k-2k", 1): 300, ("1k-2k", 2): 20},
                       {"max_position_embeddings": 4096})
    report = build_report(d)
    p = report.to_json()["processes"][0]
    by = {c["context"]: c for c in p["by_context"]}
    assert list(by) == ["<512", "1k-2k"]
    assert by["<512"]["mean_acceptance_length"] == 2.0
    assert by["1k-2k"]["drafts"] == 320
    assert by["1k-2k"]["mean_acceptance_length"] == pytest.approx(1 + 20 / 320)
    assert by["1k-2k"]["acceptance_per_position"] == [pytest.approx(20 / 320)]
    assert p["draft_context"] == {"max_position_embeddings": 4096}
    codes = [f["code"] for f in p["findings"]]
    assert codes == [signals.LONG_CONTEXT]
    text = render_text(report)
    assert "acceptance by context length" in text and "1k-2k: mean accept length 1.06" in text
    assert signals.LONG_CONTEXT in text and "max_position_embeddings 4096" in text
    html = render_html(report)
    assert 'data-key="by_context.1.mean_acceptance_length"' in html
    assert signals.LONG_CONTEXT in html


def test_report_without_a_drop_has_no_finding(tmp_path):
    d = _write_process(tmp_path, {("<512", 2): 250, ("1k-2k", 2): 300})
    p = build_report(d).to_json()["processes"][0]
    assert [c["mean_acceptance_length"] for c in p["by_context"]] == [2.0, 2.0]
    assert p["findings"] == []


def test_a_bad_count_list_is_dropped_alone():
    """A value that is not a list of counts (a runtime change, a stand-in) loses only its
    own step: the steps around it are counted, and the fold says what it dropped."""
    acc = AcceptanceTotals()
    acc.add([1, 0, 2], 3)
    acc.add(None, 3)
    acc.add([300, 1], 3)  # beyond a byte: counted the slow way, as before
    with pytest.raises(ValueError, match="not a list of counts: None"):
        acc.fold()
    assert acc.drafts == 5 and acc.accepted == 1 + 2 + 300 + 1
    acc.add([1], 3)
    acc.fold()  # nothing left of the bad one
    assert acc.drafts == 6
    acc.add(5, 3)  # a number is not five request-steps (bytearray(5) would be five zeros)
    with pytest.raises(ValueError, match="not a list of counts: 5"):
        acc.fold()
    assert acc.drafts == 6
