"""Acceptance by sampling and by request: the fixed buckets a request's sampling settings,
its mean accept length, its prefix-cache hit and its grammar fall in (bounded attribute
values), from numbers and names only."""
from __future__ import annotations

from .buckets import GapRule
from .context import UNKNOWN  # a value the runtime did not give

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


# Prefix-cache hits: the share of a request's prompt the runtime served from its prefix cache
# (cached prompt tokens over prompt tokens), in three fixed buckets. `none` apart: a request
# that hit nothing prefilled its own KV, the baseline the hits are compared with. The edge at
# one half splits a shared system prompt or template (a minority of a long prompt) from a
# repeated conversation or document (most of it: multi-turn chat, retries), the two ways
# traffic reuses a cache; the field's cache-related drops (stale KV on prefix hits) grow with
# the share served, so a difference shows between `<50%` and `>=50%`. `unknown`: a request
# whose prompt length the runtime did not say.
PREFIX_NONE = "none"
PREFIX_CACHE_BUCKETS = (PREFIX_NONE, "<50%", ">=50%")


def prefix_cache_bucket(cached_tokens, prompt_tokens) -> str:
    """The bucket of a request with `cached_tokens` of its `prompt_tokens` from the cache."""
    if not isinstance(prompt_tokens, int) or prompt_tokens <= 0 or not isinstance(
            cached_tokens, int) or cached_tokens < 0:
        return UNKNOWN
    if cached_tokens == 0:
        return PREFIX_NONE
    return PREFIX_CACHE_BUCKETS[1 if 2 * cached_tokens < prompt_tokens else 2]


# The prefix-cache rule. On a correct runtime a prefix hit reuses the same KV the request
# would have computed, so acceptance does not depend on it; requests served from the cache
# accepting far less than uncached ones is the stale-KV signature (vllm#41838: acceptance
# "regression over time" as the cache fills; vllm#43559: prefix caching with MTP): a
# warning and an alert. Ordered: `none` against the last hit bucket with the floor (a
# fall in the hit buckets only; hits accepting more is no fault). Confounded by traffic:
# the requests that hit are often of another kind (repeated agent or template prompts,
# multi-turn chat) than those that do not, and kinds accept differently on a healthy
# runtime. So the floor and gap are the label rule's, wide enough for a domain shift:
# 5000 request-steps a bucket, at most half the accepted tokens per request-step and 0.5
# fewer (benchmarks/breakdown_rules.py: identical traffic in both buckets, no false alarm
# in 4,800 runs; the hits another kind of traffic accepting 0.8x as well, 19 in 4,800, all
# with requests as mixed as code and chat, 2 % of those at the floor; a planted stale KV
# at 0.6x found in 66 % of runs, missed where 0.6x is under 0.5 tokens a step).
PREFIX_CACHE_RULE = GapRule(5000, 0.5, 0.5, ordered=True, min_apart=1)


# Structured output: the kind of constraint a request decoded under, in one vocabulary for
# both runtimes (SGLang's json_schema/regex/ebnf/structural_tag; vLLM's json, json_object,
# regex, grammar, choice, structural_tag: a JSON object counts as `json`, an EBNF or Lark
# grammar as `grammar`), `none` without one. The kind, not the backend: one server runs one
# grammar backend (the server settings' `grammar_backend`), while its requests mix kinds.
GRAMMAR_NONE = "none"
GRAMMAR_BUCKETS = (GRAMMAR_NONE, "json", "regex", "grammar", "choice", "structural_tag")
GRAMMAR_KINDS = {  # a runtime's name of a constraint -> its bucket
    "json_schema": "json", "json": "json", "json_object": "json", "regex": "regex",
    "ebnf": "grammar", "grammar": "grammar", "choice": "choice",
    "structural_tag": "structural_tag"}


def grammar_bucket(kind) -> str:
    """The bucket of a request's constraint as the runtime names it (None: no grammar);
    a kind the table does not know counts as `grammar` (the values stay bounded)."""
    if kind is None or kind == "":
        return GRAMMAR_NONE
    return GRAMMAR_KINDS.get(str(kind).lower(), "grammar")


# The grammar rule. Constrained requests accept differently by construction: the draft
# proposes without the grammar and was rarely trained on JSON or a regex's output, so its
# tokens break the grammar and are rejected (lower acceptance), while tokens the grammar
# forces (keys, braces) are easy to agree on (higher). A gap between kinds is what a
# healthy deployment with structured output shows, so, like sampling, an info finding
# (`acceptance.grammar_gap`) that explains a weak mean and no alert: an operator would
# switch off an alert that fires on every JSON workload. The runtime bugs of the field
# (sglang#9187: EAGLE stuck under a JSON grammar; vllm#51660: xgrammar's bitmask out of
# step with the drafts) show as acceptance near zero for the constrained bucket, which the
# collapse alerts and the verdict's broken states catch. Kinds have no order: the best and
# the worst with the floor, at the label rule's floor and gap (requests, not steps).
GRAMMAR_RULE = GapRule(5000, 0.5, 0.5, ordered=False)
