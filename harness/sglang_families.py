"""SGLang's real EAGLE-3 target model classes, built without weights (meta device) from
tiny configs, one per model family that implements `set_eagle3_layers_to_capture`
(SGLang 0.5.23: 28 families; `mindspore` needs the MindSpore runtime and is left out), and
SGLang's real EAGLE-3 draft class: for tests that call the families' real methods.

Stand-ins, because the real thing cannot run here:
- kernel ops some model modules bind at import time but that construction never calls:
  stubs that raise if called (`STUBBED`; the project's kernel stand-in covers the ops a
  forward needs);
- `torch.get_device_module()` with no argument means CUDA on this CUDA build of torch
  (Qwen3-Next / Qwen3.5 GDN norms ask for the current device while building): it defaults
  to the CPU when no GPU is present;
- SGLang's process state for one process: a world-size-1 gloo group and a published
  `ServerArgs` (what `sglang.test.test_utils.publish_build_topology` does; that module
  imports `datasets`, which the harness does not install);
- `FakePPGroup`: pipeline rank `rank` of `size` for construction and the capture call (no
  communication happens in either).
Config fields that real checkpoints carry but the tiny configs would lack are filled in per
family below (remote-code fields, `encoder_only` / `language_only` that SGLang's
ModelConfig sets). Run with `SGLANG_USE_CPU_ENGINE=1` and the kernel stand-in on
PYTHONPATH (`harness.server.cpu_env()`).
"""
from __future__ import annotations

import contextlib
import importlib
import importlib.util
import os
import socket

import torch

_OPS = """apply_multidimensional_rope_cpu apply_rotary_pos_emb_cpu biased_grouped_topk_cpu bmm_cpu
causal_conv1d_weight_pack conv3d_embed_cpu conv3d_embed_weight_pack convert_scale_packed
convert_weight_packed convert_weight_packed_scale_zp flash_attn_varlen_func
fp8_per_tensor_scaled_mm_cpu fp8_scaled_mm_cpu fused_add_rmsnorm_cpu
fused_dual_residual_rmsnorm_cpu fused_experts_cpu fused_gdn_gating_cpu fused_input_proj_cpu
fused_linear_sigmoid_mul fused_moe_router_cpu fused_qk_gemma_rmsnorm_cpu
fused_qk_gemma_rmsnorm_with_gate_cpu fused_qk_norm_cpu fused_qk_norm_rope_cpu
fused_qk_rmsnorm_apply_from_stats_cpu fused_qk_rmsnorm_cpu fused_qk_rmsnorm_sumsq_cpu
fused_qkvzba_split_reshape_cat_contiguous_cpu fused_qkvzba_split_reshape_cat_cpu
fused_sigmoid_gating_delta_rule_update_cpu fused_sigmoid_mul_cpu gelu_and_mul_cpu
gelu_tanh_and_mul_cpu gemma3_rmsnorm_cpu gemma4_rmsnorm_cpu gemma_fused_add_rmsnorm_cpu
gemma_rmsnorm_cpu grouped_topk_cpu image_preprocess_cpu int8_scaled_mm_with_quant l2norm_cpu
layernorm_cpu multimodal_rotary_embedding_cpu qkv_proj_with_rope_fused_weight rmsnorm_cpu
rotary_embedding rotary_embedding_cpu shared_expert_cpu silu_and_mul_cpu topk_sigmoid_cpu
topk_softmax_cpu weight_packed_linear""".split()
STUBBED: list[str] = []


def _stub(name: str):
    def op(*args, **kwargs):
        raise NotImplementedError(f"harness stub for sgl_kernel.{name}: not for forward passes")
    op.__name__ = name
    return op


