"""Requests far outside the deployment's acceptance, named by the runtime's request id:
far below it (`requests.low_acceptance`: garbled output, or traffic the draft never saw)
and implausibly high (`requests.implausible_acceptance`: an accept rate above 0.96 where
the deployment's typical request is well below, the signature of a generation loop or of
a KV race, sglang#28771). Users ask for exactly these two tails (vllm#44487).

A request's acceptance rate is its accepted draft tokens over the draft tokens it could
have accepted (K per verify step; vLLM's own count where it keeps one, grammar-cut drafts
left out), as SGLang's `spec_accept_rate` and vLLM's per-request figures. The reference is
the deployment's own requests: the recorded ones (the sampled request spans, an unbiased
sample) with at least `MIN_STEPS` verify steps, their median and quartiles. A request is
named only when every one of these holds, so neither a short request nor the natural
spread of a mixed workload raises either finding:

- at least `MIN_REQUESTS` such requests recorded, and the request itself has `MIN_STEPS`;
- low: its rate at most `LOW_RATIO` of the median and at least `LOW_DROP` below it;
  implausible: its rate above `HIGH_RATE` and its rejections at most `HIGH_RATIO` of the
  median request's;
- beyond Tukey's far-out fence (`FENCE` interquartile ranges past the quartile) on the
  log-odds of the rates (half a draft token added each way, so 0 and 1 stay finite), so a
  wide workload needs a wider gap, and the tails near 0 and 1 are not squeezed;
- `Z` standard errors from the median at the deployment's per-step spread (from its
  accept-length distribution) over the request's own steps.

False alarms measured on repeated identical simulated runs (benchmarks/request_outliers.py,
docs/report.md): see there. Pure functions over numbers (no runtime imports).
"""
from __future__ import annotations

import math
import statistics
from dataclasses import dataclass
from typing import Iterable, Mapping

from .. import messages, names
from ..findings import WARNING, Finding, FindingSpec

# the per-request acceptance histogram's buckets (upper edges; the last bucket is (0.99, 1])
RATE_BOUNDS = (0.05, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 0.96, 0.99)

MIN_REQUESTS = 20   # recorded requests of MIN_STEPS or more before any request is judged
MIN_STEPS = 16      # verify steps a request needs to be judged or to be in the reference
LOW_RATIO = 0.25    # low: a rate at most this share of the median ...
LOW_DROP = 0.2      # ... and at least this far below it
HIGH_RATE = 0.96    # implausible: a rate above this ...
HIGH_RATIO = 0.25   # ... with at most this share of the median request's rejections
FENCE = 3.0         # interquartile ranges beyond the quartile (Tukey's "far out")
Z = 5.0             # standard errors from the median
MAX_NAMED = 5       # request ids a finding names (the most extreme first)

_FLOOR = (f"{MIN_REQUESTS} recorded requests of {MIN_STEPS} verify steps or more; the request "
          f"itself {MIN_STEPS} steps, beyond {FENCE:g} interquartile ranges (log-odds) and "
          f"{Z:g} standard errors from the median")
LOW = FindingSpec(
    names.REQUEST_LOW, WARNING,
    "requests far below the deployment's acceptance, named by id: garbled output, or "
    "traffic the draft never saw",
    floor=f"{_FLOOR}; at most {LOW_RATIO:g}x the median rate and {LOW_DROP:g} below it",
    message=messages.REQUEST_LOW)
IMPLAUSIBLE = FindingSpec(
    names.REQUEST_IMPLAUSIBLE, WARNING,
    "requests that accept implausibly often, named by id: a generation loop, or a KV race",
    floor=f"{_FLOOR}; a rate above {HIGH_RATE:g} with at most {HIGH_RATIO:g}x the median "
          "request's rejections",
    message=messages.REQUEST_IMPLAUSIBLE)


@dataclass(frozen=True, slots=True)
class RequestRate:
    """One recorded request: its id, verify steps and acceptance rate."""
    request_id: str
    verify_steps: float
    rate: float


@dataclass(frozen=True, slots=True)
class Outliers:
    """The requests named each way, and the reference they were judged against."""
    low: tuple[RequestRate, ...]
    high: tuple[RequestRate, ...]
    median: float
    q1: float
    q3: float
    reference: int  # recorded requests of MIN_STEPS or more


