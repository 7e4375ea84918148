"""The Kimi-K2.5 deployment shape, tiny: a DeepSeek-V3 target (MLA attention, MoE with a
dense first layer) and SGLang's MLA EAGLE-3 draft (`Eagle3DeepseekV2ForCausalLM`,
`sglang/srt/models/kimi_k25_eagle3.py`), as hand-built state dicts (no hub).

The exact-acceptance tricks of `tiny_models` carry over: in `partial` / `full` / `bypass`
every target layer adds zero (o_proj and every down_proj zeroed), so the residual stays
E[x] = e_(x mod H) and the target emits x + 1 (`full`: its final norm is zero, so it always
emits token 0); the draft's fc permutes the first aux layer and its lm_head undoes the
permutation and shifts by 2, so exactly its first proposal after each verify is right.
The target's config carries yarn rope scaling: SGLang's CPU rope for MLA requires it.

With `nextn=True` the target also carries one MTP (NextN) layer, `model.layers.{L}.*` as
DeepSeek-V3 checkpoints do, which SGLang loads as `DeepseekV3ForCausalLMNextN` for
`--speculative-algorithm NEXTN`. In the exact modes its `eh_proj` keeps only the new
token's embedding and every layer adds zero, so it predicts x + 1 from token x, as the
target does: every draft token is accepted (acceptance length 4.0 with 3 steps).
"""
from __future__ import annotations

import json
import os

V, H, L, DV = 512, 128, 4, 256   # vocab, hidden, target layers, draft vocab
NH = 4                            # attention heads
Q_LORA, KV_LORA, ROPE, NOPE, VDIM = 64, 64, 16, 32, 32      # MLA, DeepSeek-V3 shaped
N_EXP, TOPK, N_GROUP, TOPK_GROUP, MOE_I, DENSE_I = 8, 2, 2, 1, 64, 256
FIRST_DENSE = 1


def _r(*shape):
    import torch
    return torch.randn(*shape) * 0.02


def mla_config() -> dict:
    """Fields a DeepSeek-V3 / Kimi-K2 text config and the MLA draft share."""
    return dict(q_lora_rank=Q_LORA, kv_lora_rank=KV_LORA, qk_rope_head_dim=ROPE,
                qk_nope_head_dim=NOPE, v_head_dim=VDIM, num_attention_heads=NH,
                num_key_value_heads=NH, rope_theta=10000.0,
                rope_scaling={"type": "yarn", "rope_type": "yarn", "factor": 4.0,
                              "original_max_position_embeddings": 512, "beta_fast": 32,
                              "beta_slow": 1, "mscale": 1.0, "mscale_all_dim": 1.0},
                rope_interleave=True, attention_bias=False, max_position_embeddings=2048,
                rms_norm_eps=1e-6, hidden_act="silu", bos_token_id=0, eos_token_id=1,
                tie_word_embeddings=False, torch_dtype="bfloat16", vocab_size=V, hidden_size=H)


def target_config() -> dict:
    return dict(mla_config(), architectures=["DeepseekV3ForCausalLM"], model_type="deepseek_v3",
                num_hidden_layers=L, intermediate_size=DENSE_I, moe_intermediate_size=MOE_I,
                n_routed_experts=N_EXP, n_shared_experts=1, num_experts_per_tok=TOPK,
                n_group=N_GROUP, topk_group=TOPK_GROUP, topk_method="noaux_tc",
                scoring_func="sigmoid", norm_topk_prob=True, routed_scaling_factor=2.5,
                first_k_dense_replace=FIRST_DENSE, moe_layer_freq=1,
                num_nextn_predict_layers=0, ep_size=1)


def draft_config(mode: str, aux_ids: list[int]) -> dict:
    return dict(mla_config(), architectures=["Eagle3DeepseekV2ForCausalLM"],
                model_type="deepseek_v3", num_hidden_layers=1, intermediate_size=2 * H,
                draft_vocab_size=DV, target_hidden_size=H,
                eagle_config={"eagle_aux_hidden_state_layer_ids": aux_ids,
                              "use_aux_hidden_state": mode != "bypass"})


def mla_attention(in_dim: int, exact: bool) -> dict:
    import torch
    a = {"self_attn.q_a_proj.weight": _r(Q_LORA, in_dim),
         "self_attn.q_a_layernorm.weight": torch.ones(Q_LORA),
         "self_attn.q_b_proj.weight": _r(NH * (NOPE + ROPE), Q_LORA),
         "self_attn.kv_a_proj_with_mqa.weight": _r(KV_LORA + ROPE, in_dim),
         "self_attn.kv_a_layernorm.weight": torch.ones(KV_LORA),
         "self_attn.kv_b_proj.weight": _r(NH * (NOPE + VDIM), KV_LORA),
         "self_attn.o_proj.weight": _r(H, NH * VDIM)}
    if exact:
        a["self_attn.o_proj.weight"].zero_()
    return a


