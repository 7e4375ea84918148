"""`opentelemetry-instrument` integration: the `opentelemetry_instrumentor` entry point
`spectrace` runs this instrumentor.

    from spectrace.otel_instrumentor import SpectraceInstrumentor
    SpectraceInstrumentor().instrument(tracer_provider=tp, meter_provider=mp)

It calls `spectrace.instrument()`, which also reaches the runtime's spawned processes
through the environment (opentelemetry-instrument alone does not). Providers given here
are used in this process; options such as `exporters=["otlp"]` are spectrace's settings.
Whether spectrace is instrumented has one answer, `spectrace.is_instrumented()`: so
`uninstrument()` through this class undoes `spectrace.instrument()` and vice versa.
"""
from __future__ import annotations

from typing import Collection

from opentelemetry.instrumentation.dependencies import get_dependency_conflicts
from opentelemetry.instrumentation.instrumentor import BaseInstrumentor

from .package import _instruments, _instruments_any


class SpectraceInstrumentor(BaseInstrumentor):
    def instrumentation_dependencies(self) -> Collection[str]:
        """The supported runtime ranges (any one of `_instruments_any` is enough)."""
        return _instruments + _instruments_any

    def _check_dependency_conflicts(self):
        # Any one runtime is enough; the base class would require every entry.
        return get_dependency_conflicts(_instruments, _instruments_any)

    @property
    def _is_instrumented_by_opentelemetry(self) -> bool:  # one source of truth
        from .instrumentation import is_instrumented
        return is_instrumented()

    @_is_instrumented_by_opentelemetry.setter
    def _is_instrumented_by_opentelemetry(self, value: bool) -> None:
        pass  # set by spectrace.instrument() / uninstrument() themselves

    def _instrument(self, **kwargs):
        from .instrumentation import instrument
        instrument(**kwargs)

    def _uninstrument(self, **kwargs):
        from .instrumentation import uninstrument
        uninstrument()
