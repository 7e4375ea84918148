"""A safetensors header reader that never touches tensor data it does not need.

Format: 8-byte little-endian header length N, N bytes of UTF-8 JSON
(`{name: {"dtype", "shape", "data_offsets": [begin, end]}, "__metadata__": {...}}`), then
the data; offsets are relative to the end of the header. Parsed by hand (no safetensors or
torch import) so the doctor's time does not depend on weight size, and every malformed
file becomes an `UnusableInput` naming the file and what was wrong.
"""
from __future__ import annotations

import json
import math
import os
import struct
from dataclasses import dataclass
from typing import Any

from ..errors import UnusableInput

MAX_HEADER_BYTES = 100_000_000   # the limit the safetensors library itself enforces
MAX_INT_TENSOR_BYTES = 64 << 20  # the vocabulary map is ~1 MB even for 128k-token vocabs
DTYPE_BYTES = {"BOOL": 1, "U8": 1, "I8": 1, "F8_E5M2": 1, "F8_E4M3": 1, "F8_E8M0": 1,
               "I16": 2, "U16": 2, "F16": 2, "BF16": 2, "I32": 4, "U32": 4, "F32": 4,
               "I64": 8, "U64": 8, "F64": 8, "C64": 8}
SUB_BYTE_DTYPES = {"F4", "F6_E2M3", "F6_E3M2"}  # sizes not checked
INT_FORMATS = {"I64": "q", "I32": "i"}


@dataclass(frozen=True)
class TensorInfo:
    dtype: str
    shape: tuple[int, ...]
    begin: int  # data_offsets, relative to the end of the header
    end: int


@dataclass(frozen=True)
class SafetensorsHeader:
    path: str
    data_start: int  # 8 + header length
    tensors: dict[str, TensorInfo]
    metadata: dict[str, Any]


def parse_header(path: str | os.PathLike) -> SafetensorsHeader:
    """Read and validate the header of `path`; raise UnusableInput on anything malformed,
    including data regions that reach past the end of the file (a truncated download)."""
    path = os.fspath(path)
    try:
        with open(path, "rb") as f:
            size = os.fstat(f.fileno()).st_size
            head = f.read(8)
            if len(head) < 8:
                raise UnusableInput(f"{path}: truncated safetensors file ({size} bytes, "
                                    f"shorter than the 8-byte header length)")
            (n,) = struct.unpack("<Q", head)
            if n == 0 or n > MAX_HEADER_BYTES:
                raise UnusableInput(f"{path}: not a safetensors file (header length {n} is "
                                    f"outside 1..{MAX_HEADER_BYTES}; is it a pickle or "
                                    f"another format renamed?)")
            if 8 + n > size:
                raise UnusableInput(f"{path}: truncated safetensors file (header says {n} "
                                    f"bytes of JSON, file has {size - 8} after the length)")
            raw = f.read(n)
    except OSError as e:
        raise UnusableInput(f"{path}: cannot read ({e.strerror or e})") from None
    if len(raw) != n:
        raise UnusableInput(f"{path}: truncated safetensors file (header cut short)")
    try:
        obj = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError) as e:
        msg = str(e).splitlines()[0] if str(e) else type(e).__name__
        raise UnusableInput(f"{path}: safetensors header is not valid UTF-8 JSON ({msg})") \
            from None
    if not isinstance(obj, dict):
        raise UnusableInput(f"{path}: safetensors header is JSON but not an object")
    data_len = size - 8 - n
    metadata = obj.pop("__metadata__", None) or {}
    if not isinstance(metadata, dict):
        raise UnusableInput(f"{path}: safetensors __metadata__ is not an object")
    tensors = {name: _tensor(path, name, entry, data_len) for name, entry in obj.items()}
    return SafetensorsHeader(path=path, data_start=8 + n, tensors=tensors, metadata=metadata)


def _tensor(path: str, name: str, entry: Any, data_len: int) -> TensorInfo:
    def bad(what: str) -> UnusableInput:
        return UnusableInput(f"{path}: tensor {name!r} in the safetensors header: {what}")

    if not isinstance(entry, dict):
        raise bad("entry is not an object")
    dtype, shape, offs = entry.get("dtype"), entry.get("shape"), entry.get("data_offsets")
    if not isinstance(dtype, str):
        raise bad(f"dtype {dtype!r} is not a string")
    if not isinstance(shape, list) or not all(_is_nat(d) for d in shape):
        raise bad(f"shape {shape!r} is not a list of non-negative integers")
    if not (isinstance(offs, list) and len(offs) == 2 and all(_is_nat(o) for o in offs)
            and offs[0] <= offs[1]):
        raise bad(f"data_offsets {offs!r} is not [begin, end] with 0 <= begin <= end")
    begin, end = offs
    if dtype in DTYPE_BYTES and end - begin != math.prod(shape) * DTYPE_BYTES[dtype]:
        raise bad(f"data_offsets span {end - begin} bytes but {dtype}{shape} needs "
                  f"{math.prod(shape) * DTYPE_BYTES[dtype]}")
    if dtype not in DTYPE_BYTES and dtype not in SUB_BYTE_DTYPES:
        raise bad(f"unknown dtype {dtype!r}")
    if end > data_len:
        raise UnusableInput(f"{path}: truncated safetensors file (tensor {name!r} needs data "
                            f"up to byte {end}, the file has {data_len} bytes of data)")
    return TensorInfo(dtype=dtype, shape=tuple(shape), begin=begin, end=end)


def _is_nat(x: Any) -> bool:
    return type(x) is int and x >= 0


def read_int_tensor(header: SafetensorsHeader, name: str) -> list[int]:
    """The values of one small I64/I32 tensor, reading only its bytes."""
    info = header.tensors[name]
    fmt = INT_FORMATS.get(info.dtype)
    if fmt is None:
        raise UnusableInput(f"{header.path}: tensor {name!r} has dtype {info.dtype}, "
                            f"expected one of {sorted(INT_FORMATS)}")
    data = _read(header, name, info)
    return list(struct.unpack(f"<{len(data) // struct.calcsize(fmt)}{fmt}", data))


def read_marked_ids(header: SafetensorsHeader, name: str) -> list[int]:
    """The indices set in one small BOOL / U8 mask (a `t2d`: target ids the draft
    vocabulary holds), reading only its bytes."""
    info = header.tensors[name]
    if info.dtype not in ("BOOL", "U8") or len(info.shape) != 1:
        raise UnusableInput(f"{header.path}: tensor {name!r} is {info.dtype}{list(info.shape)}, "
                            f"expected a 1-D BOOL mask")
    data = _read(header, name, info)
    return [i for i, b in enumerate(data) if b]


def _read(header: SafetensorsHeader, name: str, info: TensorInfo) -> bytes:
    nbytes = info.end - info.begin
    if nbytes > MAX_INT_TENSOR_BYTES:
        raise UnusableInput(f"{header.path}: tensor {name!r} is {nbytes} bytes, too large for "
                            f"a vocabulary map (limit {MAX_INT_TENSOR_BYTES})")
    try:
        with open(header.path, "rb") as f:
            f.seek(header.data_start + info.begin)
            data = f.read(nbytes)
    except OSError as e:
        raise UnusableInput(f"{header.path}: cannot read ({e.strerror or e})") from None
    if len(data) != nbytes:
        raise UnusableInput(f"{header.path}: truncated safetensors file (tensor {name!r})")
    return data
