"""Exporter plumbing that never blocks the server and counts what it gives up on.

Every item spectrace drops (a full span queue, a failed or refused export) is counted in
`spectrace.telemetry.dropped{signal}`; nothing here waits on a network call in the
caller's thread, and shutdown waits at most `SHUTDOWN_TIMEOUT_MS` per span exporter.
"""
from __future__ import annotations

import threading
from collections import deque

from opentelemetry.metrics import CallbackOptions, Observation
from opentelemetry.sdk.metrics.export import MetricExporter, MetricExportResult
from opentelemetry.sdk.trace import SpanProcessor
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult

from .. import signals
from ..safety import DROPPED

SPAN_QUEUE_SIZE = 2048        # spans waiting for an exporter, per exporter; then dropped
SPAN_BATCH_SIZE = 512
SHUTDOWN_TIMEOUT_MS = 2000    # shutdown and a final flush wait at most this long
SIGNALS = ("spans", "metrics", "events")


class CountingSpanExporter(SpanExporter):
    """Wraps a network span exporter: a failed or raising export counts its spans as
    dropped (the exporter's own timeout bounds how long the export thread waits)."""

    def __init__(self, inner: SpanExporter) -> None:
        self.inner = inner

    def export(self, spans) -> SpanExportResult:
        try:
            result = self.inner.export(spans)
        except Exception:  # noqa: BLE001 - counted, the export thread carries on
            result = SpanExportResult.FAILURE
        if result is not SpanExportResult.SUCCESS:
            DROPPED.add("spans", len(spans))
        return result

    def shutdown(self) -> None:
        self.inner.shutdown()

    def force_flush(self, timeout_millis: int = 30_000) -> bool:
        return self.inner.force_flush(timeout_millis)


class CountingMetricExporter(MetricExporter):
    """Wraps a network metric exporter: the data points of a failed export are counted as
    dropped (cumulative metrics: the next successful export carries the totals)."""

    def __init__(self, inner: MetricExporter) -> None:
        # The reader asks its exporter for these two attributes (the SDK's
        # PeriodicExportingMetricReader reads them the same way); MetricExporter has no
        # public accessor, so the wrapper passes the inner exporter's choice on.
        super().__init__(preferred_temporality=getattr(inner, "_preferred_temporality", None),
                         preferred_aggregation=getattr(inner, "_preferred_aggregation", None))
        self.inner = inner

    def export(self, metrics_data, timeout_millis: float = 10_000, **kwargs):
        try:
            result = self.inner.export(metrics_data, timeout_millis=timeout_millis, **kwargs)
        except Exception:  # noqa: BLE001
            result = MetricExportResult.FAILURE
        if result is not MetricExportResult.SUCCESS:
            DROPPED.add("metrics", _count_points(metrics_data))
        return result

    def force_flush(self, timeout_millis: float = 10_000) -> bool:
        return self.inner.force_flush(timeout_millis=timeout_millis)

    def shutdown(self, timeout_millis: float = 30_000, **kwargs) -> None:
        self.inner.shutdown(timeout_millis=timeout_millis, **kwargs)


def _count_points(metrics_data) -> int:
    try:
        return sum(len(m.data.data_points) for rm in metrics_data.resource_metrics
                   for sm in rm.scope_metrics for m in sm.metrics) or 1
    except Exception:  # noqa: BLE001
        return 1


class BoundedSpanProcessor(SpanProcessor):
    """Batches ended spans to one exporter from a background thread. A full queue drops
    the *new* span and counts it; shutdown and flush wait at most `SHUTDOWN_TIMEOUT_MS`.
    (The SDK's BatchSpanProcessor logs a warning per dropped span and its shutdown waits
    up to 30 s for a stuck exporter, with no public way to shorten either.)"""

    def __init__(self, exporter: SpanExporter, max_queue_size: int = SPAN_QUEUE_SIZE,
                 schedule_delay_millis: float = 1000) -> None:
        self.exporter = exporter
        self.max_queue_size = max_queue_size
        self._queue: deque = deque()
        self._delay = schedule_delay_millis / 1000
        self._wake = threading.Event()
        self._export_lock = threading.Lock()
        self._stopped = False
        self._thread = threading.Thread(target=self._run, name="spectrace-span-export",
                                        daemon=True)
        self._thread.start()

    def queue_length(self) -> int:
        return len(self._queue)

    def on_start(self, span, parent_context=None) -> None:
        pass

    def on_end(self, span) -> None:
        if not span.context.trace_flags.sampled:
            return
        if self._stopped or len(self._queue) >= self.max_queue_size:
            DROPPED.add("spans", 1)
            return
        self._queue.append(span)
        if len(self._queue) >= SPAN_BATCH_SIZE:
            self._wake.set()

    def _run(self) -> None:
        while not self._stopped:
            self._wake.wait(self._delay)
            self._wake.clear()
            self._export_queued()
        self._export_queued()

    def _export_queued(self) -> None:
        with self._export_lock:
            queue = self._queue
            while queue:
                batch = [queue.popleft() for _ in range(min(SPAN_BATCH_SIZE, len(queue)))]
                try:
                    self.exporter.export(batch)
                except Exception:  # noqa: BLE001 - the export thread must survive
                    DROPPED.add("spans", len(batch))

    def force_flush(self, timeout_millis: int = SHUTDOWN_TIMEOUT_MS) -> bool:
        """Export what is queued, from a helper thread, waiting at most the timeout."""
        done = threading.Thread(target=self._export_queued, daemon=True)
        try:
            done.start()
        except RuntimeError:  # at interpreter exit (Python 3.12): export in this thread
            self._export_queued()
            return True
        done.join(min(timeout_millis, SHUTDOWN_TIMEOUT_MS) / 1000)
        return not done.is_alive()

    def shutdown(self, timeout_millis: int = SHUTDOWN_TIMEOUT_MS) -> None:
        self._stopped = True
        self._wake.set()
        self._thread.join(min(timeout_millis, SHUTDOWN_TIMEOUT_MS) / 1000)
        self.exporter.shutdown()  # also tells an export still in flight to stop retrying


def register_dropped_counter(meter) -> None:
    """`spectrace.telemetry.dropped{signal}`, 0 per signal from the start."""
    spec = signals.TELEMETRY_DROPPED

    def callback(options: CallbackOptions):
        counts = dict(DROPPED.counts)
        return [Observation(counts.get(s, 0), {signals.ATTR_SIGNAL: s})
                for s in sorted(set(SIGNALS) | set(counts))]

    meter.create_observable_counter(spec.name, callbacks=[callback], unit=spec.unit,
                                    description=spec.description)
