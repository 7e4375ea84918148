"""Per-request acceptance: the histogram of finished requests' acceptance rates (recorded in
the collecting thread, read back in memory) and the report's outlier findings
(`rules.outliers`: requests far below the others, and implausibly high), with their
floors; the report's views name the requests by id. The false-alarm rate on repeated
identical runs is measured by benchmarks/request_outliers.py, not here."""
from __future__ import annotations

import json
import random

import pytest

from spectrace import signals
from spectrace.file_layout import METRICS_FILE, RESOURCE_FILE, SPANS_FILE
from spectrace.families.requests import SPEC_REQUEST_ACCEPTANCE, FinishedRequest, Requests
from spectrace.rules import outliers
from spectrace.rules.outliers import RequestRate, judge

K = 3


def _rates(n, rate=1 / 3, steps=40, prefix="r"):
    return [RequestRate(f"{prefix}{i}", steps, rate) for i in range(n)]


SIGMA = 0.47  # one accepted token a step at 1/3, give or take: a plausible spread


def test_uniform_requests_raise_nothing():
    assert outliers.findings(judge(_rates(200), SIGMA, K)) == []
    assert outliers.findings(judge(_rates(200), 0.0, K)) == []  # every step alike


def test_planted_requests_are_named_each_way():
    out = judge(_rates(30) + [RequestRate("garbled", 60, 0.0),
                              RequestRate("looping", 20, 1.0)], SIGMA, K)
    assert [r.request_id for r in out.low] == ["garbled"]
    assert [r.request_id for r in out.high] == ["looping"]
    low, high = outliers.findings(out)
    assert (low.code, high.code) == (signals.REQUEST_LOW, signals.REQUEST_IMPLAUSIBLE)
    assert low.severity == high.severity == "warning"
    assert "garbled (0.00 over 60 steps)" in low.message and "0.33" in low.message
    assert "looping (1.00 over 20 steps)" in high.message and "sglang#28771" in high.message
    assert low.details["request_ids"] == ["garbled"] and low.details["reference"] == 32


@pytest.mark.parametrize("case", ["few", "short", "near", "wide", "high_deployment",
                                  "noisy_short"])
def test_floors_keep_each_finding_quiet(case):
    """Too few recorded requests; a request of few steps; a gap too small; a workload so
    wide that the fence is past it; a request at 0.99 where the deployment's median is
    0.9 (nothing implausible); a short request whose gap is within its noise."""
    base = _rates(30)
    if case == "few":
        found = judge(_rates(outliers.MIN_REQUESTS - 2) + [RequestRate("x", 60, 0.0)],
                      SIGMA, K)
        assert found is None
        return
    if case == "short":
        extra = [RequestRate("x", outliers.MIN_STEPS - 1, 0.0),
                 RequestRate("y", outliers.MIN_STEPS - 1, 1.0)]
    elif case == "near":
        extra = [RequestRate("x", 60, 0.1)]  # 0.23 below 0.33, but not a quarter of it
    elif case == "wide":
        rng = random.Random(1)
        base = [RequestRate(f"r{i}", 60, rng.uniform(0.05, 0.95)) for i in range(60)]
        extra = [RequestRate("x", 60, 0.0), RequestRate("y", 60, 0.98)]
    elif case == "high_deployment":
        base = _rates(30, 0.9)
        extra = [RequestRate("y", 60, 0.99)]
    else:
        base = _rates(30, 0.5)
        extra = [RequestRate("x", outliers.MIN_STEPS, 0.1)]  # z = 0.4 x 3 x 4 / 2 < 5
        assert judge(base + extra, 2.0, K).low == ()
        return
    out = judge(base + extra, SIGMA, K)
    assert out is not None and out.low == () and out.high == (), out


def test_reference_is_the_uniform_sample_when_given():
    """A candidate kept for being extreme does not move the reference it is judged by."""
    ref = _rates(25)
    extremes = [RequestRate(f"g{i}", 60, 0.0) for i in range(25)]  # as many as the rest
    out = judge(ref + extremes, SIGMA, K, reference=ref)
    assert len(out.low) == 25 and out.median == pytest.approx(1 / 3)


def test_step_sigma_from_the_accept_length_distribution():
    assert outliers.step_sigma({"2": 100}) == 0.0
    assert outliers.step_sigma({"1": 50, "3": 50}) == pytest.approx(1.0)
    assert outliers.step_sigma({}) == 0.0


