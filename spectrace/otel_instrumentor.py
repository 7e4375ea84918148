"""`opentelemetry-instrument` integration: the `opentelemetry_instrumentor` entry point
`spectrace` runs this instrumentor, which calls `spectrace.instrument()` (and so reaches
SGLang's spawned processes through the environment, which opentelemetry-instrument alone
does not)."""
from __future__ import annotations

from typing import Collection

from opentelemetry.instrumentation.instrumentor import BaseInstrumentor


class SpectraceInstrumentor(BaseInstrumentor):
    def instrumentation_dependencies(self) -> Collection[str]:
        return ()  # SGLang is optional at import time: hooks install when it is imported

    def _instrument(self, **kwargs):
        from . import instrument
        instrument(**{k: v for k, v in kwargs.items() if k not in ("tracer_provider",
                                                                    "meter_provider")})

    def _uninstrument(self, **kwargs):
        from . import uninstrument
        uninstrument()
