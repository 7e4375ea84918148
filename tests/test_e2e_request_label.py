"""Acceptance by request label, planted, on a real SGLang 0.5.23 CPU server (EAGLE-3, v2
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
niceness -10 as root (as tests/test_e2e_speedup.py): on a loaded 2-core machine a server
at 0 made 10 tokens a second and the requests timed out.
"""
from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor

import pytest

from harness.tiny_models import CONTEXT_RIGHT_BELOW, walk
from spectrace import signals
from spectrace.families.breakdowns import REQUEST_LABEL
from tests.e2e import codes, generate, settle, sglang_totals

pytestmark = pytest.mark.sglang

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


def _label_rows(proc) -> dict:
    return {r[REQUEST_LABEL.name]: r for r in proc[f"by_{REQUEST_LABEL.name}"]}


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


@pytest.fixture(scope="module")
def label_run(tiny_models, sglang_server):
    """(uniform process, its requests by label, planted process, its requests by label,
    the planted server's run): each phase on a server of its own."""
    run = _server(tiny_models, sglang_server)
    uniform_jobs = [(walk(PROMPT), key, NEW_RIGHT) for key in ("u1", "u2")
                    for _ in range(RUNNING)]
    uniform = _generate(run, uniform_jobs)
    uniform_proc = settle(run, sglang_totals(uniform)[0], requests=len(uniform))
    run = _server(tiny_models, sglang_server)  # stops the uniform one (its files stay)
    planted_jobs = [job for _ in range(RUNNING) for job in (
        (walk(PROMPT, WRONG_FROM), "wrong", NEW_WRONG),
        (walk(PROMPT), "u1", NEW_RIGHT))]  # wrong, right, wrong, right ...
    planted = _generate(run, planted_jobs)
    proc = settle(run, sglang_totals(planted)[0], requests=len(planted))
    return (uniform_proc, _by_key(uniform, uniform_jobs), proc,
            _by_key(planted, planted_jobs), run)


def test_uniform_labels_past_the_floor_raise_nothing(label_run):
    uniform_proc, by_key, _, _, _ = label_run
    rows = _label_rows(uniform_proc)
    assert set(rows) == {"u1", "u2"}
    for key in ("u1", "u2"):
        verify, accepted, _ = sglang_totals(by_key[key])
        assert accepted == verify  # the construction: one accepted draft token per verify
        assert (rows[key]["drafts"], rows[key]["accepted_tokens"]) == (verify, accepted)
        assert rows[key]["drafts"] >= REQUEST_LABEL.rule.floor  # judged, not under the floor
        assert rows[key]["mean_acceptance_length"] == 2.0
    assert uniform_proc["findings"] == []


def test_planted_label_gets_the_finding_naming_it(label_run):
    _, _, proc, by_key, _ = label_run
    rows = _label_rows(proc)
    assert set(rows) == {"u1", "wrong"}
    for key, rs in by_key.items():  # each label's figures are SGLang's own
        verify, accepted, _ = sglang_totals(rs)
        assert (rows[key]["drafts"], rows[key]["accepted_tokens"]) == (verify, accepted), key
    wrong_verify, wrong_accepted, hist = sglang_totals(by_key["wrong"])
    assert wrong_accepted == 0 and hist == {"1": wrong_verify}  # SGLang agrees: none
    assert rows["wrong"]["drafts"] >= REQUEST_LABEL.rule.floor
    assert rows["u1"]["drafts"] >= REQUEST_LABEL.rule.floor
    f = codes(proc)[signals.LABEL_GAP]
    assert f["severity"] == "warning"
    assert f["details"]["worse"] == "wrong" and f["details"]["worse_length"] == 1.0
    assert (f["details"]["better"], f["details"]["better_length"]) == ("u1", 2.0)
    assert f["details"]["worse_drafts"] == wrong_verify
    assert "for label wrong" in f["message"]
    # no other breakdown's rule fires: one context bucket; the wrong label's requests run
    # beside as many right ones, about as many steps each, in batches of every size
    assert not {signals.LONG_CONTEXT, signals.LARGE_BATCH, signals.SAMPLING_GAP} & set(
        codes(proc))


def test_the_verdict_leads_with_the_label(label_run):
    from conftest import run_report
    _, _, _, by_key, run = label_run
    report = run_report(run.data_dir)
    verdict = report["verdict"]
    assert verdict["state"] == "underperforming"
    assert verdict["clues"][0]["source"] == signals.LABEL_GAP
    wrong_verify = sglang_totals(by_key["wrong"])[0]
    assert (f"most associated with request label: mean accept length 1.00 at wrong "
            f"({wrong_verify} request-steps) against 2.00 at ") in verdict["sentence"]
