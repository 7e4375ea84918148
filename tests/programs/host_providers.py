"""A process for tests/test_entry_points.py: a host that set global OpenTelemetry providers
(in-memory readers), then spectrace.instrument(); prints the metric and span names the
host's readers received.

    python tests/programs/host_providers.py OUTPUT_DIR
"""
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

from opentelemetry import metrics, trace
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

reader, spans = InMemoryMetricReader(), InMemorySpanExporter()
metrics.set_meter_provider(MeterProvider(metric_readers=[reader]))
tp = TracerProvider()
tp.add_span_processor(SimpleSpanProcessor(spans))
trace.set_tracer_provider(tp)
# spectrace is imported after the host set its providers, as in a host's start-up code
import spectrace  # noqa: E402
from spectrace.findings import Finding  # noqa: E402
from spectrace.process import recorder  # noqa: E402

spectrace.instrument(output_dir=sys.argv[1])
rec = recorder()
rec.acceptance.add([1, 1, 0], 3)
rec.finding(Finding("eagle3.fc_bypass", "error", "test finding"))
names = sorted({m.name for rm in reader.get_metrics_data().resource_metrics
                for sm in rm.scope_metrics for m in sm.metrics})
print(json.dumps({"metrics": names, "spans": [s.name for s in spans.get_finished_spans()]}))
