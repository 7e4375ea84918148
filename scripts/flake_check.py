"""Run the live tier (the tests that start real servers) N times in a row from this
clone and print each test's pass count, so that a test that passes 9 of 10 is found
before CI finds it. No retry: every run is counted as it ran.

    python scripts/flake_check.py [--runs 5] [--workers 2] [--load] [-- PYTEST ARGS]

The tests are those marked `sglang` or `vllm` (tests/tiers.py; `-m` in PYTEST ARGS
chooses others), run as scripts/test.sh runs them (two modules at a time, the same
order, the environments scripts/test.sh built). `--load` keeps one CPU-bound process
busy beside the runs (a Python loop, at the same niceness), as a second job on the
machine would. Prints, at the end, each run's pass and fail counts and wall time, and
every test that did not pass every run; exit status 1 if any did not.
"""
from __future__ import annotations

import argparse
import collections
import os
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BURN = "while True: pass"


def outcomes(junit: str) -> dict[str, str]:
    """test id -> passed, failed, error or skipped, from a JUnit XML file."""
    out = {}
    for case in ET.parse(junit).iter("testcase"):
        name = f"{case.get('classname')}::{case.get('name')}"
        kinds = {child.tag for child in case}
        out[name] = ("failed" if "failure" in kinds else "error" if "error" in kinds
                     else "skipped" if "skipped" in kinds else "passed")
    return out


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--runs", type=int, default=5)
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--load", action="store_true", help="a CPU-bound process beside the runs")
    p.add_argument("pytest_args", nargs="*")
    a = p.parse_args()
    args = a.pytest_args or ["-m", "sglang or vllm"]
    env = {**os.environ, "SPECTRACE_TEST_WORKERS": str(a.workers)}
    burner = subprocess.Popen([sys.executable, "-c", BURN]) if a.load else None
    passes: collections.Counter = collections.Counter()
    seen: dict[str, list[str]] = collections.defaultdict(list)
    lines = []
    try:
        with tempfile.TemporaryDirectory(prefix="flake-check-") as work:
            for i in range(1, a.runs + 1):
                junit = os.path.join(work, f"run{i}.xml")
                t0 = time.monotonic()
                subprocess.run(["bash", "scripts/test.sh", "-q", "-p", "no:randomly",
                                f"--junitxml={junit}", f"--basetemp={work}/pt{i}", *args],
                               cwd=ROOT, env=env)
                took = time.monotonic() - t0
                got = outcomes(junit) if os.path.exists(junit) else {}
                for name, kind in got.items():
                    seen[name].append(kind)
                    passes[name] += kind == "passed"
                counts = collections.Counter(got.values())
                lines.append(f"run {i}: {counts['passed']} passed, {counts['failed']} failed, "
                             f"{counts['error']} errors, {counts['skipped']} skipped "
                             f"in {took:.0f} s")
                print(lines[-1], flush=True)
                for name, kind in sorted(got.items()):  # now, in case the later runs are cut
                    if kind in ("failed", "error"):
                        print(f"  run {i}: {kind}: {name}", flush=True)
    finally:
        if burner is not None:
            burner.kill()
            burner.wait()
    print(f"\nflake check: {a.runs} runs of pytest {' '.join(args)}"
          f"{' beside a CPU-bound process' if a.load else ''}")
    print("\n".join(lines))
    unsteady = {n: k for n, k in seen.items() if passes[n] != a.runs}
    for name, kinds in sorted(unsteady.items()):
        print(f"  {passes[name]}/{a.runs} passed: {name} ({', '.join(kinds)})")
    steady = len(seen) - len(unsteady)
    print(f"{steady} of {len(seen)} tests passed {a.runs} of {a.runs}")
    return 1 if unsteady else 0


if __name__ == "__main__":
    sys.exit(main())
