"""spectrace's state in this process: its settings, its patcher, and the Recorder that the
adapters' hooks report to; and `reset()`, which forgets every piece of state spectrace
keeps for the whole process (`uninstrument()` calls it; so can a test).

The Recorder (and with it the providers and exporters) is created lazily, the first time
a hook in a model-running process has something to report, so launcher and tokenizer
processes, which import the runtime too, export nothing and open no port. From then on
the process writes a final snapshot when it is told to stop (`export.final_flush`).
"""
from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Callable

from . import signals
from .patching import Patcher
from .safety import DROPPED, INTERNAL_ERRORS

if TYPE_CHECKING:  # pragma: no cover
    from .config import Config
    from .export.providers import ProcessTelemetry
    from .recorder import Recorder


class ProcessState:
    def __init__(self) -> None:
        self.lock = threading.RLock()
        self.config: Config | None = None
        self.patcher = Patcher()
        self.active = False
        self.recorder: Recorder | None = None
        self.telemetry: ProcessTelemetry | None = None
        # tracer / meter providers handed to instrument() (the OpenTelemetry instrumentor
        # passes them); None means: global ones if the host set them, else spectrace's own
        self.tracer_provider = None
        self.meter_provider = None
        # resource attributes learned before the recorder exists (ranks, model names)
        self.identity: dict[str, object] = {}


STATE = ProcessState()
_RESETS: list[Callable[[], None]] = []


def on_reset(forget: Callable[[], None]) -> Callable[[], None]:
    """Have `reset()` call `forget`: for state a module keeps for the whole process (a
    cache in an adapter), which this module cannot import without a cycle."""
    _RESETS.append(forget)
    return forget


def reset() -> None:
    """Forget what spectrace learned in this process: the internal-error and drop counts,
    the identity, the wrap points found missing, the final-flush handlers and the
    adapters' caches (`on_reset`). The settings, patches and telemetry are
    `uninstrument()`'s to undo; it calls this last, so a later `instrument()` starts
    afresh, and a test can call it to start from zero."""
    from .export import final_flush
    with STATE.lock:
        INTERNAL_ERRORS.reset()
        DROPPED.reset()
        STATE.identity.clear()
        STATE.patcher.missing.clear()
        final_flush.reset()
        for forget in _RESETS:
            forget()


def recorder(role: str = signals.ROLE_SCHEDULER) -> Recorder | None:
    """The process's Recorder, created (with its exporters) on first use by a hook; None
    when spectrace is not instrumenting this process."""
    rec = STATE.recorder
    if rec is not None:
        return rec
    with STATE.lock:
        if STATE.recorder is None and STATE.config is not None:
            from .export.providers import setup
            from .recorder import Recorder
            STATE.telemetry = setup(STATE.config, STATE.identity, role,
                                    tracer_provider=STATE.tracer_provider,
                                    meter_provider=STATE.meter_provider)
            STATE.recorder = Recorder(STATE.config, STATE.telemetry,
                                      counted=counted(STATE.identity))
            from .export import final_flush
            final_flush.install(STATE.telemetry.flush_targets(
                before_spans=STATE.recorder.emit_request_spans))
        return STATE.recorder


def counted(identity: dict) -> str:
    """Whether this process counts its request-steps once or is a copy (the adapters note
    it with its ranks; a process that noted nothing counts as a single one)."""
    from .signals import COUNTED_ONCE
    return str(identity.get("counted") or COUNTED_ONCE)


def note_identity(**attrs) -> None:
    """Ranks and model names (resource attributes), learned before the recorder exists."""
    STATE.identity.update({k: v for k, v in attrs.items() if v is not None})
