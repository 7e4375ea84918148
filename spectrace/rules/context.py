"""Acceptance by context length: the fixed buckets a request-step's sequence length falls
in, what a draft's config says about the length it was trained for, and the long-context
finding (acceptance in the longest contexts well below the shortest), with a statistical
floor so that a few request-steps never raise it.

Pure functions over numbers and small dicts (no runtime imports): the Recorder buckets
with them at collection time, `spectrace report` judges with them.
"""
from __future__ import annotations

from typing import Any, Mapping

from .. import messages, names
from ..findings import WARNING, Finding
from . import buckets
from .buckets import BucketFigures, GapRule
from .buckets import gap as buckets_gap

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


def bucket_figures(counts: Mapping[tuple[str, int], float], positions: int = 0,
                   order: Mapping[str, int] = BUCKET_ORDER) -> tuple[BucketFigures, ...]:
    """Per context bucket, in length order (`buckets.bucket_figures`)."""
    return buckets.bucket_figures(counts, positions, order)


RULE = GapRule(FLOOR, RATIO, DROP, ordered=True, min_apart=MIN_BUCKETS_APART)


def long_context_finding(buckets: tuple[BucketFigures, ...],
                         trained: Mapping[str, float] | None = None) -> Finding | None:
    """The long-context finding, or None (also whenever fewer than two buckets, far
    enough apart, reach the floor)."""
    found = buckets_gap(buckets, RULE, BUCKETS)
    if found is None:
        return None
    short, long_ = found
    gain_short, gain_long = short.gain, long_.gain
    trained = dict(trained or {})
    trained_text = ", ".join(f"{k} {v:g}" for k, v in trained.items() if k in TRAINED_KEYS)
    lengths = dict(short_length=round(1 + gain_short, 4), long_length=round(1 + gain_long, 4))
    facts = dict(short=short.bucket, long=long_.bucket,
                 short_length=f"{1 + gain_short:.2f}", long_length=f"{1 + gain_long:.2f}",
                 short_drafts=int(short.drafts), long_drafts=int(long_.drafts),
                 trained=messages.TRAINED_KNOWN.format(settings=trained_text)
                 if trained_text else messages.TRAINED_UNKNOWN)
    return Finding(names.LONG_CONTEXT, WARNING, messages.LONG_CONTEXT.render(**facts),
                   {**{k: v for k, v in facts.items() if k != "trained"}, **lengths,
                    "trained_context": trained, "floor": FLOOR})
