"""OpenTelemetry set-up inside one process: resource, providers and exporters.

It runs lazily, the first time a hook in a worker process has something to report, so
the launcher and tokenizer processes (which import SGLang too) export nothing and open no
port. If the host already configured global OpenTelemetry providers, spectrace uses them
and adds no exporter of its own except the file sink for findings.

Nothing here may block or break the server: span queues are bounded (`SPAN_QUEUE_SIZE`)
and a full queue drops the new span instead of waiting; exports run in the SDK's own
threads; a failed or refused export, a full queue and a dead file sink are counted in
`spectrace.telemetry.dropped` (per signal); an exporter that cannot be built is logged
and left out while the others run.
"""
from __future__ import annotations

import json
import logging
import os
import socket
import time
from dataclasses import dataclass, field

from opentelemetry import metrics as otel_metrics
from opentelemetry import trace as otel_trace
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.metrics import CallbackOptions, Observation
from opentelemetry.sdk.metrics.export import (
    MetricExporter, MetricExportResult, PeriodicExportingMetricReader,
)
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import (
    BatchSpanProcessor, SpanExporter, SpanExportResult,
)

from . import __version__, signals
from .config import Config
from .file_export import (
    EVENTS_FILE, METRICS_FILE, RESOURCE_FILE, SPANS_FILE, FileMetricExporter, FileSink,
    FileSpanExporter, JsonlWriter, make_private_dir, process_dir,
)
from .safety import DROPPED

log = logging.getLogger("spectrace")
SCOPE = "spectrace"
SPAN_QUEUE_SIZE = 2048        # spans waiting for an exporter, per exporter; then dropped
SHUTDOWN_TIMEOUT_MS = 2000    # uninstrument() waits at most this long per span exporter
SIGNALS = ("spans", "metrics", "events")


