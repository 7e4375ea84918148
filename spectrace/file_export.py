"""The embedded default exporter: JSON lines under one folder per process.

Layout: `<output_dir>/<service>-<host>-<pid>/` holding `resource.json`, `metrics.jsonl`
(a cumulative snapshot every interval), `spans.jsonl` and `events.jsonl` (each finding,
written and flushed when it happens). SGLang SIGKILLs its schedulers at shutdown, so
nothing may wait for an exit handler: every line is flushed as it is written, and a torn
last line is skipped by the reader. Folders are 0700 and files 0600: owner only.
"""
from __future__ import annotations

import json
import logging
import math
import os
import re
import socket
import stat
import threading
import time
from typing import Any, Iterator, Sequence

from opentelemetry.sdk.metrics.export import (
    AggregationTemporality,
    MetricExporter,
    MetricExportResult,
    MetricsData,
)
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult

log = logging.getLogger("spectrace")

METRICS_FILE = "metrics.jsonl"
SPANS_FILE = "spans.jsonl"
EVENTS_FILE = "events.jsonl"
RESOURCE_FILE = "resource.json"


MAX_LINE_BYTES = 16 << 20  # a reader skips longer lines instead of holding them in memory


class FileSinkError(OSError):
    pass


class FileSink:
    """The file export of one process. Its streams (events, spans, metrics) share one
    fate: at the first OS error (read-only folder, full disk, folder removed) it logs one
    error naming the folder and the cause, and every stream stops writing; what they are
    then handed is counted in `spectrace.telemetry.dropped`."""

    def __init__(self, directory: str | None = None) -> None:
        self.directory = directory
        self.failed = False
        self.error: str | None = None
        self._lock = threading.Lock()

    def fail(self, path: str, exc: BaseException) -> None:
        with self._lock:
            first = not self.failed
            self.failed = True
            if first:
                self.error = f"{path}: {exc}"
        if first:
            log.error("spectrace: cannot write %s (%s); file export is off for this process "
                      "(set SPECTRACE_OUTPUT_DIR to a writable folder with free space); the "
                      "other exporters and the SGLang server keep working", path, exc)


class JsonlWriter:
    """Appends one JSON object per line, each line in a single `write(2)` on an O_APPEND
    descriptor: no buffering to lose at SIGKILL, and no interleaving with other writers of
    the same file. After an OS error it turns itself (and its sink's other streams) off."""

    def __init__(self, path: str, on_drop=None, signal: str = "events",
                 sink: FileSink | None = None) -> None:
        self.path = path
        self.signal = signal
        self.sink = sink if sink is not None else FileSink(os.path.dirname(path))
        self._lock = threading.Lock()
        self._fd: int | None = None
        self._on_drop = on_drop

    @property
    def failed(self) -> bool:
        return self.sink.failed

    def _drop(self, n: int = 1) -> None:
        from .safety import DROPPED
        DROPPED.add(self.signal, n)
        if self._on_drop:
            self._on_drop(n)

    def write(self, obj: dict) -> bool:
        if self.sink.failed:
            self._drop()
            return False
        try:
            data = (json.dumps(obj, separators=(",", ":"), default=str,
                               allow_nan=False) + "\n").encode("utf-8", "backslashreplace")
        except (TypeError, ValueError) as exc:  # not JSON-able (e.g. nan): this item only
            from .safety import INTERNAL_ERRORS
            INTERNAL_ERRORS.record(f"file:{self.signal}", exc)
            self._drop()
            return False
        with self._lock:
            try:
                if self._fd is None:
                    self._fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT
                                       | getattr(os, "O_CLOEXEC", 0), 0o600)
                view = memoryview(data)
                while view:
                    n = os.write(self._fd, view)
                    view = view[n:]
                return True
            except OSError as exc:
                self.sink.fail(self.path, exc)
                self._close_locked()
        self._drop()
        return False

    def _close_locked(self) -> None:
        if self._fd is not None:
            try:
                os.close(self._fd)
            except OSError:
                pass
            self._fd = None

    def close(self) -> None:
        with self._lock:
            self._close_locked()


