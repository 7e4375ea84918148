"""What each runtime's EAGLE-3 loader builds and reads, as data: one `Loader` row per
(runtime, version range, draft class), and the functions that replay it on a
checkpoint's key names (`expected_params`, `route_key`, `simulate_load`).

Pure (no torch, no runtime imports), shared by `spectrace doctor` and `--fix`. Every fact a
row relies on is named in its `facts` and checked against the released wheels by
tests/test_doctor_loader_facts.py (sources parsed with `ast`, nothing imported); the
SGLang rows are also replayed against the installed SGLang's real classes there.

Draft classes: `llama` (SGLang `LlamaForCausalLMEagle3`, vLLM `Eagle3LlamaForCausalLM`),
`mla` (`Eagle3DeepseekV2ForCausalLM`, Kimi-K2.x / DeepSeek targets), `qwen3` (vLLM
`Eagle3Qwen3ForCausalLM`: the llama layer plus `q_norm`/`k_norm`).
"""
from __future__ import annotations

import re
from dataclasses import asdict, dataclass
from typing import Any, Iterable, Mapping, NamedTuple

from .weights import idle_parameters, missing_parameters

SGLANG, VLLM = "sglang", "vllm"
RUNTIMES = (SGLANG, VLLM)
LABELS = {SGLANG: "SGLang", VLLM: "vLLM"}  # as people write them


@dataclass(frozen=True)
class Loader:
    """One runtime version's loader for one EAGLE-3 draft class."""

    runtime: str
    version: str
    draft: str                 # "llama" | "mla" | "qwen3"
    arch: str                  # the draft class the runtime builds
    decoder: str               # "midlayer" (one layer) or "layers" (layers.N)
    layers: str                # "one": raises unless 1; "first": builds one, ignores more; "many"
    upper_norm: str | None     # pre-attention norm of layers >= 1 (the other is built unused)
    aux_count: str             # fc width: "three" | "config" (num_aux_hidden_states, ids, 3)
                               # | "ids" (eagle_config ids, top-level ids, 3)
    fc_norm: bool              # per-aux RMSNorm before fc (`fc_norm`, SGLang also `use_aux_norm`)
    input_norm: bool           # one RMSNorm over the concatenation (`norm_before_fc`)
    norm_output: bool          # post-norm state fed back (`norm_output`)
    norm_before_residual: bool # honours `norm_before_residual`
    honors_use_aux_flag: bool  # eagle_config.use_aux_hidden_state switches capture / fc off
    renames: tuple[tuple[str, str], ...]  # substring renames load_weights applies first
    unknown_keys: str          # "silent" | "logged" | "raises"
    aux_ids: str               # where the target's capture ids come from: "eagle_config" |
                               # "top" (top level, else default) | "top+v1" (top level, else
                               # eagle_config ids as-is on the V1 runner, default on V2) | "none"
    reads_speculators: bool    # reads a vllm-project/speculators config.json
    speculators_fields: tuple[str, ...] = ()  # fields its speculators translation keeps
    d2t_only_if_pruned: bool = False  # a d2t parameter exists only when the vocabularies differ
    facts: tuple[str, ...] = ()       # verified in tests/test_doctor_loader_facts.py
    assumed: str | None = None        # set when this exact version was not verified

    @property
    def name(self) -> str:
        return f"{LABELS[self.runtime]} {self.version}"

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


_LEGACY = (("midlayer", "layers.0"), ("aux_norm_low", "fc_norm.0"),
           ("aux_norm_mid", "fc_norm.1"), ("aux_norm_high", "fc_norm.2"))
_SG = dict(norm_before_residual=False, unknown_keys="silent", aux_ids="eagle_config",
           reads_speculators=False)
_SG_MID = dict(_SG, draft="llama", arch="LlamaForCausalLMEagle3", decoder="midlayer",
               layers="one", upper_norm=None, aux_count="three", fc_norm=False,
               input_norm=False, norm_output=False, renames=())
_SG_LAY = dict(_SG, draft="llama", arch="LlamaForCausalLMEagle3", decoder="layers",
               layers="many", upper_norm="hidden_norm", aux_count="config", fc_norm=True,
               norm_output=True, renames=_LEGACY, honors_use_aux_flag=True)
