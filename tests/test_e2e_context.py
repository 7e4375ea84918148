"""Acceptance by context length on a real SGLang 0.5.23 CPU server (EAGLE-3, v2 worker):
the `context` tiny pair (harness/tiny_models.py) accepts exactly one draft token per
verify while the sequence stays below 1024 tokens and none past it, so requests of about
100 tokens fall in the `<512` bucket at 2.0 and requests of about 1100 in `1k-2k` at 1.0.
The per-bucket figures must equal SGLang's own per-request meta_info of those requests,
and the long-context finding must fire only once both buckets pass its floor. In the same
run, sampled requests (temperature 0.8) are reported apart from greedy ones, and every
finished request's record (its span, SGLang's own request id) equals its meta_info. On
the CPU SGLang verifies every request greedily (`_verify_uses_greedy`), so sampled
requests accept as greedy ones do here; the test checks they are counted apart, exactly.
Each group carries its own `routing_key` (the request field SGLang's scheduler keeps), the
request label (`SPECTRACE_REQUEST_LABEL`) with a cap of 2: the third key is `other`.
One server.
"""
from __future__ import annotations

import json
import os
import urllib.request
from concurrent.futures import ThreadPoolExecutor

import pytest

from harness.tiny_models import walk
from spectrace import signals
from spectrace.rules import context as ctx
from spectrace.file_layout import SPANS_FILE
from spectrace.report.reader import iter_jsonl
from spectrace.report.snapshot import request_record
from tests.e2e import findings_but_cost, settle, sglang_totals

pytestmark = pytest.mark.sglang

FAST = {"SPECTRACE_METRIC_INTERVAL": "0.5", "SPECTRACE_REQUEST_SAMPLE_RATIO": "1",
        "SPECTRACE_REQUEST_LABEL": "routing_key", "SPECTRACE_REQUEST_LABEL_CAP": "2"}
SHORT, LONG, NEW_TOKENS = 100, 1100, 60  # prompt lengths; all steps stay in their bucket
N_SHORT, N_LONG = 8, 4                    # 8 x ~30 and 4 x ~59 request-steps: past the floor


N_SAMPLED, TEMPERATURE = 4, 0.8


def _post(run, input_ids, temperature, routing_key):
    body = {"input_ids": input_ids, "routing_key": routing_key, "sampling_params": {
        "max_new_tokens": NEW_TOKENS, "temperature": temperature}}
    req = urllib.request.Request(run.server.url + "/generate", data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=600) as resp:
        return json.loads(resp.read())


def _generate(run, prompts, routing_key, temperature=0):
    with ThreadPoolExecutor(4) as pool:
        return list(pool.map(lambda p: _post(run, p, temperature, routing_key), prompts))


def _records(run) -> dict:
    """The finished requests' records (spans) every scheduler folder holds, by request id."""
    out = {}
    for name in os.listdir(run.data_dir):
        for span in iter_jsonl(os.path.join(run.data_dir, name, SPANS_FILE)):
            r = request_record(span)
            if r is not None:
                out[r.request_id] = r
    return out


def _bucket(proc, name):
    return next((c for c in proc["by_context"] if c["context"] == name), None)


@pytest.fixture(scope="module")
def context_run(tiny_models, sglang_server):
    run = sglang_server(tiny_models("context"), env=FAST, timeout=600,
                        extra_args=["--max-total-tokens", "8192"])
    short = _generate(run, [walk(SHORT)] * N_SHORT, "short")
    short_proc = settle(run, sglang_totals(short)[0])
    long_ = _generate(run, [walk(LONG)] * N_LONG, "long")
    sampled = _generate(run, [walk(SHORT)] * N_SAMPLED, "sampled", TEMPERATURE)
    everything = short + long_ + sampled
    proc = settle(run, sglang_totals(everything)[0], requests=len(everything))
    return short, short_proc, long_, proc, sampled, run


def test_short_run_is_one_bucket_at_two_and_raises_nothing(context_run):
    short, short_proc = context_run[:2]
    verify, accepted, hist = sglang_totals(short)
    assert accepted == verify  # the construction: one accepted draft token per verify
    assert [c["context"] for c in short_proc["by_context"]] == ["<512"]
    b = _bucket(short_proc, "<512")
    assert b["drafts"] == verify >= ctx.FLOOR
    assert b["mean_acceptance_length"] == 2.0
    assert b["acceptance_per_position"] == [1.0, 0.0, 0.0]
    assert findings_but_cost(short_proc) == []


