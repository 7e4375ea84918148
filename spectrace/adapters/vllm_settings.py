"""The server settings that change acceptance (`spectrace.server_settings`), read from the
VllmConfig vLLM hands its scheduler (EngineCore) and its model runners (worker), after
vLLM's own post-init has resolved it (the checkpoint's quantization, the CUDA-graph mode
and sizes, the speculative method).

Each setting lists the ways releases spell it, first that reads wins (feature detection:
a release without a field raises AttributeError and the next way is tried; none left:
the setting is not recorded). The fields are checked against the released sources 0.18 -
0.33 by tests/test_vllm_wrap_points.py (SETTINGS_FIELDS) and read from a running 0.32
server by tests/test_vllm_e2e.py.
"""
from __future__ import annotations

from .. import chat_template, server_settings


def _cuda_graph(c) -> bool:
    """Off when the model runs eagerly or the compilation config's mode is NONE."""
    mode = c.compilation_config.cudagraph_mode
    name = str(getattr(mode, "name", mode)).upper()
    return not c.model_config.enforce_eager and name not in ("NONE", "")


def _ep_size(c) -> int:
    """vLLM's expert parallelism spans the tensor- and data-parallel ranks when on."""
    p = c.parallel_config
    return p.tensor_parallel_size * p.data_parallel_size if p.enable_expert_parallel else 1


def _draft_kv(c):
    """The draft's own KV-cache dtype where vLLM has one (`speculative_config.
    kv_cache_dtype`, None: the target's), else the target's."""
    own = c.speculative_config.kv_cache_dtype
    return own if own else c.cache_config.cache_dtype


def _draft_quantization(c):
    spec = c.speculative_config
    if spec.draft_model_config is spec.target_model_config:  # no draft model (n-gram ...)
        return None
    return spec.draft_model_config.quantization or spec.quantization or "none"


def _dynamic_k(c) -> bool:
    spec = c.speculative_config
    return bool(spec.uses_dynamic_speculative_decoding()
                or getattr(spec, "enable_adaptive_verification", False))


def _k_schedule(c) -> str | None:
    """K by batch size (0.26+) as vLLM holds it: its [first, last, K] ranges."""
    ranges = c.speculative_config.num_speculative_tokens_per_batch_size
    return None if ranges is None else str([list(r) for r in ranges])


def _tokenizer_template(c) -> dict:
    """The tokenizer's own template (`model_config.tokenizer`). vLLM's --chat-template is
    an API-server argument the engine's config does not hold, so the source says that it
    would take the tokenizer's place."""
    got = chat_template.applied(None, c.model_config.tokenizer)
    if "chat_template" in got:
        got["chat_template"] += ", unless --chat-template"
    return got


READS = {
    "kv_cache_dtype": (lambda c: c.cache_config.cache_dtype,),
    "draft_kv_cache_dtype": (_draft_kv, lambda c: c.cache_config.cache_dtype),
    "quantization": (lambda c: c.model_config.quantization or "none",),
    "draft_quantization": (_draft_quantization,),
    "cuda_graph": (_cuda_graph,),
    "cuda_graph_max_bs": (lambda c: c.compilation_config.max_cudagraph_capture_size
                          if _cuda_graph(c) else None,),
    "async_scheduling": (lambda c: bool(c.scheduler_config.async_scheduling),),
    "prefix_caching": (lambda c: bool(c.cache_config.enable_prefix_caching),),
    "grammar_backend": (lambda c: c.structured_outputs_config.backend,),
    "disaggregation": (lambda c: c.kv_transfer_config.kv_role if c.kv_transfer_config
                       else "none",),
    "attention_dp_size": (lambda c: c.parallel_config.data_parallel_size,),
    "tp_size": (lambda c: c.parallel_config.tensor_parallel_size,),
    "pp_size": (lambda c: c.parallel_config.pipeline_parallel_size,),
    "ep_size": (_ep_size,),
    "spec_method": (lambda c: c.speculative_config.method,),
    "spec_num_steps": (lambda c: c.speculative_config.num_speculative_tokens,),
    # 0.26+ (K by batch size); dspark's adaptive verification where the release has it
    "spec_adaptive": (_dynamic_k,),
    "spec_adaptive_config": (_k_schedule,),
    # 0.18 - 0.20: strict / probabilistic (/ synthetic); 0.22+: standard, synthetic, block
    # (0.26+), fly (0.33: FLy's lossy, entropy-gated deferral)
    "spec_verification": (lambda c: c.speculative_config.rejection_sample_method,),
    "chat_template": (lambda c: _tokenizer_template(c).get("chat_template"),),
    "chat_template_hash": (lambda c: _tokenizer_template(c).get("chat_template_hash"),),
}


def read(vllm_config) -> dict:
    """The settings this VllmConfig holds (None in: nothing out)."""
    return server_settings.read(READS, vllm_config, "settings:vllm")