_SG_MLA = dict(_SG, draft="mla", arch="Eagle3DeepseekV2ForCausalLM", decoder="midlayer",
               layers="one", upper_norm=None, aux_count="ids", input_norm=False,
               renames=(), unknown_keys="logged", honors_use_aux_flag=True)
_SG_FACTS = ("sglang.no_norm_before_residual", "sglang.no_speculators", "sglang.d2t_offsets",
             "sglang.eagle_config_ids_only", "sglang.llama_ids_plus_one")
# (first, last, fields). Verified wheels: 0.5.5, 0.5.8, 0.5.12, 0.5.16, 0.5.23; the
# research notes read 0.5.5-0.5.12, 0.5.16-0.5.20, 0.5.23 (docs/doctor.md).
SGLANG_ROWS = (
    ((0, 5, 5), (0, 5, 7), dict(_SG_MID, honors_use_aux_flag=False,
                                facts=_SG_FACTS + ("sglang.midlayer_decoder",))),
    ((0, 5, 8), (0, 5, 11), dict(_SG_MID, honors_use_aux_flag=True,
                                 facts=_SG_FACTS + ("sglang.midlayer_decoder",
                                                    "sglang.use_aux_flag"))),
    ((0, 5, 12), (0, 5, 16), dict(_SG_LAY, input_norm=False, facts=_SG_FACTS + (
        "sglang.layers_decoder", "sglang.legacy_renames", "sglang.upper_hidden_norm",
        "sglang.fc_norm", "sglang.use_aux_flag"))),
    ((0, 5, 17), (0, 5, 23), dict(_SG_LAY, input_norm=True, facts=_SG_FACTS + (
        "sglang.layers_decoder", "sglang.legacy_renames", "sglang.upper_hidden_norm",
        "sglang.fc_norm", "sglang.input_norm", "sglang.use_aux_flag"))),
    ((0, 5, 12), (0, 5, 15), dict(_SG_MLA, fc_norm=False, norm_output=False,
                                  facts=_SG_FACTS + ("sglang.mla_class", "sglang.mla_renames",
                                                     "sglang.mla_warns"))),
    ((0, 5, 16), (0, 5, 23), dict(_SG_MLA, fc_norm=True, norm_output=True,
                                  facts=_SG_FACTS + ("sglang.mla_class", "sglang.mla_renames",
                                                     "sglang.mla_warns", "sglang.mla_fc_norm"))),
)
SGLANG_READ = frozenset({"0.5.5", "0.5.6", "0.5.7", "0.5.8", "0.5.9", "0.5.10", "0.5.11",
                         "0.5.12", "0.5.16", "0.5.17", "0.5.18", "0.5.19", "0.5.20",
                         "0.5.23"})
SGLANG_NEWEST = "0.5.23"

_VL = dict(renames=(("midlayer.", "layers.0."),), unknown_keys="raises",
           norm_before_residual=True, reads_speculators=True, decoder="layers",
           upper_norm="input_layernorm")
_VL_LLAMA = dict(_VL, draft="llama", arch="Eagle3LlamaForCausalLM")
_VL_FACTS = ("vllm.midlayer_mapper", "vllm.d2t_rename", "vllm.norm_before_residual",
             "vllm.spec_norm_before_residual_true", "vllm.unknown_keys_raise")
_V13 = dict(_VL_LLAMA, layers="many", aux_count="three", fc_norm=False, input_norm=False,
            norm_output=False, honors_use_aux_flag=True, aux_ids="top",
            speculators_fields=("eagle_aux_hidden_state_layer_ids",))
_V22 = dict(_V13, aux_count="config", fc_norm=True, input_norm=True, norm_output=True,
            aux_ids="top+v1")
