"""OpenTelemetry set-up inside one process: resource, providers and exporters.

It runs lazily, the first time a hook in a worker process has something to report, so
the launcher and tokenizer processes (which import SGLang too) export nothing and open no
port. If the host already configured global OpenTelemetry providers, spectrace uses them
and adds no exporter of its own except the file sink for findings.
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
from opentelemetry.sdk.metrics.export import PeriodicExportingMetricReader
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor

from . import __version__, signals
from .config import Config
from .file_export import (
    EVENTS_FILE, METRICS_FILE, RESOURCE_FILE, SPANS_FILE, FileMetricExporter,
    FileSpanExporter, JsonlWriter, make_private_dir, process_dir,
)

log = logging.getLogger("spectrace")
SCOPE = "spectrace"


@dataclass
class ProcessTelemetry:
    resource: Resource
    meter: otel_metrics.Meter
    tracer: otel_trace.Tracer
    events: JsonlWriter | None
    directory: str | None
    prometheus_port: int | None = None
    owned: list = field(default_factory=list)  # providers we created (shut down on uninstrument)

    def shutdown(self) -> None:
        for p in self.owned:
            try:
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

    if "file" in cfg.exporters:
        directory = process_dir(cfg.output_dir, cfg.service_name)
        try:
            make_private_dir(directory)
            fd = os.open(os.path.join(directory, RESOURCE_FILE),
                         os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            with os.fdopen(fd, "w") as fh:
                json.dump({"attributes": dict(resource.attributes), "started": time.time()},
                          fh, default=str)
            events = JsonlWriter(os.path.join(directory, EVENTS_FILE))
        except OSError as exc:
            log.error("spectrace: cannot create output folder %s (%s); file export is off "
                      "for this process (set SPECTRACE_OUTPUT_DIR to a writable folder); "
                      "the other exporters keep working", directory, exc)
            directory = None

    prometheus_port = None
    if use_host_metrics:
        meter_provider = host_meter
    else:
        readers = []
        interval_ms = int(cfg.metric_interval_s * 1000)
        if directory is not None:
            readers.append(PeriodicExportingMetricReader(
                FileMetricExporter(JsonlWriter(os.path.join(directory, METRICS_FILE))),
                export_interval_millis=interval_ms))
        if "otlp" in cfg.exporters:
            from .otlp import metric_exporter
            readers.append(PeriodicExportingMetricReader(
                metric_exporter(), export_interval_millis=interval_ms))
        if "console" in cfg.exporters:
            from opentelemetry.sdk.metrics.export import ConsoleMetricExporter
            readers.append(PeriodicExportingMetricReader(
                ConsoleMetricExporter(), export_interval_millis=max(interval_ms, 10_000)))
        if "prometheus" in cfg.exporters:
            from .prometheus import start_prometheus_reader
            reader, prometheus_port = start_prometheus_reader(cfg, ranks.get("tp_rank") or 0)
            if reader is not None:
                readers.append(reader)
        meter_provider = MeterProvider(resource=resource, metric_readers=readers)
        owned.append(meter_provider)

    if use_host_traces:
        tracer_provider = host_tracer
    else:
        tracer_provider = TracerProvider(resource=resource)
        if directory is not None:
            tracer_provider.add_span_processor(BatchSpanProcessor(
                FileSpanExporter(JsonlWriter(os.path.join(directory, SPANS_FILE))),
                schedule_delay_millis=int(cfg.metric_interval_s * 1000), max_queue_size=2048))
        if "otlp" in cfg.exporters:
            from .otlp import span_exporter
            tracer_provider.add_span_processor(BatchSpanProcessor(
                span_exporter(), schedule_delay_millis=1000, max_queue_size=2048))
        if "console" in cfg.exporters:
            from opentelemetry.sdk.trace.export import ConsoleSpanExporter, SimpleSpanProcessor
            tracer_provider.add_span_processor(SimpleSpanProcessor(ConsoleSpanExporter()))
        owned.append(tracer_provider)

    return ProcessTelemetry(
        resource=resource,
        meter=meter_provider.get_meter(SCOPE, __version__),
        tracer=tracer_provider.get_tracer(SCOPE, __version__),
        events=events, directory=directory, prometheus_port=prometheus_port, owned=owned)
