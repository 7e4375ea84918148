"""Breakdowns of acceptance declared once (`spectrace.families.breakdowns`): each reaches
its metrics, the report's views and the dashboards from its declaration; batch size is
counted from the steps' own accept counts through the real hooks (stand-ins of SGLang's
and vLLM's classes: the test kit), read back in memory."""
from __future__ import annotations

import json

import pytest

from spectrace import signals
from spectrace.rules.buckets import GapRule, bucket_figures, gap
from spectrace.families import breakdowns
from spectrace.families.acceptance import AcceptanceTotals, PositionCounts

BATCH = breakdowns.BATCH_SIZE


def test_every_breakdown_declares_its_two_metrics_and_signals_exports_them():
    names = {m.name for m in signals.ALL_METRICS}
    for b in breakdowns.BREAKDOWNS:
        assert b.accept_length.name == f"spectrace.spec.accept_length_by_{b.name}"
        assert b.accepted_tokens.name == f"spectrace.spec.accepted_tokens_by_{b.name}"
        assert {b.accept_length.name, b.accepted_tokens.name} <= names
        assert b.attribute in b.accept_length.attributes and b.accept_length.counted_once
    assert signals.SPEC_ACCEPT_LENGTH_BY_CONTEXT is breakdowns.CONTEXT.accept_length


def test_batch_size_is_the_number_of_counts_a_step_hands_over():
    """Each step's request-steps land in its batch-size bucket (the step-cost buckets), by
    accept length; vLLM's own per-step counts (`PositionCounts`) the same way."""
    acc = AcceptanceTotals()
    acc.add([0, 1, 2], 3)             # batch 3: bucket 2-3
    acc.add([3], 3)                   # batch 1
    acc.add([1] * 70, 3)              # batch 70: bucket 64-127
    acc.add_positions(PositionCounts(4, 12, [3, 2, 1]))  # 4 requests: 1 accepted 0, 1 each 1..3
    acc.fold()
    got = acc.by["batch_size"]
    assert got.lengths == {("2-3", 1): 1, ("2-3", 2): 1, ("2-3", 3): 1, ("1", 4): 1,
                           ("64-127", 2): 70, ("4-7", 1): 1, ("4-7", 2): 1, ("4-7", 3): 1,
                           ("4-7", 4): 1}
    assert got.accepted == {"2-3": 3, "1": 3, "64-127": 70, "4-7": 6}
    assert sum(got.lengths.values()) == acc.drafts == 3 + 1 + 70 + 4
    assert sum(got.accepted.values()) == acc.accepted


@pytest.mark.torch
def test_sglang_v2_steps_reach_the_batch_size_metric_in_memory(memory_telemetry):
    """SGLang v2's real hooks (the test kit's stand-ins of its classes): steps of batch 5
    and 70 reach `accept_length_by_batch_size` by their own batch size; every request-step
    lands in exactly one bucket."""
    from tests.kit import stand_ins as hb
    for bs, n in ((5, 3), (70, 2)):
        step = hb.V2Step(bs, "spectrace")
        try:
            for _ in range(n):
                step()
        finally:
            step.close()
    t = memory_telemetry
    name = BATCH.accept_length.name
    by_bucket = {}
    for attrs, v in t.collect()[name]:
        by_bucket[attrs[BATCH.attribute]] = by_bucket.get(attrs[BATCH.attribute], 0) + v
        assert attrs[signals.ATTR_COUNTED] == signals.COUNTED_ONCE
    assert by_bucket == {"4-7": 5 * 3, "64-127": 70 * 2}
    assert t.total(signals.SPEC_DRAFTS.name) == 5 * 3 + 70 * 2
    accepted = t.total(BATCH.accepted_tokens.name)
    assert accepted == t.total(signals.SPEC_ACCEPTED_TOKENS.name) > 0


def _figures(**buckets):
    """Bucket figures from name=(mean accept length, request-steps) (lengths 1 and 2)."""
    counts = {}
    for name, (mean, n) in buckets.items():
        two = round((mean - 1) * n)
        counts[(name.replace("_", "-"), 2)] = two
        counts[(name.replace("_", "-"), 1)] = n - two
    return bucket_figures(counts, 1, BATCH.order)


