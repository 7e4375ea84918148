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

- a handler for SIGINT and SIGTERM that exports a final snapshot, waiting at most
  `FINAL_FLUSH_S` (0.3 s), then hands the signal on to the handler that was there before
  (SGLang's own, Python's KeyboardInterrupt) or, if that was the default action, restores
  it and re-raises the signal, so the process ends exactly as it would have; a signal
  the process ignored stays ignored (a job started in the background by a shell ignores
  SIGINT, and still dies when the launcher, which does not, SIGKILLs it);
- an `atexit` hook doing the same flush (spectrace's own providers do not register
  the SDK's exit handlers, whose shutdown can wait 30 s on a stuck collector).

Signal handlers can only be set from the main thread; elsewhere, and where a handler was
set outside Python, only the exit hook is installed. The flushes run in
threads started at install time (`FlushWorker`), so nothing is started inside a signal
handler or at interpreter shutdown, and a lock held by the interrupted code costs at most
the wait. SIGKILL cannot be caught: it loses at most one export interval.
"""
from __future__ import annotations

import atexit
import logging
import os
import signal
import threading
import time

from ..safety import INTERNAL_ERRORS

log = logging.getLogger("spectrace")

FINAL_FLUSH_S = 0.3
SIGNALS = (signal.SIGINT, signal.SIGTERM)


class FlushWorker:
    """A daemon thread that flushes one exporter (a metric reader or span processor)
    whenever asked; `flush` waits for it until a deadline."""

    def __init__(self, target) -> None:
        self.target = target
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
            try:
                self.target.force_flush(timeout_millis=int(FINAL_FLUSH_S * 1000))
            except Exception as exc:  # noqa: BLE001 - the worker must survive
                INTERNAL_ERRORS.record("final_flush", exc)
            with self._cond:
                self._done = generation
                self._cond.notify_all()

    def close(self) -> None:
        with self._cond:
            self._closed = True
            self._cond.notify_all()

    def request(self) -> int:
        with self._cond:
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


_STATE = _State()


def flush(timeout_s: float = FINAL_FLUSH_S) -> bool:
    """Export a snapshot now from every flush worker, waiting at most `timeout_s` in all;
    True when all finished in time. Never raises."""
    started = time.monotonic()
    deadline = started + timeout_s
    try:
        pending = [(w, w.request()) for w in list(_STATE.workers)]
        ok = all([w.wait(gen, deadline) for w, gen in pending])
    except Exception as exc:  # noqa: BLE001 - never in the way of a stopping process
        INTERNAL_ERRORS.record("final_flush", exc)
        ok = False
    _STATE.last_flush_s = time.monotonic() - started
    return ok


def _on_signal(signum, frame) -> None:
    flush()
    previous = _STATE.previous.get(signum, signal.SIG_DFL)
    if callable(previous):
        previous(signum, frame)
    elif previous != signal.SIG_IGN:
        # The default action (terminate), exactly as without spectrace.
        signal.signal(signum, signal.SIG_DFL)
        os.kill(os.getpid(), signum)
    # Ignored: the process carries on, as without spectrace; the snapshot is written
    # anyway, because the stop usually comes from elsewhere (a background job ignores
    # SIGINT, and SGLang's launcher SIGKILLs its children on it).


def _at_exit() -> None:
    flush()


def install(targets: list) -> list[str]:
    """Flush `targets` (metric readers, span processors) when the process is told to stop.
    Idempotent; a later call replaces the targets. Returns the signal names handled."""
    for w in _STATE.workers:
        w.close()  # an earlier telemetry's
    _STATE.workers = [FlushWorker(t) for t in targets]
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

