"""Acceptance: request-steps verified, draft tokens, accepted tokens, per position and as a
distribution of accept lengths, plus the breakdowns counted per step
(`breakdowns.STEP`: context length, batch size, CUDA graph).

The decode loop only keeps a reference to what the runtime hands over (`add`,
`add_positions`: O(1)); the counting happens when the metric reader collects, in its own
thread (`fold`), in bulk.
"""
from __future__ import annotations

import threading
from collections import Counter, deque
from typing import NamedTuple

from opentelemetry.metrics import Observation

from .. import names
from ..rules.context import UNKNOWN
from ..safety import INTERNAL_ERRORS
from ..names import COUNTER, GAUGE, MetricSpec
from . import breakdowns, step_cost
from .breakdowns import BucketCounts
from .instruments import CollectionReads, by_attributes, observe

SPEC_DRAFTS = MetricSpec(
    "spectrace.spec.drafts", COUNTER, "{draft}",
    "Request-steps verified (one per request per speculative step).", counted_once=True)
SPEC_DRAFT_TOKENS = MetricSpec(
    "spectrace.spec.draft_tokens", COUNTER, "{token}",
    "Draft tokens proposed for verification (drafts x speculative steps).",
    counted_once=True)
SPEC_ACCEPTED_TOKENS = MetricSpec(
    "spectrace.spec.accepted_tokens", COUNTER, "{token}",
    "Draft tokens accepted by the target (bonus token excluded).", counted_once=True)
SPEC_ACCEPTED_PER_POSITION = MetricSpec(
    "spectrace.spec.accepted_tokens_per_position", COUNTER, "{token}",
    "Draft tokens accepted at each 0-based draft position.", (names.ATTR_POSITION,),
    counted_once=True)
SPEC_ACCEPT_LENGTH = MetricSpec(
    "spectrace.spec.accept_length", COUNTER, "{draft}",
    "Accept-length distribution: request-steps whose accept length (accepted + bonus) "
    "equals the `length` attribute.", (names.ATTR_LENGTH,), counted_once=True)
SPEC_DRAFTS_PER_POSITION = MetricSpec(
    "spectrace.spec.drafts_per_position", COUNTER, "{draft}",
    "Request-steps that proposed a draft token at `position` (the denominator of "
    "per-position acceptance when the number of draft steps changes at run time).",
    (names.ATTR_POSITION,), counted_once=True)
SPEC_NO_DRAFT_STEPS = MetricSpec(
    "spectrace.spec.no_draft_steps", COUNTER, "{step}",
    "Request-steps run with no draft token (adaptive speculation's K = 0: a plain decode "
    "through the verify path), kept out of every other acceptance figure and breakdown.",
    counted_once=True)
SPEC_REFERENCE_ACCEPT_LENGTH = MetricSpec(
    "spectrace.spec.reference_accept_length", GAUGE, "1",
    "The mean accept length (bonus token included) the operator expects of this draft "
    "(SPECTRACE_EXPECTED_ACCEPT_LENGTH, `rules.reference`): one series per process, only "
    "while the setting is set; the dashboards divide the measured mean accept length by it.")
METRICS = (SPEC_DRAFTS, SPEC_DRAFT_TOKENS, SPEC_ACCEPTED_TOKENS, SPEC_ACCEPTED_PER_POSITION,
           SPEC_ACCEPT_LENGTH, SPEC_DRAFTS_PER_POSITION, SPEC_NO_DRAFT_STEPS,
           SPEC_REFERENCE_ACCEPT_LENGTH)


NO_DRAFT = "no draft"  # `add_no_draft`'s steps: a step that proposed no draft token


class PositionCounts(NamedTuple):
    """One step's counts as a runtime that aggregates them itself hands them over (vLLM's
    `SpecDecodingStats`): request-steps, draft tokens, and per position the request-steps
    that accepted it (so `per_position[c - 1] - per_position[c]` accepted exactly c)."""

    drafts: int
    draft_tokens: int
    per_position: list

    def lengths(self):
        """(accept length, request-steps) for each length some request-step had."""
        reached = [self.drafts] + list(self.per_position) + [0]  # accepted >= c
        for c in range(len(self.per_position) + 1):
            if reached[c] - reached[c + 1]:
                yield c + 1, reached[c] - reached[c + 1]


