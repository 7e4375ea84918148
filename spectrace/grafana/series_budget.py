"""How many series one process exports at most, from the declarations: each metric's
attributes and how many values each can take (a breakdown's buckets, the draft positions,
the step-cost phases, the run-time finding codes), for a draft of K tokens per step.

Prometheus stores one series per label set (a histogram: one per bucket, plus `_count` and
`_sum`), so a fleet of N processes costs its store N times this; docs/metrics.md ("Series
per process") states it for the usual shapes, and tests/test_series_budget.py holds a
real process's series to it. An attribute without a declared count here fails that test,
so a new attribute cannot grow the budget unseen.
"""
from __future__ import annotations

from dataclasses import dataclass
from types import SimpleNamespace
from typing import Callable

from .. import signals as S
from ..families import breakdowns, step_cost
from ..families.findings import RUNTIME_SPECS
from ..rules import requests as req
from ..rules.context import TRAINED_KEYS


@dataclass(frozen=True)
class Shape:
    """What a process's series count depends on. `k`: draft tokens per request-step (the
    positions; accept lengths run 1 .. k + 1); `k_values`: the numbers of draft steps the
    step cost sees (1 for a fixed K; adaptive K: each K it uses); `label_cap`:
    `SPECTRACE_REQUEST_LABEL_CAP` when `SPECTRACE_REQUEST_LABEL` is set, 0 when it is not."""
    k: int = 3
    k_values: int = 1
    label_cap: int = 0


def _bucketed(attribute: str) -> int:
    """A breakdown's fixed buckets and `unknown`."""
    [b] = [b for b in breakdowns.BREAKDOWNS if b.attribute == attribute]
    return len(b.buckets) + 1


def _label(shape: Shape) -> int:
    return shape.label_cap + 1 if shape.label_cap else 1  # the values kept, and `other`


def _off(shape: Shape) -> set[str]:
    """The metrics of the breakdowns a process with this shape does not count."""
    cfg = SimpleNamespace(request_label="field" if shape.label_cap else "",
                          request_label_cap=shape.label_cap)
    return {m.name for b in breakdowns.BREAKDOWNS if not b.enabled(cfg)
            for m in (b.accept_length, b.accepted_tokens)}


# attribute -> (values it takes in one process, why that many), the words for docs/metrics.md
VALUES: dict[str, tuple[Callable[[Shape], int], str]] = {
    S.ATTR_COUNTED: (lambda s: 1, "a process is either `once` or a `copy`"),
    S.ATTR_WORKER: (lambda s: 1, "the worker class of the process"),
    S.ATTR_POSITION: (lambda s: s.k, "K draft positions"),
    S.ATTR_LENGTH: (lambda s: s.k + 1, "accept lengths 1 .. K + 1"),
    S.ATTR_CONTEXT: (lambda s: _bucketed(S.ATTR_CONTEXT), "the context buckets and `unknown`"),
    S.ATTR_BATCH_BUCKET: (lambda s: len(step_cost.BUCKETS), "the batch-size buckets"),
    S.ATTR_CUDA_GRAPH: (lambda s: _bucketed(S.ATTR_CUDA_GRAPH),
                        "graph, piecewise, eager, `unknown`"),
    S.ATTR_SAMPLING: (lambda s: _bucketed(S.ATTR_SAMPLING), "the sampling buckets and `unknown`"),
    S.ATTR_PREFIX_CACHE: (lambda s: _bucketed(S.ATTR_PREFIX_CACHE),
                          "the prefix-cache buckets and `unknown`"),
    S.ATTR_GRAMMAR: (lambda s: _bucketed(S.ATTR_GRAMMAR), "the grammar buckets and `unknown`"),
    S.ATTR_REQUEST_LENGTH: (lambda s: len(req.REQUEST_BUCKETS),
                            "a finished request's mean accept length buckets"),
    S.ATTR_REQUEST_LABEL: (_label, "the label values kept (the cap) and `other`; left off "
                                   "while `SPECTRACE_REQUEST_LABEL` is unset, with the "
                                   "breakdown by label"),
    S.ATTR_REQUEST_LABEL_KEY: (lambda s: 1 if s.label_cap else 0, "the field labelled"),
    S.ATTR_PHASE: (lambda s: len(S.PHASES), "the step-cost phases (the forward's token sums: "
                                            "`target_forward` only)"),
    S.ATTR_NUM_STEPS: (lambda s: s.k_values, "each K the step cost saw"),
    S.ATTR_PASS_KIND: (lambda s: 2, "target-fed and the draft's own decode passes"),
    S.ATTR_WIDTH: (lambda s: 1, "the width each pass kind should see (a width finding adds "
                                "one per other width seen)"),
    S.ATTR_KIND: (lambda s: max(4, len(TRAINED_KEYS)),
                  "the expected widths (fc_in, draft_hidden, target_hidden, num_aux) or the "
                  "draft's context keys"),
    S.ATTR_CODE: (lambda s: len(RUNTIME_SPECS), "the run-time finding codes"),
    S.ATTR_SEVERITY: (lambda s: 1, "the code's own severity"),
    S.ATTR_HOOK: (lambda s: 1, "one series at 0 while no hook has failed (each hook that "
                               "raised, a bug of spectrace's, adds one)"),
    S.ATTR_SIGNAL: (lambda s: 3, "spans, metrics, events"),
}
# The forward's token sums are kept for the target's forward only (step_cost.TOKEN_FIELDS).
_ONE_PHASE = {m.name for m in step_cost.METRICS[step_cost.TOKEN_FIELDS - 1:]}


