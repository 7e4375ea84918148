"""The within-request comparison of two buckets of a step breakdown (context length, batch
size: the breakdowns whose buckets split a request's steps): each request's acceptance in
one bucket against its own acceptance in the other, over the requests seen in both, with
requests as strata (issue #48).

Why not buckets of pooled request-steps (`rules.buckets.gap`): a bucket's steps come from
different requests, so whichever requests happen to run long or in large batches decide
the answer (`benchmarks/breakdown_rules.py`: on the most mixed traffic up to 23 false alarms
in 100 runs; on traffic whose low-acceptance requests run in the larger batches, many
more). Here a request is compared only with itself: its kind, its prompt, its own
acceptance cancel out.

The statistic. Per request i seen in both buckets A (the first: shorter contexts, smaller
batches) and B, with n_A, n_B request-steps and a_A, a_B accepted draft tokens, its own rate
r = (a_A + a_B) / (n_A + n_B) is its expectation in either bucket, and

    d_i = a_B - n_B r  =  w_i (mean_B - mean_A),   w_i = n_A n_B / (n_A + n_B),

observed minus expected accepted tokens in B. D = sum d_i is at once the observed-against-
expected count the issue names, the Mantel-Haenszel-weighted within-request difference
of accepted tokens per request-step, and the stratified permutation (van Elteren-type)
score statistic: with no effect of the bucket within any request its mean is 0 whatever
the mix of requests and however unevenly they fall in the buckets. Accepted tokens, not
draft tokens, are the unit: the K tokens of a step are not independent trials (the chain
rule stops at the first rejection), so a Mantel-Haenszel test on tokens accepted against
not accepted would count K correlated trials as K and understate the variance; a step's
accepted count is over-dispersed against any binomial. So its variance is taken two ways,
and the larger kept:

- from the steps: permuting a request's steps over its two buckets gives
  Var d_i = w_i s_i^2 N_i / (N_i - 1), s_i^2 the request's own per-step variance of accepted
  tokens (from the sum of squares where the feed has it; otherwise its upper bound
  r (K - r), Bhatia-Davis: a count in [0, K] of mean r), exact in its moments when a
  request's steps are exchangeable;
- from the requests: the cluster-robust (sandwich) variance, sum over requests of the
  squared residuals of d_i about a common ratio R = P / Q fitted to all (below), times
  m / (m - 1) for m requests. It
  makes no assumption about how a request's steps are correlated (stretches of boilerplate
  and of prose, a split that is in time for context), so where steps within a request are
  correlated it is the larger one; its ratio to the first, the design effect, is reported.

It fires when D / sqrt(V) <= -t (one-sided: a fall in B, the bucket the field's failures
are in), t the quantile of Student's t with m - 1 degrees of freedom at the level of
Z_CRIT (the sandwich variance from m requests is itself uncertain: 4.30 at 10 requests,
3.58 at 20, 3.23 at 60, `critical`) and the fall is as large as the breakdown's gap rule asks (its ratio and
drop, on the within-request figures), never below the floors: MIN_REQUESTS requests seen in
both buckets, and the gap rule's floor of request-steps in each bucket from those requests
(few requests make the sandwich variance, the guard against correlated steps, worthless).
The effect size is the Mantel-Haenszel ratio of acceptance in B to A within requests,
P / Q with P = sum w_i mean_B,i and Q = sum w_i mean_A,i, with a 95 % interval by the delta
method at the same design effect and Student's t (its coverage of 1 on traffic with no
effect: `benchmarks/within_request_rules.py`, `within_covers`).

Pure functions over counts (no runtime imports). The runtime feed (request ids per
request-step: SGLang v2's batch `reqs`, vLLM's scheduler output) is not wired yet: the
report still judges the step breakdowns with `rules.buckets.gap`.
"""
from __future__ import annotations

import math
import numbers
from dataclasses import dataclass
from typing import Iterable, Mapping, NamedTuple

from .buckets import GapRule

# Floors: below either no comparison fires.
MIN_REQUESTS = 10  # requests seen in both buckets
# (request-steps in each bucket, from those requests: the breakdown's own GapRule.floor)
Z_CRIT = 3.09      # one-sided: 0.1 % of runs with no effect, were the variance exact
# (compared at Student's t of as many degrees of freedom as requests less one: `critical`)
Z_INTERVAL = 1.96  # the effect's interval: 95 % (at Student's t too)


class Cell(NamedTuple):
    """One request in one bucket: its request-steps, the draft tokens they accepted, and
    (where the feed has it) the sum over those steps of the squared accepted count."""
    steps: float
    accepted: float
    squares: float | None = None


class RequestSteps(NamedTuple):
    """One request: bucket -> its `Cell` there (only the buckets it ran in)."""
    request: str
    buckets: Mapping[str, Cell]


