"""The vocabulary every signal is spoken in: the `MetricSpec` type, data-point, span and
resource attribute names, span names, finding codes and the healthy ranges. The signal
families declare their metrics with it, the run-time rules and the messages name their
findings with it; everything else reads it through `spectrace.signals`, which adds the
families' metrics (the whole contract the dashboards, alert rules and docs follow).
"""
from __future__ import annotations

import re
from dataclasses import dataclass

COUNTER = "counter"  # monotonic; Prometheus adds `_total`
GAUGE = "gauge"
HISTOGRAM = "histogram"  # Prometheus: `_bucket` (by `le`), `_sum`, `_count`


@dataclass(frozen=True)
class MetricSpec:
    name: str
    kind: str
    unit: str
    description: str
    attributes: tuple[str, ...] = ()
    # True: every rank of a group that runs the same requests records the same value
    # (request-steps, draft passes); its points carry ATTR_COUNTED, and totals add only
    # those counted `once` (spectrace.counting). False: a figure of each process.
    counted_once: bool = False
    bounds: tuple[float, ...] = ()  # HISTOGRAM: its buckets' upper edges

    def __post_init__(self) -> None:
        if self.counted_once and ATTR_COUNTED not in self.attributes:
            object.__setattr__(self, "attributes", self.attributes + (ATTR_COUNTED,))

    @property
    def prometheus_name(self) -> str:
        return prometheus_name(self.name, self.unit, self.kind)


_UNIT_SUFFIX = {"s": "seconds", "ms": "milliseconds", "By": "bytes", "1": ""}


def prometheus_name(name: str, unit: str, kind: str) -> str:
    """The name a metric arrives under in Prometheus (OTel exporter / Collector rules):
    invalid characters become `_`, units map to a suffix (curly units add nothing),
    counters gain `_total`."""
    out = re.sub(r"[^a-zA-Z0-9:]", "_", name)
    suffix = "" if unit.startswith("{") else _UNIT_SUFFIX.get(unit, unit)
    if suffix and not out.endswith("_" + suffix):
        out += "_" + suffix
    if kind == COUNTER:
        out += "_total"
    return out


# Attributes on data points (resource attributes are added per process, see telemetry).
ATTR_POSITION = "position"          # 0-based draft position
ATTR_LENGTH = "length"              # accept length (accepted + bonus) of one request-step
ATTR_PASS_KIND = "pass_kind"        # PASS_TARGET_FED | PASS_DRAFT_DECODE
ATTR_WIDTH = "width"                # hidden-state width seen by the draft
ATTR_CODE = "code"                  # finding code
ATTR_SEVERITY = "severity"
ATTR_HOOK = "hook"                  # which spectrace hook failed
ATTR_SIGNAL = "signal"              # spans | metrics | events
ATTR_WORKER = "worker"              # WORKER_V1 | WORKER_V2 | WORKER_VLLM
ATTR_TP_RANK = "tp_rank"
ATTR_MODEL = "model"                # served model name / path basename
ATTR_COUNTED = "counted"            # COUNTED_ONCE | COUNTED_COPY, on `counted_once` metrics
COUNTED_ONCE = "once"               # the rank whose request-steps totals add
COUNTED_COPY = "copy"               # another rank's request-steps: per rank, never added
ATTR_CONTEXT = "context"            # context-length bucket of a request-step (rules.context)
ATTR_SAMPLING = "sampling"          # a request's sampling bucket (rules.requests)
ATTR_REQUEST_LENGTH = "mean_accept_length"  # a finished request's bucket (rules.requests)
ATTR_PREFIX_CACHE = "prefix_cache"  # share of a request's prompt from the cache (rules.requests)
ATTR_GRAMMAR = "grammar"            # a request's structured-output kind (rules.requests)
ATTR_REQUEST_LABEL = "request_label"  # SPECTRACE_REQUEST_LABEL's value of a request (capped)
ATTR_REQUEST_LABEL_KEY = "request_label_key"  # which request field SPECTRACE_REQUEST_LABEL names
ATTR_KIND = "kind"                  # expected width: fc_in | draft_hidden | target_hidden | num_aux
ATTR_PHASE = "phase"                # step-cost phase: PHASES
ATTR_BATCH_BUCKET = "batch_size_bucket"  # "1", "2-3", "4-7", ... (step_cost.BUCKETS)
ATTR_CUDA_GRAPH = "cuda_graph"      # graph | eager | unknown: the step's verify a CUDA-graph replay
ATTR_NUM_STEPS = "num_steps"        # the draft steps (K) of the measured step

