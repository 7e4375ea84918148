"""The report's figures of every declared breakdown (`families.breakdowns`): its rows, from
the counts of request-steps by (bucket, accept length) a snapshot holds, and the findings
its rule raises on them (`rules.buckets.gap`)."""
from __future__ import annotations

from typing import NamedTuple

from ..rules.buckets import BucketFigures, bucket_figures, gap
from ..families.breakdowns import BREAKDOWNS, Breakdown
from ..findings import Finding
from .records import BreakdownFigures, BucketRow


def _counts(counts: dict | None) -> dict:
    """(bucket, length) -> n with the bucket a string and the length an int; others left out."""
    out = {}
    for (bucket, length), n in (counts or {}).items():
        try:
            out[(str(bucket), int(length))] = n
        except (TypeError, ValueError, OverflowError):
            continue
    return out


def bucket_figures_of(b: Breakdown, counts: dict | None, positions: int
                      ) -> tuple[BucketFigures, ...]:
    return bucket_figures(_counts(counts), positions, b.order)


def breakdown_figures(counts_by_name: dict, positions: int) -> dict[str, BreakdownFigures]:
    """Every declared breakdown's figures (no rows where nothing was counted)."""
    out = {}
    for b in BREAKDOWNS:
        rows = bucket_figures_of(b, counts_by_name.get(b.name), positions)
        out[b.name] = BreakdownFigures(b.name, b.title, tuple(
            BucketRow(x.bucket, x.drafts, x.accepted_tokens, x.mean_acceptance_length,
                      x.acceptance_per_position) for x in rows), rows)
    return out


def breakdown_findings(figures: dict[str, BreakdownFigures], draft_context: dict | None
                       ) -> list[Finding]:
    """The findings the breakdowns' rules raise on these figures."""
    out = []
    for b in BREAKDOWNS:
        fig = figures.get(b.name)
        if b.rule is None or fig is None or not fig.rows:
            continue
        if b.judge is not None:
            f = b.judge(fig.buckets, draft_context)
        else:
            found = breakdown_gap(b, fig.buckets)
            f = None if found is None else gap_finding(b, found)
        if f is not None:
            out.append(f)
    return out


def breakdown_gap(b: Breakdown, buckets: tuple[BucketFigures, ...]):
    """The gap `b`'s rule finds among its buckets: the declared ones in order, or for an
    open breakdown (a request label) every value seen."""
    return gap(buckets, b.rule, b.buckets or tuple(x.bucket for x in buckets))


class Condition(NamedTuple):
    """A breakdown whose rule found a gap (its finding fired): the two buckets and the
    effect, the accepted draft tokens per request-step the breakdown's request-steps lose
    to the worse bucket (its share of them times the gap: what the mean would gain if it
    accepted as the better one)."""
    breakdown: Breakdown
    better: BucketFigures
    worse: BucketFigures
    effect: float


def conditions(figures: tuple[BreakdownFigures, ...]) -> list[Condition]:
    """Every declared breakdown whose rule found a gap in `figures`, largest effect first
    (any breakdown declared with a `rule` joins: `families.breakdowns.BREAKDOWNS`)."""
    by_name = {f.name: f for f in figures}
    out = []
    for b in BREAKDOWNS:
        fig = by_name.get(b.name)
        if b.rule is None or fig is None or not fig.buckets:
            continue
        found = breakdown_gap(b, fig.buckets)
        total = sum(x.drafts for x in fig.buckets)
        if found is not None and total:
            better, worse = found
            out.append(Condition(b, better, worse,
                                 worse.drafts / total * (better.gain - worse.gain)))
    return sorted(out, key=lambda c: -c.effect)


def gap_finding(b: Breakdown, found) -> Finding:
    """A breakdown's finding in its declared words, from the gap its rule found."""
    better, worse = found
    facts = dict(better=better.bucket, worse=worse.bucket,
                 better_length=f"{better.mean_acceptance_length:.2f}",
                 worse_length=f"{worse.mean_acceptance_length:.2f}",
                 better_drafts=int(better.drafts), worse_drafts=int(worse.drafts))
    return Finding(b.finding, b.severity, b.message.render(**facts), {
        **facts, "better_length": round(better.mean_acceptance_length, 4),
        "worse_length": round(worse.mean_acceptance_length, 4), "floor": b.rule.floor,
        "breakdown": b.name})
