"""spectrace: tracing and instrumentation for EAGLE-3 speculative decoding in SGLang.

    import spectrace
    spectrace.instrument()          # before sglang.Engine(...) / launch_server
"""
__version__ = "0.1.0"

from .config import ConfigError  # noqa: E402
from .instrumentation import instrument, is_instrumented, uninstrument  # noqa: E402
from .safety import StrictModeError  # noqa: E402

__all__ = ["instrument", "uninstrument", "is_instrumented", "ConfigError", "StrictModeError",
           "__version__"]