def test_buckets_equal_the_construction_and_sglang_meta_info(context_run):
    short, _, long_, proc, sampled, _ = context_run
    s_verify, s_accepted, _ = sglang_totals(short + sampled)
    l_verify, l_accepted, l_hist = sglang_totals(long_)
    assert l_accepted == 0 and l_hist == {"1": l_verify}  # SGLang agrees: none accepted
    assert [c["context"] for c in proc["by_context"]] == ["<512", "1k-2k"]
    short_b, long_b = _bucket(proc, "<512"), _bucket(proc, "1k-2k")
    assert (short_b["drafts"], short_b["accepted_tokens"]) == (s_verify, s_accepted)
    assert (long_b["drafts"], long_b["accepted_tokens"]) == (l_verify, 0)
    assert long_b["mean_acceptance_length"] == 1.0
    assert long_b["acceptance_per_position"] == [0.0, 0.0, 0.0]
    assert sum(c["drafts"] for c in proc["by_context"]) == proc["drafts"]
    assert proc["draft_context"] == {"max_position_embeddings": 4096}


def test_long_context_finding_fires_and_names_the_drafts_length(context_run):
    long_, proc = context_run[2:4]
    found = {f["code"]: f for f in findings_but_cost(proc)}
    assert list(found) == [signals.LONG_CONTEXT]
    f = found[signals.LONG_CONTEXT]
    assert f["severity"] == "warning"
    assert f["details"]["short"] == "<512" and f["details"]["long"] == "1k-2k"
    assert f["details"]["long_drafts"] == sglang_totals(long_)[0]
    assert "max_position_embeddings 4096" in f["message"]


def test_greedy_and_sampled_requests_are_reported_apart(context_run):
    short, _, long_, proc, sampled, _ = context_run
    by = {c["sampling"]: c for c in proc["by_sampling"]}
    assert list(by) == ["greedy", "0.5<=t<1"]
    g_verify, g_accepted, _ = sglang_totals(short + long_)
    s_verify, s_accepted, _ = sglang_totals(sampled)
    assert (by["greedy"]["drafts"], by["greedy"]["accepted_tokens"]) == (g_verify, g_accepted)
    assert (by["0.5<=t<1"]["drafts"], by["0.5<=t<1"]["accepted_tokens"]) == (s_verify,
                                                                           s_accepted)


def test_each_requests_record_equals_its_meta_info(context_run):
    short, _, long_, proc, sampled, run = context_run
    everything = short + long_ + sampled
    records = _records(run)
    assert set(records) == {r["meta_info"]["id"] for r in everything}
    for r in everything:
        m, rec = r["meta_info"], records[r["meta_info"]["id"]]
        assert (rec.verify_steps, rec.accepted_tokens) == (m["spec_verify_ct"],
                                                           m["spec_num_correct_drafts"])
        assert rec.sampling == ("greedy" if r in short + long_ else "0.5<=t<1")
    req = proc["requests"]
    assert req["finished"] == req["recorded"] == len(everything)
    # the long requests (none accepted) lead the list, at 1.00
    assert {x["request_id"] for x in req["lowest"][:N_LONG]} == {
        r["meta_info"]["id"] for r in long_}
    assert req["by_mean_acceptance_length"] == {
        "1.00-1.25": N_LONG, "2.00-2.25": N_SHORT + N_SAMPLED}


def test_request_label_keeps_two_routing_keys_and_counts_the_third_as_other(context_run):
    """Requests finish group by group, so `short` and `long` are the two values the cap
    keeps and every `sampled` request is `other`, counted past the cap (an info line)."""
    proc = context_run[3]
    req = proc["requests"]
    assert req["label_key"] == "routing_key"
    assert req["by_label"] == [
        {"value": "short", "finished": N_SHORT,
         "by_mean_acceptance_length": {"2.00-2.25": N_SHORT}},
        {"value": "long", "finished": N_LONG,
         "by_mean_acceptance_length": {"1.00-1.25": N_LONG}},
        {"value": "other", "finished": N_SAMPLED,
         "by_mean_acceptance_length": {"2.00-2.25": N_SAMPLED}}]
    assert req["label_overflow"] == N_SAMPLED
    assert not [f for f in proc["findings"] if "label" in f["code"]]
