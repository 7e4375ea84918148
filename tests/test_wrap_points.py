"""Every class, method, parameter and attribute spectrace's adapters wrap or read, checked
against the real released SGLang sources, in the versions where each adapter expects it.

The wheels are fetched once (scripts/fetch_release_sources.py) and their sources are parsed with
`ast` (tests/wheel_sources.py): nothing is imported, so no GPU, torch or SGLang install is
needed. The tables below are the adapter contract (docs/sglang-versions.md).
"""
from __future__ import annotations

import ast
import functools

import pytest

import wheel_sources as ws
from wheel_sources import rows

pytestmark = pytest.mark.sources

VERSIONS = ("0.5.5", "0.5.8", "0.5.12", "0.5.16", "0.5.23")


since = functools.partial(ws.since, VERSIONS)
until = functools.partial(ws.until, VERSIONS)


ALL = VERSIONS
V1 = until("0.5.12")  # the v1 EAGLEWorker module is removed in 0.5.16

W1 = "sglang/srt/speculative/eagle_worker.py"
W2 = "sglang/srt/speculative/eagle_worker_v2.py"
INFO = "sglang/srt/speculative/eagle_info.py"
MIXIN = "sglang/srt/managers/scheduler_output_processor_mixin.py"
RESULT = "sglang/srt/managers/utils.py"
TP = "sglang/srt/managers/tp_worker.py"
E3 = "sglang/srt/models/llama_eagle3.py"
K25 = "sglang/srt/models/kimi_k25_eagle3.py"  # the MLA EAGLE-3 draft (0.5.12+)
LLAMA = "sglang/srt/models/llama.py"
REQ = "sglang/srt/managers/schedule_batch.py"
# The other algorithms' workers (adapters/sglang_algorithms.py: rows of 0.5.23)
SPECD = "sglang/srt/speculative/"
BASE = SPECD + "base_spec_worker.py"
STANDALONE = SPECD + "standalone_worker_v2.py"
FROZEN = SPECD + "frozen_kv_mtp_worker_v2.py"
MULTI = SPECD + "multi_layer_eagle_worker_v2.py"
DFLASH = SPECD + "dflash_worker_v2.py"
DSPARK = SPECD + "dspark_components/dspark_worker_v2.py"
UNO = SPECD + "uno_worker_v2.py"
NGRAM = SPECD + "ngram_worker.py"
V23 = ("0.5.23",)
# (file, class) of every worker with a constructor and a step of its own
OWN_STEP = [(FROZEN, "FrozenKVMTPWorkerV2"), (MULTI, "MultiLayerEagleWorkerV2"),
            (DFLASH, "DFlashWorkerV2"), (DSPARK, "DSparkWorkerV2"), (UNO, "UnoWorkerV2"),
            (NGRAM, "NGRAMWorker")]
BRP = "sglang/srt/managers/scheduler_components/batch_result_processor.py"  # 0.5.16+
DFLASH_MODEL = "sglang/srt/models/dflash.py"  # DFlash drafts; DSpark's subclass them
DSPARK_MODEL = "sglang/srt/models/dspark.py"

