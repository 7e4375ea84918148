"""Reading what the file exporter wrote: JSON lines, streamed, never trusted.

Files are only parsed as JSON (nothing read is unpickled or executed); torn, garbled or
oversized lines are skipped and counted; a FIFO or device is never opened.
"""
from __future__ import annotations

import json
import math
import os
import stat
from typing import Iterator

from ..file_layout import MAX_LINE_BYTES


def _finite(text: str) -> float:
    v = float(text)
    if not math.isfinite(v):
        raise ValueError("non-finite number")
    return v


def _no_constant(name: str):
    raise ValueError(f"{name} is not JSON")


def parse_line(raw: bytes) -> dict | None:
    """One JSON object from one line, or None for anything else (garbage, non-finite
    numbers, nesting deep enough to exhaust the parser)."""
    try:
        obj = json.loads(raw, parse_float=_finite, parse_constant=_no_constant)
    except (ValueError, RecursionError):
        return None
    return obj if isinstance(obj, dict) else None


def iter_jsonl(path: str, stats: dict | None = None,
               max_line: int = MAX_LINE_BYTES) -> Iterator[dict]:
    """Stream the complete JSON object lines of `path`. Skipped and counted in `stats`
    (keys `skipped`, `torn`): garbled lines, lines longer than `max_line` (never held in
    memory whole) and a torn last line (the writer was killed mid-write). A missing file
    yields nothing; so does anything that is not a regular file (a FIFO or device would
    block or never end). Other OS errors (permission) are raised."""
    stats = {} if stats is None else stats
    stats.setdefault("skipped", 0)
    stats.setdefault("torn", 0)
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return
    if not stat.S_ISREG(st.st_mode):
        stats["skipped"] += 1
        return
    with open(path, "rb") as fh:
        while True:
            raw = fh.readline(max_line + 1)
            if not raw:
                return
            if len(raw) > max_line:  # oversize: skip to the end of this line
                while raw and not raw.endswith(b"\n"):
                    raw = fh.readline(max_line + 1)
                stats["skipped"] += 1
                continue
            if not raw.endswith(b"\n"):
                stats["torn"] += 1
                return
            obj = parse_line(raw)
            if obj is None:
                if raw.strip():
                    stats["skipped"] += 1
                continue
            yield obj


def read_jsonl(path: str) -> list[dict]:
    """Every complete JSON object line of `path`; a torn or garbled line is skipped."""
    try:
        return list(iter_jsonl(path))
    except OSError:
        return []
