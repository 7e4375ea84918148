"""The series budget (`spectrace/grafana/series_budget.py`, docs/metrics.md "Series per
process"): every attribute has a declared count; a real process's recorded series stay
within the budget at its K; and a process driven through every bucket of the per-step
breakdowns reaches the budget of those metrics exactly (so the count is neither short nor
padded). The real process is a recording of the SGLang CPU server (tests/recorded/)."""
from __future__ import annotations

import collections
import glob
import os

import pytest

from spectrace import signals as S
from spectrace.families import breakdowns, step_cost
from spectrace.grafana import series_budget as budget
from spectrace.report.reader import read_jsonl
from spectrace.rules import context as ctx

pytestmark = pytest.mark.fast

RECORDED = os.path.join(os.path.dirname(__file__), "recorded")


def test_every_attribute_has_a_declared_count():
    assert budget.undeclared() == []


def test_the_budget_grows_with_k_and_the_label_cap():
    k3, k7 = budget.total(budget.Shape(3)), budget.total(budget.Shape(7))
    labelled = budget.total(budget.Shape(7, label_cap=32))
    assert k3 < k7 < labelled
    # 33 label values (32 kept and `other`): the label breakdown's two metrics and the
    # finished requests by (mean length bucket, label), plus the overflow counter
    lengths = 7 + 1
    assert labelled - k7 == (33 * lengths + 33 + len(budget.req.REQUEST_BUCKETS) * 32 + 1)


def _series_of(snapshot: dict) -> collections.Counter:
    """Prometheus series per metric in one process's snapshot (as the exporter names them:
    a histogram's buckets, +Inf, _count and _sum)."""
    by_name = {m.name: m for m in S.ALL_METRICS}
    out: collections.Counter = collections.Counter()
    for name, points in snapshot["metrics"].items():
        spec = by_name[name]
        for p in points:
            v = p["value"]
            if isinstance(v, dict):  # a histogram: its buckets and +Inf, _count, _sum
                base = spec.prometheus_name
                out[f"{base}_bucket"] += len(v["bounds"]) + 1
                out[f"{base}_count"] += 1
                out[f"{base}_sum"] += 1
            else:
                out[spec.prometheus_name] += 1
    return out


def _recorded_processes():
    """(folder, last metrics snapshot) of every recorded process (the report's reader)."""
    for path in sorted(glob.glob(os.path.join(RECORDED, "**", "metrics.jsonl"),
                                 recursive=True)):
        snapshots = read_jsonl(path)
        if snapshots:
            yield os.path.relpath(os.path.dirname(path), RECORDED), snapshots[-1]


def test_every_recorded_process_stays_within_the_budget_at_its_k():
    seen = 0
    for where, snap in _recorded_processes():
        positions = {p["attributes"][S.ATTR_POSITION] for m in S.ALL_METRICS
                     if S.ATTR_POSITION in m.attributes
                     for p in snap["metrics"].get(m.name, [])}
        k = max(positions, default=0) + 1
        steps = {p["attributes"][S.ATTR_NUM_STEPS]
                 for m in step_cost.METRICS for p in snap["metrics"].get(m.name, [])}
        labels = {p["attributes"].get(S.ATTR_REQUEST_LABEL)
                  for p in snap["metrics"].get(S.SPEC_REQUESTS.name, [])} - {None}
        shape = budget.Shape(k, max(1, len(steps - {0})), 32 if labels else 0)  # 0: plain
        allowed = budget.budget(shape)
        over = {n: (c, allowed[n]) for n, c in _series_of(snap).items() if c > allowed[n]}
        assert over == {}, f"{where} (K={k}): series over the budget: {over}"
        seen += 1
    assert seen >= 5  # the recordings of several servers and configurations


def test_every_step_bucket_reached_fills_the_budget_exactly(memory_telemetry):
    """The acceptance family driven through every context, batch-size and CUDA-graph
    bucket with every accept length: its series equal the budget's count, metric by
    metric."""
    k = 3
    acc = memory_telemetry.recorder.acceptance.totals
    lengths = [ctx.EDGES[0] - 1, *ctx.EDGES]  # one in every bucket; -1: `unknown`
    graphs = (True, False, None, "PIECEWISE")
    for i, label in enumerate(step_cost.BUCKETS):
        size = 1 << i
        for accepted in range(k + 1):
            seq = [lengths[j % len(lengths)] for j in range(size)]
            acc.add([accepted] * size, k, seq_lens=[-1] * size if i == 0 else seq,
                    graph=graphs[(i + accepted) % len(graphs)])
    points = collections.Counter(name for name, pts in memory_telemetry.collect().items()
                                 for _ in pts)
    shape = budget.Shape(k)
    step = [b for b in breakdowns.BREAKDOWNS if b.source == breakdowns.STEP]
    metrics = [S.SPEC_ACCEPTED_PER_POSITION, S.SPEC_ACCEPT_LENGTH, S.SPEC_DRAFTS_PER_POSITION,
               *(m for b in step for m in (b.accept_length, b.accepted_tokens))]
    got = {m.name: points[m.name] for m in metrics}
    assert got == {m.name: budget.series(m, shape) for m in metrics}


def test_the_reference_is_one_series_only_while_it_is_set():
    """SPECTRACE_EXPECTED_ACCEPT_LENGTH is exported as one gauge series of the process (its
    value, no attribute), counted once in the budget; without the setting, no series."""
    from tests.kit.process_state import memory_recorder
    name = S.SPEC_REFERENCE_ACCEPT_LENGTH.name
    assert budget.series(S.SPEC_REFERENCE_ACCEPT_LENGTH, budget.Shape(7)) == 1
    assert budget.budget(budget.Shape(3))[S.SPEC_REFERENCE_ACCEPT_LENGTH.prometheus_name] == 1
    with memory_recorder(expected_accept_length=2.5) as telemetry:
        assert telemetry.collect()[name] == [({}, 2.5)]
    with memory_recorder() as telemetry:
        assert name not in telemetry.collect()