# Methods a wrapper is installed on: (file, "Class.method", versions).
WRAPPED = [
    (W2, "EAGLEWorkerV2.__init__", ALL),
    (W2, "EAGLEWorkerV2.forward_batch_generation", ALL),
    (W2, "EAGLEWorkerV2.verify", ALL),
    (W2, "EAGLEWorkerV2.on_verify_complete_cpu", since("0.5.12")),
    (MIXIN, "SchedulerOutputProcessorMixin._resolve_spec_overlap_token_ids", until("0.5.8")),
    # context-length buckets (the batch's seq_lens_cpu) and finished requests
    (BRP, "SchedulerBatchResultProcessor._resolve_spec_v2_tokens", since("0.5.16")),
    (BRP, "SchedulerBatchResultProcessor._prepare_kv_cache_release", since("0.5.23")),
    # token agreement on the verify of multi-layer EAGLE and the accept of DFlash
    (MULTI, "MultiLayerEagleWorkerV2.verify", V23),
    (DFLASH, "DFlashWorkerV2._accept_block", V23),
    # DFlash / DSpark: widths where the target's states are projected (sglang_dflash)
    (DFLASH_MODEL, "DFlashDraftModel.project_target_hidden", V23),
    (DFLASH_MODEL, "DFlashLagunaForCausalLM.project_target_hidden", V23),
    (W1, "EAGLEWorker.__init__", V1),
    (W1, "EAGLEWorker.forward_batch_generation", V1),
    (W1, "EAGLEWorker.draft", V1),
    (W1, "EAGLEWorker.verify", V1),
    (W1, "EAGLEWorker.forward_draft_extend_after_decode", V1),
    (E3, "LlamaModel.forward", ALL),
    (E3, "LlamaForCausalLMEagle3.load_weights", ALL),
    (K25, "Eagle3MLAModel.forward", since("0.5.12")),
    (K25, "Eagle3DeepseekV2ForCausalLM.load_weights", since("0.5.12")),
    (BASE, "BaseSpecWorker.on_verify_complete_cpu", V23),
    (NGRAM, "NGRAMWorker.on_verify_complete_cpu", V23),
    (STANDALONE, "StandaloneWorkerV2.__init__", V23),
    # the target's forward inside verify (step cost's target_forward)
    (TP, "TpModelWorker.forward_batch_generation", ALL),
    *[(f, f"{c}.{m}", V23) for f, c in OWN_STEP for m in ("__init__",
                                                           "forward_batch_generation")],
]

# Absences the adapters rely on (feature detection takes the other path there).
ABSENT = [
    (W2, "EAGLEWorkerV2.on_verify_complete_cpu", until("0.5.8")),  # counts from the mixin
    (W1, None, since("0.5.16")),                                   # no v1 module at all
    (MIXIN, None, since("0.5.16")),
    # inherited from EAGLEWorkerV2, whose hooks count them (wrapping them again would not)
    (STANDALONE, "StandaloneWorkerV2.forward_batch_generation", V23),
    (STANDALONE, "StandaloneWorkerV2.on_verify_complete_cpu", V23),
    (FROZEN, "FrozenKVMTPWorkerV2.on_verify_complete_cpu", V23),
    (FROZEN, "FrozenKVMTPWorkerV2.verify", V23),  # EAGLEWorkerV2.verify: the agreement
    # BaseSpecWorker's default receives their counts
    *[(f, f"{c}.on_verify_complete_cpu", V23) for f, c in OWN_STEP if c != "NGRAMWorker"],
]

# Parameters read by name or by position: (file, "Class.method", index with self, name, versions).
PARAMS = [
    (W1, "EAGLEWorker.__init__", 3, "tp_rank", V1),
    (W1, "EAGLEWorker.forward_batch_generation", 1, "batch", V1),
    (W2, "EAGLEWorkerV2.on_verify_complete_cpu", 1, "num_correct_drafts_per_req",
     since("0.5.12")),
    (MIXIN, "SchedulerOutputProcessorMixin._resolve_spec_overlap_token_ids", 1, "result",
     until("0.5.8")),
    (BASE, "BaseSpecWorker.on_verify_complete_cpu", 1, "num_correct_drafts_per_req", V23),
    (NGRAM, "NGRAMWorker.on_verify_complete_cpu", 1, "num_correct_drafts_per_req", V23),
    *[(f, f"{c}.forward_batch_generation", 1, "batch", V23) for f, c in OWN_STEP],
    (BRP, "SchedulerBatchResultProcessor._resolve_spec_v2_tokens", 2, "batch",
     since("0.5.16")),
    (BRP, "SchedulerBatchResultProcessor._resolve_spec_v2_tokens", 1, "result",
     since("0.5.16")),
    (BRP, "SchedulerBatchResultProcessor._prepare_kv_cache_release", 1, "req",
     since("0.5.23")),
    (E3, "LlamaModel.forward", 3, "forward_batch", ALL),  # the adapter reads args[2]
    (TP, "TpModelWorker.forward_batch_generation", 1, "model_worker_batch", until("0.5.12")),
    (TP, "TpModelWorker.forward_batch_generation", 1, "batch", since("0.5.16")),
    (TP, "TpModelWorker.forward_batch_generation", 2, "forward_batch", ALL),
    (K25, "Eagle3MLAModel.forward", 3, "forward_batch", since("0.5.12")),
]

