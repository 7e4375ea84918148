"""OpenTelemetry set-up inside one process: providers, readers and span processors.

It runs lazily, the first time a hook in a model-running process has something to report
(`spectrace.process.recorder()`). Providers come, in this order, from the caller
(`instrument(tracer_provider=..., meter_provider=...)`, as the OpenTelemetry instrumentor
passes them), from the host's global configuration, or are spectrace's own, built from
the settings; spectrace adds exporters only to its own. The file sink for findings is
always spectrace's.

Nothing here may block or break the server: see `export.bounded`; an exporter that
cannot be built is logged and left out while the others run.
"""
from __future__ import annotations

import json
import logging
import os
import time
from dataclasses import dataclass, field

from opentelemetry import metrics as otel_metrics
from opentelemetry import trace as otel_trace
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider

from .. import signals
from ..version import __version__
from ..config import Config
from ..file_layout import EVENTS_FILE, METRICS_FILE, RESOURCE_FILE, SPANS_FILE, process_dir
from .bounded import (
    BoundedSpanProcessor, CountingMetricExporter, CountingSpanExporter, register_dropped_counter,
)
from . import history
from .files import FileMetricExporter, FileSink, FileSpanExporter, JsonlWriter, make_private_dir
from .final_flush import LOCAL_WAIT_S, NETWORK_WAIT_S, FlushTarget
from .readers import PeriodicReader
from .resource import build_resource, service_name

log = logging.getLogger("spectrace")


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
    metric_readers: list = field(default_factory=list)  # those of spectrace's own provider
    local: list = field(default_factory=list)  # the file exporter's reader and processor

    def flush_targets(self, before_spans=None) -> list[FlushTarget]:
        """What a final flush exports (`export.final_flush`): spectrace's own readers and
        span processors; the files' get the longer wait (a local write), the network
        exporters' the shorter one (a stuck collector must not hold a stop).
        `before_spans`: run before each span processor's flush, in its thread (the
        Recorder's spans that wait for the collecting thread)."""
        def wait(t) -> float:
            return LOCAL_WAIT_S if any(t is x for x in self.local) else NETWORK_WAIT_S
        return ([FlushTarget(t, wait(t)) for t in self.metric_readers]
                + [FlushTarget(t, wait(t), before_spans) for t in self.span_processors])

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


def _optional(what: str, build):
    """Build an optional exporter piece; if that fails, log it and carry on without it."""
    try:
        return build()
    except Exception as exc:  # noqa: BLE001 - one bad exporter must not stop the others
        log.error("spectrace: the %s exporter could not start (%s: %s); it is off in this "
                  "process, the other exporters keep working", what, type(exc).__name__, exc)
        return None


def host_tracer_provider():
    """The global tracer provider if the host configured one, else None."""
    p = otel_trace.get_tracer_provider()
    return None if isinstance(p, (otel_trace.ProxyTracerProvider,
                                  otel_trace.NoOpTracerProvider)) else p


def host_meter_provider():
    """The global meter provider if the host configured one, else None. The API's
    placeholder before one is set is the private `_ProxyMeterProvider`: unlike tracing
    (`ProxyTracerProvider`), no public class or query says "not set" (opentelemetry-api
    1.27 - 1.45), hence the check by name (tests/test_process_state.py pins it: a renamed
    proxy would pass for a host provider and take spectrace's metrics)."""
    p = otel_metrics.get_meter_provider()
    if isinstance(p, otel_metrics.NoOpMeterProvider) or type(p).__name__ == "_ProxyMeterProvider":
        return None
    return p


@dataclass
class _Files:
    directory: str | None = None
    sink: FileSink | None = None
    events: JsonlWriter | None = None

    def writer(self, name: str, signal: str, max_bytes: int | None = None,
               downsample: bool = True) -> JsonlWriter:
        return JsonlWriter(os.path.join(self.directory, name), signal=signal, sink=self.sink,
                           max_bytes=max_bytes, downsample=downsample)


