"""Recorder of the `drift` scenario (tests/test_drift_recorded.py reads it): one real
SGLang 0.5.23 CPU server (EAGLE-3, v2 worker) with the `context` tiny pair
(harness/tiny_models.py): requests walking ids from 0 with ~100-token prompts accept
exactly one draft token per verify (2.0), walks past id 1024 with ~1100-token prompts none
(1.0). The server is given SPECTRACE_EXPECTED_ACCEPT_LENGTH=3.0.

Steady short traffic in two halves of 130 requests, then (after an idle gap) 120 long
requests. Two runs are kept: `steady` (the folder as it stood after the short traffic) and
`moved` (after the long traffic), each with the recent window the test asks the report
for (SPECTRACE_DRIFT_WINDOW): the steady run's second half, the moved run's long phase.
A recent window of seconds is counted back from the last metrics snapshot, so each window
is set SLACK seconds longer than its phase and each phase starts after GAP idle seconds:
the boundary falls in the idle gap. The gaps are the scenario's shape (its windows'
boundaries), recorded once; no test waits on them. Run by `scripts/record.sh drift`.
"""
from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor

from harness.tiny_models import walk
from tests import recorded_runs
from tests.e2e import after_traffic, generate, settle, sglang_totals

ENV = {"SPECTRACE_METRIC_INTERVAL": "0.5", "SPECTRACE_EXPECTED_ACCEPT_LENGTH": "3.0"}
SHORT, LONG, NEW_TOKENS = 100, 1100, 8
# short: ~4 request-steps each, long ~7: each window past the floors of 200 request-steps
# and 100 finished requests (the steady run's two halves too)
N_SHORT, N_LONG, CONCURRENT = 260, 120, 8
GAP, SLACK = 12, 8


def _post(run, input_ids):
    return generate(run.server.url, {"input_ids": input_ids, "sampling_params": {
        "max_new_tokens": NEW_TOKENS, "temperature": 0}})


def _generate(run, prompts):
    with ThreadPoolExecutor(CONCURRENT) as pool:
        return list(pool.map(lambda p: _post(run, p), prompts))


def _keep(run, name: str, responses: list, window_s: float) -> None:
    drafts, accepted, _ = sglang_totals(responses)
    folder = recorded_runs.keep(run.data_dir, "drift", name, runtime={
        "requests": len(responses), "request_steps": drafts, "accepted_drafts": accepted,
        "short_requests": N_SHORT, "long_requests": len(responses) - N_SHORT},
        settings={"SPECTRACE_DRIFT_WINDOW": f"{window_s:.1f}"})
    copy = run.scheduler(recorded_runs.report(folder))
    assert copy["drafts"] == drafts  # the copy holds every step


def test_record(tiny_models, sglang_server):
    run = sglang_server(tiny_models("context"), env=ENV, timeout=600,
                        extra_args=["--max-total-tokens", "16384"])
    first = _generate(run, [walk(SHORT)] * (N_SHORT // 2))
    settle(run, sglang_totals(first)[0])
    time.sleep(GAP)  # the scenario's idle gap between its windows (see above)
    half_start = time.time()
    short = first + _generate(run, [walk(SHORT)] * (N_SHORT - N_SHORT // 2))
    proc = settle(run, sglang_totals(short)[0], requests=N_SHORT)
    assert proc["drafts"] == sglang_totals(short)[0]
    after_traffic(run)  # finished requests and request-steps of the same steps
    _keep(run, "steady", short, time.time() - half_start + SLACK)
    time.sleep(GAP)
    long_start = time.time()
    long_ = _generate(run, [walk(LONG)] * N_LONG)
    proc = settle(run, sglang_totals(short + long_)[0], requests=N_SHORT + N_LONG)
    assert proc["drafts"] == sglang_totals(short + long_)[0]
    after_traffic(run)
    _keep(run, "moved", short + long_, time.time() - long_start + SLACK)