# Attributes read on instances (set as `self.x`, a dataclass field or a property), or
# module-level names (class None): (file, class, attribute, versions).
ATTRS = [
    (W2, "EAGLEWorkerV2", "target_worker", ALL),
    (W2, "EAGLEWorkerV2", "draft_worker", ALL),
    (W2, "EagleDraftWorker", "draft_runner", ALL),
    *[(W2, "EAGLEWorkerV2", a, ALL)
      for a in ("topk", "speculative_num_steps", "speculative_num_draft_tokens")],
    (RESULT, "GenerationBatchResult", "next_token_ids", ALL),
    (RESULT, "GenerationBatchResult", "accept_lens", ALL),
    (RESULT, "GenerationBatchResult", "can_run_cuda_graph", ALL),  # the cuda_graph breakdown
    *[(W1, "EAGLEWorker", a, V1) for a in ("target_worker", "topk", "speculative_num_steps",
                                            "speculative_num_draft_tokens")],
    (TP, "TpModelWorker", "model_runner", ALL),
    (INFO, "EagleVerifyOutput", "accept_length_per_req_cpu", until("0.5.8")),
    (INFO, "EagleVerifyOutput", "num_correct_drafts_per_req_cpu", ("0.5.12",)),
    (INFO, "EagleVerifyInput", "draft_token", ALL),
    (INFO, "EagleVerifyInput", "retrieve_next_token", since("0.5.16")),  # tree agreement
    (REQ, "Req", "spec_accepted_tokens", until("0.5.8")),     # v1 accept counts
    (REQ, "Req", "spec_num_correct_drafts", ("0.5.12",)),
    *[(REQ, "Req", a, since("0.5.23")) for a in (
        "rid", "spec_verify_ct", "spec_num_correct_drafts", "spec_correct_drafts_histogram",
        "sampling_params")],
    # SPECTRACE_REQUEST_LABEL's fields (adapters.sglang_v2.LABEL_FIELDS)
    *[(REQ, "Req", a, since("0.5.23"))
      for a in ("routing_key", "extra_key", "priority", "lora_id")],
    # the prefix-cache and grammar breakdowns: its cache hit, its prompt, its grammar fields
    *[(REQ, "Req", a, since("0.5.23")) for a in ("cached_tokens", "origin_input_ids")],
    *[("sglang/srt/sampling/sampling_params.py", "SamplingParams", a, since("0.5.23"))
      for a in ("json_schema", "regex", "ebnf", "structural_tag")],
    (REQ, "ScheduleBatch", "seq_lens_cpu", since("0.5.16")),
    (E3, None, "default_weight_loader", ALL),
    (E3, "LlamaModel", "fc", ALL),
    (E3, "LlamaModel", "midlayer", until("0.5.8")),
    (E3, "LlamaModel", "layers", since("0.5.12")),
    (E3, "LlamaForCausalLMEagle3", "hot_token_id", ALL),
    (K25, None, "default_weight_loader", since("0.5.12")),
    (K25, "Eagle3MLAModel", "fc", since("0.5.12")),
    (K25, "Eagle3MLAModel", "num_aux_hidden_states", since("0.5.16")),  # else fc_in // H
    (K25, "Eagle3DeepseekV2ForCausalLM", "hot_token_id", since("0.5.12")),
    (K25, "Eagle3DeepseekV2ForCausalLM", "load_lm_head_from_target", since("0.5.12")),
    (LLAMA, "LlamaForCausalLM", "set_eagle3_layers_to_capture", ALL),
    (LLAMA, "LlamaForCausalLM", "capture_aux_hidden_states", ALL),
    (LLAMA, "LlamaModel", "layers_to_capture", ALL),
    # the draft positions and span attributes of each worker (sglang_algorithms.positions)
    *[(f, c, "speculative_num_draft_tokens", V23) for f, c in OWN_STEP],
    *[(f, c, a, V23) for f, c in [(STANDALONE, "StandaloneWorkerV2")] + OWN_STEP
      if c not in ("DFlashWorkerV2", "DSparkWorkerV2")
      for a in ("speculative_num_steps", "topk")],
    *[(f, c, "target_worker", V23) for f, c in OWN_STEP],
    *[(f, c, "server_args", V23) for f, c in [(STANDALONE, "StandaloneWorkerV2")] + OWN_STEP],
    # DFlash / DSpark: what the widths and the aux audit read
    *[(DFLASH_MODEL, "DFlashDraftModel", a, V23)
      for a in ("fc", "num_context_features", "draft_config", "config")],
    (DSPARK_MODEL, "Qwen3DSparkModel", "project_target_hidden", V23),  # DFlashDraftModel's
    *[(f, c, a, V23) for f, c in [(DFLASH, "DFlashWorkerV2"), (DSPARK, "DSparkWorkerV2")]
      for a in ("model_runner", "draft_model")],
    (DFLASH, "DFlashWorkerV2", "block_size", V23),  # the agreement's chain length
    (MULTI, "MultiLayerEagleWorkerV2", "speculative_num_draft_tokens", V23),
]

