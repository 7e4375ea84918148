"""Two runs compared: how acceptance changed from a baseline run to the current one, and how
much of the change is the traffic mix and how much the system (docs/report.md,
"--baseline BASEDIR").

Pure functions over `rules.buckets.BucketFigures` (request-steps, accepted tokens and the
request-steps that accepted each position, in a bucket of a breakdown or over a whole run).

The statistics:
- a run's mean accept length L and its variance come from its accept-length histogram (the
  per-position counts are its tail counts: the request-steps that accepted position p are
  those of length p + 2 or more), so the standard error of L is sqrt(var / n);
  request-steps of one request are alike, so every variance of a run is multiplied by
  its design effect: the variance of its accept length between its recorded requests
  (the request spans' uniform sample: each request's accepted tokens less its steps
  times the run's mean, squared, summed, over the steps) over the variance between
  request-steps, at least 1, taken at the upper end of its own uncertainty (times
  1 + Z sqrt(2 / (R - 1)) for R recorded requests); a run with fewer than
  `MIN_REQUESTS` recorded requests takes its mean request-steps per request, the largest
  the design effect can be (every step of a request alike), or `DEFAULT_DESIGN_EFFECT`
  where that is not known either (benchmarks/compare_false_alarms.py measures the false
  alarms);
- within a breakdown (context length, sampling, ...), the buckets that hold at least
  `MIN_BUCKET_STEPS` request-steps in both runs are compared; the baseline is standardised
  to the current run's mix (direct standardisation): L_std = sum_b w_b * L_base(b), with
  w_b the current run's share of request-steps in bucket b among the compared ones. Then
  the system part is L_cur - L_std = sum_b w_b (L_cur(b) - L_base(b)) and the traffic part
  L_std - L_base; each with a 95 % interval (`Z` standard errors);
- a breakdown splits the change only when its compared buckets hold at least
  `MIN_COVERAGE` of the current run's request-steps; of the breakdowns that do, the one
  whose traffic part is largest explains the change;
- a change (of the whole, of the system part, of the traffic part, of a bucket, of a
  position) is reported only when both runs hold `MIN_RUN_STEPS` request-steps, it is at
  least its floor (`MIN_LENGTH_CHANGE` tokens of mean accept length, `MIN_POSITION_CHANGE`
  of acceptance at a position) and its interval excludes 0; the traffic part is named
  only when the whole change is reported too.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from .buckets import BucketFigures

Z = 1.96                  # a 95 % interval
MIN_REQUESTS = 20         # recorded requests a run needs for its own design effect
DEFAULT_DESIGN_EFFECT = 100.0  # without them and without a count of finished requests
MIN_RUN_STEPS = 200       # request-steps each run needs before any change is judged
MIN_BUCKET_STEPS = 100    # request-steps a bucket needs in both runs to be compared within
MIN_COVERAGE = 0.8        # share of the current run's request-steps a split must compare
MIN_LENGTH_CHANGE = 0.1   # tokens of mean accept length
MIN_POSITION_CHANGE = 0.05  # acceptance at one position

NO_CHANGE, TRAFFIC, SYSTEM, BOTH, TOO_FEW = "no_change", "traffic", "system", "both", "too_few"


@dataclass(frozen=True)
class Estimate:
    """A difference (current minus baseline) and its 95 % interval."""
    value: float
    low: float
    high: float

    def clears(self, floor: float) -> bool:
        """At least `floor` in size and its interval excludes 0."""
        return abs(self.value) >= floor and (self.low > 0 or self.high < 0)

    def to_json(self) -> dict:
        return {"value": round(self.value, 4), "low": round(self.low, 4),
                "high": round(self.high, 4)}


def _estimate(value: float, variance: float) -> Estimate:
    half = Z * math.sqrt(max(variance, 0.0))
    return Estimate(value, value - half, value + half)


def design_effect(run: "BucketFigures", requests, finished: float | None = None) -> float:
    """How much the request-steps of one request being alike widens a run's intervals:
    from `requests`, (verify steps, accepted draft tokens) of its recorded requests; with
    fewer than `MIN_REQUESTS` of them, the mean request-steps per request (the recorded
    ones', else the run's over its `finished` requests), else `DEFAULT_DESIGN_EFFECT`;
    1 when its request-steps do not vary at all."""
    n, mean, var = moments(run)
    if not n or var <= 0:
        return 1.0
    reqs = [(s, a) for s, a in requests if s and s > 0]
    if len(reqs) < MIN_REQUESTS:
        if reqs:
            return max(1.0, sum(s for s, _ in reqs) / len(reqs))
        return max(1.0, n / finished) if finished else DEFAULT_DESIGN_EFFECT
    steps = sum(s for s, _ in reqs)
    k = sum(a for _, a in reqs) / steps
    between = len(reqs) / (len(reqs) - 1) * sum((a - k * s) ** 2 for s, a in reqs) / steps
    # the estimate from R requests is itself uncertain: its upper bound, Z standard errors
    # of a variance from R - 1 degrees of freedom
    return max(1.0, between / var * (1 + Z * math.sqrt(2 / (len(reqs) - 1))))


def moments(b: BucketFigures) -> tuple[float, float, float]:
    """(request-steps, mean accept length, variance of the accept length) of a bucket: with
    k accepted draft tokens, k^2 is the sum of 2p + 1 over the positions p < k it
    accepted, so the tail counts give the second moment."""
    n = b.drafts
    if not n:
        return 0.0, 0.0, 0.0
    mean_k = b.accepted_tokens / n
    second = sum((2 * p + 1) * c for p, c in enumerate(b.accepted_per_position)) / n
    return n, 1 + mean_k, max(second - mean_k ** 2, 0.0)


def _var_of_mean(b: BucketFigures, effect: float = 1.0) -> float:
    n, _, var = moments(b)
    return effect * var / n if n else 0.0


def length_change(current: BucketFigures, baseline: BucketFigures, dc: float = 1.0,
                  db: float = 1.0) -> Estimate:
    """The change of mean accept length, with its interval (`dc`, `db`: the runs' design
    effects)."""
    _, lc, _ = moments(current)
    _, lb, _ = moments(baseline)
    return _estimate(lc - lb, _var_of_mean(current, dc) + _var_of_mean(baseline, db))


def level(b: BucketFigures, effect: float = 1.0) -> Estimate:
    """A run's (or bucket's) own mean accept length, with its interval."""
    _, mean, _ = moments(b)
    return _estimate(mean, _var_of_mean(b, effect))


def position_levels(b: BucketFigures, effect: float = 1.0) -> tuple[Estimate, ...]:
    """A run's own acceptance at each position, with its interval."""
    return tuple(_estimate(_rate(b, p), _rate_var(b, p, effect))
                 for p in range(len(b.accepted_per_position)))