_SPEC25 = ("eagle_aux_hidden_state_layer_ids", "norm_before_fc", "fc_norm", "norm_output")
VLLM_ROWS = (
    ((0, 10, 0), (0, 12, 99), dict(_VL_LLAMA, layers="first", aux_count="three",
                                   fc_norm=False, input_norm=False, norm_output=False,
                                   honors_use_aux_flag=False, aux_ids="none",
                                   facts=_VL_FACTS + ("vllm.default_ids_only",))),
    ((0, 13, 0), (0, 19, 99), dict(_V13, facts=_VL_FACTS + ("vllm.top_ids", "vllm.use_aux_flag"))),
    ((0, 20, 0), (0, 21, 99), dict(_V13, input_norm=True, speculators_fields=(
        "eagle_aux_hidden_state_layer_ids", "norm_before_fc"), facts=_VL_FACTS + (
        "vllm.top_ids", "vllm.use_aux_flag", "vllm.input_norm"))),
    ((0, 22, 0), (0, 24, 99), dict(_V22, speculators_fields=(
        "eagle_aux_hidden_state_layer_ids", "norm_before_fc"), facts=_VL_FACTS + (
        "vllm.top_ids", "vllm.use_aux_flag", "vllm.input_norm", "vllm.fc_norm",
        "vllm.aux_count_config"))),
    ((0, 25, 0), (0, 30, 99), dict(_V22, speculators_fields=_SPEC25, facts=_VL_FACTS + (
        "vllm.top_ids", "vllm.fc_norm", "vllm.aux_count_config", "vllm.spec_fc_norm",
        "vllm.qwen3"))),
    ((0, 31, 0), (0, 99, 99), dict(_V22, speculators_fields=_SPEC25, d2t_only_if_pruned=True,
                                   facts=_VL_FACTS + ("vllm.top_ids", "vllm.fc_norm",
                                                      "vllm.aux_count_config",
                                                      "vllm.spec_fc_norm", "vllm.qwen3",
                                                      "vllm.d2t_only_if_pruned"))),
)
# The MLA draft (vllm deepseek_eagle3.py) from 0.20: fc from 3 aux layers and no fc_norm
# until 0.22; no `norm_before_fc` at all; use_aux_hidden_state not read.
_VL_MLA = dict(_VL, draft="mla", arch="Eagle3DeepseekV2ForCausalLM", layers="many",
               input_norm=False, norm_output=True, honors_use_aux_flag=False, aux_ids="top+v1")
VLLM_MLA_ROWS = (
    ((0, 20, 0), (0, 21, 99), dict(_VL_MLA, aux_count="three", fc_norm=False,
                                   facts=_VL_FACTS + ("vllm.mla_class",))),
    ((0, 22, 0), (0, 30, 99), dict(_VL_MLA, aux_count="config", fc_norm=True,
                                   facts=_VL_FACTS + ("vllm.mla_class", "vllm.mla_fc_norm"))),
    ((0, 31, 0), (0, 99, 99), dict(_VL_MLA, aux_count="config", fc_norm=True,
                                   d2t_only_if_pruned=True,
                                   facts=_VL_FACTS + ("vllm.mla_class", "vllm.mla_fc_norm",
                                                      "vllm.d2t_only_if_pruned"))),
)
VLLM_READ = frozenset({"0.11.0", "0.13.0", "0.20.0", "0.22.0", "0.26.0", "0.33.0"})
VLLM_NEWEST = "0.33.0"

# Architectures each runtime builds an EAGLE-3 draft for (config.json `architectures`).
# vLLM renames a plain `LlamaForCausalLM` draft for method eagle3 (transformers_utils/configs/
# eagle.py), SGLang builds it as a target model.
DRAFT_ARCHS = {
    SGLANG: {"LlamaForCausalLMEagle3": "llama", "Eagle3DeepseekV2ForCausalLM": "mla"},
    VLLM: {"LlamaForCausalLMEagle3": "llama", "Eagle3LlamaForCausalLM": "llama",
           "LlamaForCausalLM": "llama", "Eagle3Qwen3ForCausalLM": "qwen3",
           "Eagle3DeepseekV2ForCausalLM": "mla", "Eagle3DeepseekV3ForCausalLM": "mla"},
}


def parse_version(version: str) -> tuple[int, int, int]:
    """The release numbers of a PEP 440 version: `0.5.12`, `v0.5.12.post1` -> (0, 5, 12),
    `0.5rc2` -> (0, 5, 0); ValueError (`packaging`'s `InvalidVersion`) otherwise."""
    from packaging.version import InvalidVersion, Version
    try:
        release = Version(str(version)).release
    except InvalidVersion:
        raise InvalidVersion(f"version {version!r} is not a version like 0.5.8") from None
    return (release + (0, 0))[:3]


