"""The parameters an EAGLE-3 draft class builds, as its loader row says (`loaders`): its
geometry, the parameters and shapes it expects, the ones it leaves unused or fills from the
target, and how a tensor-parallel shard of one is shaped. Pure."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

from ...runtimes import SGLANG, VLLM
from ...rules.weights import idle_parameters
from .loaders import AuxCount, Decoder, DraftClass, Layers, Loader


@dataclass(frozen=True)
class Geometry:
    hidden: int
    hidden_in: int   # target_hidden_size, else hidden_size
    num_aux: int     # number of aux layers fc is built for
    heads: int
    kv_heads: int
    head_dim: int
    inter: int
    vocab: int
    lm_rows: int     # draft_vocab_size, else vocab_size
    layers: int


def eagle_config(cfg: Mapping[str, Any]) -> Mapping[str, Any]:
    ec = cfg.get("eagle_config")
    return ec if isinstance(ec, Mapping) else {}


def eagle_ids(cfg: Mapping[str, Any]) -> list[int] | None:
    ids = eagle_config(cfg).get("eagle_aux_hidden_state_layer_ids")
    return list(ids) if ids else None


def num_aux(cfg: Mapping[str, Any], loader: Loader) -> int:
    """How many aux layers the loader builds fc for."""
    if loader.aux_count == AuxCount.THREE:
        return 3
    if loader.aux_count == AuxCount.IDS:  # SGLang's MLA draft ignores num_aux_hidden_states
        ids = eagle_ids(cfg) or cfg.get("eagle_aux_hidden_state_layer_ids")
        return len(ids) if ids else 3
    n = cfg.get("num_aux_hidden_states")
    if loader.aux_count == AuxCount.CONFIG_OR_TOP:  # vLLM's qwen3_eagle3.py
        n = next((v for v in (cfg.get("num_aux_layers"), n) if v is not None), None)
        ids = cfg.get("eagle_aux_hidden_state_layer_ids") or eagle_ids(cfg)
    else:
        ids = eagle_ids(cfg)
    if n is None:
        n = len(ids) if ids else 3
    return int(n)


def geometry(cfg: Mapping[str, Any], loader: Loader) -> Geometry:
    h = int(cfg["hidden_size"])
    heads = int(cfg["num_attention_heads"])
    inter_key = "intermediate_size_mlp" if cfg.get("model_type") == "llama4_text" else \
        "intermediate_size"
    vocab = int(cfg["vocab_size"])
    return Geometry(
        hidden=h, hidden_in=int(cfg.get("target_hidden_size") or h), num_aux=num_aux(cfg, loader),
        heads=heads, kv_heads=int(cfg.get("num_key_value_heads") or heads),
        head_dim=int(cfg.get("head_dim") or h // heads), inter=int(cfg[inter_key]),
        vocab=vocab, lm_rows=int(cfg.get("draft_vocab_size") or vocab),
        layers=1 if loader.layers == Layers.FIRST else int(cfg.get("num_hidden_layers") or 1))


def uses_fc(cfg: Mapping[str, Any], loader: Loader) -> bool:
    """vLLM builds no fc when use_aux_hidden_state is false (0.13+)."""
    return not (loader.runtime == VLLM and loader.honors_use_aux_flag
                and eagle_config(cfg).get("use_aux_hidden_state") is False)


def norm_before_fc(cfg: Mapping[str, Any]) -> bool:
    return bool(eagle_config(cfg).get("norm_before_fc", cfg.get("norm_before_fc", False)))


def fc_norm_on(cfg: Mapping[str, Any], loader: Loader) -> bool:
    """vLLM reads `fc_norm` only; SGLang also the legacy `use_aux_norm`."""
    return bool(cfg.get("fc_norm") or (loader.runtime == SGLANG and cfg.get("use_aux_norm")))


def expected_params(cfg: Mapping[str, Any], loader: Loader) -> dict[str, tuple[int, ...]]:
    """Parameter name -> shape of the draft class as `loader` builds it from `cfg` (names
    as in `named_parameters()`, before tensor parallelism)."""
    g = geometry(cfg, loader)
    p: dict[str, tuple[int, ...]] = {"model.embed_tokens.weight": (g.vocab, g.hidden)}
    fc_in = g.hidden_in * g.num_aux
    if uses_fc(cfg, loader):
        p["model.fc.weight"] = (g.hidden, fc_in)
        if cfg.get("bias") and loader.runtime == SGLANG:
            p["model.fc.bias"] = (g.hidden,)
        if loader.input_norm and norm_before_fc(cfg):
            p["model.input_norm.weight"] = (fc_in,)
        if loader.fc_norm and fc_norm_on(cfg, loader):
            for j in range(g.num_aux):
                p[f"model.fc_norm.{j}.weight"] = (g.hidden_in,)
    if loader.decoder == Decoder.MIDLAYER:
        prefixes = [("model.midlayer.", 2 * g.hidden)]
    else:  # only layer 0 concatenates embeddings with the hidden state
        prefixes = [(f"model.layers.{i}.", 2 * g.hidden if i == 0 else g.hidden)
                    for i in range(g.layers)]
    for pre, qkv_in in prefixes:
        if loader.draft == DraftClass.MLA:
            p.update({pre + k: v for k, v in _mla_attention(cfg, loader, qkv_in, g).items()})
        else:
            p[pre + "self_attn.qkv_proj.weight"] = ((g.heads + 2 * g.kv_heads) * g.head_dim,
                                                    qkv_in)
            p[pre + "self_attn.o_proj.weight"] = (g.hidden, g.heads * g.head_dim)
            # o_proj's bias comes from the Llama layer the draft layer builds on (its qkv_proj
            # is rebuilt: without a bias on SGLang, with attention_bias's on vLLM)
            if loader.draft == DraftClass.LLAMA and (cfg.get("attention_bias")
                                                     or cfg.get("bias")):
                p[pre + "self_attn.o_proj.bias"] = (g.hidden,)
            if loader.runtime == VLLM and cfg.get("attention_bias"):
                p[pre + "self_attn.qkv_proj.bias"] = ((g.heads + 2 * g.kv_heads) * g.head_dim,)
            if loader.draft == DraftClass.QWEN3:
                p[pre + "self_attn.q_norm.weight"] = (g.head_dim,)
                p[pre + "self_attn.k_norm.weight"] = (g.head_dim,)
        p[pre + "mlp.gate_up_proj.weight"] = (2 * g.inter, g.hidden)
        p[pre + "mlp.down_proj.weight"] = (g.hidden, g.inter)
        if loader.runtime == VLLM and loader.draft == DraftClass.LLAMA and cfg.get("mlp_bias"):
            p[pre + "mlp.gate_up_proj.bias"] = (2 * g.inter,)
            p[pre + "mlp.down_proj.bias"] = (g.hidden,)
        for norm in ("input_layernorm", "post_attention_layernorm", "hidden_norm"):
            p[pre + norm + ".weight"] = (g.hidden,)
    p["model.norm.weight"] = (g.hidden,)
    if not ties_lm_head(cfg, loader):
        p["lm_head.weight"] = (g.lm_rows, g.hidden)
    if loader.runtime == VLLM and not (loader.d2t_only_if_pruned and g.lm_rows == g.vocab):
        p["draft_id_to_target_id"] = (g.lm_rows,)
    return p


def ties_lm_head(cfg: Mapping[str, Any], loader: Loader) -> bool:
    """SGLang's draft classes make `lm_head` the embedding when `tie_word_embeddings` is true
    (so a checkpoint's `lm_head.weight` matches nothing); vLLM's always build their own
    `lm_head` (draft_vocab_size rows) and never read the flag."""
    return loader.runtime == SGLANG and bool(cfg.get("tie_word_embeddings"))


def _mla_attention(cfg: Mapping[str, Any], loader: Loader, qkv_in: int, g: Geometry
                   ) -> dict[str, tuple[int, ...]]:
    q, kv = int(cfg.get("q_lora_rank") or 0), int(cfg["kv_lora_rank"])
    rope, nope, vdim = (int(cfg["qk_rope_head_dim"]), int(cfg["qk_nope_head_dim"]),
                        int(cfg["v_head_dim"]))
    fused = ("self_attn.fused_qkv_a_proj_with_mqa.weight" if loader.runtime == SGLANG
             else "self_attn.fused_qkv_a_proj.weight")
    common = {"self_attn.kv_a_layernorm.weight": (kv,),
              "self_attn.kv_b_proj.weight": (g.heads * (nope + vdim), kv),
              "self_attn.o_proj.weight": (g.hidden, g.heads * vdim)}
    if not q:  # vLLM without q_lora_rank: a plain q_proj (SGLang refuses such a config)
        return {"self_attn.q_proj.weight": (g.heads * (nope + rope), qkv_in),
                "self_attn.kv_a_proj_with_mqa.weight": (kv + rope, qkv_in), **common}
    return {fused: (q + kv + rope, qkv_in), "self_attn.q_a_layernorm.weight": (q,),
            "self_attn.q_b_proj.weight": (g.heads * (nope + rope), q), **common}


def unused_params(params: Mapping[str, Any], loader: Loader) -> set[str]:
    """Parameters the loader allocates but never computes with (`weights.idle_parameters`),
    so their absence from a checkpoint is harmless."""
    return idle_parameters(params, loader.upper_norm)


def shared_from_target(cfg: Mapping[str, Any], loader: Loader) -> set[str]:
    """Parameters the runtime fills from the target, so a checkpoint need not carry them."""
    shared = {"model.embed_tokens.weight", "draft_id_to_target_id"}  # no d2t: vocab checks
    if cfg.get("draft_vocab_size") is None or (
            loader.runtime == VLLM and int(cfg.get("draft_vocab_size")) == int(cfg["vocab_size"])):
        shared.add("lm_head.weight")
    return shared


def shard_shape(param: str, shard: Any, shape: tuple[int, ...], cfg: Mapping[str, Any],
                g: Geometry) -> tuple[int, ...]:
    """The shape of one checkpoint tensor that loads into part `shard` of `param`."""
    if "fused_qkv_a" in param:
        q = int(cfg.get("q_lora_rank") or 0)
        return (q, shape[1]) if shard in ("q_a", 0) else (shape[0] - q, shape[1])
    if shard == "q":
        return (g.heads * g.head_dim, shape[1])
    if shard in ("k", "v"):
        return (g.kv_heads * g.head_dim, shape[1])
    if shard in (0, 1):
        return (g.inter, shape[1])
    return shape
