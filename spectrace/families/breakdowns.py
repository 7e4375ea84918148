"""Breakdowns of acceptance, each declared once: where its value comes from, its buckets,
its cap, its words, and the rule that compares its buckets. Everything else follows from
the declaration: the counts (`BucketCounts`, filled by the acceptance and request families),
the two metrics (`accept_length_by_<name>`, `accepted_tokens_by_<name>`), the report's
table in every view (`by_<name>` in `--json`), the dashboard panel, and the finding.

Sources:
- `STEP`: each request-step as its step is counted (the acceptance family's fold): the
  value is the step's batch size (`STEP_SIZE`: requests verified in the step) or each
  request's sequence length (`SEQ_LENS`: what the runtime holds on the CPU for the step)
  or whether the step's verify ran as a CUDA-graph replay (`GRAPHED`: the runtime's own
  bool, or vLLM's mode name, on the CPU; None where it says nothing).
- `REQUEST`: a finished request's own per-step histogram, by a value of the request
  (`FinishedRequest`: its sampling settings, its label).

Adding a breakdown of acceptance is one `Breakdown` here (plus, for a value no family
reads yet, the adapter line that hands it over).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

from .. import messages, names
from ..rules import context as ctx
from ..rules import requests as req
from ..rules.buckets import GapRule
from ..findings import INFO, WARNING, Alert, FindingSpec
from ..names import COUNTER, MetricSpec
from . import step_cost

STEP = "step"
REQUEST = "request"
STEP_SIZE = "step_size"  # STEP: the number of request-steps in the step
SEQ_LENS = "seq_lens"    # STEP: each request's sequence length
GRAPHED = "graphed"      # STEP: whether the step's verify was a CUDA-graph replay
GRAPH, PIECEWISE, EAGER = "graph", "piecewise", "eager"  # GRAPHED's buckets (and `unknown`)
# vLLM's `CUDAGraphStat.runtime_mode` (`str(CUDAGraphMode)`) -> bucket
VLLM_GRAPH_MODES = {"FULL": GRAPH, "PIECEWISE": PIECEWISE, "NONE": EAGER}

# which runtimes count a breakdown (`where`), in the words the dashboards' panels use
SGLANG_ONLY = ("SGLang only: vLLM exports no such figure (docs/metrics.md, \"What vLLM does "
               "not export\").")
VLLM_PER_REQUEST = ("vLLM: only when started with --per-request-spec-decode-metrics "
                    "(its per-request accept counts); otherwise No data here.")


@dataclass(frozen=True)
class Breakdown:
    """One breakdown of acceptance. `name`: its key (`by_<name>` in `--json`, the metrics'
    suffix); `attribute`: the data-point attribute holding the bucket; `title`: what
    "acceptance by ..." reads; `source` and `reads` (or `of_request`, a bucket from a
    `FinishedRequest`): where the value comes from; `buckets`: the fixed buckets in
    order (empty for open values, which `capped` bounds); `reading`: what a difference
    between its buckets means; `where`: which runtimes count it; `rule`, `finding`: the
    comparison of its buckets and the code it raises (with `rules.buckets.gap`), and
    `alert`, the Prometheus alert rule that restates it; `enabled`: whether a process with
    these settings counts it."""
    name: str
    attribute: str
    title: str
    source: str
    buckets: tuple[str, ...]
    value: str  # where the value comes from, for docs/metrics.md
    accept_length_description: str
    reading: str = ""
    where: str = ""
    reads: str = ""
    of_request: Callable | None = None
    capped: bool = False
    rule: GapRule | None = None
    finding: str = ""
    severity: str = WARNING  # its finding's (info: a gap expected by construction)
    alert: str = ""
    message: object = None  # messages.Message over better/worse bucket facts (`gap_finding`;
    # with `judge`, the words it renders)
    judge: Callable | None = None  # its own finding from (bucket figures, draft context)
    enabled: Callable = lambda cfg: True
    accept_length: MetricSpec = field(init=False)
    accepted_tokens: MetricSpec = field(init=False)

    def __post_init__(self) -> None:
        attrs = (self.attribute, names.ATTR_LENGTH)
        object.__setattr__(self, "accept_length", MetricSpec(
            f"spectrace.spec.accept_length_by_{self.name}", COUNTER, "{draft}",
            self.accept_length_description, attrs, counted_once=True))
        object.__setattr__(self, "accepted_tokens", MetricSpec(
            f"spectrace.spec.accepted_tokens_by_{self.name}", COUNTER, "{token}",
            f"Draft tokens accepted (bonus excluded) by {self.title} (`{self.attribute}`); "
            f"with accept_length_by_{self.name} summed over `length`, the mean accept length "
            "per bucket.", (self.attribute,), counted_once=True))

    @property
    def spec(self) -> FindingSpec | None:
        """Its finding's declaration (None without a rule)."""
        if self.rule is None or not self.finding:
            return None
        return FindingSpec(self.finding, self.severity,
                           f"acceptance by {self.title.split(' (')[0]}: two buckets well "
                           f"apart ({self.reading or 'see its breakdown'})",
                           floor=self.rule.words(), alert=self.alert_rule,
                           message=self.message)

    @property
    def alert_rule(self) -> Alert | None:
        """Its alert (named `alert`): the rule's comparison over the last hour's counts of
        each counting process (None without a rule or an alert name)."""
        if self.rule is None or not self.alert:
            return None
        r, attr = self.rule, self.attribute
        which = (f"of the first bucket's (at most {r.ratio:g}x and {r.drop:g} fewer; the first "
                 f"and the last bucket with at least {r.floor} request-steps each, "
                 f"{r.min_apart} buckets apart or more)" if r.ordered else
                 f"of the best one's (at most {r.ratio:g}x and {r.drop:g} fewer; the best and "
                 f"the worst with at least {r.floor} request-steps each)")
        return Alert(
            self.alert,
            f"Draft acceptance falls with {self.title.split(' (')[0]} on "
            f"{{{{ $labels.instance }}}} ({{{{ $labels.{attr} }}}})",
            f"Over the last hour, draft tokens accepted per request-step in the "
            f"{{{{ $labels.{attr} }}}} bucket of {self.title} are "
            f"{{{{ $value | printf \"%.2f\" }}}} {which}: {self.reading}. The rule of "
            f"`spectrace report`'s finding {self.finding}, judged on the last hour's counts "
            "per counting process instead of on all the data."
            + (f" {self.where}" if self.where else ""),
            severity="warning", for_="15m", windowed=True)

    @property
    def order(self) -> dict[str, int]:
        return {b: i for i, b in enumerate(self.buckets + (ctx.UNKNOWN,))}