def _fmt(v: tuple[int, ...]) -> str:
    return ".".join(map(str, v)).replace(".99", ".x")


def _rows(runtime: str, draft: str):
    if runtime == SGLANG:
        return [r for r in SGLANG_ROWS if r[2]["draft"] == draft]
    if draft == "mla":
        return list(VLLM_MLA_ROWS)
    if draft == "qwen3":
        return [(f, l, dict(fields, draft="qwen3", arch="Eagle3Qwen3ForCausalLM"))
                for f, l, fields in VLLM_ROWS if f >= (0, 25, 0)]
    return list(VLLM_ROWS)


def resolve_loader(runtime: str, version: str, draft: str = "llama") -> Loader | None:
    """The loader of `draft` in `runtime` `version`; None when that version has no such
    draft class. Versions outside every row get the nearest one, and `assumed` says so."""
    v = parse_version(version)
    rows = _rows(runtime, draft)
    if not rows:
        return None
    read = SGLANG_READ if runtime == SGLANG else VLLM_READ
    label = LABELS[runtime]
    for first, last, fields in rows:
        if first <= v <= last:
            assumed = None if any(parse_version(r) == v for r in read) else (
                f"{label} {version} was not verified; assumed the loader of "
                f"{_fmt(first)}-{_fmt(last)}")
            return Loader(runtime=runtime, version=str(version), assumed=assumed, **fields)
    if v > rows[-1][1]:
        (first, last, fields), edge = rows[-1], "newest"
    elif draft == "llama":
        (first, last, fields), edge = rows[0], "oldest"
    else:
        return None  # the class does not exist yet in that version
    return Loader(runtime=runtime, version=str(version), **fields, assumed=(
        f"{label} {version} is outside the versions verified; assumed the {edge} known loader "
        f"({_fmt(first)}-{_fmt(last)})"))


# -- the draft's parameters --------------------------------------------------------------
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
    if loader.aux_count == "three":
        return 3
    if loader.aux_count == "ids":  # SGLang's MLA draft ignores num_aux_hidden_states
        ids = eagle_ids(cfg) or cfg.get("eagle_aux_hidden_state_layer_ids")
        return len(ids) if ids else 3
    n = cfg.get("num_aux_hidden_states")
    if n is None:
        ids = eagle_ids(cfg)
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
        layers=1 if loader.layers == "first" else int(cfg.get("num_hidden_layers") or 1))


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
    if loader.decoder == "midlayer":
        prefixes = [("model.midlayer.", 2 * g.hidden)]
    else:  # only layer 0 concatenates embeddings with the hidden state
        prefixes = [(f"model.layers.{i}.", 2 * g.hidden if i == 0 else g.hidden)
                    for i in range(g.layers)]
    for pre, qkv_in in prefixes:
        if loader.draft == "mla":
            p.update({pre + k: v for k, v in _mla_attention(cfg, loader, qkv_in, g).items()})
        else:
            p[pre + "self_attn.qkv_proj.weight"] = ((g.heads + 2 * g.kv_heads) * g.head_dim,
                                                    qkv_in)
            p[pre + "self_attn.o_proj.weight"] = (g.hidden, g.heads * g.head_dim)
            if loader.runtime == SGLANG and (cfg.get("attention_bias") or cfg.get("bias")):
                p[pre + "self_attn.o_proj.bias"] = (g.hidden,)
            if loader.runtime == VLLM and cfg.get("attention_bias"):
                p[pre + "self_attn.qkv_proj.bias"] = ((g.heads + 2 * g.kv_heads) * g.head_dim,)
            if loader.draft == "qwen3":
                p[pre + "self_attn.q_norm.weight"] = (g.head_dim,)
                p[pre + "self_attn.k_norm.weight"] = (g.head_dim,)
        p[pre + "mlp.gate_up_proj.weight"] = (2 * g.inter, g.hidden)
        p[pre + "mlp.down_proj.weight"] = (g.hidden, g.inter)
        for norm in ("input_layernorm", "post_attention_layernorm", "hidden_norm"):
            p[pre + norm + ".weight"] = (g.hidden,)
    p["model.norm.weight"] = (g.hidden,)
    if not cfg.get("tie_word_embeddings"):  # tied: lm_head *is* embed_tokens
        p["lm_head.weight"] = (g.lm_rows, g.hidden)
    if loader.runtime == VLLM and not (loader.d2t_only_if_pruned and g.lm_rows == g.vocab):
        p["draft_id_to_target_id"] = (g.lm_rows,)
    return p


