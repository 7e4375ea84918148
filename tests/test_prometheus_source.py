"""`spectrace report --prometheus URL`: the report from a Prometheus server (the report's
second source, `spectrace.report.prometheus_source`).

On a real Prometheus whose storage was backfilled by `promtool tsdb create-blocks-from
openmetrics` (as the issue's fleet benchmark does): three processes of two deployments over
an hour, one restarted on its endpoint and then stopped; the counts each process gained are
exact over the whole hour and over its second half, a selector picks a deployment and its
verdict, a counter reset is read as PromQL's `increase` reads it (without extrapolating).
The live tests (tests/test_prometheus_e2e.py) check the same report against the folder of
real SGLang and vLLM runs. Bad input is one line naming what was wrong, exit status 2."""
from __future__ import annotations

import http.server
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.parse
import urllib.request

import pytest

from spectrace import signals as S
from spectrace.report.prometheus_api import PrometheusRange, duration_s, end_time
from spectrace.report.summary import ReportError, prometheus_report

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PROMETHEUS, PROMTOOL = shutil.which("prometheus"), shutil.which("promtool")


def needs_prometheus(test):
    """The `prometheus` tier: a real server and promtool (in CI a missing one fails)."""
    return pytest.mark.prometheus(pytest.mark.skipif(
        (PROMETHEUS is None or PROMTOOL is None) and not os.environ.get("CI"),
        reason="needs Prometheus and promtool: apt-get install -y prometheus")(test))

STEP = 15  # seconds between samples, as a scrape interval
HOUR = 3600


def spectrace(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "spectrace.cli", *args], capture_output=True,
                          text=True, timeout=120, cwd=ROOT, env=env)


def one_line_error(said: subprocess.CompletedProcess, *words: str) -> None:
    assert said.returncode == 2, said
    assert "Traceback" not in said.stderr and said.stderr.count("\n") == 1, said.stderr
    for w in words:
        assert w in said.stderr, said.stderr


# -- a backfilled Prometheus ----------------------------------------------------------------
def drafts_a(t: float) -> float | None:
    """Process a: 1000 request-steps in its first 10 minutes, restarted on its endpoint
    (its counters from 0 again), 400 more by minute 20, then stopped (no sample after)."""
    if t <= 600:
        return round(1000 * t / 600)
    if t <= 1200:
        return round(400 * (t - 600) / 600)
    return None


def drafts_b(t: float) -> float:
    return round(6000 * t / HOUR)


def drafts_c(t: float) -> float:
    return round(3000 * t / HOUR)


def drafts_d(t: float) -> float:
    return round(4000 * t / HOUR)


def share_d(t: float) -> float:
    """d's draft accepts position 0 always, until the hour's last 15 minutes: never."""
    return 1.0 if t <= 2700 else 2700 / t  # its cumulative share: 3000 of 4000 t / HOUR


# instance -> (deployment, draft, its request-steps over time, the share of them that
# accept position 0 (so far), its fc-bypass findings): prod's draft v1 accepts position 0
# always, the canary's v2 half the time, and d's stops accepting for the last 15 minutes
PROCESSES = {
    "a:9464": ("prod", "/models/draft-v1", drafts_a, lambda t: 1.0, 0),
    "b:9464": ("prod", "/models/draft-v1", drafts_b, lambda t: 1.0, 0),
    "c:9464": ("canary", "/models/draft-v2", drafts_c, lambda t: 0.5, 3),
    "d:9464": ("drifting", "/models/draft-v1", drafts_d, share_d, 0),
}
REQUEST_STEPS = 5  # request-steps per finished request


