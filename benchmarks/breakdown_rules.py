"""False alarms and detection of the breakdowns' gap rules (`families.breakdowns`: each
breakdown's `rule`, judged by `rules.buckets.gap`) on repeated identical runs, simulated:
each run draws the same workload again into every bucket, so any finding is a false alarm.

    python benchmarks/breakdown_rules.py [--runs 200] [--json OUT]

A run: each bucket of the breakdown is filled with whole requests until it holds the
rule's floor of request-steps (`--scale` times it: 1 and 4), each request of n verify
steps (uniform 16-256) and K draft tokens a step (3 or 5), each with its own per-position
acceptance q drawn from a Beta of mean m and concentration c (c = inf: every request
alike; c = 5: a workload as mixed as one of code, chat and other languages); per step the
request accepts the leading positions that succeed with probability q (the chain rule of
speculative decoding). Whole requests in a bucket are the worst case: a request's steps
are correlated, and the request breakdowns (sampling, label) do put whole requests in one
bucket; the step breakdowns (context, batch size) spread a request's steps over buckets,
so their real false-alarm rate is at most this.
benchmarks/within_request_rules.py measures them with requests split over the buckets
(mixed, confounded, drifting) against the within-request comparison (issue #48).

Buckets compared: context `<512` and `2k-4k`, batch size `1` and `64-127` (the ordered
rules' first and last, far enough apart); sampling `greedy` and `t>=1`; prefix cache `none`
and `>=50%`; request labels 2, 8 and 32 (the default cap) at once, and all six grammar
kinds at once, the rule taking the best and the worst of them.
A false alarm: a finding on such a run. Detection: the same runs with the last bucket's
(for labels: one label's) requests accepting at `PLANT` times their q.
`prefix_cache confounded`: the requests that hit the cache are traffic of another kind
(repeated prompts), accepting `CONFOUND` times as well on a healthy runtime, in the false
alarm runs too; detection then plants the stale KV on top (CONFOUND x PLANT).

    python benchmarks/breakdown_rules.py --cases prefix_cache grammar --json OUT
measures only the cases named (by prefix) and merges their summary into OUT if it exists.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time

import numpy

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from spectrace.families import breakdowns as B  # noqa: E402
from spectrace.rules.buckets import BucketFigures, gap  # noqa: E402

MEANS = (0.3, 0.5, 0.7, 0.85)          # per-position acceptance, the workload's mean
CONCENTRATIONS = (5, 30, math.inf)     # Beta concentration: spread between requests
KS = (3, 5)
SCALES = (1, 4)                        # request-steps a bucket, in floors
PLANT = 0.6                            # the planted condition: q x 0.6 in one bucket
CONFOUND = 0.8  # hit requests of another kind: q x 0.8 (code against chat, say)
Q_MIN, Q_MAX = 0.05, 0.95              # as benchmarks/request_outliers.py
CASES = (  # (name, breakdown, buckets compared)
    ("context", B.CONTEXT, ("<512", "2k-4k")),
    ("batch_size", B.BATCH_SIZE, ("1", "64-127")),
    ("sampling", B.SAMPLING, ("greedy", "t>=1")),
    ("request_label x2", B.REQUEST_LABEL, tuple(f"l{i}" for i in range(2))),
    ("request_label x8", B.REQUEST_LABEL, tuple(f"l{i}" for i in range(8))),
    ("request_label x32", B.REQUEST_LABEL, tuple(f"l{i}" for i in range(32))),
    ("prefix_cache", B.PREFIX_CACHE, ("none", ">=50%")),
    ("prefix_cache confounded", B.PREFIX_CACHE, ("none", ">=50%")),
    ("grammar x6", B.GRAMMAR, B.GRAMMAR.buckets),
)


def bucket(rng, name: str, floor: int, m: float, c: float, k: int, factor: float
           ) -> BucketFigures:
    """Whole requests until the bucket holds `floor` request-steps; accepted tokens summed
    over their steps (a step accepts min(G - 1, K), G geometric: P(>= j) = q^j)."""
    drafts = accepted = 0
    while drafts < floor:
        n = int(rng.integers(16, 257))
        q = m if math.isinf(c) else rng.beta(m * c, (1 - m) * c)
        q = min(max(q, Q_MIN), Q_MAX) * factor
        accepted += int(numpy.minimum(rng.geometric(1 - q, size=n) - 1, k).sum())
        drafts += n
    return BucketFigures(name, drafts, accepted, ())


def one_run(rng, b, names, m, c, k, scale, plant: bool, confound: float = 1.0) -> bool:
    floor = b.rule.floor * scale
    figs = tuple(bucket(rng, x, floor, m, c, k, (confound * (PLANT if plant else 1.0))
                        if x == names[-1] else 1.0) for x in names)
    return gap(figs, b.rule, b.buckets or names) is not None


def measure(runs: int, seed: int = 0, cases=CASES) -> list[dict]:
    rng = numpy.random.default_rng(seed)
    rows = []
    for case, b, names in cases:
        n_runs = runs if len(names) <= 8 else max(runs // 4, 20)
        shift = CONFOUND if case.endswith("confounded") else 1.0
        for scale in SCALES:
            for k in KS:
                for m in MEANS:
                    for c in CONCENTRATIONS:
                        false = sum(one_run(rng, b, names, m, c, k, scale, False, shift)
                                    for _ in range(n_runs))
                        det = sum(one_run(rng, b, names, m, c, k, scale, True, shift)
                                  for _ in range(n_runs))
                        rows.append({"case": case, "floor": b.rule.floor, "scale": scale,
                                     "k": k, "mean_q": m, "runs": n_runs,
                                     "concentration": None if math.isinf(c) else c,
                                     "false_alarms": false, "detected": det})
        mine = [x for x in rows if x["case"] == case]
        for scale in SCALES:
            for c in CONCENTRATIONS:
                sel = [x for x in mine if x["scale"] == scale
                       and x["concentration"] == (None if math.isinf(c) else c)]
                n = sum(x["runs"] for x in sel)
                print(f"{case:24s} floor {b.rule.floor} x{scale} c={c:>4}: false alarms "
                      f"{sum(x['false_alarms'] for x in sel)}/{n}, detected "
                      f"{sum(x['detected'] for x in sel)}/{n}", file=sys.stderr)
    return rows


def summary(rows: list[dict], cases=CASES) -> dict:
    out = {}
    for case, b, _ in cases:
        sel = [x for x in rows if x["case"] == case]
        r = b.rule
        out[case] = {"rule": {"floor": r.floor, "ratio": r.ratio, "drop": r.drop,
                              "ordered": r.ordered, "min_apart": r.min_apart},
                     **{key: sum(x[key] for x in sel) for key in ("runs", "false_alarms",
                                                                  "detected")},
                     "false_alarms_by_concentration": {
                         str(c): sum(x["false_alarms"] for x in sel
                                     if x["concentration"] == (None if math.isinf(c) else c))
                         for c in CONCENTRATIONS},
                     "worst_false_alarm_rate": max(x["false_alarms"] / x["runs"] for x in sel)}
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=200)
    ap.add_argument("--json", default=None)
    ap.add_argument("--cases", nargs="*", default=None,
                    help="only the cases whose name starts with one of these")
    a = ap.parse_args()
    cases = tuple(x for x in CASES if a.cases is None
                  or any(x[0].startswith(p) for p in a.cases))
    t0 = time.time()
    rows = measure(a.runs, cases=cases)
    out = {"runs_per_row": a.runs, "plant": PLANT, "confound": CONFOUND,
           "seconds": round(time.time() - t0, 1), "summary": summary(rows, cases)}
    print(json.dumps(out, indent=1))
    if a.json:
        if a.cases is not None and os.path.exists(a.json):  # merge into the full results
            with open(a.json) as fh:
                old = json.load(fh)
            names = {x[0] for x in cases}
            out = {**old, "confound": CONFOUND,
                   "summary": {**old["summary"], **out["summary"]},
                   "runs_per_row_of": {**old.get("runs_per_row_of", {}),
                                       **{x: a.runs for x in sorted(names)}}}
            rows = [r for r in old.get("rows", []) if r["case"] not in names] + rows
        with open(a.json, "w") as fh:
            json.dump({**out, "rows": rows}, fh, indent=1)


if __name__ == "__main__":
    main()