class AcceptanceTotals:
    """Folds the accept-count lists the runtime hands over (correct drafts per request,
    bonus excluded), or its own per-step `PositionCounts`, into totals and into the
    per-step breakdowns (`by`: breakdown name -> `BucketCounts`). `add` / `add_positions`
    keep a reference (O(1)); `fold` does the counting."""

    def __init__(self, step_breakdowns=None) -> None:
        if step_breakdowns is None:  # every declared one
            step_breakdowns = [b for b in breakdowns.BREAKDOWNS if b.source == breakdowns.STEP]
        self._pending: deque = deque()
        self._lock = threading.Lock()
        self.drafts = 0
        self.no_draft = 0  # request-steps handed over with K = 0 (no draft token)
        self.draft_tokens = 0
        self.accepted = 0
        self.per_position: list[int] = []
        self.offered_per_position: list[int] = []  # request-steps that drafted position p
        self.length_counts: dict[int, int] = {}
        self.breakdowns = tuple(step_breakdowns)
        self.by: dict[str, BucketCounts] = {b.name: BucketCounts() for b in self.breakdowns}
        self._sized = tuple(b for b in self.breakdowns if b.reads == breakdowns.STEP_SIZE)
        self._lengths = tuple(b for b in self.breakdowns if b.reads == breakdowns.SEQ_LENS)
        self._graphed = tuple(b for b in self.breakdowns if b.reads == breakdowns.GRAPHED)
        self._with_lengths: list = []  # (counts, steps, sequence lengths) of this fold

    def add(self, correct_per_request, num_steps: int, seq_lens=None, graph=None) -> None:
        """`seq_lens`: the requests' sequence lengths as the runtime holds them on the CPU
        (a list, CPU tensor or array, kept by reference), or a function that returns
        (accept counts, lengths) aligned when called at fold time (vLLM: `StepCounts.
        context`), or None when it holds none. `graph`: whether the step's verify ran as
        a CUDA-graph replay, as the runtime says (a bool on the CPU), None when unknown."""
        self._pending.append((correct_per_request, num_steps, seq_lens, graph))

    def add_no_draft(self, correct_per_request) -> None:
        """A step run with no draft token (adaptive speculation's K = 0): its requests are
        counted as `no_draft` only, never as request-steps (`add` with a K of 0 is a
        runtime that did not say its K: counted as before)."""
        self._pending.append((correct_per_request, NO_DRAFT, None, None))

    def add_positions(self, counts: PositionCounts, context=None, graph=None) -> None:
        """`context`: a function returning the step's (accept counts, lengths) at fold time
        (as `add`'s), for the context breakdown; `graph` as `add`'s; the totals are
        `counts`."""
        self._pending.append((counts, None, context, graph))

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
        (speculative-step setting, batch-size bucket) are packed into one `bytearray`
        (accept counts are small non-negative ints) and counted in one pass
        (`numpy.bincount`): about 15 ns a request in all, against about 40 ns for a
        `Counter` per list. Anything that does not fit a byte is counted with a `Counter`.
        Same totals either way."""
        with self._lock:
            groups: dict[tuple[int, int, str], tuple[bytearray, list]] = {}
            pending = self._pending
            with_lengths = self._with_lengths if self._lengths else None
            bad = None  # the first item that is not a list of counts: dropped alone
            while pending:
                item = pending.popleft()
                counts, steps = item[0], item[1]
                if isinstance(counts, PositionCounts):
                    self._fold_positions(counts, graph_bucket(item[3]))
                    if with_lengths is not None and item[2] is not None:
                        with_lengths.append(item)
                    continue
                if steps is NO_DRAFT:  # no draft token, no request-step verified
                    try:
                        self.no_draft += len(counts)
                    except TypeError:
                        bad = bad or repr(counts)[:80]
                    continue
                step, other = bytearray(), ()
                try:
                    step.extend(counts)  # all or nothing: a bad value raises
                except (TypeError, ValueError):
                    try:
                        step, other = bytearray(), [int(c) for c in counts]
                    except (TypeError, ValueError):
                        bad = bad or repr(counts)[:80]
                        continue
                key = (steps, step_cost.bucket_of(len(step) + len(other)), graph_bucket(item[3]))
                group = groups.get(key)
                if group is None:
                    group = groups[key] = (bytearray(), [])
                group[0].extend(step)
                group[1].extend(other)
                if with_lengths is not None and item[2] is not None:
                    with_lengths.append(item)
            for (steps, bucket, graph), (packed, other) in groups.items():
                self._fold_group(steps, bucket, graph, packed, other)
            if with_lengths:
                for b in self._lengths:
                    _fold_lengths(self.by[b.name], with_lengths)
                with_lengths.clear()
        if bad is not None:  # after counting the rest: the caller's guard counts and logs it
            raise ValueError(f"accept counts handed over by the runtime are not a list of "
                             f"counts: {bad} (that step dropped, the others counted)")

    def _fold_group(self, steps: int, bucket: int, graph: str, packed: bytearray,
                    other: list) -> None:
        n = len(packed) + len(other)
        if not n:
            return
        self.drafts += n
        self.draft_tokens += n * steps
        if len(self.per_position) < steps:
            self.per_position.extend([0] * (steps - len(self.per_position)))
        self._offer(steps, n)
        tally = Counter(other)
        for c, k in _byte_counts(packed):
            tally[c] += k
        sized = [self.by[b.name] for b in self._sized]
        graphed = [self.by[b.name] for b in self._graphed]
        label = step_cost.BUCKETS[bucket]
        for c, k in tally.items():
            c = int(c)
            self.accepted += c * k
            self.length_counts[c + 1] = self.length_counts.get(c + 1, 0) + k
            for p in range(min(c, len(self.per_position))):
                self.per_position[p] += k
            for counts in sized:
                counts.add(label, c + 1, k)
            for counts in graphed:
                counts.add(graph, c + 1, k)

    def _offer(self, steps: int, n: int) -> None:
        """`n` request-steps drafted positions 0 .. steps-1."""
        offered = self.offered_per_position
        if len(offered) < steps:
            offered.extend([0] * (steps - len(offered)))
        for p in range(steps):
            offered[p] += n

    def _fold_positions(self, counts: PositionCounts, graph: str) -> None:
        per_pos = list(counts.per_position)
        if counts.drafts and counts.draft_tokens == counts.drafts * len(per_pos):
            self._offer(len(per_pos), counts.drafts)
        self.drafts += counts.drafts
        self.draft_tokens += counts.draft_tokens
        self.accepted += sum(per_pos)
        if len(self.per_position) < len(per_pos):
            self.per_position.extend([0] * (len(per_pos) - len(self.per_position)))
        for c, n in enumerate(per_pos):
            self.per_position[c] += n
        sized = [self.by[b.name] for b in self._sized]
        graphed = [self.by[b.name] for b in self._graphed]
        label = step_cost.BUCKETS[step_cost.bucket_of(counts.drafts)]
        for length, n in counts.lengths():
            self.length_counts[length] = self.length_counts.get(length, 0) + n
            for by in sized:
                by.add(label, length, n)
            for by in graphed:
                by.add(graph, length, n)


def graph_bucket(graph) -> str:
    """The `cuda_graph` bucket of a step the runtime said ran (True), did not run (False)
    its verify as a CUDA-graph replay, or said nothing of (None); vLLM's step's
    `runtime_mode` (a str) by `breakdowns.VLLM_GRAPH_MODES`."""
    if graph is None:
        return UNKNOWN
    if isinstance(graph, str):
        return breakdowns.VLLM_GRAPH_MODES.get(graph, UNKNOWN)
    return breakdowns.GRAPH if graph else breakdowns.EAGER


def _fold_lengths(by: BucketCounts, items: list) -> None:
    """Count request-steps by (context bucket, accept length): per speculative-step
    setting, every step's counts and lengths concatenated, bucketed and counted in one
    `numpy.bincount` (per step only a list extend and an array view: the collecting
    thread holds the interpreter lock the decode loop needs). A step whose lengths do
    not match its counts goes to `unknown`, as does a negative length (one the runtime
    did not name). `lengths` may be a function returning (counts, lengths) (vLLM);
    with the runtime's own `PositionCounts` of the step as its counts, the step's
    requests all in one bucket take that bucket with the runtime's own counts."""
    import numpy
    from ..rules.context import BUCKETS, bucket_index
    nb = len(BUCKETS) + 1  # the last index: unknown
    groups: dict[int, tuple[list, list, list]] = {}  # counts, their lengths; unknown
    for counts, steps, lengths, _ in items:
        own = counts if isinstance(counts, PositionCounts) else None
        try:
            if callable(lengths):
                counts, lengths = lengths()
            lens = numpy.asarray(lengths).ravel()
            matched = lens.dtype.kind in "iuf" and lens.shape[0] == len(counts)
        except (TypeError, ValueError):
            matched = False
        if own is not None:
            bucket = _one_bucket(lens, bucket_index) if matched else UNKNOWN
            if bucket is not None or not isinstance(counts, list):
                for length, n in own.lengths():  # the runtime's own counts of the step
                    by.add(bucket or UNKNOWN, length, n)
                continue
            steps = len(own.per_position)
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
            lens = numpy.concatenate(ls)
            b[:len(cs)] = numpy.where(lens < 0, nb - 1, bucket_index(lens))
        tally = numpy.bincount(b * width + c, minlength=nb * width).reshape(nb, width)
        for bi, ci in zip(*numpy.nonzero(tally)):
            by.add(names[bi], int(ci) + 1, int(tally[bi, ci]))


