"""False alarms and detection of the step breakdowns' rules (context, batch size) when a
request's steps split over the two buckets compared: today's gap over pooled request-steps
(`rules.buckets.gap`, each breakdown's `rule`) against the within-request comparison
(`rules.within_request.compare`, `WithinRule.of` the same rule), on the same simulated
traffic (issue #48).

    python benchmarks/within_request_rules.py [--runs 100] [--json OUT]

A run: requests arrive until those seen in both buckets hold the rule's floor of
request-steps in each (`--scale` 1 and 4 times it) and number at least
`within_request.MIN_REQUESTS`. Each request has n verify steps (uniform 16-256), K draft
tokens a step (3 or 5) and its own per-position acceptance q, a Beta of mean m (0.3-0.85)
and concentration c; per step it accepts the leading positions that succeed with
probability q (the chain rule). Of its steps a share f falls in the second bucket (the
later steps for context, once its context passes a boundary; for batch size the steps run
under load), f a Beta of mean g and concentration 4; `WHOLE` of the requests run wholly in
one bucket (the second with probability g): they count for the pooled rule, not for the
within-request one. Traffic:

- `identical`: requests alike (c = inf), g = 0.5;
- `mixed`: c = 5 (as mixed as code, chat and other languages), g = 0.5;
- `confounded`: c = 5, the requests accepting below the mean spend most of their steps in
  the second bucket (g = `CONFOUND_G`), the others most in the first (1 - g); no effect of
  the bucket within any request;
- `drifting`: c = 5, g = 0.5, and within each request acceptance drifts: its steps come in
  stretches (geometric, mean `STRETCH` steps) each with its own q, a Beta of mean the
  request's q and concentration `STRETCH_C` (boilerplate against prose), independent of the
  bucket: correlated steps within a request, no effect;
- `planted`: as `mixed`, every request accepting at `PLANT` times its q in the second
  bucket: detection, not false alarms.

Every setting (case, traffic, floor scale, K, m) runs `--runs` times; a false alarm is a
finding on a run with no effect. `within_test`: the runs where the within-request test
alone is significant (z <= -critical), whatever the size of the fall the rule also asks for:
its calibration; `within_covers`: the runs whose 95 % interval of the within-request
ratio holds 1 (on traffic with no effect, its coverage). Seed 0.
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
from spectrace.rules.within_request import (  # noqa: E402
    MIN_REQUESTS, Cell, RequestSteps, WithinRule, compare)

MEANS = (0.3, 0.5, 0.7, 0.85)
KS = (3, 5)
SCALES = (1, 4)
PLANT = 0.6          # the planted condition: q x 0.6 in the second bucket, every request
MIXED = 5.0          # Beta concentration of the most mixed traffic
CONFOUND_G = 0.8     # confounded: low-acceptance requests' share of steps in the second bucket
WHOLE = 0.3          # requests that run wholly in one bucket
STRETCH, STRETCH_C = 16, 10.0   # drifting: stretches of ~16 steps, each q ~ Beta(q, 10)
Q_MIN, Q_MAX = 0.05, 0.95
CASES = (("context", B.CONTEXT, ("<512", "2k-4k")),
         ("batch_size", B.BATCH_SIZE, ("1", "64-127")))
TRAFFIC = ("identical", "mixed", "confounded", "drifting", "planted")


def accepted(rng, q, k: int):
    """Per step, the accepted draft tokens: min(G - 1, K), G geometric (P(>= j) = q^j)."""
    return numpy.minimum(rng.geometric(1 - q) - 1, k)


def request(rng, m: float, traffic: str, k: int):
    """(steps in the first bucket, steps in the second, their accepted counts and sums of
    squares) of one request."""
    n = int(rng.integers(16, 257))
    c = math.inf if traffic == "identical" else MIXED
    q = m if math.isinf(c) else float(rng.beta(m * c, (1 - m) * c))
    q = min(max(q, Q_MIN), Q_MAX)
    g = (CONFOUND_G if q < m else 1 - CONFOUND_G) if traffic == "confounded" else 0.5
    if rng.random() < WHOLE:
        n_b = n if rng.random() < g else 0
    else:
        n_b = min(max(int(round(rng.beta(4 * g, 4 * (1 - g)) * n)), 1), n - 1)
    qs = numpy.full(n, q)
    if traffic == "drifting":
        starts = numpy.cumsum(rng.geometric(1 / STRETCH, size=n)) - 1
        starts = numpy.concatenate(([0], starts[starts < n]))
        lengths = numpy.diff(numpy.concatenate((starts, [n])))
        seg = rng.beta(q * STRETCH_C, (1 - q) * STRETCH_C, size=len(starts))
        qs = numpy.clip(numpy.repeat(seg, lengths), Q_MIN, Q_MAX)
    if traffic == "planted":
        qs[n - n_b:] *= PLANT
    acc = accepted(rng, qs, k)
    first, second = acc[:n - n_b], acc[n - n_b:]  # the later steps in the second bucket
    return (n - n_b, n_b, int(first.sum()), int(second.sum()), int((first ** 2).sum()),
            int((second ** 2).sum()))


def one_run(rng, b, names, m: float, k: int, scale: int, traffic: str
            ) -> tuple[bool, bool, bool, bool]:
    """(today's gap fires, the within-request rule fires, its test alone: z at or past
    its critical value whatever the size of the fall, its 95 % interval holds 1) on one
    run."""
    floor = b.rule.floor * scale
    rule = WithinRule.of(b.rule)
    x, y = names
    reqs, tot = [], [0, 0, 0, 0]
    shared = shared_a = shared_b = 0
    while shared < MIN_REQUESTS or shared_a < floor or shared_b < floor:
        na, nb, aa, ab, sa, sb = request(rng, m, traffic, k)
        tot[0] += na
        tot[1] += nb
        tot[2] += aa
        tot[3] += ab
        cells = {}
        if na:
            cells[x] = Cell(na, aa, sa)
        if nb:
            cells[y] = Cell(nb, ab, sb)
        if na and nb:
            shared += 1
            shared_a += na
            shared_b += nb
        reqs.append(RequestSteps(str(len(reqs)), cells))
    figs = (BucketFigures(x, tot[0], tot[2], ()), BucketFigures(y, tot[1], tot[3], ()))
    old = gap(figs, b.rule, b.buckets or names) is not None
    c = compare(reqs, x, y, k, rule)
    return (old, c.fires, c.z is not None and c.z <= -c.critical,
            c.interval is not None and c.interval[0] <= 1 <= c.interval[1])


def measure(runs: int, seed: int = 0, cases=CASES, traffic=TRAFFIC) -> list[dict]:
    rng = numpy.random.default_rng(seed)
    rows = []
    for case, b, names in cases:
        for t in traffic:
            for scale in SCALES:
                for k in KS:
                    for m in MEANS:
                        old = new = sig = cover = 0
                        for _ in range(runs):
                            o, n, z, one = one_run(rng, b, names, m, k, scale, t)
                            old += o
                            new += n
                            sig += z
                            cover += one
                        rows.append({"case": case, "traffic": t, "scale": scale, "k": k,
                                     "mean_q": m, "runs": runs, "gap": old, "within": new,
                                     "within_test": sig, "within_covers": cover})
                sel = [r for r in rows if r["case"] == case and r["traffic"] == t
                       and r["scale"] == scale]
                n = sum(r["runs"] for r in sel)
                what = "detected" if t == "planted" else "false alarms"
                print(f"{case:10s} {t:10s} floor x{scale}: {what}: gap "
                      f"{sum(r['gap'] for r in sel)}/{n} (worst {max(r['gap'] for r in sel)}"
                      f"/{runs}), within {sum(r['within'] for r in sel)}/{n} (worst "
                      f"{max(r['within'] for r in sel)}/{runs}; its test alone "
                      f"{sum(r['within_test'] for r in sel)}; interval holds 1: "
                      f"{sum(r['within_covers'] for r in sel)}, fewest "
                      f"{min(r['within_covers'] for r in sel)}/{runs})", file=sys.stderr)
    return rows


def summary(rows: list[dict]) -> dict:
    out = {}
    for case in sorted({r["case"] for r in rows}):
        for t in TRAFFIC:
            sel = [r for r in rows if r["case"] == case and r["traffic"] == t]
            if not sel:
                continue
            key = "detected" if t == "planted" else "false_alarms"
            out.setdefault(case, {})[t] = {
                "runs": sum(r["runs"] for r in sel),
                **{rule: {key: sum(r[rule] for r in sel),
                          "worst_rate" if key == "false_alarms" else "lowest_rate":
                          (max if key == "false_alarms" else min)(
                              r[rule] / r["runs"] for r in sel),
                          "by_scale": {str(s): sum(r[rule] for r in sel if r["scale"] == s)
                                       for s in SCALES}}
                   for rule in ("gap", "within", "within_test")},
                "within_covers": sum(r["within_covers"] for r in sel),
                "within_covers_fewest": min(r["within_covers"] for r in sel)}
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=100)
    ap.add_argument("--json", default=None)
    ap.add_argument("--cases", nargs="*", default=None)
    ap.add_argument("--traffic", nargs="*", default=None)
    a = ap.parse_args()
    cases = tuple(x for x in CASES if a.cases is None or x[0] in a.cases)
    traffic = tuple(t for t in TRAFFIC if a.traffic is None or t in a.traffic)
    t0 = time.time()
    rows = measure(a.runs, cases=cases, traffic=traffic)
    out = {"runs_per_setting": a.runs, "plant": PLANT, "mixed_concentration": MIXED,
           "confound_share": CONFOUND_G, "whole": WHOLE, "stretch": [STRETCH, STRETCH_C],
           "min_requests": MIN_REQUESTS, "seconds": round(time.time() - t0, 1),
           "summary": summary(rows)}
    print(json.dumps(out, indent=1))
    if a.json:
        with open(a.json, "w") as fh:
            json.dump({**out, "rows": rows}, fh, indent=1)


if __name__ == "__main__":
    main()
