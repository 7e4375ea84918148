"""`instrument()` / `uninstrument()` / `is_instrumented()`: the public API.

`instrument()` registers wrapt post-import hooks for the runtime modules the adapters wrap
(`adapters.ADAPTERS`; they fire at once if a module is already imported), and writes its
resolved settings into the environment (`SPECTRACE_ENABLED=1` and the `SPECTRACE_*`
variables): the runtime spawns its model processes with the same environment, and
spectrace's start-up hook (`.pth` / runtime plugin) installs itself there with the same
options. The per-process state lives in `spectrace.process`.
"""
from __future__ import annotations

import importlib
import importlib.util
import logging
import os
import sys

import wrapt

from . import config as config_mod
from .adapters import ADAPTERS
from .config import Config
from . import process
from .process import STATE
from .safety import INTERNAL_ERRORS

log = logging.getLogger("spectrace")

_hooks_registered = False
_env_written: dict[str, str | None] = {}  # variable -> its value before instrument()
_warned_missing: set[str] = set()
process.on_reset(_warned_missing.clear)


def instrument(tracer_provider=None, meter_provider=None, **options) -> Config:
    """Instrument the speculative-decoding runtime in this process and in the processes
    it spawns. Idempotent. Options are the settings of `spectrace.config` (e.g.
    `exporters=["file", "prometheus"]`, `strict=True`); unset ones come from
    `SPECTRACE_*` variables. A bad value raises `ValueError` naming the setting.
    `tracer_provider` / `meter_provider`: OpenTelemetry providers to report to in this
    process (spawned processes build their own from the settings)."""
    cfg = config_mod.from_env(**options)
    if not any(importlib.util.find_spec(r) for r in ("sglang", "vllm")):
        log.info("spectrace: no supported runtime is installed here; the hooks install if "
                 "one is imported later")
    return install(cfg, propagate=True, tracer_provider=tracer_provider,
                   meter_provider=meter_provider)


def install(cfg: Config, propagate: bool, tracer_provider=None, meter_provider=None) -> Config:
    """Turn spectrace on in this process (`propagate`: and in the processes it spawns)."""
    global _hooks_registered
    with STATE.lock:
        if STATE.active:
            if cfg != STATE.config:
                log.warning("spectrace: already instrumented; new options are ignored "
                            "(call uninstrument() first)")
            return STATE.config
        STATE.config = cfg
        STATE.tracer_provider = tracer_provider
        STATE.meter_provider = meter_provider
        STATE.active = True
        if propagate:
            _write_env(cfg)
        if not _hooks_registered:
            for module, adapter in ADAPTERS.items():
                wrapt.register_post_import_hook(_make_hook(adapter), module)
            _hooks_registered = True
        else:  # re-instrument after uninstrument: wrap modules that are already imported
            for module, adapter in ADAPTERS.items():
                if module in sys.modules:
                    _make_hook(adapter)(sys.modules[module])
        return cfg


def _make_hook(adapter: str):
    """The post-import hook for one runtime module: apply its adapter's wrap points."""
    def hook(module):
        if not STATE.active:
            return
        mod_name, table = adapter.split(":")
        try:
            points = getattr(importlib.import_module(mod_name), table)
            with STATE.lock:
                STATE.patcher.apply(module, points)
            _warn_missing()
        except Exception as exc:  # noqa: BLE001 - never break the runtime's import
            INTERNAL_ERRORS.record(f"install:{module.__name__}", exc)
    return hook


def _warn_missing() -> None:
    from .runtimes import runtime_of, runtime_version
    for where in STATE.patcher.missing:
        if where not in _warned_missing:
            _warned_missing.add(where)
            runtime = runtime_of(where)
            log.warning("spectrace: %s %s has no %s; that hook is not installed, the "
                        "others are", runtime.label, runtime_version(runtime.name), where)


def _write_env(cfg: Config) -> None:
    env = config_mod.to_env(cfg)
    env["SPECTRACE_ENABLED"] = "1"
    for var, value in env.items():
        _env_written.setdefault(var, os.environ.get(var))
        os.environ[var] = value


def uninstrument() -> None:
    """Restore every wrapped function, stop exporting, stop spawned children from
    instrumenting themselves (the environment is put back as it was), and forget what
    spectrace learned in this process (`process.reset()`): a later `instrument()`
    starts from zero."""
    with STATE.lock:
        STATE.patcher.restore_all()
        STATE.active = False
        for var, old in _env_written.items():
            if old is None:
                os.environ.pop(var, None)
            else:
                os.environ[var] = old
        _env_written.clear()
        if STATE.telemetry is not None:
            from .export import final_flush
            final_flush.uninstall()
            STATE.telemetry.shutdown()
        STATE.telemetry = None
        STATE.recorder = None
        STATE.config = None
        STATE.tracer_provider = STATE.meter_provider = None
        process.reset()


def is_instrumented() -> bool:
    return STATE.active
