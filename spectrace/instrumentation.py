"""`instrument()` / `uninstrument()` and the per-process state they manage.

`instrument()` registers wrapt post-import hooks for the SGLang modules spectrace wraps
(they fire at once if the module is already imported), and writes its resolved settings
into the environment (`SPECTRACE_ENABLED=1` and the `SPECTRACE_*` variables): SGLang spawns
its scheduler and TP processes with the same environment, and spectrace's start-up hook
(`.pth` / SGLang plugin) installs itself there with the same options.
"""
from __future__ import annotations

import logging
import os
import threading

import wrapt

from . import config as config_mod
from .config import Config
from .patching import Patcher

log = logging.getLogger("spectrace")

# module -> the adapter function that wraps it (called with the imported module)
HOOKED_MODULES = {
    "sglang.srt.models.llama_eagle3": "spectrace.adapters.eagle3_model:install",
    "sglang.srt.speculative.eagle_worker_v2": "spectrace.adapters.sglang_v2:install",
    "sglang.srt.speculative.eagle_worker": "spectrace.adapters.sglang_v1:install",
    "sglang.srt.speculative.eagle_worker_common":
        "spectrace.adapters.sglang_v2:install_verify_common",
    "sglang.srt.managers.scheduler_output_processor_mixin":
        "spectrace.adapters.sglang_v2:install_scheduler",
}


class _State:
    def __init__(self) -> None:
        self.lock = threading.RLock()
        self.config: Config | None = None
        self.patcher = Patcher()
        self.hooks_registered = False
        self.active = False
        self.recorder = None
        self.telemetry = None
        self.ranks: dict[str, int] = {}
        self.env_written: dict[str, str | None] = {}
        self.warned_missing: set[str] = set()


STATE = _State()


def instrument(**options) -> Config:
    """Instrument SGLang's eagle workers and EAGLE-3 draft model in this process and in
    the processes it spawns. Idempotent. Options are the settings of `spectrace.config`
    (e.g. `exporters=["file", "prometheus"]`, `strict=True`); unset ones come from
    `SPECTRACE_*` variables. A bad value raises `ValueError` naming the setting."""
    cfg = config_mod.from_env(**options)
    import importlib.util
    if importlib.util.find_spec("sglang") is None:
        log.info("spectrace: SGLang is not installed here; the hooks install if it is "
                 "imported later")
    return _install(cfg, propagate=True)


def _install(cfg: Config, propagate: bool) -> Config:
    with STATE.lock:
        if STATE.active:
            if cfg != STATE.config:
                log.warning("spectrace: already instrumented; new options are ignored "
                            "(call uninstrument() first)")
            return STATE.config
        STATE.config = cfg
        STATE.active = True
        if propagate:
            _write_env(cfg)
        if not STATE.hooks_registered:
            for module, target in HOOKED_MODULES.items():
                wrapt.register_post_import_hook(_make_hook(target), module)
            STATE.hooks_registered = True
        else:  # re-instrument after uninstrument: wrap modules that are already imported
            import sys
            for module, target in HOOKED_MODULES.items():
                if module in sys.modules:
                    _make_hook(target)(sys.modules[module])
        return cfg


def _make_hook(target: str):
    def hook(module):
        if not STATE.active:
            return
        mod_name, fn_name = target.split(":")
        try:
            import importlib
            adapter = importlib.import_module(mod_name)
            with STATE.lock:
                getattr(adapter, fn_name)(module, STATE.patcher)
            _warn_missing(module.__name__)
        except Exception as exc:  # noqa: BLE001 - never break SGLang's import
            from .safety import INTERNAL_ERRORS
            INTERNAL_ERRORS.record(f"install:{module.__name__}", exc)
    return hook


def _warn_missing(module_name: str) -> None:
    from .telemetry import sglang_version
    for where in STATE.patcher.missing:
        if where not in STATE.warned_missing:
            STATE.warned_missing.add(where)
            log.warning("spectrace: SGLang %s has no %s; that hook is not installed, the "
                        "others are", sglang_version(), where)


def _write_env(cfg: Config) -> None:
    env = config_mod.to_env(cfg)
    env["SPECTRACE_ENABLED"] = "1"
    for var, value in env.items():
        STATE.env_written.setdefault(var, os.environ.get(var))
        os.environ[var] = value


def uninstrument() -> None:
    """Restore every wrapped function, stop exporting, and stop spawned children from
    instrumenting themselves (the environment is put back as it was)."""
    with STATE.lock:
        STATE.patcher.restore_all()
        STATE.active = False
        for var, old in STATE.env_written.items():
            if old is None:
                os.environ.pop(var, None)
            else:
                os.environ[var] = old
        STATE.env_written.clear()
        if STATE.telemetry is not None:
            STATE.telemetry.shutdown()
        STATE.telemetry = None
        STATE.recorder = None
        STATE.config = None


def is_instrumented() -> bool:
    return STATE.active


def recorder(ranks: dict[str, int] | None = None, role: str = "scheduler"):
    """The process's Recorder, created (with its exporters) on first use by a worker hook."""
    rec = STATE.recorder
    if rec is not None:
        return rec
    with STATE.lock:
        if STATE.recorder is None and STATE.config is not None:
            from .recorder import Recorder
            from .telemetry import setup
            if ranks:
                STATE.ranks.update({k: v for k, v in ranks.items() if v is not None})
            STATE.telemetry = setup(STATE.config, STATE.ranks, role)
            STATE.recorder = Recorder(STATE.config, STATE.telemetry)
        return STATE.recorder


def note_ranks(**ranks) -> None:
    """Ranks (and model names) learned before the recorder exists: resource attributes."""
    STATE.ranks.update({k: v for k, v in ranks.items() if v is not None})
