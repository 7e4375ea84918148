"""Drive spectrace's real hooks, one speculative decode step at a time, on stand-ins of
SGLang's and vLLM's classes: the test kit's runtimes. Shared by the unit tests
(`tests/test_no_device_sync.py`, `test_advisor.py`, ...) and the benchmarks (`overhead.py`,
`gpu_sync_check.py`, `gpu_check.py`); the process state they run under is
`tests.kit.process_state`'s.

What is real here:
- the wrapt wrappers: the wrap-point tables of spectrace's own adapters (`sglang_v2`,
  `sglang_v1`, `sglang_eagle3`), applied by its `Patcher` (the very code that wraps SGLang);
- the process Recorder and its OpenTelemetry providers, created by spectrace's
  `process.recorder()` (`tests.kit.process_state`) from `Config()` defaults (file exporter, 1 % of steps
  sampled as spans, agreement every 16th step), with its export threads running;
- the inputs: torch tensors with SGLang's shapes and dtypes on the chosen device, SGLang's
  own `ForwardMode` enum, fresh accept-count lists of Python ints as the scheduler hands over.

What is a stand-in: the *bodies* of SGLang's methods. They keep SGLang's names and parameter
lists (checked against the installed SGLang source by `check_signatures`) and SGLang's call
order inside one step, but do no model work: they return precomputed results. So the
"uninstrumented" baseline is the cost of the bare Python calls, and the difference
between the two is spectrace's cost alone.

One v2 step (SGLang 0.5.23 `EAGLEWorkerV2.forward_batch_generation`, decode batch):
  draft_worker.draft(batch)                  -> draft model forward x (steps - 1), DECODE
  self.verify(batch, ...)                    -> result.accept_lens [bs], next_token_ids [bs*n]
    target_worker.forward_batch_generation(batch=None, forward_batch=..., is_verify=True)
  draft_worker._draft_extend_for_decode(...) -> draft model forward x 1, DRAFT_EXTEND_V2
then the scheduler: processor._resolve_spec_v2_tokens(result, batch), which calls
worker.on_verify_complete_cpu(list_of_bs_ints, batch_size=bs) (the batch's seq_lens_cpu,
a CPU tensor, is what the context-length buckets read), and one finished request's
processor._prepare_kv_cache_release(req) per step (batch 256 at ~256 output tokens).
So the draft model's `LlamaModel.forward` runs `steps` times per step (eager mode).
"""
from __future__ import annotations

import ast
import enum
import inspect
import os
import random
import sys
import types
from dataclasses import dataclass

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

# Shapes of a common EAGLE-3 deployment: Llama-3.1-8B target (hidden 4096), a one-layer
# draft of the same width, three aux layers (fc: 12288 -> 4096), a top-k 1 chain of 3 steps.
TARGET_HIDDEN = 4096
DRAFT_HIDDEN = 4096
NUM_AUX = 3
STEPS = 3
TOPK = 1
NUM_DRAFT_TOKENS = STEPS + 1


def forward_mode():
    """SGLang's own ForwardMode enum (the hooks hash it and call its methods); where SGLang
    is not installed (the GPU check on a machine with only PyTorch), `ForwardModeStandIn`."""
    try:
        from sglang.srt.model_executor.forward_batch_info import ForwardMode
    except ImportError:
        return ForwardModeStandIn
    return ForwardMode


class ForwardModeStandIn(enum.IntEnum):
    """The members of SGLang 0.5.23's `ForwardMode` the benchmark's steps use, with its
    `is_extend` (`tests/test_gpu_check.py` compares both with SGLang's own enum)."""

    EXTEND = enum.auto()
    DECODE = enum.auto()
    MIXED = enum.auto()
    IDLE = enum.auto()
    TARGET_VERIFY = enum.auto()
    DRAFT_EXTEND_V2 = enum.auto()

    def is_extend(self, include_draft_extend_v2: bool = False) -> bool:
        return (self in (ForwardModeStandIn.EXTEND, ForwardModeStandIn.MIXED,
                         ForwardModeStandIn.TARGET_VERIFY)
                or (include_draft_extend_v2 and self == ForwardModeStandIn.DRAFT_EXTEND_V2))


# -- stand-ins: SGLang's names and parameter lists, no model work --------------------------
def make_eagle3_module():
    """A module object shaped like `sglang.srt.models.llama_eagle3`."""

    class LlamaModel:
        def __init__(self, hidden=DRAFT_HIDDEN, target_hidden=TARGET_HIDDEN, num_aux=NUM_AUX):
            self.config = types.SimpleNamespace(hidden_size=hidden,
                                                target_hidden_size=target_hidden)
            self.fc = types.SimpleNamespace(in_features=num_aux * target_hidden,
                                            out_features=hidden)

        def forward(self, input_ids, positions, forward_batch, input_embeds=None,
                    pp_proxy_tensors=None):
            hidden = forward_batch.spec_info.hidden_states  # (to logits, [aux]), as SGLang's
            return hidden, [hidden]

    class LlamaForCausalLMEagle3:
        def load_weights(self, weights):
            return None

    mod = types.ModuleType("spectrace_bench.llama_eagle3")
    mod.LlamaModel = LlamaModel
    mod.LlamaForCausalLMEagle3 = LlamaForCausalLMEagle3
    return mod


def make_tp_worker_module():
    """A module shaped like `sglang.srt.managers.tp_worker` (0.5.23): the target worker whose
    forward verify calls (`is_verify=True`) on the bs x n verify tokens."""

    class TpModelWorker:
        def forward_batch_generation(self, batch, forward_batch=None, pp_proxy_tensors=None,
                                     is_verify=False, skip_attn_backend_init=None, *,
                                     capture_hidden_mode=None, return_kv_loc_plan=False):
            return None

    mod = types.ModuleType("spectrace_bench.tp_worker")
    mod.TpModelWorker = TpModelWorker
    return mod


