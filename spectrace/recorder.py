"""Per-process aggregation and reporting: the one place that turns observations into
OpenTelemetry instruments, spans and findings (names from `signals`).

The decode loop only appends references or bumps plain ints here. The work that grows with
batch size (folding accept-count lists into totals) happens when the metric reader
collects, in its own thread, through observable instruments.
"""
from __future__ import annotations

import logging
import random
import threading
import time
from collections import Counter, deque
from typing import Any, NamedTuple

from opentelemetry import trace as otel_trace
from opentelemetry.metrics import CallbackOptions, Observation

from . import signals, step_cost
from .config import Config
from .findings import Finding
from .safety import DROPPED, INTERNAL_ERRORS
from .export.providers import ProcessTelemetry

log = logging.getLogger("spectrace")

EVENTS_PER_CODE = 20  # findings written in full per code and process; the rest are counted
MAX_PENDING_SPANS = 4096  # sampled requests waiting for `emit_request_spans`; more are dropped


class PositionCounts(NamedTuple):
    """One step's counts as a runtime that aggregates them itself hands them over (vLLM's
    `SpecDecodingStats`): request-steps, draft tokens, and per position the request-steps
    that accepted it (so `per_position[c - 1] - per_position[c]` accepted exactly c)."""

    drafts: int
    draft_tokens: int
    per_position: list