def _mla_attention(cfg: Mapping[str, Any], loader: Loader, qkv_in: int, g: Geometry
                   ) -> dict[str, tuple[int, ...]]:
    q, kv = int(cfg.get("q_lora_rank") or 0), int(cfg["kv_lora_rank"])
    rope, nope, vdim = (int(cfg["qk_rope_head_dim"]), int(cfg["qk_nope_head_dim"]),
                        int(cfg["v_head_dim"]))
    fused = ("self_attn.fused_qkv_a_proj_with_mqa.weight" if loader.runtime == SGLANG
             else "self_attn.fused_qkv_a_proj.weight")
    return {fused: (q + kv + rope, qkv_in), "self_attn.q_a_layernorm.weight": (q,),
            "self_attn.q_b_proj.weight": (g.heads * (nope + rope), q),
            "self_attn.kv_a_layernorm.weight": (kv,),
            "self_attn.kv_b_proj.weight": (g.heads * (nope + vdim), kv),
            "self_attn.o_proj.weight": (g.hidden, g.heads * vdim)}


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


# -- replaying load_weights --------------------------------------------------------------
class Route(NamedTuple):
    kind: str                 # "param", "d2t", "t2d", "ignored" (skipped on purpose) or "dropped"
    param: str | None = None
    shard: Any = None


_STACKED = ((".qkv_proj", ".q_proj", "q"), (".qkv_proj", ".k_proj", "k"),
            (".qkv_proj", ".v_proj", "v"), (".gate_up_proj", ".gate_proj", 0),
            (".gate_up_proj", ".up_proj", 1))
_VLLM_MLA_STACKED = ((".gate_up_proj", ".gate_proj", 0), (".gate_up_proj", ".up_proj", 1),
                     (".fused_qkv_a_proj", ".q_a_proj", 0),
                     (".fused_qkv_a_proj", ".kv_a_proj_with_mqa", 1))


def route_key(key: str, params: Mapping[str, Any], loader: Loader,
              cfg: Mapping[str, Any] | None = None) -> Route:
    """Where the loader's `load_weights` puts checkpoint key `key`, step for step."""
    if loader.runtime == VLLM:
        return _route_vllm(key, params, loader, cfg or {})
    if loader.draft == "mla":
        return _route_sglang_mla(key, params)
    name = key
    for old, new in loader.renames:
        if old in name:
            name = name.replace(old, new)
    if "d2t" in name:
        return Route("d2t")
    if "t2d" in name:
        return Route("t2d")
    for param_part, shard_part, shard in _STACKED:
        if shard_part in name:  # the first match decides, found or not
            name = name.replace(shard_part, param_part)
            full = name if name in params else f"model.{name}"
            return Route("param", full, shard) if full in params else Route("dropped")
    full = name if name in params else f"model.{name}"
    return Route("param", full) if full in params else Route("dropped")


def _route_sglang_mla(key: str, params: Mapping[str, Any]) -> Route:
    """kimi_k25_eagle3.py: exact d2t/t2d names; `^layers.0.` -> `midlayer.`; `model.` unless
    lm_head; gate/up stacked; q_a + kv_a_with_mqa fused once both arrived (see
    `simulate_load`); anything else unknown is skipped with a log warning."""
    if key == "d2t" or key.endswith(".d2t"):
        return Route("d2t")
    if key == "t2d" or key.endswith(".t2d"):
        return Route("t2d")
    name = re.sub(r"^layers\.0\.", "midlayer.", key)
    if not name.startswith("lm_head."):
        name = f"model.{name}"
    for param_part, shard_part, shard in _STACKED[3:]:
        if shard_part in name and name.replace(shard_part, param_part) in params:
            return Route("param", name.replace(shard_part, param_part), shard)
    for part, shard in (("kv_a_proj_with_mqa", "kv_a"), ("q_a_proj", "q_a")):
        if part in name:
            fused = name.replace(part, "fused_qkv_a_proj_with_mqa")
            return Route("param", fused, shard) if fused in params else Route("dropped")
    return Route("param", name) if name in params else Route("dropped")


