"""Recorder of the `html` scenario (tests/test_html_report.py reads it): two runs of the
real SGLang 0.5.23 CPU server (EAGLE-3, v2 worker), `healthy` (the tiny `partial` pair)
and `bypass` (the `bypass` pair: aux capture off, the draft's fc skipped), each answering
three prompts of 24 new tokens one after another, each after the scheduler's next metrics
snapshot (so the timeline has points apart), then stopped normally (SIGTERM to the group).
Run by `scripts/record.sh html`.
"""
from __future__ import annotations

import signal

import pytest

from tests import recorded_runs
from tests.e2e import sglang_totals, wait_for

ENV = {"SPECTRACE_METRIC_INTERVAL": "0.5", "SPECTRACE_AGREEMENT_EVERY": "2"}
PROMPTS = [[3, 7, 11], [5, 9, 2], [4, 6, 8]]


@pytest.mark.parametrize("name,mode", [("healthy", "partial"), ("bypass", "bypass")])
def test_record(name, mode, tiny_models, sglang_server):
    run = sglang_server(tiny_models(mode), env=ENV)
    responses = []
    for p in PROMPTS:
        before = run.scheduler()["metric_snapshots"] if responses else 0
        responses.append(run.server.generate(p, 24))
        wait_for(lambda: run.scheduler()["metric_snapshots"] > before + 1)
    run.server.send(signal.SIGTERM)
    run.server.wait_stopped()
    drafts = sglang_totals(responses)[0]
    assert run.scheduler()["drafts"] == drafts  # a normal stop loses nothing
    recorded_runs.keep(run.data_dir, "html", name, runtime={
        "requests": len(responses), "request_steps": drafts})
