"""The memory a long run's `metrics.jsonl` compaction leaves behind (docs/reliability.md,
"Soak"): a writer thread appends the soak's own snapshot (2.6 KB,
`benchmarks/results/soak-snapshot.json`) 40,000 times through spectrace's real
`JsonlWriter` with the real 8 MiB bound (about 39 compactions), printing this process's
RSS every 4,000 lines.

    python benchmarks/compaction_memory.py
"""
from __future__ import annotations

import json
import os
import sys
import tempfile
import threading

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

from spectrace.export import history  # noqa: E402
from spectrace.export.files import JsonlWriter  # noqa: E402


def rss_mib() -> float:
    with open("/proc/self/status") as fh:
        return int(fh.read().split("VmRSS:")[1].split()[0]) / 1024


def main() -> None:
    with open(os.path.join(HERE, "results", "soak-snapshot.json")) as fh:
        snap = json.load(fh)
    folder = tempfile.mkdtemp(prefix="spectrace-compaction-")
    writer = JsonlWriter(os.path.join(folder, "metrics.jsonl"), "metrics",
                         max_bytes=history.MAX_BYTES)
    rows = []

    def run() -> None:  # in a thread, as the metric reader's export is
        for i in range(40_000):
            snap["time"] = 1.7e9 + 0.2 * i
            writer.write(snap)
            if i % 4000 == 0 or i == 39_999:
                rows.append((i, writer.compactions, round(rss_mib(), 1)))
    t = threading.Thread(target=run)
    t.start()
    t.join()
    print("lines | compactions | RSS MiB")
    for row in rows:
        print(" | ".join(map(str, row)))
    print(f"RSS after the first compaction minus before: {rows[-1][2] - rows[0][2]:+.1f} MiB")


if __name__ == "__main__":
    main()