def undeclared() -> list[str]:
    """The metrics' attributes with no count in VALUES (tests/test_series_budget.py)."""
    return sorted({a for m in S.ALL_METRICS for a in m.attributes} - set(VALUES))


def _label_sets(spec, shape: Shape) -> int:
    """The attribute sets one metric of one process takes at most."""
    if spec.name in _off(shape):
        return 0
    n, plain = 1, 1
    for a in spec.attributes:
        values = 1 if (a == S.ATTR_PHASE and spec.name in _ONE_PHASE) else VALUES[a][0](shape)
        n *= values
        plain *= 1 if a in (S.ATTR_PHASE, S.ATTR_NUM_STEPS) else values
    # the step cost's short plain forwards: the target's forward at K = 0, in every bucket
    # (`step_cost.PLAIN_FORWARD_TOKENS`)
    return n + plain if S.ATTR_PHASE in spec.attributes else n


def _stored(spec, shape: Shape) -> dict[str, int]:
    """The series Prometheus stores of one metric of one process, by name: a histogram's
    `_bucket` (its bounds and `+Inf`), `_count` and `_sum`."""
    n = _label_sets(spec, shape)
    if spec.kind != S.HISTOGRAM:
        return {spec.prometheus_name: n}
    base = spec.prometheus_name
    return {f"{base}_bucket": n * (len(spec.bounds) + 1), f"{base}_count": n,
            f"{base}_sum": n}


def series(spec, shape: Shape) -> int:
    """The series one metric of one process takes at most, in Prometheus's terms."""
    return sum(_stored(spec, shape).values())


def budget(shape: Shape) -> dict[str, int]:
    """Prometheus name -> series at most, every metric (a histogram's three names), and
    `target_info`."""
    out = {name: n for m in S.ALL_METRICS for name, n in _stored(m, shape).items()}
    out["target_info"] = 1
    return out


def total(shape: Shape) -> int:
    return sum(budget(shape).values())


# the shapes docs/metrics.md states: (words, shape)
SHAPES = (
    ("K = 3", Shape(3)),
    ("K = 7", Shape(7)),
    ("K = 7, adaptive (K 1 .. 7)", Shape(7, k_values=7)),
    ("K = 7, request label (cap 32)", Shape(7, label_cap=32)),
    ("K = 16, adaptive, request label (cap 1000)", Shape(16, k_values=16, label_cap=1000)),
)


def doc_lines() -> list[str]:
    """docs/metrics.md's section."""
    rows = [f"| {words} | {total(shape):,} | {1000 * total(shape):,} |"
            for words, shape in SHAPES]
    biggest = sorted(budget(SHAPES[1][1]).items(), key=lambda kv: -kv[1])[:4]
    return [
        "## Series per process",
        "",
        "The series one process exports at most, counted from the declarations "
        "(`spectrace/grafana/series_budget.py`): each metric's attributes, each taking the "
        "values below in one process, multiplied (a histogram: its buckets, `+Inf`, `_count` "
        "and `_sum`), and `target_info`. A fleet costs its store the sum over its processes: "
        "tensor-parallel copies export as many as their rank 0. Most processes export far "
        "fewer (a bucket's series appears with its first request-step): the SGLang CPU "
        "server of tests/recorded/compare/full, K = 3, exported 123.",
        "",
        "| shape | series per process, at most | 1,000 processes |",
        "|---|---|---|",
        *rows,
        "",
        "The largest at K = 7: " + ", ".join(f"`{n}` {v}" for n, v in biggest) + ".",
        "",
        "| attribute | values in one process (K = 7, label cap 32) | why |",
        "|---|---|---|",
        *[f"| `{a}` | {fn(SHAPES[3][1])} | {why} |" for a, (fn, why) in VALUES.items()],
    ]
