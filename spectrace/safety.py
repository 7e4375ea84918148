"""Hooks must never break the server they observe.

`guarded_wrapper` builds a wrapt wrapper that runs spectrace code before and after the
wrapped runtime (SGLang, vLLM) call. An exception inside spectrace is caught, counted per
hook in `spectrace.internal_errors`, and logged once per hook; the wrapped call runs exactly once
with its own arguments, and its own result (or exception) is what the caller gets.
The only exception spectrace lets through on purpose is `StrictModeError`.
"""
from __future__ import annotations

import logging
import threading
from collections import defaultdict
from typing import Any, Callable

log = logging.getLogger("spectrace")


class StrictModeError(RuntimeError):
    """Raised only with SPECTRACE_STRICT=1, at the first fc bypass, to stop staging/CI runs."""


class InternalErrors:
    """Counts exceptions raised inside spectrace hooks, per hook; logs the first of each."""

    def __init__(self) -> None:
        self.counts: dict[str, int] = defaultdict(int)
        self._logged: set[str] = set()
        self._lock = threading.Lock()

    def record(self, hook: str, exc: BaseException) -> None:
        with self._lock:
            self.counts[hook] += 1
            first = hook not in self._logged
            self._logged.add(hook)
        if first:
            log.error("spectrace: hook %s raised %s: %s; the runtime's call ran normally. "
                      "Further errors in this hook are only counted (spectrace.internal_errors).",
                      hook, type(exc).__name__, exc, exc_info=exc)


INTERNAL_ERRORS = InternalErrors()


class DroppedItems:
    """Telemetry items spectrace gave up on, per signal (`spans`, `metrics`, `events`):
    an exporter queue was full, an export failed, or the file sink is off. Exported as
    `spectrace.telemetry.dropped`. Counting is a dict update: it never blocks the caller."""

    def __init__(self) -> None:
        self.counts: dict[str, int] = defaultdict(int)
        self._lock = threading.Lock()

    def add(self, signal: str, n: int = 1) -> None:
        with self._lock:
            self.counts[signal] += n

    def total(self) -> int:
        return sum(self.counts.values())


DROPPED = DroppedItems()

# before(instance, *read) -> ctx; after(ctx, instance, result, *read); cleanup(ctx), where
# `read` are the arguments the wrap point names (`patching.WrapPoint.reads`)
Before = Callable[..., Any]
After = Callable[..., None]
Cleanup = Callable[[Any], None]


def no_args(args: tuple, kwargs: dict) -> tuple:
    return ()


def guarded_wrapper(hook: str, before: Before | None = None, after: After | None = None,
                    cleanup: Cleanup | None = None, after_needs_ctx: bool = False,
                    read: Callable[[tuple, dict], tuple] = no_args):
    """A wrapt wrapper: `before(instance, *read(args, kwargs)) -> ctx`, then the call, then
    `after(ctx, instance, result, *read(args, kwargs))`; `cleanup(ctx)` runs last even when
    the call raised (to end spans). `read` picks the arguments the hooks take
    (`patching.arg_reader`; by default none). Any of them may fail without consequence.
    With `after_needs_ctx`, a call whose `before` returned None skips `after` (the fast
    path)."""
    fast_when_no_ctx = after is None or after_needs_ctx

    def wrapper(wrapped, instance, args, kwargs):
        ctx = values = None
        if before is not None:
            try:
                values = read(args, kwargs)
                ctx = before(instance, *values)
            except StrictModeError:
                raise
            except Exception as exc:  # noqa: BLE001 - that is the point
                INTERNAL_ERRORS.record(hook, exc)
        if ctx is None and fast_when_no_ctx:
            return wrapped(*args, **kwargs)  # the common case (step not sampled): no cleanup
        try:
            result = wrapped(*args, **kwargs)
            if after is not None:
                try:
                    if values is None:
                        values = read(args, kwargs)
                    after(ctx, instance, result, *values)
                except StrictModeError:
                    raise
                except Exception as exc:  # noqa: BLE001
                    INTERNAL_ERRORS.record(hook, exc)
            return result
        finally:
            if cleanup is not None and ctx is not None:
                try:
                    cleanup(ctx)
                except Exception as exc:  # noqa: BLE001
                    INTERNAL_ERRORS.record(hook, exc)

    wrapper.spectrace_hook = hook
    return wrapper
