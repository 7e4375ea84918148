"""spectrace's Grafana dashboards, Prometheus alert rules and metric reference, built from
`spectrace.signals` (every metric name is a `MetricSpec.prometheus_name`), so what an
installed spectrace generates always matches the metrics it exports. The repository's
copies (`grafana/`, `docs/metrics.md`) are written by `python grafana/build_dashboards.py`
and checked against this code by tests/test_dashboards.py.
"""