def make_v2_module():
    """A module object shaped like `sglang.srt.speculative.eagle_worker_v2` (0.5.23)."""

    class EagleDraftWorker:
        def __init__(self, draft_model, decode_fb, extend_fb, steps):
            self.draft_model = draft_model
            self.decode_fb = decode_fb
            self.extend_fb = extend_fb
            self.speculative_num_steps = steps

        def draft(self, batch, *, with_topology=False):
            fb = self.decode_fb
            for _ in range(self.speculative_num_steps - 1):  # the last top-k needs no forward
                self.draft_model.forward(fb.input_ids, fb.positions, fb)
            return batch.spec_info

        def _draft_extend_for_decode(self, batch, batch_result, *, kv_loc_plan=None):
            fb = self.extend_fb
            self.draft_model.forward(fb.input_ids, fb.positions, fb)

    class EAGLEWorkerV2:
        def __init__(self, server_args, gpu_id, nccl_port, target_worker):
            self.server_args = server_args
            self.target_worker = target_worker
            self.topk = TOPK
            self.speculative_num_steps = STEPS
            self.speculative_num_draft_tokens = NUM_DRAFT_TOKENS
            self.adaptive_controller = None
            self.draft_worker = None
            self.result = None

        def forward_batch_generation(self, batch, on_publish=None, grammar_barrier=None,
                                     pp_proxy_tensors=None):
            if batch.forward_mode.is_extend() or batch.is_extend_in_batch:
                return None
            verify_input = self.draft_worker.draft(batch)
            batch.spec_info = verify_input
            out = self.verify(batch, pp_proxy_tensors=pp_proxy_tensors,
                              grammar_barrier=grammar_barrier)
            self.draft_worker._draft_extend_for_decode(batch, out, kv_loc_plan=None)
            return out

        def verify(self, batch, pp_proxy_tensors=None, grammar_barrier=None):
            self.target_worker.forward_batch_generation(
                batch=None, forward_batch=self.verify_fb, is_verify=True,
                pp_proxy_tensors=pp_proxy_tensors)
            return self.result

        def on_verify_complete_cpu(self, num_correct_drafts_per_req, batch_size=0):
            if self.adaptive_controller is not None:
                self.adaptive_controller.on_verify_complete(num_correct_drafts_per_req,
                                                            batch_size=batch_size)

    mod = types.ModuleType("spectrace_bench.eagle_worker_v2")
    mod.EAGLEWorkerV2 = EAGLEWorkerV2
    mod.EagleDraftWorker = EagleDraftWorker
    return mod


def make_result_processor_module():
    """A module shaped like `sglang.srt.managers.scheduler_components.batch_result_processor`."""

    class SchedulerBatchResultProcessor:
        def __init__(self, model_worker, counts):
            self.model_worker = model_worker
            self.counts = counts

        def _resolve_spec_v2_tokens(self, result, batch):
            self.model_worker.on_verify_complete_cpu(self.counts, batch_size=len(batch.reqs))
            return None

        def _prepare_kv_cache_release(self, req):
            return None

    mod = types.ModuleType("spectrace_bench.batch_result_processor")
    mod.SchedulerBatchResultProcessor = SchedulerBatchResultProcessor
    return mod


def make_v1_module():
    """A module object shaped like `sglang.srt.speculative.eagle_worker` (0.5.12, v1)."""

    class EAGLEWorker:
        def __init__(self, server_args, gpu_id, tp_rank, dp_rank, moe_ep_rank, nccl_port,
                     target_worker):
            self.target_worker = target_worker
            self.topk = TOPK
            self.speculative_num_steps = STEPS
            self.speculative_num_draft_tokens = NUM_DRAFT_TOKENS
            self.draft_model = None
            self.decode_fb = self.extend_fb = None
            self.verify_result = None

        def forward_batch_generation(self, batch):
            if batch.forward_mode.is_extend() or batch.is_extend_in_batch:
                return None
            self.draft(batch)
            out = self.verify(batch)
            self.forward_draft_extend_after_decode(batch)
            return out

        def draft(self, batch):
            fb = self.decode_fb
            for _ in range(self.speculative_num_steps - 1):
                self.draft_model.forward(fb.input_ids, fb.positions, fb)
            return batch.spec_info

        def verify(self, batch):
            self.target_worker.forward_batch_generation(batch, is_verify=True)
            return self.verify_result

        def forward_draft_extend_after_decode(self, batch):
            fb = self.extend_fb
            self.draft_model.forward(fb.input_ids, fb.positions, fb)

    mod = types.ModuleType("spectrace_bench.eagle_worker")
    mod.EAGLEWorker = EAGLEWorker
    return mod


