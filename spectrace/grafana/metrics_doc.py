"""docs/metrics.md, generated from `spectrace.signals` so the table cannot drift."""
from __future__ import annotations

from .. import server_settings, signals as S
from ..families.breakdowns import BREAKDOWNS

from . import promql as Q
from . import rules_doc, series_budget
from . import overview
from .overview import HEALTHY_ACCEPT_LENGTH

BY = Q.SCRAPE_LABELS
RESOURCE = (
    (S.RES_SERVICE_NAME, "service_name", "OTEL_SERVICE_NAME (default: the runtime, `sglang` or "
     "`vllm`)"),
    (S.RES_RUNTIME, "spectrace_runtime", "`sglang` or `vllm`: the runtime whose hooks "
     "reported; the dashboards' Runtime variable"),
    (S.RES_RUNTIME_VERSION, "spectrace_runtime_version", "that runtime's installed release"),
    (S.RES_MODEL, "spectrace_model", "the served model name; the dashboards' Model "
     "variable"),
    (S.RES_DRAFT_MODEL, "spectrace_draft_model", "the draft checkpoint path"),
    (S.RES_EXPECTED_ACCEPT_LENGTH, "spectrace_expected_accept_length", "the operator's "
     "reference, `SPECTRACE_EXPECTED_ACCEPT_LENGTH`, when set (`acceptance.below_reference`)"),
    (S.RES_DRAFT_HASH, "spectrace_draft_hash", "the draft folder's content hash, read once "
     "at start-up (`sha256:` + 16 hex: config.json, safetensors headers, sampled weight "
     "bytes; docs/report.md, \"--baseline\"); none for a folder that is not local"),
    (S.RES_MODEL_HASH, "spectrace_model_hash", "the target folder's content hash, the same "
     "way"),
    (S.RES_SPEC_ALGORITHM, "spectrace_spec_algorithm", "SGLang: the speculative algorithm "
     "(`--speculative-algorithm`: EAGLE3, NGRAM, STANDALONE, a plugin's name, ...); "
     "vLLM: the method as `speculative_config.method` spells it (eagle3, ngram, mtp, "
     "dflash, ...)"),
    (S.RES_SPEC_WORKER, "spectrace_spec_worker", "SGLang: the worker class that runs it "
     "(`EAGLEWorkerV2`, `NGRAMWorker`, `StandaloneWorkerV2`, ...)"),
    (S.RES_PROCESS_PID, "process_pid", "the worker process"),
    (S.RES_HOST_NAME, "host_name", "machine"),
    (S.RES_TP_RANK, "spectrace_tp_rank", "tensor-parallel rank (SGLang: the port "
     "offset is pp_rank x tp_size + tp_rank, plus dp_rank x pp_size x tp_size for DP "
     "replicas without attention DP; a vLLM EngineCore has none)"),
    (S.RES_DP_RANK, "spectrace_dp_rank", "data-parallel rank, when known"),
    (S.RES_PP_RANK, "spectrace_pp_rank", "pipeline-parallel rank, when known"),
    (S.RES_COUNTED, "spectrace_counted", "`once`: this process's request-steps and draft "
     "passes are the ones totals add; `copy`: a tensor-parallel rank (or an earlier "
     "pipeline stage) that sees the same request-steps as its group's rank 0"),
    (S.RES_ROLE, "spectrace_process_role", "`scheduler` for SGLang's eagle worker; "
     "`engine_core` (accept counts, steps) or `worker` (widths, load, audit, agreement) "
     "for vLLM"),
    (S.RES_SPECTRACE_VERSION, "spectrace_version", "spectrace version"),
    (S.RES_SGLANG_VERSION, "spectrace_sglang_version", "SGLang version (SGLang processes "
     "only; kept so existing queries work)"),
    (server_settings.PREFIX + "<key>", "spectrace_setting_<key>", "the server settings that "
     "change acceptance, read at start-up from the runtime's own config (SGLang's "
     "ServerArgs, vLLM's VllmConfig; docs/report.md, \"The server settings\"), one each, "
     "left out where the runtime has no such setting: " + ", ".join(
         f"`{s.key}` ({s.label})" for s in server_settings.SETTINGS)),
)