def mlp(prefix: str, inter: int, exact: bool) -> dict:
    m = {f"{prefix}.gate_proj.weight": _r(inter, H), f"{prefix}.up_proj.weight": _r(inter, H),
         f"{prefix}.down_proj.weight": _r(H, inter)}
    if exact:
        m[f"{prefix}.down_proj.weight"].zero_()
    return m


def moe(prefix: str, exact: bool) -> dict:
    import torch
    sd = {prefix + "mlp.gate.weight": _r(N_EXP, H),
          prefix + "mlp.gate.e_score_correction_bias": torch.zeros(N_EXP)}
    for e in range(N_EXP):
        sd.update(mlp(prefix + f"mlp.experts.{e}", MOE_I, exact))
    sd.update(mlp(prefix + "mlp.shared_experts", MOE_I, exact))
    return sd


def nextn_layer(prefix: str, exact: bool, head: dict) -> dict:
    """The MTP layer of a DeepSeek-V3 checkpoint: eh_proj over [enorm(embed), hnorm(hidden)],
    one MoE decoder layer, its own final norm and copies of embed_tokens / lm_head."""
    import torch
    eh = _r(H, 2 * H)
    if exact:
        eh = torch.cat([torch.eye(H), torch.zeros(H, H)], 1)
    sd = {prefix + "eh_proj.weight": eh, prefix + "enorm.weight": torch.ones(H),
          prefix + "hnorm.weight": torch.ones(H), prefix + "shared_head.norm.weight":
          head["model.norm.weight"].clone(), prefix + "shared_head.head.weight":
          head["lm_head.weight"].clone(), prefix + "embed_tokens.weight":
          head["model.embed_tokens.weight"].clone(),
          prefix + "input_layernorm.weight": torch.ones(H),
          prefix + "post_attention_layernorm.weight": torch.ones(H)}
    sd.update({prefix + k: v for k, v in mla_attention(H, exact).items()})
    sd.update(moe(prefix, exact))
    return sd


def make_target(out_dir: str, mode: str, nextn: bool = False) -> None:
    import torch
    from safetensors.torch import save_file

    from .tiny_models import exact_target_head
    exact = mode != "random"
    torch.manual_seed(0)
    cfg = target_config()
    if nextn:
        cfg["num_nextn_predict_layers"] = 1
    sd = {"model.embed_tokens.weight": _r(V, H), "model.norm.weight": torch.ones(H),
          "lm_head.weight": _r(V, H)}
    if exact:
        sd.update(exact_target_head(mode, prefix="model."))
    for i in range(L):
        p = f"model.layers.{i}."
        sd[p + "input_layernorm.weight"] = torch.ones(H)
        sd[p + "post_attention_layernorm.weight"] = torch.ones(H)
        sd.update({p + k: v for k, v in mla_attention(H, exact).items()})
        if i < FIRST_DENSE:
            sd.update(mlp(p + "mlp", DENSE_I, exact))
        else:
            sd.update(moe(p, exact))
    if nextn:
        sd.update(nextn_layer(f"model.layers.{L}.", exact, sd))
    sd = {k: (v.float() if "e_score_correction_bias" in k else v.to(torch.bfloat16))
          for k, v in sd.items()}
    with open(os.path.join(out_dir, "config.json"), "w") as f:
        json.dump(cfg, f, indent=2)
    save_file(sd, os.path.join(out_dir, "model.safetensors"), metadata={"format": "pt"})


def draft_state_dict(mode: str, layout: str = "layers") -> dict:
    """The MLA draft's tensors, keyed as its checkpoints are (`layers.0.*`, which SGLang's
    loader maps to `midlayer.*`; or `midlayer.*`)."""
    import torch

    from .tiny_models import draft_head, finish_draft
    exact = mode != "random"
    torch.manual_seed(1)
    sd = draft_head(mode)
    dec = {"input_layernorm.weight": torch.ones(H), "hidden_norm.weight": torch.ones(H),
           "post_attention_layernorm.weight": torch.ones(H)}
    dec.update(mla_attention(2 * H, exact))
    dec.update(mlp("mlp", 2 * H, exact))
    prefix = "layers.0." if layout == "layers" else "midlayer."
    sd.update({prefix + k: v for k, v in dec.items()})
    return finish_draft(sd)


def make_draft(out_dir: str, mode: str, aux_ids: list[int], layout: str = "layers") -> None:
    from safetensors.torch import save_file
    with open(os.path.join(out_dir, "config.json"), "w") as f:
        json.dump(draft_config(mode, aux_ids), f, indent=2)
    save_file(draft_state_dict(mode, layout), os.path.join(out_dir, "model.safetensors"),
              metadata={"format": "pt"})