def make_vllm_modules() -> dict:
    """Module objects shaped like vLLM 0.32's `v1.core.sched.scheduler`, `v1.engine.core`,
    `v1.worker.gpu_model_runner` and `model_executor.models.llama_eagle3`, keyed by the
    adapter table that wraps them."""

    class Scheduler:
        def __init__(self, vllm_config, kv_cache_config, structured_output_manager,
                     block_size, hash_block_size=None, mm_registry=None,
                     include_finished_set=False, log_stats=False):
            self.vllm_config = vllm_config
            self.num_spec_tokens = STEPS
            self.num_sampled_tokens_per_step = 1
            self.log_stats = log_stats

        def update_from_output(self, scheduler_output, model_runner_output):
            # vLLM builds its SpecDecodingStats request by request in here when it logs
            # stats (precomputed in the stand-in), then hands them to make_stats
            self.make_stats(model_runner_output.spec_stats if self.log_stats else None)
            return {}

        def make_stats(self, spec_decoding_stats=None, kv_connector_stats=None,
                       cudagraph_stats=None, perf_stats=None, ec_connector_stats=None):
            return None

    class GPUModelRunner:
        """A step as vLLM 0.32's runner splits it: `execute_model` runs the target (and
        keeps its state), `sample_tokens` samples, then drafts (`propose_draft_token_ids`:
        the draft model's `combine_hidden_states` on the target's aux states, then
        `compute_logits` once per draft token)."""

        def __init__(self, draft=None, num_spec_tokens=STEPS) -> None:
            self.draft = draft
            self.num_spec_tokens = num_spec_tokens
            self.device = types.SimpleNamespace(type="cpu")
            self.execute_model_state = None

        def load_model(self, load_dummy_weights=False):
            return None

        def execute_model(self, scheduler_output, intermediate_tensors=None):
            self._model_forward(input_ids=None, positions=None)
            self.execute_model_state = scheduler_output
            return None

        def _model_forward(self, input_ids=None, positions=None, intermediate_tensors=None,
                           inputs_embeds=None):
            return None

        def sample_tokens(self, grammar_output):
            so, self.execute_model_state = self.execute_model_state, None
            if so is None:  # vLLM: a pipeline stage's, nothing sampled here
                return None
            logits, meta, hidden = so.target_outputs
            self._sample(logits, meta)
            self.propose_draft_token_ids(so, None, None, hidden, None, None, meta, None, None)
            return None

        def _sample(self, logits, spec_decode_metadata):
            return None

        def propose_draft_token_ids(self, scheduler_output, sampled_token_ids,
                                    sampling_metadata, hidden_states, sample_hidden_states,
                                    aux_hidden_states, spec_decode_metadata,
                                    common_attn_metadata, slot_mappings):
            draft = self.draft
            if draft is not None:  # n-gram, suffix: no draft model
                draft.combine_hidden_states(hidden_states)
                # the draft's own hidden states in vLLM; shapes do not matter here
                for _ in range(self.num_spec_tokens):
                    draft.compute_logits(hidden_states)
            return None

    class Eagle3LlamaForCausalLM:
        def __init__(self) -> None:
            cfg = types.SimpleNamespace(hidden_size=DRAFT_HIDDEN, target_hidden_size=TARGET_HIDDEN)
            self.config = cfg
            self.model = types.SimpleNamespace(
                fc=types.SimpleNamespace(input_size=NUM_AUX * TARGET_HIDDEN),
                fc_input_size=NUM_AUX * TARGET_HIDDEN, num_aux_hidden_states=NUM_AUX,
                use_aux_hidden_state=True)

        def combine_hidden_states(self, hidden_states):
            return hidden_states

        def compute_logits(self, hidden_states):
            return hidden_states

        def load_weights(self, weights):
            return None

    class DFlashQwen3ForCausalLM(Eagle3LlamaForCausalLM):
        """vLLM's DFlash draft: the same fc on `.model`, its own combine_hidden_states."""

        def combine_hidden_states(self, hidden_states):
            return hidden_states

    class EngineCore:
        """One engine step as vLLM 0.32 runs it: the worker's `execute_model` (the target's
        forward) and `sample_tokens` (sampling, verifying the drafts, then drafting), then
        the scheduler's bookkeeping. In vLLM the first two run in the worker process."""

        def __init__(self, scheduler, runner, draft, inputs) -> None:
            self.scheduler, self.runner, self.draft, self.inputs = scheduler, runner, draft, inputs

        def step(self):
            so, out, logits, meta, hidden = self.inputs()
            so.target_outputs = (logits, meta, hidden)
            self.runner.execute_model(so)
            self.runner.sample_tokens(None)
            return self.scheduler.update_from_output(so, out), True

        def step_with_batch_queue(self):
            return self.step()

    mods = {}
    for table, classes in (("SCHEDULER", (Scheduler,)), ("ENGINE_CORE", (EngineCore,)),
                           ("GPU_RUNNER", (GPUModelRunner,)),
                           ("LLAMA_EAGLE3", (Eagle3LlamaForCausalLM,)),
                           ("QWEN3_DFLASH", (DFlashQwen3ForCausalLM,))):
        mod = mods[table] = types.ModuleType(f"spectrace_bench.vllm.{table.lower()}")
        for cls in classes:
            setattr(mod, cls.__name__, cls)
    return mods


