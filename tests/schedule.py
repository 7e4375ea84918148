"""The order test modules are handed to pytest-xdist's workers in (scripts/test.sh runs
whole modules a worker, `--dist loadfile`, in collection order).

Modules that start real servers take minutes each, the rest seconds: when one of the long
ones is collected late it runs alone after everything else has finished, and the suite
takes that much longer (CI's time is budgeted). So the longest modules go first (longest
processing time first, the classic rule for two machines), the short ones fill in behind
them: each module's seconds as last measured (tests/module_seconds.json, written by
scripts/module_seconds.py from a run's JUnit file); a module not measured yet counts as
DEFAULT_SERVER_S if it starts servers, else as nothing. Within a module the order is kept
(its servers are module fixtures), and modules of equal seconds keep collection order.
"""
from __future__ import annotations

import json
import os

SECONDS_FILE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "module_seconds.json")
DEFAULT_SERVER_S = 120.0  # a new server module: about one server's start and traffic

# fixtures that start a real server (tests/conftest.py); every module of the vLLM tier starts
# vLLM, and an SGLang-tier module that makes tiny models starts its own server
# (tests/test_otlp_e2e.py, tests/test_v1_sglang0512.py)
SERVER_FIXTURES = frozenset({"sglang_server", "vllm_server"})


def starts_servers(item) -> bool:
    fixtures = set(getattr(item, "fixturenames", ()))
    return (bool(SERVER_FIXTURES & fixtures) or item.get_closest_marker("vllm") is not None
            or ("tiny_models" in fixtures and item.get_closest_marker("sglang") is not None))


def module_seconds() -> dict[str, float]:
    """tests/module_seconds.json: module path -> seconds last measured ({} if missing)."""
    try:
        with open(SECONDS_FILE) as fh:
            return json.load(fh)
    except FileNotFoundError:
        return {}


def servers_first(items: list) -> None:
    """Reorder `items` in place: the modules that take longest first, each module's tests
    in their collection order; a server module not yet measured as DEFAULT_SERVER_S."""
    measured = module_seconds()
    heavy = {item.nodeid.split("::")[0] for item in items if starts_servers(item)}

    def seconds(module: str) -> float:
        return measured.get(module, DEFAULT_SERVER_S if module in heavy else 0.0)
    items.sort(key=lambda item: -seconds(item.nodeid.split("::")[0]))
