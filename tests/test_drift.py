"""`acceptance.drift` (rules.drift, report.drift_windows): the rule on window totals (floor,
ratio, drop), the explanation by breakdown (the mix moved, or acceptance fell within
buckets), and the report reading the windows from a process's metrics snapshots, through
every view's data (the findings of `--json`)."""
from __future__ import annotations

import json

import pytest

from spectrace import names, signals
from spectrace.families.breakdowns import CONTEXT
from spectrace.file_layout import METRICS_FILE
from spectrace.report import build_report
from spectrace.report.drift_windows import WINDOW_SETTING
from spectrace.report.summary import ReportError
from spectrace.rules import drift


def totals(context: dict[str, tuple[int, float]]) -> drift.Totals:
    """Window totals from context bucket -> (request-steps, accepted tokens a request-step)."""
    ctx = {b: (n, n * g) for b, (n, g) in context.items()}
    steps = sum(v[0] for v in ctx.values())
    return drift.Totals(steps, sum(v[1] for v in ctx.values()), {"context": ctx}, steps / 2)


# -- the rule --------------------------------------------------------------------------
def test_steady_is_quiet_and_floor_holds():
    same = totals({"<512": (1000, 1.5)})
    assert drift.judge(same, same) is None
    # a fall from 1.5 to 0.5 tokens, but the recent window under the floor
    assert drift.judge(same, totals({"<512": (drift.FLOOR - 1, 0.5)})) is None
    assert drift.judge(same, totals({"<512": (drift.FLOOR, 0.5)})) is not None


def test_finished_requests_floor_holds():
    before = totals({"<512": (1000, 1.5)})
    few = drift.Totals(1000, 500, {}, drift.MIN_REQUESTS - 1)  # a few long requests
    assert drift.judge(before, few) is None
    assert drift.judge(before, drift.Totals(1000, 500, {}, drift.MIN_REQUESTS)) is not None


def test_ratio_and_drop_both_needed():
    before = totals({"<512": (1000, 1.5)})
    # 0.25 fewer: under DROP
    assert drift.judge(before, totals({"<512": (1000, 1.25)})) is None
    # 0.3 fewer but 0.88 of it (a long chain): not at most RATIO
    assert drift.judge(totals({"<512": (1000, 2.5)}), totals({"<512": (1000, 2.2)})) is None
    assert drift.judge(before, totals({"<512": (1000, 1.2)})) is not None  # 0.8, 0.3 fewer


def test_within_bucket_fall_is_the_system():
    before = totals({"<512": (600, 1.5), "1k-2k": (400, 1.0)})
    now = totals({"<512": (600, 0.5), "1k-2k": (400, 0.3)})   # the same mix, both fell
    d = drift.judge(before, now, ("context",))
    assert d.cause == drift.SYSTEM and d.moved is None
    f = drift.finding(d, 900, {"context": "context length"})
    assert f.code == names.ACCEPTANCE_DRIFT and f.severity == "warning"
    assert "within the buckets of context length" in f.message
    assert f.details["breakdowns"]["context"]["explains"] is False


def test_mix_shift_is_the_traffic():
    # the same per-bucket acceptance, traffic moved from <512 to 1k-2k
    before = totals({"<512": (900, 1.5), "1k-2k": (100, 0.2)})
    now = totals({"<512": (100, 1.5), "1k-2k": (900, 0.2)})
    d = drift.judge(before, now, ("context",))
    assert d.cause == drift.TRAFFIC and d.moved.breakdown == "context"
    assert d.moved.grew == "1k-2k" and abs(d.moved.shift - 0.8) < 1e-9
    f = drift.finding(d, 900, {"context": "context length"})
    assert f.severity == "info" and f.details["moved"] == "context"
    assert "1k-2k went from 10% to 90%" in f.message and "held" in f.message


def test_traffic_into_new_buckets_names_them():
    d = drift.judge(totals({"<512": (300, 1.0)}), totals({"1k-2k": (300, 0.0)}), ("context",))
    assert d.cause == drift.TRAFFIC and d.moved.new_share == 1 and d.moved.within is None
    assert "too few of to compare" in drift.finding(d, 90).message


def test_a_moved_mix_that_does_not_explain_it():
    """The mix moved, but acceptance fell within the shared buckets too: the system."""
    before = totals({"<512": (800, 1.5), "512-1k": (200, 1.5)})
    now = totals({"<512": (400, 0.4), "512-1k": (600, 0.4)})
    d = drift.judge(before, now, ("context",))
    assert d.cause == drift.SYSTEM and d.held[0].shift >= drift.MIN_SHIFT


def test_unknown_bucket_never_explains():
    d = drift.judge(totals({"unknown": (500, 1.5)}), totals({"unknown": (500, 0.2)}),
                    ("context",))
    assert d.cause == drift.SYSTEM and d.held == ()


