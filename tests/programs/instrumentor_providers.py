"""A process for tests/test_entry_points.py: `SpectraceInstrumentor().instrument()` with
providers of its own (in-memory readers); prints what reached them and that the global
providers were left alone.

    python tests/programs/instrumentor_providers.py OUTPUT_DIR
"""
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

from opentelemetry import trace
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from spectrace.findings import Finding
from spectrace.otel_instrumentor import SpectraceInstrumentor
from spectrace.process import recorder

reader, spans = InMemoryMetricReader(), InMemorySpanExporter()
mp = MeterProvider(metric_readers=[reader])
tp = TracerProvider()
tp.add_span_processor(SimpleSpanProcessor(spans))
SpectraceInstrumentor().instrument(tracer_provider=tp, meter_provider=mp, output_dir=sys.argv[1])
rec = recorder()
rec.acceptance.add([2, 0], 3)
rec.finding(Finding("eagle3.fc_bypass", "error", "test finding"))
points = {m.name: [p.value for p in m.data.data_points]
          for rm in reader.get_metrics_data().resource_metrics
          for sm in rm.scope_metrics for m in sm.metrics}
print(json.dumps({"accepted": points.get("spectrace.spec.accepted_tokens"),
                  "spans": [s.name for s in spans.get_finished_spans()],
                  "global_untouched": type(trace.get_tracer_provider()).__name__}))
SpectraceInstrumentor().uninstrument()