PASS_TARGET_FED = "target_fed"      # extend / draft-extend: input comes from the target
PASS_DRAFT_DECODE = "draft_decode"  # the draft's own hidden state; fc skipped by design

WORKER_V1 = "EAGLEWorker"           # SGLang's eagle workers
WORKER_V2 = "EAGLEWorkerV2"
WORKER_VLLM = "EngineCore"          # vLLM: steps are counted by the EngineCore's scheduler

# Step-cost phases (spectrace.step_cost): the whole worker step, its three parts, the
# time outside the worker between two consecutive decode steps (scheduler, sampling output),
# and the target's forward alone inside verify (timed against the tokens it processed: the
# cost model of docs/advisor.md).
PHASE_STEP = "step"
PHASE_DRAFT = "draft"
PHASE_VERIFY = "verify"
PHASE_DRAFT_EXTEND = "draft_extend"
PHASE_BETWEEN = "between_steps"
PHASE_FORWARD = "target_forward"
PHASES = (PHASE_STEP, PHASE_DRAFT, PHASE_VERIFY, PHASE_DRAFT_EXTEND, PHASE_BETWEEN,
          PHASE_FORWARD)

# The instrumentation scope of spectrace's tracer and meter (`otel_scope_name`).
SCOPE = "spectrace"

# Span names and their attributes.
SPAN_STEP = "spectrace.spec.step"
SPAN_DRAFT = "spectrace.spec.draft"
SPAN_VERIFY = "spectrace.spec.verify"
SPAN_DRAFT_EXTEND = "spectrace.spec.draft_extend"
SPAN_FINDING = "spectrace.finding"
SPAN_ATTR_BATCH_SIZE = "spectrace.batch_size"
SPAN_ATTR_NUM_STEPS = "spectrace.speculative_num_steps"
SPAN_ATTR_TOPK = "spectrace.speculative_eagle_topk"
SPAN_ATTR_NUM_DRAFT_TOKENS = "spectrace.speculative_num_draft_tokens"
SPAN_ATTR_WORKER = "spectrace.worker"
SPAN_ATTR_SGLANG_VERSION = "spectrace.sglang.version"  # SGLang processes only
SPAN_ATTR_RUNTIME = "spectrace.runtime"
SPAN_ATTR_RUNTIME_VERSION = "spectrace.runtime.version"
SPAN_ATTR_ANOMALY = "spectrace.anomaly"
# a finding, on its own span and as an event on the span in flight
SPAN_ATTR_FINDING_CODE = "spectrace.finding.code"
SPAN_ATTR_FINDING_SEVERITY = "spectrace.finding.severity"
SPAN_ATTR_FINDING_MESSAGE = "spectrace.finding.message"
# one finished request (sampled, SPECTRACE_REQUEST_SAMPLE_RATIO): the runtime's request id
SPAN_REQUEST = "spectrace.request"
SPAN_ATTR_REQUEST_ID = "spectrace.request.id"
SPAN_ATTR_REQUEST_STEPS = "spectrace.request.verify_steps"
SPAN_ATTR_REQUEST_ACCEPTED = "spectrace.request.accepted_tokens"
SPAN_ATTR_REQUEST_MEAN_LENGTH = "spectrace.request.mean_accept_length"
SPAN_ATTR_REQUEST_SAMPLING = "spectrace.request.sampling"
SPAN_ATTR_REQUEST_LABEL = "spectrace.request.label"  # SPECTRACE_REQUEST_LABEL's value (uncapped)
SPAN_ATTR_REQUEST_DRAFT_TOKENS = "spectrace.request.draft_tokens"  # drafts it could accept
# OpenTelemetry GenAI semantic conventions where they name the figure (opentelemetry-
# semantic-conventions' `gen_ai_attributes`), spectrace's own names for the rest
SPAN_ATTR_REQUEST_PROMPT_TOKENS = "gen_ai.usage.input_tokens"
SPAN_ATTR_REQUEST_CACHED_TOKENS = "gen_ai.usage.cache_read.input_tokens"  # of them, cached
SPAN_ATTR_REQUEST_TEMPERATURE = "gen_ai.request.temperature"
SPAN_ATTR_REQUEST_TOP_K = "gen_ai.request.top_k"
SPAN_ATTR_REQUEST_GRAMMAR = "spectrace.request.grammar"  # its structured-output bucket
SPAN_ATTR_REQUEST_PREFIX_CACHE = "spectrace.request.prefix_cache"  # its prefix-cache bucket
SPAN_ATTR_REQUEST_CONTEXT = "spectrace.request.context"  # the context buckets it spanned
# verify steps by draft tokens accepted (index j: j accepted, accept length j + 1)
SPAN_ATTR_REQUEST_HISTOGRAM = "spectrace.request.accepted_histogram"
SPAN_ATTR_REQUEST_ACCEPTED_PER_POSITION = "spectrace.request.accepted_per_position"
SPAN_ATTR_REQUEST_PROPOSED_PER_POSITION = "spectrace.request.proposed_per_position"
SPAN_ATTR_FORWARD_MODE = "spectrace.forward_mode"  # SGLang: the draft pass's ForwardMode

