"""Acceptance by prefix-cache hits, planted, on the `prefix_cache_gap` recording
(tests/recorders/record_prefix_cache_gap.py: a real SGLang 0.5.23 CPU server, EAGLE-3 v2
worker, radix cache on, with the `context` tiny pair; tests/recorded/README.md says when
and how). Two phases, each on a server of its own: 32 uncached and 32 cached requests
evenly interleaved, 32 at a time, each bucket past the rule's floor. The uniform phase
(traffic the draft gets right alike): no finding. The planted phase (the repeated prompt
walks ids the draft gets wrong): `acceptance.prefix_cache_gap` fires, each bucket's
figures equal SGLang's own meta_info of its requests (kept beside the recording), the
verdict leads with the condition, and no other breakdown's rule fires.

A recording, not a live run: which requests a batch held is the scheduler's timing, and
the batch-size rule compares different requests' steps (in one CI run
`acceptance.large_batch` fired beside the planted gap). The live wiring of the prefix-cache
buckets (each bucket's figures equal SGLang's and vLLM's own per-request counts) is
asserted live by tests/test_e2e_prefix_grammar.py."""
from __future__ import annotations

from spectrace import signals
from spectrace.families.breakdowns import PREFIX_CACHE
from tests import recorded_runs
from tests.e2e import codes, findings_but_cost
from tests.recorded_runs import facts, path


def _report(phase: str) -> dict:
    return recorded_runs.report(path("prefix_cache_gap", phase))


def _rows(proc) -> dict:
    return {r[PREFIX_CACHE.name]: [r["drafts"], r["accepted_tokens"]]
            for r in proc[f"by_{PREFIX_CACHE.name}"]}


def _own(phase: str) -> dict:
    return facts("prefix_cache_gap", phase)["runtime"]


def test_uniform_hits_past_the_floor_raise_nothing():
    proc = recorded_runs.counting_process(_report("uniform"))
    rows = _rows(proc)
    assert rows == _own("uniform")["by_bucket"]  # SGLang's own counts, by its cached tokens
    assert set(rows) == {"none", ">=50%"}, rows  # the repeats were served from the cache
    for bucket in ("none", ">=50%"):
        assert rows[bucket][0] >= PREFIX_CACHE.rule.floor, rows  # judged, not under it
        assert rows[bucket][0] == rows[bucket][1], rows  # one accepted a verify: 2.0
    assert findings_but_cost(proc) == []


def test_planted_cache_hits_get_the_finding():
    proc = recorded_runs.counting_process(_report("planted"))
    rows = _rows(proc)
    assert rows == _own("planted")["by_bucket"], rows
    f = codes(proc)[signals.PREFIX_CACHE_GAP]
    assert f["severity"] == "warning"
    d = f["details"]
    assert (d["better"], d["worse"]) == ("none", ">=50%"), d
    assert d["worse_drafts"] == rows[">=50%"][0] and d["better_drafts"] == rows["none"][0]
    assert "with >=50% of the prompt cached" in f["message"]
    # no other breakdown's rule fires: one context bucket, both kinds side by side in
    # batches of every size, all greedy
    assert not {signals.LONG_CONTEXT, signals.LARGE_BATCH, signals.SAMPLING_GAP,
                signals.GRAMMAR_GAP, signals.LABEL_GAP} & set(codes(proc))


def test_the_verdict_leads_with_the_prefix_cache():
    report = _report("planted")
    verdict, rows = report["verdict"], _rows(recorded_runs.counting_process(report))
    assert verdict["state"] == "underperforming"
    assert verdict["clues"][0]["source"] == signals.PREFIX_CACHE_GAP
    worse = rows[">=50%"][0]
    assert (f"most associated with prefix-cache hits: mean accept length "
            f"{1 + rows['>=50%'][1] / worse:.2f} at >=50% ({worse} request-steps)"
            ) in verdict["sentence"], verdict["sentence"]
