"""What a speculative step costs, per phase (`names.PHASES`), batch-size bucket and number
of draft steps K, measured without ever making the host wait for the device.

One clock (`clocks`) measures every phase, picked once per worker from where its batch lives:

- `WallClock` (CPU runtimes): `time.perf_counter()` around the phase; the phase's work is
  done when the call returns. The pair of readings is kept and added up at collection
  time, as the events are.
- `CudaEventClock` (GPU runtimes): the call only launches kernels, so wall time says little.
  A sampled phase records a CUDA event on the runtime's current stream before and after it;
  the pair is kept and read (`elapsed_time`) at collection time, in the metric reader's
  thread, only once `end.query()` is true. Never `synchronize()`, never `wait()`.

Both fold their intervals into the same `PhaseTotals`: flat lists of seconds, squared
seconds and samples indexed by (phase, bucket, K), so the decode loop appends one tuple per
interval, whatever the batch size. The target's forward inside verify (`FORWARD`) also
carries the target tokens it processed and its step's requests, summed (tokens also squared
and times the seconds: a least-squares fit of forward cost against tokens, `cost_model`). Which
steps are measured is `StepCosts.due`'s (every Nth, `SPECTRACE_STEP_COST_EVERY`).
"""
from __future__ import annotations

import threading
import time
from typing import NamedTuple

from .. import names
from ..names import COUNTER, MetricSpec
from .clocks import CudaEventClock, WallClock

MAX_BUCKET = 11  # 1, 2-3, 4-7, ..., 1024-2047, then "2048+"
MAX_K = 16       # draft steps beyond this are kept under K = MAX_K
# A target forward outside the speculative steps (a prefill chunk; vLLM's first decode after
# it) joins the forward-cost fit, under K = 0, when it is a short chunk: at most this many
# new tokens after at most this many already in its requests' context. The advisor's plain
# step is a forward of B tokens (the batch), its verify one of B x (K + 1): a line through
# much longer forwards would misplace them (on a GPU those are compute-bound, and their
# attention over a long prompt grows with it), so long chunks are left out, not modelled.
PLAIN_FORWARD_TOKENS = 256


def bucket_label(i: int) -> str:
    lo = 1 << i
    if i >= MAX_BUCKET:
        return f"{lo}+"
    return "1" if i == 0 else f"{lo}-{2 * lo - 1}"


BUCKETS = tuple(bucket_label(i) for i in range(MAX_BUCKET + 1))
BUCKET_INDEX = {label: i for i, label in enumerate(BUCKETS)}
PHASE_INDEX = {p: i for i, p in enumerate(names.PHASES)}
STEP, DRAFT, VERIFY, DRAFT_EXTEND, BETWEEN, FORWARD = range(len(names.PHASES))


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


class PhaseRow(NamedTuple):
    """One (phase, bucket, K) measured: its sums. The token and request sums are the
    target's forward's only (`FORWARD`); 0 for the other phases."""

    key: PhaseKey
    seconds: float
    squares: float
    samples: int
    tokens: float = 0
    tokens_squares: float = 0
    time_tokens: float = 0
    requests: float = 0


class PhaseTotals:
    """Seconds, squared seconds and samples per (phase, bucket, K), and the forward's tokens
    (their sum, squares and product with the seconds) and requests: plain lists,
    preallocated."""

    def __init__(self) -> None:
        self.seconds = [0.0] * SLOTS
        self.squares = [0.0] * SLOTS
        self.samples = [0] * SLOTS
        self.tokens = [0] * SLOTS
        self.tokens_squares = [0] * SLOTS
        self.time_tokens = [0.0] * SLOTS
        self.requests = [0] * SLOTS

    def add(self, i: int, seconds: float, load=0) -> None:
        """`load`: (tokens, requests) of a target forward, else 0."""
        self.seconds[i] += seconds
        self.squares[i] += seconds * seconds
        self.samples[i] += 1
        if load:
            tokens, requests = load
            self.tokens[i] += tokens
            self.tokens_squares[i] += tokens * tokens
            self.time_tokens[i] += seconds * tokens
            self.requests[i] += requests

    def items(self):
        """A `PhaseRow` for every slot measured."""
        nb, nk = MAX_BUCKET + 1, MAX_K + 1
        for i, n in enumerate(list(self.samples)):
            if n:
                phase, rest = divmod(i, nb * nk)
                b, k = divmod(rest, nk)
                yield PhaseRow(PhaseKey(names.PHASES[phase], BUCKETS[b], k), self.seconds[i],
                               self.squares[i], n, self.tokens[i], self.tokens_squares[i],
                               self.time_tokens[i], self.requests[i])


