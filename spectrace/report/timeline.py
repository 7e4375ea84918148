"""A process's timeline: the cumulative totals of each snapshot with its time, thinned as a
long run grows, the figures per interval, and several processes' timelines added up."""
from __future__ import annotations

from .. import signals
from .records import TimelineFigures, TimelinePoint
from .snapshot import MAX_POINTS, finite_sum, num, total




class Timeline:
    """The cumulative totals of each snapshot with a time, thinned as it grows (every other
    point dropped, the newest kept) so that a long, uncompacted file of an older spectrace
    still fits in memory. Counters are cumulative: a dropped point only coarsens the
    intervals around it."""

    def __init__(self, max_points: int = MAX_POINTS) -> None:
        self.max_points = max_points
        self.points: list[TimelinePoint] = []

    def add(self, t, metrics: dict) -> None:
        t = num(t)
        if t is None:
            return
        self.append(TimelinePoint(t, total(metrics, signals.SPEC_DRAFTS),
                                  total(metrics, signals.SPEC_ACCEPTED_TOKENS),
                                  total(metrics, signals.SPEC_DRAFT_TOKENS)))

    def append(self, point: TimelinePoint) -> None:
        """Add a point, thinning when full."""
        self.points.append(point)
        if len(self.points) >= 2 * self.max_points:
            last = self.points[-1]
            self.points = self.points[:-1:2] + [last]


def timeline_figures(points: list[TimelinePoint]) -> TimelineFigures:
    """Times, cumulative totals, and per interval (from the point before): the mean
    acceptance length and acceptance rate (None where nothing was verified, or where a
    total went down or time back)."""
    mal: list = [None] * len(points)
    rate: list = [None] * len(points)
    for i in range(1, len(points)):
        (t0, d0, a0, k0), (t1, d1, a1, k1) = points[i - 1], points[i]
        dd, da, dk = d1 - d0, a1 - a0, k1 - k0
        if t1 >= t0 and dd > 0 and 0 <= da:
            mal[i] = 1 + da / dd
        if t1 >= t0 and dk > 0 and 0 <= da <= dk:
            rate[i] = da / dk
    return TimelineFigures(
        time=tuple(p.time for p in points), drafts=tuple(p.drafts for p in points),
        accepted_tokens=tuple(p.accepted_tokens for p in points),
        draft_tokens=tuple(p.draft_tokens for p in points),
        mean_acceptance_length=tuple(mal), acceptance_rate=tuple(rate))


def merge_points(series: list[list[TimelinePoint]]) -> list[TimelinePoint]:
    """Sum of step functions: at each time any series has a point, every series' latest
    totals at or before it."""
    series = [s for s in series if s]
    if len(series) == 1:
        return list(series[0])
    events = sorted((pt.time, i, pt) for i, s in enumerate(series) for pt in s)
    latest: dict[int, TimelinePoint] = {}
    merged = Timeline()
    for t, i, pt in events:
        latest[i] = pt
        merged.append(TimelinePoint(t, *(finite_sum(v[j] for v in latest.values())
                                         for j in (1, 2, 3))))
    return merged.points