# Resource attributes (one set per process); the first three are OpenTelemetry's.
RES_SERVICE_NAME = "service.name"
RES_PROCESS_PID = "process.pid"
RES_HOST_NAME = "host.name"
RES_RUNTIME = "spectrace.runtime"                  # RUNTIME_SGLANG | RUNTIME_VLLM
RES_RUNTIME_VERSION = "spectrace.runtime.version"  # the installed release of that runtime
RES_SGLANG_VERSION = "spectrace.sglang.version"    # SGLang processes only (kept for queries)
RES_SPECTRACE_VERSION = "spectrace.version"
RES_TP_RANK = "spectrace.tp_rank"
RES_DP_RANK = "spectrace.dp_rank"
RES_PP_RANK = "spectrace.pp_rank"
RES_ROLE = "spectrace.process_role"      # ROLE_SCHEDULER | ROLE_ENGINE_CORE | ROLE_WORKER
RES_COUNTED = "spectrace.counted"        # COUNTED_ONCE | COUNTED_COPY, for the process
RES_MODEL = "spectrace.model"            # the served model name (target)
RES_DRAFT_MODEL = "spectrace.draft_model"  # the draft checkpoint path
RES_DRAFT_HASH = "spectrace.draft_hash"    # the draft's content hash (model_hash), at start-up
RES_MODEL_HASH = "spectrace.model_hash"    # the target's content hash (model_hash), at start-up
RES_SPEC_ALGORITHM = "spectrace.spec_algorithm"  # SGLang: --speculative-algorithm (NGRAM, ...); vLLM: speculative_config.method (eagle3, ngram, ...)
RES_SPEC_WORKER = "spectrace.spec_worker"        # SGLang: the worker class that runs it
RES_SETTING_PREFIX = "spectrace.setting."  # + a server setting's key (server_settings)

RUNTIME_SGLANG = "sglang"
RUNTIME_VLLM = "vllm"

ROLE_SCHEDULER = "scheduler"      # SGLang's scheduler process (runs the eagle worker)
ROLE_ENGINE_CORE = "engine_core"  # vLLM's EngineCore: steps, accept counts
ROLE_WORKER = "worker"            # a vLLM worker: everything about the models

# The counters that a run-time finding's alert counts (declared in families.draft_passes;
# spelled here so that the rules' alert declarations can name them without the families).
METRIC_FC_BYPASS = "spectrace.eagle3.fc_bypass"
METRIC_WIDTH_MISMATCH = "spectrace.eagle3.width_mismatch"
METRIC_UNUSED_KEYS = "spectrace.eagle3.unused_checkpoint_keys"
METRIC_UNLOADED_PARAMS = "spectrace.eagle3.unloaded_parameters"