def ends_a_step(i: int) -> bool:
    """The interval in slot `i` is a step's own (`STEP`) or the time after it (`BETWEEN`)."""
    return i < PHASE_STRIDE or BETWEEN * PHASE_STRIDE <= i < FORWARD * PHASE_STRIDE


def clock_for(totals: PhaseTotals, on_cuda: bool):
    return (CudaEventClock(totals, ends=ends_a_step) if on_cuda
            else WallClock(totals, ends_a_step))


class StepCost:
    """A measured step in flight: its clock, batch size and bucket, its worker (whose
    `speculative_num_steps`, read when each phase ends, is the step's K: SGLang's adaptive
    speculation sets it inside the step), when it started, and `mark`: where the phase in
    flight began when phases are told apart by boundaries (SGLang v2: `StepCosts.boundary`);
    None otherwise. From the first boundary on, `row` is the step's `slot(0, bucket, K)`, K
    read there once (-1 before). `forward`: the target's forward in flight when another
    hook than the one that started it ends it (vLLM MRV2: `ForwardCost`)."""

    __slots__ = ("clock", "bucket", "size", "worker", "started", "mark", "row", "forward")

    def __init__(self, clock, size: int, worker, started) -> None:
        self.clock = clock
        self.size = size
        self.bucket = bucket_of(size)
        self.worker = worker
        self.started = started
        self.mark = None
        self.row = -1
        self.forward = None


class PlainForward(NamedTuple):
    """A target forward outside any speculative step in flight (`StepCosts.start_plain_forward`)."""
    clock: object
    started: object
    tokens: int
    requests: int


class PhaseCost(NamedTuple):
    """A measured phase in flight (its child span too, when the step is sampled as spans)."""
    span: object
    started: object
    slot: int


class ForwardCost(NamedTuple):
    """The target's forward in flight inside a measured step's verify."""
    cost: StepCost
    started: object
    tokens: int


# -- the family: metrics, the measured step's hooks, the totals' observations ------------------
_ATTRS = (names.ATTR_PHASE, names.ATTR_BATCH_BUCKET, names.ATTR_NUM_STEPS)


def _sum(name: str, unit: str, description: str) -> MetricSpec:
    return MetricSpec(f"spectrace.spec.{name}", COUNTER, unit, description, _ATTRS,
                      counted_once=True)


SPEC_PHASE_TIME = _sum(
    "phase_time", "s", "Measured time of sampled speculative steps, by `phase` (step, "
    "draft, verify, draft_extend, between_steps, target_forward), batch-size bucket and draft "
    "steps K: wall time on the CPU, CUDA events on a GPU (read once complete, never waited on).")
SPEC_PHASE_TIME_SQUARES = _sum("phase_time_squares", "{s2}", "Sum of squared phase times "
                               "(seconds squared), for the spread of each mean.")
SPEC_PHASE_SAMPLES = _sum("phase_samples", "{sample}",
                          "Phases measured (the denominator of spectrace.spec.phase_time).")
SPEC_PHASE_TOKENS = _sum(
    "phase_tokens", "{token}", "Target tokens processed by the measured target forwards "
    "inside verify (phase target_forward: requests x (K + 1) for chain drafting) and by the "
    "short plain forwards outside the steps (K = 0: prefill chunks), for the fit of forward "
    "cost against tokens (docs/advisor.md).")
SPEC_PHASE_TOKENS_SQUARES = _sum("phase_tokens_squares", "{token2}", "Sum of the squared "
                                 "token counts of the measured target forwards.")
SPEC_PHASE_TIME_TOKENS = _sum("phase_time_tokens", "{s.token}", "Sum of each measured target "
                              "forward's seconds times its tokens (the fit's cross term).")
SPEC_PHASE_REQUESTS = _sum("phase_requests", "{request}", "Requests in the steps of the "
                           "measured target forwards (their batch sizes summed): the batch a "
                           "plain decode step would run.")
