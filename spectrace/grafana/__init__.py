"""spectrace's Grafana dashboard, Prometheus alert rules, Grafana provisioning files and
metric reference, built at run time from `spectrace.signals` (every metric name is a
`MetricSpec.prometheus_name`), so what an installed spectrace writes always matches the
metrics it exports. `spectrace grafana` (`cli`) writes them for a deployment (`files`);
the repository's copies (`grafana/`, `docs/metrics.md`) are written by
`python grafana/build_dashboards.py` and checked against this code by the tests.
"""
