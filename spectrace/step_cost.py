"""What a speculative step costs, per phase (`signals.PHASES`), batch-size bucket and number
of draft steps K, measured without ever making the host wait for the device.

One clock measures every phase, picked once per worker from where its batch lives:

- `WallClock` (CPU runtimes): `time.perf_counter()` around the phase; the phase's work is
  done when the call returns. The pair of readings is kept and added up at collection
  time, as the events are.
- `CudaEventClock` (GPU runtimes): the call only launches kernels, so wall time says little.
  A sampled phase records a CUDA event on the runtime's current stream before and after it;
  the pair is kept and read (`elapsed_time`) at collection time, in the metric reader's
  thread, only once `end.query()` is true. Never `synchronize()`, never `wait()`.

Both fold their intervals into the same `PhaseTotals`: flat lists of seconds, squared
seconds and samples indexed by (phase, bucket, K), so the decode loop appends one tuple per
interval, whatever the batch size. Which steps are measured is the Recorder's (every Nth,
`SPECTRACE_STEP_COST_EVERY`).
"""
from __future__ import annotations

import threading
import time
from collections import deque
from typing import NamedTuple

from . import signals

MAX_BUCKET = 11  # 1, 2-3, 4-7, ..., 1024-2047, then "2048+"
MAX_K = 16       # draft steps beyond this are kept under K = MAX_K


def bucket_label(i: int) -> str:
    lo = 1 << i
    if i >= MAX_BUCKET:
        return f"{lo}+"
    return "1" if i == 0 else f"{lo}-{2 * lo - 1}"


BUCKETS = tuple(bucket_label(i) for i in range(MAX_BUCKET + 1))
BUCKET_INDEX = {label: i for i, label in enumerate(BUCKETS)}
PHASE_INDEX = {p: i for i, p in enumerate(signals.PHASES)}
STEP, DRAFT, VERIFY, DRAFT_EXTEND, BETWEEN = range(len(signals.PHASES))


def bucket_of(batch_size: int) -> int:
    """Bucket index of a batch size: 1 -> 0, 2-3 -> 1, 4-7 -> 2, ... (bounded)."""
    if batch_size < 1:
        return 0
    return min(batch_size.bit_length() - 1, MAX_BUCKET)


def slot(phase: int, bucket: int, k: int) -> int:
    """Index into `PhaseTotals`' lists."""
    return (phase * (MAX_BUCKET + 1) + bucket) * (MAX_K + 1) + min(max(k, 0), MAX_K)


SLOTS = len(signals.PHASES) * (MAX_BUCKET + 1) * (MAX_K + 1)
PHASE_STRIDE = (MAX_BUCKET + 1) * (MAX_K + 1)  # slot(p, b, k) = slot(0, b, k) + p * this


class PhaseKey(NamedTuple):
    phase: str
    bucket: str
    num_steps: int


class PhaseTotals:
    """Seconds, squared seconds and samples per (phase, bucket, K): plain lists, preallocated."""

    def __init__(self) -> None:
        self.seconds = [0.0] * SLOTS
        self.squares = [0.0] * SLOTS
        self.samples = [0] * SLOTS

    def add(self, i: int, seconds: float) -> None:
        self.seconds[i] += seconds
        self.squares[i] += seconds * seconds
        self.samples[i] += 1

    def items(self):
        """(PhaseKey, seconds, squares, samples) of every slot measured."""
        nb, nk = MAX_BUCKET + 1, MAX_K + 1
        for i, n in enumerate(list(self.samples)):
            if n:
                phase, rest = divmod(i, nb * nk)
                b, k = divmod(rest, nk)
                yield (PhaseKey(signals.PHASES[phase], BUCKETS[b], k), self.seconds[i],
                       self.squares[i], n)


class WallClock:
    """CPU: the phase is over when its call returns. The decode loop appends each
    interval's two clock readings; the collecting thread adds them up (`fold`)."""

    cuda = False
    MAX_PENDING = 4096  # intervals not yet folded; beyond this new ones are not kept

    def __init__(self, totals: PhaseTotals) -> None:
        self.totals = totals
        self._pending: deque = deque()
        self._lock = threading.Lock()

    def start(self):
        return time.perf_counter()

    def stop(self, started, i: int) -> None:
        self.interval(started, time.perf_counter(), i)

    def interval(self, started, ended, i: int) -> None:
        """The phase `i` ran from `started` to `ended` (two `start()`s)."""
        if len(self._pending) < self.MAX_PENDING:
            self._pending.append((started, ended, i))

    def fold(self) -> None:
        """Add up the intervals of every measured step that has ended, in order (the
        phases of the step in flight wait for its end: see `whole_steps`)."""
        with self._lock:
            pending, add = self._pending, self.totals.add
            for _ in range(whole_steps(pending)):
                started, ended, i = pending.popleft()
                add(i, ended - started)


