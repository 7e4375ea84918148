"""Recorder of the `request_label` scenario (tests/test_request_label_recorded.py reads
it). Acceptance by request label, planted, on a real SGLang 0.5.23 CPU server (EAGLE-3, v2
worker) with SPECTRACE_REQUEST_LABEL=routing_key. The `context` tiny pair
(harness/tiny_models.py) proposes right only for token ids below CONTEXT_RIGHT_BELOW
(1024): a request walking ids 0, 1, 2 ... accepts one draft token per verify (2.0), one
walking ids from 2000 none (1.0), at the same context length (every sequence under 512
tokens, one context bucket). So a label's traffic is made easy or hard for the draft, as
a domain or a LoRA adapter the draft never saw is in the field.

First a uniform run: two labels (`u1`, `u2`) on identical traffic that walks the ids the
draft gets right, both past the label rule's floor (5000 request-steps each): no finding
at all. Then, on a server of its own, a label (`wrong`) whose requests walk the ids the
draft gets wrong, evenly interleaved with as many right ones (`u1`), both past the floor:
`acceptance.label_gap` fires and names it against the right ones, each label's figures
equal SGLang's own meta_info of its requests, the verdict leads with the condition, and no
other breakdown's rule fires. Every request verifies about the same number of steps, so
the wrong requests run beside right ones in batches of every size. (Before, the wrong
label ran on its own after the uniform run on the same server: the batch sizes each phase
ran at, which timing sets, decided which of them a batch-size bucket held, and the
batch-size rule compares different requests' steps, docs/report.md.) One server at a
time, 32 requests at a time (the floors need about 10,000 request-steps a server), at
niceness -10 as root (as tests/recorders/record_advisor.py): on a loaded 2-core machine a server
at 0 made 10 tokens a second and the requests timed out.

Two runs are kept, `uniform` and `planted`, each with SGLang's own figures by label
(`meta_info` sums of its requests) beside it. Run by `scripts/record.sh request_label`.
"""
from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor

import pytest

from harness.tiny_models import CONTEXT_RIGHT_BELOW, walk
from tests import recorded_runs
from tests.e2e import generate, settle, sglang_totals

FAST = {"SPECTRACE_METRIC_INTERVAL": "0.5", "SPECTRACE_REQUEST_SAMPLE_RATIO": "1",
        "SPECTRACE_REQUEST_LABEL": "routing_key"}
PRIORITY = {"nice": -10} if os.geteuid() == 0 else {}
RUNNING = 32                   # requests at a time; a phase sends two waves of it
PROMPT = 100                   # sequences stay under 512 tokens: all in the `<512` bucket
# new tokens: a right request verifies about half of them (2.0), a wrong one all (1.0):
# 32 x ~165 and 32 x ~169 request-steps, past the label rule's floor of 5000
NEW_RIGHT, NEW_WRONG = 330, 170
WRONG_FROM = 2000              # ids the draft never gets right (>= CONTEXT_RIGHT_BELOW)
assert WRONG_FROM >= CONTEXT_RIGHT_BELOW and WRONG_FROM + PROMPT + NEW_RIGHT < 3000
assert PROMPT + NEW_RIGHT < 512


def _post(run, input_ids, routing_key, new_tokens):
    return generate(run.server.url, {
        "input_ids": input_ids, "routing_key": routing_key, "sampling_params": {
            "max_new_tokens": new_tokens, "temperature": 0, "ignore_eos": True}},
        timeout=3000)


def _generate(run, jobs):
    """jobs: (input_ids, routing_key, new tokens), RUNNING at a time; responses in order."""
    with ThreadPoolExecutor(RUNNING) as pool:
        return list(pool.map(lambda j: _post(run, *j), jobs))


def _server(tiny_models, sglang_server):
    return sglang_server(tiny_models("context"), env=FAST, timeout=600,
                         extra_args=["--max-total-tokens", str(RUNNING * 512),
                                     "--max-running-requests", str(RUNNING)], **PRIORITY)


def _by_key(responses, jobs) -> dict:
    """label -> its requests' responses."""
    out: dict = {}
    for (_, key, _), r in zip(jobs, responses):
        out.setdefault(key, []).append(r)
    return out


@pytest.mark.sglang
@pytest.mark.parametrize("phase", ["uniform", "planted"])
def test_record(phase, tiny_models, sglang_server):
    run = _server(tiny_models, sglang_server)
    if phase == "uniform":
        jobs = [(walk(PROMPT), key, NEW_RIGHT) for key in ("u1", "u2") for _ in range(RUNNING)]
    else:
        jobs = [job for _ in range(RUNNING) for job in (
            (walk(PROMPT, WRONG_FROM), "wrong", NEW_WRONG),
            (walk(PROMPT), "u1", NEW_RIGHT))]  # wrong, right, wrong, right ...
    responses = _generate(run, jobs)
    drafts = sglang_totals(responses)[0]
    assert settle(run, drafts, requests=len(responses))["drafts"] == drafts
    recorded_runs.keep(run.data_dir, "request_label", phase, runtime={
        "requests": len(responses), "request_steps": drafts,
        "by_label": {key: list(sglang_totals(rs)) for key, rs in _by_key(responses, jobs).items()}})