# Finding codes raised at run time (the doctor uses the same codes, see docs/doctor.md).
FC_BYPASS = "eagle3.fc_bypass"
WIDTH_MISMATCH = "eagle3.width_mismatch"
AUX_CAPTURE_DISABLED = "aux.capture_disabled"
AUX_COUNT_MISMATCH = "aux.count_mismatch"
AUX_ID_MISMATCH = "aux.layer_ids_mismatch"
WEIGHTS_UNUSED_KEYS = "weights.unused_keys"
WEIGHTS_MISSING_PARAMS = "weights.missing_params"
VOCAB_D2T_MISSING = "vocab.d2t_missing"
VOCAB_D2T_ABSOLUTE = "vocab.d2t_absolute"
VOCAB_D2T_OUT_OF_RANGE = "vocab.d2t_out_of_range"
VOCAB_D2T_DUPLICATES = "vocab.d2t_duplicates"
ACCEPTANCE_SYNTHETIC = "acceptance.synthetic"  # the runtime accepts by a synthetic rule
DRAFT_NON_FINITE = "draft.non_finite"          # inf/nan in the draft's hidden states or logits
# (their severity, meaning and alert are declared beside each rule; the run-time ones are
# listed in `families.findings.RUNTIME_SPECS`)
# Findings `spectrace report` judges from the totals (no run-time event): the long-context
# one from request-steps by context length (a floor of request-steps, rules.context);
# the speculation ones from measured step costs (spectrace.report.advisor).
LONG_CONTEXT = "acceptance.long_context"
SPEC_SLOWER = "speculation.slower"            # estimated speed-up below 1.0
SPEC_SMALL_GAIN = "speculation.small_gain"    # estimated speed-up below 1.1
SPEC_FEWER_STEPS = "speculation.fewer_steps_faster"  # another number of draft tokens pays more
LARGE_BATCH = "acceptance.large_batch"       # acceptance at large batch sizes well below small
SAMPLING_GAP = "acceptance.sampling_gap"     # sampled requests well below greedy (info: expected)
LABEL_GAP = "acceptance.label_gap"           # one request label's requests well below another's
PREFIX_CACHE_GAP = "acceptance.prefix_cache_gap"  # prefix-cache hits well below uncached requests
GRAMMAR_GAP = "acceptance.grammar_gap"       # one structured-output kind well below another (info)
# requests far outside the deployment's acceptance, named by id (rules.outliers)
REQUEST_LOW = "requests.low_acceptance"              # far below: garbled output, unseen traffic
REQUEST_IMPLAUSIBLE = "requests.implausible_acceptance"  # > 0.96: a loop, or a KV race
# acceptance in a recent window well below the process's earlier windows (rules.drift):
# a warning where it fell within the breakdowns' buckets (the system), info where a
# breakdown's mix moved and explains it (the traffic)
ACCEPTANCE_DRIFT = "acceptance.drift"
# the run's mean accept length well below the draft's reference (rules.reference)
BELOW_REFERENCE = "acceptance.below_reference"
RES_EXPECTED_ACCEPT_LENGTH = "spectrace.expected_accept_length"  # SPECTRACE_EXPECTED_ACCEPT_LENGTH
# (their severity, floor and alert are declared beside each rule: `report.judgement.RULES`)
# Healthy ranges, shared by the dashboards, the alert rules and `spectrace report --html`:
# a mean acceptance length (bonus token included) below 1.2 means speculation gains
# nothing (broken deployments show 1.00-1.12), 1.2-2.0 is weak, above 2.0 healthy (chain
# drafting with 3-4 steps typically gives 2-3.5); position-0 acceptance below 0.2 points
# at a broken draft input.
ACCEPT_LENGTH_RED_BELOW = 1.2
ACCEPT_LENGTH_AMBER_BELOW = 2.0
POSITION0_RED_BELOW = 0.2

# Codes only the static checks (`spectrace doctor`) raise (declared beside each check:
# `doctor.judge.codes.DOCTOR_SPECS`; docs/doctor.md has an example of each).
FC_CONFIG_WIDTH_MISMATCH = "fc.width_mismatch"
AUX_LAYER_IDS_OUT_OF_RANGE = "aux.layer_ids_out_of_range"
AUX_LAYER_IDS_MISREAD = "aux.layer_ids_misread"  # ids read in another convention / ignored
SHAPE_MISMATCH = "shape.mismatch"
CONFIG_LAYERS_UNSUPPORTED = "config.num_layers_unsupported"
CONFIG_UNSUPPORTED = "config.unsupported"        # the runtime cannot build the draft at all
CONFIG_SETTING_IGNORED = "config.setting_ignored"  # trained with a setting the runtime lacks
CONFIG_FIELD_TYPE = "config.field_type"  # a field the runtime's strict config class refuses
VOCAB_D2T_DTYPE = "vocab.d2t_dtype"
POSITIONS_BEYOND_DRAFT = "positions.beyond_draft"  # served longer than the draft's positions
POSITIONS_ROPE_CHANGED = "positions.rope_changed"  # the draft's RoPE is not the target's
AUX_LAYER_IDS_DEFAULT = "aux.layer_ids_default"    # no ids: the runtime captures its default
# dtype, quantized target, tokenizer (docs/doctor.md "Beyond the weight keys")
DTYPE_FLOAT16_OVERFLOW = "dtype.float16_overflow"  # weights beyond float16's range, run in float16
DTYPE_FLOAT16 = "dtype.float16"                    # a wider-range draft run in float16
DTYPE_CAST = "dtype.cast"                          # run in another dtype than saved (harmless)
TARGET_QUANTIZED = "target.quantized"              # the target is served quantized
VOCAB_TOKENIZER_MISMATCH = "vocab.tokenizer_mismatch"  # draft and target tokenizer files differ
VOCAB_SPECIAL_TOKENS_MISMATCH = "vocab.special_tokens_mismatch"  # bos/eos/pad ids differ
# the draft's training chat template against the target's (doctor.judge.chat_templates)
# (where nothing is recorded the report's `chat template:` line says so: no finding)
CHAT_TEMPLATE_MISMATCH = "chat_template.mismatch"    # trained with another template
