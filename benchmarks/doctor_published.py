"""What `spectrace doctor` costs on the published drafts (tests/published_drafts.py) at
their full shapes: the check in process (median of 5, after one warm-up) and the CLI's
wall time (one run, a fresh interpreter), for SGLang 0.5.23 and vLLM 0.33.0. Target: under
a second a draft. The drafts are written as tests/test_doctor_published.py writes them
(header-only sparse safetensors; the EAGLE authors' `.bin` as zero-stride tensors), in a
temporary folder deleted afterwards.

    python benchmarks/doctor_published.py
"""
from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from spectrace.doctor import check_checkpoint  # noqa: E402
from tests.published_drafts import PUBLISHED  # noqa: E402
from tests.test_doctor_published import write  # noqa: E402


def main() -> None:
    print(f"{'draft':72} {'runtime':15} {'check':>9} {'CLI':>7}")
    worst = 0.0
    with tempfile.TemporaryDirectory() as tmp:
        for i, p in enumerate(PUBLISHED):
            d = Path(tmp) / str(i)
            d.mkdir()
            draft, target = write(d, p)
            for runtime in p.errors:
                check_checkpoint(draft, target, runtime)
                times = []
                for _ in range(5):
                    t0 = time.perf_counter()
                    check_checkpoint(draft, target, runtime)
                    times.append(time.perf_counter() - t0)
                t0 = time.perf_counter()
                subprocess.run([sys.executable, "-m", "spectrace.doctor.cli", str(draft),
                                "--target", str(target), "--runtime", runtime],
                               capture_output=True, env={**os.environ, "PYTHONPATH": ROOT})
                cli = time.perf_counter() - t0
                worst = max(worst, cli)
                print(f"{p.name[:72]:72} {runtime:15} {statistics.median(times) * 1e3:7.1f}ms "
                      f"{cli:6.2f}s")
    print(f"slowest CLI run: {worst:.2f} s")


if __name__ == "__main__":
    main()