@dataclass(frozen=True)
class WithinRule:
    """When the within-request comparison fires: `floor` request-steps in each bucket from
    at least `min_requests` requests seen in both; a fall at least `z` standard errors, to
    at most `ratio` of the first bucket's acceptance and `drop` fewer tokens a step.
    `min_apart`: how far apart the buckets `within_gap` compares must be, as in the
    ordered `GapRule`. `z` is the level: compared at Student's t (`critical`)."""
    floor: int
    ratio: float
    drop: float
    min_requests: int = MIN_REQUESTS
    z: float = Z_CRIT
    min_apart: int = 0

    def __post_init__(self) -> None:
        if self.min_requests < 2:
            raise ValueError(f"min_requests: at least 2 (the variance over requests needs "
                             f"two), got {self.min_requests}")

    @classmethod
    def of(cls, rule: GapRule, min_requests: int = MIN_REQUESTS) -> "WithinRule":
        """The within-request form of a step breakdown's gap rule: its floor, ratio, drop
        and bucket distance."""
        return cls(rule.floor, rule.ratio, rule.drop, min_requests, Z_CRIT, rule.min_apart)

    def words(self) -> str:
        apart = "" if self.min_apart < 2 else f", {self.min_apart} buckets apart or more"
        return (f"over the requests seen in both of two buckets (at least {self.min_requests}, "
                f"{self.floor} request-steps in each bucket{apart}), each request's accepted "
                f"tokens per request-step in the later bucket against its own in the earlier: "
                f"at most {self.ratio:g}x and {self.drop:g} fewer, beyond Student's t at the "
                f"level of {self.z:g} normal standard errors with requests less one degrees "
                f"of freedom")


@dataclass(frozen=True)
class WithinComparison:
    """Bucket `second` against `first` within the requests seen in both."""
    first: str
    second: str
    requests: int            # seen in both
    steps_first: float       # their request-steps in each bucket
    steps_second: float
    accepted_first: float    # their accepted draft tokens in each bucket
    accepted_second: float
    gain_first: float | None   # accepted tokens per request-step, Mantel-Haenszel weighted
    gain_second: float | None
    ratio: float | None        # gain_second / gain_first: within requests
    interval: tuple[float, float] | None  # its 95 % interval
    z: float | None            # (observed - expected) / standard error; < 0: a fall
    critical: float | None     # what -z must reach: t at the rule's level, requests - 1 df
    design_effect: float | None  # the variance kept over the per-step one (>= 1)
    floor_met: bool
    fires: bool

    @property
    def drop(self) -> float | None:
        return None if self.gain_first is None or self.gain_second is None \
            else self.gain_first - self.gain_second


def critical(z: float, df: int) -> float:
    """The quantile of Student's t with `df` degrees of freedom at the normal quantile `z`
    (Cornish-Fisher, to four terms: within 0.02 of the exact from 5 degrees of freedom at
    z = 3.09); `z` itself for df <= 0 is never asked (fewer than 2 requests never fire)."""
    if df <= 0:
        return math.inf
    v = float(df)
    return (z + (z ** 3 + z) / (4 * v) + (5 * z ** 5 + 16 * z ** 3 + 3 * z) / (96 * v ** 2)
            + (3 * z ** 7 + 19 * z ** 5 + 17 * z ** 3 - 15 * z) / (384 * v ** 3)
            + (79 * z ** 9 + 776 * z ** 7 + 1482 * z ** 5 - 1920 * z ** 3 - 945 * z)
            / (92160 * v ** 4))


def check(requests: Iterable[RequestSteps], k: int) -> None:
    """Raises ValueError naming the request, bucket and field of the first count that
    cannot be: negative or not finite, accepted above steps x K, squares outside what the
    steps' accepted counts allow."""
    if not (isinstance(k, int) and k >= 1):
        raise ValueError(f"k: draft tokens a step must be a positive integer, got {k!r}")
    for req in requests:
        for bucket, cell in req.buckets.items():
            where = f"request {req.request!r}, bucket {bucket!r}"
            for field in ("steps", "accepted") + (("squares",) if cell.squares is not None
                                                  else ()):
                v = getattr(cell, field)
                if isinstance(v, bool) or not isinstance(v, numbers.Real) \
                        or not math.isfinite(v) or v < 0:
                    raise ValueError(f"{where}: {field} must be a finite count >= 0, "
                                     f"got {v!r}")
            if cell.accepted > cell.steps * k:
                raise ValueError(f"{where}: accepted ({cell.accepted:g}) exceeds steps x K "
                                 f"({cell.steps:g} x {k})")
            if cell.squares is not None:
                low = cell.accepted ** 2 / cell.steps if cell.steps else 0.0
                if cell.squares < low * (1 - 1e-9) or cell.squares > k * cell.accepted \
                        * (1 + 1e-9):
                    raise ValueError(
                        f"{where}: squares ({cell.squares:g}) must lie between accepted^2 / "
                        f"steps ({low:g}) and K x accepted ({k * cell.accepted:g})")