def make_vllm_mrv2_modules() -> dict:
    """Module objects shaped like vLLM 0.32's V2 model runner (MRV2,
    `v1/worker/gpu/model_runner.py`), its rejection sampler
    (`v1/worker/gpu/spec_decode/rejection_sampler.py`) and its EAGLE-style speculator
    (`.../target_dependent_ar/speculator.py`), keyed by the adapter table that wraps them."""

    class RejectionSampler:
        def __call__(self, logits, input_batch, draft_logits=None, invalid_drafts=None):
            return None

    class TargetDependentARSpeculator:
        """MRV2's drafter: the draft's `combine_hidden_states` on the target's aux states,
        then `compute_logits` once per draft token, all inside `propose`."""

        def __init__(self, model, num_speculative_steps=STEPS) -> None:
            self.model = model
            self.num_speculative_steps = num_speculative_steps

        def propose(self, input_batch, attn_metadata, slot_mappings, last_hidden_states,
                    aux_hidden_states, num_sampled, num_rejected, last_sampled,
                    next_prefill_tokens, temperature, seeds, dp_sync_state=None,
                    dummy_run=False, skip_attn_for_dummy_run=False, mm_inputs=None,
                    is_profile=False, num_speculative_tokens=None):
            if self.model is not None:
                self.model.combine_hidden_states(aux_hidden_states)
                for _ in range(self.num_speculative_steps):
                    self.model.compute_logits(aux_hidden_states)
            return None

    class StepTimingCollector:
        """vLLM's step timing (`v1/worker/gpu/async_utils.py`, 0.28+): records only inside
        `collect()`, which serving never opens; its marks are called every step."""

        def record_batch(self, input_batch, full_cudagraph) -> None:
            return None

        def forward_start(self) -> None:
            return None

    class GPUModelRunner:
        """A step as MRV2 splits it: `execute_model` marks the forward's start
        (`step_timing.forward_start()`) and runs the target inline (and keeps its state),
        `sample_tokens` computes the logits and samples (`sample`: the rejection sampler),
        then drafts inline (`self.speculator.propose`)."""

        def __init__(self, draft=None, num_speculative_steps=STEPS) -> None:
            self.step_timing = StepTimingCollector()
            self.speculator = TargetDependentARSpeculator(draft, num_speculative_steps)
            self.rejection_sampler = RejectionSampler()
            self.num_speculative_steps = num_speculative_steps
            self.device = types.SimpleNamespace(type="cpu")
            self.execute_model_state = None

        def load_model(self, load_dummy_weights=False, *args, model=None, **kwargs):
            return None

        def execute_model(self, scheduler_output, intermediate_tensors=None, dummy_run=False,
                          skip_attn_for_dummy_run=False, is_profile=False, context_len=0,
                          valid_dummy_state_slots=False, randomize_inputs=False):
            self.step_timing.record_batch(None, False)
            self.step_timing.forward_start()  # then the model runs
            self.execute_model_state = scheduler_output
            return None

        def sample_tokens(self, grammar_output):
            so, self.execute_model_state = self.execute_model_state, None
            if so is None:
                return None
            logits, input_batch, hidden = so.target_outputs
            self.sample(logits, input_batch, grammar_output)
            self.speculator.propose(input_batch, None, None, hidden, hidden, None, None, None,
                                    None, None, None, num_speculative_tokens=STEPS)
            return None

        def sample(self, hidden_states, input_batch, grammar_output):
            # MRV2 computes the logits here (`self.model.compute_logits`); the stand-in
            # hands over the step's precomputed ones
            return self.rejection_sampler(hidden_states, input_batch, None, None)

    mods = {}
    for table, classes in (("RUNNER", (GPUModelRunner,)),
                           ("REJECTION_SAMPLER", (RejectionSampler,)),
                           ("STEP_TIMING", (StepTimingCollector,)),
                           ("TARGET_DEPENDENT_AR", (TargetDependentARSpeculator,))):
        mod = mods[table] = types.ModuleType(f"spectrace_bench.vllm_mrv2.{table.lower()}")
        for cls in classes:
            setattr(mod, cls.__name__, cls)
    return mods


# -- signature check against the real SGLang source ---------------------------------------
HOT_METHODS = {
    "sglang/srt/speculative/eagle_worker_v2.py": {
        "EAGLEWorkerV2": ("forward_batch_generation", "verify", "on_verify_complete_cpu"),
        "EagleDraftWorker": ("draft", "_draft_extend_for_decode")},
    "sglang/srt/models/llama_eagle3.py": {"LlamaModel": ("forward",)},
    "sglang/srt/speculative/base_spec_worker.py": {
        "BaseSpecWorker": ("on_verify_complete_cpu",)},
    "sglang/srt/speculative/dflash_worker_v2.py": {
        "DFlashWorkerV2": ("__init__", "forward_batch_generation", "_accept_block")},
    "sglang/srt/models/dflash.py": {"DFlashDraftModel": ("project_target_hidden",)},
    "sglang/srt/speculative/ngram_worker.py": {
        "NGRAMWorker": ("__init__", "forward_batch_generation", "on_verify_complete_cpu")},
    "sglang/srt/managers/scheduler_components/batch_result_processor.py": {
        "SchedulerBatchResultProcessor": ("_resolve_spec_v2_tokens",
                                          "_prepare_kv_cache_release")},
    "sglang/srt/managers/tp_worker.py": {"TpModelWorker": ("forward_batch_generation",)},
}
HOT_METHODS_V1 = {"sglang/srt/speculative/eagle_worker.py": {"EAGLEWorker": (
    "forward_batch_generation", "draft", "verify", "forward_draft_extend_after_decode")}}
HOT_METHODS_VLLM = {
    "vllm/v1/core/sched/scheduler.py": {"Scheduler": ("__init__", "update_from_output",
                                                      "make_stats")},
    "vllm/v1/engine/core.py": {"EngineCore": ("step", "step_with_batch_queue")},
    "vllm/v1/worker/gpu_model_runner.py": {"GPUModelRunner": (
        "_sample", "execute_model", "_model_forward", "sample_tokens",
        "propose_draft_token_ids")},
    "vllm/model_executor/models/llama_eagle3.py": {
        "Eagle3LlamaForCausalLM": ("combine_hidden_states", "compute_logits", "load_weights")},
    "vllm/v1/worker/gpu/model_runner.py": {"MRV2.GPUModelRunner": (
        "execute_model", "sample_tokens", "sample")},
    "vllm/v1/worker/gpu/spec_decode/rejection_sampler.py": {"RejectionSampler": ("__call__",)},
    "vllm/v1/worker/gpu/async_utils.py": {"StepTimingCollector": (
        "record_batch", "forward_start")},
    "vllm/v1/worker/gpu/spec_decode/target_dependent_ar/speculator.py": {
        "TargetDependentARSpeculator": ("propose",)},
}


def _source_params(path: str) -> dict:
    tree = ast.parse(open(path).read())
    out = {}
    for node in tree.body:
        if isinstance(node, ast.ClassDef):
            for f in node.body:
                if isinstance(f, ast.FunctionDef):
                    a = f.args
                    out[(node.name, f.name)] = [x.arg for x in a.posonlyargs + a.args
                                                + a.kwonlyargs]
    return out


def vllm_site_packages() -> str | None:
    """site-packages of the vLLM environment (`SPECTRACE_VLLM_PYTHON`), without importing
    vLLM; None when there is none."""
    import subprocess
    python = os.environ.get("SPECTRACE_VLLM_PYTHON")
    if not python or not os.path.exists(python):
        return None
    out = subprocess.run([python, "-c", "import sysconfig; print(sysconfig.get_paths()"
                          "['purelib'])"], capture_output=True, text=True, timeout=60)
    return out.stdout.strip() or None


