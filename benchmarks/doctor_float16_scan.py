"""What the doctor's float16 overflow scan (`spectrace/doctor/files/weight_scan.py`) costs: its
read rate and peak RSS on a real (not sparse) file of bfloat16 weights, for healthy weights
(|x| < 1: only the bytes screen runs) and the worst case (every value >= 2**15: every
chunk is decoded value by value). Target: memory a small constant, not the file's size.

    python benchmarks/doctor_float16_scan.py [--mib 512] [--worst-mib 16] [--dir DIR]
"""
from __future__ import annotations

import argparse
import json
import os
import struct
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CHUNK = 8 << 20
# high byte of a bfloat16: keep the sign, set an exponent giving |x| in [2**-15, 1)
HEALTHY_HI = bytes((b & 0x80) | (0x38 + (b & 0x07)) for b in range(256))
WORST_HI = bytes((b & 0x80) | 0x47 for b in range(256))  # |x| in [2**15, 2**16]


def write(path: str, mib: int, hi_table: bytes) -> None:
    n = (mib << 20) // 2
    raw = json.dumps({"w": {"dtype": "BF16", "shape": [n], "data_offsets": [0, 2 * n]}}).encode()
    raw += b" " * (-len(raw) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(raw)) + raw)
        left = 2 * n
        while left:
            size = min(CHUNK, left)
            chunk = bytearray(os.urandom(size))
            chunk[1::2] = bytes(chunk[1::2]).translate(hi_table)
            f.write(chunk)
            left -= size


SCAN = """
import json, resource, sys, time
from pathlib import Path
from spectrace.doctor.files.checkpoint_files import Checkpoint
from spectrace.doctor.files.safetensors_header import parse_header
from spectrace.doctor.judge.inputs import CheckpointView
from spectrace.doctor.files.weight_scan import float16_overflows
h = parse_header(sys.argv[1])
ck = Checkpoint(Path(sys.argv[1]).parent, CheckpointView({}, {}, {}), [sys.argv[1]],
                {k: (h, i) for k, i in h.tensors.items()})
t0 = time.perf_counter()
out = float16_overflows(ck)
s = time.perf_counter() - t0
print(json.dumps({"seconds": s, "overflow_values": sum(o.count for o in out),
                  "peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
"""


def scan(path: str) -> dict:
    env = {**os.environ, "PYTHONPATH": ROOT}
    out = subprocess.run([sys.executable, "-c", SCAN, path], capture_output=True, text=True,
                         env=env, check=True)
    return json.loads(out.stdout)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--mib", type=int, default=512, help="healthy weights, MiB")
    p.add_argument("--worst-mib", type=int, default=16, help="worst-case weights, MiB")
    p.add_argument("--dir", default=None)
    args = p.parse_args()
    with tempfile.TemporaryDirectory(dir=args.dir) as d:
        for name, mib, table in (("healthy", args.mib, HEALTHY_HI),
                                 ("worst case", args.worst_mib, WORST_HI)):
            path = os.path.join(d, "model.safetensors")
            write(path, mib, table)
            r = scan(path)
            os.remove(path)
            print(f"{name:10}: {mib} MiB bf16 in {r['seconds']:.2f} s "
                  f"({mib / r['seconds']:.0f} MiB/s), {r['overflow_values']} values beyond "
                  f"65504, peak RSS {r['peak_rss_mib']:.0f} MiB")


if __name__ == "__main__":
    main()