def _route_vllm(key: str, params: Mapping[str, Any], loader: Loader,
                cfg: Mapping[str, Any]) -> Route:
    """llama_eagle3.py / deepseek_eagle3.py: skip t2d; d2t -> draft_id_to_target_id; `model.`
    unless lm_head; the mapper's substring `midlayer.` -> `layers.0.` and stacking;
    fc./input_norm. skipped when that module is off; anything else unknown raises."""
    if "t2d" in key:
        return Route("t2d")
    if "d2t" in key:
        name = key.replace("d2t", "draft_id_to_target_id")
        return Route("d2t", name) if name in params else Route("dropped")
    name = key if "lm_head" in key else "model." + key
    for old, new in loader.renames:
        name = name.replace(old, new)
    if "fc." in name and not uses_fc(cfg, loader) or (
            "input_norm." in name and not (loader.input_norm and norm_before_fc(cfg))):
        return Route("ignored")
    stacked = _VLLM_MLA_STACKED if loader.draft == "mla" else _STACKED
    for param_part, shard_part, shard in stacked:
        if shard_part in name:
            full = name.replace(shard_part, param_part)
            return Route("param", full, shard) if full in params else Route("dropped")
    return Route("param", name) if name in params else Route("dropped")


def simulate_load(keys: Iterable[str], params: Mapping[str, Any], loader: Loader,
                  cfg: Mapping[str, Any] | None = None) -> tuple[list[str], list[str]]:
    """(keys the loader drops, parameters no key fills). A stacked parameter missing only
    some parts is listed as e.g. `model.midlayer.self_attn.qkv_proj.weight[k_proj]`.
    SGLang's MLA draft loads its fused q_a/kv_a projection only when both halves arrive:
    a lone half is dropped (silently) and the parameter stays empty."""
    unused, loaded, pending = [], {}, {}
    for key in keys:
        r = route_key(key, params, loader, cfg)
        if r.kind in ("dropped", "ignored"):
            unused.append(key)
        elif r.kind == "param" and r.shard in ("q_a", "kv_a"):
            pending.setdefault(r.param, {})[r.shard] = key
        elif r.kind == "param" or r.kind == "d2t" and r.param:
            loaded.setdefault(r.param, set()).add(r.shard)
    for param, halves in pending.items():
        if len(halves) == 2:
            loaded.setdefault(param, set()).add(None)
        else:
            unused.extend(halves.values())
    return unused, missing_parameters(params, loaded)


def checkpoint_keys(param: str, loader: Loader) -> list[str]:
    """The checkpoint keys that fill `param` under their usual names (for fix-it hints):
    `model.midlayer.self_attn.qkv_proj.weight` -> `midlayer.self_attn.{q,k,v}_proj.weight`."""
    m = re.match(r"^(.*)\[(\w+)\]$", param)
    name, part = (m[1], m[2]) if m else (param, None)
    name = name.removeprefix("model.")
    if loader.draft == "mla" and loader.runtime == SGLANG:
        name = name.replace("midlayer.", "layers.0.")
    if name == "draft_id_to_target_id":
        return ["d2t"]
    for stacked, parts in ((".qkv_proj", ("q_proj", "k_proj", "v_proj")),
                           (".gate_up_proj", ("gate_proj", "up_proj")),
                           (".fused_qkv_a_proj_with_mqa", ("q_a_proj", "kv_a_proj_with_mqa")),
                           (".fused_qkv_a_proj", ("q_a_proj", "kv_a_proj_with_mqa"))):
        if stacked + "." in name:
            return [name.replace(stacked, "." + p) for p in parts if part in (None, p)]
    return [name]