def prepare(**server_args_fields) -> None:
    """Kernel-op stubs, the CPU device default, and SGLang's one-process state."""
    import sgl_kernel  # noqa: F401  (the project's stand-in, on PYTHONPATH)
    for name in _OPS:
        try:
            getattr(torch.ops.sgl_kernel, name)
        except AttributeError:
            setattr(torch.ops.sgl_kernel, name, _stub(name))
            STUBBED.append(name)
    if not torch.cuda.is_available():
        get = torch.get_device_module
        torch.get_device_module = lambda device=None: get(device if device is not None else "cpu")
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    if "MASTER_PORT" not in os.environ:  # gloo's TCPStore binds it: a free one per process
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            os.environ["MASTER_PORT"] = str(s.getsockname()[1])
    from sglang.srt.distributed import parallel_state
    from sglang.srt.distributed.parallel_state import (
        init_distributed_environment, initialize_model_parallel, model_parallel_is_initialized)
    from sglang.srt.runtime_context import SpawnRanks, get_parallel, publish, reset_context
    from sglang.srt.server_args import ServerArgs
    if not torch.distributed.is_initialized():
        init_distributed_environment(world_size=1, rank=0, local_rank=0, backend="gloo")
    if not model_parallel_is_initialized():
        reset_context()
        fields = dict(tp_size=1, ep_size=1, pp_size=1, device="cpu", **server_args_fields)
        publish(ServerArgs(model_path="dummy", **fields), role="test",
                ranks=SpawnRanks(world_rank=0))
        if parallel_state._WORLD is not None:
            get_parallel().override_permanently(world_group=parallel_state._WORLD)
        initialize_model_parallel(backend="gloo")


def present(name: str) -> bool:
    """The family's model file exists in the installed SGLang."""
    return importlib.util.find_spec(f"sglang.srt.models.{FAMILIES[name].module}") is not None


def build(name: str, device: str = "meta"):
    with torch.device(device):
        return FAMILIES[name]()


def make_config(model_type, **kw):
    """SGLang's own config class when it registers one (as its get_config would), else
    transformers' AutoConfig.for_model."""
    from sglang.srt.utils.hf_transformers.common import _CONFIG_REGISTRY
    if model_type in _CONFIG_REGISTRY:
        return _CONFIG_REGISTRY[model_type](**kw)
    from transformers import AutoConfig, PretrainedConfig
    try:
        return AutoConfig.for_model(model_type, **kw)
    except ValueError:  # remote-code model types (bailing_moe, ...): a plain config
        base = dict(hidden_act="silu", attention_bias=False, rope_theta=10000.0)
        cfg = PretrainedConfig(**{**base, **kw})
        cfg.model_type = model_type
        return cfg


L = 8  # layers: defaults [2, L//2, L-3] = [2, 4, 5]
TEXT = dict(vocab_size=512, hidden_size=64, intermediate_size=128, num_hidden_layers=L,
            num_attention_heads=4, num_key_value_heads=2, head_dim=16,
            max_position_embeddings=256, rms_norm_eps=1e-6, tie_word_embeddings=False)
MOE = dict(moe_intermediate_size=32, num_experts_per_tok=2)
MLA = dict(q_lora_rank=32, kv_lora_rank=32, qk_rope_head_dim=16, qk_nope_head_dim=16,
           v_head_dim=16, n_routed_experts=4, n_shared_experts=1, first_k_dense_replace=1,
           n_group=1, topk_group=1, norm_topk_prob=True, routed_scaling_factor=1.0,
           rope_scaling={"type": "yarn", "factor": 4.0, "original_max_position_embeddings": 64,
                         "beta_fast": 32, "beta_slow": 1, "mscale": 1.0, "mscale_all_dim": 1.0})


# attributes the remote-code / original checkpoints carry that the HF classes lack
DSV3_EXTRA = dict(moe_layer_freq=1, scoring_func="sigmoid", topk_method="noaux_tc")


# set by SGLang's ModelConfig / server args in a real run
CONFIG_FLAGS = dict(encoder_only=False, language_only=False)


def cls_of(module, name):
    return getattr(importlib.import_module(f"sglang.srt.models.{module}"), name)