def _rate(b: BucketFigures, p: int) -> float:
    pos = b.accepted_per_position
    return pos[p] / b.drafts if b.drafts and p < len(pos) else 0.0


def _rate_var(b: BucketFigures, p: int, effect: float = 1.0) -> float:
    r = _rate(b, p)
    return effect * r * (1 - r) / b.drafts if b.drafts else 0.0


def position_changes(current: BucketFigures, baseline: BucketFigures, dc: float = 1.0,
                     db: float = 1.0) -> tuple[Estimate, ...]:
    """The change of acceptance at each position, with its interval."""
    k = max(len(current.accepted_per_position), len(baseline.accepted_per_position))
    return tuple(_estimate(_rate(current, p) - _rate(baseline, p),
                           _rate_var(current, p, dc) + _rate_var(baseline, p, db))
                 for p in range(k))


@dataclass(frozen=True)
class BucketChange:
    """One bucket of a breakdown in both runs: the shares of each run's request-steps, and,
    where both reach `MIN_BUCKET_STEPS`, the change of mean accept length within it."""
    bucket: str
    baseline_share: float
    current_share: float
    baseline: BucketFigures | None
    current: BucketFigures | None
    change: Estimate | None

    @property
    def compared(self) -> bool:
        return self.change is not None

    def to_json(self) -> dict:
        def length(b):
            return None if b is None else b.mean_acceptance_length
        return {"bucket": self.bucket, "baseline_share": round(self.baseline_share, 4),
                "current_share": round(self.current_share, 4),
                "baseline_drafts": self.baseline.drafts if self.baseline else 0,
                "current_drafts": self.current.drafts if self.current else 0,
                "baseline_mean_acceptance_length": length(self.baseline),
                "current_mean_acceptance_length": length(self.current),
                "change": self.change.to_json() if self.change else None,
                "fell": bool(self.change and self.change.clears(MIN_LENGTH_CHANGE)
                             and self.change.value < 0)}


