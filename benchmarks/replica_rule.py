"""False alarms and detection of `acceptance.replica_low` (spectrace/rules/replicas.py) on
simulated deployments: every replica serves whole requests drawn from the same traffic, so
any finding is a false alarm.

    python benchmarks/replica_rule.py [--runs 100] [--json OUT]

A run: a deployment of R replicas (2, 8, 32, 125: a fleet of 1,000 processes at TP=8),
each filled with whole requests until it holds `--scale` x the rule's floor of
request-steps, each request drawn as benchmarks/breakdown_rules.py draws them (16-256
verify steps, K 3 or 5, its own per-position acceptance q from a Beta of mean m and
concentration c; c = 5 as mixed as code, chat and other languages). `affinity`: a router
that keeps a tenant on one replica, so each replica's traffic has its own mean (a Beta of
mean m and concentration 30 per replica), the replicas' traffic no longer alike; the
worst false alarms are there. Detection: the same runs with one replica's requests
accepting at `PLANT` times their q (a replica mostly broken; one whose draft is not used
at all accepts nothing and is found whenever it passes the floor).
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
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from breakdown_rules import Q_MIN, Q_MAX, bucket  # noqa: E402
from spectrace.rules import replicas  # noqa: E402

REPLICAS = (2, 8, 32, 125)
MEANS = (0.3, 0.5, 0.7, 0.85)
CONCENTRATIONS = (5, 30, math.inf)
KS = (3, 5)
SCALES = (1, 4)
PLANT = 0.2
AFFINITY = 30  # concentration of the replicas' own means, where a router keeps tenants


def one_run(rng, n: int, m: float, c: float, k: int, scale: int, plant: bool,
            affinity: bool) -> bool:
    out = []
    for i in range(n):
        mean = m
        if affinity:
            mean = min(max(rng.beta(m * AFFINITY, (1 - m) * AFFINITY), Q_MIN), Q_MAX)
        b = bucket(rng, f"r{i}", replicas.FLOOR * scale, mean, c, k,
                   PLANT if plant and i == n - 1 else 1.0)
        out.append(replicas.Replica(f"r{i}", (), b.drafts, b.accepted_tokens))
    return bool(replicas.judge(out))


def measure(runs: int, seed: int = 0) -> list[dict]:
    rng = numpy.random.default_rng(seed)
    rows = []
    for affinity in (False, True):
        for n in REPLICAS:
            n_runs = runs if n <= 8 else max(runs // 4, 10)
            for scale in SCALES:
                for k in KS:
                    for m in MEANS:
                        for c in CONCENTRATIONS:
                            false = sum(one_run(rng, n, m, c, k, scale, False, affinity)
                                        for _ in range(n_runs))
                            det = sum(one_run(rng, n, m, c, k, scale, True, affinity)
                                      for _ in range(n_runs))
                            rows.append({"affinity": affinity, "replicas": n, "scale": scale,
                                         "k": k, "mean_q": m, "runs": n_runs,
                                         "concentration": None if math.isinf(c) else c,
                                         "false_alarms": false, "detected": det})
            sel = [x for x in rows if x["affinity"] == affinity and x["replicas"] == n]
            runs_n = sum(x["runs"] for x in sel)
            print(f"{'affinity' if affinity else 'alike':8s} {n:3d} replicas: false alarms "
                  f"{sum(x['false_alarms'] for x in sel)}/{runs_n}, detected "
                  f"{sum(x['detected'] for x in sel)}/{runs_n}, worst false-alarm rate "
                  f"{max(x['false_alarms'] / x['runs'] for x in sel):.2f}", file=sys.stderr,
                  flush=True)
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=100)
    ap.add_argument("--json", default=None)
    a = ap.parse_args()
    t0 = time.time()
    rows = measure(a.runs)
    out = {"rule": {"floor": replicas.FLOOR, "ratio": replicas.RATIO, "drop": replicas.DROP},
           "plant": PLANT, "affinity_concentration": AFFINITY,
           "seconds": round(time.time() - t0, 1),
           "summary": {f"{'affinity' if aff else 'alike'} x{n}": {
               key: sum(x[key] for x in rows if x["affinity"] == aff and x["replicas"] == n)
               for key in ("runs", "false_alarms", "detected")}
               for aff in (False, True) for n in REPLICAS}}
    print(json.dumps(out, indent=1))
    if a.json:
        with open(a.json, "w") as fh:
            json.dump({**out, "rows": rows}, fh, indent=1)


if __name__ == "__main__":
    main()
