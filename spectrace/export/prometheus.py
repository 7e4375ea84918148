"""A Prometheus pull endpoint per worker process: base port + rank, loopback by default.
A busy or invalid port is logged and skipped; it never stops the server."""
from __future__ import annotations

import logging

log = logging.getLogger("spectrace")


def _reader_class():
    from opentelemetry.exporter.prometheus import PrometheusMetricReader

    from .readers import WholeCollections

    class EndpointReader(WholeCollections, PrometheusMetricReader):
        """Closes its HTTP endpoint at shutdown (uninstrument), so the port is free again.
        A scrape and a final flush never collect at once, nor cut short (`readers`)."""

        httpd = None

        def shutdown(self, timeout_millis: float = 30_000, **kwargs) -> None:
            try:
                super().shutdown(timeout_millis=timeout_millis, **kwargs)
            except KeyError:  # collector already unregistered
                pass
            finally:
                if self.httpd is not None:
                    self.httpd.shutdown()
                    self.httpd.server_close()
                    self.httpd = None

    return EndpointReader


def start_prometheus_reader(cfg, rank: int):
    """Return (reader, port) or (None, None) when the endpoint cannot be opened."""
    try:
        from prometheus_client import CollectorRegistry, start_http_server
        cls = _reader_class()
    except ImportError:
        log.error("spectrace: the prometheus exporter needs `pip install spectrace[prometheus]`;"
                  " it is off in this process")
        return None, None
    port = cfg.prometheus_port + rank
    hint = ("the endpoint is off in this process, the other exporters keep working "
            "(SPECTRACE_PROMETHEUS_PORT sets the base port; each rank adds its rank)")
    if not 1 <= port <= 65535:
        log.error("spectrace: Prometheus port %d (base %d + rank %d) is not a TCP port; %s",
                  port, cfg.prometheus_port, rank, hint)
        return None, None
    registry = CollectorRegistry(auto_describe=False)
    try:
        started = start_http_server(port, addr=cfg.prometheus_host, registry=registry)
    except (OSError, OverflowError) as exc:
        log.error("spectrace: cannot listen on %s:%d for Prometheus (%s); %s",
                  cfg.prometheus_host, port, exc, hint)
        return None, None
    # registered only in our own registry (not prometheus_client's global one), so the
    # endpoint serves only spectrace's metrics
    reader = cls(registry=registry)
    if isinstance(started, tuple):  # prometheus_client >= 0.18 returns (server, thread)
        reader.httpd = started[0]
    log.info("spectrace: Prometheus metrics on http://%s:%d/metrics", cfg.prometheus_host, port)
    return reader, port
