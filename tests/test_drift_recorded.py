"""Drift on the `drift` recording (tests/recorders/record_drift.py: one real SGLang 0.5.23
CPU server, EAGLE-3 v2 worker, the `context` tiny pair; tests/recorded/README.md says when
and how): steady short traffic (2.0) gets no `acceptance.drift` with both windows past the
floor, so the quiet is the rule's, not the floor's; the same server, its traffic then moved
to long prompts (1.0), gets it, named as the traffic (the context-length mix moved). Each
run is judged with the recent window the recorder kept (SPECTRACE_DRIFT_WINDOW: the steady
run's second half, the moved run's long phase), as an operator asks about the time since a
change. The server was given SPECTRACE_EXPECTED_ACCEPT_LENGTH=3.0: its steady run at 2.0
gets `acceptance.below_reference` naming that setting, and the same files read with a
reference the run meets (2.1, set for `spectrace report`) get none.

A recording, not a live run: a window in seconds holds however many requests the machine
served in it, which on a loaded machine fell under the floor; the live wiring (exported
totals equal SGLang's own) is asserted when recording and again here."""
from __future__ import annotations

import os

import pytest

from spectrace import names
from spectrace.report import summarize_process
from spectrace.report.drift_windows import WINDOW_SETTING, windows
from spectrace.rules import drift, reference
from tests import recorded_runs
from tests.e2e import codes
from tests.recorded_runs import facts, path


def _scheduler(run: str, env: dict | None = None) -> dict:
    return recorded_runs.counting_process(recorded_runs.report(path("drift", run), env=env))


def _window(run: str) -> dict:
    return {WINDOW_SETTING: facts("drift", run)["settings"][WINDOW_SETTING]}


@pytest.fixture(scope="module")
def steady():
    return _scheduler("steady", _window("steady"))


@pytest.fixture(scope="module")
def moved():
    return _scheduler("moved", _window("moved"))


def test_steady_traffic_has_no_drift_with_both_windows_past_the_floor(steady):
    own = facts("drift", "steady")["runtime"]
    folder = path("drift", "steady")
    [name] = [n for n in os.listdir(folder) if n == steady["process"]]
    earlier, recent, _ = windows([summarize_process(os.path.join(folder, name)).drift_history],
                                 float(_window("steady")[WINDOW_SETTING]))
    assert steady["drafts"] == own["request_steps"]
    assert earlier.drafts >= drift.FLOOR and recent.drafts >= drift.FLOOR
    assert min(earlier.requests, recent.requests) >= drift.MIN_REQUESTS
    assert earlier.requests + recent.requests == own["short_requests"] == own["requests"]
    assert earlier.drafts + recent.drafts == steady["drafts"]
    assert 1 + earlier.gain == 1 + recent.gain == 2.0  # the construction, both halves
    assert names.ACCEPTANCE_DRIFT not in codes(steady)


def test_traffic_moved_to_long_prompts_is_drift_by_context(moved):
    own, steady_own = facts("drift", "moved")["runtime"], facts("drift", "steady")["runtime"]
    assert moved["drafts"] == own["request_steps"]
    f = codes(moved)[names.ACCEPTANCE_DRIFT]
    d = f["details"]
    assert f["severity"] == "info" and d["cause"] == drift.TRAFFIC and d["moved"] == "context"
    assert d["recent_drafts"] == own["request_steps"] - steady_own["request_steps"]
    assert d["recent_length"] == 1.0
    assert d["recent_requests"] == own["long_requests"] and \
        d["earlier_requests"] == own["short_requests"]
    assert d["earlier_drafts"] == steady_own["request_steps"] and d["earlier_length"] == 2.0
    ctx = d["breakdowns"]["context"]
    assert ctx["grew"] == "1k-2k" and ctx["share_before"] == 0 and ctx["share_now"] == 1
    # greedy both windows: sampling did not move, acceptance fell within its bucket
    assert d["breakdowns"]["sampling"]["explains"] is False
    assert "by context length: 1k-2k went from 0% to 100%" in f["message"]


def test_below_the_servers_reference_and_not_below_one_it_meets(steady):
    f = codes(steady)[names.BELOW_REFERENCE]
    assert f["severity"] == "warning"
    assert f["details"]["length"] == 2.0 and f["details"]["reference"] == 3.0
    assert f["details"]["drafts"] == facts("drift", "steady")["runtime"]["request_steps"]
    assert "SPECTRACE_EXPECTED_ACCEPT_LENGTH=3 (the server's setting)" in f["message"]
    met = _scheduler("steady", {reference.SETTING: "2.1", **_window("steady")})
    assert met["drafts"] == steady["drafts"] and names.BELOW_REFERENCE not in codes(met)
