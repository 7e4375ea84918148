"""`spectrace doctor DRAFT --target T --fix OUT_DIR`: write a corrected copy of a draft in
the layout the chosen runtime reads, then check the copy.

Never in place: OUT_DIR must not be the draft directory or inside it, and must be empty
(or absent). The plan (`doctor.judge.fix_plan.plan_fix`) comes from the same tables the
doctor judges with, so the copy changes exactly what the doctor reports; what it cannot
fix safely (wrong fc width, weights that do not exist, a setting the runtime lacks) is a
refusal and nothing is written.

Tensors are streamed: each safetensors file gets a new header (renamed keys, new
offsets, keys left out), then every tensor's bytes are copied in fixed-size chunks, so
memory does not grow with the checkpoint; unchanged tensors are copied byte for byte and
only `d2t` is ever rewritten (absolute ids -> offsets, same dtype and shape). Other files
of the directory (tokenizer, generation config) are copied as they are. Pickled weights
(`pytorch_model*.bin`, read with PyTorch's restricted loader, `pickled`) are written as
safetensors (`pytorch_model.bin` -> `model.safetensors`, their index too); other pickles
are left out. A progress bar (`rich` if installed, else one updating stderr line) shows
when the copy takes longer than a second and stderr is a terminal.
"""
from __future__ import annotations

import json
import os
import shutil
import struct
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

from .check import DoctorReport, judge_checkpoint
from .errors import UnusableInput
from .files import pickled
from .files.checkpoint_files import PICKLE_SUFFIXES, Checkpoint, read_checkpoint
from .files.safetensors_header import INT_FORMATS
from .judge.dtypes import AUTO
from .judge.fix_plan import plan_fix
from .judge.translation import Plan

CHUNK = 8 << 20  # bytes per read/write while copying tensor data
ALIGN = 8        # safetensors pads the header so the data starts 8-byte aligned


@dataclass
class FixResult:
    plan: Plan
    written: bool
    out_dir: Path
    check: DoctorReport | None = None   # the doctor's report on the written copy
    bytes_copied: int = 0
    seconds: float = 0.0
    converted: dict[str, str] | None = None  # pickled file -> the safetensors file written

    @property
    def exit_status(self) -> int:
        if not self.written:
            return 1 if self.plan.refusals else 0
        return self.check.exit_status if self.check else 1


def check_out_dir(draft_dir: Path, out_dir: Path) -> None:
    """Refuse anything that could write into the draft itself, or over other files."""
    src, dst = draft_dir.resolve(), out_dir.resolve()
    if dst == src:
        raise UnusableInput(f"--fix {out_dir}: that is the draft directory; the doctor never "
                            f"changes a checkpoint in place, give a new directory")
    if src in dst.parents:
        raise UnusableInput(f"--fix {out_dir}: inside the draft directory {draft_dir}; give a "
                            f"directory outside it")
    if dst in src.parents:
        raise UnusableInput(f"--fix {out_dir}: contains the draft directory {draft_dir}; give "
                            f"a new, empty directory")
    if dst.exists() and (not dst.is_dir() or any(dst.iterdir())):
        raise UnusableInput(f"--fix {out_dir}: exists and is not an empty directory; give a "
                            f"new or empty directory")


def fix_checkpoint(ck: Checkpoint, tgt, runtime: str, version: str, source: str,
                   out_dir: str | os.PathLike, progress: bool | None = None,
                   dtype: str = AUTO, runner: str | None = None) -> FixResult:
    out = Path(out_dir)
    check_out_dir(ck.path, out)
    target, _ = tgt
    plan, _copy, _after = plan_fix(ck.view, target, runtime, version, runner)
    if plan.refusals or not plan.changes:
        return FixResult(plan, False, out)
    t0 = time.perf_counter()
    out.mkdir(parents=True, exist_ok=True)
    total = sum(p.size for k, p in _pieces(ck)[1].items() if k not in plan.drops)
    bar = CopyProgress(total, enabled=progress)
    try:
        copied = _write(ck, plan, out, bar)
    finally:
        bar.close()
    seconds = time.perf_counter() - t0
    check = judge_checkpoint(read_checkpoint(out), tgt, runtime, version, source, dtype,
                             runner)
    converted = {os.path.basename(f): pickled.safetensors_name(os.path.basename(f))
                 for f in ck.files} if ck.tensors else None
    return FixResult(plan, True, out, check, copied, seconds, converted)


