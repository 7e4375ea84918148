"""The process state a test or benchmark runs spectrace's hooks under: a Recorder of its
own for the duration (`own_recorder`, exporting to files as in a server, or
`memory_recorder`, read back in memory, as the OpenTelemetry contrib instrumentations'
tests do), spectrace's previous state put back afterwards."""
from __future__ import annotations

from typing import NamedTuple

def ensure_recorder(output_dir: str, **config):
    """Set spectrace's process state as `instrument()` does in a worker (without SGLang's
    import hooks) and create the Recorder with its exporters: `Config()` defaults unless
    overridden."""
    from spectrace import process
    from spectrace.config import Config
    st = process.STATE
    if st.recorder is None:
        st.config = Config(output_dir=output_dir, **config)
        st.active = True
    return process.recorder()


class own_recorder:
    """Context manager: a fresh Recorder (Config() defaults unless overridden) for the
    duration, spectrace's previous process state put back afterwards."""

    FIELDS = ("config", "recorder", "telemetry", "active")

    def __init__(self, output_dir: str, **config) -> None:
        self.output_dir, self.config = output_dir, config

    def __enter__(self):
        from spectrace import process
        st = process.STATE
        self.saved = {f: getattr(st, f) for f in self.FIELDS}
        st.recorder = st.telemetry = None
        from spectrace.config import Config
        st.config = Config(output_dir=self.output_dir, **self.config)
        st.active = True
        return process.recorder()

    def __exit__(self, *exc) -> None:
        from spectrace import process
        st = process.STATE
        if st.telemetry is not None:
            st.telemetry.shutdown()
        for f, v in self.saved.items():
            setattr(st, f, v)


def shutdown_recorder() -> None:
    from spectrace import process
    st = process.STATE
    if st.telemetry is not None:
        st.telemetry.shutdown()
    st.telemetry = st.recorder = st.config = None
    st.active = False




class MemoryTelemetry(NamedTuple):
    """What `memory_recorder` yields: the Recorder, the metric reader and the span exporter
    its providers write to (`collect()` for the metrics, `spans()` for the finished
    spans)."""
    recorder: object
    reader: object
    exporter: object

    def collect(self) -> dict:
        """Every data point collected now: metric name -> [(attributes, value)]; a
        histogram's value is its point itself (`count`, `sum`, `bucket_counts`)."""
        data = self.reader.get_metrics_data()
        out: dict = {}
        for rm in (data.resource_metrics if data else ()):
            for sm in rm.scope_metrics:
                for m in sm.metrics:
                    out.setdefault(m.name, []).extend(
                        (dict(p.attributes or {}), getattr(p, "value", p))
                        for p in m.data.data_points)
        return out

    def total(self, name: str, **attributes) -> float:
        """The sum of `name`'s points whose attributes include `attributes`."""
        return sum(v for a, v in self.collect().get(name, ())
                   if all(a.get(k) == x for k, x in attributes.items()))

    def spans(self) -> list:
        return list(self.exporter.get_finished_spans())


class memory_recorder:
    """Context manager: a fresh Recorder whose providers keep everything in memory (an
    OpenTelemetry `InMemoryMetricReader` and `InMemorySpanExporter`, no files, no threads
    of spectrace's own); yields `MemoryTelemetry`. Findings' events still go to
    `output_dir` when one is given."""

    FIELDS = ("config", "recorder", "telemetry", "active", "tracer_provider", "meter_provider")

    def __init__(self, output_dir: str | None = None, **config) -> None:
        self.output_dir, self.config = output_dir, config

    def __enter__(self) -> MemoryTelemetry:
        from opentelemetry.sdk.metrics import MeterProvider
        from opentelemetry.sdk.metrics.export import InMemoryMetricReader
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import SimpleSpanProcessor
        from opentelemetry.sdk.trace.export.in_memory_span_exporter import (
            InMemorySpanExporter)
        from spectrace import process
        from spectrace.config import Config
        st = process.STATE
        self.saved = {f: getattr(st, f) for f in self.FIELDS}
        reader, exporter = InMemoryMetricReader(), InMemorySpanExporter()
        tracer_provider = TracerProvider()
        tracer_provider.add_span_processor(SimpleSpanProcessor(exporter))
        st.recorder = st.telemetry = None
        st.tracer_provider, st.meter_provider = tracer_provider, MeterProvider(
            metric_readers=[reader])
        cfg = dict(exporters=(), metric_interval_s=3600)
        cfg.update(self.config)
        if self.output_dir is not None:
            cfg["output_dir"] = self.output_dir
        st.config = Config(**cfg)
        st.active = True
        return MemoryTelemetry(process.recorder(), reader, exporter)

    def __exit__(self, *exc) -> None:
        from spectrace import process
        st = process.STATE
        if st.telemetry is not None:
            st.telemetry.shutdown()
        for f, v in self.saved.items():
            setattr(st, f, v)