@pytest.mark.parametrize("buckets,fires", [
    (dict(b1=(2.0, 2000), b64_127=(1.2, 2000)), True),      # 1.0 -> 0.2: fires
    (dict(b1=(2.0, 2000), b64_127=(1.2, 999)), False),      # under the floor
    (dict(b1=(2.0, 2000), b2_3=(1.2, 2000)), False),        # next to each other
    (dict(b1=(2.0, 2000), b64_127=(1.75, 2000)), False),    # 0.75 of it: not at most 0.7
    (dict(b1=(1.3, 2000), b64_127=(1.1, 2000)), False),     # a third, but only 0.2 fewer
    (dict(b64_127=(2.0, 2000), b1=(1.2, 2000)), False),     # larger batches better: no
])
def test_the_batch_size_rule_and_its_floor(buckets, fires):
    figs = _figures(**{k.lstrip("b"): v for k, v in buckets.items()})
    found = gap(figs, BATCH.rule, BATCH.buckets)
    assert (found is not None) == fires, figs
    if fires:
        assert (found.better.bucket, found.worse.bucket) == ("1", "64-127")


def test_unordered_rule_compares_best_and_worst():
    figs = _figures(**{"1": (1.5, 300), "8-15": (2.0, 300), "64-127": (1.9, 300)})
    rule = GapRule(200, 0.7, 0.3, ordered=False)
    found = gap(figs, rule, BATCH.buckets)
    assert (found.better.bucket, found.worse.bucket) == ("8-15", "1")


def test_report_shows_batch_size_in_every_view(tmp_path):
    """A process folder with batch-size counts: `by_batch_size` in --json, its lines in the
    text (and so --watch), its table in the HTML; the finding when the rule fires."""
    from spectrace.report import build_report, render_text
    from spectrace.report.html import render_html
    from spectrace.file_layout import METRICS_FILE, RESOURCE_FILE
    proc = tmp_path / "sglang-1"
    proc.mkdir()
    (proc / RESOURCE_FILE).write_text(json.dumps({"attributes": {}, "started": 1.0}))
    points = [{"attributes": {BATCH.attribute: b, signals.ATTR_LENGTH: n}, "value": v}
              for b, n, v in (("1", 3, 1500), ("1", 1, 500), ("64-127", 1, 1800),
                              ("64-127", 2, 200))]
    metrics = {BATCH.accept_length.name: points,
               signals.SPEC_DRAFTS.name: [{"attributes": {}, "value": 4000}],
               signals.SPEC_ACCEPTED_TOKENS.name: [{"attributes": {}, "value": 3200}],
               signals.SPEC_DRAFT_TOKENS.name: [{"attributes": {}, "value": 12000}]}
    (proc / METRICS_FILE).write_text(json.dumps({"time": 2.0, "metrics": metrics}) + "\n")
    rep = build_report(str(tmp_path))
    out = rep.to_json()["processes"][0]
    assert [(r["batch_size"], r["drafts"], r["mean_acceptance_length"])
            for r in out["by_batch_size"]] == [("1", 2000, 2.5), ("64-127", 2000, 1.1)]
    text = render_text(rep)
    assert "acceptance by batch size (requests verified in the step):" in text
    assert "64-127: mean accept length 1.10" in text
    assert signals.LARGE_BATCH in text and rep.verdict.state == "underperforming"
    html = render_html(rep)
    assert 'data-key="by_batch_size.1.mean_acceptance_length"' in html


# -- sampling and request label: their rules and findings -----------------------------------
LABEL, SAMPLING = breakdowns.REQUEST_LABEL, breakdowns.SAMPLING


def _named(b, **buckets):
    """Bucket figures of breakdown `b` from bucket=(mean accept length, request-steps)."""
    counts = {}
    for name, (mean, n) in buckets.items():
        two = round((mean - 1) * n)
        counts[(name, 2)], counts[(name, 1)] = two, n - two
    return bucket_figures(counts, 1, b.order)


@pytest.mark.parametrize("buckets,worse", [
    (dict(chat=(2.0, 5000), math=(1.0, 5000), code=(1.6, 5000)), "math"),  # worst of three
    (dict(chat=(2.0, 5000), math=(1.0, 4999)), None),      # under the floor
    (dict(chat=(2.0, 5000), math=(1.55, 5000)), None),     # 0.55 of it: not at most half
    (dict(chat=(1.8, 5000), math=(1.35, 5000)), None),     # under half, but 0.45 fewer
    (dict(none=(1.2, 9000), math=(2.0, 9000)), "none"),    # requests without the field too
])
def test_the_label_rule_compares_the_best_and_the_worst_label(buckets, worse):
    from spectrace.report.breakdown_figures import breakdown_gap, gap_finding
    assert not LABEL.buckets and not LABEL.rule.ordered  # open values, no order
    found = breakdown_gap(LABEL, _named(LABEL, **buckets))
    assert (found and found.worse.bucket) == worse
    if worse:
        f = gap_finding(LABEL, found)
        assert (f.code, f.severity) == (signals.LABEL_GAP, "warning")
        assert f.message.startswith(f"acceptance differs by request label: mean accept length "
                                    f"{found.worse.mean_acceptance_length:.2f} for label {worse}")