class AcceptanceTotals:
    """Folds the accept-count lists the runtime hands over (correct drafts per request,
    bonus excluded), or its own per-step `PositionCounts`, into totals. `add` /
    `add_positions` keep a reference (O(1)); `fold` does the counting."""

    def __init__(self) -> None:
        self._pending: deque = deque()
        self._lock = threading.Lock()
        self.drafts = 0
        self.draft_tokens = 0
        self.accepted = 0
        self.per_position: list[int] = []
        self.offered_per_position: list[int] = []  # request-steps that drafted position p
        self.length_counts: dict[int, int] = {}
        # request-steps by (context bucket, accept length), and accepted tokens by bucket
        self.by_context: dict[tuple[str, int], int] = {}
        self.accepted_by_context: dict[str, int] = {}
        self._with_lengths: list = []  # (counts, steps, sequence lengths) of this fold

    def add(self, correct_per_request, num_steps: int, seq_lens=None) -> None:
        """`seq_lens`: the requests' sequence lengths as the runtime holds them on the CPU
        (a list, CPU tensor or array, kept by reference), or None when it holds none."""
        if seq_lens is None:
            self._pending.append((correct_per_request, num_steps))
        else:
            self._pending.append((correct_per_request, num_steps, seq_lens))

    def add_positions(self, counts: PositionCounts) -> None:
        self._pending.append((counts, None))

    def prepare(self, num_steps: int) -> None:
        """Create the per-position and accept-length series at 0 before the first step,
        so that `rate()` sees the first increment."""
        with self._lock:
            if len(self.per_position) < num_steps:
                self.per_position.extend([0] * (num_steps - len(self.per_position)))
            for length in range(1, num_steps + 2):
                self.length_counts.setdefault(length, 0)

    def fold(self) -> None:
        """Count everything kept since the last fold, in bulk: the lists of one
        speculative-step setting are packed into one `bytearray` (accept counts are small
        non-negative ints) and counted in one pass (`numpy.bincount`): about 15 ns a
        request in all, against about 40 ns for a `Counter` per list. Anything that does
        not fit a byte is counted with a `Counter`, as before. Same totals either way."""
        with self._lock:
            groups: dict[int, tuple[bytearray, list]] = {}
            pending = self._pending
            with_lengths = self._with_lengths
            bad = None  # the first item that is not a list of counts: dropped alone
            while pending:
                item = pending.popleft()
                counts, steps = item[0], item[1]
                if isinstance(counts, PositionCounts):
                    self._fold_positions(counts)
                    continue
                group = groups.get(steps)
                if group is None:
                    group = groups[steps] = (bytearray(), [])
                try:
                    group[0].extend(counts)  # all or nothing: a bad value leaves it as it was
                except (TypeError, ValueError):
                    try:
                        group[1].extend([int(c) for c in counts])
                    except (TypeError, ValueError):
                        bad = bad or repr(counts)[:80]
                        continue
                if len(item) == 3:
                    with_lengths.append(item)
            for steps, (packed, other) in groups.items():
                n = len(packed) + len(other)
                if not n:
                    continue
                self.drafts += n
                self.draft_tokens += n * steps
                if len(self.per_position) < steps:
                    self.per_position.extend([0] * (steps - len(self.per_position)))
                self._offer(steps, n)
                tally = Counter(other)
                for c, k in _byte_counts(packed):
                    tally[c] += k
                for c, k in tally.items():
                    c = int(c)
                    self.accepted += c * k
                    self.length_counts[c + 1] = self.length_counts.get(c + 1, 0) + k
                    for p in range(min(c, len(self.per_position))):
                        self.per_position[p] += k
            if with_lengths:
                self._fold_context(with_lengths)
                with_lengths.clear()
        if bad is not None:  # after counting the rest: the caller's guard counts and logs it
            raise ValueError(f"accept counts handed over by the runtime are not a list of "
                             f"counts: {bad} (that step dropped, the others counted)")

    def _fold_context(self, items: list) -> None:
        """Count request-steps by (context bucket, accept length): per speculative-step
        setting, every step's counts and lengths concatenated, bucketed and counted in one
        `numpy.bincount` (per step only a list extend and an array view: the collecting
        thread holds the interpreter lock the decode loop needs). A step whose lengths do
        not match its counts goes to `unknown`."""
        import numpy
        from .detectors.context import BUCKETS, UNKNOWN, bucket_index
        nb = len(BUCKETS) + 1  # the last index: unknown
        groups: dict[int, tuple[list, list, list]] = {}  # counts, their lengths; unknown
        for counts, steps, lengths in items:
            try:
                lens = numpy.asarray(lengths).ravel()
                matched = lens.dtype.kind in "iuf" and lens.shape[0] == len(counts)
            except (TypeError, ValueError):
                matched = False
            group = groups.get(steps)
            if group is None:
                group = groups[steps] = ([], [], [])
            if matched:
                group[0].extend(counts)
                group[1].append(lens)
            else:
                group[2].extend(counts)
        names = BUCKETS + (UNKNOWN,)
        for steps, (cs, ls, unknown) in groups.items():
            steps = int(steps)
            width = steps + 1
            c = numpy.clip(numpy.asarray(cs + unknown, dtype=numpy.int64), 0, steps)
            b = numpy.full(c.shape, nb - 1, dtype=numpy.int64)
            if ls:
                b[:len(cs)] = bucket_index(numpy.concatenate(ls))
            tally = numpy.bincount(b * width + c, minlength=nb * width).reshape(nb, width)
            for bi, ci in zip(*numpy.nonzero(tally)):
                n = int(tally[bi, ci])
                key = (names[bi], int(ci) + 1)
                self.by_context[key] = self.by_context.get(key, 0) + n
                name = names[bi]
                self.accepted_by_context[name] = (self.accepted_by_context.get(name, 0)
                                                  + int(ci) * n)

    def _offer(self, steps: int, n: int) -> None:
        """`n` request-steps drafted positions 0 .. steps-1."""
        offered = self.offered_per_position
        if len(offered) < steps:
            offered.extend([0] * (steps - len(offered)))
        for p in range(steps):
            offered[p] += n

    def _fold_positions(self, counts: PositionCounts) -> None:
        per_pos = list(counts.per_position)
        if counts.drafts and counts.draft_tokens == counts.drafts * len(per_pos):
            self._offer(len(per_pos), counts.drafts)
        self.drafts += counts.drafts
        self.draft_tokens += counts.draft_tokens
        self.accepted += sum(per_pos)
        if len(self.per_position) < len(per_pos):
            self.per_position.extend([0] * (len(per_pos) - len(self.per_position)))
        reached = [counts.drafts] + per_pos + [0]  # request-steps that accepted >= c
        for c in range(len(per_pos) + 1):
            if c < len(per_pos):
                self.per_position[c] += per_pos[c]
            exactly = reached[c] - reached[c + 1]
            if exactly:
                self.length_counts[c + 1] = self.length_counts.get(c + 1, 0) + exactly


