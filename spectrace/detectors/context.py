"""Acceptance by context length: the fixed buckets a request-step's sequence length falls
in, what a draft's config says about the length it was trained for, and the long-context
finding (acceptance in the longest contexts well below the shortest), with a statistical
floor so that a few request-steps never raise it.

Pure functions over numbers and small dicts (no runtime imports): the Recorder buckets
with them at collection time, `spectrace report` judges with them.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

from .. import messages, signals
from ..findings import WARNING, Finding

# Upper edges of the buckets (powers of two); a length L falls in the first bucket whose
# edge is above L, or in the last (128k and above).
EDGES = (512, 1024, 2048, 4096, 8192, 16384, 32768, 65536, 131072)
BUCKETS = ("<512", "512-1k", "1k-2k", "2k-4k", "4k-8k", "8k-16k", "16k-32k", "32k-64k",
           "64k-128k", ">=128k")
UNKNOWN = "unknown"  # a step whose lengths the runtime did not hold on the CPU, or a mismatch
BUCKET_ORDER = {b: i for i, b in enumerate(BUCKETS + (UNKNOWN,))}

# The rule: the shortest and the longest bucket with at least FLOOR request-steps each,
# two buckets apart or more (lengths a factor of 2 or more apart); it fires when the longest one's
# accepted draft tokens per request-step are at most RATIO of the shortest one's and at
# least DROP tokens fewer.
FLOOR = 200
RATIO = 0.5
DROP = 0.3
MIN_BUCKETS_APART = 2


def bucket_index(lengths):
    """Bucket indices of an array of sequence lengths (numpy), in one vectorised call."""
    import numpy
    return numpy.searchsorted(numpy.asarray(EDGES), numpy.asarray(lengths), side="right")


def bucket_of(length: int) -> str:
    for edge, name in zip(EDGES, BUCKETS):
        if length < edge:
            return name
    return BUCKETS[-1]


# Draft config keys that say how long a context it was trained or built for.
TRAINED_KEYS = ("max_position_embeddings", "sliding_window", "original_max_position_embeddings",
                "rope_scaling_factor")


def trained_context(config: Any) -> dict[str, float]:
    """What a draft's config (a dict or a config object) says about its context:
    max_position_embeddings, sliding_window, and from rope_scaling its factor and
    original_max_position_embeddings; only the positive numbers present."""
    def get(obj, key):
        return obj.get(key) if isinstance(obj, Mapping) else getattr(obj, key, None)
    out: dict[str, float] = {}
    for key in ("max_position_embeddings", "sliding_window"):
        v = get(config, key)
        if isinstance(v, (int, float)) and not isinstance(v, bool) and v > 0:
            out[key] = v
    scaling = get(config, "rope_scaling")
    if isinstance(scaling, Mapping):
        for src, key in (("factor", "rope_scaling_factor"),
                         ("original_max_position_embeddings",
                          "original_max_position_embeddings")):
            v = scaling.get(src)
            if isinstance(v, (int, float)) and not isinstance(v, bool) and v > 0:
                out[key] = v
    return out


@dataclass(frozen=True)
class BucketFigures:
    """One context bucket: request-steps, accepted draft tokens, and per 0-based position
    the request-steps that accepted it."""
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


def bucket_figures(counts: Mapping[tuple[str, int], float], positions: int = 0,
                   order: Mapping[str, int] = BUCKET_ORDER) -> tuple[BucketFigures, ...]:
    """Per bucket, in length order, from request-steps by (bucket, accept length);
    `positions`: the draft positions to give each (at least those its lengths reach)."""
    by: dict[str, dict[int, float]] = {}
    for (bucket, length), n in counts.items():
        if n and isinstance(length, int) and length >= 1:
            by.setdefault(str(bucket), {})[length] = by.get(str(bucket), {}).get(length, 0) + n
    out = []
    for bucket in sorted(by, key=lambda b: (order.get(b, len(order)), b)):
        lengths = by[bucket]
        drafts = sum(lengths.values())
        top = max(lengths)
        per_pos = tuple(sum(n for length, n in lengths.items() if length >= p + 2)
                        for p in range(max(top - 1, positions)))
        out.append(BucketFigures(bucket, drafts,
                                 sum((length - 1) * n for length, n in lengths.items()),
                                 per_pos))
    return tuple(out)


def long_context_finding(buckets: tuple[BucketFigures, ...],
                         trained: Mapping[str, float] | None = None) -> Finding | None:
    """The long-context finding, or None (also whenever fewer than two buckets, far
    enough apart, reach the floor)."""
    known = [b for b in buckets if b.bucket in BUCKETS and b.drafts >= FLOOR]
    if len(known) < 2:
        return None
    short, long_ = known[0], known[-1]
    if BUCKET_ORDER[long_.bucket] - BUCKET_ORDER[short.bucket] < MIN_BUCKETS_APART:
        return None
    gain_short = short.accepted_tokens / short.drafts
    gain_long = long_.accepted_tokens / long_.drafts
    if not (gain_long <= RATIO * gain_short and gain_short - gain_long >= DROP):
        return None
    trained = dict(trained or {})
    trained_text = ", ".join(f"{k} {v:g}" for k, v in trained.items() if k in TRAINED_KEYS)
    lengths = dict(short_length=round(1 + gain_short, 4), long_length=round(1 + gain_long, 4))
    facts = dict(short=short.bucket, long=long_.bucket,
                 short_length=f"{1 + gain_short:.2f}", long_length=f"{1 + gain_long:.2f}",
                 short_drafts=int(short.drafts), long_drafts=int(long_.drafts),
                 trained=messages.TRAINED_KNOWN.format(settings=trained_text)
                 if trained_text else messages.TRAINED_UNKNOWN)
    return Finding(signals.LONG_CONTEXT, WARNING, messages.LONG_CONTEXT.render(**facts),
                   {**{k: v for k, v in facts.items() if k != "trained"}, **lengths,
                    "trained_context": trained, "floor": FLOOR})
