"""Hooks must never break the server they observe.

`guarded_wrapper` builds the wrapper that runs spectrace code before and after the
wrapped runtime (SGLang, vLLM) call, with wrapt's signature `(wrapped, instance, args,
kwargs)`; `guarded_function` puts it in a plain function that takes the original's place
on its class or module (what the Patcher installs on every wrap point of the decode loop).
An exception inside spectrace is caught, counted per hook in `spectrace.internal_errors`,
and logged once per hook; the wrapped call runs exactly once with its own arguments, and
its own result (or exception) is what the caller gets. The only exception spectrace lets
through on purpose is `StrictModeError`.
"""
from __future__ import annotations

import functools
import logging
import sys
import threading
from collections import defaultdict
from types import MethodType
from typing import Any, Callable, NamedTuple

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

    def reset(self) -> None:
        with self._lock:
            self.counts.clear()
            self._logged.clear()


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

    def reset(self) -> None:
        with self._lock:
            self.counts.clear()


DROPPED = DroppedItems()

# before(instance, *arguments) -> ctx; after(ctx, instance, result); cleanup(ctx)
Before = Callable[..., Any]
After = Callable[[Any, Any, Any], None]
Cleanup = Callable[[Any], None]


class Reads(NamedTuple):
    """Where the arguments a `before` hook takes sit in the calls of one function (made by
    `patching.arg_reader`, once): per argument (its index in wrapt's `args`, or
    `sys.maxsize` when it is keyword-only; its keyword; its default), or None for one
    dict of every argument; `read(args, kwargs) -> tuple` gives their values."""

    params: tuple[tuple[int, str, Any], ...] | None
    read: Callable[[tuple, dict], tuple]


NO_READS = Reads((), lambda args, kwargs: ())
_UNREAD = (sys.maxsize, "", None)


def guarded_wrapper(hook: str, before: Before | None = None, after: After | None = None,
                    cleanup: Cleanup | None = None, after_needs_ctx: bool = False,
                    reads: Reads = NO_READS):
    """A wrapt wrapper: `before(instance, *arguments) -> ctx` (the arguments `reads`
    locates), then the call, then `after(ctx, instance, result)`; `cleanup(ctx)` runs last
    even when the call raised (to end spans). Any of them may fail without consequence.
    With `after_needs_ctx`, a call whose `before` returned None skips `after` (the fast
    path)."""
    fast_when_no_ctx = after is None or after_needs_ctx
    params = reads.params
    # Up to three arguments are read inline below: a call through a helper, or with `*`,
    # costs about as much as a whole hook on CPython 3.11.
    count = -1 if params is None or len(params) > 3 else len(params)
    (i, n, d), (j, m, e), (k, o, f) = ((params or ()) + (_UNREAD,) * 3)[:3]
    read = reads.read

    def wrapper(wrapped, instance, args, kwargs):
        ctx = None
        if before is not None:
            try:
                if count == 1:
                    ctx = before(instance, args[i] if len(args) > i else kwargs.get(n, d))
                elif count == 0:
                    ctx = before(instance)
                elif count == 2:
                    ctx = before(instance, args[i] if len(args) > i else kwargs.get(n, d),
                                 args[j] if len(args) > j else kwargs.get(m, e))
                elif count == 3:
                    ctx = before(instance, args[i] if len(args) > i else kwargs.get(n, d),
                                 args[j] if len(args) > j else kwargs.get(m, e),
                                 args[k] if len(args) > k else kwargs.get(o, f))
                else:
                    ctx = before(instance, *read(args, kwargs))
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
                    after(ctx, instance, result)
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


def guarded_function(hook: str, original: Callable, method: bool, **hooks):
    """`original` (a plain function) behind `guarded_wrapper(hook, **hooks)`, as a plain
    function of the same name, signature (`__wrapped__`) and attributes, to take its place
    on its class (`method`: called with the instance first) or module.

    Why not wrapt's `FunctionWrapper`: on CPython 3.11 it costs about 1 µs a call (a
    bound wrapper object made at every attribute look-up, then the call into Python),
    this about a third of that; an SGLang v2 decode step goes through eight wrap points. dd-trace
    left wrapt on its hot paths for the same reason. wrapt still watches imports and
    wraps what is not a plain function (`Patcher`)."""
    call = guarded_wrapper(hook, **hooks)
    if method:
        def function(self, /, *args, **kwargs):
            return call(MethodType(original, self), self, args, kwargs)
    else:
        def function(*args, **kwargs):
            return call(original, None, args, kwargs)
    functools.update_wrapper(function, original)
    function.spectrace_hook = hook
    return function