def check_signatures(site_packages: str | None = None, v1: bool = False,
                     vllm: bool = False) -> list[str]:
    """Differences between the stand-ins' parameter names and SGLang's (`vllm`: vLLM's,
    in the vLLM environment) (empty = same)."""
    if vllm:
        site_packages = site_packages or vllm_site_packages()
        if site_packages is None:
            return ["no vLLM environment to compare with (SPECTRACE_VLLM_PYTHON)"]
    elif site_packages is None:
        import sglang
        site_packages = os.path.dirname(os.path.dirname(sglang.__file__))
    vllm_mods = make_vllm_modules()
    mods = {"EAGLEWorkerV2": make_v2_module(), "EagleDraftWorker": make_v2_module(),
            "LlamaModel": make_eagle3_module(), "EAGLEWorker": make_v1_module(),
            **dict.fromkeys(("BaseSpecWorker", "DFlashWorkerV2", "NGRAMWorker",
                             "DFlashDraftModel"), make_algorithm_module()),
            "SchedulerBatchResultProcessor": make_result_processor_module(),
            "TpModelWorker": make_tp_worker_module(),
            **{name: m for m in vllm_mods.values() for name in vars(m)
               if isinstance(vars(m)[name], type)},
            **{("MRV2." if name == "GPUModelRunner" else "") + name: m
               for m in make_vllm_mrv2_modules().values() for name in vars(m)
               if isinstance(vars(m)[name], type)}}
    problems = []
    hot = HOT_METHODS_VLLM if vllm else HOT_METHODS_V1 if v1 else HOT_METHODS
    for rel, classes in hot.items():
        path = os.path.join(site_packages, rel)
        if not os.path.exists(path):
            problems.append(f"{path} not found")
            continue
        real = _source_params(path)
        for cls, methods in classes.items():
            for m in methods:
                name = cls.rpartition(".")[2]  # "MRV2.GPUModelRunner": MRV2's class
                ours = list(inspect.signature(getattr(getattr(mods[cls], name), m)).parameters)
                theirs = real.get((name, m))
                if theirs != ours:
                    problems.append(f"{cls}.{m}: {'vLLM' if vllm else 'SGLang'} {theirs} "
                                    f"vs stand-in {ours}")
    return problems


# -- one step -------------------------------------------------------------------------------
def accept_lists(bs: int, n: int = 64, seed: int = 0) -> list[list[int]]:
    """Accept counts (correct drafts per request, 0..STEPS), distributed like a healthy
    chain (per-position acceptance about 0.77/0.55/0.38)."""
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        row = []
        for _ in range(bs):
            c = 0
            for p in (0.77, 0.71, 0.69)[:STEPS]:
                if rng.random() >= p:
                    break
                c += 1
            row.append(c)
        out.append(row)
    return out


@dataclass
class Tensors:
    draft_token: object      # [bs * n] int64: the verify input (draft chain, root first)
    accept_lens: object      # [bs] int32
    next_token_ids: object   # [bs * n] int64: the target's prediction at each position
    hidden_decode: object    # [bs * topk, H]: the draft's own hidden state
    hidden_extend: object    # [bs * n, NUM_AUX * H_target]: the target's aux layers


def make_tensors(bs: int, device: str = "cpu", dtype=None) -> Tensors:
    import torch
    dtype = dtype or torch.bfloat16
    n = NUM_DRAFT_TOKENS
    g = torch.Generator().manual_seed(bs)
    draft = torch.randint(0, 128_000, (bs * n,), generator=g)
    # the target's prediction at column k is compared with the draft token at column k+1:
    # agree at draft position 0, disagree after (token ids >= 128000 never drafted)
    pred = torch.randint(128_000, 129_000, (bs, n), generator=g)
    pred[:, 0] = draft.reshape(bs, n)[:, 1]
    return Tensors(
        draft_token=draft.to(device),
        accept_lens=torch.full((bs,), 2, dtype=torch.int32).to(device),
        next_token_ids=pred.reshape(-1).to(device),
        hidden_decode=torch.zeros(bs * TOPK, DRAFT_HIDDEN, dtype=dtype, device=device),
        hidden_extend=torch.zeros(bs * n, NUM_AUX * TARGET_HIDDEN, dtype=dtype, device=device))


def _forward_batch(mode, hidden):
    return types.SimpleNamespace(forward_mode=mode, input_ids=None, positions=None,
                                 spec_info=types.SimpleNamespace(hidden_states=hidden))