class Piece(NamedTuple):
    """One tensor of the copy: its header entry and where its bytes come from (a byte range
    of a safetensors file, or a tensor read from pickled weights)."""

    dtype: str
    shape: list[int]
    size: int
    path: str = ""     # safetensors source: the file and the absolute start of the bytes
    start: int = 0
    tensor: Any = None  # pickled source: the tensor


def _pieces(ck: Checkpoint) -> tuple[dict[str, list[str]], dict[str, Piece], dict]:
    """(source file -> its keys in byte order, key -> Piece, source file -> the
    safetensors `__metadata__` the copy keeps)."""
    by_file: dict[str, list[str]] = {}
    pieces: dict[str, Piece] = {}
    meta: dict[str, dict] = {}
    for key, (h, info) in ck.where.items():
        by_file.setdefault(h.path, []).append(key)
        pieces[key] = Piece(info.dtype, list(info.shape), info.end - info.begin, h.path,
                            h.data_start + info.begin)
        meta[h.path] = h.metadata
    for key, (path, t) in ck.tensors.items():
        by_file.setdefault(path, []).append(key)
        pieces[key] = Piece(pickled.dtype_name(t), list(t.shape), t.numel() * t.element_size(),
                            tensor=t)
        meta[path] = {"format": "pt"}
    for keys in by_file.values():
        keys.sort(key=lambda k: pieces[k].start)
    return by_file, pieces, meta


def _write(ck: Checkpoint, plan: Plan, out: Path, bar: "CopyProgress") -> int:
    """The copy: other files as they are, the new config, then each weight file (pickled
    ones as safetensors: `pytorch_model.bin` -> `model.safetensors`) and its index."""
    copied = 0
    weight_names = {os.path.basename(f) for f in ck.files}
    for item in sorted(ck.path.iterdir()):
        name = item.name
        if name == "config.json" or name in weight_names or name.endswith(
                (".safetensors.index.json", ".bin.index.json")) or \
                item.suffix in PICKLE_SUFFIXES or not item.is_file():
            continue
        shutil.copyfile(item, out / name)
    _atomic_text(out / "config.json", json.dumps(plan.config, indent=2) + "\n")
    by_file, pieces, meta = _pieces(ck)
    weight_map = {}
    for path in ck.files:
        keys = [k for k in by_file.get(path, []) if k not in plan.drops]
        name = os.path.basename(path)
        dest = out / (pickled.safetensors_name(name) if ck.tensors else name)
        copied += _write_file(keys, pieces, meta.get(path) or {}, ck, plan, dest, bar)
        weight_map.update({plan.rename(k): dest.name for k in keys})
    index = sorted(ck.path.glob("*.bin.index.json" if ck.tensors else "*.safetensors.index.json"))
    if index:
        meta_index = json.loads(index[0].read_text(encoding="utf-8"))
        meta_index["weight_map"] = dict(sorted(weight_map.items()))
        name = "model.safetensors.index.json" if ck.tensors else index[0].name
        _atomic_text(out / name, json.dumps(meta_index, indent=2) + "\n")
    return copied


