"""A normal stop loses nothing, on a real SGLang 0.5.23 CPU server: it answers 3 requests
and is stopped right after the last answer, at the default 2 s export interval (so the
totals are not yet exported), by Ctrl-C (SIGINT to its process group, started from a
terminal or as a script's background job, which ignores SIGINT), SIGTERM to the group,
or SIGTERM to the launcher alone (its graceful drain). Each time `spectrace report` totals
equal SGLang's own meta_info sums, and every process of the server is gone within the
wait's bound (a hang fails it).

Whether the stop takes longer with spectrace is a timing question, asked where timings
are printed: `benchmarks/stop_under_load.py --without` times each Ctrl-C with spectrace
and without, on a loaded machine; tests/test_final_flush.py proves the bound on
spectrace's own wait (a stuck exporter holds a stop at most its wait, not its 30 s).

How SGLang stops each process in each case is described in spectrace/export/final_flush.py
and docs/report.md. (The `*_cpu` kernels come from the pure-torch stand-in in harness/.)
"""
from __future__ import annotations

import signal

import pytest

pytestmark = pytest.mark.sglang

PROMPTS = [[3, 7, 11], [5, 9, 2], [4, 6, 8]]
STOPS = {  # name -> (signal, to the whole group?, started as a background job?)
    "ctrl-c": (signal.SIGINT, True, False),
    "ctrl-c-background-job": (signal.SIGINT, True, True),
    "sigterm-group": (signal.SIGTERM, True, False),
    "sigterm-launcher": (signal.SIGTERM, False, False),
}
STOPPED_WITHIN_S = 120  # a hang, not a slow machine (a stop takes 1-20 s here)


def answer_then_stop(tiny_models, sglang_server, stop: str):
    sig, group, background = STOPS[stop]
    run = sglang_server(tiny_models("full"), background_job=background)
    responses = [run.server.generate(p, 24) for p in PROMPTS]
    run.server.send(sig, group=group)              # right after the last answer
    took = run.server.wait_stopped(timeout=STOPPED_WITHIN_S)
    print(f"\n{stop}: every server process gone {took:.2f} s after the signal")
    verify = sum(r["meta_info"]["spec_verify_ct"] for r in responses)
    accepted = sum(r["meta_info"]["spec_num_correct_drafts"] for r in responses)
    return run, verify, accepted


@pytest.mark.parametrize("stop", list(STOPS))
def test_a_stop_right_after_the_last_answer_loses_nothing(tiny_models, sglang_server, stop):
    run, verify, accepted = answer_then_stop(tiny_models, sglang_server, stop)
    proc = run.scheduler()
    assert verify > 0 and accepted > verify        # full acceptance: 3 tokens per step
    assert (proc["drafts"], proc["accepted_tokens"]) == (verify, accepted)
    assert proc["skipped_lines"] == 0