# Expressions a wrapped method must contain, as `ast.unparse` spells them:
# (file, "Class.method", expression, versions).
READS = [
    (E3, "LlamaModel.forward", "forward_batch.spec_info.hidden_states", ALL),
    (E3, "LlamaForCausalLMEagle3.load_weights",
     "getattr(param, 'weight_loader', default_weight_loader)", ALL),
    (K25, "Eagle3MLAModel.forward", "forward_batch.spec_info.hidden_states", since("0.5.12")),
    (K25, "Eagle3DeepseekV2ForCausalLM.load_weights",
     "getattr(param, 'weight_loader', default_weight_loader)", since("0.5.12")),
    # the v2 adapter reads the counts the mixin stores on the result
    (MIXIN, "SchedulerOutputProcessorMixin._resolve_spec_overlap_token_ids",
     "result.accept_length_per_req_cpu", ("0.5.8",)),
    # ... or, on 0.5.5, the CPU accept_lens it falls back to
    (MIXIN, "SchedulerOutputProcessorMixin._resolve_spec_overlap_token_ids",
     "result.accept_lens.tolist()", until("0.5.8")),
    (LLAMA, "LlamaForCausalLM.set_eagle3_layers_to_capture",
     "self.model.layers_to_capture", ALL),
    (LLAMA, "LlamaForCausalLM.set_dflash_layers_to_capture",
     "self.model.layers_to_capture", V23),
    # the width SGLang itself refuses (spectrace adds no finding for it)
    (DFLASH_MODEL, "DFlashDraftModel.project_target_hidden", "self.fc.in_features", V23),
    (DFLASH_MODEL, "DFlashDraftModel.project_target_hidden", "target_hidden.shape[-1]", V23),
]


# -- the SGLang wheels (tests/wheel_sources.py) ----------------------------------------------
module = functools.partial(ws.module, "sglang")
get_class = functools.partial(ws.get_class, "sglang")
get_method = functools.partial(ws.get_method, "sglang")


# -- tests --------------------------------------------------------------------------------
@pytest.mark.parametrize("version,path,dotted", rows(WRAPPED))
def test_wrapped_method_exists(version, path, dotted):
    assert get_method(version, path, dotted) is not None, f"SGLang {version}: no {dotted}"


@pytest.mark.parametrize("version,path,dotted", rows(ABSENT))
def test_absent_where_the_adapter_expects_absence(version, path, dotted):
    if dotted is None:
        assert module(version, path) is None, f"SGLang {version} still has {path}"
    else:
        assert get_method(version, path, dotted) is None, f"SGLang {version} has {dotted}"


