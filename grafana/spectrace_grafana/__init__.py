"""Builders for spectrace's Grafana dashboards, Prometheus alert rules and metric docs.

Every metric name comes from `spectrace.signals` (`MetricSpec.prometheus_name`), so a
renamed signal changes the generated files and the check in the tests fails until they
are rebuilt with `python grafana/build_dashboards.py`.
"""
