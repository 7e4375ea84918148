"""The doctor's false alarms and misses on the published-draft fixtures
(tests/published_drafts.py, written as tests/test_doctor_published.py writes them): every
draft judged for every runtime it records, its errors against the errors that runtime is
known to hit with the pair. A false alarm is an error the runtime does not hit, a miss one
it hits that the doctor does not report. Also judged: vLLM on its V1 model runner
(`--vllm-runner v1`), where the drafts of `V1_ONLY_MISREAD` are misread (a true error of that
runner, a warning of the default one).

    PYTHONPATH=. python scripts/doctor_published_alarms.py

Exit status 0 when there is no false alarm and no miss, else 1.
"""
from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from spectrace.doctor import check_checkpoint  # noqa: E402
from tests.published_drafts import MISREAD, PUBLISHED, V1_ONLY_MISREAD, VL  # noqa: E402
from tests.test_doctor_published import write  # noqa: E402


def cases():
    """(draft, runtime, --vllm-runner, the errors known) for every case judged."""
    for p in PUBLISHED:
        for runtime, known in p.errors.items():
            yield p, runtime, None, set(known)
        if VL in p.errors:
            yield p, VL, "v1", set(p.errors[VL]) | ({MISREAD} if p.name in V1_ONLY_MISREAD
                                                   else set())


def main() -> int:
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for i, (p, runtime, runner, known) in enumerate(cases()):
            d = Path(tmp) / str(i)
            d.mkdir()
            draft, target = write(d, p)
            found = {f.code for f in check_checkpoint(draft, target, runtime,
                                                      vllm_runner=runner).errors}
            rows.append((p.name, runtime + (f" --vllm-runner {runner}" if runner else ""),
                         known, found))
    for name, rt, known, found in rows:
        extra, missed = sorted(found - known), sorted(known - found)
        print(f"{name[:70]:70} {rt:30} known {sorted(known) or '-'}"
              + (f" FALSE ALARM {extra}" if extra else "") + (f" MISSED {missed}" if missed
                                                              else ""))
    plain = [r for r in rows if "--vllm-runner" not in r[1]]
    healthy = [r for r in plain if not r[2]]
    alarms = sum(len(r[3] - r[2]) for r in rows)
    misses = sum(len(r[2] - r[3]) for r in rows)
    runtimes = sorted({r[1] for r in plain})
    print(f"{len(PUBLISHED)} published drafts x {len(runtimes)} runtimes ({', '.join(runtimes)})"
          f" = {len(plain)} cases: {len(healthy)} healthy pairs, errors on them "
          f"{sum(len(r[3]) for r in healthy)}; {len(plain) - len(healthy)} pairs with known "
          f"errors, all found; plus {len(rows) - len(plain)} on vLLM's V1 runner "
          f"(--vllm-runner v1). False alarms {alarms}, misses {misses}.")
    return 1 if alarms or misses else 0


if __name__ == "__main__":
    sys.exit(main())