# span or span attribute -> what it is (every SPAN_* name of `signals`: tests check it)
SPANS = (
    (S.SPAN_STEP, "one sampled speculative step (`SPECTRACE_STEP_SAMPLE_RATIO`)"),
    (S.SPAN_DRAFT, "SGLang: the draft rounds of a sampled step (v2: from the step's start "
     "until verify starts)"),
    (S.SPAN_VERIFY, "SGLang: the target's verify pass of a sampled step"),
    (S.SPAN_DRAFT_EXTEND, "SGLang: the draft's extend pass after verify (v2: from verify's end "
     "to the step's end)"),
    (S.SPAN_FINDING, "one finding (the first ones of each code per process)"),
    (S.SPAN_REQUEST, "SGLang, vLLM: one finished request (`SPECTRACE_REQUEST_SAMPLE_RATIO`, "
     "default 0.1), named by the runtime's own request id; in the caller's trace when the "
     "runtime traces the request (SGLang `--enable-trace`: a child of its `Req <rid>` span; "
     "vLLM `--otlp-traces-endpoint`: a child of the caller's span, beside `llm_request`), "
     "the caller's sampled flag deciding (docs/dashboards.md, \"One trace per request\"); "
     "it repeats the draft's identity from spectrace's resource (`spectrace.draft_model`, "
     "`spectrace.draft_hash`, `spectrace.spec_algorithm`, where known): with the host's "
     "tracer provider (SGLang `--enable-trace`) the span goes out under the host's "
     "resource, which names no draft"),
)
SPAN_ATTRIBUTES = (
    (S.SPAN_ATTR_REQUEST_ID, "request: the runtime's request id (SGLang's `rid`, as in "
     "its meta_info `id` and its logs; vLLM's engine request id, the response's `id` "
     "followed by `-<index>-<8 random characters>`)"),
    (S.SPAN_ATTR_REQUEST_STEPS, "request: its verify steps (meta_info `spec_verify_ct`; "
     "vLLM: `metrics.speculative_decoding.num_spec_steps`)"),
    (S.SPAN_ATTR_REQUEST_ACCEPTED, "request: draft tokens accepted (meta_info "
     "`spec_num_correct_drafts`; vLLM: `num_accepted_draft_tokens`)"),
    (S.SPAN_ATTR_REQUEST_MEAN_LENGTH, "request: 1 + accepted / verify steps"),
    (S.SPAN_ATTR_REQUEST_SAMPLING, "request: its sampling bucket (`greedy`, `t<0.5`, "
     "`0.5<=t<1`, `t>=1`)"),
    (S.SPAN_ATTR_REQUEST_LABEL, "request: the value of the field `SPECTRACE_REQUEST_LABEL` "
     "names (uncapped, at most 64 characters; `none` when the request has none); only "
     "while a label is set"),
    (S.SPAN_ATTR_REQUEST_DRAFT_TOKENS, "request: the draft tokens it could accept (vLLM's "
     "own count with --per-request-spec-decode-metrics, grammar-cut drafts left out; else "
     "verify steps x K): its acceptance rate is accepted_tokens over this"),
    (S.SPAN_ATTR_REQUEST_HISTOGRAM, "request: its verify steps by draft tokens accepted "
     "(index j: j accepted, accept length j + 1; vLLM's "
     "`metrics.speculative_decoding.acceptance_histogram`, SGLang's "
     "`spec_correct_drafts_histogram`, its steps with no draft taken off index 0); only "
     "where the runtime keeps one that sums to the verify steps"),
    (S.SPAN_ATTR_REQUEST_ACCEPTED_PER_POSITION, "request: draft tokens accepted at each "
     "draft position 0..K-1, from the histogram by the chain rule (a step with j accepted "
     "accepted positions 0..j-1); with the histogram only"),
    (S.SPAN_ATTR_REQUEST_PROPOSED_PER_POSITION, "request: draft tokens proposed at each "
     "position: its verify steps at every one, where K is known (once the process counted "
     "a step) and the runtime's draft count is verify steps x K; absent where K is unknown "
     "or the runtime drafted fewer on some steps (vLLM near a request's end), which do "
     "not say at which positions"),
    (S.SPAN_ATTR_REQUEST_PROMPT_TOKENS, "request: its prompt's tokens (GenAI semantic "
     "conventions; SGLang: `origin_input_ids`; vLLM: `num_prompt_tokens`); with "
     "`gen_ai.usage.cache_read.input_tokens`, only where the runtime gave both"),
    (S.SPAN_ATTR_REQUEST_CACHED_TOKENS, "request: of them, served from the prefix cache "
     "(GenAI semantic conventions; meta_info `cached_tokens`; vLLM: the computed tokens it "
     "was first scheduled with, as `usage.prompt_tokens_details.cached_tokens`)"),
    (S.SPAN_ATTR_REQUEST_TEMPERATURE, "request: its sampling temperature as the runtime "
     "holds it (GenAI semantic conventions; vLLM: 0 for a greedy request)"),
    (S.SPAN_ATTR_REQUEST_TOP_K, "request: its top-k as the runtime holds it (GenAI "
     "semantic conventions, a double; the runtime's own value for no limit: vLLM 0 or -1, "
     "SGLang 2^30)"),
    (S.SPAN_ATTR_REQUEST_PREFIX_CACHE, "request: its prefix-cache bucket (`none`, `<50%`, "
     "`>=50%`, `unknown` without its prompt's length)"),
    (S.SPAN_ATTR_REQUEST_CONTEXT, "request: the context buckets its steps fell in, from "
     "its prompt + 1 to its final length less one (at a bucket's edge one more than its "
     "steps were counted in, within its last step's tokens); only with its prompt's length"),
    (S.SPAN_ATTR_REQUEST_GRAMMAR, "request: its structured-output bucket (`none`, `json`, "
     "`regex`, `grammar`, `choice`, `structural_tag`)"),
    (S.SPAN_ATTR_BATCH_SIZE, "step: requests in the batch"),
    (S.SPAN_ATTR_NUM_STEPS, "step: speculative steps (draft tokens per chain)"),
    (S.SPAN_ATTR_TOPK, "step: draft top-k (1 for a chain)"),
    (S.SPAN_ATTR_NUM_DRAFT_TOKENS, "step: draft tokens verified per request"),
    (S.SPAN_ATTR_WORKER, "step: the worker kind (`EAGLEWorker`, `EAGLEWorkerV2`, "
     "`EngineCore`)"),
    (S.SPAN_ATTR_RUNTIME, "step: `sglang` or `vllm`"),
    (S.SPAN_ATTR_RUNTIME_VERSION, "step: that runtime's installed release"),
    (S.SPAN_ATTR_SGLANG_VERSION, "step: SGLang's release (SGLang processes only)"),
    (S.SPAN_ATTR_ANOMALY, "true on a finding's span and on the span a finding happened in"),
    (S.SPAN_ATTR_FINDING_CODE, "finding: its code (docs/doctor.md lists them)"),
    (S.SPAN_ATTR_FINDING_SEVERITY, "finding: `error`, `warning` or `info`"),
    (S.SPAN_ATTR_FINDING_MESSAGE, "finding: what is wrong and the fix"),
    (S.SPAN_ATTR_FORWARD_MODE, "finding from an SGLang draft pass: its `ForwardMode`"),
)


