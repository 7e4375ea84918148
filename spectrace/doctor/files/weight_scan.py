"""Which draft weights float16 cannot hold: |x| > 65504 (inf from 65520 on, once cast).

Streamed like `--fix` copies: each tensor's bytes are read in 8 MiB chunks, so memory does
not grow with the checkpoint. No numpy or torch: a chunk is first screened with bytes
operations that run in C (the top byte of every value holds the sign and the exponent's
high bits; a value of magnitude 2**15 or more has those 7 bits >= 0x47 in bfloat16 and
float32 alike), and only a chunk with such a value is decoded to find the exact ones.
Healthy weights are far below 2**15, so the decode almost never runs and the scan reads
at disk speed.
"""
from __future__ import annotations

import math
import sys
from array import array

from typing import TYPE_CHECKING

from ..judge.dtypes import FLOAT16_MAX, Overflow
from ..errors import UnusableInput

if TYPE_CHECKING:
    from .checkpoint_files import Checkpoint

CHUNK = 8 << 20
# safetensors dtype -> (bytes per value, array typecode of the decoded value)
SCANNED = {"BF16": 2, "F32": 4, "F64": 8}
# top byte & 0x7F >= 0x47  <=>  |x| >= 2**15 (bfloat16, float32); any value for float64
_SCREEN = bytes(1 if (b & 0x7F) >= 0x47 else 0 for b in range(256))


def float16_overflows(ck: "Checkpoint") -> list[Overflow]:
    """Every tensor stored in BF16, F32 or F64 with values beyond float16's range (F16 and
    8-bit floats cannot exceed it), in checkpoint order."""
    if ck.tensors:
        return _scan_tensors(ck.tensors)
    out = []
    for key, (header, info) in ck.where.items():
        width = SCANNED.get(info.dtype)
        if width is None or info.end == info.begin:
            continue
        count, largest = _scan(header.path, header.data_start + info.begin,
                               info.end - info.begin, info.dtype, width)
        if count:
            out.append(Overflow(key, count, largest))
    return out


def _scan(path: str, start: int, size: int, dtype: str, width: int) -> tuple[int, float]:
    count, largest = 0, 0.0
    step = CHUNK - CHUNK % width
    try:
        with open(path, "rb") as f:
            f.seek(start)
            left = size
            while left:
                chunk = f.read(min(step, left))
                if not chunk:
                    raise UnusableInput(f"{path}: truncated while reading the weights "
                                        f"({left} bytes missing)")
                left -= len(chunk)
                if dtype != "F64" and 1 not in chunk[width - 1::width].translate(_SCREEN):
                    continue
                n, big = _exact(chunk, dtype)
                count += n
                largest = max(largest, big)
    except OSError as e:
        raise UnusableInput(f"{path}: cannot read ({e.strerror or e})") from None
    return count, largest


def _exact(chunk: bytes, dtype: str) -> tuple[int, float]:
    """(values beyond float16's range, largest magnitude) of one chunk, decoded."""
    if dtype == "BF16":  # a bfloat16 is the top half of a float32
        wide = bytearray(2 * len(chunk))
        wide[2::4], wide[3::4] = chunk[0::2], chunk[1::2]
        values = array("f", bytes(wide))
    else:
        values = array("f" if dtype == "F32" else "d", chunk)
    if sys.byteorder == "big":  # safetensors is little-endian
        values.byteswap()
    count, largest = 0, 0.0
    for v in values:
        a = abs(v)
        if a > FLOAT16_MAX or math.isnan(v):
            count += 1
            largest = max(largest, math.inf if math.isnan(v) else a)
    return count, largest


def _scan_tensors(tensors: dict) -> list[Overflow]:
    """The same scan over tensors read from pickled weights (`pickled`), in bounded chunks
    of each (mapped) tensor."""
    import torch
    out = []
    for key, (_, t) in tensors.items():
        if t.dtype not in (torch.bfloat16, torch.float32, torch.float64) or not t.numel():
            continue
        count, largest = 0, 0.0
        for part in t.reshape(-1).split(CHUNK // t.element_size()):
            bad = part.isnan() | (part.abs() > FLOAT16_MAX)
            n = int(bad.sum())
            if n:
                count += n
                largest = max(largest, math.inf if bool(part.isnan().any()) else
                              float(part[bad].abs().max()))
        if count:
            out.append(Overflow(key, count, largest))
    return out