CONTEXT = Breakdown(
    "context", names.ATTR_CONTEXT, "context length (tokens in the request so far)", STEP,
    ctx.BUCKETS,
    "each request-step, from the batch's sequence lengths as the runtime holds them on the "
    "CPU (SGLang v2's `seq_lens_cpu`; vLLM: its scheduler's computed tokens of the request "
    "when the step was scheduled, plus the last sampled one); `unknown` where it holds none",
    "Accept-length distribution by context length: request-steps whose request's sequence "
    "length fell in the `context` bucket (<512, 512-1k, ... >=128k; `unknown` where the "
    "runtime held no lengths on the CPU) and whose accept length equals `length`.",
    reading="a fall in the long buckets is a draft trained on shorter sequences",
    where="SGLang 0.5.23's v2 worker and vLLM; not SGLang's v1 worker or older releases "
          "(docs/metrics.md).",
    reads=SEQ_LENS, rule=ctx.RULE, finding=names.LONG_CONTEXT,
    alert="SpectraceLongContextAcceptance", message=messages.LONG_CONTEXT,
    judge=ctx.long_context_finding)

BATCH_SIZE = Breakdown(
    "batch_size", names.ATTR_BATCH_BUCKET, "batch size (requests verified in the step)",
    STEP, step_cost.BUCKETS,
    "each step, the number of requests it verified (SGLang: the batch's accept counts; "
    "vLLM: the requests scheduled with drafts), in the step-cost buckets 1, 2-3, 4-7, ...",
    "Accept-length distribution by batch size: request-steps whose step verified a number of "
    "requests in the `batch_size_bucket` (1, 2-3, 4-7, ... 2048+) and whose accept length "
    "equals `length`.",
    reading="a draft proposes the same tokens whatever the batch: a fall at large "
            "batches points at the runtime's large-batch path (padded CUDA graphs)",
    # a floor of 1000 request-steps a bucket: large batches make them fast, and the drop of
    # 0.3 tokens is then 6 standard errors of a bucket's mean (benchmarks/breakdown_rules.py)
    reads=STEP_SIZE, rule=GapRule(1000, 0.7, 0.3, ordered=True, min_apart=2),
    finding=names.LARGE_BATCH, message=messages.LARGE_BATCH,
    alert="SpectraceLargeBatchAcceptance")

