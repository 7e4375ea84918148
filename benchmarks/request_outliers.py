"""False alarms and detection of the per-request outlier rules (`spectrace.rules.outliers`)
on repeated identical runs, simulated: each run draws the same workload again.

    python benchmarks/request_outliers.py [--runs 1000] [--json OUT]

A run: R recorded requests (20, 100 or 1000), each of n verify steps (uniform 16-256)
and K draft tokens a step (3 or 5), each with its own per-position acceptance q drawn
from a Beta of mean m and concentration c (c = inf: every request alike; c = 5: a workload
as mixed as one of code, chat and other languages); per step the request accepts the
leading positions that succeed with probability q (the chain rule of speculative
decoding). The rules see what the report sees: each request's rate (accepted / drafts),
its steps, and the deployment's per-step spread. A false alarm: a finding on such a run.
Detection: the same runs with one request accepting nothing over 64 steps (garbled) and
one accepting every draft over 32 steps (a loop), each counted when it is named.
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

from spectrace.rules import outliers  # noqa: E402
from spectrace.rules.outliers import RequestRate  # noqa: E402

MEANS = (0.3, 0.5, 0.7, 0.85)          # per-position acceptance, the workload's mean
CONCENTRATIONS = (5, 30, math.inf)     # Beta concentration: spread between requests
REQUESTS = (20, 100, 1000)
KS = (3, 5)
# A natural request's per-position acceptance stays within these: no draft predicts free
# text perfectly, nor misses every token of text it was trained on. A request outside
# them is what the findings are about (a loop or a copy; garbled or unseen text).
Q_MIN, Q_MAX = 0.05, 0.95


def one_run(rng, m: float, c: float, r: int, k: int, plant: bool):
    steps = rng.integers(16, 257, size=r)
    q = numpy.full(r, m) if math.isinf(c) else rng.beta(m * c, (1 - m) * c, size=r)
    q = numpy.clip(q, Q_MIN, Q_MAX)
    reqs, lengths = [], numpy.zeros(k + 1, dtype=numpy.int64)
    for i in range(r):
        ok = rng.random((steps[i], k)) < q[i]
        acc = numpy.cumprod(ok, axis=1).sum(axis=1)
        lengths += numpy.bincount(acc, minlength=k + 1)
        reqs.append(RequestRate(f"r{i}", int(steps[i]), float(acc.sum()) / (steps[i] * k)))
    if plant:
        reqs += [RequestRate("garbled", 64, 0.0), RequestRate("loop", 32, 1.0)]
        lengths[0] += 64
        lengths[k] += 32
    sigma = outliers.step_sigma({str(a + 1): int(n) for a, n in enumerate(lengths)})
    return outliers.judge(reqs, sigma, k)


def measure(runs: int, seed: int = 0) -> list[dict]:
    rng = numpy.random.default_rng(seed)
    rows = []
    for r in REQUESTS:
        n_runs = runs if r <= 100 else max(runs // 4, 20)
        for k in KS:
            for m in MEANS:
                for c in CONCENTRATIONS:
                    fa_low = fa_high = det_low = det_high = 0
                    for _ in range(n_runs):
                        out = one_run(rng, m, c, r, k, plant=False)
                        fa_low += bool(out and out.low)
                        fa_high += bool(out and out.high)
                        out = one_run(rng, m, c, r, k, plant=True)
                        det_low += bool(out and any(x.request_id == "garbled" for x in out.low))
                        det_high += bool(out and any(x.request_id == "loop" for x in out.high))
                    rows.append({"requests": r, "k": k, "mean_q": m,
                                 "concentration": None if math.isinf(c) else c, "runs": n_runs,
                                 "false_low": fa_low, "false_high": fa_high,
                                 "detected_low": det_low, "detected_high": det_high})
                    print(f"R={r:4d} K={k} q={m:.2f} c={c:>4}: false low {fa_low}/{n_runs}, "
                          f"high {fa_high}/{n_runs}; detected low {det_low}/{n_runs}, "
                          f"high {det_high}/{n_runs}", file=sys.stderr)
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=1000)
    ap.add_argument("--json", default=None)
    a = ap.parse_args()
    t0 = time.time()
    rows = measure(a.runs)
    runs = sum(x["runs"] for x in rows)
    summary = {"runs": runs, "false_low": sum(x["false_low"] for x in rows),
               "false_high": sum(x["false_high"] for x in rows),
               "detected_low": sum(x["detected_low"] for x in rows),
               "detected_high": sum(x["detected_high"] for x in rows),
               "seconds": round(time.time() - t0, 1),
               "by_concentration": {str(c): {k: sum(x[k] for x in rows if x["concentration"] == (
                   None if math.isinf(c) else c)) for k in ("runs", "false_low", "false_high",
                                                            "detected_low", "detected_high")}
                                    for c in CONCENTRATIONS}}
    print(json.dumps(summary))
    if a.json:
        with open(a.json, "w") as fh:
            json.dump({"rows": rows, "summary": summary}, fh, indent=1)


if __name__ == "__main__":
    main()