def derived_queries() -> list[tuple[str, str, str]]:
    """(figure, PromQL, meaning): the derived figures, per counting endpoint, and the
    totals and per-rank views."""
    return [
        ("Request-steps verified since start", Q.stotal(S.SPEC_DRAFTS),
         "every request-step once, over all processes (restarts start again at 0)"),
        ("Accepted draft tokens since start", Q.stotal(S.SPEC_ACCEPTED_TOKENS),
         "accepted draft tokens, each once, over all processes"),
        ("Acceptance rate", Q.acceptance_rate("5m", BY),
         "accepted draft tokens / proposed draft tokens (0-1)"),
        ("Mean acceptance length", Q.mean_acceptance_length("5m", BY),
         "tokens per verify step, bonus token included; 1.0 = no gain"),
        ("Per-position acceptance", Q.per_position_acceptance("5m", BY),
         "share of request-steps whose draft token at `position` was accepted"),
        ("Draft/target agreement per position", Q.agreement_per_position("5m", BY),
         "share of compared request-steps where draft and target agree at `position`"),
        ("Accept-length distribution", Q.accept_length_share("1h", BY),
         "share of request-steps by accept length over the last hour"),
        ("Tokens emitted per second", Q.target_tokens_per_second("5m", BY),
         "accepted draft tokens + bonus tokens per second"),
        ("Dropped weights", Q.dropped_weights(BY),
         "unused checkpoint keys + unloaded draft parameters since process start"),
        ("Mean acceptance length with the TP rank",
         f"({Q.mean_acceptance_length('5m', BY, copies=True)}) * on (job, instance) "
         "group_left (spectrace_tp_rank) target_info",
         "per rank, tensor-parallel copies included: resource attributes arrive only on "
         "`target_info`; join them in by job/instance"),
    ]


