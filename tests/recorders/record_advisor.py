"""Recorder of the `advisor` scenario (tests/test_advisor_recorded.py reads it): does
speculation pay? The real SGLang 0.5.23 CPU server (EAGLE-3, v2 worker), every step's cost
measured (`SPECTRACE_STEP_COST_EVERY=1`), with the tiny `partial` pair at 3 draft steps
(one draft token accepted a step; the same server without speculation serves faster on
this machine, benchmarks/advisor_accuracy.py, docs/advisor.md), then the `full` pair (every
draft token accepted; pays). Each serves 4 rounds of one request alone (batch 1) then four
at once (batch 4), 48 new tokens each, taking turns so that a load that changes meanwhile
falls on both batch sizes. The servers run at niceness -10 as root.

Record on a quiet machine: the estimate's interval is as wide as the step timings are
noisy (on a loaded 2-core machine the partial pair's interval reached past 1.1). Run by
`scripts/record.sh advisor`.
"""
from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor

import pytest

from tests import recorded_runs
from tests.e2e import settle, sglang_totals

ENV = {"SPECTRACE_METRIC_INTERVAL": "0.5", "SPECTRACE_STEP_COST_EVERY": "1",
       "SPECTRACE_AGREEMENT_EVERY": "0"}
PROMPTS = [[3, 7, 11], [5, 9, 2], [4, 6, 8], [10, 1, 3]]
PRIORITY = {"nice": -10} if os.geteuid() == 0 else {}
TOKENS, ROUNDS = 48, 4


@pytest.mark.sglang
@pytest.mark.parametrize("mode", ["partial", "full"])
def test_record(mode, tiny_models, sglang_server):
    run = sglang_server(tiny_models(mode), env=ENV, **PRIORITY)
    out = []
    with ThreadPoolExecutor(4) as pool:
        for i in range(ROUNDS):
            out.append(run.server.generate(PROMPTS[i % 4], TOKENS))
            out += list(pool.map(lambda p: run.server.generate(p, TOKENS), PROMPTS))
    drafts = sglang_totals(out)[0]
    assert settle(run, drafts)["drafts"] == drafts
    recorded_runs.keep(run.data_dir, "advisor", f"{mode}-k3", runtime={
        "requests": len(out), "request_steps": drafts})
