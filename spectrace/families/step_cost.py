"""What a speculative step costs, per phase (`names.PHASES`), batch-size bucket and number
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
interval, whatever the batch size. Which steps are measured is `StepCosts.due`'s (every Nth,
`SPECTRACE_STEP_COST_EVERY`).
"""
from __future__ import annotations

import threading
import time
from collections import deque
from typing import NamedTuple

from .. import names
from ..names import COUNTER, MetricSpec

MAX_BUCKET = 11  # 1, 2-3, 4-7, ..., 1024-2047, then "2048+"
MAX_K = 16       # draft steps beyond this are kept under K = MAX_K


def bucket_label(i: int) -> str:
    lo = 1 << i
    if i >= MAX_BUCKET:
        return f"{lo}+"
    return "1" if i == 0 else f"{lo}-{2 * lo - 1}"


BUCKETS = tuple(bucket_label(i) for i in range(MAX_BUCKET + 1))
BUCKET_INDEX = {label: i for i, label in enumerate(BUCKETS)}
PHASE_INDEX = {p: i for i, p in enumerate(names.PHASES)}
STEP, DRAFT, VERIFY, DRAFT_EXTEND, BETWEEN = range(len(names.PHASES))


def bucket_of(batch_size: int) -> int:
    """Bucket index of a batch size: 1 -> 0, 2-3 -> 1, 4-7 -> 2, ... (bounded)."""
    if batch_size < 1:
        return 0
    return min(batch_size.bit_length() - 1, MAX_BUCKET)


def slot(phase: int, bucket: int, k: int) -> int:
    """Index into `PhaseTotals`' lists."""
    return (phase * (MAX_BUCKET + 1) + bucket) * (MAX_K + 1) + min(max(k, 0), MAX_K)


SLOTS = len(names.PHASES) * (MAX_BUCKET + 1) * (MAX_K + 1)
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
                yield (PhaseKey(names.PHASES[phase], BUCKETS[b], k), self.seconds[i],
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
    verify's end to the step's end; `StepCosts.boundary`); None otherwise. From the
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


# -- the family: metrics, the measured step's hooks, the totals' observations ------------------
SPEC_PHASE_TIME = MetricSpec(
    "spectrace.spec.phase_time", COUNTER, "s",
    "Measured time of sampled speculative steps, by `phase` (step, draft, verify, "
    "draft_extend, between_steps), batch-size bucket and draft steps K: wall time on the "
    "CPU, CUDA events on a GPU (read once complete, never waited on).",
    (names.ATTR_PHASE, names.ATTR_BATCH_BUCKET, names.ATTR_NUM_STEPS), counted_once=True)
SPEC_PHASE_TIME_SQUARES = MetricSpec(
    "spectrace.spec.phase_time_squares", COUNTER, "{s2}",
    "Sum of squared phase times (seconds squared), for the spread of each mean.",
    (names.ATTR_PHASE, names.ATTR_BATCH_BUCKET, names.ATTR_NUM_STEPS), counted_once=True)
SPEC_PHASE_SAMPLES = MetricSpec(
    "spectrace.spec.phase_samples", COUNTER, "{sample}",
    "Phases measured (the denominator of spectrace.spec.phase_time).",
    (names.ATTR_PHASE, names.ATTR_BATCH_BUCKET, names.ATTR_NUM_STEPS), counted_once=True)
METRICS = (SPEC_PHASE_TIME, SPEC_PHASE_TIME_SQUARES, SPEC_PHASE_SAMPLES)


