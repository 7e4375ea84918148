"""spectrace's version: one place, read by the package, its telemetry (the meter's and
tracer's scope, the `spectrace.version` resource attribute) and the wheel's metadata
(pyproject.toml `[tool.hatch.version]`)."""
__version__ = "0.1.0"
