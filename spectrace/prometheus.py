"""A Prometheus pull endpoint per worker process: base port + rank, loopback by default.
A busy port is logged and skipped; it never stops the server."""
from __future__ import annotations

import logging

log = logging.getLogger("spectrace")


def start_prometheus_reader(cfg, rank: int):
    """Return (reader, port) or (None, None) when the endpoint cannot be opened."""
    try:
        from opentelemetry.exporter.prometheus import PrometheusMetricReader
        from prometheus_client import REGISTRY, CollectorRegistry, start_http_server
    except ImportError:
        log.error("spectrace: the prometheus exporter needs `pip install spectrace[prometheus]`;"
                  " it is off in this process")
        return None, None
    port = cfg.prometheus_port + rank
    reader = PrometheusMetricReader()
    # Serve only spectrace's metrics on our port, not whatever else the process registered.
    REGISTRY.unregister(reader._collector)
    registry = CollectorRegistry(auto_describe=True)
    registry.register(reader._collector)
    try:
        start_http_server(port, addr=cfg.prometheus_host, registry=registry)
    except OSError as exc:
        log.error("spectrace: cannot listen on %s:%d for Prometheus (%s); the endpoint is off "
                  "in this process, the other exporters keep working "
                  "(SPECTRACE_PROMETHEUS_PORT sets the base port; each rank adds its rank)",
                  cfg.prometheus_host, port, exc)
        return None, None
    log.info("spectrace: Prometheus metrics on http://%s:%d/metrics", cfg.prometheus_host, port)
    return reader, port
