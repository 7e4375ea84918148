"""Acceptance within the buckets of a breakdown (context length, batch size, sampling, a
request label: `families.breakdowns`), and the comparison between two of its buckets with
a statistical floor, which every breakdown's finding is built on.

Pure functions over counts of request-steps by (bucket, accept length): the report judges
with them, the dashboards' alert rules restate them in PromQL.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping, NamedTuple


@dataclass(frozen=True)
class BucketFigures:
    """One bucket: request-steps, accepted draft tokens, and per 0-based position the
    request-steps that accepted it."""
    bucket: str
    drafts: float
    accepted_tokens: float
    accepted_per_position: tuple[float, ...]

    @property
    def mean_acceptance_length(self) -> float | None:
        return 1 + self.accepted_tokens / self.drafts if self.drafts else None

    @property
    def acceptance_per_position(self) -> tuple[float, ...]:
        return tuple(v / self.drafts for v in self.accepted_per_position) if self.drafts \
            else ()

    @property
    def gain(self) -> float:
        """Accepted draft tokens per request-step."""
        return self.accepted_tokens / self.drafts if self.drafts else 0.0


def bucket_figures(counts: Mapping[tuple[str, int], float], positions: int = 0,
                   order: Mapping[str, int] | None = None) -> tuple[BucketFigures, ...]:
    """Per bucket, in `order` (then by name), from request-steps by (bucket, accept length);
    `positions`: the draft positions to give each (at least those its lengths reach)."""
    order = order or {}
    by: dict[str, dict[int, float]] = {}
    for (bucket, length), n in counts.items():
        if n and isinstance(length, int) and length >= 1:
            lengths = by.setdefault(str(bucket), {})
            lengths[length] = lengths.get(length, 0) + n
    out = []
    for bucket in sorted(by, key=lambda b: (order.get(b, len(order)), b)):
        lengths = by[bucket]
        top = max(lengths)
        per_pos = tuple(sum(n for length, n in lengths.items() if length >= p + 2)
                        for p in range(max(top - 1, positions)))
        out.append(BucketFigures(
            bucket, sum(lengths.values()), sum((length - 1) * n for length, n in lengths.items()),
            per_pos))
    return tuple(out)


@dataclass(frozen=True)
class GapRule:
    """When two buckets of a breakdown differ enough to say so. Both need `floor`
    request-steps. `ordered`: the buckets have an order the field's failures follow (longer
    contexts, larger batches), so the first and the last bucket that reach the floor are
    compared, `min_apart` buckets apart or more; otherwise the best and the worst. It fires
    when the worse one's accepted tokens per request-step are at most `ratio` of the
    better one's and at least `drop` fewer. (The alert rules restate it in PromQL, so it
    stays within what PromQL can compute from the counters.)"""
    floor: int
    ratio: float
    drop: float
    ordered: bool = True
    min_apart: int = 0

    def words(self) -> str:
        """The rule in words (docs/metrics.md's tables), from its own figures."""
        pair = "first and last" if self.ordered else "best and worst"
        apart = "" if self.min_apart < 2 else f", {self.min_apart} buckets apart or more"
        return (f"the {pair} buckets with at least {self.floor} request-steps each{apart}; "
                f"the worse one's accepted tokens per request-step at most {self.ratio:g}x "
                f"the better one's and {self.drop:g} fewer")


class Gap(NamedTuple):
    better: BucketFigures
    worse: BucketFigures


def gap(buckets: tuple[BucketFigures, ...], rule: GapRule, known: tuple[str, ...]
        ) -> Gap | None:
    """The gap `rule` finds between the buckets named in `known` (in their order; others,
    such as `unknown`, never count), or None (also whenever fewer than two reach the
    floor)."""
    rank = {b: i for i, b in enumerate(known)}
    ok = sorted((b for b in buckets if b.bucket in rank and b.drafts >= rule.floor),
                key=lambda b: rank[b.bucket])
    if len(ok) < 2:
        return None
    if rule.ordered:
        better, worse = ok[0], ok[-1]
        if rank[worse.bucket] - rank[better.bucket] < rule.min_apart:
            return None
    else:
        better, worse = max(ok, key=lambda b: b.gain), min(ok, key=lambda b: b.gain)
    if not (worse.gain <= rule.ratio * better.gain and better.gain - worse.gain >= rule.drop):
        return None
    return Gap(better, worse)