def panel_scopes() -> list[tuple[str, str]]:
    """(panel title, how it counts) of every overview panel, from its description."""
    words = ((overview.ONCE, "once: each request-step once, copies left out"),
             (overview.PER_RANK, "per rank: a line per process, copies included"),
             (overview.PER_PROCESS, "per process (one bar each, or the process with most)"),
             ("Per process.", "per process"))
    return [(p["title"], next(w for text, w in words if text in p["description"]))
            for p in overview.panels()]


def _row(cells) -> str:
    return "| " + " | ".join(str(c).replace("|", "\\|") for c in cells) + " |"


def _findings_table(specs, when: str) -> list[str]:
    rows = [f"| code | severity | meaning | {when} | alert |", "|---|---|---|---|---|"]
    for s in specs:
        cells = [f"`{s.code}`", s.severity, s.what, s.floor or "-",
                 f"`{s.alert.name}`" if s.alert else "-"]
        rows.append(_row(cells))
    return rows


def runtime_findings() -> list[str]:
    """The findings raised in the server's processes, one row each, written from their
    declarations (`families.findings.RUNTIME_SPECS`)."""
    from ..families.findings import RUNTIME_SPECS
    return [
        "## Findings raised at run time",
        "",
        "Raised in the server's processes as they happen (counted in `spectrace.findings`, "
        "written in full for their first occurrences, logged once); one is evidence. "
        "Declared once beside its rule (`FindingSpec` in `spectrace/rules/`), from which "
        "this table follows; `spectrace doctor` raises the vocabulary-map and weight ones "
        "on a checkpoint too (docs/doctor.md).",
        "",
        *_findings_table(RUNTIME_SPECS, "raised on"),
        "",
    ]


def _report_specs():
    from ..report.judgement import SPECS
    return SPECS.values()


def report_findings() -> list[str]:
    """The findings `spectrace report` judges from the totals, one row each, written from
    their declarations (`report.judgement.RULES`)."""
    from ..report.judgement import SPECS
    return [
        "## Findings `spectrace report` judges",
        "",
        "Judged from the totals, never from a single event; each is raised only past its "
        "floor. Declared once beside its rule (`FindingSpec`: `spectrace/report/"
        "judgement.py` lists the rules), from which this table follows.",
        "",
        *_findings_table(SPECS.values(), "raised only with"),
        "",
    ]