class V2Step:
    """One decode step of the v2 worker plus the scheduler's accept-count hand-over.
    `hooks`: "spectrace" (spectrace's install functions), "naive" (a per-request OTel
    histogram record + counter add in `on_verify_complete_cpu`, nothing else) or None."""

    def __init__(self, bs: int, hooks: str | None, tensors: Tensors | None = None,
                 device: str = "cpu", naive_instruments=None) -> None:
        from spectrace.patching import Patcher
        FM = forward_mode()
        self.bs = bs
        self.patcher = Patcher()
        self.mod, self.mod3 = make_v2_module(), make_eagle3_module()
        self.mod_rp, self.mod_tp = make_result_processor_module(), make_tp_worker_module()
        if hooks == "spectrace":
            from spectrace.adapters import sglang_eagle3, sglang_v2, sglang_worker
            self.patcher.apply(self.mod, sglang_v2.WORKER_POINTS)
            self.patcher.apply(self.mod3, sglang_eagle3.LLAMA_EAGLE3)
            self.patcher.apply(self.mod_rp, sglang_v2.RESULT_PROCESSOR)
            self.patcher.apply(self.mod_tp, sglang_worker.TARGET_WORKER)
            assert not self.patcher.missing, self.patcher.missing
        elif hooks == "naive":
            self.patcher.wrap(self.mod.EAGLEWorkerV2, "on_verify_complete_cpu",
                              naive_wrapper(*naive_instruments), "naive")
        t = tensors or make_tensors(bs, device)
        self.tensors = t
        w = self.mod.EAGLEWorkerV2(server_args=None, gpu_id=0, nccl_port=0,
                                   target_worker=self.mod_tp.TpModelWorker())
        w.verify_fb = types.SimpleNamespace(input_ids=t.draft_token)  # bs x n verify tokens
        w.draft_worker = self.mod.EagleDraftWorker(
            self.mod3.LlamaModel(), _forward_batch(FM.DECODE, t.hidden_decode),
            _forward_batch(FM.DRAFT_EXTEND_V2, t.hidden_extend), STEPS)
        w.result = types.SimpleNamespace(accept_lens=t.accept_lens,
                                         next_token_ids=t.next_token_ids, new_seq_lens=None)
        self.worker = w
        import torch
        self.batch = types.SimpleNamespace(
            forward_mode=FM.DECODE, is_extend_in_batch=False, reqs=[None] * bs,
            seq_lens=t.accept_lens,  # [bs] on the device, as SGLang's
            spec_info=types.SimpleNamespace(draft_token=t.draft_token),
            seq_lens_cpu=torch.randint(1, 40_000, (bs,), dtype=torch.int64))
        self.processor = self.mod_rp.SchedulerBatchResultProcessor(w, None)
        self.finished = types.SimpleNamespace(
            rid="bench-request", spec_verify_ct=100, spec_num_correct_drafts=150,
            spec_correct_drafts_histogram=[20, 30, 30, 20],
            sampling_params=types.SimpleNamespace(temperature=1.0, top_k=1))
        self.lists = accept_lists(bs)
        self.i = 0

    def __call__(self) -> None:
        w = self.worker
        w.forward_batch_generation(self.batch)
        self.i = i = (self.i + 1) & 63
        self.processor.counts = list(self.lists[i])
        self.processor._resolve_spec_v2_tokens(w.result, self.batch)
        self.processor._prepare_kv_cache_release(self.finished)

    def draft_forward(self) -> None:
        """One draft-model pass alone (the width hook)."""
        fb = self.worker.draft_worker.decode_fb
        self.worker.draft_worker.draft_model.forward(None, None, fb)

    def close(self) -> None:
        self.patcher.restore_all()


class V1Step:
    """One decode step of the v1 worker (accept counts come back from `verify`)."""

    def __init__(self, bs: int, hooks: str | None, tensors: Tensors | None = None,
                 device: str = "cpu") -> None:
        from spectrace.patching import Patcher
        FM = forward_mode()
        self.bs = bs
        self.patcher = Patcher()
        self.mod, self.mod3 = make_v1_module(), make_eagle3_module()
        self.mod_tp = make_tp_worker_module()
        if hooks == "spectrace":
            from spectrace.adapters import sglang_eagle3, sglang_v1, sglang_worker
            self.patcher.apply(self.mod, sglang_v1.WORKER_POINTS)
            self.patcher.apply(self.mod3, sglang_eagle3.LLAMA_EAGLE3)
            self.patcher.apply(self.mod_tp, sglang_worker.TARGET_WORKER)
            assert not self.patcher.missing, self.patcher.missing
        t = tensors or make_tensors(bs, device)
        w = self.mod.EAGLEWorker(server_args=None, gpu_id=0, tp_rank=0, dp_rank=None,
                                 moe_ep_rank=0, nccl_port=0,
                                 target_worker=self.mod_tp.TpModelWorker())
        w.draft_model = self.mod3.LlamaModel()
        w.decode_fb = _forward_batch(FM.DECODE, t.hidden_decode)
        w.extend_fb = _forward_batch(FM.DRAFT_EXTEND_V2, t.hidden_extend)
        self.out = types.SimpleNamespace(num_correct_drafts_per_req_cpu=None)
        w.verify_result = (None, self.out, None, False)
        self.worker = w
        self.batch = types.SimpleNamespace(forward_mode=FM.DECODE, is_extend_in_batch=False,
                                           reqs=[None] * bs, seq_lens=None, spec_info=None,
                                           input_ids=t.draft_token)
        self.lists = accept_lists(bs)
        self.i = 0

    def __call__(self) -> None:
        self.i = i = (self.i + 1) & 63
        self.out.num_correct_drafts_per_req_cpu = list(self.lists[i])  # verify's fresh list
        self.worker.forward_batch_generation(self.batch)

    def close(self) -> None:
        self.patcher.restore_all()


def naive_wrapper(histogram, counter):
    """The naive alternative: one histogram record and one counter add per request."""

    def wrapper(wrapped, instance, args, kwargs):
        counts = args[0] if args else kwargs["num_correct_drafts_per_req"]
        for c in counts:
            histogram.record(c + 1)
            counter.add(c)
        return wrapped(*args, **kwargs)
    return wrapper


