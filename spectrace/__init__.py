"""spectrace: tracing and instrumentation for EAGLE-3 speculative decoding.

    import spectrace
    spectrace.instrument()          # before sglang.Engine(...) / vllm.LLM(...) / a server
    spectrace.check_pair(target_model, draft_model)   # audit a loaded pair: [Finding]
"""
from .config import ConfigError
from .findings import Finding
from .instrumentation import instrument, is_instrumented, uninstrument
from .pairs import check_pair
from .safety import StrictModeError
from .version import __version__

__all__ = ["instrument", "uninstrument", "is_instrumented", "check_pair", "Finding",
           "ConfigError", "StrictModeError", "__version__"]