def _one_bucket(lens, bucket_index) -> str | None:
    """The bucket every length of a step falls in, when there is one (`unknown` for a step
    without lengths; None for one that mixes buckets or has an unknown length)."""
    from ..rules.context import BUCKETS
    if not lens.shape[0]:
        return UNKNOWN
    if int(lens.min()) < 0:
        return None
    b = bucket_index(lens)
    return BUCKETS[int(b[0])] if (b == b[0]).all() else None


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


class Acceptance:
    """The acceptance family of one process: its totals and their metrics."""

    def __init__(self, cfg) -> None:
        self.totals = AcceptanceTotals(b for b in breakdowns.BREAKDOWNS
                                       if b.source == breakdowns.STEP and b.enabled(cfg))
        self.add = self.totals.add
        self.add_no_draft = self.totals.add_no_draft
        self.add_positions = self.totals.add_positions
        self.prepare = self.totals.prepare
        # whether a runtime that must keep more to give sequence lengths should keep it
        self.wants_lengths = bool(self.totals._lengths)
        self.reference = cfg.expected_accept_length  # the operator's

    def folded(self) -> AcceptanceTotals:
        """The totals with everything kept so far counted."""
        try:
            self.totals.fold()
        except ValueError as exc:  # one bad step dropped, the rest counted: still observe
            INTERNAL_ERRORS.record("fold:acceptance", exc)
        return self.totals

    def register(self, meter, scope: dict) -> None:
        read = CollectionReads(self.folded).reader
        position = names.ATTR_POSITION
        observe(meter, SPEC_DRAFTS, read(lambda t: [Observation(t.drafts)]), scope)
        observe(meter, SPEC_DRAFT_TOKENS, read(lambda t: [Observation(t.draft_tokens)]), scope)
        observe(meter, SPEC_ACCEPTED_TOKENS, read(lambda t: [Observation(t.accepted)]), scope)
        observe(meter, SPEC_ACCEPTED_PER_POSITION, read(lambda t: [
            Observation(v, {position: p}) for p, v in enumerate(t.per_position)]), scope)
        observe(meter, SPEC_ACCEPT_LENGTH, read(lambda t: by_attributes(
            t.length_counts, names.ATTR_LENGTH)), scope)
        observe(meter, SPEC_DRAFTS_PER_POSITION, read(lambda t: [
            Observation(v, {position: p}) for p, v in enumerate(t.offered_per_position)]), scope)
        observe(meter, SPEC_NO_DRAFT_STEPS, read(lambda t: [Observation(t.no_draft)]), scope)
        if self.reference is not None:  # a constant of the process: no per-step cost
            reference = float(self.reference)
            observe(meter, SPEC_REFERENCE_ACCEPT_LENGTH, lambda: [Observation(reference)],
                    scope)
        for b in self.totals.breakdowns:
            observe(meter, b.accept_length, read(lambda t, b=b: by_attributes(
                t.by[b.name].lengths, b.attribute, names.ATTR_LENGTH)), scope)
            observe(meter, b.accepted_tokens, read(lambda t, b=b: by_attributes(
                t.by[b.name].accepted, b.attribute)), scope)
