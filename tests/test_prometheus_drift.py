"""The drift alert rule (SpectraceAcceptanceDrift) on a real Prometheus: two hours of
series shaped as spectrace exports them (the counters' Prometheus names, `job`,
`instance`, `counted="once"`, a tensor-parallel copy with `counted="copy"`), written into
Prometheus's own storage with `promtool tsdb create-blocks-from openmetrics`, then the
rule's expression as generated evaluated by the server at times along them: it fires on
the drifting deployment once the fall is in its recent window, stays quiet on the steady
one, on the one under the floor and on the copy (a scrape cannot hold two hours, hence
the backfill)."""
from __future__ import annotations

import os
import shutil
import subprocess
import time

import pytest

from spectrace import signals as S
from spectrace.grafana import alerts
from tests.test_prometheus_e2e import PROMETHEUS, Prometheus, needs_prometheus

PROMTOOL = shutil.which("promtool")
MINUTES = 120


def _counter(spec, labels: dict, per_minute, t0: int) -> list[str]:
    """A counter's samples a minute apart from `t0`: `per_minute(m)` added at minute m."""
    label_text = ",".join(f'{k}="{v}"' for k, v in labels.items())
    out, value = [], 0.0
    for m in range(MINUTES + 1):
        value += per_minute(m) if m else 0
        out.append(f"{spec.prometheus_name}{{{label_text}}} {value:g} {t0 + 60 * m}")
    return out


def _deployments(t0: int) -> str:
    """OpenMetrics text: instance a drifts (1.0 accepted per request-step, none from minute
    80), b is steady, c drifts under the floor of request-steps (10 a minute), d under
    the floor of finished requests (5 a minute: 75 in 15 minutes), and a's tensor-parallel
    copy (`counted="copy"`) repeats a's figures; 10 requests finish a minute elsewhere."""
    def labels(instance, counted="once"):
        return {"job": "sglang", "instance": instance, S.ATTR_COUNTED: counted}
    fall = lambda n: (lambda m: n if m < 80 else 0)  # noqa: E731
    rows = {S.SPEC_DRAFTS.prometheus_name: [], S.SPEC_ACCEPTED_TOKENS.prometheus_name: [],
            S.SPEC_REQUESTS.prometheus_name: []}
    for inst, counted, steps, accepted, requests in (
            ("a:9464", "once", 30, fall(30), 10), ("a:9465", "copy", 30, fall(30), 10),
            ("b:9464", "once", 30, lambda m: 30, 10), ("c:9464", "once", 10, fall(10), 10),
            ("d:9464", "once", 30, fall(30), 5)):
        rows[S.SPEC_REQUESTS.prometheus_name] += _counter(
            S.SPEC_REQUESTS, labels(inst, counted), lambda m, n=requests: n, t0)
        rows[S.SPEC_DRAFTS.prometheus_name] += _counter(
            S.SPEC_DRAFTS, labels(inst, counted), lambda m, n=steps: n, t0)
        rows[S.SPEC_ACCEPTED_TOKENS.prometheus_name] += _counter(
            S.SPEC_ACCEPTED_TOKENS, labels(inst, counted), accepted, t0)
    text = []
    for name, lines in rows.items():
        text += [f"# TYPE {name.removesuffix('_total')} counter", *lines]
    return "\n".join(text + ["# EOF", ""])


@pytest.fixture(scope="module")
def prometheus(tmp_path_factory):
    if PROMTOOL is None:
        pytest.skip("needs promtool: apt-get install -y --no-install-recommends prometheus")
    work = str(tmp_path_factory.mktemp("prom-drift"))
    t0 = (int(time.time()) - 3 * 3600) // 60 * 60
    src = os.path.join(work, "series.om")
    with open(src, "w") as fh:
        fh.write(_deployments(t0))
    subprocess.run([PROMTOOL, "tsdb", "create-blocks-from", "openmetrics", src,
                    os.path.join(work, "tsdb")], check=True, capture_output=True, timeout=120)
    prom = Prometheus(work, [])
    try:
        yield prom, t0
    finally:
        prom.stop()


def _rule() -> dict:
    return next(r for r in alerts.rules()["groups"][0]["rules"]
                if r["alert"] == alerts.DRIFT_ALERT)


@needs_prometheus
def test_drift_rule_fires_on_the_drifting_deployment_only(prometheus):
    prom, t0 = prometheus
    expr = _rule()["expr"]
    # minute 70: steady everywhere
    assert prom.query(expr, t0 + 70 * 60) == []
    # minute 110: a's last 15 minutes accepted nothing; b steady; c and d under the floors
    fired = prom.query(expr, t0 + 110 * 60)
    assert [(r["metric"]["instance"], float(r["value"][1])) for r in fired] == [("a:9464", 0.0)]
    # the query alone (without the threshold): a's ratio, and nothing for b, c, d or the copy
    query = expr.rsplit(") <=", 1)[0][1:]
    assert {r["metric"]["instance"] for r in prom.query(query, t0 + 110 * 60)} == {"a:9464"}
    # minute 85: a's window of 15 holds 9 minutes that accepted (71-79): 9 x 30 / (15 x 30)
    part = prom.query(query, t0 + 85 * 60)
    assert len(part) == 1 and abs(float(part[0]["value"][1]) - 0.6) < 1e-9


@needs_prometheus
def test_steady_deployment_never_fires(prometheus):
    prom, t0 = prometheus
    expr = _rule()["expr"]
    for minute in range(30, MINUTES + 1, 10):
        assert all(r["metric"]["instance"] == "a:9464"
                   for r in prom.query(expr, t0 + minute * 60)), minute