def fam(module, clsname, model_type, **kw):
    flatten = kw.pop("_flatten_text", False)

    def build():
        cfg = make_config(model_type, **kw)
        for sub, default_type in (("text_config", "mixtral"), ("vision_config", "clip_vision_model")):
            if isinstance(getattr(cfg, sub, None), dict):  # MiniMaxVLBaseConfig on transformers
                from sglang.srt.configs.minimax_vl import _coerce_sub_config  # 5.24: its super()
                setattr(cfg, sub, _coerce_sub_config(getattr(cfg, sub), default_type))  # resets them
        if flatten:  # model code reads text attributes off the top-level config
            tc = cfg.text_config
            for k, v in tc.to_dict().items():
                if k not in ("model_type", "architectures") and not hasattr(cfg, k):
                    setattr(cfg, k, getattr(tc, k, v))
            for k, v in kw["text_config"].items():
                setattr(cfg, k, v)
        for k, v in CONFIG_FLAGS.items():
            if not hasattr(cfg, k):
                setattr(cfg, k, v)
        if hasattr(cfg, "allow_global_per_layer_attribute_access"):
            cfg.allow_global_per_layer_attribute_access = True
        for sub in ("text_config", "vision_config"):
            c = getattr(cfg, sub, None)
            if c is not None and hasattr(c, "allow_global_per_layer_attribute_access"):
                c.allow_global_per_layer_attribute_access = True
        return cls_of(module, clsname)(cfg, quant_config=None)
    build.module, build.architecture = module, clsname
    return build


FAMILIES = {
    "llama": fam("llama", "LlamaForCausalLM", "llama", **TEXT),
    "qwen2": fam("qwen2", "Qwen2ForCausalLM", "qwen2", **TEXT),
    "qwen3": fam("qwen3", "Qwen3ForCausalLM", "qwen3", **TEXT),
    "apertus": fam("apertus", "ApertusForCausalLM", "apertus", **TEXT),
    "qwen2_moe": fam("qwen2_moe", "Qwen2MoeForCausalLM", "qwen2_moe", **TEXT, **MOE,
                     num_experts=4, shared_expert_intermediate_size=64),
    "qwen3_moe": fam("qwen3_moe", "Qwen3MoeForCausalLM", "qwen3_moe", **TEXT, **MOE,
                     num_experts=4),
    "deepseek_v3": fam("deepseek_v2", "DeepseekV3ForCausalLM", "deepseek_v3", **TEXT, **MOE, **MLA,
                       **DSV3_EXTRA),
    "glm4_moe": fam("glm4_moe", "Glm4MoeForCausalLM", "glm4_moe", **TEXT, **MOE,
                    n_routed_experts=4, n_shared_experts=1, first_k_dense_replace=1,
                    n_group=1, topk_group=1, partial_rotary_factor=0.5),
    "gpt_oss": fam("gpt_oss", "GptOssForCausalLM", "gpt_oss", **TEXT,
                   num_local_experts=4, num_experts_per_tok=2, sliding_window=32),
    "gemma3_causal": fam("gemma3_causal", "Gemma3ForCausalLM", "gemma3_text", **TEXT,
                         sliding_window=32),
    "minimax_m2": fam("minimax_m2", "MiniMaxM2ForCausalLM", "minimax_m2", **TEXT,
                      num_local_experts=4, num_experts_per_tok=2, rotary_dim=8,
                      scoring_func="sigmoid", use_routing_bias=True),
    "exaone_moe": fam("exaone_moe", "ExaoneMoEForCausalLM", "exaone_moe", **TEXT, **MOE,
                      num_experts=4, is_moe_layer=[False] + [True] * (L - 1)),
    "bailing_moe": fam("bailing_moe", "BailingMoeV2ForCausalLM", "bailing_moe_v2", **TEXT, **MOE,
                       num_experts=4, num_shared_experts=1, first_k_dense_replace=1,
                       moe_shared_expert_intermediate_size=32, norm_head=False, use_bias=False,
                       use_qkv_bias=False, embedding_dropout=0.0, partial_rotary_factor=0.5,
                       rope_parameters={"rope_type": "default", "rope_theta": 10000.0},
                       rotary_dim=8, num_nextn_predict_layers=0, norm_topk_prob=True,
                       hidden_act="silu", score_function="sigmoid", n_group=1, topk_group=1,
                       routed_scaling_factor=1.0, moe_router_enable_expert_bias=True,
                       apply_routed_scaling_factor_on_output=False, use_qk_norm=True,
                       torch_dtype=torch.bfloat16),
    "longcat_flash": fam("longcat_flash", "LongcatFlashForCausalLM", "longcat_flash", **TEXT,
                         **MLA),
    "qwen3_next": fam("qwen3_next", "Qwen3NextForCausalLM", "qwen3_next", **TEXT, **MOE,
                      num_experts=4, full_attention_interval=4, linear_num_key_heads=2,
                      linear_num_value_heads=4, linear_key_head_dim=16, linear_value_head_dim=16,
                      linear_num_key_heads_cpu=2, linear_num_value_heads_cpu=4),
    "glm4_moe_lite": fam("glm4_moe_lite", "Glm4MoeLiteForCausalLM", "glm4_moe_lite", **TEXT,
                         **MOE, **MLA),
}

