"""The within-request comparison of two step-breakdown buckets (`rules.within_request`,
issue #48) on constructed requests: its floors, a planted fall found, a confounded mix of
requests with no fall within any of them not flagged, bad counts rejected naming the
field. Its false alarms and detection on simulated traffic: benchmarks/within_request_rules.py.
"""
from __future__ import annotations

import numpy
import pytest

from spectrace.rules import context as ctx
from spectrace.rules.buckets import BucketFigures, gap
from spectrace.rules.within_request import (
    MIN_REQUESTS, Cell, RequestSteps, WithinRule, compare, critical, within_gap)

K = 5
RULE = WithinRule.of(ctx.RULE)          # floor 200 request-steps, 0.5x and 0.3 fewer
SHORT, LONG = "<512", "2k-4k"


def steps(rng, q: float, n: int):
    """Accepted draft tokens of n steps at per-position acceptance q (the chain rule)."""
    return numpy.minimum(rng.geometric(1 - q, size=n) - 1, K)


def cell(acc) -> Cell:
    return Cell(len(acc), int(acc.sum()), int((acc ** 2).sum()))


def request(rng, name, q, n_short, n_long, factor=1.0) -> RequestSteps:
    return RequestSteps(name, {SHORT: cell(steps(rng, q, n_short)),
                               LONG: cell(steps(rng, q * factor, n_long))})


def test_a_planted_fall_within_every_request_is_found():
    rng = numpy.random.default_rng(1)
    reqs = [request(rng, f"r{i}", q, 40, 30, factor=0.6)
            for i, q in enumerate(rng.uniform(0.5, 0.9, 20))]
    c = compare(reqs, SHORT, LONG, K, RULE)
    assert c.floor_met and c.fires
    assert c.requests == 20 and c.steps_first == 800 and c.steps_second == 600
    assert c.ratio < 0.5 and c.interval[0] < c.ratio < c.interval[1] < 1
    assert c.z <= -c.critical and c.drop >= RULE.drop and c.design_effect >= 1
    # the same as the ordered breakdown's choice of buckets
    assert within_gap(reqs, RULE, ctx.BUCKETS, K) == c


def test_no_fall_within_any_request_is_not_flagged_however_the_mix_falls():
    """Confounded: the low-acceptance requests run most of their steps in the long bucket,
    the high ones in the short; pooled request-steps make the long bucket look broken
    (today's gap fires), the within-request comparison does not."""
    rng = numpy.random.default_rng(2)
    reqs = []
    for i in range(30):
        low = i % 2 == 0
        q = 0.3 if low else 0.85
        reqs.append(request(rng, f"r{i}", q, 10 if low else 90, 90 if low else 10))
    pooled = tuple(BucketFigures(b, sum(r.buckets[b].steps for r in reqs),
                                 sum(r.buckets[b].accepted for r in reqs), ())
                   for b in (SHORT, LONG))
    assert gap(pooled, ctx.RULE, ctx.BUCKETS) is not None
    c = compare(reqs, SHORT, LONG, K, RULE)
    assert c.floor_met and not c.fires
    assert abs(c.z) < c.critical and c.interval[0] < 1 < c.interval[1]


def test_floors_no_finding_below_them():
    rng = numpy.random.default_rng(3)
    # one request short of MIN_REQUESTS, each with plenty of steps: a large fall, no finding
    few = [request(rng, f"r{i}", 0.8, 60, 60, factor=0.3) for i in range(MIN_REQUESTS - 1)]
    c = compare(few, SHORT, LONG, K, RULE)
    assert c.requests == MIN_REQUESTS - 1 and not c.floor_met and not c.fires
    assert c.ratio < 0.5 and c.z < -c.critical  # it would have fired
    assert within_gap(few, RULE, ctx.BUCKETS, K) is None
    # enough requests, too few request-steps in the long bucket (10 x 19 < 200)
    thin = [request(rng, f"r{i}", 0.8, 60, 19, factor=0.3) for i in range(10)]
    c = compare(thin, SHORT, LONG, K, RULE)
    assert c.steps_second == 190 < RULE.floor and not c.floor_met and not c.fires
    # requests wholly in one bucket do not count: none seen in both
    whole = [RequestSteps(f"a{i}", {SHORT: cell(steps(rng, 0.8, 100))}) for i in range(20)] \
        + [RequestSteps(f"b{i}", {LONG: cell(steps(rng, 0.2, 100))}) for i in range(20)]
    c = compare(whole, SHORT, LONG, K, RULE)
    assert c.requests == 0 and not c.floor_met and not c.fires and c.ratio is None
    # at the floors exactly it may fire
    at = [request(rng, f"r{i}", 0.8, 20, 20, factor=0.3) for i in range(MIN_REQUESTS)]
    c = compare(at, SHORT, LONG, K, RULE)
    assert c.requests == MIN_REQUESTS and c.steps_second == RULE.floor and c.fires


