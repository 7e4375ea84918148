"""A final snapshot when a process is told to stop, so that a normal stop loses nothing.

How SGLang 0.5.23 stops its scheduler processes (read in its source, measured on a CPU
server; docs/report.md, "Stopping a server"):

- Ctrl-C, i.e. SIGINT to the whole foreground process group: the scheduler gets SIGINT
  (Python's KeyboardInterrupt), and the launcher stops its HTTP server and SIGKILLs its
  children (`kill_process_tree`) 0.1-0.2 s later, mostly before the scheduler reaches
  its exit handlers;
- SIGTERM to the process group: the scheduler has no SIGTERM handler and dies at once;
- SIGTERM to the launcher alone (its graceful drain) or `Engine.shutdown()`: a
  `ShutdownReq`; the scheduler leaves its loop and exits normally.

So where spectrace's telemetry starts (`process.recorder()`, the eagle worker's
constructor, which SGLang runs in the scheduler's main thread), `install` sets

- a handler for SIGINT and SIGTERM that exports a final snapshot, then hands the signal
  on to the handler that was there before (SGLang's own, Python's KeyboardInterrupt) or,
  if that was the default action, restores it and re-raises the signal, so the process
  ends exactly as it would have; a signal the process ignored stays ignored (a job
  started in the background by a shell ignores SIGINT, and still dies when the
  launcher, which does not, SIGKILLs it);
- an `atexit` hook doing the same flush; when the process is ending because of such a
  signal, it only waits for the signal's own flushes that are still running, so a stop
  collects one final snapshot, not two (spectrace's own providers do not register the
  SDK's exit handlers, whose shutdown can wait 30 s on a stuck collector).

The time bound: the handler waits at most `LOCAL_WAIT_S` (2 s) for the file exporter's
snapshot and `NETWORK_WAIT_S` (0.3 s) for a network exporter's (a stuck collector must
not hold a stop), all in parallel; unloaded, the file snapshot takes 1-7 ms. Past the
bound the signal goes on anyway and the collection carries on in its thread: it still
lands if the process lives long enough (an exit hook that runs waits for that same
collection, not a second one); if the process is killed first (the default action, or
SGLang's launcher SIGKILLing its scheduler 0.1-0.2 s after Ctrl-C), the files keep the
previous periodic snapshot, whole: at most one export interval is lost, as at SIGKILL.
A collection is never cut short and never runs beside another (`export.readers`: that
was a double count under load).

Signal handlers can only be set from the main thread; elsewhere, and where a handler was
set outside Python, only the exit hook is installed. The flushes run in threads started
at install time (`FlushWorker`), so nothing is started inside a signal handler or at
interpreter shutdown, and a lock held by the interrupted code costs at most the wait.
SIGKILL cannot be caught: it loses at most one export interval.
"""
from __future__ import annotations

import atexit
import logging
import os
import signal
import threading
import time

from typing import Callable, NamedTuple

from ..safety import INTERNAL_ERRORS

log = logging.getLogger("spectrace")

LOCAL_WAIT_S = 2.0     # the file exporter's snapshot (a local write)
NETWORK_WAIT_S = 0.3   # a network exporter's (OTLP, console, Prometheus)
SIGNALS = (signal.SIGINT, signal.SIGTERM)


class FlushTarget(NamedTuple):
    """A metric reader or span processor to flush, how long a stop waits for it, and what
    runs first in its worker's thread (the spans the decode loop left for later)."""

    target: object
    wait_s: float
    before: Callable[[], None] | None = None