def render() -> str:
    lines = [
        "# spectrace metrics",
        "",
        "<!-- Generated by `python grafana/build_dashboards.py` from spectrace/signals.py;"
        " do not edit by hand (tests/test_dashboards.py checks it is current). -->",
        "",
        "Every metric spectrace exports, under its OpenTelemetry name and the name it "
        "arrives as in Prometheus. The Prometheus exporter (`SPECTRACE_EXPORTERS=prometheus`, "
        "one endpoint per rank on `SPECTRACE_PROMETHEUS_PORT` + rank; vLLM: the EngineCore "
        "on the base port, worker rank r on base + 1 + r) and the OpenTelemetry "
        "Collector's `prometheus` exporter translate names the same way: characters outside "
        "`[a-zA-Z0-9:]` become `_`, curly units such as `{token}` add nothing, counters "
        "gain `_total` (histograms would gain `_bucket`, `_sum`, `_count`).",
        "",
        "| OTel name | Prometheus name | kind | unit | attributes | meaning |",
        "|---|---|---|---|---|---|",
    ]
    for m in S.ALL_METRICS:
        attrs = ", ".join(f"`{a}`" for a in m.attributes) or "-"
        lines.append(_row([f"`{m.name}`", f"`{m.prometheus_name}`", m.kind, f"`{m.unit}`",
                           attrs, m.description]))
    lines += [
        "",
        "## Breakdowns of acceptance",
        "",
        "Each breakdown is declared once (`spectrace/families/breakdowns.py`): its source, "
        "buckets and cap, from which its two metrics (`accept_length_by_<name>`, "
        "`accepted_tokens_by_<name>`), the report's table (`by_<name>` in `--json`), the "
        "dashboard panel and the rule between its buckets follow.",
        "",
        "| breakdown | attribute | counted | value | buckets | rule (report finding, alert) |",
        "|---|---|---|---|---|---|",
    ]
    for b in BREAKDOWNS:
        rule = "-"
        if b.rule is not None:
            named = (f"`{b.finding}` ({b.severity}), `{b.alert}`" if b.alert else
                     f"`{b.finding}` ({b.severity}; no alert)")
            rule = f"{named}: {b.rule.words()}"
        buckets = ", ".join(f"`{x}`" for x in b.buckets) if b.buckets else (
            "the values seen (capped)")
        lines.append(_row([f"`{b.name}`", f"`{b.attribute}`",
                           "per step" if b.source == "step" else "per finished request",
                           b.value + (f" ({b.where})" if b.where else ""), buckets, rule]))
    lines += [
        "",
        "Where each runtime gives spectrace the data (no device sync, fixed bounded "
        "attribute values):",
        "",
        "| breakdown | SGLang v2 worker (0.5.23) | SGLang v2 0.5.5 - 0.5.22, v1 worker | vLLM |",
        "|---|---|---|---|",
        "| `accept_length_by_context` | each request-step, from the batch's `seq_lens_cpu` "
        "(SGLang's host copy of the sequence lengths, kept by reference, bucketed at "
        "collection); `unknown` where the attention backend opts out of that copy "
        "(`needs_cpu_seq_lens = False`, e.g. trtllm_mha) | not recorded (no hook on the "
        "scheduler's resolve step there) | each request-step (V1 engine, either model "
        "runner): the request's computed tokens when the scheduler scheduled the step "
        "(`scheduled_cached_reqs.num_computed_tokens`) plus the token it sampled last, "
        "paired with its accept count at the scheduler's `update_from_output` (references "
        "kept, read at collection); under async scheduling up to K tokens more (the step "
        "before's drafts, rejected ones too). When vLLM logs stats, a step whose requests "
        "share one bucket counts vLLM's own `SpecDecodingStats` there; a step mixing buckets "
        "counts each request's sampled tokens, so the last step of a request that stopped "
        "inside its drafts counts the tokens vLLM kept (vLLM trims them) |",
        "| `accept_length_by_batch_size` | each step's accept counts: their number is the "
        "step's batch size | the same (v1: verify's counts; v2 0.5.5 - 0.5.8: the "
        "scheduler's) | each step: the requests with drafts (`SpecDecodingStats.num_drafts`, "
        "or the requests scheduled with drafts when vLLM logs no stats) |",
        "| `accept_length_by_cuda_graph` | each step: the verify result's "
        "`can_run_cuda_graph` (`GenerationBatchResult`, a bool the target's model runner sets "
        "on the CPU), read as the scheduler resolves the batch (`_resolve_spec_v2_tokens`); "
        "the field defaults to False, so a path that never sets it counts as eager "
        "| `unknown` (no hook on the scheduler's resolve step there) | each step: vLLM "
        "decides its CUDA-graph mode in the worker's model runner (its dispatcher's "
        "`cudagraph_mode` and `BatchDescriptor`); it reaches the EngineCore, where the "
        "accept counts are counted, only as `ModelRunnerOutput.cudagraph_stats.runtime_mode` "
        "(`FULL` graph, `PIECEWISE` piecewise, `NONE` eager; either model runner), when vLLM "
        "runs with `--cudagraph-metrics` (off by default); without it `unknown` |",
        "| `accept_length_by_sampling` | each finished request's own histogram "
        "(`spec_correct_drafts_histogram`), by its temperature / top_k | not recorded | "
        "each finished request's own histogram (`Request.spec_decode_metrics`), by its "
        "`SamplingParams` (vLLM's `sampling_type` GREEDY is `greedy`, else the temperature's "
        "bucket), only when vLLM runs with `--per-request-spec-decode-metrics summary` (or "
        "`detailed`; 0.33 has it, 0.26 not); without it not recorded |",
        "| `accept_length_by_prefix_cache` | each finished request's own histogram, by "
        "`Req.cached_tokens` (its `meta_info.cached_tokens`) over `len(origin_input_ids)` "
        "| not recorded | each finished request's own histogram, by the computed tokens "
        "the scheduler first scheduled it with (`scheduled_new_reqs[i].num_computed_tokens`"
        ": local and external cache hits, vLLM's `PrefillStats.num_cached_tokens`, which the "
        "request drops with its first output since 0.20) over `num_prompt_tokens`; with "
        "`--per-request-spec-decode-metrics` as above |",
        "| `accept_length_by_grammar` | each finished request's own histogram, by the "
        "first of `SamplingParams` `json_schema`, `regex`, `ebnf`, `structural_tag` set "
        "(the grammar manager's order) | not recorded | each finished request's own "
        "histogram, by its `structured_output_request.structured_output_key` (JSON and "
        "JSON object: `json`; grammar: `grammar`; regex, choice, structural tag); with "
        "`--per-request-spec-decode-metrics` as above |",
        "| `requests`, request spans | at `_prepare_kv_cache_release` (not with decode KV "
        "offload, `disaggregation_decode_enable_offload_kvcache`) | not recorded | at "
        "`Scheduler._free_request` (finished and aborted requests), with "
        "`--per-request-spec-decode-metrics` as above; the span carries vLLM's engine "
        "request id |",
        "| `request_label` (`SPECTRACE_REQUEST_LABEL`) | `routing_key`, `extra_key`, "
        "`priority`, `lora` (`Req.lora_id`: the loaded adapter's uuid, not its name) | "
        "not recorded | `priority`, `lora` (the LoRA "
        "adapter's name); `routing_key` and `extra_key` are `none` (vLLM's requests carry "
        "neither) |",
        "",
        "vLLM has no per-request breakdown without "
        "`--per-request-spec-decode-metrics` (its step counters aggregate per step); with "
        "it, spectrace's per-request figures are vLLM's own, the ones each response carries "
        "in `metrics.speculative_decoding` (vLLM omits that field for `n > 1`; spectrace "
        "counts each of the n sequences, as vLLM keeps them). On this CPU build vLLM "
        "samples and verifies sampled requests as sampled (its rejection sampler), so they "
        "accept by chance, unlike SGLang's CPU path.",
        "",
        "**Request label.** Off by default. `SPECTRACE_REQUEST_LABEL=<field>` labels the "
        "finished-request distribution (`spectrace.spec.requests`, attribute "
        "`request_label`) with that request field's value, as the process that reads a "
        "finished request has it: SGLang's scheduler, vLLM's EngineCore. SGLang's own custom "
        "metric labels (`--tokenizer-metrics-custom-labels-header`, "
        "`--tokenizer-metrics-allowed-custom-labels`) cannot be used: SGLang 0.5.23 keeps "
        "them in its tokenizer process (`GenerateReqInput.custom_labels`; "
        "`TokenizedGenerateReqInput` has no such field), so the scheduler's `Req` never "
        "sees them. The nearest field that does reach it is `routing_key` (the request's "
        "`routing_key` or its `x-smg-routing-key` header; it only changes scheduling under "
        "the routing-key schedule policy); `extra_key` also reaches it but isolates the "
        "prefix cache per value, and `priority` is a whole number. The first "
        "`SPECTRACE_REQUEST_LABEL_CAP` distinct values (default 32, at most 1000) per "
        "process are kept, every later one counts as `other`, and those requests are "
        "counted in `spectrace.spec.request_label_overflow`; `spectrace report` lists the "
        "requests per value and says how many went to `other` (an info line, never a "
        "finding). The series of `spectrace.spec.requests` grow to at most 17 x (cap + 1) "
        "per process.",
        "",
        *rules_doc.breakdown_rules(),
        *runtime_findings(),
        *report_findings(),
        *rules_doc.declared_sections(_report_specs()),
        "## Counting once across ranks",
        "",
        "Ranks that run the same requests at the same pipeline stage see the same "
        "request-steps and run the draft on the same passes: SGLang's tensor-parallel ranks "
        "of one attention group (attention-TP x attention-CP), vLLM's tensor-parallel "
        "workers of one engine. So each request-step is counted once, by one process per "
        "group: SGLang's attention-TP rank 0 (attention-CP rank 0) on the last pipeline "
        "stage (only it verifies and drafts); vLLM's EngineCore for steps and accept counts "
        "(one per data-parallel rank) and its tensor-parallel rank 0 worker on the last "
        "stage for draft passes and agreement. Its series of the metrics marked *once* "
        f"below carry `{S.ATTR_COUNTED}=\"{S.COUNTED_ONCE}\"`; every other rank's carry "
        f"`{S.ATTR_COUNTED}=\"{S.COUNTED_COPY}\"`: its own per-rank view, never added. "
        "Data-parallel groups (SGLang's DP attention and DP replicas, vLLM's DP engines) "
        "serve different requests: each has its own counting process, and totals add "
        f"them. Every total is therefore `sum(metric{{{Q.ONCE}}})` (an older spectrace's "
        "series, without the label, match too); the per-rank view is the same metric "
        "without the matcher, by `instance`. Metrics marked *per process* (weights, "
        "findings, errors) belong to each process: every rank loads its own draft and "
        "raises its own findings, so their panels show each process or the one with most, "
        "never a sum that multiplies with the ranks. spectrace reads who is rank 0 from "
        "the runtime's own parallel state (SGLang: `get_parallel()` or the older "
        "`dp_attention` / `get_pp_group()` helpers, else its server arguments; vLLM: its "
        "tensor and pipeline groups), and notes it as the resource attribute "
        f"`{S.RES_COUNTED}`, which `spectrace report` reads the same way. Why a label "
        "rather than rank 0 exporting alone: every rank's own figures stay available (a "
        "rank whose draft sees other widths, or falls behind, shows), plain per-instance "
        "queries keep working, and the rule is decided once, in the process that knows "
        "its place, instead of in every query.",
        "",
        "| metric | counted |",
        "|---|---|",
    ]
    lines += [_row([f"`{m.prometheus_name}`", "once" if m.counted_once else "per process"])
              for m in S.ALL_METRICS]
    lines += [
        "",
        "What each panel of the overview dashboard shows:",
        "",
        "| panel | counted |",
        "|---|---|",
    ]
    lines += [_row([title, scope]) for title, scope in panel_scopes()]
    lines += [
        "",
        "Counters without attributes (drafts, draft and accepted tokens, fc bypass, width "
        "mismatch, unused keys, unloaded parameters, internal errors) exist from the "
        "worker's start at 0, so a healthy deployment shows 0, not \"No data\". A series "
        "with an attribute (a `position`, a `length`, a finding `code`) appears with its "
        "first value; so panels and alerts on one-off events (findings, dropped weights) "
        "compare totals since process start, not `increase()`, which misses a series' "
        "first value.",
        "",
        "## Labels",
        "",
        "Data points carry only the attributes above. Prometheus adds `job` and `instance` "
        "(the scrape target; with one endpoint per rank, `instance` identifies the rank). "
        "vLLM reports from two kinds of process: its EngineCore exports steps and accept "
        "counts, its workers everything about the models (widths, fc bypass, weights, the "
        "aux audit, token agreement); the totals add over instances, so both show. "
        "Resource attributes are exported once per process, on `target_info`:",
        "",
        "| resource attribute | label on `target_info` | meaning |",
        "|---|---|---|",
    ]
    lines += [_row([f"`{a}`", f"`{lbl}`", doc]) for a, lbl, doc in RESOURCE]
    lines += ["", *series_budget.doc_lines()]
    lines += [
        "",
        "## Spans",
        "",
        "Traces carry these spans (sampled steps and findings) and attributes; a finding is "
        "also an event, named by its code, on the span in flight when it happened.",
        "",
        "| span or attribute | meaning |",
        "|---|---|",
    ]
    lines += [_row([f"`{name}`", doc]) for name, doc in SPANS + SPAN_ATTRIBUTES]
    lines += [
        "",
        "## Derived figures (PromQL)",
        "",
        "Acceptance length counts the bonus token, so 1.0 means speculation gains nothing. "
        f"Healthy ranges (dashboard thresholds, `spectrace.signals`): mean acceptance length "
        f"{HEALTHY_ACCEPT_LENGTH}; position-0 acceptance red below {S.POSITION0_RED_BELOW}.",
        "",
    ]
    for title, expr, meaning in derived_queries():
        lines += [f"### {title}", "", meaning + ".", "", "```promql", expr, "```", ""]
    lines += [
        "The dashboards use the same expressions with `$__rate_interval` and the filter "
        f"`{{{Q.DASHBOARD_FILTER}}}`; the alert rules are in `grafana/alerts/spectrace-rules.yml`.",
        "",
    ]
    return "\n".join(lines)
