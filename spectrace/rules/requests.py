"""Acceptance by sampling and by request: the fixed buckets a request's sampling settings
and its mean accept length fall in (bounded attribute values), from numbers only."""
from __future__ import annotations

from .buckets import GapRule

GREEDY = "greedy"
# temperature buckets of sampled requests (upper edges), then the last one
SAMPLING_EDGES = (0.5, 1.0)
SAMPLING_BUCKETS = (GREEDY, "t<0.5", "0.5<=t<1", "t>=1")
SAMPLING_ORDER = {b: i for i, b in enumerate(SAMPLING_BUCKETS)}
SAMPLING_EPS = 1e-6  # the runtimes' own: below it a temperature means greedy


def sampling_bucket(temperature, top_k=None) -> str:
    """`greedy` for temperature ~0 or top_k 1 (SGLang turns temperature 0 into top_k 1),
    else the temperature's bucket."""
    if top_k == 1 or temperature is None or temperature < SAMPLING_EPS:
        return GREEDY
    for edge, name in zip(SAMPLING_EDGES, SAMPLING_BUCKETS[1:]):
        if temperature < edge:
            return name
    return SAMPLING_BUCKETS[-1]


# The sampling rule. Sampled requests accept less than greedy ones by construction: a
# greedy draft's token is accepted with the target's probability of it, below 1 once the
# target samples (vllm#31483: 80 % at temperature 0, 30 % at 1), so a gap between greedy
# and sampled requests is what a healthy deployment shows, and a warning on it would fire
# on every mixed workload. It is an info finding (`acceptance.sampling_gap`), never a
# verdict of its own and no alert: it explains a weak mean (the verdict names it as a
# clue: the greedy requests accept well, the sampled ones pull the mean down). The greedy
# bucket against the hottest sampled one with the floor, at most half its accepted tokens
# per request-step and 0.5 fewer, like the label rule (sampling too splits whole requests).
SAMPLING_RULE = GapRule(5000, 0.5, 0.5, ordered=True, min_apart=1)

# The request-label rule: a label whose requests accept far less than another's on the
# same deployment is traffic the draft was not trained for (a domain, a LoRA adapter, a
# tenant: speculators#610, sglang#34337); a warning and an alert. Labels have no order,
# so the best and the worst label with the floor are compared; labels split whole
# requests, whose acceptance varies far more than a step's, and the worst of up to 32
# labels is compared with the best, so the floor is higher and the gap wider than the
# step breakdowns': 5000 request-steps each, at most half the accepted tokens per
# request-step and 0.5 fewer (benchmarks/breakdown_rules.py: with 2000, 0.7 and 0.3,
# 32 labels on identical traffic as mixed as code, chat and other languages raised it in
# 86 % of runs; with these, under 1 %).
LABEL_RULE = GapRule(5000, 0.5, 0.5, ordered=False)


# a finished request's mean accept length (bonus included): quarter-token buckets to 5
REQUEST_EDGES = tuple(1 + 0.25 * i for i in range(1, 17))  # 1.25 ... 5.0
REQUEST_BUCKETS = tuple(f"{lo:.2f}-{hi:.2f}" for lo, hi in
                        zip((1.0,) + REQUEST_EDGES[:-1], REQUEST_EDGES)) + (">=5.00",)
REQUEST_ORDER = {b: i for i, b in enumerate(REQUEST_BUCKETS)}


def request_bucket(mean_accept_length: float) -> str:
    for edge, name in zip(REQUEST_EDGES, REQUEST_BUCKETS):
        if mean_accept_length < edge:
            return name
    return REQUEST_BUCKETS[-1]


def bucket_low(name: str) -> float:
    """The lower edge of a request bucket (for a mean over the distribution)."""
    return float(name.lstrip(">=").split("-")[0])


# SPECTRACE_REQUEST_LABEL: the request fields that reach the process where a finished
# request is read (SGLang's scheduler, vLLM's EngineCore), any one of which can label the
# request distribution. SGLang's custom metric labels (`--tokenizer-metrics-custom-labels-
# header`) are not among them: they stay in its tokenizer process (docs/metrics.md).
REQUEST_LABELS = ("routing_key", "extra_key", "priority", "lora")
LABEL_OVERFLOW = "other"  # every value after the cap
LABEL_UNSET = "none"      # a request without the field
MAX_LABEL_CHARS = 64
DEFAULT_LABEL_CAP = 32


def label_text(value) -> str:
    """A request field's value as a label: its text, cut at 64 characters; `none` when
    the request has none."""
    if value is None or value == "":
        return LABEL_UNSET
    return str(value)[:MAX_LABEL_CHARS]


class LabelCap:
    """The first `cap` distinct label values pass; every later one becomes `other` and is
    counted (`overflow`), so the label can never grow a metric past `cap` + 1 series."""

    __slots__ = ("cap", "seen", "overflow")

    def __init__(self, cap: int) -> None:
        if not isinstance(cap, int) or isinstance(cap, bool) or cap < 1:
            raise ValueError(f"label cap: expected a whole number >= 1, got {cap!r}")
        self.cap, self.seen, self.overflow = cap, set(), 0

    def __call__(self, value: str) -> str:
        seen = self.seen
        if value in seen:
            return value
        if len(seen) < self.cap:
            seen.add(value)
            return value
        self.overflow += 1
        return LABEL_OVERFLOW