def openmetrics(t0: float, processes: dict = PROCESSES, costs: dict | None = None) -> str:
    """An hour of three processes' series, every `STEP` s from `t0`, as spectrace's
    endpoint names them (`MetricSpec.prometheus_name`): each request-step proposes two draft
    tokens and accepts position 0 (accept length 2) or nothing (1), never position 1.
    `costs`: instance -> its reference and step costs (`FLEET_COSTS`), for those that have
    them."""
    families: dict[str, list[str]] = {}
    once = f'{S.ATTR_COUNTED}="{S.COUNTED_ONCE}"'

    def add(spec, labels: str, value: float, t: float) -> None:
        families.setdefault(spec.prometheus_name, []).append(
            f"{spec.prometheus_name}{{{labels}}} {value!r} {t0 + t:.3f}")
    for instance, (deployment, draft_at, drafts, share, bypass) in processes.items():
        base = f'job="spectrace",instance="{instance}"'
        reference, scale, measured = (costs or {}).get(instance, (None, None, None))
        for i in range(HOUR // STEP + 1):
            t = i * STEP
            n = drafts(t)
            if n is None:
                continue
            k = round(share(t) * n)  # request-steps that accepted position 0
            draft = draft_at(t) if callable(draft_at) else draft_at
            expected = ("" if reference is None else
                        f',{S.RES_EXPECTED_ACCEPT_LENGTH.replace(".", "_")}="{reference}"')
            families.setdefault("target_info", []).append(
                f'target_info{{{base},service_name="{deployment}",spectrace_version="0.0.0",'
                f'spectrace_runtime="sglang",spectrace_process_role="scheduler",'
                f'spectrace_counted="once",spectrace_tp_rank="0",'
                f'spectrace_draft_model="{draft}"{expected}}} 1 {t0 + t:.3f}')
            if reference is not None:
                add(S.SPEC_REFERENCE_ACCEPT_LENGTH, base, reference, t)
            if measured is not None:
                step_costs(add, f"{base},{once}", measured(n), scale, t)
            add(S.SPEC_STEPS, base, n, t)
            add(S.SPEC_DRAFTS, f"{base},{once}", n, t)
            add(S.SPEC_DRAFT_TOKENS, f"{base},{once}", 2 * n, t)
            add(S.SPEC_ACCEPTED_TOKENS, f"{base},{once}", k, t)
            add(S.SPEC_ACCEPTED_PER_POSITION, f'{base},{once},{S.ATTR_POSITION}="0"', k, t)
            add(S.SPEC_ACCEPTED_PER_POSITION, f'{base},{once},{S.ATTR_POSITION}="1"', 0, t)
            add(S.SPEC_ACCEPT_LENGTH, f'{base},{once},{S.ATTR_LENGTH}="1"', n - k, t)
            add(S.SPEC_ACCEPT_LENGTH, f'{base},{once},{S.ATTR_LENGTH}="2"', k, t)
            add(S.SPEC_REQUESTS, f'{base},{once},{S.ATTR_REQUEST_LENGTH}="1.75-2.00"',
                n // REQUEST_STEPS, t)
            add(S.FINDINGS, f'{base},{S.ATTR_CODE}="{S.FC_BYPASS}",{S.ATTR_SEVERITY}="error"',
                bypass, t)
    out = []
    gauges = ("target_info", S.SPEC_REFERENCE_ACCEPT_LENGTH.prometheus_name)
    for name, lines in families.items():
        kind = "gauge" if name in gauges else "counter"
        family = name[:-len("_total")] if kind == "counter" else name
        out += [f"# TYPE {family} {kind}", *lines]
    return "\n".join(out + ["# EOF", ""])


K = 2  # draft tokens per request-step in these series (positions 0 and 1)
# phase -> its seconds in the batch-size buckets "1" and "2-3" (one request a step, two):
# the target's forward costs 0.010 s + 0.002 s a token (K + 1 tokens a request)
PHASE_SECONDS = {S.PHASE_STEP: (0.030, 0.040), S.PHASE_DRAFT: (0.006, 0.008),
                 S.PHASE_VERIFY: (0.020, 0.026), S.PHASE_DRAFT_EXTEND: (0.003, 0.004),
                 S.PHASE_BETWEEN: (0.002, 0.003), S.PHASE_FORWARD: (0.016, 0.022)}
BATCHES = (("1", 1), ("2-3", 2))  # (bucket, requests a step)


def step_costs(add, labels: str, measured: tuple, scale: float, t: float) -> None:
    """A process's step-cost series at `t` (`families.step_cost`): `measured` steps so far
    in each bucket of `BATCHES`, each phase `scale` times `PHASE_SECONDS` (with some
    spread: the squares 1 % above a constant's); the forwards' tokens and requests."""
    for (bucket, batch), steps, i in zip(BATCHES, measured, range(len(BATCHES))):
        for phase, seconds in PHASE_SECONDS.items():
            at = (f'{labels},{S.ATTR_PHASE}="{phase}",{S.ATTR_BATCH_BUCKET}="{bucket}",'
                  f'{S.ATTR_NUM_STEPS}="{K}"')
            v = scale * seconds[i]
            add(S.SPEC_PHASE_SAMPLES, at, steps, t)
            add(S.SPEC_PHASE_TIME, at, v * steps, t)
            add(S.SPEC_PHASE_TIME_SQUARES, at, 1.01 * v * v * steps, t)
            if phase == S.PHASE_FORWARD:
                x = batch * (K + 1)
                add(S.SPEC_PHASE_TOKENS, at, x * steps, t)
                add(S.SPEC_PHASE_TOKENS_SQUARES, at, x * x * steps, t)
                add(S.SPEC_PHASE_TIME_TOKENS, at, v * x * steps, t)
                add(S.SPEC_PHASE_REQUESTS, at, batch * steps, t)


# a fleet whose processes measure their step costs: fast (two replicas, 4800 request-steps
# each, accepting position 0 at 0.8 and 0.6) and slow (2400, at 0.5, its steps 1.5 times as
# long), and quiet: 192 request-steps in its first 12 minutes, 24 of its steps measured,
# under the reference rule's floor (200 request-steps) and the advisor's (30 steps)
FLEET = {"f1:9464": ("fast", "/models/draft-v1", lambda t: 4800 * t // HOUR, lambda t: 0.8, 0),
         "f2:9464": ("fast", "/models/draft-v1", lambda t: 4800 * t // HOUR, lambda t: 0.6, 0),
         "s1:9464": ("slow", "/models/draft-v2", lambda t: 2400 * t // HOUR, lambda t: 0.5, 0),
         "q1:9464": ("quiet", "/models/draft-v1", lambda t: 4 * (min(t, 720) // STEP),
                     lambda t: 1.0, 0)}
# instance -> (its operator's reference or None, its step costs' scale, its measured steps
# in each bucket of BATCHES from its request-steps so far): half the request-steps run alone,
# half two to a step; every step measured (quiet's one in eight, all alone)
FLEET_COSTS = {"f1:9464": (2.5, 1.0, lambda n: (n / 2, n / 4)),
               "f2:9464": (2.5, 1.0, lambda n: (n / 2, n / 4)),
               "s1:9464": (None, 1.5, lambda n: (n / 2, n / 4)),
               "q1:9464": (2.0, 1.0, lambda n: (n / 8, 0))}


@pytest.fixture(scope="module")
def fleet(tmp_path_factory):
    """(url, t0): a Prometheus holding the hour of `FLEET`, with step costs and references."""
    yield from serving(tmp_path_factory.mktemp("prom-fleet"), FLEET, FLEET_COSTS)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def backfilled(tmp_path_factory):
    """(url, t0): a Prometheus serving only the backfilled hour that starts at t0."""
    yield from serving(tmp_path_factory.mktemp("prom"), PROCESSES)


def drafts_e(t: float) -> float:
    """Process e: 3000 request-steps in the first half hour with draft b, then restarted
    on its endpoint with draft a (its counters from 0 again): 3000 more."""
    return round(3000 * t / 1800) if t <= 1800 else round(3000 * (t - 1800) / 1800)


# e's draft b accepts position 0 always; a, after the restart, half the time
# (the new draft's name sorts first: Prometheus's order of two identities proves nothing)
UPGRADED = {"e:9464": ("upgraded", lambda t: "/models/draft-b" if t <= 1800 else
                       "/models/draft-a", drafts_e, lambda t: 1.0 if t <= 1800 else 0.5, 0)}


@pytest.fixture(scope="module")
def upgraded(tmp_path_factory):
    """(url, t0): a Prometheus holding the hour of one process restarted with a new draft."""
    yield from serving(tmp_path_factory.mktemp("prom-upgraded"), UPGRADED)


# three replicas of one deployment, 6000 request-steps each; r3 accepts position 0 one
# request-step in ten, the others always
REPLICATED = {f"r{i}:9464": ("replicated", "/models/draft-v1", drafts_b,
                             (lambda t: 0.1) if i == 3 else (lambda t: 1.0), 0)
              for i in (1, 2, 3)}


@pytest.fixture(scope="module")
def replicated(tmp_path_factory):
    """(url, t0): a Prometheus holding the hour of three replicas, one gone wrong."""
    yield from serving(tmp_path_factory.mktemp("prom-replicated"), REPLICATED)


def serving(work, processes: dict, costs: dict | None = None):
    t0 = float(int(time.time()) - 3 * HOUR)  # whole seconds, inside the default retention
    (work / "series.om").write_text(openmetrics(t0, processes, costs))
    subprocess.run([PROMTOOL, "tsdb", "create-blocks-from", "openmetrics",
                    str(work / "series.om"), str(work / "tsdb")], check=True,
                   capture_output=True, timeout=300)
    (work / "prometheus.yml").write_text("global: {}\n")
    port = free_port()
    log = open(work / "prometheus.log", "w")
    proc = subprocess.Popen([PROMETHEUS, f"--config.file={work}/prometheus.yml",
                             f"--storage.tsdb.path={work}/tsdb",
                             f"--web.listen-address=127.0.0.1:{port}", "--log.level=warn"],
                            stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    log.close()
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.time() + 120
        while True:  # ready only on a 200 (503 while it loads the blocks)
            try:
                with urllib.request.urlopen(f"{url}/-/ready", timeout=5) as resp:
                    if resp.status == 200:
                        break
            except OSError:
                pass
            assert proc.poll() is None, (work / "prometheus.log").read_text()
            assert time.time() < deadline, "Prometheus did not get ready"
            time.sleep(0.25)
        yield url, t0
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)


def by_process(report) -> dict[str, float]:
    return {p.process.split(" ")[0]: p.figures.drafts for p in report.readable}


@needs_prometheus
def test_the_whole_hour_counts_every_process_exactly(backfilled):
    """Over the whole hour: a's 1000 request-steps before its restart and 400 after (its
    reset read from its samples), though it stopped at minute 20; b's 6000, c's 3000 and
    d's 4000; each process's figures and all of them together, as the folder's report
    shows them, with a timeline that ends at those totals."""
    url, t0 = backfilled
    rep = prometheus_report(PrometheusRange(url, since_s=HOUR + 60, end=t0 + HOUR))
    assert by_process(rep) == {"a:9464": 1400, "b:9464": 6000, "c:9464": 3000,
                               "d:9464": 4000}
    c = rep.combined.figures
    assert (c.drafts, c.accepted_tokens, c.draft_tokens) == (14400, 11900, 28800)
    assert c.accepted_per_position == (11900, 0)
    assert c.accept_length_counts == {"1": 2500, "2": 11900}
    assert c.mean_acceptance_length == 1 + 11900 / 14400
    assert c.requests.finished == 14400 // REQUEST_STEPS
    # c's fc-bypass findings: counted, with the severity its label carries, and the verdict
    assert [(f.code, f.severity, f.count) for f in rep.combined.findings
            if f.code == S.FC_BYPASS] == [(S.FC_BYPASS, "error", 3)]
    # the timeline: every 15 s of the range, ending at the totals (a, restarted, too)
    b = next(p for p in rep.readable if p.process.startswith("b:"))
    assert len(b.points) >= 200 and b.points[-1].drafts == 6000
    a = next(p for p in rep.readable if p.process.startswith("a:"))
    assert [x.drafts for x in a.points] == sorted(x.drafts for x in a.points)
    assert a.points[-1].drafts == 1400
    assert c.timeline.drafts[-1] == 14400
    assert rep.verdict.state == "broken" and S.FC_BYPASS in rep.verdict.sentence


@needs_prometheus
def test_each_deployment_is_judged_on_its_own(backfilled):
    """A fleet of three deployments: besides each process and all of them together, each
    deployment's processes together with its own verdict (prod healthy, the canary broken
    by its fc bypass, d's drifting), in text, JSON, HTML and --watch."""
    from rich.console import Console

    from spectrace.report.html import render_html
    from spectrace.report.text import render_text
    from spectrace.report.watch import render
    url, t0 = backfilled
    rep = prometheus_report(PrometheusRange(url, since_s=HOUR + 60, end=t0 + HOUR))
    canary = {"service.name": "canary", "spectrace.draft_model": "/models/draft-v2"}
    prod = {"service.name": "prod", "spectrace.draft_model": "/models/draft-v1"}
    drifting = {"service.name": "drifting", "spectrace.draft_model": "/models/draft-v1"}
    assert [(g.group, g.figures.drafts, g.verdict.state) for g in rep.groups] == [
        (canary, 3000, "broken"), (drifting, 4000, "underperforming"),
        (prod, 7400, "healthy")]
    assert rep.groups[2].processes == ("a:9464 (spectrace)", "b:9464 (spectrace)")
    text = render_text(rep)
    assert "\ndeployment prod, draft /models/draft-v1: all 2 processes together" in text
    assert f"\n  {rep.groups[2].verdict.sentence}\n" in text
    assert text.index("deployment canary") < text.index("\nall 4 processes together")
    out = rep.to_json()
    assert [(g["group"], g["verdict"]["state"], g["drafts"]) for g in out["groups"]] == [
        (canary, "broken", 3000), (drifting, "underperforming", 4000),
        (prod, "healthy", 7400)]
    assert [p["service_name"] for p in out["processes"]] == ["prod", "prod", "canary",
                                                             "drifting"]
    page = render_html(rep)
    assert 'id="view-g0"' in page and 'id="view-g2"' in page
    assert f'data-state="healthy">{rep.groups[2].verdict.sentence}</p>' in page
    assert 'data-chart="mal" data-view="g2"' in page  # the timeline's chart, from Prometheus
    console = Console(record=True, width=200, color_system=None)
    console.print(render(rep, 2.0))
    screen = console.export_text()
    assert "deployment prod, draft /models/draft-v1: all 2 processes together" in screen
    assert rep.groups[0].verdict.sentence[:60] in screen


@needs_prometheus
def test_a_later_range_counts_what_it_gained(backfilled):
    """The hour's second half: what each counter gained since minute 30 (b 3000, c 1500);
    a, stopped at minute 20, is no process of that range."""
    url, t0 = backfilled
    rep = prometheus_report(PrometheusRange(url, since_s=HOUR / 2, end=t0 + HOUR))
    assert by_process(rep) == {"b:9464": 3000, "c:9464": 1500, "d:9464": 2000}


@needs_prometheus
def test_a_selector_picks_a_deployment_and_its_verdict(backfilled):
    """`--selector` matches the processes' target_info labels: prod (a and b) is healthy,
    the canary (c) broken by its fc bypass; one that matches nothing is a clear error."""
    url, t0 = backfilled
    prod = prometheus_report(PrometheusRange(url, 'service_name="prod"', HOUR + 60, t0 + HOUR))
    assert by_process(prod) == {"a:9464": 1400, "b:9464": 6000}
    assert prod.verdict.state == "healthy", prod.verdict.sentence
    canary = prometheus_report(PrometheusRange(url, 'service_name="canary"', HOUR + 60,
                                               t0 + HOUR))
    assert canary.verdict.state == "broken"
    with pytest.raises(ReportError, match=r'no spectrace process matches \{service_name="x"\}'):
        prometheus_report(PrometheusRange(url, 'service_name="x"', HOUR + 60, t0 + HOUR))


@needs_prometheus
def test_the_command_reads_prometheus(backfilled):
    """`spectrace report --prometheus URL --since 4h --json`: the same report as a command
    (the range ends now, so the backfilled hour, 2-3 hours ago, is inside 4h)."""
    url, _ = backfilled
    said = spectrace("report", "--prometheus", url, "--since", "4h", "--json")
    assert said.returncode == 0, said.stderr
    out = json.loads(said.stdout)
    assert out["combined"]["drafts"] == 14400
    assert out["verdict"]["state"] == "broken"
    assert out["directory"].startswith(url) and "last 4h" in out["directory"]
    text = spectrace("report", "--prometheus", url, "--since", "4h",
                     "--selector", 'service_name="prod"')
    assert text.returncode == 0 and text.stdout.startswith("Verdict: healthy"), text


@needs_prometheus
def test_drift_is_judged_from_the_range(backfilled):
    """d's draft stopped accepting in the last 15 minutes: the drift rule, over the
    windows read from Prometheus, finds the system moved (its traffic did not); prod,
    steady, has no drift."""
    url, t0 = backfilled
    rep = prometheus_report(PrometheusRange(url, 'service_name="drifting"', HOUR + 60,
                                            t0 + HOUR))
    [drift] = [f for f in rep.combined.findings if f.code == S.ACCEPTANCE_DRIFT]
    assert drift.severity == "warning", drift.message
    assert rep.verdict.state == "underperforming" and S.ACCEPTANCE_DRIFT in rep.verdict.sentence
    prod = prometheus_report(PrometheusRange(url, 'service_name="prod"', HOUR + 60,
                                             t0 + HOUR))
    assert S.ACCEPTANCE_DRIFT not in {f.code for f in prod.combined.findings}


@needs_prometheus
def test_a_canary_against_the_fleet_names_the_drafts_change(backfilled):
    """`--baseline-selector`: the canary (draft v2) against prod (v1) over the same range,
    through the comparison two folders get (`--baseline`): acceptance fell at position 0,
    the system and not the traffic, after the draft's change."""
    url, _ = backfilled
    said = spectrace("report", "--prometheus", url, "--since", "4h", "--selector",
                     'service_name="canary"', "--baseline-selector", 'service_name="prod"',
                     "--json")
    assert said.returncode == 0, said.stderr
    out = json.loads(said.stdout)
    c = out["comparison"]
    assert c["sentence"].startswith("the system: acceptance fell 0.50 (mean accept length "
                                    "2.00 -> 1.50"), c["sentence"]
    assert "draft /models/draft-v1 -> /models/draft-v2" in c["sentence"]
    assert "draft_model" in c["config_differs"]
    assert (out["current"]["combined"]["drafts"], out["baseline"]["combined"]["drafts"]) == (
        3000, 7400)
    text = spectrace("report", "--prometheus", url, "--since", "4h", "--selector",
                     'service_name="canary"', "--baseline-selector", 'service_name="prod"')
    assert text.returncode == 0 and text.stdout.startswith("the system: acceptance fell")


@needs_prometheus
def test_a_range_against_the_same_range_earlier(backfilled):
    """`--baseline-offset`: prod's last half hour of the backfilled hour against the half
    hour before it (the same draft: no change); the baseline's range is named."""
    url, t0 = backfilled
    from spectrace.report.compare import compare_reports
    now = PrometheusRange(url, 'service_name="prod"', HOUR / 2, end=t0 + HOUR)
    before = PrometheusRange(url, 'service_name="prod"', HOUR / 2, end=t0 + HOUR,
                             ago_s=HOUR / 2)
    cur, base = prometheus_report(now), prometheus_report(before)
    assert by_process(cur) == {"b:9464": 3000}
    assert by_process(base) == {"a:9464": 1400, "b:9464": 3000}  # a's restart inside
    assert base.directory.endswith("30m ending 30m ago")
    assert compare_reports(cur, base).sentence.startswith("no change in acceptance")
    said = spectrace("report", "--prometheus", url, "--since", "30m", "--baseline-offset",
                     "1 day")
    one_line_error(said, "--baseline-offset '1 day'")


@needs_prometheus
def test_until_ends_the_range_where_the_operator_says(backfilled):
    """`--until TIME`: the half hour ending at minute 30 of the backfilled hour (an RFC 3339
    time, and the same as a Unix time): what each counter gained from minute 0 to 30, a's
    restart inside; the range is named by its end."""
    import datetime
    url, t0 = backfilled
    at = datetime.datetime.fromtimestamp(t0 + HOUR / 2, datetime.timezone.utc)
    said = spectrace("report", "--prometheus", url, "--since", "30m", "--until",
                     at.strftime("%Y-%m-%dT%H:%M:%SZ"), "--json")
    assert said.returncode == 0, said.stderr
    rep = json.loads(said.stdout)
    assert rep["combined"]["drafts"] == 1400 + 3000 + 1500 + 2000
    assert rep["directory"].endswith(f"30m ending {at.strftime('%Y-%m-%dT%H:%M:%SZ')}")
    unix = spectrace("report", "--prometheus", url, "--since", "30m", "--until",
                     f"{t0 + HOUR / 2:.0f}", "--json")
    assert json.loads(unix.stdout)["combined"]["drafts"] == rep["combined"]["drafts"]


@needs_prometheus
def test_a_range_across_a_restart_with_a_new_draft(upgraded):
    """e restarted at minute 30 with a worse draft: its last half hour against the half
    hour before (`--baseline-offset 30m`) names the draft's change and the position that
    fell, the system and not the traffic, as `--baseline` does on two folders; over the
    whole hour e is one process, named by the draft it serves now, its counts both runs'."""
    url, t0 = upgraded
    said = spectrace("report", "--prometheus", url, "--since", "30m", "--until",
                     f"{t0 + HOUR:.0f}", "--baseline-offset", "30m", "--json")
    assert said.returncode == 0, said.stderr
    c = json.loads(said.stdout)["comparison"]
    assert c["sentence"].startswith("the system: acceptance fell 0.50 (mean accept length "
                                    "2.00 -> 1.50"), c["sentence"]
    assert "draft /models/draft-b -> /models/draft-a" in c["sentence"]
    assert "draft_model" in c["config_differs"]
    assert c["positions_fell"] == [0]
    whole = prometheus_report(PrometheusRange(url, since_s=HOUR + 60, end=t0 + HOUR))
    assert by_process(whole) == {"e:9464": 6000}
    assert whole.readable[0].draft_model == "/models/draft-a"


@needs_prometheus
def test_one_replica_accepting_far_less_than_the_rest(replicated):
    """r3 accepts 0.10 draft tokens per request-step, its two sibling replicas 1.00:
    `acceptance.replica_low` names r3 in every view (text, JSON, HTML, --watch), with the
    figures it compared, and the verdict leads with it; the replicas' own views do not
    raise it (a process alone has no siblings)."""
    from rich.console import Console

    from spectrace.report.html import render_html
    from spectrace.report.text import render_text
    from spectrace.report.watch import render
    from spectrace.rules import replicas
    url, t0 = replicated
    rep = prometheus_report(PrometheusRange(url, since_s=HOUR + 60, end=t0 + HOUR))
    [f] = [f for f in rep.combined.findings if f.code == replicas.CODE]
    assert f.severity == "warning" and f.details["process"].startswith("r3:9464")
    assert (f.details["drafts"], f.details["gain"], f.details["others_gain"]) == (
        6000, 0.1, 1.0)
    assert "against 1.00 for the other 2 replicas together of deployment replicated" in f.message
    assert all(replicas.CODE not in {x.code for x in p.findings} for p in rep.readable)
    assert replicas.CODE in rep.verdict.sentence, rep.verdict.sentence
    assert replicas.CODE in render_text(rep)
    assert replicas.CODE in json.dumps(rep.to_json()["combined"]["findings"])
    assert replicas.CODE in render_html(rep)
    console = Console(record=True, width=200, color_system=None)
    console.print(render(rep, 2.0))
    assert replicas.CODE in console.export_text()
    healthy = prometheus_report(PrometheusRange(url, 'instance!="r3:9464"', HOUR + 60,
                                                t0 + HOUR))
    assert replicas.CODE not in {x.code for x in healthy.combined.findings}


def instant(url: str, expr: str, at: float) -> dict[tuple[str, str], float]:
    """An instant query (POSTed: the panels' queries are long) -> value by (deployment,
    draft)."""
    body = urllib.parse.urlencode({"query": expr, "time": f"{at:.3f}"}).encode()
    with urllib.request.urlopen(f"{url}/api/v1/query", body, timeout=60) as resp:
        out = json.loads(resp.read())
    assert out["status"] == "success", out
    return {(r["metric"].get("service_name"), r["metric"].get("spectrace_draft_model")):
            float(r["value"][1]) for r in out["data"]["result"]}


def fleet_panel(title: str) -> str:
    """The overview dashboard's query of the panel `title` (grafana/dashboards), with its
    variables as Grafana fills them for every job and instance over a range of an hour."""
    with open(os.path.join(ROOT, "grafana", "dashboards", "spectrace-overview.json")) as fh:
        [panel] = [p for p in json.load(fh)["panels"] if p["title"] == title]
    [target] = panel["targets"]
    return target["expr"].replace("$__range", "1h").replace('"$job"', '".*"').replace(
        '"$instance"', '".*"')


@needs_prometheus
def test_the_fleet_row_gives_each_deployment_its_speedup_and_reference(fleet):
    """The fleet row's per-deployment panels on a real Prometheus, over the backfilled hour:
    each deployment's estimated speed-up (its processes' counts and step costs added up,
    its own forward fit) equals the one `spectrace report --prometheus --json` gives that
    deployment; its mean accept length over its reference (the gauge) is the report's mean
    over the reference, red at 85 % or below as the report's acceptance.below_reference;
    a deployment under the floors (quiet) has no bar, though its figures are there."""
    from spectrace.grafana import promql as Q
    from spectrace.rules import reference
    url, t0 = fleet
    end = t0 + HOUR
    said = spectrace("report", "--prometheus", url, "--since", "4h", "--json")
    assert said.returncode == 0, said.stderr
    groups = {(g["group"]["service.name"], g["group"]["spectrace.draft_model"]): g
              for g in json.loads(said.stdout)["groups"]}
    fast, slow, quiet = (("fast", "/models/draft-v1"), ("slow", "/models/draft-v2"),
                         ("quiet", "/models/draft-v1"))
    assert set(groups) == {fast, slow, quiet}
    assert groups[fast]["drafts"] == 9600 and groups[quiet]["drafts"] == 192

    speedup = instant(url, fleet_panel("Estimated speed-up by deployment and draft"), end)
    assert set(speedup) == {fast, slow}, speedup
    for group in (fast, slow):
        advice = groups[group]["speculation"]
        assert advice["estimate"] == "fit", advice  # the forward fitted, not the bound
        assert speedup[group] == pytest.approx(advice["estimated_speedup"], rel=1e-9), (
            group, speedup[group], advice["estimated_speedup"])
    assert speedup[fast] != pytest.approx(speedup[slow], rel=1e-3)
    # the fleet as one (the panel "Estimated speed-up vs no speculation"): unchanged
    [whole] = instant(url, Q.estimated_speedup("1h"), end).values()
    combined = json.loads(said.stdout)["combined"]["speculation"]["estimated_speedup"]
    assert whole == pytest.approx(combined, rel=1e-9)
    # quiet's estimate is there, left out by the floor (24 measured steps, under 30)
    assert quiet in instant(url, Q.estimated_speedup("1h", by=Q.FLEET), end)

    ratio = instant(url, fleet_panel(
        "Acceptance against its reference by deployment and draft"), end)
    assert set(ratio) == {fast}, ratio  # slow sets no reference; quiet under the floor
    length = groups[fast]["mean_acceptance_length"]
    assert length == 1 + (16 + 12) / 40
    assert ratio[fast] == pytest.approx(length / 2.5, rel=1e-9)
    assert ratio[fast] <= 1 - reference.MARGIN  # red, and the report raised the finding
    assert S.BELOW_REFERENCE in {f["code"] for f in groups[fast]["findings"]}
    assert quiet in instant(url, Q.mean_acceptance_length_side_by_side("1h", Q.FLEET), end)


# -- bad input: one line, exit status 2 (no Prometheus needed) --------------------------------
def test_an_unreachable_url_is_one_line():
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    one_line_error(spectrace("report", "--prometheus", f"http://127.0.0.1:{port}"),
                   "cannot reach it")


def test_a_bad_url_or_duration_is_one_line():
    one_line_error(spectrace("report", "--prometheus", "prometheus:9090"),
                   "expected an http:// or https:// URL")
    one_line_error(spectrace("report", "--prometheus", "http://x:9090", "--since", "an hour"),
                   "--since 'an hour'", "30m, 1h or 7d")
    assert duration_s("90s") == 90 and duration_s("1.5h") == 5400 and duration_s("7d") == 604800
    for bad in ("yesterday", "2026-12-07T10:00:00"):  # no zone: whose 10:00?
        one_line_error(spectrace("report", "--prometheus", "http://x:9090", "--until", bad),
                       f"--until {bad!r}", "with its zone")
    assert end_time("2h", now=10_000.0) == 2800 and end_time("1700000000", 0) == 1.7e9
    said = spectrace("report", "--selector", 'job="x"')
    assert said.returncode == 2 and "give --prometheus URL" in said.stderr


class _Site(http.server.BaseHTTPRequestHandler):
    """An HTTP server that is not Prometheus: a web page, or a proxy asking for a token."""

    def do_POST(self):  # noqa: N802 (http.server's name)
        if self.server.wants_token and self.headers.get("Authorization") != "Bearer s3cret":
            self.send_response(401)
            self.end_headers()
            return
        body = b"<html><body>Grafana</body></html>"
        self.send_response(200)
        self.send_header("Content-Type", "text/html")
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


@pytest.fixture
def site():
    def start(wants_token: bool):
        server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Site)
        server.wants_token = wants_token
        threading.Thread(target=server.serve_forever, daemon=True).start()
        started.append(server)
        return f"http://127.0.0.1:{server.server_address[1]}"
    started: list = []
    yield start
    for server in started:
        server.shutdown()
        server.server_close()


def test_an_answer_that_is_not_prometheus_is_one_line(site):
    one_line_error(spectrace("report", "--prometheus", site(False)),
                   "not Prometheus's query API", "http://host:9090")


def test_credentials_come_from_the_environment_and_are_never_printed(site):
    url = site(True)
    one_line_error(spectrace("report", "--prometheus", url), "refused (401)",
                   "SPECTRACE_PROMETHEUS_TOKEN")
    env = {**os.environ, "SPECTRACE_PROMETHEUS_TOKEN": "s3cret"}
    said = spectrace("report", "--prometheus", url, env=env)  # past the proxy: a web page
    one_line_error(said, "not Prometheus's query API")
    assert "s3cret" not in said.stderr + said.stdout
    bad_ca = {**os.environ, "SPECTRACE_PROMETHEUS_CA_FILE": "/nonexistent/ca.pem"}
    one_line_error(spectrace("report", "--prometheus", url, env=bad_ca),
                   "SPECTRACE_PROMETHEUS_CA_FILE=/nonexistent/ca.pem")
