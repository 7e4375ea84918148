"""False alarms and detection of the drift rule (`spectrace.rules.drift`, and the alert
rule that restates it) on steady runs, simulated: both windows draw the same workload.

    python benchmarks/drift_false_alarms.py [--runs 2000] [--json OUT]

A window: requests drawn until it holds W request-steps (W = the floor 200, 10000) and
R finished requests (R = the rule's MIN_REQUESTS; 20 for comparison, the rule without
that floor), each request n verify steps (uniform 16-256) of K draft
tokens (3 or 5) with its own per-position acceptance q from a Beta of mean m and
concentration c (c = 5: a workload as mixed as code, chat and other languages; c = 30; c =
inf: every request alike); per step the request accepts the leading positions that
succeed with probability q. Requests are long against a window at the floor (a few
requests make it), which is what makes a small window noisy. A false alarm: the rule
fires on two windows of the same workload. Detection: the recent window's q multiplied by
0.6 (a system that got worse).
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

from spectrace.rules import drift  # noqa: E402

MEANS = (0.3, 0.5, 0.7, 0.85)
CONCENTRATIONS = (5, 30, math.inf)
WINDOWS = (drift.FLOOR, 10000)
REQUESTS = (drift.MIN_REQUESTS, 20)
KS = (3, 5)
WORSE = 0.6


def window(rng, m: float, c: float, w: int, r: int, k: int, scale: float = 1.0
           ) -> drift.Totals:
    """One window of at least `w` request-steps and `r` finished requests."""
    steps = accepted = requests = 0
    while steps < w or requests < r:
        n = int(rng.integers(16, 257))
        q = m if math.isinf(c) else rng.beta(m * c, (1 - m) * c)
        q = min(max(q, 0.05), 0.95) * scale
        ok = rng.random((n, k)) < q
        accepted += int(numpy.cumprod(ok, axis=1).sum())
        steps, requests = steps + n, requests + 1
    return drift.Totals(steps, accepted, {}, requests)


def judged(w: int, r: int, earlier: drift.Totals, recent: drift.Totals) -> bool:
    """The rule, with the floor of finished requests lowered to `r` (the comparison)."""
    floor, drift.MIN_REQUESTS = drift.MIN_REQUESTS, min(r, drift.MIN_REQUESTS)
    try:
        return drift.judge(earlier, recent) is not None
    finally:
        drift.MIN_REQUESTS = floor


def measure(runs: int, seed: int = 0) -> list[dict]:
    rng = numpy.random.default_rng(seed)
    rows = []
    for w, r in ((w, r) for w in WINDOWS for r in REQUESTS):
        for k in KS:
            for m in MEANS:
                for c in CONCENTRATIONS:
                    n = runs if w < 10000 else max(runs // 10, 50)
                    false = sum(judged(w, r, window(rng, m, c, w, r, k),
                                       window(rng, m, c, w, r, k)) for _ in range(n))
                    found = sum(judged(w, r, window(rng, m, c, w, r, k),
                                       window(rng, m, c, w, r, k, WORSE)) for _ in range(n))
                    rows.append({"window": w, "requests": r, "k": k, "mean": m,
                                 "concentration": c, "runs": n, "false_alarms": false / n,
                                 "detection": found / n})
    return rows


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=2000)
    ap.add_argument("--json", help="write the figures here")
    args = ap.parse_args()
    t0 = time.time()
    rows = measure(args.runs)
    print(f"drift rule: floors {drift.FLOOR} request-steps and {drift.MIN_REQUESTS} finished "
          f"requests a window, at most {drift.RATIO} and {drift.DROP} tokens fewer; "
          f"detection: per-position acceptance x {WORSE}")
    print(f"{'steps':>7} {'reqs':>4} {'K':>2} {'mean':>5} {'conc':>5} {'runs':>5} "
          f"{'false':>7} {'detect':>7}")
    for r in rows:
        print(f"{r['window']:>7} {r['requests']:>4} {r['k']:>2} {r['mean']:>5} "
              f"{r['concentration']:>5} {r['runs']:>5} {r['false_alarms']:>7.2%} "
              f"{r['detection']:>7.2%}")
    for w, q in ((w, q) for w in WINDOWS for q in REQUESTS):
        sub = [r for r in rows if r["window"] == w and r["requests"] == q]
        worst = max(sub, key=lambda r: r["false_alarms"])
        print(f"at least {w} request-steps and {q} requests: false alarms at most "
              f"{worst['false_alarms']:.2%} (K {worst['k']}, "
              f"mean {worst['mean']}, concentration {worst['concentration']}), mean "
              f"{sum(r['false_alarms'] for r in sub) / len(sub):.2%}")
    print(f"{time.time() - t0:.0f} s")
    if args.json:
        with open(args.json, "w") as fh:
            json.dump({"runs": args.runs, "rows": rows}, fh, indent=1,
                      default=lambda x: None if x == math.inf else x)
    return 0


if __name__ == "__main__":
    sys.exit(main())
