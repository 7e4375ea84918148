"""The runtime releases spectrace instruments, in the OpenTelemetry contrib convention.

`opentelemetry-instrument` skips spectrace unless one of `_instruments_any` is installed
(it reads them from the `instruments-any` extra in pyproject.toml, which must list the
same); `SpectraceInstrumentor.instrumentation_dependencies()` returns those installed.
"""

_instruments_sglang = "sglang >= 0.5.5"
_instruments = ()
_instruments_any = (_instruments_sglang,)
