"""Metric readers whose collections are whole and one at a time.

The OpenTelemetry SDK (1.27 to 1.45 at least) checks a collection's deadline between two
instruments, after it has already added the earlier instruments' observations to the
reader's storage; a collection that passes its deadline raises `MetricsTimeoutError`
and leaves those observations there. An observable counter's storage *adds* what it is
given until the next collection reads it, so that next collection reports those counters
twice (the cumulative total observed twice: 6 request-steps for 3). A short deadline, such
as a final flush's, is passed on a loaded machine; that was the double count.

So spectrace's own readers

- give every collection at least `MIN_COLLECT_MS` (30 s, the SDK's default export
  timeout), whatever deadline their caller asks for (the export keeps the caller's
  timeout): whoever must not wait that long (`export.final_flush`) bounds its own wait,
  not the collection;
- collect and export under one lock: the periodic reader's thread, a final flush and a
  Prometheus scrape never collect at the same time, and each collection's export is
  written before the next collection starts, so the newest line holds the newest totals.
"""
from __future__ import annotations

import os
import threading
import weakref

from opentelemetry.sdk.metrics.export import PeriodicExportingMetricReader

MIN_COLLECT_MS = 30_000


class WholeCollections:
    """Mixin for a `MetricReader`: one collection (and its export) at a time, never cut
    short by its deadline."""

    def __init__(self, *args, **kwargs) -> None:
        self._collection_lock = threading.Lock()
        ref = weakref.ref(self)
        # a fork while another thread collects would leave the child's lock held forever
        os.register_at_fork(after_in_child=lambda: _new_lock(ref))
        super().__init__(*args, **kwargs)

    def collect(self, timeout_millis: float = 10_000) -> None:
        with self._collection_lock:
            self._export_timeout_ms = timeout_millis
            super().collect(timeout_millis=max(timeout_millis, MIN_COLLECT_MS))

    def _receive_metrics(self, metrics_data, timeout_millis: float = 10_000, **kwargs) -> None:
        # the export (a network call, perhaps) keeps the deadline its caller asked for
        super()._receive_metrics(metrics_data, timeout_millis=min(
            timeout_millis, getattr(self, "_export_timeout_ms", timeout_millis)), **kwargs)


def _new_lock(ref) -> None:
    reader = ref()
    if reader is not None:
        reader._collection_lock = threading.Lock()


class PeriodicReader(WholeCollections, PeriodicExportingMetricReader):
    """The SDK's periodic reader with whole collections, one at a time."""
