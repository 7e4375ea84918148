"""The order test modules are handed to pytest-xdist's workers in (scripts/test.sh runs
whole modules a worker, `--dist loadfile`, in collection order).

Modules that start real servers take minutes each, the rest seconds: when one of the long
ones is collected late it runs alone after everything else has finished, and the suite
takes that much longer (CI's time is budgeted). So the server modules go first, the short
ones fill in behind them. Within a module the order is kept (its servers are module
fixtures), and so is the order among the server modules and among the others.
"""
from __future__ import annotations

# fixtures that start a real server (tests/conftest.py); every module of the vLLM tier starts
# vLLM, and an SGLang-tier module that makes tiny models starts its own server
# (tests/test_otlp_e2e.py, tests/test_v1_sglang0512.py)
SERVER_FIXTURES = frozenset({"sglang_server", "vllm_server"})


def starts_servers(item) -> bool:
    fixtures = set(getattr(item, "fixturenames", ()))
    return (bool(SERVER_FIXTURES & fixtures) or item.get_closest_marker("vllm") is not None
            or ("tiny_models" in fixtures and item.get_closest_marker("sglang") is not None))


def servers_first(items: list) -> None:
    """Reorder `items` in place: every test of a module that starts a server before the
    other modules' tests, each group in its collection order."""
    heavy = {item.nodeid.split("::")[0] for item in items if starts_servers(item)}
    items.sort(key=lambda item: item.nodeid.split("::")[0] not in heavy)