@pytest.mark.parametrize("version,path,dotted,index,name", rows(PARAMS))
def test_parameter_read_by_the_adapter(version, path, dotted, index, name):
    fn = get_method(version, path, dotted)
    assert fn is not None, f"SGLang {version}: no {dotted}"
    params = ws.parameters(fn)
    assert params[index:index + 1] == [name], f"SGLang {version} {dotted}{tuple(params)}"


@pytest.mark.parametrize("version,path,dotted", rows(WRAPPED))
def test_every_argument_a_hook_takes_is_a_parameter_by_that_name(version, path, dotted):
    """Hooks take arguments by name (`WrapPoint.reads`, positions from the signature)."""
    fn = get_method(version, path, dotted)
    point = ws.adapter_points("sglang")[(path, dotted)]
    assert ws.unread_names(point, fn) == [], f"SGLang {version} {dotted}{ws.parameters(fn)}"


@pytest.mark.parametrize("version,path,cls,attr", rows(ATTRS))
def test_attribute_read_by_the_adapter(version, path, cls, attr):
    names = (ws.module_names(module(version, path)) if cls is None
             else ws.class_attrs("sglang", version, path, cls))  # with its SGLang bases
    assert attr in names, f"SGLang {version}: {cls or path} has no {attr}"


@pytest.mark.parametrize("version,path,dotted,expr", rows(READS))
def test_expression_read_inside_the_wrapped_method(version, path, dotted, expr):
    fn = get_method(version, path, dotted)
    assert fn is not None, f"SGLang {version}: no {dotted}"
    assert expr in ws.expressions(fn), f"SGLang {version}: {dotted} never uses `{expr}`"


@pytest.mark.parametrize("version", V1)
def test_v1_verify_returns_the_verify_output_second(version):
    """The v1 adapter reads the accept counts from `verify(...)[1]`."""
    fn = get_method(version, W1, "EAGLEWorker.verify")
    returns = [n.value for n in ast.walk(fn) if isinstance(n, ast.Return)]
    assert returns
    for value in returns:
        assert isinstance(value, ast.Tuple), ast.unparse(value)
        assert ast.unparse(value.elts[1]) == "res", ast.unparse(value)
    annotated = {n.target.id: ast.unparse(n.annotation) for n in ast.walk(fn)
                 if isinstance(n, ast.AnnAssign) and isinstance(n.target, ast.Name)}
    assert annotated.get("res") == "EagleVerifyOutput"


def test_every_hooked_module_exists_in_some_version():
    from spectrace.adapters import ADAPTERS
    for name in (n for n in ADAPTERS if n.startswith("sglang.")):
        path = name.replace(".", "/") + ".py"
        assert any(module(v, path) is not None for v in VERSIONS), name


def test_every_draft_class_is_wrapped_in_its_module():
    """A `DraftClass` row is keyed by its module in `sglang.srt.models`, whose ADAPTERS
    table wraps that very class's forward and load_weights."""
    import importlib

    from spectrace.adapters import ADAPTERS
    from spectrace.adapters.sglang_eagle3 import DRAFT_CLASSES
    for key, draft in DRAFT_CLASSES.items():
        adapter, table = ADAPTERS[f"sglang.srt.models.{key}"].split(":")
        targets = {p.target for p in getattr(importlib.import_module(adapter), table)}
        assert targets == {f"{draft.inner}.forward", f"{draft.causal}.load_weights"}, key


# Module-level functions wrapped (looked up by name at call time), with the positional
# parameters the hook reads: (file, function, parameters, versions).
COMMON = "sglang/srt/speculative/eagle_worker_common.py"
FUNCTIONS = [
    (COMMON, "_finalize_accept_tree_path",
     ("batch", "accept_index", "accept_lens", "predict", "logits_output", "bs"), since("0.5.16")),
]