def rate_of(accepted, draft_tokens) -> float | None:
    """Accepted over proposed draft tokens, or None without a usable count."""
    try:
        accepted, draft_tokens = float(accepted), float(draft_tokens)
    except (TypeError, ValueError):
        return None
    if not (math.isfinite(accepted) and math.isfinite(draft_tokens)) or draft_tokens <= 0:
        return None
    return min(max(accepted / draft_tokens, 0.0), 1.0)


def step_sigma(length_counts: Mapping) -> float:
    """The standard deviation of accepted draft tokens per request-step, from the
    accept-length distribution (length -> request-steps); 0 without one."""
    pairs = []
    for k, v in length_counts.items():
        try:
            pairs.append((float(k) - 1, float(v)))
        except (TypeError, ValueError):
            continue
    n = sum(v for _, v in pairs)
    if n <= 0:
        return 0.0
    mean = sum(k * v for k, v in pairs) / n
    return math.sqrt(max(sum(v * (k - mean) ** 2 for k, v in pairs) / n, 0.0))


def judge(requests: Iterable[RequestRate], sigma: float, positions: int,
          reference: Iterable[RequestRate] | None = None) -> Outliers | None:
    """The requests far outside the others (None under the floor of recorded requests).
    `sigma`: `step_sigma` of the deployment; `positions`: its draft tokens per step (K);
    `reference`: the requests to compare with (a uniform sample; default `requests`)."""
    judged = [r for r in requests if r.verify_steps >= MIN_STEPS and r.rate is not None]
    ref = judged if reference is None else [r for r in reference
                                            if r.verify_steps >= MIN_STEPS and r.rate is not None]
    if len(ref) < MIN_REQUESTS:
        return None
    q1, median, q3 = statistics.quantiles([r.rate for r in ref], n=4, method="inclusive")
    k = max(positions, 1)
    l1, _, l3 = statistics.quantiles([_log_odds(r, k) for r in ref], n=4, method="inclusive")
    low_fence, high_fence = l1 - FENCE * (l3 - l1), l3 + FENCE * (l3 - l1)

    def z(r: RequestRate) -> float:
        se = sigma / (max(positions, 1) * math.sqrt(r.verify_steps))
        gap = abs(r.rate - median)
        return gap / se if se > 0 else (math.inf if gap > 0 else 0.0)

    low = [r for r in judged if r.rate <= LOW_RATIO * median and median - r.rate >= LOW_DROP
           and _log_odds(r, k) < low_fence and z(r) >= Z]
    high = [r for r in judged if r.rate > HIGH_RATE
            and 1 - r.rate <= HIGH_RATIO * (1 - median)
            and _log_odds(r, k) > high_fence and z(r) >= Z]
    return Outliers(tuple(sorted(low, key=lambda r: (r.rate, r.request_id))),
                    tuple(sorted(high, key=lambda r: (-r.rate, r.request_id))),
                    median, q1, q3, len(ref))


def _log_odds(r: RequestRate, positions: int) -> float:
    """log(rate / (1 - rate)) over the request's drafts, half a draft added each way."""
    drafts = r.verify_steps * positions
    p = (r.rate * drafts + 0.5) / (drafts + 1)
    return math.log(p / (1 - p))


def findings(out: Outliers | None) -> list[Finding]:
    """The findings naming the requests `judge` found, each way."""
    if out is None:
        return []
    found = []
    for spec, named in ((LOW, out.low), (IMPLAUSIBLE, out.high)):
        if not named:
            continue
        shown = named[:MAX_NAMED]
        listed = ", ".join(f"{r.request_id} ({r.rate:.2f} over {int(r.verify_steps)} steps)"
                           for r in shown)
        if len(named) > MAX_NAMED:
            listed += f" and {len(named) - MAX_NAMED} more"
        found.append(spec.found({
            "request_ids": [r.request_id for r in named],
            "rates": [round(r.rate, 4) for r in named],
            "verify_steps": [r.verify_steps for r in named],
            "median": round(out.median, 4), "q1": round(out.q1, 4),
            "q3": round(out.q3, 4), "reference": out.reference,
            "floor": {"requests": MIN_REQUESTS, "steps": MIN_STEPS}},
            n=len(named), s="s" if len(named) > 1 else "", requests=listed,
            median=f"{out.median:.2f}", reference=out.reference))
    return found