METRICS = (SPEC_PHASE_TIME, SPEC_PHASE_TIME_SQUARES, SPEC_PHASE_SAMPLES, SPEC_PHASE_TOKENS,
           SPEC_PHASE_TOKENS_SQUARES, SPEC_PHASE_TIME_TOKENS, SPEC_PHASE_REQUESTS)
TOKEN_FIELDS = 4  # METRICS from this field on are the forward's token sums


class StepCosts:
    """Step cost in one process: which steps are measured (every `step_cost_every`th), the
    measured step in flight (`StepInFlight.cost`), its phases, the time between steps, and
    the totals its metrics read."""

    def __init__(self, cfg, inflight) -> None:
        self.cfg = cfg
        self.inflight = inflight
        self.totals = PhaseTotals()
        self._countdown = 0
        self._clocks: dict[bool, object] = {}
        self._lock = threading.Lock()  # one fold-and-read of the totals at a time
        from .instruments import CollectionReads
        self._reads = CollectionReads(self.rows)  # see `_observe`

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
        self.inflight.cost = StepCost(clock, batch_size, worker, clock.start())
        return self.inflight.cost

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

    def start_forward(self, tokens: int) -> ForwardCost | None:
        """The target's forward over `tokens` target tokens starts inside verify, in the
        measured step in flight (None when no step is measured)."""
        cost = self.inflight.cost
        return None if cost is None else ForwardCost(cost, cost.clock.start(), tokens)

    def stop_forward(self, ctx: ForwardCost) -> None:
        """The forward `start_forward` timed is over: filed under its step's bucket and K
        (not counted when the step ended first)."""
        cost = ctx.cost
        if self.inflight.cost is not cost:
            return
        row = cost.row if cost.row >= 0 else slot(0, cost.bucket,
                                                  cost.worker.speculative_num_steps)
        cost.clock.stop(ctx.started, row + FORWARD * PHASE_STRIDE, (ctx.tokens, cost.size))

    def start_plain_forward(self, tokens: int, context: int, requests: int,
                            on_cuda: bool) -> PlainForward | None:
        """A target forward of `tokens` new tokens outside any step in flight, its
        `requests` holding `context` tokens before it: timed as a point of the forward's cost
        curve when it is a short chunk (`PLAIN_FORWARD_TOKENS`), so that a server that only
        ever verifies at one batch size and K still gets a fit and an interval, not a bound
        (issue 49). None when it is not timed."""
        if (not self.cfg.step_cost_every or not 0 < tokens <= PLAIN_FORWARD_TOKENS
                or context > PLAIN_FORWARD_TOKENS or self.inflight.cost is not None):
            return None
        clock = self._clocks.get(on_cuda)
        if clock is None:
            clock = self._clocks[on_cuda] = clock_for(self.totals, on_cuda)
        return PlainForward(clock, clock.start(), tokens, requests)

    @staticmethod
    def stop_plain_forward(ctx: PlainForward) -> None:
        """The forward `start_plain_forward` timed is over: filed under the target forward's
        phase at K = 0 (no draft token) and its requests' bucket."""
        ctx.clock.stop(ctx.started, slot(FORWARD, bucket_of(ctx.requests), 0),
                       (ctx.tokens, ctx.requests))

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
    def rows(self) -> list[PhaseRow]:
        """A `PhaseRow` of every (phase, bucket, K) measured, with what the clocks still
        held folded in (in the caller's thread; one caller at a time, so each row's
        figures are of the same intervals)."""
        with self._lock:
            for clock in list(self._clocks.values()):
                clock.fold()
            return list(self.totals.items())

    def _observe(self, field: int):
        """One field of the rows (1 seconds, 2 squares, 3 samples, 4-7 the forward's sums,
        of its rows only) for its instrument. The instruments of one collection read one
        snapshot, taken by whichever of them the collecting thread calls first: folded
        separately, a step the decode loop was in the middle of would count in the samples
        but not the seconds (a mean too low by a step's share)."""
        from opentelemetry.metrics import Observation
        return [Observation(item[field], {names.ATTR_PHASE: key.phase,
                                          names.ATTR_BATCH_BUCKET: key.bucket,
                                          names.ATTR_NUM_STEPS: key.num_steps})
                for item in self._reads.take(field) for key in (item[0],)
                if field < TOKEN_FIELDS or item.tokens]
