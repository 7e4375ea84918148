"""Drift on a real SGLang 0.5.23 CPU server (EAGLE-3, v2 worker), with the `context` tiny
pair (harness/tiny_models.py): requests walking ids from 0 with ~100-token prompts accept
exactly one draft token per verify (2.0), requests walking past id 1024 with ~1100-token
prompts none (1.0). Steady short traffic gets no `acceptance.drift` (with both windows
past the floor, so the quiet is the rule's, not the floor's); the same server, its
traffic then moved to the long prompts, gets it, named as the traffic (the context-length
mix moved; within the buckets both windows share, nothing to compare). The steady run
is judged with its recent window set to its second half of requests, the moved run with
it set to the long phase (SPECTRACE_DRIFT_WINDOW, as an operator asks about the time since
a change), so each window's contents do not depend on how fast a loaded machine served.
The server is given SPECTRACE_EXPECTED_ACCEPT_LENGTH=3.0: its steady run at 2.0 gets
`acceptance.below_reference` naming that setting, and the same files read with a
reference the run meets (2.1, set for `spectrace report`) get none. One server."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from harness.tiny_models import walk
from spectrace import names
from spectrace.report import summarize_process
from spectrace.report.drift_windows import WINDOW_SETTING, windows
from spectrace.rules import drift, reference
from tests.e2e import after_traffic, codes, generate, settle, sglang_totals

pytestmark = pytest.mark.sglang

FAST = {"SPECTRACE_METRIC_INTERVAL": "0.5", "SPECTRACE_EXPECTED_ACCEPT_LENGTH": "3.0"}
SHORT, LONG, NEW_TOKENS = 100, 1100, 8
# short: ~4 request-steps each, long ~7: each window past the floors of 200 request-steps
# and 100 finished requests (the steady run's two halves too)
N_SHORT, N_LONG, CONCURRENT = 260, 120, 8
# A recent window of SECONDS is counted back from the last metrics snapshot, and the idle
# server goes on writing snapshots while `spectrace report` starts (seconds on a loaded
# machine): each window is set SLACK seconds longer than its phase, and each phase starts
# after GAP idle seconds, so the boundary falls in the idle gap for any start-up delay
# under SLACK.
GAP, SLACK = 12, 8


def _post(run, input_ids):
    return generate(run.server.url, {"input_ids": input_ids, "sampling_params": {
        "max_new_tokens": NEW_TOKENS, "temperature": 0}})


def _generate(run, prompts):
    with ThreadPoolExecutor(CONCURRENT) as pool:
        return list(pool.map(lambda p: _post(run, p), prompts))


def _scheduler_dir(run) -> str:
    name = next(n for n in os.listdir(run.data_dir)
                if run.scheduler()["process"] == n)
    return os.path.join(run.data_dir, name)


def _report_with(run, env: dict) -> dict:
    """The scheduler's summary from `spectrace report --json`, run with `env` added."""
    out = subprocess.run([sys.executable, "-m", "spectrace.cli", "report", str(run.data_dir),
                          "--json"], capture_output=True, text=True, timeout=120,
                         env={**os.environ, **env})
    assert out.returncode == 0, out.stderr
    return next(p for p in json.loads(out.stdout)["processes"] if p["drafts"])


@pytest.fixture(scope="module")
def drift_run(tiny_models, sglang_server):
    run = sglang_server(tiny_models("context"), env=FAST, timeout=600,
                        extra_args=["--max-total-tokens", "16384"])
    # the steady run in two halves of requests, its recent window set to the second half
    # (a window of half the serving time holds however many requests a loaded machine
    # served in it: 28 of 260 in one CI rehearsal, under the floor)
    first = _generate(run, [walk(SHORT)] * (N_SHORT // 2))
    settle(run, sglang_totals(first)[0])
    time.sleep(GAP)
    half_start = time.time()
    short = first + _generate(run, [walk(SHORT)] * (N_SHORT - N_SHORT // 2))
    settle(run, sglang_totals(short)[0])
    after_traffic(run)  # finished requests and request-steps of the same steps
    half_s = time.time() - half_start + SLACK
    steady_windows = windows([summarize_process(_scheduler_dir(run)).drift_history], half_s)
    steady = _report_with(run, {WINDOW_SETTING: f"{half_s:.1f}"})
    met = _report_with(run, {reference.SETTING: "2.1", WINDOW_SETTING: f"{half_s:.1f}"})
    # the report is asked for a recent window that starts just before the long phase
    # (SPECTRACE_DRIFT_WINDOW), so the short phase is all in the earlier window
    time.sleep(GAP)
    long_start = time.time()
    long_ = _generate(run, [walk(LONG)] * N_LONG)
    settle(run, sglang_totals(short + long_)[0])
    moved = _report_with(run, {WINDOW_SETTING: f"{time.time() - long_start + SLACK:.1f}"})
    return short, steady, steady_windows, long_, moved, met


def test_steady_traffic_has_no_drift_with_both_windows_past_the_floor(drift_run):
    short, steady, (earlier, recent, _) = drift_run[:3]
    assert steady["drafts"] == sglang_totals(short)[0]
    assert earlier.drafts >= drift.FLOOR and recent.drafts >= drift.FLOOR
    assert min(earlier.requests, recent.requests) >= drift.MIN_REQUESTS
    assert earlier.requests + recent.requests == N_SHORT
    assert earlier.drafts + recent.drafts == steady["drafts"]
    assert 1 + earlier.gain == 1 + recent.gain == 2.0  # the construction, both halves
    assert names.ACCEPTANCE_DRIFT not in codes(steady)


def test_traffic_moved_to_long_prompts_is_drift_by_context(drift_run):
    short, _, _, long_, proc = drift_run[:5]
    f = codes(proc)[names.ACCEPTANCE_DRIFT]
    d = f["details"]
    assert f["severity"] == "info" and d["cause"] == drift.TRAFFIC and d["moved"] == "context"
    l_verify = sglang_totals(long_)[0]
    assert d["recent_drafts"] == l_verify and d["recent_length"] == 1.0
    assert d["recent_requests"] == N_LONG and d["earlier_requests"] == N_SHORT
    assert d["earlier_drafts"] == sglang_totals(short)[0] and d["earlier_length"] == 2.0
    ctx = d["breakdowns"]["context"]
    assert ctx["grew"] == "1k-2k" and ctx["share_before"] == 0 and ctx["share_now"] == 1
    # greedy both windows: sampling did not move, acceptance fell within its bucket
    assert d["breakdowns"]["sampling"]["explains"] is False
    assert "by context length: 1k-2k went from 0% to 100%" in f["message"]


def test_below_the_servers_reference_and_not_below_one_it_meets(drift_run):
    short, steady = drift_run[:2]
    f = codes(steady)[names.BELOW_REFERENCE]
    assert f["severity"] == "warning"
    assert f["details"]["length"] == 2.0 and f["details"]["reference"] == 3.0
    assert f["details"]["drafts"] == sglang_totals(short)[0]
    assert "SPECTRACE_EXPECTED_ACCEPT_LENGTH=3 (the server's setting)" in f["message"]
    met = drift_run[5]
    assert met["drafts"] == steady["drafts"] and names.BELOW_REFERENCE not in codes(met)