class CountingSpanExporter(SpanExporter):
    """Wraps a network span exporter: a failed or raising export counts its spans as
    dropped (the exporter's own timeout bounds how long the export thread waits)."""

    def __init__(self, inner: SpanExporter) -> None:
        self.inner = inner

    def export(self, spans) -> SpanExportResult:
        try:
            result = self.inner.export(spans)
        except Exception:  # noqa: BLE001 - counted, the SDK thread carries on
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
    dropped (metrics are cumulative, so the next successful export carries the totals)."""

    def __init__(self, inner: MetricExporter) -> None:
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


class BoundedSpanProcessor(BatchSpanProcessor):
    """A BatchSpanProcessor whose full queue drops the *new* span and counts it in
    `spectrace.telemetry.dropped` (the SDK would log a warning per span), and whose
    shutdown waits at most `SHUTDOWN_TIMEOUT_MS` for a stuck exporter."""

    def __init__(self, exporter: SpanExporter, max_queue_size: int = SPAN_QUEUE_SIZE,
                 **kwargs) -> None:
        super().__init__(exporter, max_queue_size=max_queue_size, **kwargs)
        self.max_queue_size = max_queue_size

    def queue_length(self) -> int:
        inner = getattr(self, "_batch_processor", None)  # SDK >= 1.33
        queue = getattr(inner, "_queue", None) if inner is not None else getattr(
            self, "queue", None)
        return len(queue) if queue is not None else 0

    def on_end(self, span) -> None:
        if self.queue_length() >= self.max_queue_size:
            DROPPED.add("spans", 1)
            return
        super().on_end(span)

    def shutdown(self, timeout_millis: int = SHUTDOWN_TIMEOUT_MS) -> None:
        inner = getattr(self, "_batch_processor", None)
        if inner is not None and hasattr(inner, "shutdown"):
            inner.shutdown(timeout_millis=min(timeout_millis, SHUTDOWN_TIMEOUT_MS))
        else:  # older SDKs: their own (30 s) bound
            super().shutdown()


def register_dropped_counter(meter) -> None:
    """`spectrace.telemetry.dropped{signal}`, 0 per signal from the start."""
    spec = signals.TELEMETRY_DROPPED

    def callback(options: CallbackOptions):
        counts = dict(DROPPED.counts)
        return [Observation(counts.get(s, 0), {signals.ATTR_SIGNAL: s})
                for s in sorted(set(SIGNALS) | set(counts))]

    meter.create_observable_counter(spec.name, callbacks=[callback], unit=spec.unit,
                                    description=spec.description)


def _optional(what: str, build):
    """Build an optional exporter piece; if that fails, log it and carry on without it."""
    try:
        return build()
    except Exception as exc:  # noqa: BLE001 - one bad exporter must not stop the others
        log.error("spectrace: the %s exporter could not start (%s: %s); it is off in this "
                  "process, the other exporters keep working", what, type(exc).__name__, exc)
        return None


@dataclass
class ProcessTelemetry:
    resource: Resource
    meter: otel_metrics.Meter
    tracer: otel_trace.Tracer
    events: JsonlWriter | None
    directory: str | None
    prometheus_port: int | None = None
    owned: list = field(default_factory=list)  # providers we created (shut down on uninstrument)
    sink: FileSink | None = None
    span_processors: list = field(default_factory=list)

    def shutdown(self) -> None:
        for p in self.owned:
            try:
                if isinstance(p, MeterProvider):
                    p.shutdown(timeout_millis=5_000)
                else:
                    p.shutdown()
            except Exception:  # noqa: BLE001
                pass
        if self.events is not None:
            self.events.close()


def sglang_version() -> str:
    try:
        from importlib.metadata import version
        return version("sglang")
    except Exception:  # noqa: BLE001
        return "unknown"


def build_resource(cfg: Config, ranks: dict[str, int], role: str) -> Resource:
    attrs = {
        "service.name": cfg.service_name,
        "process.pid": os.getpid(),
        "host.name": socket.gethostname(),
        signals.RES_SPECTRACE_VERSION: __version__,
        signals.RES_SGLANG_VERSION: sglang_version(),
        signals.RES_ROLE: role,
    }
    for key, attr in (("tp_rank", signals.RES_TP_RANK), ("dp_rank", signals.RES_DP_RANK),
                      ("pp_rank", signals.RES_PP_RANK)):
        if ranks.get(key) is not None:
            attrs[attr] = int(ranks[key])
    for key, attr in (("model", signals.RES_MODEL), ("draft_model", signals.RES_DRAFT_MODEL)):
        if ranks.get(key):
            attrs[attr] = str(ranks[key])
    # OTEL_RESOURCE_ATTRIBUTES / OTEL_SERVICE_NAME are merged by Resource.create.
    return Resource.create(attrs)


def _host_configured(provider, proxy_names: tuple[str, ...]) -> bool:
    return type(provider).__name__ not in proxy_names


def setup(cfg: Config, ranks: dict[str, int], role: str = "scheduler") -> ProcessTelemetry:
    resource = build_resource(cfg, ranks, role)
    directory = None
    events = None
    owned: list = []
    host_meter = otel_metrics.get_meter_provider()
    host_tracer = otel_trace.get_tracer_provider()
    use_host_metrics = _host_configured(host_meter, ("_ProxyMeterProvider", "NoOpMeterProvider"))
    use_host_traces = _host_configured(host_tracer, ("ProxyTracerProvider", "NoOpTracerProvider"))

    sink = None
    if "file" in cfg.exporters:
        directory = process_dir(cfg.output_dir, cfg.service_name)
        try:
            make_private_dir(directory)
            fd = os.open(os.path.join(directory, RESOURCE_FILE),
                         os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            with os.fdopen(fd, "w") as fh:
                json.dump({"attributes": dict(resource.attributes), "started": time.time()},
                          fh, default=str)
            sink = FileSink(directory)
            events = JsonlWriter(os.path.join(directory, EVENTS_FILE), signal="events",
                                 sink=sink)
        except OSError as exc:
            log.error("spectrace: cannot create output folder %s (%s); file export is off "
                      "for this process (set SPECTRACE_OUTPUT_DIR to a writable folder); "
                      "the other exporters and the SGLang server keep working", directory, exc)
            directory = None

    prometheus_port = None
    interval_ms = int(cfg.metric_interval_s * 1000)
    if use_host_metrics:
        meter_provider = host_meter
    else:
        readers = []
        if directory is not None:
            readers.append(PeriodicExportingMetricReader(
                FileMetricExporter(JsonlWriter(os.path.join(directory, METRICS_FILE),
                                               signal="metrics", sink=sink)),
                export_interval_millis=interval_ms))
        if "otlp" in cfg.exporters:
            def otlp_metrics():
                from .otlp import metric_exporter
                return PeriodicExportingMetricReader(
                    CountingMetricExporter(metric_exporter()),
                    export_interval_millis=interval_ms)
            readers.append(_optional("OTLP metric", otlp_metrics))
        if "console" in cfg.exporters:
            def console_metrics():
                from opentelemetry.sdk.metrics.export import ConsoleMetricExporter
                return PeriodicExportingMetricReader(
                    ConsoleMetricExporter(), export_interval_millis=max(interval_ms, 10_000))
            readers.append(_optional("console metric", console_metrics))
        if "prometheus" in cfg.exporters:
            def prometheus():
                from .prometheus import start_prometheus_reader
                return start_prometheus_reader(cfg, ranks.get("tp_rank") or 0)
            reader, prometheus_port = _optional("Prometheus", prometheus) or (None, None)
            readers.append(reader)
        meter_provider = MeterProvider(resource=resource,
                                       metric_readers=[r for r in readers if r is not None])
        owned.append(meter_provider)

    processors = []
    if use_host_traces:
        tracer_provider = host_tracer
    else:
        tracer_provider = TracerProvider(resource=resource)
        if directory is not None:
            processors.append(BoundedSpanProcessor(
                FileSpanExporter(JsonlWriter(os.path.join(directory, SPANS_FILE),
                                             signal="spans", sink=sink)),
                schedule_delay_millis=interval_ms))
        if "otlp" in cfg.exporters:
            def otlp_spans():
                from .otlp import span_exporter
                return BoundedSpanProcessor(CountingSpanExporter(span_exporter()),
                                            schedule_delay_millis=1000)
            processors.append(_optional("OTLP span", otlp_spans))
        if "console" in cfg.exporters:
            def console_spans():
                from opentelemetry.sdk.trace.export import (
                    ConsoleSpanExporter, SimpleSpanProcessor,
                )
                return SimpleSpanProcessor(ConsoleSpanExporter())
            processors.append(_optional("console span", console_spans))
        processors = [p for p in processors if p is not None]
        for p in processors:
            tracer_provider.add_span_processor(p)
        owned.append(tracer_provider)

    meter = meter_provider.get_meter(SCOPE, __version__)
    try:
        register_dropped_counter(meter)
    except Exception as exc:  # noqa: BLE001
        log.warning("spectrace: cannot register %s: %s", signals.TELEMETRY_DROPPED.name, exc)
    return ProcessTelemetry(
        resource=resource,
        meter=meter,
        tracer=tracer_provider.get_tracer(SCOPE, __version__),
        events=events, directory=directory, prometheus_port=prometheus_port, owned=owned,
        sink=sink, span_processors=processors)
