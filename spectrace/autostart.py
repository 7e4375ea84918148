"""Auto-instrumentation from the environment alone (`SPECTRACE_ENABLED=1`).

Doors into the runtimes' spawned processes, all ending in `start()`:
- `spectrace_autostart.pth` (installed in site-packages) runs at every interpreter start
  and calls `on_interpreter_start()`: works on every SGLang and vLLM version;
- the `sglang.srt.plugins` entry point `spectrace`, which SGLang >= 0.5.12 loads at the
  start of each scheduler process, calls `sglang_plugin()`;
- the `vllm.general_plugins` entry point `spectrace`, which vLLM loads in every process
  it starts (front end, EngineCore, workers) before any model or scheduler module is
  imported, calls `vllm_plugin()` (vLLM's `VLLM_PLUGINS`, when set, must name it).
A bad setting is logged with the variable's name and the process runs uninstrumented.
"""
from __future__ import annotations

import logging
import os

log = logging.getLogger("spectrace")


def start() -> bool:
    """Instrument this process if `SPECTRACE_ENABLED` says so. Unset means off: having
    spectrace installed never turns it on by itself (the runtimes load its plugin
    regardless)."""
    from . import config
    from .instrumentation import install, is_instrumented
    if is_instrumented():
        return True
    if not os.environ.get("SPECTRACE_ENABLED", "").strip():
        return False
    try:
        cfg = config.from_env()
    except config.ConfigError as exc:
        logging.basicConfig()
        log.error("spectrace: auto-instrumentation is off in this process: %s", exc)
        return False
    if not cfg.enabled:
        return False
    install(cfg, propagate=False)
    return True


def on_interpreter_start() -> None:
    """From the .pth file: cheap; the wrappers install when SGLang's modules are imported.
    Any non-empty value goes through `start()`, so a bad one is logged, not ignored."""
    start()


def sglang_plugin() -> None:
    """Entry point of group `sglang.srt.plugins` (SGLang >= 0.5.12)."""
    start()


def vllm_plugin() -> None:
    """Entry point of group `vllm.general_plugins`."""
    start()