def test_the_sampling_gap_is_info_and_has_no_alert():
    """Sampled requests accept less by construction: the finding is info (the verdict
    names it only to explain a weak mean) and no alert restates it."""
    from spectrace.grafana import alerts
    from spectrace.report.breakdown_figures import breakdown_gap, gap_finding
    found = breakdown_gap(SAMPLING, _named(SAMPLING, greedy=(3.0, 5000), **{"t>=1": (1.5, 5000)}))
    f = gap_finding(SAMPLING, found)
    assert (f.code, f.severity, found.worse.bucket) == (signals.SAMPLING_GAP, "info", "t>=1")
    assert "Expected:" in f.message
    assert breakdown_gap(SAMPLING, _named(SAMPLING, greedy=(3.0, 4999),
                                          **{"t>=1": (1.5, 5000)})) is None
    names = {r["alert"] for r in alerts.rules()["groups"][0]["rules"]}
    assert LABEL.alert in names and not SAMPLING.alert
    assert {b.alert for b in breakdowns.BREAKDOWNS if b.alert} <= names


# -- CUDA graph: the runtime's own word on the step's verify ---------------------------------
GRAPH = breakdowns.CUDA_GRAPH


def test_cuda_graph_buckets_each_step_by_what_the_runtime_said():
    """True -> graph, False -> eager, None (the runtime said nothing, vLLM's own counts
    included) -> unknown; the totals are the same request-steps."""
    acc = AcceptanceTotals()
    acc.add([0, 1, 2], 3, None, True)
    acc.add([3], 3, [10], False)
    acc.add([1], 3)
    acc.add_positions(PositionCounts(2, 6, [2, 1, 0]))
    acc.fold()
    got = acc.by["cuda_graph"]
    assert got.lengths == {("graph", 1): 1, ("graph", 2): 1, ("graph", 3): 1, ("eager", 4): 1,
                           ("unknown", 2): 2, ("unknown", 3): 1}
    assert sum(got.lengths.values()) == acc.drafts == 3 + 1 + 1 + 2
    assert sum(got.accepted.values()) == acc.accepted
    assert acc.by["context"].lengths == {("<512", 4): 1}  # lengths still travel alone
    assert GRAPH.rule is None and GRAPH.buckets == ("graph", "piecewise", "eager")


def test_cuda_graph_reads_vllm_runtime_mode_names():
    """vLLM's `CUDAGraphStat.runtime_mode` (`str(CUDAGraphMode)`): FULL, PIECEWISE, NONE;
    a name it did not have when this was written is `unknown`, not guessed."""
    acc = AcceptanceTotals()
    for mode in ("FULL", "PIECEWISE", "NONE", "FULL_AND_PIECEWISE"):
        acc.add_positions(PositionCounts(1, 3, [1, 0, 0]), None, mode)
    acc.fold()
    assert acc.by["cuda_graph"].lengths == {("graph", 2): 1, ("piecewise", 2): 1,
                                            ("eager", 2): 1, ("unknown", 2): 1}


@pytest.mark.sglang
@pytest.mark.parametrize("graphed,bucket", [(True, "graph"), (False, "eager")])
def test_sglang_v2_verify_result_can_run_cuda_graph_reaches_its_bucket(
        memory_telemetry, graphed, bucket):
    """SGLang's real `GenerationBatchResult` built with `can_run_cuda_graph` as the target's
    verify returns it: the resolve hook hands the flag to the accept-count hook the resolve
    calls, and the batch's request-steps land in its bucket. The worker is a stand-in
    holding the one attribute the hook reads (EAGLEWorkerV2 needs a loaded model)."""
    from types import SimpleNamespace

    import torch
    from sglang.srt.managers.utils import GenerationBatchResult
    from spectrace.adapters import sglang_v2
    result = GenerationBatchResult(can_run_cuda_graph=graphed)
    batch = SimpleNamespace(seq_lens_cpu=torch.tensor([20, 30]))
    sglang_v2._before_resolve_v2(None, result, batch)
    sglang_v2._before_verify_complete_cpu(SimpleNamespace(speculative_num_steps=3), [2, 0])
    t = memory_telemetry
    got = {(a[GRAPH.attribute], a[signals.ATTR_LENGTH]): v
           for a, v in t.collect()[GRAPH.accept_length.name] if v}
    assert got == {(bucket, 3): 1, (bucket, 1): 1}
    assert t.total(GRAPH.accepted_tokens.name) == t.total(signals.SPEC_ACCEPTED_TOKENS.name) == 2