def _open_files(cfg: Config, resource: Resource, name: str) -> _Files:
    """The process folder with `resource.json`, or an empty `_Files` when the file exporter
    is off or the folder cannot be made (logged)."""
    if "file" not in cfg.exporters:
        return _Files()
    directory = process_dir(cfg.output_dir, name)
    try:
        make_private_dir(directory)
        fd = os.open(os.path.join(directory, RESOURCE_FILE),
                     os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as fh:
            json.dump({"attributes": dict(resource.attributes), "started": time.time()},
                      fh, default=str)
    except OSError as exc:
        log.error("spectrace: cannot create output folder %s (%s); file export is off "
                  "for this process (set SPECTRACE_OUTPUT_DIR to a writable folder); "
                  "the other exporters and the server keep working", directory, exc)
        return _Files()
    files = _Files(directory, FileSink(directory))
    files.events = files.writer(EVENTS_FILE, "events")
    return files


def _metric_readers(cfg: Config, files: _Files, rank: int) -> tuple[list, int | None]:
    interval_ms = int(cfg.metric_interval_s * 1000)
    readers = []
    if files.directory is not None:
        readers.append(PeriodicReader(
            FileMetricExporter(files.writer(METRICS_FILE, "metrics", history.MAX_BYTES)),
            export_interval_millis=interval_ms))
    if "otlp" in cfg.exporters:
        def otlp():
            from .otlp import metric_exporter
            return PeriodicReader(CountingMetricExporter(metric_exporter()),
                                  export_interval_millis=interval_ms)
        readers.append(_optional("OTLP metric", otlp))
    if "console" in cfg.exporters:
        def console():
            from opentelemetry.sdk.metrics.export import ConsoleMetricExporter
            return PeriodicReader(
                ConsoleMetricExporter(), export_interval_millis=max(interval_ms, 10_000))
        readers.append(_optional("console metric", console))
    port = None
    if "prometheus" in cfg.exporters:
        def prometheus():
            from .prometheus import start_prometheus_reader
            return start_prometheus_reader(cfg, rank)
        reader, port = _optional("Prometheus", prometheus) or (None, None)
        readers.append(reader)
    return [r for r in readers if r is not None], port


def _span_processors(cfg: Config, files: _Files) -> list:
    processors = []
    if files.directory is not None:
        processors.append(BoundedSpanProcessor(
            FileSpanExporter(files.writer(SPANS_FILE, "spans", history.MAX_BYTES,
                                          downsample=False)),
            schedule_delay_millis=int(cfg.metric_interval_s * 1000)))
    if "otlp" in cfg.exporters:
        def otlp():
            from .otlp import span_exporter
            return BoundedSpanProcessor(CountingSpanExporter(span_exporter()))
        processors.append(_optional("OTLP span", otlp))
    if "console" in cfg.exporters:
        def console():
            from opentelemetry.sdk.trace.export import ConsoleSpanExporter, SimpleSpanProcessor
            return SimpleSpanProcessor(ConsoleSpanExporter())
        processors.append(_optional("console span", console))
    return [p for p in processors if p is not None]


def port_offset(identity: dict) -> int:
    """This process's Prometheus port above the base: the offset the adapter chose (SGLang:
    its rank in the world, pp_rank * tp_size + tp_rank; vLLM: EngineCore 0, worker of rank
    r 1 + r), else its TP rank."""
    offset = identity.get("port_offset")
    return int(offset) if offset is not None else int(identity.get("tp_rank") or 0)


def setup(cfg: Config, identity: dict, role: str = signals.ROLE_SCHEDULER,
          tracer_provider=None, meter_provider=None) -> ProcessTelemetry:
    resource = build_resource(cfg, identity, role)
    files = _open_files(cfg, resource, service_name(cfg, identity))
    owned: list = []
    meter_provider = meter_provider or host_meter_provider()
    port = None
    readers: list = []
    # spectrace's own providers leave exit to `export.final_flush` (bounded), not to the
    # SDK's exit handlers, which can wait 30 s on a stuck collector
    if meter_provider is None:
        readers, port = _metric_readers(cfg, files, port_offset(identity))
        meter_provider = MeterProvider(resource=resource, metric_readers=readers,
                                       shutdown_on_exit=False)
        owned.append(meter_provider)
    tracer_provider = tracer_provider or host_tracer_provider()
    processors: list = []
    if tracer_provider is None:
        tracer_provider = TracerProvider(resource=resource, shutdown_on_exit=False)
        processors = _span_processors(cfg, files)
        for p in processors:
            tracer_provider.add_span_processor(p)
        owned.append(tracer_provider)
    meter = meter_provider.get_meter(signals.SCOPE, __version__)
    try:
        register_dropped_counter(meter)
    except Exception as exc:  # noqa: BLE001
        log.warning("spectrace: cannot register %s: %s", signals.TELEMETRY_DROPPED.name, exc)
    # the file exporter's reader and span processor come first in their lists
    local = [group[0] for group in (readers, processors) if group] if files.directory else []
    return ProcessTelemetry(
        resource=resource, meter=meter,
        tracer=tracer_provider.get_tracer(signals.SCOPE, __version__),
        events=files.events, directory=files.directory, prometheus_port=port, owned=owned,
        sink=files.sink, span_processors=processors, metric_readers=readers,
        local=local)