# No rule (no finding, no alert): on a CPU there are no CUDA graphs, so no run here can
# measure how far a healthy draft's `graph` and `eager` buckets spread; no floor can be
# stated.
CUDA_GRAPH = Breakdown(
    "cuda_graph", names.ATTR_CUDA_GRAPH,
    "CUDA graph (whether the step's verify ran as a CUDA-graph replay)", STEP,
    (GRAPH, PIECEWISE, EAGER),
    "each step, whether the target's verify forward ran as a CUDA-graph replay, as the "
    "runtime says on the CPU (SGLang v2: the verify result's `can_run_cuda_graph`, read as "
    "the scheduler resolves the batch; vLLM with `--cudagraph-metrics`: the step's "
    "`cudagraph_stats.runtime_mode`, FULL graph, PIECEWISE piecewise, NONE eager); "
    "`unknown` where it says nothing",
    "Accept-length distribution by CUDA graph: request-steps whose step's verify ran as a "
    "CUDA-graph replay (`cuda_graph`: graph, piecewise (vLLM), eager; `unknown` where the "
    "runtime did not say) and whose accept length equals `length`.",
    reading="a draft proposes the same tokens either way: `graph` accepting less than "
            "`eager` points at the runtime's graph path (padding, a graph captured for "
            "another number of draft tokens), not the draft",
    where="SGLang 0.5.23's v2 worker; vLLM only when started with --cudagraph-metrics, "
          "otherwise `unknown`.",
    reads=GRAPHED)

SAMPLING = Breakdown(
    "sampling", names.ATTR_SAMPLING, "sampling (finished requests)", REQUEST,
    req.SAMPLING_BUCKETS,
    "each finished request's own histogram of verify steps by accepted tokens, by its "
    "temperature (greedy: temperature ~0 or top_k 1)",
    "Accept-length distribution by sampling: request-steps of finished requests by the "
    "request's `sampling` bucket (greedy, t<0.5, 0.5<=t<1, t>=1) and accept `length`; "
    "counted when the request finishes.",
    reading="drafts propose greedily, so sampled requests usually accept less and a mixed "
            "workload averages the two",
    where=VLLM_PER_REQUEST,
    of_request=lambda r: req.sampling_bucket(r.temperature, r.top_k),
    rule=req.SAMPLING_RULE, finding=names.SAMPLING_GAP, severity=INFO,
    message=messages.SAMPLING_GAP)

REQUEST_LABEL = Breakdown(
    "request_label", names.ATTR_REQUEST_LABEL,
    "request label (SPECTRACE_REQUEST_LABEL, finished requests)", REQUEST, (),
    "each finished request's own histogram, by the value of the request field "
    "SPECTRACE_REQUEST_LABEL names (at most SPECTRACE_REQUEST_LABEL_CAP values, later "
    "ones `other`)",
    "Accept-length distribution by request label: request-steps of finished requests by "
    "the value of the request field SPECTRACE_REQUEST_LABEL names (`request_label`, capped: "
    "later values `other`) and accept `length`; counted when the request finishes.",
    reading="a label whose requests accept less marks traffic the draft was not trained "
            "for (a domain, a LoRA adapter, a tenant)",
    where="Only with SPECTRACE_REQUEST_LABEL set. " + VLLM_PER_REQUEST,
    of_request=lambda r: req.label_text(r.label), capped=True,
    enabled=lambda cfg: bool(cfg.request_label),
    rule=req.LABEL_RULE, finding=names.LABEL_GAP, message=messages.LABEL_GAP,
    alert="SpectraceRequestLabelAcceptance")

