"""OTLP exporters (gRPC or HTTP), configured by the standard OTEL_EXPORTER_OTLP_* variables
(the protocol as `spectrace.config.otlp_protocol` reads and checks it)."""
from __future__ import annotations

from ..config import otlp_protocol


def span_exporter():
    if otlp_protocol("TRACES") == "grpc":
        from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter
    else:
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    return OTLPSpanExporter(timeout=5)


def metric_exporter():
    if otlp_protocol("METRICS") == "grpc":
        from opentelemetry.exporter.otlp.proto.grpc.metric_exporter import OTLPMetricExporter
    else:
        from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter
    return OTLPMetricExporter(timeout=5)