@pytest.mark.parametrize("path,name,params,versions", FUNCTIONS)
@pytest.mark.parametrize("version", VERSIONS)
def test_module_function_wrapped_and_called_by_name(version, path, name, params, versions):
    tree = module(version, path)
    if version not in versions:
        assert tree is None or not any(isinstance(n, ast.FunctionDef) and n.name == name
                                       for n in tree.body)
        return
    [fn] = [n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == name]
    assert tuple(a.arg for a in fn.args.args) == params
    assert ws.unread_names(ws.adapter_points("sglang")[(path, name)], fn) == []
    calls = [n for n in ast.walk(tree) if isinstance(n, ast.Call)
             and isinstance(n.func, ast.Name) and n.func.id == name]
    assert calls and all(len(c.args) >= len(params) for c in calls)


# Where verify runs the target: (file, function or Class.method, versions); the call passes
# `is_verify=True` (the target forward hook times only those) and the batch it runs.
VERIFY_FORWARD = [(W2, "EAGLEWorkerV2.verify", until("0.5.12")),
                  (COMMON, "run_eagle_verify", since("0.5.16")),
                  (W1, "EAGLEWorker.verify", V1)]


@pytest.mark.parametrize("version,path,where", rows(VERIFY_FORWARD))
def test_verify_runs_the_target_forward_with_is_verify(version, path, where):
    """The only `forward_batch_generation(..., is_verify=True)` calls are verify's: v2's
    pass `forward_batch` (its rows are the verify tokens), v1's its batch."""
    if "." in where:
        fn = get_method(version, path, where)
    else:
        [fn] = [n for n in module(version, path).body
                if isinstance(n, ast.FunctionDef) and n.name == where]
    calls = [n for n in ast.walk(fn) if isinstance(n, ast.Call)
             and isinstance(n.func, ast.Attribute) and n.func.attr == "forward_batch_generation"]
    assert len(calls) == 1, f"SGLang {version} {where}"
    kw = {k.arg: ast.unparse(k.value) for k in calls[0].keywords}
    assert kw.get("is_verify") == "True", kw
    assert "forward_batch" in kw if path != W1 else calls[0].args, kw
    # the target worker is the one the verify forward goes to
    assert "target_worker" in ast.unparse(calls[0].func), ast.unparse(calls[0].func)


def test_tables_here_are_the_adapters_wrap_points():
    """The version tables above and the adapters' own wrap-point tables name the same
    functions: a wrap point added to an adapter must be checked against the wheels."""
    import importlib

    from spectrace.adapters import ADAPTERS
    ours = set()
    for module, ref in ADAPTERS.items():
        if not module.startswith("sglang."):
            continue  # tests/test_vllm_wrap_points.py
        adapter, table = ref.split(":")
        for point in getattr(importlib.import_module(adapter), table):
            ours.add((module.replace(".", "/") + ".py", point.target))
    listed = {(f, t) for f, t, _ in WRAPPED} | {(f, name) for f, name, *_ in FUNCTIONS}
    assert ours == listed


# -- the server settings (adapters/sglang_settings.READS), read from ServerArgs ----------
SERVER_ARGS = "sglang/srt/server_args.py"
# 0.5.23 declares ServerArgs' fields in namespaces (arg_groups/fields/<file>: class)
FIELDS_023 = {"kv_cache_dtype": ("model.py", "Model"), "quantization": ("model.py", "Model"),
              "cuda_graph_config": ("exec_.py", "ExecGraph"),
              "disable_cuda_graph": ("exec_.py", "ExecGraph"),
              "disable_decode_cuda_graph": ("exec_.py", "ExecGraph"),
              "grammar_backend": ("exec_.py", "ExecKernel"),
              "disable_overlap_schedule": ("schedule.py", "Schedule"),
              "disable_radix_cache": ("memory.py", "Memory"),
              "disaggregation_mode": ("disagg.py", "Disagg"),
              "model_path": ("model.py", "Model"),
              "tokenizer_path": ("serving.py", "Serving"),
              "chat_template": ("serving.py", "Serving"),
              "hf_chat_template_name": ("serving.py", "Serving")}