TINY_VIT = dict(hidden_size=32, intermediate_size=64, num_hidden_layers=1,
                num_attention_heads=2, patch_size=14)
DSV3_TEXT = dict(model_type="deepseek_v3", **TEXT, **MOE, **MLA, **DSV3_EXTRA)


def kimi_k25():
    cfg = make_config("kimi_k25", text_config={k: v for k, v in DSV3_TEXT.items() if k != "model_type"},
                      vision_config=dict(TINY_VIT, init_pos_emb_height=4, init_pos_emb_width=4,
                                         text_hidden_size=64, mm_hidden_size=32,
                                         vt_hidden_size=32, vt_num_attention_heads=2,
                                         vt_num_hidden_layers=1, vt_intermediate_size=64))
    cfg.encoder_only = False
    return cls_of("kimi_k25", "KimiK25ForConditionalGeneration")(cfg, quant_config=None)


kimi_k25.module, kimi_k25.architecture = "kimi_k25", "KimiK25ForConditionalGeneration"


FAMILIES.update({
    "kimi_k25": kimi_k25,
    "gemma3_mm": fam("gemma3_mm", "Gemma3ForConditionalGeneration", "gemma3",
                     text_config=dict(TEXT, sliding_window=32),
                     vision_config=dict(TINY_VIT, image_size=28), mm_tokens_per_image=4),
    "gemma4_causal": fam("gemma4_causal", "Gemma4ForCausalLM", "gemma4_text", **TEXT,
                         sliding_window=32, vocab_size_per_layer_input=512),
    "gemma4_mm": fam("gemma4_mm", "Gemma4ForConditionalGeneration", "gemma4",
                     text_config=dict(TEXT, sliding_window=32, vocab_size_per_layer_input=512),
                     vision_config=dict(TINY_VIT)),
    "mllama4": fam("mllama4", "Llama4ForConditionalGeneration", "llama4",
                   text_config=dict(TEXT, intermediate_size_mlp=128, num_local_experts=4,
                                    num_experts_per_tok=1),
                   vision_config=dict(TINY_VIT, image_size=28, vision_output_dim=32,
                                      projector_input_dim=32, projector_output_dim=32)),
    "qwen2_5_vl": fam("qwen2_5_vl", "Qwen2_5_VLForConditionalGeneration", "qwen2_5_vl",
                      _flatten_text=True, text_config=dict(TEXT),
                      vision_config=dict(depth=1, hidden_size=32, intermediate_size=64,
                                         num_heads=2, out_hidden_size=64,
                                         fullatt_block_indexes=[0])),
    "qwen3_vl": fam("qwen3_vl", "Qwen3VLForConditionalGeneration", "qwen3_vl", _flatten_text=True,
                    text_config=dict(TEXT, rope_scaling={"rope_type": "default",
                                                         "mrope_section": [2, 3, 3]}),
                    vision_config=dict(depth=1, hidden_size=32, intermediate_size=64,
                                       num_heads=2, out_hidden_size=64,
                                       deepstack_visual_indexes=[])),
    "qwen3_5_text": fam("qwen3_5_text", "Qwen3_5ForCausalLM", "qwen3_5_text", **TEXT,
                        full_attention_interval=4, linear_num_key_heads=2,
                        linear_num_value_heads=4, linear_key_head_dim=16,
                        linear_value_head_dim=16, linear_num_key_heads_cpu=2,
                        linear_num_value_heads_cpu=4),
    "glm5_next": fam("glm5_next", "Glm5NextForConditionalGeneration", "glm5_next",
                     text_config=dict(TEXT, **MOE, **MLA),
                     vision_config=dict(TINY_VIT, swiglu_limit=7.0)),
    "minimax_m3": fam("minimax_m3", "MiniMaxM3SparseForCausalLM", "minimax_m3", **TEXT,
                      num_local_experts=4, num_experts_per_tok=2, rotary_dim=8,
                      scoring_func="sigmoid", use_routing_bias=True, swiglu_alpha=1.702,
                      swiglu_limit=7.0),
    "minimax_m3_vl": fam("minimax_m3_vl", "MiniMaxM3SparseForConditionalGeneration",
                         "minimax_m3_vl",
                         text_config=dict(TEXT, num_local_experts=4, num_experts_per_tok=2,
                                          rotary_dim=8, scoring_func="sigmoid",
                                          use_routing_bias=True, swiglu_alpha=1.702,
                                          swiglu_limit=7.0, hidden_act="silu"),
                         vision_config=dict(TINY_VIT, image_size=28, num_channels=3,
                                            hidden_act="gelu", layer_norm_eps=1e-5,
                                            img_token_compression_config={
                                                "temporal_patch_size": 2,
                                                "spatial_merge_size": 2},
                                            position_embedding_type="rope", rope_mode="3d",
                                            rope_theta=10000.0,
                                            vision_segment_max_frames=None)),
    "qwen3_5": fam("qwen3_5", "Qwen3_5ForConditionalGeneration", "qwen3_5", _flatten_text=True,
                   text_config=dict(TEXT, full_attention_interval=4, linear_num_key_heads=2,
                                    linear_num_value_heads=4, linear_key_head_dim=16,
                                    linear_value_head_dim=16, linear_num_key_heads_cpu=2,
                                    linear_num_value_heads_cpu=4,
                                    rope_scaling={"rope_type": "default",
                                                  "mrope_section": [2, 3, 3]}),
                   vision_config=dict(depth=1, hidden_size=32, intermediate_size=64,
                                      num_heads=2, out_hidden_size=64,
                                      deepstack_visual_indexes=[])),
})


