"""Acceptance by request label, planted, on a real SGLang 0.5.23 CPU server (EAGLE-3, v2
worker) with SPECTRACE_REQUEST_LABEL=routing_key. The `context` tiny pair
(harness/tiny_models.py) proposes right only for token ids below CONTEXT_RIGHT_BELOW
(1024): a request walking ids 0, 1, 2 ... accepts one draft token per verify (2.0), one
walking ids from 2000 none (1.0), at the same context length (every sequence under 512
tokens, one context bucket). So a label's traffic is made easy or hard for the draft, as
a domain or a LoRA adapter the draft never saw is in the field.

First a uniform run: two labels on identical traffic, both past the label rule's floor
(5000 request-steps each): no finding at all. Then, on the same server, a label whose
requests walk the ids the draft gets right and one whose requests walk those it gets
wrong: `acceptance.label_gap` fires and names the wrong label, each label's figures equal
SGLang's own meta_info of its requests, and the verdict leads with the condition.
One server.
"""
from __future__ import annotations

import json
import urllib.request
from concurrent.futures import ThreadPoolExecutor

import pytest

from harness.tiny_models import CONTEXT_RIGHT_BELOW, walk
from spectrace import signals
from spectrace.families.breakdowns import REQUEST_LABEL
from tests.e2e import codes, settle, sglang_totals

pytestmark = pytest.mark.sglang

FAST = {"SPECTRACE_METRIC_INTERVAL": "0.5", "SPECTRACE_REQUEST_SAMPLE_RATIO": "1",
        "SPECTRACE_REQUEST_LABEL": "routing_key"}
PROMPT, NEW_TOKENS = 100, 400  # sequences up to 500 tokens: all in the `<512` bucket
WRONG_FROM = 2000              # ids the draft never gets right (>= CONTEXT_RIGHT_BELOW)
# requests a label needs to pass the floor: ~200 request-steps each at 2.0, ~400 at 1.0
N_RIGHT, N_WRONG = 27, 14
assert WRONG_FROM >= CONTEXT_RIGHT_BELOW and WRONG_FROM + PROMPT + NEW_TOKENS < 3000


def _post(run, input_ids, routing_key):
    body = {"input_ids": input_ids, "routing_key": routing_key, "sampling_params": {
        "max_new_tokens": NEW_TOKENS, "temperature": 0, "ignore_eos": True}}
    req = urllib.request.Request(run.server.url + "/generate", data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=900) as resp:
        return json.loads(resp.read())


def _generate(run, jobs):
    """jobs: (input_ids, routing_key) pairs, 8 at a time (mixed batches); responses in order."""
    with ThreadPoolExecutor(8) as pool:
        return list(pool.map(lambda j: _post(run, *j), jobs))


def _label_rows(proc) -> dict:
    return {r[REQUEST_LABEL.name]: r for r in proc[f"by_{REQUEST_LABEL.name}"]}


@pytest.fixture(scope="module")
def label_run(tiny_models, sglang_server):
    run = sglang_server(tiny_models("context"), env=FAST, timeout=600,
                        extra_args=["--max-total-tokens", "8192"])
    uniform_jobs = [(walk(PROMPT), key) for _ in range(N_RIGHT) for key in ("u1", "u2")]
    uniform = _generate(run, uniform_jobs)
    uniform_proc = settle(run, sglang_totals(uniform)[0], requests=len(uniform))
    planted_jobs = ([(walk(PROMPT), "right")] * N_RIGHT
                    + [(walk(PROMPT, WRONG_FROM), "wrong")] * N_WRONG)
    planted_jobs = planted_jobs[::2] + planted_jobs[1::2]  # interleaved: mixed batches
    planted = _generate(run, planted_jobs)
    everything = uniform + planted
    proc = settle(run, sglang_totals(everything)[0], requests=len(everything))
    by_key = {}
    for (_, key), r in zip(uniform_jobs + planted_jobs, everything):
        by_key.setdefault(key, []).append(r)
    return uniform_proc, proc, by_key, run


def test_uniform_labels_past_the_floor_raise_nothing(label_run):
    uniform_proc, _, by_key, _ = label_run
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
    _, proc, by_key, _ = label_run
    rows = _label_rows(proc)
    assert set(rows) == {"u1", "u2", "right", "wrong"}
    for key, rs in by_key.items():  # each label's figures are SGLang's own
        verify, accepted, _ = sglang_totals(rs)
        assert (rows[key]["drafts"], rows[key]["accepted_tokens"]) == (verify, accepted), key
    wrong_verify, wrong_accepted, hist = sglang_totals(by_key["wrong"])
    assert wrong_accepted == 0 and hist == {"1": wrong_verify}  # SGLang agrees: none
    assert rows["wrong"]["drafts"] >= REQUEST_LABEL.rule.floor
    f = codes(proc)[signals.LABEL_GAP]
    assert f["severity"] == "warning"
    assert f["details"]["worse"] == "wrong" and f["details"]["worse_length"] == 1.0
    assert f["details"]["better_length"] == 2.0
    assert f["details"]["worse_drafts"] == wrong_verify
    assert "for label wrong" in f["message"]
    # no other breakdown's rule fires: one context bucket, every batch mixes both labels
    assert not {signals.LONG_CONTEXT, signals.LARGE_BATCH, signals.SAMPLING_GAP} & set(
        codes(proc))


def test_the_verdict_leads_with_the_label(label_run):
    from conftest import run_report
    _, _, by_key, run = label_run
    report = run_report(run.data_dir)
    verdict = report["verdict"]
    assert verdict["state"] == "underperforming"
    assert verdict["clues"][0]["source"] == signals.LABEL_GAP
    wrong_verify = sglang_totals(by_key["wrong"])[0]
    assert (f"most associated with request label: mean accept length 1.00 at wrong "
            f"({wrong_verify} request-steps) against 2.00 at ") in verdict["sentence"]