class StepCosts:
    """Step cost in one process: which steps are measured (every `step_cost_every`th), the
    measured step in flight (`StepInFlight.cost`), its phases, the time between steps, and
    the totals the three metrics read."""

    def __init__(self, cfg, inflight) -> None:
        self.cfg = cfg
        self.inflight = inflight
        self.totals = PhaseTotals()
        self._countdown = 0
        self._clocks: dict[bool, object] = {}
        self._lock = threading.Lock()  # one fold-and-read of the totals at a time
        self._reads = threading.local()  # per collecting thread: see `_observe`

    def register(self, meter, scope: dict) -> None:
        from .instruments import observe
        for field, spec in enumerate(METRICS, start=1):
            observe(meter, spec, lambda field=field: self._observe(field), scope)

    # -- hot path -----------------------------------------------------------------------
    def due(self) -> bool:
        """Count a step towards the next measured one; True when this one is measured (a
        hook asks this before it reads what `start` needs)."""
        every = self.cfg.step_cost_every
        if not every:
            return False
        n = self._countdown
        if n > 0:
            self._countdown = n - 1
            return False
        self._countdown = every - 1
        return True

    def start(self, worker, batch_size: int, on_cuda: bool) -> StepCost:
        """Start measuring a step `due` chose: the `StepCost` in flight. `worker`: what
        holds the step's K (`speculative_num_steps`)."""
        clock = self._clocks.get(on_cuda)
        if clock is None:
            clock = self._clocks[on_cuda] = clock_for(self.totals, on_cuda)
        cost = self.inflight.cost = StepCost(clock, bucket_of(batch_size), worker, clock.start())
        return cost

    def measuring(self) -> StepCost | None:
        """The measured step in flight, if any."""
        return self.inflight.cost

    def abandon(self) -> None:
        """The step in flight is not measured after all (it ended without a result)."""
        self.inflight.cost = None

    def end(self, cost: StepCost) -> None:
        """The measured step is over: its whole time, the draft-extend phase where the
        step's phases are told apart by boundaries (it runs from verify's end to the
        step's end), and (CPU) when it ended."""
        self.inflight.cost = None
        clock = cost.clock
        now = clock.start()
        row = cost.row
        if row >= 0:
            clock.interval(cost.mark, now, row + DRAFT_EXTEND * PHASE_STRIDE)
        else:
            row = slot(0, cost.bucket, cost.worker.speculative_num_steps)
        clock.interval(cost.started, now, row)  # STEP is phase 0
        if not clock.cuda:
            self.inflight.last_end = (now, row)

    def boundary(self, phase: int) -> None:
        """In the measured step in flight (if any), the phase `phase` ends now; it began at
        the last boundary, or at the step's start (SGLang v2's verify hook: the draft phase
        ends when verify starts, the verify phase when it returns; `end` closes the
        draft-extend phase after it). The step's K is read at its first boundary, once
        SGLang's adaptive speculation has set it for the step."""
        cost = self.inflight.cost
        if cost is None:
            return
        now = cost.clock.start()
        if cost.row < 0:
            began = cost.started
            cost.row = slot(0, cost.bucket, cost.worker.speculative_num_steps)
        else:
            began = cost.mark
        cost.clock.interval(began, now, cost.row + phase * PHASE_STRIDE)
        cost.mark = now

    def start_phase(self, phase: int, span=None) -> PhaseCost | None:
        """A phase (`DRAFT`, ...) of the step in flight starts: its `PhaseCost`, timed when
        the step is measured, carrying `span` (the phase's child span when the step is
        sampled as spans); None when neither."""
        cost = self.inflight.cost
        if cost is None:
            return None if span is None else PhaseCost(span, None, -1)
        return PhaseCost(span, cost.clock.start(), slot(
            phase, cost.bucket, cost.worker.speculative_num_steps))

    def stop_phase(self, ctx: PhaseCost) -> None:
        """The phase `start_phase` timed is over (not counted when its step ended first)."""
        if ctx.slot >= 0:
            cost = self.inflight.cost
            if cost is not None:
                cost.clock.stop(ctx.started, ctx.slot)

    def step_starts(self, speculative: bool) -> None:
        """A step starts: a speculative one after a measured CPU step adds the time between
        them; one that is not speculative (a prefill) means there is none to add."""
        inflight = self.inflight
        if inflight.last_end is None:
            return
        if not speculative:
            inflight.last_end = None
            return
        t, row = inflight.last_end
        inflight.last_end = None
        self._clocks[False].interval(t, time.perf_counter(), row + BETWEEN * PHASE_STRIDE)

    # -- collection ---------------------------------------------------------------------
    def rows(self) -> list:
        """(PhaseKey, seconds, squared seconds, samples) of every (phase, bucket, K)
        measured, with what the clocks still held folded in (in the caller's thread; one
        caller at a time, so each row's three figures are of the same intervals)."""
        with self._lock:
            for clock in list(self._clocks.values()):
                clock.fold()
            return list(self.totals.items())

    def _observe(self, field: int):
        """One field of the rows (1 seconds, 2 squares, 3 samples) for its instrument. The
        three instruments of one collection read one snapshot, taken by whichever of them
        the collecting thread calls first: folded separately, a step the decode loop was
        in the middle of would count in the samples but not the seconds (a mean too low
        by a step's share)."""
        from opentelemetry.metrics import Observation
        reads = self._reads
        if field not in getattr(reads, "unread", ()):
            reads.items, reads.unread = self.rows(), {1, 2, 3}
        reads.unread.discard(field)
        return [Observation(item[field], {names.ATTR_PHASE: key.phase,
                                          names.ATTR_BATCH_BUCKET: key.bucket,
                                          names.ATTR_NUM_STEPS: key.num_steps})
                for item in reads.items for key in (item[0],)]