def _byte_counts(packed: bytearray) -> list[tuple[int, int]]:
    """(value, occurrences) of each byte value present."""
    if not packed:
        return []
    try:
        import numpy
    except ImportError:  # pragma: no cover - SGLang depends on numpy
        return [(v, packed.count(v)) for v in range(max(packed) + 1) if v in packed]
    counts = numpy.bincount(numpy.frombuffer(packed, dtype=numpy.uint8))
    return [(v, int(k)) for v, k in enumerate(counts.tolist()) if k]


class FinishedRequest(NamedTuple):
    """What a runtime says about a request when it finishes."""
    request_id: str
    verify_steps: int
    accepted_tokens: int
    correct_histogram: list  # request-steps by correct draft tokens (index), or None
    temperature: float | None
    top_k: int | None
    label: object = None  # the SPECTRACE_REQUEST_LABEL field's value, when one is set


class RequestTotals:
    """Finished requests: by sampling bucket, their request-steps by accept length; by
    their own mean accept length (and label value, `label_cap` set), a count. `add` keeps
    a reference; `fold` counts."""

    def __init__(self, label_cap: int | None = None) -> None:
        from .detectors.requests import LabelCap
        self._pending: deque = deque()
        self._lock = threading.Lock()
        self.by_sampling: dict[tuple[str, int], int] = {}
        # (mean-length bucket, label value or None) -> requests
        self.by_mean_length: dict[tuple[str, str | None], int] = {}
        self.labels = LabelCap(label_cap) if label_cap else None

    def add(self, r: FinishedRequest) -> None:
        self._pending.append(r)

    def fold(self) -> None:
        from .detectors.requests import label_text, request_bucket, sampling_bucket
        labels = self.labels
        with self._lock:
            while self._pending:
                r = self._pending.popleft()
                if r.verify_steps <= 0:
                    continue
                bucket = sampling_bucket(r.temperature, r.top_k)
                hist = r.correct_histogram or []
                if sum(hist) != r.verify_steps:  # no usable histogram: the mean only
                    hist = []
                for correct, n in enumerate(hist):
                    if n:
                        key = (bucket, correct + 1)
                        self.by_sampling[key] = self.by_sampling.get(key, 0) + n
                key = (request_bucket(1 + r.accepted_tokens / r.verify_steps),
                       None if labels is None else labels(label_text(r.label)))
                self.by_mean_length[key] = self.by_mean_length.get(key, 0) + 1


class AgreementTotals:
    """Per-position draft/target token agreement, from small count tensors computed on the
    device and copied without blocking; read only once their copy has completed."""

    def __init__(self) -> None:
        self._pending: deque = deque()
        self._lock = threading.Lock()
        self.drafts = 0
        self.per_position: list[int] = []

    def add(self, agree_counts_cpu, done_event, batch_size: int) -> None:
        self._pending.append((agree_counts_cpu, done_event, batch_size))

    def fold(self) -> None:
        with self._lock:
            while self._pending:
                counts, event, bs = self._pending[0]
                if event is not None and not event.query():
                    return  # copy still in flight: never wait for the device
                self._pending.popleft()
                values = counts.tolist()
                if len(self.per_position) < len(values):
                    self.per_position.extend([0] * (len(values) - len(self.per_position)))
                for p, v in enumerate(values):
                    self.per_position[p] += int(v)
                self.drafts += bs


