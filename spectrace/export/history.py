"""A bounded metrics history: `metrics.jsonl` is compacted in place when it grows past
`MAX_BYTES`, so a long run keeps a time axis without filling the disk.

Every line of `metrics.jsonl` is a whole cumulative snapshot, so leaving a line out loses
time resolution, never totals. When the file passes `MAX_BYTES` (8 MiB), its writer
(`export.files.JsonlWriter`, in the metric export thread, never the decode loop) rewrites
it keeping

- the newest lines, up to half of `MAX_BYTES`, at full resolution;
- of the older lines, the last one of each time bucket, with buckets sized so that they
  take at most a quarter of `MAX_BYTES` (evenly spread over the older period), and the
  oldest line (the start of the run) always.

So the file is at most 3/4 of `MAX_BYTES` after a compaction and never over `MAX_BYTES`
by more than a line. At the default 2 s interval a snapshot is about 2.5 KB (110 MB a
day uncompacted); a week-long run keeps a file under 8 MiB holding the last hour or so at
full resolution and, before that, one snapshot about every 20 minutes back to the start
(`tests/test_metrics_history.py` prints the figures).

The new file is written beside the old one (`.metrics.jsonl.<pid>.tmp`), synced, and
renamed over it: a process killed at any moment leaves the old file or the new one, both
whole (at worst a stray temporary file, which readers ignore). The format does not change
(one snapshot per line), so readers of either age read files of either age.

`spans.jsonl` is bounded by the same `MAX_BYTES`, compacted without downsampling: a span
is not cumulative, so its writer keeps the newest spans (up to half of `MAX_BYTES`).
"""
from __future__ import annotations

import mmap
import os
import re

MAX_BYTES = 8 << 20
_TIME = re.compile(rb'\{"time":(-?[0-9][0-9.eE+-]*)[,}]')  # at the start of a line
_BLANK = re.compile(rb"\s*\n")


def line_time(line: bytes, start: int = 0, end: int | None = None) -> float | None:
    """The `time` of a snapshot line as the file exporter writes it (`{"time":...,`): of
    `line`, or of the line at `line[start:end]`."""
    m = _TIME.match(line, start, len(line) if end is None else end)
    if not m:
        return None
    try:
        return float(m.group(1))
    except ValueError:
        return None


def newest_start(sizes: list[int], budget: int) -> int:
    """Where the newest lines that fit in `budget` bytes begin (the newest line always)."""
    n = len(sizes)
    start, used = n, 0
    while start > 0 and used + sizes[start - 1] <= budget:
        start -= 1
        used += sizes[start]
    if start == n and n:  # a single line larger than the budget: keep the newest anyway
        start = n - 1
    return start


def keep_indices(times: list, sizes: list[int], max_bytes: int = MAX_BYTES) -> list[int]:
    """Which lines a compaction keeps (ascending indices): the newest up to `max_bytes / 2`,
    and of the older ones at most one per time bucket within `max_bytes / 4` (counting
    each as large as the largest), the oldest always. Lines without a time are dropped
    from the older part."""
    n = len(sizes)
    start, older_budget = newest_start(sizes, max_bytes // 2), max_bytes // 4
    older = [i for i in range(start) if times[i] is not None]
    slots = older_budget // max((sizes[i] for i in older), default=1)
    if len(older) > max(slots, 1):
        if slots < 3:  # room for two lines at most: the start of the run, then the latest
            older = [older[0], older[-1]][:max(slots, 1)]
        else:
            older = _one_per_bucket(older, times, slots)
    return older + list(range(start, n))


def _one_per_bucket(older: list[int], times: list, slots: int) -> list[int]:
    """At most `slots` of `older`: the first, then the last line of each of `slots - 1`
    equal time buckets (evenly by position if the clock went backwards)."""
    t0, t1 = times[older[0]], times[older[-1]]
    width = (t1 - t0) / (slots - 2) if t1 > t0 else 0
    kept = [older[0]]
    for a, b in zip(older[1:], older[2:] + [None]):
        if b is None or not width or int((times[a] - t0) // width) != int((times[b] - t0) // width):
            kept.append(a)  # the last line of its bucket
    if len(kept) > slots:
        step = len(older) / slots
        kept = sorted({older[0]} | {older[int(k * step)] for k in range(1, slots)})
    return kept


def whole_lines(data) -> list[tuple[int, int]]:
    """(start, end) of each newline-terminated line of `data` (bytes or a map) that is not
    blank, newline included (a last line without one is being written: left out)."""
    out, start = [], 0
    while (nl := data.find(b"\n", start)) >= 0:
        if not _BLANK.match(data, start, nl + 1):
            out.append((start, nl + 1))
        start = nl + 1
    return out


def temp_path(path: str) -> str:
    head, tail = os.path.split(path)
    return os.path.join(head, f".{tail}.{os.getpid()}.tmp")


def compact(path: str, max_bytes: int = MAX_BYTES, downsample: bool = True) -> int:
    """Rewrite `path` keeping a downsampled history (see the module docstring), or with
    `downsample=False` only its newest lines up to `max_bytes / 2` (lines that are not
    cumulative, such as spans: an older one cannot stand for those around it); returns its
    new size. Only whole lines are kept. OS errors are raised (the caller's file sink
    decides); the original stays in place until the atomic rename.

    The file is mapped, not read, and its lines are offsets into the map, written out
    slice by slice: reading it and copying it line by line left 30 MiB in the export
    thread's heap of a soaked scheduler (measured; docs/reliability.md, "Soak")."""
    with open(path, "rb") as fh:
        size = os.fstat(fh.fileno()).st_size
        data = mmap.mmap(fh.fileno(), size, access=mmap.ACCESS_READ) if size else b""
    try:
        lines = whole_lines(data)
        sizes = [end - start for start, end in lines]
        if downsample:
            keep = keep_indices([line_time(data, start, end) for start, end in lines],
                                sizes, max_bytes)
        else:
            keep = range(newest_start(sizes, max_bytes // 2), len(lines))
        return _write_replace(path, data, [lines[i] for i in keep])
    finally:
        if isinstance(data, mmap.mmap):
            try:
                data.close()
            except BufferError:  # a view still held by an exception's traceback: freed with it
                pass


def _write_replace(path: str, data, lines: list[tuple[int, int]]) -> int:
    """Write `data[start:end]` of each line to a temporary file, sync it and rename it over
    `path`; its size."""
    tmp = temp_path(path)
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | getattr(os, "O_CLOEXEC", 0), 0o600)
    written = 0
    try:
        with memoryview(data) as whole:
            for start, end in lines:
                view = whole[start:end]
                while view:
                    n = os.write(fd, view)
                    view = view[n:]
                    written += n
                view.release()
        os.fsync(fd)
    except BaseException:
        os.close(fd)
        _remove(tmp)
        raise
    os.close(fd)
    try:
        os.replace(tmp, path)
    except BaseException:
        _remove(tmp)
        raise
    return written


def _remove(path: str) -> None:
    try:
        os.unlink(path)
    except OSError:
        pass
