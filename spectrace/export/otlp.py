"""OTLP exporters (gRPC or HTTP), configured by the standard OTEL_EXPORTER_OTLP_* variables."""
from __future__ import annotations

import os


def _protocol(signal: str) -> str:
    return (os.environ.get(f"OTEL_EXPORTER_OTLP_{signal}_PROTOCOL")
            or os.environ.get("OTEL_EXPORTER_OTLP_PROTOCOL") or "grpc").strip().lower()


def _check(proto: str, signal: str) -> None:
    if proto not in ("grpc", "http/protobuf"):
        raise ValueError(f"OTEL_EXPORTER_OTLP_PROTOCOL (or OTEL_EXPORTER_OTLP_{signal}_PROTOCOL)"
                         f"={proto!r}: spectrace supports grpc and http/protobuf")


def span_exporter():
    proto = _protocol("TRACES")
    _check(proto, "TRACES")
    if proto == "grpc":
        from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter
    else:
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    return OTLPSpanExporter(timeout=5)


def metric_exporter():
    proto = _protocol("METRICS")
    _check(proto, "METRICS")
    if proto == "grpc":
        from opentelemetry.exporter.otlp.proto.grpc.metric_exporter import OTLPMetricExporter
    else:
        from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter
    return OTLPMetricExporter(timeout=5)
