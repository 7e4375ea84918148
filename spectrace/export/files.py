"""The embedded default exporter's writers: JSON lines under one folder per process
(layout in `spectrace.file_layout`; the readers are in `spectrace.report.reader`).

SGLang SIGKILLs its schedulers at shutdown, so nothing may wait for an exit handler:
every line goes to the file in one `write(2)` as it is written, and a torn last line is
skipped by the reader. (A final snapshot when a process is told to stop:
`export.final_flush`.) `metrics.jsonl` and `spans.jsonl` stay bounded: their writers
compact them past `history.MAX_BYTES`, keeping a downsampled history of the metrics and
the newest spans (`export.history`).
"""
from __future__ import annotations

import json
import logging
import os
import threading
import time
from typing import Any, Sequence

from opentelemetry.sdk.metrics.export import (
    AggregationTemporality,
    MetricExporter,
    MetricExportResult,
    MetricsData,
)
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult

from ..safety import DROPPED, INTERNAL_ERRORS
from . import history

log = logging.getLogger("spectrace")


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
                      "other exporters and the server keep working", path, exc)


class JsonlWriter:
    """Appends one JSON object per line, each line in a single `write(2)` on an O_APPEND
    descriptor: no buffering to lose at SIGKILL, and no interleaving with other writers of
    the same file. After an OS error it turns itself (and its sink's other streams) off.
    With `max_bytes`, a file that grows past it is compacted (`history.compact`: a
    downsampled history, or with `downsample=False` the newest lines only; only for files
    this writer alone appends to, such as one process's `metrics.jsonl`)."""

    def __init__(self, path: str, signal: str = "events", sink: FileSink | None = None,
                 max_bytes: int | None = None, downsample: bool = True) -> None:
        self.path = path
        self.signal = signal
        self.sink = sink if sink is not None else FileSink(os.path.dirname(path))
        self.max_bytes = max_bytes
        self.downsample = downsample
        self.compactions = 0
        self._lock = threading.Lock()
        self._fd: int | None = None
        self._size = 0

    @property
    def failed(self) -> bool:
        return self.sink.failed

    def _drop(self, n: int = 1) -> None:
        DROPPED.add(self.signal, n)

    def write(self, obj: dict) -> bool:
        if self.sink.failed:
            self._drop()
            return False
        try:
            data = (json.dumps(obj, separators=(",", ":"), default=str,
                               allow_nan=False) + "\n").encode("utf-8", "backslashreplace")
        except (TypeError, ValueError) as exc:  # not JSON-able (e.g. nan): this item only
            INTERNAL_ERRORS.record(f"file:{self.signal}", exc)
            self._drop()
            return False
        with self._lock:
            try:
                if self._fd is None:
                    self._fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT
                                       | getattr(os, "O_CLOEXEC", 0), 0o600)
                    self._size = os.fstat(self._fd).st_size
                view = memoryview(data)
                while view:
                    n = os.write(self._fd, view)
                    view = view[n:]
                self._size += len(data)
            except OSError as exc:
                self.sink.fail(self.path, exc)
                self._close_locked()
            else:
                if self.max_bytes is not None and self._size > self.max_bytes:
                    self._compact_locked()
                return True
        self._drop()
        return False

    def _compact_locked(self) -> None:
        """After the line is on disk: rewrite the file smaller (`history.compact`); the
        next write opens the new file."""
        self._close_locked()
        try:
            self._size = history.compact(self.path, self.max_bytes, self.downsample)
            self.compactions += 1
        except OSError as exc:  # the line itself is written; later ones are not
            self.sink.fail(self.path, exc)

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
