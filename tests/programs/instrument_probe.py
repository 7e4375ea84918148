"""A fresh interpreter for tests/test_instrument.py (SGLang's post-import state must not leak
between tests): `instrument()` / `uninstrument()` against SGLang 0.5.23's real modules, in
one of three scenarios; prints one JSON line.

    python tests/programs/instrument_probe.py after-import | before-import | as-started
                                                   (needs SGLang; PYTHONPATH with the repo)
"""
import importlib
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

POINTS = [
    ("sglang.srt.models.llama_eagle3", "LlamaModel", "forward"),
    ("sglang.srt.models.llama_eagle3", "LlamaForCausalLMEagle3", "load_weights"),
    ("sglang.srt.speculative.eagle_worker_v2", "EAGLEWorkerV2", "__init__"),
    ("sglang.srt.speculative.eagle_worker_v2", "EAGLEWorkerV2", "forward_batch_generation"),
    ("sglang.srt.speculative.eagle_worker_v2", "EAGLEWorkerV2", "verify"),
    ("sglang.srt.speculative.eagle_worker_v2", "EAGLEWorkerV2", "on_verify_complete_cpu"),
]


def current():
    return [vars(getattr(importlib.import_module(m), c))[a] for m, c, a in POINTS]


def wrapped(objs):
    from spectrace.patching import is_installed
    return [hasattr(o, "__wrapped__") and is_installed(o) for o in objs]


def after_import() -> dict:
    originals = current()              # SGLang imported before instrument()
    import spectrace
    spectrace.instrument()
    first = current()
    spectrace.instrument()             # idempotent: nothing changes
    second = current()
    env_on = os.environ.get("SPECTRACE_ENABLED")
    spectrace.uninstrument()
    restored = current()
    return {
        "wrapped": wrapped(first),
        "second_same": [a is b for a, b in zip(first, second)],
        "restored": [a is b for a, b in zip(originals, restored)],
        "env_on": env_on, "env_after": os.environ.get("SPECTRACE_ENABLED"),
    }


def before_import() -> dict:
    import spectrace
    spectrace.instrument()             # SGLang not imported yet: post-import hooks
    objs = current()
    spectrace.uninstrument()
    after_un = wrapped(current())
    spectrace.instrument()
    again = wrapped(current())
    spectrace.uninstrument()
    return {"wrapped": wrapped(objs), "after_un": after_un, "again": again}


def as_started() -> dict:
    """What the environment alone did (SPECTRACE_* variables, the installed .pth hook)."""
    import spectrace
    return {"wrapped": wrapped(current()), "active": spectrace.is_instrumented()}


SCENARIOS = {"after-import": after_import, "before-import": before_import,
             "as-started": as_started}

if __name__ == "__main__":
    print(json.dumps(SCENARIOS[sys.argv[1]]()))