@dataclass(frozen=True)
class Split:
    """A change split by one breakdown: the buckets, the share of the current run's
    request-steps its compared buckets hold, the baseline standardised to the current mix,
    the system part and the traffic part (with intervals), and the system part per
    position."""
    breakdown: str
    buckets: tuple[BucketChange, ...]
    coverage: float
    standardised_baseline: float | None
    system: Estimate | None
    traffic: Estimate | None
    positions: tuple[Estimate, ...] = ()

    @property
    def usable(self) -> bool:
        return self.system is not None and self.coverage >= MIN_COVERAGE

    @property
    def grew(self) -> BucketChange | None:
        """The bucket whose share of request-steps grew most (None if none grew)."""
        best = max(self.buckets, key=lambda c: c.current_share - c.baseline_share,
                   default=None)
        return best if best and best.current_share > best.baseline_share else None

    def to_json(self) -> dict:
        return {"breakdown": self.breakdown, "coverage": round(self.coverage, 4),
                "usable": self.usable,
                "standardised_baseline_mean_acceptance_length": self.standardised_baseline,
                "system": self.system.to_json() if self.system else None,
                "traffic": self.traffic.to_json() if self.traffic else None,
                "system_per_position": [e.to_json() for e in self.positions],
                "buckets": [c.to_json() for c in self.buckets]}


def _shares(buckets: tuple[BucketFigures, ...]) -> dict[str, float]:
    total = sum(b.drafts for b in buckets)
    return {b.bucket: b.drafts / total for b in buckets} if total else {}


def split(name: str, current: tuple[BucketFigures, ...], baseline: tuple[BucketFigures, ...],
          dc: float = 1.0, db: float = 1.0) -> Split:
    """The change split by one breakdown's buckets (direct standardisation). Over the
    compared buckets, system + traffic = the current run's mean minus the baseline's."""
    cur, base = {b.bucket: b for b in current}, {b.bucket: b for b in baseline}
    cs, bs = _shares(current), _shares(baseline)
    changes = []
    for bucket in list(cur) + [b for b in base if b not in cur]:
        c, b = cur.get(bucket), base.get(bucket)
        both = c is not None and b is not None and min(c.drafts, b.drafts) >= MIN_BUCKET_STEPS
        changes.append(BucketChange(bucket, bs.get(bucket, 0.0), cs.get(bucket, 0.0), b, c,
                                    length_change(c, b, dc, db) if both else None))
    compared = [x for x in changes if x.compared]
    weight = sum(x.current_share for x in compared)
    if not compared or not weight:
        return Split(name, tuple(changes), 0.0, None, None, None)
    w = {x.bucket: x.current_share / weight for x in compared}
    std = sum(w[x.bucket] * moments(x.baseline)[1] for x in compared)
    system = _estimate(sum(w[x.bucket] * x.change.value for x in compared), sum(
        w[x.bucket] ** 2 * (_var_of_mean(x.current, dc) + _var_of_mean(x.baseline, db))
        for x in compared))
    # the traffic part: the baseline's own buckets re-weighted; its noise is the baseline's
    base_w = {x.bucket: x.baseline_share for x in compared}
    base_weight = sum(base_w.values()) or 1.0
    base_mean = sum(base_w[x.bucket] / base_weight * moments(x.baseline)[1] for x in compared)
    traffic = _estimate(std - base_mean, sum(
        (w[x.bucket] - base_w[x.bucket] / base_weight) ** 2 * _var_of_mean(x.baseline, db)
        for x in compared))
    k = max(len(x.current.accepted_per_position) for x in compared)
    positions = tuple(_estimate(
        sum(w[x.bucket] * (_rate(x.current, p) - _rate(x.baseline, p)) for x in compared),
        sum(w[x.bucket] ** 2 * (_rate_var(x.current, p, dc) + _rate_var(x.baseline, p, db))
            for x in compared)) for p in range(k))
    return Split(name, tuple(changes), weight, std, system, traffic, positions)