_UNSAFE = re.compile(r"[^A-Za-z0-9._-]")


def safe_name(name: str) -> str:
    """A file-name-safe form of a service name: no separators, no `..`, no hidden file."""
    out = _UNSAFE.sub("_", name)[:64].lstrip(".")
    return out or "service"


def process_dir(output_dir: str, service_name: str, pid: int | None = None) -> str:
    pid = os.getpid() if pid is None else pid
    host = safe_name(socket.gethostname().split(".")[0] or "host")
    return os.path.join(output_dir, f"{safe_name(service_name)}-{host}-{pid}")


def make_private_dir(path: str) -> None:
    """Create `path` and any missing parents readable by the owner only (0700). Folders
    that already exist keep their mode, except `path` itself."""
    missing = []
    p = os.path.abspath(path)
    while not os.path.isdir(p):
        missing.append(p)
        parent = os.path.dirname(p)
        if parent == p:
            break
        p = parent
    for d in reversed(missing):
        try:
            os.mkdir(d, 0o700)
        except FileExistsError:
            if not os.path.isdir(d):
                raise
    os.chmod(path, 0o700)


class FileSpanExporter(SpanExporter):
    def __init__(self, writer: JsonlWriter) -> None:
        self._w = writer

    def export(self, spans: Sequence) -> SpanExportResult:
        ok = True
        for s in spans:
            ctx = s.get_span_context()
            ok &= self._w.write({
                "name": s.name,
                "trace_id": format(ctx.trace_id, "032x"),
                "span_id": format(ctx.span_id, "016x"),
                "parent_id": format(s.parent.span_id, "016x") if s.parent else None,
                "start_ns": s.start_time, "end_ns": s.end_time,
                "attributes": dict(s.attributes or {}),
                "events": [{"name": e.name, "attributes": dict(e.attributes or {})}
                           for e in s.events],
            })
        return SpanExportResult.SUCCESS if ok else SpanExportResult.FAILURE

    def shutdown(self) -> None:
        self._w.close()


class FileMetricExporter(MetricExporter):
    """Writes cumulative snapshots: the last line of the file is the process's totals."""

    def __init__(self, writer: JsonlWriter) -> None:
        super().__init__(preferred_temporality={
            cls: AggregationTemporality.CUMULATIVE for cls in _instrument_classes()})
        self._w = writer

    def export(self, metrics_data: MetricsData, timeout_millis: float = 10_000,
               **kwargs) -> MetricExportResult:
        snapshot: dict[str, list[dict[str, Any]]] = {}
        for rm in metrics_data.resource_metrics:
            for sm in rm.scope_metrics:
                for m in sm.metrics:
                    points = snapshot.setdefault(m.name, [])
                    for p in m.data.data_points:
                        points.append({"attributes": dict(p.attributes or {}),
                                       "value": _point_value(p)})
        ok = self._w.write({"time": time.time(), "metrics": snapshot})
        return MetricExportResult.SUCCESS if ok else MetricExportResult.FAILURE

    def force_flush(self, timeout_millis: float = 10_000) -> bool:
        return True

    def shutdown(self, timeout_millis: float = 30_000, **kwargs) -> None:
        self._w.close()


def _point_value(p) -> Any:
    if hasattr(p, "bucket_counts"):  # histogram
        return {"count": p.count, "sum": p.sum, "bounds": list(p.explicit_bounds),
                "buckets": list(p.bucket_counts)}
    return p.value


def _instrument_classes():
    from opentelemetry.sdk.metrics import (
        Counter, Histogram, ObservableCounter, ObservableGauge, ObservableUpDownCounter,
        UpDownCounter,
    )
    return (Counter, Histogram, ObservableCounter, ObservableGauge,
            ObservableUpDownCounter, UpDownCounter)


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
