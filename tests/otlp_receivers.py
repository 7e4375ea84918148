"""Real OTLP receivers for tests: the OpenTelemetry protocol's gRPC TraceService and
MetricsService, and an HTTP server taking `/v1/traces` and `/v1/metrics` protobuf posts.

Why: an exporter test against a mock proves nothing about the wire format; these decode
exactly what a Collector would receive.
"""
from __future__ import annotations

import gzip
import threading
import zlib
from concurrent import futures
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import grpc
from opentelemetry.proto.collector.metrics.v1 import metrics_service_pb2 as mpb
from opentelemetry.proto.collector.metrics.v1 import metrics_service_pb2_grpc as mgrpc
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2 as tpb
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2_grpc as tgrpc


def _value(v):
    """An OTLP AnyValue as a Python value."""
    kind = v.WhichOneof("value")
    if kind == "array_value":  # a sequence attribute: a list of its values
        return [_value(x) for x in v.array_value.values]
    return getattr(v, kind) if kind else None


def attributes(kvs) -> dict:
    return {kv.key: _value(kv.value) for kv in kvs}


class Received:
    """Everything a receiver got, decoded; thread-safe."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.spans: list[tuple[dict, object]] = []    # (resource attributes, Span)
        self.metrics: list[tuple[dict, object]] = []  # (resource attributes, Metric)

    def add_traces(self, req: tpb.ExportTraceServiceRequest) -> None:
        with self._lock:
            for rs in req.resource_spans:
                res = attributes(rs.resource.attributes)
                self.spans += [(res, s) for ss in rs.scope_spans for s in ss.spans]

    def add_metrics(self, req: mpb.ExportMetricsServiceRequest) -> None:
        with self._lock:
            for rm in req.resource_metrics:
                res = attributes(rm.resource.attributes)
                self.metrics += [(res, m) for sm in rm.scope_metrics for m in sm.metrics]

    def span_names(self) -> set[str]:
        with self._lock:
            return {s.name for _, s in self.spans}

    def metric_points(self, name: str) -> list[tuple[dict, float]]:
        """(resource attributes, value) of every sum/gauge data point of metric `name`."""
        out = []
        with self._lock:
            for res, m in self.metrics:
                if m.name != name:
                    continue
                data = getattr(m, m.WhichOneof("data"))
                for p in getattr(data, "data_points", []):
                    v = p.as_int if p.WhichOneof("value") == "as_int" else p.as_double
                    out.append((res, v))
        return out


class _Traces(tgrpc.TraceServiceServicer):
    def __init__(self, store: Received) -> None:
        self.store = store

    def Export(self, request, context):  # noqa: N802 (protocol name)
        self.store.add_traces(request)
        return tpb.ExportTraceServiceResponse()


class _Metrics(mgrpc.MetricsServiceServicer):
    def __init__(self, store: Received) -> None:
        self.store = store

    def Export(self, request, context):  # noqa: N802
        self.store.add_metrics(request)
        return mpb.ExportMetricsServiceResponse()


class GrpcReceiver:
    """OTLP/gRPC on 127.0.0.1, a free port; `endpoint` is what OTEL_EXPORTER_OTLP_ENDPOINT
    takes (the http scheme means no TLS)."""

    def __init__(self) -> None:
        self.received = Received()
        self.server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
        tgrpc.add_TraceServiceServicer_to_server(_Traces(self.received), self.server)
        mgrpc.add_MetricsServiceServicer_to_server(_Metrics(self.received), self.server)
        self.port = self.server.add_insecure_port("127.0.0.1:0")
        self.server.start()
        self.endpoint = f"http://127.0.0.1:{self.port}"

    def stop(self) -> None:
        self.server.stop(grace=None)


class HttpReceiver:
    """OTLP/HTTP (protobuf) on 127.0.0.1, a free port: `/v1/traces`, `/v1/metrics`."""

    def __init__(self) -> None:
        self.received = store = Received()
        self.paths: list[str] = []
        paths = self.paths

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):  # noqa: N802
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                enc = (self.headers.get("Content-Encoding") or "").lower()
                if enc == "gzip":
                    body = gzip.decompress(body)
                elif enc == "deflate":
                    body = zlib.decompress(body)
                paths.append(self.path)
                if self.path == "/v1/traces":
                    req, resp = tpb.ExportTraceServiceRequest(), tpb.ExportTraceServiceResponse()
                    req.ParseFromString(body)
                    store.add_traces(req)
                elif self.path == "/v1/metrics":
                    req, resp = (mpb.ExportMetricsServiceRequest(),
                                 mpb.ExportMetricsServiceResponse())
                    req.ParseFromString(body)
                    store.add_metrics(req)
                else:
                    self.send_error(404)
                    return
                out = resp.SerializeToString()
                self.send_response(200)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", str(len(out)))
                self.end_headers()
                self.wfile.write(out)

            def log_message(self, *args):  # keep test output clean
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()
        self.endpoint = f"http://127.0.0.1:{self.port}"

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()