# -- the report over a process's snapshots -------------------------------------------------
def _snapshot(t: float, ctx: dict[tuple[str, int], int]) -> dict:
    """Cumulative counts; a request finishes every 3 request-steps."""
    drafts = sum(ctx.values())
    acc = sum((length - 1) * n for (_, length), n in ctx.items())
    pts = [{"attributes": {signals.ATTR_CONTEXT: b, signals.ATTR_LENGTH: length},
            "value": n} for (b, length), n in ctx.items()]
    return {"time": t, "metrics": {
        signals.SPEC_DRAFTS.name: [{"attributes": {}, "value": drafts}],
        signals.SPEC_ACCEPTED_TOKENS.name: [{"attributes": {}, "value": acc}],
        signals.SPEC_DRAFT_TOKENS.name: [{"attributes": {}, "value": 3 * drafts}],
        signals.SPEC_REQUESTS.name: [{"attributes": {}, "value": drafts // 3}],
        CONTEXT.accept_length.name: pts}}


def _write(tmp_path, phases) -> str:
    """A process folder: a snapshot a minute; each phase (minutes, request-steps a
    minute by (context bucket, accept length)) adds to the cumulative counts."""
    d = tmp_path / "sglang-host-1"
    d.mkdir()
    counts: dict = {}
    t = 1000.0
    lines = [_snapshot(t, counts)]
    for minutes, per_minute in phases:
        for _ in range(minutes):
            t += 60
            for k, n in per_minute.items():
                counts[k] = counts.get(k, 0) + n
            lines.append(_snapshot(t, dict(counts)))
    (d / METRICS_FILE).write_text("".join(json.dumps(x) + "\n" for x in lines))
    return str(tmp_path)


def _drift(report) -> list[dict]:
    out = report.to_json()
    return [f for f in out["processes"][0]["findings"] + out["combined"]["findings"]
            if f["code"] == names.ACCEPTANCE_DRIFT]


def test_report_steady_run_has_no_drift(tmp_path):
    run = _write(tmp_path, [(60, {("<512", 2): 20, ("<512", 3): 10})])
    assert _drift(build_report(run)) == []


def test_report_mid_run_context_change_is_traffic(tmp_path):
    # 30 minutes of short contexts at 2.0, then 30 of 1k-2k at 1.0: the last 15 minutes
    # (900 request-steps) against the 45 before them
    run = _write(tmp_path, [(30, {("<512", 2): 30}), (30, {("1k-2k", 1): 30})])
    found = _drift(build_report(run))
    assert len(found) == 2  # the process and the combined view
    f = found[0]
    assert f["severity"] == "info" and f["details"]["moved"] == "context"
    assert f["details"]["recent_drafts"] == 15 * 30 and f["details"]["window_s"] == 900
    assert f["details"]["recent_length"] == 1.0
    assert "context length" in f["message"]


def test_report_fall_within_bucket_is_system(tmp_path):
    run = _write(tmp_path, [(40, {("<512", 3): 30}), (20, {("<512", 1): 20, ("<512", 2): 10})])
    f = _drift(build_report(run))[0]
    assert f["severity"] == "warning" and f["details"]["cause"] == "system"
    assert f["details"]["breakdowns"]["context"]["within_length"] < 1.5


def test_report_short_run_uses_its_later_half(tmp_path):
    run = _write(tmp_path, [(4, {("<512", 3): 100}), (4, {("<512", 1): 100})])
    f = _drift(build_report(run))[0]
    assert f["details"]["window_s"] == 240 and f["details"]["recent_length"] == 1.0


def test_report_windows_start_at_the_first_request_step(tmp_path):
    """An idle hour of loading before traffic is no window: 8 minutes of traffic, a
    window of 4."""
    run = _write(tmp_path, [(60, {}), (4, {("<512", 3): 100}), (4, {("<512", 1): 100})])
    f = _drift(build_report(run))[0]
    assert f["details"]["window_s"] == 240 and f["details"]["earlier_length"] == 3.0


def test_every_view_carries_the_finding(tmp_path):
    """The text report, the HTML page and the watch screen name it; the verdict of a
    system drift (a warning) is underperforming."""
    import subprocess
    import sys
    from spectrace.report.text import render_text
    from rich.console import Console
    from spectrace.report.watch import render
    run = _write(tmp_path, [(40, {("<512", 3): 30}), (20, {("<512", 1): 20, ("<512", 2): 10})])
    report = build_report(run)
    assert report.verdict.state == "underperforming"
    text = render_text(report)
    assert "acceptance.drift (warning" in text and "the system changed" in text
    console = Console(record=True, width=200)
    console.print(render(report, 1.0))
    assert "acceptance.drift" in console.export_text()
    html = tmp_path / "r.html"
    out = subprocess.run([sys.executable, "-m", "spectrace.cli", "report", run, "--html",
                          str(html)], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert "acceptance drifted down" in html.read_text()


def test_the_operators_window_replaces_the_default(tmp_path, monkeypatch):
    """SPECTRACE_DRIFT_WINDOW: 6 minutes of a fall after 2 steady ones; the default window
    (half the run: 4 minutes) would leave 2 minutes of the fall in the earlier window;
    the asked one holds only the fall."""
    run = _write(tmp_path, [(2, {("<512", 3): 300}), (6, {("<512", 1): 100})])
    monkeypatch.setenv(WINDOW_SETTING, "360")
    f = _drift(build_report(run))[0]
    assert f["details"]["window_s"] == 360 and f["details"]["recent_length"] == 1.0
    assert f["details"]["earlier_length"] == 3.0
    monkeypatch.setenv(WINDOW_SETTING, "480")  # the whole run: nothing before it
    assert _drift(build_report(run)) == []


@pytest.mark.parametrize("bad", ["0", "-5", "soon", "inf"])
def test_a_bad_window_setting_is_a_clear_error(tmp_path, monkeypatch, bad):
    run = _write(tmp_path, [(4, {("<512", 3): 100})])
    monkeypatch.setenv(WINDOW_SETTING, bad)
    with pytest.raises(ReportError, match=f"{WINDOW_SETTING}=.*seconds"):
        build_report(run)
