"""spectrace: tracing and instrumentation for EAGLE-3 speculative decoding.

    import spectrace
    spectrace.instrument()          # before sglang.Engine(...) / vllm.LLM(...) / a server
    spectrace.check_pair(target_model, draft_model)   # audit a loaded pair: [Finding]
"""
__version__ = "0.1.0"

from .config import ConfigError  # noqa: E402
from .findings import Finding  # noqa: E402
from .instrumentation import instrument, is_instrumented, uninstrument  # noqa: E402
from .pairs import check_pair  # noqa: E402
from .safety import StrictModeError  # noqa: E402

__all__ = ["instrument", "uninstrument", "is_instrumented", "check_pair", "Finding",
           "ConfigError", "StrictModeError", "__version__"]