# -- the histogram -------------------------------------------------------------------------
def test_request_acceptance_histogram_in_memory():
    """Each finished request's rate lands in its bucket once, whichever instrument's
    collection folds it; the runtime's own draft count wins over steps x K."""
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import InMemoryMetricReader
    from spectrace.config import Config
    from opentelemetry.sdk.trace import TracerProvider
    reader = InMemoryMetricReader()
    fam = Requests(Config(exporters=()), TracerProvider().get_tracer("t"), lambda: K)
    fam.register(MeterProvider(metric_readers=[reader]).get_meter("t"),
                 {signals.ATTR_COUNTED: signals.COUNTED_ONCE})
    fam.finished(FinishedRequest("a", 10, 10, None, 0.0, None))            # 10/30
    fam.finished(FinishedRequest("b", 10, 29, None, 0.0, None))            # 29/30
    fam.finished(FinishedRequest("c", 10, 0, None, 0.0, None))             # 0
    fam.finished(FinishedRequest("d", 10, 10, None, 0.0, None, None, 20))  # vLLM's 20: 0.5
    fam.finished(FinishedRequest("e", 0, 0, None, 0.0, None))              # no step: none
    for _ in range(2):  # a second collection adds nothing
        data = reader.get_metrics_data()
    points = [p for rm in data.resource_metrics for sm in rm.scope_metrics
              for m in sm.metrics if m.name == SPEC_REQUEST_ACCEPTANCE.name
              for p in m.data.data_points]
    (p,) = points
    assert list(p.explicit_bounds) == list(outliers.RATE_BOUNDS)
    assert p.count == 4 and p.sum == pytest.approx(10 / 30 + 29 / 30 + 0.5)
    by_edge = dict(zip(list(p.explicit_bounds) + ["inf"], p.bucket_counts))
    assert (by_edge[0.05], by_edge[0.4], by_edge[0.5], by_edge[0.99]) == (1, 1, 1, 1)
    assert dict(p.attributes) == {signals.ATTR_COUNTED: signals.COUNTED_ONCE}


# -- the report -------------------------------------------------------------------------------
def _span(rid, steps, accepted, drafts=None):
    attrs = {signals.SPAN_ATTR_REQUEST_ID: rid, signals.SPAN_ATTR_REQUEST_STEPS: steps,
             signals.SPAN_ATTR_REQUEST_ACCEPTED: accepted,
             signals.SPAN_ATTR_REQUEST_SAMPLING: "greedy"}
    if drafts:
        attrs[signals.SPAN_ATTR_REQUEST_DRAFT_TOKENS] = drafts
    return {"name": signals.SPAN_REQUEST, "attributes": attrs}


def _folder(tmp_path, spans, lengths, histogram=None):
    proc = tmp_path / "sglang-1"
    proc.mkdir()
    (proc / RESOURCE_FILE).write_text(json.dumps({"attributes": {}, "started": 1.0}))
    drafts = sum(lengths.values())
    accepted = sum((int(k) - 1) * v for k, v in lengths.items())
    metrics = {signals.SPEC_DRAFTS.name: [{"attributes": {}, "value": drafts}],
               signals.SPEC_DRAFT_TOKENS.name: [{"attributes": {}, "value": K * drafts}],
               signals.SPEC_ACCEPTED_TOKENS.name: [{"attributes": {}, "value": accepted}],
               signals.SPEC_ACCEPTED_PER_POSITION.name: [
                   {"attributes": {"position": p}, "value": 0} for p in range(K)],
               signals.SPEC_ACCEPT_LENGTH.name: [
                   {"attributes": {"length": int(k)}, "value": v} for k, v in lengths.items()]}
    if histogram:
        metrics[SPEC_REQUEST_ACCEPTANCE.name] = [{"attributes": {}, "value": histogram}]
    (proc / METRICS_FILE).write_text(json.dumps({"time": 2.0, "metrics": metrics}) + "\n")
    (proc / SPANS_FILE).write_text("".join(json.dumps(s) + "\n" for s in spans))


def test_report_names_the_outliers_in_every_view(tmp_path):
    from spectrace.report import build_report, render_text
    from spectrace.report.html import render_html
    spans = [_span(f"req-{i}", 40, 40) for i in range(30)]
    spans += [_span("garbled-1", 60, 0), _span("loop-1", 20, 60, drafts=60)]
    buckets = [0] * (len(outliers.RATE_BOUNDS) + 1)
    buckets[4] = 30  # 0.3-0.4
    buckets[0] = buckets[-1] = 1
    _folder(tmp_path, spans, {"2": 1200, "1": 60, "4": 20},
            {"count": 32, "sum": 11.0, "bounds": list(outliers.RATE_BOUNDS),
             "buckets": buckets})
    rep = build_report(str(tmp_path))
    proc = rep.to_json()["processes"][0]
    found = {f["code"]: f for f in proc["findings"]}
    assert found[signals.REQUEST_LOW]["details"]["request_ids"] == ["garbled-1"]
    assert found[signals.REQUEST_IMPLAUSIBLE]["details"]["request_ids"] == ["loop-1"]
    assert proc["requests"]["by_acceptance_rate"] == {"0-0.05": 1, "0.3-0.4": 30,
                                                      "0.99-1": 1}
    assert rep.verdict.state == "underperforming" and "garbled-1" in rep.verdict.sentence
    text = render_text(rep)
    assert "loop-1 (1.00 over 20 steps)" in text and "0.3-0.4: 30" in text
    html = render_html(rep)
    assert "garbled-1" in html and 'data-key="requests.by_acceptance_rate.0.99-1"' in html
    # the combined view judges again (one process here: the same requests)
    combined = {f["code"]: f for f in rep.to_json()["combined"]["findings"]}
    assert combined[signals.REQUEST_LOW]["details"]["request_ids"] == ["garbled-1"]


def test_report_of_a_uniform_run_names_none(tmp_path):
    from spectrace.report import build_report
    _folder(tmp_path, [_span(f"req-{i}", 40, 40) for i in range(40)], {"2": 1600})
    proc = build_report(str(tmp_path)).to_json()["processes"][0]
    assert proc["findings"] == [] and proc["requests"]["recorded"] == 40
