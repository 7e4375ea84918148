"""The windows the drift rule compares (`rules.drift`): each process's cumulative totals
per metrics snapshot (overall and by breakdown bucket), thinned as a long run grows like
its timeline, and from them the recent window (the last `RECENT_S`, or the later half of
a shorter run, counted from its first request-step: a server's loading and warm-up time
before it served are no window) against the earlier ones (up to `EARLIER_S` before it),
added up over the processes that count request-steps once. `SPECTRACE_DRIFT_WINDOW`
(seconds, read by `spectrace report`) sets the recent window's length: an operator who
changed something 5 minutes ago asks about the last 5 minutes."""
from __future__ import annotations

import os
from typing import Mapping

from .. import signals
from ..families.breakdowns import BREAKDOWNS
from ..rules import drift
from .snapshot import MAX_POINTS, by_attr, num, total

TITLES = {b.name: b.title.split(" (")[0] for b in BREAKDOWNS}
ORDER = tuple(b.name for b in BREAKDOWNS)
WINDOW_SETTING = "SPECTRACE_DRIFT_WINDOW"


def recent_window_s(environ: Mapping[str, str] | None = None) -> float:
    """The recent window's length in seconds: `SPECTRACE_DRIFT_WINDOW`, else
    `rules.drift.RECENT_S` (a ValueError naming the setting for a bad value)."""
    raw = (os.environ if environ is None else environ).get(WINDOW_SETTING, "").strip()
    if not raw:
        return float(drift.RECENT_S)
    try:
        value = float(raw)
    except ValueError:
        value = -1.0
    if not value > 0 or value == float("inf"):
        raise ValueError(f"{WINDOW_SETTING}={raw!r}: expected the recent window's length in "
                         f"seconds, a number above 0 (default {drift.RECENT_S})")
    return value


def totals_of(metrics: dict) -> drift.Totals:
    """One snapshot's cumulative totals."""
    return drift.Totals(
        total(metrics, signals.SPEC_DRAFTS), total(metrics, signals.SPEC_ACCEPTED_TOKENS),
        {b.name: drift.by_bucket(by_attr(metrics, b.accept_length,
                                         (b.attribute, signals.ATTR_LENGTH)))
         for b in BREAKDOWNS}, total(metrics, signals.SPEC_REQUESTS))


class History:
    """(time, totals) per snapshot, thinned (every other one dropped, the newest kept)."""

    def __init__(self, max_points: int = MAX_POINTS) -> None:
        self.max_points = max_points
        self.points: list[tuple[float, drift.Totals]] = []

    def add(self, t, metrics: dict) -> None:
        t = num(t)
        if t is None or (self.points and t < self.points[-1][0]):
            return
        self.points.append((t, totals_of(metrics)))
        if len(self.points) >= 2 * self.max_points:
            self.points = self.points[:-1:2] + [self.points[-1]]

    def at(self, t: float) -> drift.Totals:
        """The totals of the last snapshot at or before `t` (zero before the first)."""
        out = drift.Totals()
        for when, totals in self.points:
            if when > t:
                break
            out = totals
        return out


def _serving_since(h: History) -> float:
    """The time of the last snapshot before the first request-step (the first snapshot
    when it already counted some)."""
    since = h.points[0][0]
    for t, totals in h.points:
        if totals.drafts > 0:
            break
        since = t
    return since


def windows(histories: list[History], recent_s: float | None = None
            ) -> tuple[drift.Totals, drift.Totals, float] | None:
    """(earlier, recent, the recent window's length in seconds) over the processes'
    histories, or None where they hold under two snapshots or nothing served before the
    recent window; `recent_s`: the recent window's length (default `recent_window_s()`;
    the default `RECENT_S` is at most half the serving time)."""
    hs = [h for h in histories if len(h.points) >= 2]
    if not hs:
        return None
    start = min(_serving_since(h) for h in hs)
    end = max(h.points[-1][0] for h in hs)
    recent_s = recent_window_s() if recent_s is None else recent_s
    # the default window shrinks to half a short run; a window the operator chose is kept
    # as long as something served before it
    asked = recent_s != drift.RECENT_S
    window = recent_s if asked else min(recent_s, (end - start) / 2)
    if window <= 0 or window >= end - start:
        return None
    cut = end - window
    since = cut - drift.EARLIER_S
    earlier = recent = drift.Totals()
    for h in hs:
        at_cut = h.at(cut)
        earlier = earlier + (at_cut - h.at(since))
        recent = recent + (h.points[-1][1] - at_cut)
    return earlier, recent, window


def drift_findings(histories: list[History]) -> list:
    """`acceptance.drift` where the rule finds it, else nothing."""
    w = windows(histories)
    if w is None:
        return []
    earlier, recent, window = w
    found = drift.judge(earlier, recent, ORDER)
    return [] if found is None else [drift.finding(found, window, TITLES)]