def test_without_squares_the_variance_bound_is_used_and_is_larger():
    rng = numpy.random.default_rng(4)
    reqs = [request(rng, f"r{i}", 0.6, 40, 40) for i in range(40)]
    bare = [RequestSteps(r.request, {b: Cell(c.steps, c.accepted) for b, c in
                                     r.buckets.items()}) for r in reqs]
    with_sq, without = compare(reqs, SHORT, LONG, K, RULE), compare(bare, SHORT, LONG, K, RULE)
    assert with_sq.ratio == without.ratio
    # r (K - r) bounds each request's per-step variance: the z shrinks towards 0
    assert abs(without.z) <= abs(with_sq.z) + 1e-12


def test_a_request_correlated_within_weighs_by_the_robust_variance():
    """Steps correlated within requests (the first bucket's and the second's acceptance of a
    request differ by chance far more than independent steps would): the cluster-robust
    variance is kept, its design effect above 1, and no finding."""
    rng = numpy.random.default_rng(5)
    reqs = []
    for i in range(40):
        q = rng.uniform(0.4, 0.8)
        qa, qb = rng.permutation([q * 1.3, q * 0.7])  # a drift with no direction
        reqs.append(RequestSteps(f"r{i}", {SHORT: cell(steps(rng, min(qa, 0.95), 50)),
                                           LONG: cell(steps(rng, min(qb, 0.95), 50))}))
    c = compare(reqs, SHORT, LONG, K, RULE)
    assert c.design_effect > 3 and not c.fires


@pytest.mark.parametrize("bad, field", [
    (Cell(-1, 0), "steps"),
    (Cell(10, -2), "accepted"),
    (Cell(10, 51), "accepted"),          # above steps x K = 50
    (Cell(float("nan"), 0), "steps"),
    (Cell(10, 20, 10.0), "squares"),      # below accepted^2 / steps = 40
    (Cell(10, 20, 101.0), "squares"),     # above K x accepted = 100
])
def test_bad_counts_are_rejected_naming_the_field(bad, field):
    rng = numpy.random.default_rng(6)
    reqs = [request(rng, f"r{i}", 0.6, 30, 30) for i in range(12)]
    reqs.append(RequestSteps("broken", {SHORT: cell(steps(rng, 0.6, 30)), LONG: bad}))
    with pytest.raises(ValueError, match=rf"request 'broken', bucket '2k-4k': {field}"):
        compare(reqs, SHORT, LONG, K, RULE)
    with pytest.raises(ValueError, match=field):
        within_gap(reqs, RULE, ctx.BUCKETS, K)


def test_k_must_be_a_positive_integer():
    with pytest.raises(ValueError, match="^k: "):
        compare([], SHORT, LONG, 0, RULE)


def test_the_rule_restates_the_breakdowns_gap_rule():
    assert (RULE.floor, RULE.ratio, RULE.drop, RULE.min_apart) == (
        ctx.FLOOR, ctx.RATIO, ctx.DROP, ctx.MIN_BUCKETS_APART)
    assert RULE.min_requests == MIN_REQUESTS and "200 request-steps" in RULE.words()


def test_critical_is_students_t():
    """Student's t at one-sided 0.1 % (tables: 5.893, 4.297, 3.579, 3.232 at 5, 9, 19,
    59 degrees of freedom), the normal quantile far out."""
    for df, t in ((5, 5.893), (9, 4.297), (19, 3.579), (59, 3.232)):
        assert abs(critical(3.0902, df) - t) < 0.02
    assert abs(critical(3.0902, 10 ** 6) - 3.0902) < 1e-4
    assert critical(3.09, 0) == float("inf")


def test_numpy_counts_are_counts_and_the_same_bucket_twice_is_an_error():
    rng = numpy.random.default_rng(7)
    reqs = [request(rng, f"r{i}", 0.6, 30, 30) for i in range(12)]
    as_numpy = [RequestSteps(r.request, {b: Cell(numpy.int64(c.steps), numpy.int64(c.accepted),
                                                 numpy.float64(c.squares))
                                         for b, c in r.buckets.items()}) for r in reqs]
    assert compare(as_numpy, SHORT, LONG, K, RULE) == compare(reqs, SHORT, LONG, K, RULE)
    with pytest.raises(ValueError, match="^second: "):
        compare(reqs, SHORT, SHORT, K, RULE)
    with pytest.raises(ValueError, match="^min_requests: "):
        WithinRule(200, 0.5, 0.3, min_requests=1)
