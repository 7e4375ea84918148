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
import os
import socket
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

log = logging.getLogger("spectrace")

METRICS_FILE = "metrics.jsonl"
SPANS_FILE = "spans.jsonl"
EVENTS_FILE = "events.jsonl"
RESOURCE_FILE = "resource.json"


class FileSinkError(OSError):
    pass


class JsonlWriter:
    """Appends one JSON object per line; whole lines only, flushed at once. After the
    first OS error (read-only folder, full disk) it logs once and turns itself off."""

    def __init__(self, path: str, on_drop=None) -> None:
        self.path = path
        self._lock = threading.Lock()
        self._fh = None
        self.failed = False
        self._on_drop = on_drop

    def write(self, obj: dict) -> bool:
        if self.failed:
            if self._on_drop:
                self._on_drop(1)
            return False
        line = json.dumps(obj, separators=(",", ":"), default=str) + "\n"
        with self._lock:
            try:
                if self._fh is None:
                    fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
                    self._fh = os.fdopen(fd, "a", encoding="utf-8")
                self._fh.write(line)
                self._fh.flush()
                return True
            except OSError as exc:
                self.failed = True
                log.error("spectrace: cannot write %s (%s); file export of this stream is "
                          "off for this process, the other exporters keep working",
                          self.path, exc)
                if self._on_drop:
                    self._on_drop(1)
                return False

    def close(self) -> None:
        with self._lock:
            if self._fh is not None:
                try:
                    self._fh.close()
                except OSError:
                    pass
                self._fh = None


def process_dir(output_dir: str, service_name: str, pid: int | None = None) -> str:
    pid = os.getpid() if pid is None else pid
    host = socket.gethostname().split(".")[0] or "host"
    return os.path.join(output_dir, f"{service_name}-{host}-{pid}")


def make_private_dir(path: str) -> None:
    """Create `path` (and parents) readable by the owner only."""
    os.makedirs(path, mode=0o700, exist_ok=True)
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


def read_jsonl(path: str) -> list[dict]:
    """Every complete JSON object line of `path`; a torn or garbled line is skipped."""
    out = []
    try:
        with open(path, "rb") as fh:
            for raw in fh:
                if not raw.endswith(b"\n"):
                    break  # torn last line (the writer was killed mid-write)
                try:
                    obj = json.loads(raw)
                except ValueError:
                    continue
                if isinstance(obj, dict):
                    out.append(obj)
    except FileNotFoundError:
        pass
    return out