SETTINGS_FIELDS = [
    *[(f, ALL) for f in ("kv_cache_dtype", "quantization", "disable_cuda_graph",
                         "disable_overlap_schedule", "disable_radix_cache", "grammar_backend",
                         "disaggregation_mode", "tp_size", "pp_size", "ep_size", "dp_size",
                         "enable_dp_attention", "speculative_algorithm",
                         "speculative_num_steps", "speculative_eagle_topk",
                         "speculative_num_draft_tokens")],
    ("speculative_draft_model_quantization", since("0.5.8")),
    *[(f, ALL) for f in ("model_path", "tokenizer_path", "chat_template")],  # chat template
    ("hf_chat_template_name", since("0.5.8")),
    ("speculative_adaptive", since("0.5.12")),
    ("speculative_adaptive_config", since("0.5.12")),
    # the verification (sglang_settings._verification and the ways after it)
    *[(f, ALL) for f in ("speculative_accept_threshold_single",
                         "speculative_accept_threshold_acc")],
    ("speculative_use_rejection_sampling", since("0.5.16")),
    ("speculative_use_block_verification", V23),
    ("cuda_graph_max_bs", until("0.5.12")),
    ("cuda_graph_config", since("0.5.16")),        # decode.backend / decode.max_bs
    ("disable_decode_cuda_graph", since("0.5.16")),
    ("attn_dp_size", V23),
    ("speculative_draft_kv_cache_dtype", V23),
]
# absent where sglang_settings takes its other way (a rename here fails a test)
SETTINGS_ABSENT = [("cuda_graph_max_bs", since("0.5.16")), ("attn_dp_size", until("0.5.16")),
                   ("speculative_draft_kv_cache_dtype", until("0.5.16")),
                   ("speculative_use_rejection_sampling", until("0.5.12")),
                   ("speculative_use_block_verification", until("0.5.16"))]


def _server_args_fields(version: str) -> set[str]:
    names = ws.class_attrs("sglang", version, SERVER_ARGS, "ServerArgs")
    if version in V23:
        for path, cls in set(FIELDS_023.values()) | {("spec.py", "Spec"),
                                                      ("parallel.py", "Parallel")}:
            names |= ws.class_attrs("sglang", version, "sglang/srt/arg_groups/fields/" + path,
                                    cls)
    return names


@pytest.mark.parametrize("version,field", [pytest.param(v, f, id=f"{v}-{f}")
                                           for f, vs in SETTINGS_FIELDS for v in vs])
def test_server_setting_field_read_by_the_adapter(version, field):
    assert field in _server_args_fields(version), f"SGLang {version}: ServerArgs has no {field}"


@pytest.mark.parametrize("version", ALL)
def test_chat_template_guess_from_the_model_path(version):
    """sglang_settings asks SGLang's own guess of a registered template from the model path
    (which SGLang prefers to the tokenizer's without --chat-template)."""
    tree = ws.module("sglang", version, "sglang/srt/parser/conversation.py")
    assert tree is not None and "get_conv_template_by_model_path" in ws.module_names(tree)


@pytest.mark.parametrize("version,field", [pytest.param(v, f, id=f"{v}-{f}")
                                           for f, vs in SETTINGS_ABSENT for v in vs])
def test_server_setting_field_absent_where_another_way_is_taken(version, field):
    assert field not in _server_args_fields(version)


@pytest.mark.parametrize("version", since("0.5.16"))
def test_cuda_graph_config_has_the_decode_phase_backend_and_max_bs(version):
    path = "sglang/srt/model_executor/cuda_graph_config.py"
    assert "decode" in ws.class_attrs("sglang", version, path, "CudaGraphConfig")
    assert {"backend", "max_bs"} <= ws.class_attrs("sglang", version, path, "PhaseConfig")


@pytest.mark.parametrize("version", ALL)
def test_resolving_view_where_the_adapter_uses_it(version):
    """sglang_settings reads what SGLang resolved through its own `resolving_view` where
    the release has one (0.5.23), else the fields themselves."""
    tree = ws.module("sglang", version, "sglang/srt/arg_groups/model_override_base.py")
    has = tree is not None and "resolving_view" in ws.module_names(tree)
    assert has == (version in V23)