# -- SGLang's other algorithms (adapters/sglang_algorithms.py) --------------------------------
def make_algorithm_module():
    """A module object with the worker classes of SGLang 0.5.23's other algorithms, shaped
    like theirs: `BaseSpecWorker` (its no-op `on_verify_complete_cpu`, which DFlash, DSpark,
    Uno, multi-layer EAGLE and plugins inherit), `DFlashWorkerV2` (a step of its own),
    `NGRAMWorker` (a step and a counts hand-over of its own) and a plugin's worker."""

    class BaseSpecWorker:
        def on_verify_complete_cpu(self, num_correct_drafts_per_req, batch_size=0):
            pass

    class _Worker(BaseSpecWorker):
        def __init__(self, server_args, gpu_id, nccl_port, target_worker):
            self.server_args = server_args
            self.target_worker = target_worker
            self.topk = TOPK
            self.speculative_num_steps = STEPS
            self.speculative_num_draft_tokens = NUM_DRAFT_TOKENS
            self.adaptive_controller = None
            self.draft_worker = None

        def forward_batch_generation(self, batch, on_publish=None, grammar_barrier=None):
            if batch.forward_mode.is_extend() or batch.is_extend_in_batch:
                return None
            return None

    class DFlashDraftModel:
        """SGLang's DFlash draft (`srt/models/dflash.py`): fc over `num_context_features`
        target layers of its own hidden size, `project_target_hidden` once per step."""

        def __init__(self):
            self.config = types.SimpleNamespace(hidden_size=DRAFT_HIDDEN)
            self.num_context_features = NUM_AUX
            self.fc = types.SimpleNamespace(in_features=NUM_AUX * DRAFT_HIDDEN)
            self.draft_config = None

        def project_target_hidden(self, target_hidden):
            return target_hidden

    class DFlashWorkerV2(_Worker):
        """0.5.23's step: the target's new hidden states projected by the draft once
        (`_append_target_hidden_to_draft_kv`), then the block accepted (`_accept_block`,
        keyword arguments as SGLang passes them)."""

        def __init__(self, server_args, gpu_id, nccl_port, target_worker):
            super().__init__(server_args, gpu_id, nccl_port, target_worker)
            self.draft_model = DFlashDraftModel()
            self.block_size = NUM_DRAFT_TOKENS
            self.step_inputs = None  # (target hidden, candidates, target predictions, bs)

        def forward_batch_generation(self, batch, on_publish=None, grammar_barrier=None,
                                     pp_proxy_tensors=None):
            if batch.forward_mode.is_extend() or batch.is_extend_in_batch:
                return None
            hidden, candidates, predict, bs = self.step_inputs
            self.draft_model.project_target_hidden(hidden)
            return self._accept_block(candidates=candidates, next_token_logits=None,
                                      sampling_info=None, draft_input=None, prefix_lens=None,
                                      bs=bs, target_predict=predict)

        def _accept_block(self, *, candidates, next_token_logits, sampling_info,
                          draft_input, prefix_lens, bs, target_predict=None):
            return None

    class NGRAMWorker(_Worker):
        def __init__(self, server_args, gpu_id, nccl_port, target_worker):
            super().__init__(server_args, gpu_id, nccl_port, target_worker)

        def forward_batch_generation(self, batch, on_publish=None, pp_proxy_tensors=None):
            return super().forward_batch_generation(batch)

        def on_verify_complete_cpu(self, num_correct_drafts_per_req, batch_size=0):
            if self.adaptive_controller is not None:
                self.adaptive_controller.on_verify_complete(num_correct_drafts_per_req)

    class PluginWorker(_Worker):
        """A plugin's worker: only the counts are spectrace's."""

    mod = types.ModuleType("spectrace_bench.algorithms")
    for cls in (BaseSpecWorker, DFlashDraftModel, DFlashWorkerV2, NGRAMWorker, PluginWorker):
        setattr(mod, cls.__name__, cls)
    return mod


ALGORITHM_STEPS = ("NGRAMWorker", "DFlashWorkerV2", "PluginWorker")


class AlgorithmStep:
    """One decode step of another algorithm's worker (`worker`: one of ALGORITHM_STEPS)
    plus the scheduler's accept-count hand-over, with spectrace's tables for those
    workers (`hooks` "spectrace") or none."""

    def __init__(self, bs: int, hooks: str | None, worker: str) -> None:
        from spectrace.patching import Patcher
        FM = forward_mode()
        self.bs = bs
        self.patcher = Patcher()
        self.mod = make_algorithm_module()
        if hooks == "spectrace":
            from spectrace.adapters import sglang_algorithms as algos
            from spectrace.adapters import sglang_dflash
            for table in (algos.BASE_SPEC_WORKER, algos.DFLASH, algos.NGRAM,
                          sglang_dflash.WIDTH_POINTS):
                self.patcher.apply(self.mod, table)
            assert len(self.patcher.patches) == 8, self.patcher.patches
        self.worker = getattr(self.mod, worker)(
            server_args=None, gpu_id=0, nccl_port=0,
            target_worker=types.SimpleNamespace(tp_rank=0))
        if worker == "DFlashWorkerV2":
            import torch
            n = NUM_DRAFT_TOKENS
            g = torch.Generator().manual_seed(bs)
            candidates = torch.randint(0, 128_000, (bs, n), generator=g)
            predict = torch.randint(128_000, 129_000, (bs, n), generator=g)
            predict[:, 0] = candidates[:, 1]  # agree at draft position 0, as make_tensors
            hidden = torch.zeros(bs * 2, NUM_AUX * DRAFT_HIDDEN, dtype=torch.bfloat16)
            self.worker.step_inputs = (hidden, candidates, predict, bs)
        self.batch = types.SimpleNamespace(forward_mode=FM.DECODE, is_extend_in_batch=False,
                                           reqs=[None] * bs, seq_lens=None, spec_info=None)
        self.lists = accept_lists(bs)
        self.i = 0

    def __call__(self) -> None:
        w = self.worker
        w.forward_batch_generation(self.batch)
        self.i = i = (self.i + 1) & 63
        w.on_verify_complete_cpu(list(self.lists[i]), batch_size=self.bs)

    def close(self) -> None:
        self.patcher.restore_all()


# -- vLLM -------------------------------------------------------------------------------------
# The CPU benchmark's logits have a small vocabulary: the agreement's argmax over the
# vocabulary is device work, which on a GPU does not take host time; here only the host
# side of the launches is measured.
VLLM_BENCH_VOCAB = 1024


@dataclass
class VllmInputs:
    """What one engine step hands the hooks: the scheduler's output and the runner's (both
    plain Python, as vLLM makes them), the target's logits and the spec-decode metadata
    (tensors on the device), the target's aux hidden states for the draft."""

    steps: list          # 64 (scheduler_output, model_runner_output) pairs
    logits: object       # [bs * (STEPS + 1), VLLM_BENCH_VOCAB]
    meta: object         # SpecDecodeMetadata's fields the hook reads
    hidden: object       # [bs, NUM_AUX * TARGET_HIDDEN]
    batch: object        # MRV2: its InputBatch's fields the hook reads