ARCHITECTURES = {name: build.architecture for name, build in FAMILIES.items()}

def build_draft(aux_ids, hidden: int = TEXT["hidden_size"], device: str = "meta"):
    """SGLang's real Llama EAGLE-3 draft for a target of width `hidden` (fc: 3 x hidden);
    `aux_ids` None: a draft config with no `eagle_aux_hidden_state_layer_ids`."""
    from sglang.srt.models.llama_eagle3 import LlamaForCausalLMEagle3
    eagle = {"use_aux_hidden_state": True}
    if aux_ids is not None:
        eagle["eagle_aux_hidden_state_layer_ids"] = list(aux_ids)
    cfg = make_config("llama", vocab_size=TEXT["vocab_size"], draft_vocab_size=256,
                      hidden_size=hidden, intermediate_size=2 * hidden, num_hidden_layers=1,
                      num_attention_heads=4, num_key_value_heads=2, head_dim=hidden // 4,
                      max_position_embeddings=256, rms_norm_eps=1e-6, hidden_act="silu",
                      tie_word_embeddings=False, rope_theta=10000.0, eagle_config=eagle)
    with torch.device(device):
        return LlamaForCausalLMEagle3(cfg, quant_config=None)


class FakePPGroup:
    """Stands in for GroupCoordinator of pipeline rank `rank` of `size` (no communication
    happens during construction or set_eagle3_layers_to_capture)."""

    def __init__(self, rank, size, real):
        self.rank_in_group, self.world_size, self._real = rank, size, real
        self.ranks = list(range(size))
        self.rank, self.first_rank, self.last_rank = rank, 0, size - 1
        self.is_first_rank, self.is_last_rank = rank == 0, rank == size - 1

    def __getattr__(self, name):
        return getattr(self._real, name)


@contextlib.contextmanager
def pipeline_rank(rank: int, size: int):
    """Build and configure models as pipeline rank `rank` of `size`."""
    from sglang.srt.runtime_context import get_parallel
    par = get_parallel()
    with par.override(pp_group=FakePPGroup(rank, size, par.pp_group), pp_rank=rank,
                      pp_size=size):
        yield