def compare(requests: Iterable[RequestSteps], first: str, second: str, k: int,
            rule: WithinRule) -> WithinComparison:
    """Bucket `second` against `first` over the requests with request-steps in both (the
    others do not count); `k`: draft tokens a step. Checks the counts (`check`)."""
    if first == second:
        raise ValueError(f"second: the same bucket as first ({first!r})")
    requests = tuple(requests)
    check(requests, k)
    pairs = []
    for req in requests:
        a, b = req.buckets.get(first), req.buckets.get(second)
        if a is not None and b is not None and a.steps > 0 and b.steps > 0:
            pairs.append((a, b))
    m = len(pairs)
    n_a = sum(a.steps for a, _ in pairs)
    n_b = sum(b.steps for _, b in pairs)
    acc_a = sum(a.accepted for a, _ in pairs)
    acc_b = sum(b.accepted for _, b in pairs)
    floor_met = m >= rule.min_requests and n_a >= rule.floor and n_b >= rule.floor
    if not pairs:
        return WithinComparison(first, second, 0, 0, 0, 0, 0, None, None, None, None, None,
                                None, None, False, False)
    W = D = P = Q = v_steps = vp = vq = 0.0
    rows = []
    for a, b in pairs:
        n = a.steps + b.steps
        r = (a.accepted + b.accepted) / n
        if a.squares is not None and b.squares is not None:
            s2 = max((a.squares + b.squares) / n - r * r, 0.0)
        else:
            s2 = r * (k - r)  # the largest variance a count in [0, K] of mean r can have
        s2 *= n / (n - 1) if n > 1 else 1.0
        w = a.steps * b.steps / n
        d = b.accepted - b.steps * r
        W += w
        D += d
        P += b.accepted * a.steps / n
        Q += a.accepted * b.steps / n
        v_steps += w * s2
        vp += w * w * s2 / b.steps
        vq += w * w * s2 / a.steps
        rows.append((w, d, r, n, a.steps, b.steps))
    # the sandwich's residuals about the fitted common ratio R = P / Q (a request's mean
    # mu in A, R mu in B, its own r fixed): d_i - w_i (R - 1) r_i N_i / (n_A + R n_B)
    fit = P / Q if Q > 0 else 1.0
    v_req = sum((d - w * (fit - 1) * r * n / (na + fit * nb)) ** 2
                for w, d, r, n, na, nb in rows) * (m / (m - 1)) if m > 1 else 0.0
    v = max(v_steps, v_req)
    deff = v / v_steps if v_steps > 0 else None
    z = D / math.sqrt(v) if v > 0 else (0.0 if D == 0 else math.copysign(math.inf, D))
    gain_a, gain_b = Q / W, P / W
    ratio = interval = None
    if Q > 0:
        ratio = P / Q
        scale = deff or 1.0
        se = math.sqrt(scale * (vp / Q ** 2 + P ** 2 * vq / Q ** 4))
        half = critical(Z_INTERVAL, m - 1) * se
        interval = (max(ratio - half, 0.0), ratio + half)
    crit = critical(rule.z, m - 1)
    fires = (floor_met and ratio is not None and z <= -crit and ratio <= rule.ratio
             and gain_a - gain_b >= rule.drop)
    return WithinComparison(first, second, m, n_a, n_b, acc_a, acc_b, gain_a, gain_b,
                            ratio, interval, z, crit, deff, floor_met, fires)


def within_gap(requests: Iterable[RequestSteps], rule: WithinRule, known: tuple[str, ...],
               k: int) -> WithinComparison | None:
    """The ordered breakdown's comparison: of the pairs of buckets in `known` (in their
    order; others, such as `unknown`, never count) at least `min_apart` apart whose shared
    requests meet the floors, the one farthest apart (then the earliest); its comparison
    (whether or not it fires), or None where no pair meets the floors."""
    requests = tuple(requests)
    check(requests, k)
    seen = {b for r in requests for b, c in r.buckets.items() if c.steps > 0}
    present = [b for b in known if b in seen]
    rank = {b: i for i, b in enumerate(known)}
    pairs = sorted(((x, y) for i, x in enumerate(present) for y in present[i + 1:]
                    if rank[y] - rank[x] >= max(rule.min_apart, 1)),
                   key=lambda p: (rank[p[0]] - rank[p[1]], rank[p[0]]))
    for x, y in pairs:
        c = compare(requests, x, y, k, rule)
        if c.floor_met:
            return c
    return None