class FlushWorker:
    """A daemon thread that flushes one exporter (a metric reader or span processor)
    whenever asked; `wait` waits for it until a deadline. A request made while another
    is pending or running shares it: one collection, not two."""

    def __init__(self, flush_target: FlushTarget) -> None:
        self.target, self.wait_s, self.before = flush_target
        self.collections = 0  # flushes finished (what the tests count)
        self._cond = threading.Condition()  # an RLock: a second signal may arrive mid-wait
        self._requested = 0
        self._done = 0
        self._closed = False
        self._thread = threading.Thread(target=self._run, name="spectrace-final-flush",
                                        daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while True:
            with self._cond:
                while self._done >= self._requested and not self._closed:
                    self._cond.wait()
                if self._closed:
                    return
                generation = self._requested
            if self.before is not None:
                try:
                    self.before()
                except Exception as exc:  # noqa: BLE001 - the flush still runs
                    INTERNAL_ERRORS.record("final_flush", exc)
            try:
                self.target.force_flush(timeout_millis=int(self.wait_s * 1000))
            except Exception as exc:  # noqa: BLE001 - the worker must survive
                INTERNAL_ERRORS.record("final_flush", exc)
            with self._cond:
                self._done = generation
                self.collections += 1
                self._cond.notify_all()

    def close(self) -> None:
        with self._cond:
            self._closed = True
            self._cond.notify_all()

    def request(self) -> int:
        with self._cond:
            if self._done >= self._requested:  # none pending or running: a new one
                self._requested += 1
                self._cond.notify_all()
            return self._requested

    def wait(self, generation: int, deadline: float) -> bool:
        with self._cond:
            while self._done < generation:
                left = deadline - time.monotonic()
                if left <= 0 or not self._thread.is_alive():  # (a forked child has none)
                    return False
                self._cond.wait(left)
            return True


class _State:
    def __init__(self) -> None:
        self.workers: list[FlushWorker] = []
        self.previous: dict[int, object] = {}  # signal -> the handler spectrace replaced
        self.atexit = False
        self.last_flush_s: float | None = None
        # the flushes a signal asked for, while the process is ending because of it
        self.stop: list[tuple[FlushWorker, int]] = []


_STATE = _State()


def _request() -> list[tuple[FlushWorker, int]]:
    try:
        return [(w, w.request()) for w in list(_STATE.workers)]
    except Exception as exc:  # noqa: BLE001 - never in the way of a stopping process
        INTERNAL_ERRORS.record("final_flush", exc)
        return []


def _finish(pending: list[tuple[FlushWorker, int]]) -> bool:
    """Wait for each requested flush at most its worker's `wait_s` (in parallel)."""
    started = time.monotonic()
    try:
        ok = all([w.wait(gen, started + w.wait_s) for w, gen in pending])
    except Exception as exc:  # noqa: BLE001
        INTERNAL_ERRORS.record("final_flush", exc)
        ok = False
    _STATE.last_flush_s = time.monotonic() - started
    return ok


def flush() -> bool:
    """Export a snapshot now from every flush worker, waiting for each at most its
    `wait_s`; True when all finished in time. Never raises."""
    return _finish(_request())


def _on_signal(signum, frame) -> None:
    # Until the signal has gone on, the process is taken to end with it (a handler that
    # raises KeyboardInterrupt or SystemExit ends it): the exit hook then only waits for
    # these same flushes, if they are still running, and starts no second collection.
    _STATE.stop = _request()
    _finish(_STATE.stop)
    previous = _STATE.previous.get(signum, signal.SIG_DFL)
    if callable(previous):
        previous(signum, frame)
        _STATE.stop = []  # the handler returned: the process carries on
    elif previous != signal.SIG_IGN:
        # The default action (terminate), exactly as without spectrace.
        signal.signal(signum, signal.SIG_DFL)
        os.kill(os.getpid(), signum)
    else:
        # Ignored: the process carries on, as without spectrace; the snapshot is written
        # anyway, because the stop usually comes from elsewhere (a background job
        # ignores SIGINT, and SGLang's launcher SIGKILLs its children on it).
        _STATE.stop = []


def _at_exit() -> None:
    _finish(_STATE.stop or _request())


def install(targets: list[FlushTarget]) -> list[str]:
    """Flush `targets` when the process is told to stop. Idempotent; a later call
    replaces the targets. Returns the signal names handled."""
    for w in _STATE.workers:
        w.close()  # an earlier telemetry's
    _STATE.workers = [FlushWorker(t) for t in targets]
    _STATE.stop = []
    if not _STATE.atexit:
        atexit.register(_at_exit)
        _STATE.atexit = True
    if threading.current_thread() is not threading.main_thread():
        log.debug("spectrace: telemetry started outside the main thread; the final "
                  "snapshot is written at exit only, not on SIGINT/SIGTERM")
        return []
    for sig in SIGNALS:
        current = signal.getsignal(sig)
        if current is _on_signal or current is None:
            continue  # ours already, or set outside Python (nothing to hand on to)
        _STATE.previous[sig] = current
        signal.signal(sig, _on_signal)
    return [signal.Signals(s).name for s in _STATE.previous]


def reset() -> None:
    """As before the first `install` (for `process.reset()`)."""
    uninstall()
    _STATE.last_flush_s = None


def uninstall() -> None:
    """Put back the handlers spectrace replaced (where its own are still in place) and
    stop flushing on exit."""
    if threading.current_thread() is threading.main_thread():
        for sig, previous in list(_STATE.previous.items()):
            if signal.getsignal(sig) is _on_signal:
                signal.signal(sig, previous)
            del _STATE.previous[sig]
    for w in _STATE.workers:
        w.close()
    _STATE.workers = []
    if _STATE.atexit:
        atexit.unregister(_at_exit)
        _STATE.atexit = False