class Recorder:
    """Everything one instrumented process reports. `counted`: whether this process counts
    its request-steps and draft passes once or is a copy of its group's rank 0
    (`spectrace.counting`); the points of every `counted_once` metric carry it."""

    def __init__(self, cfg: Config, tel: ProcessTelemetry,
                 counted: str = signals.COUNTED_ONCE) -> None:
        if counted not in (signals.COUNTED_ONCE, signals.COUNTED_COPY):
            raise ValueError(f"counted: expected {signals.COUNTED_ONCE!r} or "
                             f"{signals.COUNTED_COPY!r}, got {counted!r}")
        self.cfg = cfg
        self.tel = tel
        self.counted = counted
        self._scope = {signals.ATTR_COUNTED: counted}
        self.acceptance = AcceptanceTotals()
        self.agreement = AgreementTotals()
        self.requests = RequestTotals(cfg.request_label_cap if cfg.request_label else None)
        self.steps: dict[str, int] = {}
        self.passes: dict[tuple[str, int], int] = {}
        self.expected_width: dict[str, int] = {}
        self.draft_context: dict[str, float] = {}  # detectors.context.trained_context
        self._finding_counts: dict[str, int] = {}
        self._warned: set[str] = set()
        self._lock = threading.Lock()
        self.step_span = None  # the sampled step span in flight, if any
        self.tail_span = None  # its child span that ends with it (spans.verify_ends)
        self._request_spans: deque = deque()  # (finished at, FinishedRequest) to record
        self._spans_lock = threading.Lock()
        # Step cost (spectrace.step_cost): the totals, the measured step in flight, the
        # host time the last measured step ended (for the between-steps interval).
        self.phase_totals = step_cost.PhaseTotals()
        self.cost_step: step_cost.StepCost | None = None
        self.last_step_end: tuple | None = None  # (host time, slot(0, bucket, K))
        self._cost_countdown = 0
        self._clocks: dict[bool, object] = {}
        self._cost_lock = threading.Lock()  # one fold-and-read of the step costs at a time
        self._cost_reads = threading.local()  # per collecting thread: see `_phase_obs`
        self.topk: dict[str, int] = {}  # worker -> its draft's top-k
        self._rand = random.random
        m = tel.meter
        self._fc_bypass = _counter(m, signals.EAGLE3_FC_BYPASS)
        self._width_mismatch = _counter(m, signals.EAGLE3_WIDTH_MISMATCH)
        self._unused_keys = _counter(m, signals.EAGLE3_UNUSED_KEYS)
        self._unloaded = _counter(m, signals.EAGLE3_UNLOADED_PARAMS)
        self._findings = _counter(m, signals.FINDINGS)
        for counter in (self._fc_bypass, self._width_mismatch):
            counter.add(0, self._scope)  # exists from the start: healthy shows 0, not "No data"
        for counter in (self._unused_keys, self._unloaded):
            counter.add(0)
        for code, severity in signals.RUNTIME_FINDINGS.items():
            self._findings.add(0, {signals.ATTR_CODE: code, signals.ATTR_SEVERITY: severity})
        self._observe(signals.SPEC_STEPS, self._obs_steps)
        self._observe(signals.SPEC_DRAFTS, lambda: [Observation(self._acc().drafts)])
        self._observe(signals.SPEC_DRAFT_TOKENS, lambda: [Observation(self._acc().draft_tokens)])
        self._observe(signals.SPEC_ACCEPTED_TOKENS, lambda: [Observation(self._acc().accepted)])
        self._observe(signals.SPEC_ACCEPTED_PER_POSITION, lambda: [
            Observation(v, {signals.ATTR_POSITION: p})
            for p, v in enumerate(self._acc().per_position)])
        self._observe(signals.SPEC_ACCEPT_LENGTH, lambda: [
            Observation(v, {signals.ATTR_LENGTH: n})
            for n, v in sorted(self._acc().length_counts.items())])
        self._observe(signals.SPEC_ACCEPT_LENGTH_BY_CONTEXT, lambda: [
            Observation(v, {signals.ATTR_CONTEXT: b, signals.ATTR_LENGTH: n})
            for (b, n), v in sorted(self._acc().by_context.items())])
        self._observe(signals.SPEC_ACCEPTED_TOKENS_BY_CONTEXT, lambda: [
            Observation(v, {signals.ATTR_CONTEXT: b})
            for b, v in sorted(self._acc().accepted_by_context.items())])
        self._observe(signals.EAGLE3_DRAFT_CONTEXT, lambda: [
            Observation(v, {signals.ATTR_KIND: k}) for k, v in dict(self.draft_context).items()])
        self._observe(signals.SPEC_ACCEPT_LENGTH_BY_SAMPLING, lambda: [
            Observation(v, {signals.ATTR_SAMPLING: b, signals.ATTR_LENGTH: n})
            for (b, n), v in sorted(self._req().by_sampling.items())])
        self._observe(signals.SPEC_REQUESTS, self._obs_requests)
        self._observe(signals.SPEC_REQUEST_LABEL_OVERFLOW, lambda: [
            Observation(self._req().labels.overflow,
                        {signals.ATTR_REQUEST_LABEL_KEY: cfg.request_label})]
            if cfg.request_label else [])
        self._observe(signals.SPEC_AGREEMENT_DRAFTS, lambda: [Observation(self._agr().drafts)])
        self._observe(signals.SPEC_AGREEMENT_PER_POSITION, lambda: [
            Observation(v, {signals.ATTR_POSITION: p})
            for p, v in enumerate(self._agr().per_position)])
        self._observe(signals.EAGLE3_PASSES, lambda: [
            Observation(v, {signals.ATTR_PASS_KIND: k, signals.ATTR_WIDTH: w})
            for (k, w), v in dict(self.passes).items()])
        self._observe(signals.EAGLE3_EXPECTED_WIDTH, lambda: [
            Observation(v, {signals.ATTR_KIND: k}) for k, v in dict(self.expected_width).items()])
        self._observe(signals.SPEC_DRAFTS_PER_POSITION, lambda: [
            Observation(v, {signals.ATTR_POSITION: p})
            for p, v in enumerate(self._acc().offered_per_position)])
        self._observe(signals.SPEC_PHASE_TIME, lambda: self._phase_obs(1))
        self._observe(signals.SPEC_PHASE_TIME_SQUARES, lambda: self._phase_obs(2))
        self._observe(signals.SPEC_PHASE_SAMPLES, lambda: self._phase_obs(3))
        self._observe(signals.SPEC_TOPK, lambda: [
            Observation(v, {signals.ATTR_WORKER: w}) for w, v in dict(self.topk).items()])
        self._observe(signals.INTERNAL_ERRORS, lambda: [
            Observation(v, {signals.ATTR_HOOK: h})
            for h, v in dict(INTERNAL_ERRORS.counts).items()] or [Observation(0)])

    # -- observable plumbing ------------------------------------------------------------
    def _observe(self, spec: signals.MetricSpec, fn) -> None:
        scope = self._scope if spec.counted_once else None

        def callback(options: CallbackOptions):
            try:
                if scope is None:
                    return fn()
                return [Observation(o.value, {**(o.attributes or {}), **scope}) for o in fn()]
            except Exception as exc:  # noqa: BLE001
                INTERNAL_ERRORS.record(f"observe:{spec.name}", exc)
                return []
        make = (self.tel.meter.create_observable_counter if spec.kind == signals.COUNTER
                else self.tel.meter.create_observable_gauge)
        make(spec.name, callbacks=[callback], unit=spec.unit, description=spec.description)

    def _acc(self) -> AcceptanceTotals:
        try:
            self.acceptance.fold()
        except ValueError as exc:  # one bad step dropped, the rest counted: still observe
            INTERNAL_ERRORS.record("fold:acceptance", exc)
        return self.acceptance

    def _req(self) -> RequestTotals:
        self.requests.fold()
        try:
            self.emit_request_spans()
        except Exception as exc:  # noqa: BLE001 - the counts are observed all the same
            INTERNAL_ERRORS.record("emit:request_spans", exc)
        return self.requests

    def _agr(self) -> AgreementTotals:
        self.agreement.fold()
        return self.agreement

    def step_costs(self) -> list:
        """(PhaseKey, seconds, squared seconds, samples) of every (phase, bucket, K)
        measured, with what the clocks still held folded in (in the caller's thread; one
        caller at a time, so each row's three figures are of the same intervals)."""
        with self._cost_lock:
            for clock in list(self._clocks.values()):
                clock.fold()
            return list(self.phase_totals.items())

    def _phase_obs(self, field: int):
        """One field of the step costs (1 seconds, 2 squares, 3 samples) for its instrument.
        The three instruments of one collection read one snapshot, taken by whichever of
        them the collecting thread calls first: folded separately, a step the decode loop
        was in the middle of would count in the samples but not the seconds (a mean too
        low by a step's share)."""
        reads = self._cost_reads
        if field not in getattr(reads, "unread", ()):
            reads.items, reads.unread = self.step_costs(), {1, 2, 3}
        reads.unread.discard(field)
        return [Observation(item[field], {signals.ATTR_PHASE: key.phase,
                                          signals.ATTR_BATCH_BUCKET: key.bucket,
                                          signals.ATTR_NUM_STEPS: key.num_steps})
                for item in reads.items for key in (item[0],)]

    def _obs_requests(self):
        out = []
        for (b, label), v in sorted(self._req().by_mean_length.items(),
                                    key=lambda kv: (kv[0][0], kv[0][1] or "")):
            attrs = {signals.ATTR_REQUEST_LENGTH: b}
            if label is not None:
                attrs[signals.ATTR_REQUEST_LABEL] = label
            out.append(Observation(v, attrs))
        return out

    def _obs_steps(self):
        return [Observation(v, {signals.ATTR_WORKER: w}) for w, v in dict(self.steps).items()]

    # -- hot path -----------------------------------------------------------------------
    def begin_step(self, worker: str) -> bool:
        """Count one speculative step; True when it is sampled as a span."""
        steps = self.steps
        steps[worker] = steps.get(worker, 0) + 1
        r = self.cfg.step_sample_ratio
        return r > 0 and (r >= 1 or self._rand() < r)

    def request_finished(self, r: FinishedRequest) -> None:
        """A request finished: count it; keep a sampled one, with when it finished, for a
        span carrying the runtime's request id (so a request found in the runtime's
        traces or logs leads to its acceptance), which `emit_request_spans` records off
        the decode loop (a span costs tens of µs to make)."""
        self.requests.add(r)
        ratio = self.cfg.request_sample_ratio
        if r.verify_steps > 0 and ratio > 0 and (ratio >= 1 or self._rand() < ratio):
            if len(self._request_spans) < MAX_PENDING_SPANS:
                self._request_spans.append((time.time_ns(), r))
            else:
                DROPPED.add("spans")

    def emit_request_spans(self) -> None:
        """Record the sampled finished requests as spans that start and end when each
        finished: at every metric collection (the collecting thread), and before a final
        flush exports spans (`export.final_flush`)."""
        from .detectors.requests import label_text, sampling_bucket
        label = self.cfg.request_label
        with self._spans_lock:
            pending = self._request_spans
            while pending:
                t, r = pending.popleft()
                attrs = {
                    signals.SPAN_ATTR_REQUEST_ID: str(r.request_id),
                    signals.SPAN_ATTR_REQUEST_STEPS: r.verify_steps,
                    signals.SPAN_ATTR_REQUEST_ACCEPTED: r.accepted_tokens,
                    signals.SPAN_ATTR_REQUEST_MEAN_LENGTH: 1 + r.accepted_tokens / r.verify_steps,
                    signals.SPAN_ATTR_REQUEST_SAMPLING: sampling_bucket(r.temperature, r.top_k)}
                if label:
                    attrs[signals.SPAN_ATTR_REQUEST_LABEL] = label_text(r.label)
                self.tel.tracer.start_span(signals.SPAN_REQUEST, attributes=attrs,
                                           start_time=t).end(end_time=t)

    def begin_cost(self, worker, batch_size: int, on_cuda: bool):
        """Measure this step's cost (every `step_cost_every`th step): the `StepCost` in
        flight, also kept as `cost_step` for the phase hooks; None when not measured."""
        return self.start_cost(worker, batch_size, on_cuda) if self.cost_due() else None

    def cost_due(self) -> bool:
        """Count a step towards the next measured one; True when this one is measured (a
        hook asks this before it reads what `start_cost` needs)."""
        every = self.cfg.step_cost_every
        if not every:
            return False
        n = self._cost_countdown
        if n > 0:
            self._cost_countdown = n - 1
            return False
        self._cost_countdown = every - 1
        return True

    def start_cost(self, worker, batch_size: int, on_cuda: bool):
        """Start measuring a step `cost_due` chose: the `StepCost` in flight."""
        clock = self._clocks.get(on_cuda)
        if clock is None:
            clock = self._clocks[on_cuda] = step_cost.clock_for(self.phase_totals, on_cuda)
        cost = self.cost_step = step_cost.StepCost(
            clock, step_cost.bucket_of(batch_size), worker, clock.start())
        return cost

    def end_cost(self, cost) -> None:
        """The measured step is over: its whole time, the draft-extend phase where the
        step's phases are told apart by boundaries (it runs from verify's end to the
        step's end), and (CPU) when it ended."""
        self.cost_step = None
        clock = cost.clock
        now = clock.start()
        row = cost.row
        if row >= 0:
            clock.interval(cost.mark, now, row + step_cost.DRAFT_EXTEND * step_cost.PHASE_STRIDE)
        else:
            row = step_cost.slot(0, cost.bucket, cost.worker.speculative_num_steps)
        clock.interval(cost.started, now, row)  # STEP is phase 0
        if not clock.cuda:
            self.last_step_end = (now, row)

    def phase_boundary(self, phase: int) -> None:
        """In the measured step in flight (if any), the phase `phase` ends now; it began at
        the last boundary, or at the step's start (SGLang v2's verify hook: the draft phase
        ends when verify starts, the verify phase when it returns; `end_cost` closes the
        draft-extend phase after it). The step's K is read at its first boundary, once
        SGLang's adaptive speculation has set it for the step."""
        cost = self.cost_step
        if cost is None:
            return
        now = cost.clock.start()
        if cost.row < 0:
            began = cost.started
            cost.row = step_cost.slot(0, cost.bucket, cost.worker.speculative_num_steps)
        else:
            began = cost.mark
        cost.clock.interval(began, now, cost.row + phase * step_cost.PHASE_STRIDE)
        cost.mark = now

    def start_phase(self, phase: int, span=None):
        """A phase (`step_cost.DRAFT`, ...) of the step in flight starts: its `PhaseCost`,
        timed when the step is measured, carrying `span` (the phase's child span when the
        step is sampled as spans); None when neither. Both runtimes' phase hooks use it."""
        cost = self.cost_step
        if cost is None:
            return None if span is None else step_cost.PhaseCost(span, None, -1)
        return step_cost.PhaseCost(span, cost.clock.start(), step_cost.slot(
            phase, cost.bucket, cost.worker.speculative_num_steps))

    def stop_phase(self, ctx) -> None:
        """The phase `start_phase` timed is over (not counted when its step ended first)."""
        if ctx.slot >= 0:
            cost = self.cost_step
            if cost is not None:
                cost.clock.stop(ctx.started, ctx.slot)

    def between_steps(self) -> None:
        """At a decode step's start: the time outside the worker since the measured step
        before it ended (CPU clocks only; cleared by a prefill)."""
        t, row = self.last_step_end
        self.last_step_end = None
        self._clocks[False].interval(t, time.perf_counter(),
                                     row + step_cost.BETWEEN * step_cost.PHASE_STRIDE)

    def count_pass(self, kind: str, width: int) -> None:
        key = (kind, width)
        self.passes[key] = self.passes.get(key, 0) + 1

    # -- findings -----------------------------------------------------------------------
    def finding(self, f: Finding, span_attributes: dict[str, Any] | None = None,
                warn_once: bool = True) -> None:
        """Count a finding; write it (event file, span) in full for its first occurrences;
        log its message once per process."""
        self._findings.add(1, {signals.ATTR_CODE: f.code, signals.ATTR_SEVERITY: f.severity})
        if f.code == signals.FC_BYPASS:
            self._fc_bypass.add(1, self._scope)
        elif f.code == signals.WIDTH_MISMATCH:
            self._width_mismatch.add(1, self._scope)
        with self._lock:
            n = self._finding_counts[f.code] = self._finding_counts.get(f.code, 0) + 1
            first = f.code not in self._warned
            self._warned.add(f.code)
        if n <= EVENTS_PER_CODE:
            record = {"time": time.time(), "occurrence": n, **f.to_dict()}
            if self.tel.events is not None:
                self.tel.events.write(record)
            attrs = {signals.SPAN_ATTR_FINDING_CODE: f.code,
                     signals.SPAN_ATTR_FINDING_SEVERITY: f.severity,
                     signals.SPAN_ATTR_FINDING_MESSAGE: f.message, signals.SPAN_ATTR_ANOMALY: True}
            attrs.update(span_attributes or {})
            # An anomaly is always recorded, whether or not its step was sampled.
            current = otel_trace.get_current_span()
            if current.is_recording():
                current.set_attribute(signals.SPAN_ATTR_ANOMALY, True)
                current.add_event(f.code, attrs)
            with self.tel.tracer.start_as_current_span(signals.SPAN_FINDING, attributes=attrs) as s:
                s.add_event(f.code, attrs)
        if first and warn_once:
            level = logging.WARNING if f.severity != "info" else logging.INFO
            log.log(level, "spectrace [%s]: %s", f.code, f.message)

    def weights_report(self, unused: int, unloaded: int) -> None:
        self._unused_keys.add(unused)
        self._unloaded.add(unloaded)


def _counter(meter, spec: signals.MetricSpec):
    return meter.create_counter(spec.name, unit=spec.unit, description=spec.description)