PREFIX_CACHE = Breakdown(
    "prefix_cache", names.ATTR_PREFIX_CACHE,
    "prefix-cache hits (share of the prompt served from the cache, finished requests)",
    REQUEST, req.PREFIX_CACHE_BUCKETS,
    "each finished request's own histogram, by the share of its prompt the runtime served "
    "from its prefix cache (SGLang: `Req.cached_tokens` of `origin_input_ids`; vLLM: the "
    "computed tokens its scheduler first scheduled it with, local and external cache hits, "
    "of `num_prompt_tokens`)",
    "Accept-length distribution by prefix-cache hits: request-steps of finished requests by "
    "the share of the request's prompt served from the prefix cache (`prefix_cache`: none, "
    "<50%, >=50%; `unknown` where the runtime gave no prompt length) and accept `length`; "
    "counted when the request finishes.",
    reading="requests served from the cache accepting less than uncached ones point at the "
            "draft's KV of cached prefixes (stale or not written for the draft); the server "
            "settings say whether prefix caching is on",
    where="SGLang 0.5.23's v2 worker. " + VLLM_PER_REQUEST,
    of_request=lambda r: req.prefix_cache_bucket(r.cached_tokens, r.prompt_tokens),
    rule=req.PREFIX_CACHE_RULE, finding=names.PREFIX_CACHE_GAP,
    message=messages.PREFIX_CACHE_GAP, alert="SpectracePrefixCacheAcceptance")

GRAMMAR = Breakdown(
    "grammar", names.ATTR_GRAMMAR, "structured output (the request's grammar, finished requests)",
    REQUEST, req.GRAMMAR_BUCKETS,
    "each finished request's own histogram, by the kind of its structured-output "
    "constraint (SGLang: `sampling_params` json_schema, regex, ebnf, structural_tag; vLLM: "
    "`structured_output_request`'s key), `none` without one",
    "Accept-length distribution by structured output: request-steps of finished requests by "
    "the kind of the request's grammar (`grammar`: none, json, regex, grammar, choice, "
    "structural_tag) and accept `length`; counted when the request finishes.",
    reading="the draft proposes without the grammar: constrained requests accept less where "
            "its tokens break it (SGLang rejects them at verify, vLLM cuts them before); the "
            "server settings name the grammar backend",
    where="SGLang 0.5.23's v2 worker. " + VLLM_PER_REQUEST,
    of_request=lambda r: req.grammar_bucket(r.grammar),
    rule=req.GRAMMAR_RULE, finding=names.GRAMMAR_GAP, severity=INFO,
    message=messages.GRAMMAR_GAP)

BREAKDOWNS: tuple[Breakdown, ...] = (CONTEXT, SAMPLING, BATCH_SIZE, CUDA_GRAPH, REQUEST_LABEL,
                                     PREFIX_CACHE, GRAMMAR)
BY_NAME = {b.name: b for b in BREAKDOWNS}
METRICS = tuple(m for b in BREAKDOWNS for m in (b.accept_length, b.accepted_tokens))


class BucketCounts:
    """One breakdown's counts in this process: request-steps by (bucket, accept length) and
    accepted draft tokens by bucket, plain dicts the collecting thread folds into."""

    __slots__ = ("lengths", "accepted")

    def __init__(self) -> None:
        self.lengths: dict[tuple[str, int], int] = {}
        self.accepted: dict[str, int] = {}

    def add(self, bucket: str, length: int, n: int) -> None:
        """`n` request-steps of accept length `length` (accepted + bonus) in `bucket`."""
        key = (bucket, length)
        self.lengths[key] = self.lengths.get(key, 0) + n
        self.accepted[bucket] = self.accepted.get(bucket, 0) + (length - 1) * n

# the breakdowns' metrics by the names they had before they were declared here
SPEC_ACCEPT_LENGTH_BY_CONTEXT = CONTEXT.accept_length
SPEC_ACCEPTED_TOKENS_BY_CONTEXT = CONTEXT.accepted_tokens
SPEC_ACCEPT_LENGTH_BY_SAMPLING = SAMPLING.accept_length
