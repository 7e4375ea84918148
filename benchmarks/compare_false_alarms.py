"""False alarms of `spectrace report --baseline` (`spectrace.rules.compare`) on repeated
identical runs, simulated, and its detection of a real change.

    python benchmarks/compare_false_alarms.py [--pairs 500] [--json OUT]

A run: R requests (20, 100 or 500), each of n verify steps (uniform 16-256) and K = 3
draft tokens a step, in one of three context buckets (<512 60 %, 512-1k 30 %, 1k-2k 10 %,
drawn per request) whose mean per-position acceptance is 0.8, 0.7 and 0.5 (times the
workload's level m); each request has its own acceptance q drawn from a Beta of that mean
and concentration c (c = inf: every request alike; c = 5: requests as mixed as code, chat
and other languages together); per step the request accepts the leading positions that
succeed with probability q. Two runs of the same workload form a pair; a false alarm is a
pair whose comparison reports any change (`kind` other than `no_change`), and, apart, a
position or a bucket marked as fallen. Detection: the current run's q lowered by 0.05 in
every bucket (the system), or its mix moved to 20/30/50 % (the traffic); counted when the
comparison reports that kind.

The tiny pairs the end-to-end test serves accept exactly (no spread): two identical runs
on the real server compare at exactly 0 (tests/test_compare_recorded.py), so the rates that
matter are these, with a realistic spread between requests.
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

from spectrace.rules import compare as cmp  # noqa: E402
from spectrace.rules.buckets import bucket_figures  # noqa: E402

K = 3
BUCKETS = ("<512", "512-1k", "1k-2k")
MIX = (0.6, 0.3, 0.1)
MOVED_MIX = (0.2, 0.3, 0.5)
BUCKET_Q = (0.8, 0.7, 0.5)
LEVELS = (0.6, 1.0)          # the workload's acceptance: times BUCKET_Q
CONCENTRATIONS = (5, 30, math.inf)
REQUESTS = (20, 100, 500)
SAMPLE_RATIO = 0.1  # SPECTRACE_REQUEST_SAMPLE_RATIO's default


def one_run(rng, level: float, c: float, r: int, mix=MIX, drop: float = 0.0):
    """Request-steps by (bucket, accept length), and the run's own histogram."""
    counts: dict = {}
    which = rng.choice(len(BUCKETS), size=r, p=mix)
    steps = rng.integers(16, 257, size=r)
    recorded = []  # (steps, accepted) of the requests a 10 % request sample records
    for i in range(r):
        m = BUCKET_Q[which[i]] * level - drop
        q = m if math.isinf(c) else rng.beta(m * c, (1 - m) * c)
        ok = rng.random((steps[i], K)) < q
        acc = numpy.cumprod(ok, axis=1).sum(axis=1)
        if rng.random() < SAMPLE_RATIO:
            recorded.append((int(steps[i]), int(acc.sum())))
        for k, n in enumerate(numpy.bincount(acc, minlength=K + 1)):
            if n:
                key = (BUCKETS[which[i]], k + 1)
                counts[key] = counts.get(key, 0) + int(n)
    whole: dict = {}
    for (_, length), n in counts.items():
        whole[length] = whole.get(length, 0) + n
    return counts, whole, recorded, r


def compared(cur, base):
    order = {b: i for i, b in enumerate(BUCKETS)}
    wc, wb = cmp.whole_run(cur[1], K), cmp.whole_run(base[1], K)
    return cmp.compare(wc, wb, {
        "context": (bucket_figures(cur[0], K, order), bucket_figures(base[0], K, order))},
        (cmp.design_effect(wc, cur[2], cur[3]), cmp.design_effect(wb, base[2], base[3])))


def measure(pairs: int, seed: int = 1) -> list[dict]:
    rng = numpy.random.default_rng(seed)
    rows = []
    for level in LEVELS:
        for c in CONCENTRATIONS:
            for r in REQUESTS:
                alarms = traffic = positions = buckets = too_few = 0
                sys_hit = mix_hit = 0
                n_detect = max(pairs // 5, 20)
                for i in range(pairs):
                    base = one_run(rng, level, c, r)
                    res = compared(one_run(rng, level, c, r), base)
                    too_few += res.kind == cmp.TOO_FEW
                    alarms += res.kind in (cmp.SYSTEM, cmp.BOTH)
                    traffic += res.kind == cmp.TRAFFIC
                    positions += bool(res.positions_fell())
                    buckets += any(
                        b.change is not None and b.change.clears(cmp.MIN_LENGTH_CHANGE)
                        for s in res.splits for b in s.buckets)
                    if i < n_detect:
                        sys_hit += compared(one_run(rng, level, c, r, drop=0.05),
                                            base).kind in (cmp.SYSTEM, cmp.BOTH)
                        mix_hit += compared(one_run(rng, level, c, r, mix=MOVED_MIX),
                                            base).kind == cmp.TRAFFIC
                rows.append({"level": level, "concentration": c, "requests": r,
                             "pairs": pairs, "false_alarm": alarms / pairs,
                             "traffic_reported": traffic / pairs,
                             "position_marked": positions / pairs,
                             "bucket_marked": buckets / pairs, "too_few": too_few / pairs,
                             "detect_system_drop_0.05": sys_hit / n_detect,
                             "detect_traffic_move": mix_hit / n_detect})
                print(f"level {level:.1f} c {c:>4} R {r:>4}: false alarm "
                      f"{alarms / pairs:6.1%}, traffic {traffic / pairs:5.1%} (positions "
                      f"{positions / pairs:5.1%}, buckets "
                      f"{buckets / pairs:5.1%}, too few {too_few / pairs:4.0%}); detects a "
                      f"system drop of 0.05 {sys_hit / n_detect:5.0%}, the traffic move "
                      f"{mix_hit / n_detect:5.0%}", flush=True)
    return rows


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--pairs", type=int, default=500)
    p.add_argument("--json", metavar="OUT")
    args = p.parse_args()
    t0 = time.time()
    print(f"floors: {cmp.FLOORS}")
    rows = measure(args.pairs)
    overall = sum(r["false_alarm"] * r["pairs"] for r in rows) / sum(r["pairs"] for r in rows)
    print(f"false alarms over all {sum(r['pairs'] for r in rows)} identical pairs: "
          f"{overall:.2%} ({time.time() - t0:.0f} s)")
    if args.json:
        with open(args.json, "w") as fh:
            json.dump({"floors": cmp.FLOORS, "rows": rows, "false_alarm": overall}, fh,
                      indent=1, default=str)


if __name__ == "__main__":
    main()