class CudaEventClock:
    """GPU: a pair of CUDA events on the current stream per measured phase, read back only
    once the end event has completed (`query()`), in the collecting thread."""

    cuda = True
    MAX_PENDING = 4096  # pairs not yet complete; beyond this new ones are not measured

    def __init__(self, totals: PhaseTotals, event=None) -> None:
        if event is None:
            import torch
            event = torch.cuda.Event
        self._event = event  # torch.cuda.Event (a test may pass its own recorder of calls)
        self.totals = totals
        self._pending: deque = deque()
        self._lock = threading.Lock()

    def start(self):
        if len(self._pending) >= self.MAX_PENDING:
            return None
        ev = self._event(enable_timing=True)
        ev.record()
        return ev

    def stop(self, started, i: int) -> None:
        if started is None:
            return
        end = self._event(enable_timing=True)
        end.record()
        self._pending.append((started, end, i))

    def interval(self, started, ended, i: int) -> None:
        """The phase `i` ran between the events `started` and `ended` (two `start()`s;
        either None when the pending pairs were full)."""
        if started is not None and ended is not None:
            self._pending.append((started, ended, i))

    def fold(self) -> None:
        """Add the pairs of every measured step whose events have all completed, in order,
        whole steps only (as `whole_steps`); stop polling at the first pair not complete
        (never wait for the device)."""
        with self._lock:
            pending, whole = self._pending, 0
            for j in range(len(pending)):
                if not pending[j][1].query():
                    break
                if ends_a_step(pending[j][2]):
                    whole = j + 1
            for _ in range(whole):
                start, end, i = pending.popleft()
                self.totals.add(i, start.elapsed_time(end) / 1000.0)


def whole_steps(pending) -> int:
    """How many of the pending (started, ended, slot) intervals, oldest first, go up to and
    including the last one of phase `STEP` or `BETWEEN`: a measured step appends its own
    interval last, after its phases, and the between-steps interval comes at the next
    step's start, before that step's phases; what follows the last of them is the step in
    flight. The totals take whole steps only, so a collection in the middle of a step
    never counts some of its phases without the rest or without the step (a phase's mean
    and the step's over different steps). The decode loop appends on the right meanwhile:
    read by index."""
    for j in range(len(pending) - 1, -1, -1):
        if ends_a_step(pending[j][2]):
            return j + 1
    return 0


def ends_a_step(i: int) -> bool:
    """The interval in slot `i` is a step's own (`STEP`) or the time after it (`BETWEEN`)."""
    return i < PHASE_STRIDE or i >= BETWEEN * PHASE_STRIDE


def clock_for(totals: PhaseTotals, on_cuda: bool):
    return CudaEventClock(totals) if on_cuda else WallClock(totals)


class StepCost:
    """A measured step in flight: its clock, its bucket, its worker (whose
    `speculative_num_steps`, read when each phase ends, is the step's K: SGLang's adaptive
    speculation sets it inside the step), when it started, and `mark`: where the phase in
    flight began, for a worker whose phases are told apart by boundaries rather than wrap
    points of their own (SGLang v2: draft until verify starts, verify, draft-extend from
    verify's end to the step's end; `Recorder.phase_boundary`); None otherwise. From the
    first boundary on, `row` is the step's `slot(0, bucket, K)`, K read there once (-1
    before)."""

    __slots__ = ("clock", "bucket", "worker", "started", "mark", "row")

    def __init__(self, clock, bucket: int, worker, started) -> None:
        self.clock = clock
        self.bucket = bucket
        self.worker = worker
        self.started = started
        self.mark = None
        self.row = -1


class PhaseCost(NamedTuple):
    """A measured phase in flight (its child span too, when the step is sampled as spans)."""

    span: object
    started: object
    slot: int