def _write_file(keys: list[str], pieces: dict[str, Piece], meta: dict, ck: Checkpoint,
                plan: Plan, dest: Path, bar: "CopyProgress") -> int:
    """One safetensors file: the new header, then each tensor's bytes in their old order."""
    entries, offset = {}, 0
    for k in keys:
        p = pieces[k]
        entries[plan.rename(k)] = {"dtype": p.dtype, "shape": p.shape,
                                   "data_offsets": [offset, offset + p.size]}
        offset += p.size
    if meta:
        entries = {"__metadata__": meta, **entries}
    raw = json.dumps(entries, separators=(",", ":")).encode("utf-8")
    raw += b" " * (-(8 + len(raw)) % ALIGN)
    tmp = dest.with_name(dest.name + ".partial")
    copied = 0
    with open(tmp, "wb") as w:
        w.write(struct.pack("<Q", len(raw)) + raw)
        for k in keys:
            p = pieces[k]
            if k == plan.d2t_offsets:
                w.write(_offsets_bytes(ck.view.d2t[k], p.dtype))
                bar.advance(p.size)
            elif p.tensor is not None:
                copied += _write_tensor(p.tensor, w, bar)
            else:
                copied += _copy_range(p.path, p.start, p.size, w, bar)
    os.replace(tmp, dest)
    return copied


def _write_tensor(t, w, bar: "CopyProgress") -> int:
    """A tensor's bytes (little-endian, as safetensors stores them), in CHUNK pieces of its
    (mapped) storage."""
    import torch
    flat = t.contiguous().reshape(-1).view(torch.uint8)
    for part in flat.split(CHUNK):
        w.write(part.numpy().data)
        bar.advance(part.numel())
    return flat.numel()


def _offsets_bytes(absolute: list[int], dtype: str) -> bytes:
    offsets = [v - i for i, v in enumerate(absolute)]
    return struct.pack(f"<{len(offsets)}{INT_FORMATS[dtype]}", *offsets)


def _copy_range(path: str, start: int, size: int, w, bar: "CopyProgress") -> int:
    buf = bytearray(min(CHUNK, max(size, 1)))
    view = memoryview(buf)
    left = size
    with open(path, "rb") as r:
        r.seek(start)
        while left:
            n = r.readinto(view[:min(left, len(buf))])
            if not n:
                raise UnusableInput(f"{path}: truncated while copying (expected {left} more bytes)")
            w.write(view[:n])
            left -= n
            bar.advance(n)
    return size


def _atomic_text(path: Path, text: str) -> None:
    tmp = path.with_name(path.name + ".partial")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)


class CopyProgress:
    """A progress bar that appears only once a copy has run for `delay` seconds, on a
    terminal: `rich`'s when it is installed (`pip install spectrace[cli]`), else one stderr
    line rewritten in place. Purely cosmetic: nothing depends on it."""

    def __init__(self, total: int, enabled: bool | None = None, delay: float = 1.0,
                 stream=None) -> None:
        self.total, self.done, self.delay = max(total, 1), 0, delay
        self.stream = stream or sys.stderr
        self.enabled = self.stream.isatty() if enabled is None else enabled
        self.t0 = time.monotonic()
        self._rich = self._task = None
        self._plain = False
        self._last = 0.0

    def advance(self, n: int) -> None:
        self.done += n
        if not self.enabled:
            return
        now = time.monotonic()
        if now - self.t0 < self.delay or now - self._last < 0.1:
            return
        self._last = now
        if self._rich is None and not self._plain:
            self._start()
        if self._rich is not None:
            self._rich.update(self._task, completed=self.done)
        else:
            pct = 100 * self.done / self.total
            self.stream.write(f"\rspectrace doctor --fix: copied {self.done >> 20} of "
                              f"{self.total >> 20} MiB ({pct:.0f}%)")
            self.stream.flush()

    def _start(self) -> None:
        try:
            from rich.console import Console
            from rich.progress import (BarColumn, DownloadColumn, Progress, TextColumn,
                                       TimeRemainingColumn, TransferSpeedColumn)
        except ImportError:
            self._plain = True
            return
        self._rich = Progress(TextColumn("spectrace doctor --fix"), BarColumn(),
                              DownloadColumn(), TransferSpeedColumn(), TimeRemainingColumn(),
                              console=Console(file=self.stream), transient=True)
        self._rich.start()
        self._task = self._rich.add_task("copy", total=self.total, completed=self.done)

    def close(self) -> None:
        if self._rich is not None:
            self._rich.stop()
        elif self._plain and self.enabled:
            self.stream.write("\n")
            self.stream.flush()
