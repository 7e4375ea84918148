"""The clocks of step cost (`step_cost`): how a phase is timed without making the host wait
for the device, and when its intervals are added to the totals.

- `WallClock` (CPU runtimes): `time.perf_counter()` around the phase; the phase's work is
  done when the call returns.
- `CudaEventClock` (GPU runtimes): a pair of CUDA events on the runtime's current stream,
  read (`elapsed_time`) in the metric reader's thread only once `end.query()` is true.
  Never `synchronize()`, never `wait()`.

Both keep (started, ended, slot, load) intervals until their step has ended (`whole_steps`)
and then add them to `step_cost.PhaseTotals`; `load` is a target forward's (tokens,
requests), else 0. `ends(slot)` says whether an interval ends a step (`step_cost.ends_a_step`).
"""
from __future__ import annotations

import threading
import time
from collections import deque


def _ends_a_step():
    from .step_cost import ends_a_step
    return ends_a_step


class WallClock:
    """CPU: the phase is over when its call returns. The decode loop appends each
    interval's two clock readings; the collecting thread adds them up (`fold`)."""

    cuda = False
    MAX_PENDING = 4096  # intervals not yet folded; beyond this new ones are not kept

    def __init__(self, totals, ends=None) -> None:
        self.totals = totals
        self._ends = ends or _ends_a_step()
        self._pending: deque = deque()
        self._lock = threading.Lock()

    def start(self):
        return time.perf_counter()

    def stop(self, started, i: int, load=0) -> None:
        self.interval(started, time.perf_counter(), i, load)

    def interval(self, started, ended, i: int, load=0) -> None:
        """The phase `i` ran from `started` to `ended` (two `start()`s); `load`: a target
        forward's (tokens, requests), else 0."""
        if len(self._pending) < self.MAX_PENDING:
            self._pending.append((started, ended, i, load))

    def fold(self) -> None:
        """Add up the intervals of every measured step that has ended, in order (the
        phases of the step in flight wait for its end: see `whole_steps`)."""
        with self._lock:
            pending, add = self._pending, self.totals.add
            for _ in range(whole_steps(pending, self._ends)):
                started, ended, i, load = pending.popleft()
                add(i, ended - started, load)


class CudaEventClock:
    """GPU: a pair of CUDA events on the current stream per measured phase, read back only
    once the end event has completed (`query()`), in the collecting thread."""

    cuda = True
    MAX_PENDING = 4096  # pairs not yet complete; beyond this new ones are not measured

    def __init__(self, totals, event=None, ends=None) -> None:
        if event is None:
            import torch
            event = torch.cuda.Event
        self._event = event  # torch.cuda.Event (a test may pass its own recorder of calls)
        self.totals = totals
        self._ends = ends or _ends_a_step()
        self._pending: deque = deque()
        self._lock = threading.Lock()

    def start(self):
        if len(self._pending) >= self.MAX_PENDING:
            return None
        ev = self._event(enable_timing=True)
        ev.record()
        return ev

    def stop(self, started, i: int, load=0) -> None:
        if started is None:
            return
        end = self._event(enable_timing=True)
        end.record()
        self._pending.append((started, end, i, load))

    def interval(self, started, ended, i: int, load=0) -> None:
        """The phase `i` ran between the events `started` and `ended` (two `start()`s;
        either None when the pending pairs were full); `load` as `WallClock.interval`'s."""
        if started is not None and ended is not None:
            self._pending.append((started, ended, i, load))

    def fold(self) -> None:
        """Add the pairs of every measured step whose events have all completed, in order,
        whole steps only (as `whole_steps`); stop polling at the first pair not complete
        (never wait for the device)."""
        with self._lock:
            pending, whole = self._pending, 0
            for j in range(len(pending)):
                if not pending[j][1].query():
                    break
                if self._ends(pending[j][2]):
                    whole = j + 1
            for _ in range(whole):
                start, end, i, load = pending.popleft()
                self.totals.add(i, start.elapsed_time(end) / 1000.0, load)


def whole_steps(pending, ends) -> int:
    """How many of the pending (started, ended, slot, load) intervals, oldest first, go up
    to and including the last one of phase `STEP` or `BETWEEN`: a measured step appends its own
    interval last, after its phases, and the between-steps interval comes at the next
    step's start, before that step's phases; what follows the last of them is the step in
    flight. The totals take whole steps only, so a collection in the middle of a step
    never counts some of its phases without the rest or without the step (a phase's mean
    and the step's over different steps). The decode loop appends on the right meanwhile:
    read by index."""
    for j in range(len(pending) - 1, -1, -1):
        if ends(pending[j][2]):
            return j + 1
    return 0