@dataclass(frozen=True)
class Comparison:
    """The whole comparison: the change of mean accept length and per position, every
    breakdown's split, the split that explains it (None: no breakdown covers enough), and
    the kind of change reported (`NO_CHANGE`, `TRAFFIC`, `SYSTEM`, `BOTH`, `TOO_FEW`)."""
    current_drafts: float
    baseline_drafts: float
    total: Estimate | None
    positions: tuple[Estimate, ...]
    splits: tuple[Split, ...]
    explained_by: Split | None
    kind: str
    effects: tuple[float, float] = (1.0, 1.0)  # the design effects of current, baseline

    @property
    def system(self) -> Estimate | None:
        return self.explained_by.system if self.explained_by else self.total

    @property
    def traffic(self) -> Estimate | None:
        return self.explained_by.traffic if self.explained_by else None

    def positions_fell(self) -> tuple[int, ...]:
        """The positions whose acceptance fell (within buckets where a split explains the
        change), worst first."""
        est = self.explained_by.positions if self.explained_by else self.positions
        fell = [p for p, e in enumerate(est) if e.clears(MIN_POSITION_CHANGE) and e.value < 0]
        return tuple(sorted(fell, key=lambda p: est[p].value))

    def to_json(self) -> dict:
        return {"kind": self.kind, "current_drafts": self.current_drafts,
                "baseline_drafts": self.baseline_drafts,
                "mean_acceptance_length_change": self.total.to_json() if self.total else None,
                "acceptance_per_position_change": [e.to_json() for e in self.positions],
                "explained_by": self.explained_by.breakdown if self.explained_by else None,
                "system": self.system.to_json() if self.system else None,
                "traffic": self.traffic.to_json() if self.traffic else None,
                "positions_fell": list(self.positions_fell()),
                "splits": [s.to_json() for s in self.splits],
                "design_effects": {"current": round(self.effects[0], 3),
                                   "baseline": round(self.effects[1], 3)},
                "floors": FLOORS}


FLOORS = {"min_run_steps": MIN_RUN_STEPS, "min_bucket_steps": MIN_BUCKET_STEPS,
          "min_coverage": MIN_COVERAGE, "min_length_change": MIN_LENGTH_CHANGE,
          "min_position_change": MIN_POSITION_CHANGE, "z": Z, "min_requests": MIN_REQUESTS,
          "default_design_effect": DEFAULT_DESIGN_EFFECT}


def compare(current: BucketFigures, baseline: BucketFigures,
            breakdowns: dict[str, tuple[tuple[BucketFigures, ...], tuple[BucketFigures, ...]]],
            effects: tuple[float, float] = (1.0, 1.0)) -> Comparison:
    """Compare two runs: `current` and `baseline` are each run as one bucket, `breakdowns`
    maps a breakdown's name to (current buckets, baseline buckets); `effects`: the runs'
    design effects (`design_effect`)."""
    dc, db = effects
    if min(current.drafts, baseline.drafts) < MIN_RUN_STEPS:
        return Comparison(current.drafts, baseline.drafts, None, (), (), None, TOO_FEW)
    total = length_change(current, baseline, dc, db)
    splits = tuple(split(name, cur, base, dc, db) for name, (cur, base) in breakdowns.items()
                   if cur or base)
    usable = [s for s in splits if s.usable]
    explained = max(usable, key=lambda s: abs(s.traffic.value), default=None)
    system = explained.system if explained else total
    traffic = explained.traffic if explained else None
    moved_sys = system.clears(MIN_LENGTH_CHANGE)
    # the traffic is named only when acceptance as a whole moved: a mix that differs by
    # chance between requests is within the whole's interval (its design effect)
    moved_mix = (traffic is not None and traffic.clears(MIN_LENGTH_CHANGE)
                 and total.clears(MIN_LENGTH_CHANGE))
    kind = BOTH if moved_sys and moved_mix else SYSTEM if moved_sys else \
        TRAFFIC if moved_mix else NO_CHANGE
    return Comparison(current.drafts, baseline.drafts, total,
                      position_changes(current, baseline, dc, db), splits, explained, kind,
                      effects)


def whole_run(lengths: dict, positions: int = 0) -> BucketFigures:
    """A run as one bucket, from its request-steps by accept length."""
    from .buckets import bucket_figures
    counts = {}
    for k, n in lengths.items():
        try:
            counts[("all", int(k))] = n
        except (TypeError, ValueError):
            continue
    found = bucket_figures(counts, positions)
    return found[0] if found else BucketFigures("all", 0, 0, (0,) * positions)