# -- prefix cache and grammar: their rules and findings -------------------------------------
PREFIX, GRAMMAR = breakdowns.PREFIX_CACHE, breakdowns.GRAMMAR


@pytest.mark.parametrize("buckets,worse", [
    ({"none": (2.0, 5000), ">=50%": (1.0, 5000)}, ">=50%"),   # stale KV on long hits
    ({"none": (2.0, 5000), "<50%": (1.0, 5000), ">=50%": (1.0, 4999)}, "<50%"),  # last past it
    ({"none": (2.0, 5000), ">=50%": (1.0, 4999)}, None),      # under the floor
    ({"none": (1.999, 4999), ">=50%": (1.0, 9000)}, None),    # the baseline under the floor
    ({"none": (2.0, 5000), ">=50%": (1.55, 5000)}, None),     # 0.55 of it: not at most half
    ({"none": (1.8, 5000), ">=50%": (1.35, 5000)}, None),     # under half, but 0.45 fewer
    ({"none": (1.0, 9000), ">=50%": (2.0, 9000)}, None),      # hits accepting more: no fault
    ({"none": (2.0, 9000), "<50%": (2.0, 9000), ">=50%": (2.0, 9000)}, None),  # healthy
    ({"none": (2.0, 9000), "unknown": (1.0, 9000)}, None),    # no prompt length: never counts
])
def test_the_prefix_cache_rule_compares_uncached_with_the_hits(buckets, worse):
    """`none` against the last hit bucket past the floor: a fall in the hits is the stale-KV
    signature (vllm#41838), a warning with an alert; never under the floor, never on hits
    that accept as well or better."""
    from spectrace.report.breakdown_figures import breakdown_gap, gap_finding
    assert PREFIX.rule.ordered and PREFIX.rule.floor == 5000
    found = breakdown_gap(PREFIX, _named(PREFIX, **buckets))
    assert (found and found.worse.bucket) == worse
    if worse:
        assert found.better.bucket == "none"
        f = gap_finding(PREFIX, found)
        assert (f.code, f.severity) == (signals.PREFIX_CACHE_GAP, "warning")
        assert f.message.startswith(
            "requests served from the prefix cache accept less than uncached ones: mean "
            f"accept length {found.worse.mean_acceptance_length:.2f} with {worse} of the "
            "prompt cached"), f.message
        assert "prefix caching off" in f.message and f.details["floor"] == 5000


def test_the_grammar_gap_is_info_and_has_no_alert():
    """Constrained requests accept differently by construction: the best and the worst
    kind past the floor, an info finding, no alert; either way round (forced tokens make a
    grammar's requests accept more), never under the floor, quiet on equal kinds."""
    from spectrace.grafana import alerts
    from spectrace.report.breakdown_figures import breakdown_gap, gap_finding
    assert not GRAMMAR.rule.ordered and not GRAMMAR.alert
    found = breakdown_gap(GRAMMAR, _named(GRAMMAR, none=(2.0, 5000), json=(1.0, 5000),
                                          regex=(1.8, 5000)))
    f = gap_finding(GRAMMAR, found)
    assert (f.code, f.severity, found.worse.bucket) == (signals.GRAMMAR_GAP, "info", "json")
    assert f.message.startswith("acceptance differs by structured output: mean accept "
                                "length 1.00 for json requests"), f.message
    found = breakdown_gap(GRAMMAR, _named(GRAMMAR, none=(1.4, 5000), choice=(3.0, 5000)))
    assert (found.better.bucket, found.worse.bucket) == ("choice", "none")
    assert breakdown_gap(GRAMMAR, _named(GRAMMAR, none=(2.0, 5000), json=(1.0, 4999))) is None
    assert breakdown_gap(GRAMMAR, _named(GRAMMAR, none=(2.0, 9000), json=(2.0, 9000))) is None
    rules = {r["alert"]: r for r in alerts.rules()["groups"][0]["rules"]}
    assert PREFIX.alert in rules and signals.PREFIX_CACHE_GAP in \
        rules[PREFIX.alert]["annotations"]["description"]
    assert not any(signals.GRAMMAR_GAP in r["annotations"]["description"]
                   for r in rules.values())
