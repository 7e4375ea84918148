"""A process for tests/test_entry_points.py, run under `opentelemetry-instrument`: which of
SGLang's real methods are wrapped, through the instrumentor and spectrace's own API, as
JSON.

    opentelemetry-instrument python tests/programs/otel_instrument_child.py   (needs SGLang)
"""
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

import sglang.srt.models.llama_eagle3 as e3
import sglang.srt.speculative.eagle_worker_v2 as w2

import spectrace
from spectrace.otel_instrumentor import SpectraceInstrumentor
from spectrace.patching import is_installed

POINTS = [(e3.LlamaModel, "forward"), (e3.LlamaForCausalLMEagle3, "load_weights"),
          (w2.EAGLEWorkerV2, "verify"), (w2.EAGLEWorkerV2, "on_verify_complete_cpu")]


def wrapped():
    return [is_installed(vars(c)[a]) for c, a in POINTS]


out = {"auto": wrapped(), "active": spectrace.is_instrumented()}
SpectraceInstrumentor().uninstrument()         # through the instrumentor
out["after_instrumentor_uninstrument"] = wrapped()
spectrace.instrument()
out["reinstrumented"] = wrapped()
SpectraceInstrumentor().uninstrument()         # undoes spectrace.instrument() too
out["after_mixed"] = wrapped()
SpectraceInstrumentor().instrument()
spectrace.uninstrument()                       # and the other way round
out["after_api_uninstrument"] = wrapped()
out["still_active"] = spectrace.is_instrumented()
print(json.dumps(out))