def make_vllm_inputs(bs: int, device: str = "cpu", dtype=None) -> VllmInputs:
    import torch
    dtype = dtype or torch.bfloat16
    k = STEPS
    reqs = [f"req-{i}" for i in range(bs)]
    steps = []
    for accepted in accept_lists(bs):
        so = types.SimpleNamespace(scheduled_spec_decode_tokens={r: [7] * k for r in reqs},
                                   num_scheduled_tokens={r: k + 1 for r in reqs},
                                   total_num_scheduled_tokens=bs * (k + 1),
                                   scheduled_cached_reqs=types.SimpleNamespace(
                                       req_ids=reqs, num_computed_tokens=[700] * bs))
        stats = types.SimpleNamespace(  # vLLM's SpecDecodingStats of the step
            num_drafts=bs, num_draft_tokens=bs * k,
            num_accepted_tokens_per_pos=[sum(a > p for a in accepted) for p in range(k)])
        out = types.SimpleNamespace(sampled_token_ids=[[5] * (a + 1) for a in accepted],
                                    req_id_to_index={r: i for i, r in enumerate(reqs)},
                                    spec_stats=stats)
        steps.append((so, out))
    n = bs * k
    meta = types.SimpleNamespace(
        draft_token_ids=torch.zeros(n, dtype=torch.int32, device=device),
        num_draft_tokens=[k] * bs,
        target_logits_indices=torch.arange(n, device=device) + torch.arange(
            bs, device=device).repeat_interleave(k))
    # MRV2: each request's K + 1 logits rows; the verify input at those rows is the last
    # sampled token, then the K drafts (the target's argmax at row j is compared with the
    # draft at row j + 1: they agree at draft position 0 only, as `make_tensors`)
    logits = torch.zeros(bs * (k + 1), VLLM_BENCH_VOCAB, dtype=dtype)
    verify_input = torch.zeros(bs, k + 1, dtype=torch.int32)
    verify_input[:, 1] = 1
    verify_input[:, 2:] = 2
    logits[:, 1] = 1.0  # argmax 1 on every row
    batch = types.SimpleNamespace(
        num_reqs=bs, num_draft_tokens=bs * k, num_draft_tokens_per_req=[k] * bs,
        input_ids=verify_input.reshape(-1).to(device),
        logits_indices=torch.arange(bs * (k + 1), device=device))
    return VllmInputs(steps, logits.to(device), meta,
                      torch.zeros(bs, NUM_AUX * TARGET_HIDDEN, dtype=dtype, device=device),
                      batch)


# speculative method -> (the draft's adapter table, its class) in the bench's modules;
# None: no draft model (the EngineCore and runner hooks only). EAGLE-1 and MTP drafts
# have no wrapped draft method either, so "ngram" stands for them too.
VLLM_ALGORITHMS = {"eagle3": ("LLAMA_EAGLE3", "Eagle3LlamaForCausalLM"),
                   "dflash": ("QWEN3_DFLASH", "DFlashQwen3ForCausalLM"),
                   "ngram": None}


class VllmStep:
    """One vLLM engine step through spectrace's vLLM tables (`vllm_engine`, `vllm_runner`
    or, `runner="mrv2"`, `vllm_mrv2`, the draft's table) on the stand-ins, or
    uninstrumented (`hooks` None). `log_stats`: vLLM keeps its own stats (the server's
    default) or not (`LLM`'s default). `algorithm`: a key of `VLLM_ALGORITHMS`."""

    def __init__(self, bs: int, hooks: str | None, inputs: VllmInputs | None = None,
                 device: str = "cpu", log_stats: bool = True, algorithm: str = "eagle3",
                 runner: str = "v1") -> None:
        from spectrace.adapters import (
            vllm_dflash, vllm_eagle3, vllm_engine, vllm_mrv2, vllm_runner,
        )
        from spectrace.patching import Patcher
        self.patcher = Patcher()
        mods = make_vllm_modules()
        draft_table = VLLM_ALGORITHMS[algorithm]
        tables = {"SCHEDULER": vllm_engine.SCHEDULER, "ENGINE_CORE": vllm_engine.ENGINE_CORE,
                  "GPU_RUNNER": vllm_runner.GPU_RUNNER,
                  "LLAMA_EAGLE3": vllm_eagle3.LLAMA_EAGLE3,
                  "QWEN3_DFLASH": vllm_dflash.QWEN3_DFLASH}
        self.mrv2 = runner == "mrv2"
        if self.mrv2:
            mods.update(make_vllm_mrv2_modules())
            del tables["GPU_RUNNER"]
            tables.update(RUNNER=vllm_mrv2.RUNNER, REJECTION_SAMPLER=vllm_mrv2.REJECTION_SAMPLER,
                          STEP_TIMING=vllm_mrv2.STEP_TIMING,
                          TARGET_DEPENDENT_AR=vllm_mrv2.TARGET_DEPENDENT_AR)
        if hooks == "spectrace":
            for name, points in tables.items():
                self.patcher.apply(mods[name], points)
            assert not self.patcher.missing, self.patcher.missing
        self.inputs = inputs or make_vllm_inputs(bs, device)
        cfg = types.SimpleNamespace(model_config=None, speculative_config=None,
                                    parallel_config=None)
        scheduler = mods["SCHEDULER"].Scheduler(cfg, None, None, 16, log_stats=log_stats)
        draft = (None if draft_table is None
                 else getattr(mods[draft_table[0]], draft_table[1])())
        runner = (mods["RUNNER"] if self.mrv2 else mods["GPU_RUNNER"]).GPUModelRunner(draft)
        runner.vllm_config = cfg
        runner.device = self.inputs.logits.device  # CUDA inputs: CUDA events time the phases
        self.i = 0
        self.engine = mods["ENGINE_CORE"].EngineCore(scheduler, runner, draft, self._next)

    def _next(self):
        self.i = i = (self.i + 1) & 63
        so, out = self.inputs.steps[i]
        t = self.inputs
        return so, out, t.logits, t.batch if self.mrv2 else t.meta, t.hidden

    def __call__(self) -> None:
        self.engine.step()

    def close(self) -> None:
        self.patcher.restore_all()
