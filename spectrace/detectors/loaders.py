"""What each runtime's EAGLE-3 loader builds and reads, as data: one `LoaderRow` per
(runtime, version range, draft class), whose `Loader` states each fact as a typed field
(`Layers`, `AuxCount`, `AuxIds`, `UnknownKeys`, ...), and the functions that replay it on a
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
from dataclasses import asdict, dataclass, replace
from typing import Any, Iterable, Mapping, NamedTuple

from ..runtimes import SGLANG, VLLM, Runtime, Word
from ..rules.weights import idle_parameters, missing_parameters


class DraftClass(Word):
    LLAMA = "llama"
    MLA = "mla"
    QWEN3 = "qwen3"


class Decoder(Word):
    MIDLAYER = "midlayer"  # one decoder layer, `midlayer.*`
    LAYERS = "layers"      # `layers.N.*`


class Layers(Word):
    """How many decoder layers the loader builds."""
    ONE = "one"      # exactly one: raises unless num_hidden_layers is 1
    FIRST = "first"  # builds one, ignores more
    MANY = "many"    # num_hidden_layers


class AuxCount(Word):
    """How many aux layers fc is built for."""
    THREE = "three"    # always 3
    CONFIG = "config"  # num_aux_hidden_states, else the eagle_config ids, else 3
    IDS = "ids"        # the eagle_config ids, else the top-level ids, else 3


class UnknownKeys(Word):
    """What `load_weights` does with a key that matches no parameter."""
    SILENT = "silent"
    LOGGED = "logged"
    RAISES = "raises"


class AuxIds(Word):
    """Where the target's capture ids come from."""
    EAGLE_CONFIG = "eagle_config"  # eagle_config's ids
    TOP = "top"                    # top-level ids, else the default
    TOP_OR_V1 = "top+v1"           # top-level ids, else eagle_config's as they are on the V1
                                   # model runner, the default on V2
    NONE = "none"                  # always the default


@dataclass(frozen=True)
class Loader:
    """One runtime version's loader for one EAGLE-3 draft class."""

    runtime: Runtime
    version: str
    draft: DraftClass
    arch: str                  # the draft class the runtime builds
    decoder: Decoder
    layers: Layers
    upper_norm: str | None     # pre-attention norm of layers >= 1 (the other is built unused)
    aux_count: AuxCount        # fc width
    fc_norm: bool              # per-aux RMSNorm before fc (`fc_norm`, SGLang also `use_aux_norm`)
    input_norm: bool           # one RMSNorm over the concatenation (`norm_before_fc`)
    norm_output: bool          # post-norm state fed back (`norm_output`)
    norm_before_residual: bool # honours `norm_before_residual`
    honors_use_aux_flag: bool  # eagle_config.use_aux_hidden_state switches capture / fc off
    renames: tuple[tuple[str, str], ...]  # substring renames load_weights applies first
    unknown_keys: UnknownKeys
    aux_ids: AuxIds
    reads_speculators: bool    # reads a vllm-project/speculators config.json
    speculators_fields: tuple[str, ...] = ()  # fields its speculators translation keeps
    d2t_only_if_pruned: bool = False  # a d2t parameter exists only when the vocabularies differ
    facts: tuple[str, ...] = ()       # verified in tests/test_doctor_loader_facts.py
    assumed: str | None = None        # set when this exact version was not verified
    # a speculators config with a Qwen3 layer builds Eagle3Qwen3ForCausalLM, and a layer
    # other than Llama or Qwen3 is refused (not in the report: `to_dict`)
    speculators_qwen3: bool = False

    @property
    def name(self) -> str:
        return f"{self.runtime.label} {self.version}"

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        del out["speculators_qwen3"]
        return out


class LoaderRow(NamedTuple):
    """The loader of one draft class for the versions `first`..`last` (inclusive)."""

    first: tuple[int, int, int]
    last: tuple[int, int, int]
    loader: Loader  # its `version` is filled in by `resolve_loader`


# -- SGLang ---------------------------------------------------------------------------------
SGLANG_LEGACY_RENAMES = (("midlayer", "layers.0"), ("aux_norm_low", "fc_norm.0"),
                         ("aux_norm_mid", "fc_norm.1"), ("aux_norm_high", "fc_norm.2"))
SGLANG_FACTS = ("sglang.no_norm_before_residual", "sglang.no_speculators",
                "sglang.d2t_offsets", "sglang.eagle_config_ids_only",
                "sglang.llama_ids_plus_one", "sglang.tied_lm_head")
SGLANG_LAYERS_FACTS = SGLANG_FACTS + ("sglang.layers_decoder", "sglang.legacy_renames",
                                      "sglang.upper_hidden_norm", "sglang.fc_norm")
SGLANG_MLA_FACTS = SGLANG_FACTS + ("sglang.mla_class", "sglang.mla_renames", "sglang.mla_warns")
# llama_eagle3.py up to 0.5.11: one `midlayer`, fc for 3 aux layers, no optional norms
SGLANG_LLAMA_MIDLAYER = Loader(
    runtime=SGLANG, version="", draft=DraftClass.LLAMA, arch="LlamaForCausalLMEagle3",
    decoder=Decoder.MIDLAYER, layers=Layers.ONE, upper_norm=None, aux_count=AuxCount.THREE,
    fc_norm=False, input_norm=False, norm_output=False, norm_before_residual=False,
    honors_use_aux_flag=False, renames=(), unknown_keys=UnknownKeys.SILENT,
    aux_ids=AuxIds.EAGLE_CONFIG, reads_speculators=False)
# llama_eagle3.py from 0.5.12: `layers.N`, the legacy names renamed, fc from the config
SGLANG_LLAMA_LAYERS = replace(
    SGLANG_LLAMA_MIDLAYER, decoder=Decoder.LAYERS, layers=Layers.MANY, upper_norm="hidden_norm",
    aux_count=AuxCount.CONFIG, fc_norm=True, norm_output=True,
    renames=SGLANG_LEGACY_RENAMES, honors_use_aux_flag=True)
# kimi_k25_eagle3.py (from 0.5.12): one layer, fc from the ids, unknown keys logged
SGLANG_MLA = replace(
    SGLANG_LLAMA_MIDLAYER, draft=DraftClass.MLA, arch="Eagle3DeepseekV2ForCausalLM",
    aux_count=AuxCount.IDS, unknown_keys=UnknownKeys.LOGGED, honors_use_aux_flag=True)
# Verified wheels: 0.5.5, 0.5.8, 0.5.12, 0.5.16, 0.5.23; the research notes read
# 0.5.5-0.5.12, 0.5.16-0.5.20, 0.5.23 (docs/doctor.md).
SGLANG_ROWS = (
    LoaderRow((0, 5, 5), (0, 5, 7), replace(
        SGLANG_LLAMA_MIDLAYER, facts=SGLANG_FACTS + ("sglang.midlayer_decoder",))),
    LoaderRow((0, 5, 8), (0, 5, 11), replace(
        SGLANG_LLAMA_MIDLAYER, honors_use_aux_flag=True,
        facts=SGLANG_FACTS + ("sglang.midlayer_decoder", "sglang.use_aux_flag"))),
    LoaderRow((0, 5, 12), (0, 5, 16), replace(
        SGLANG_LLAMA_LAYERS, facts=SGLANG_LAYERS_FACTS + ("sglang.use_aux_flag",))),
    LoaderRow((0, 5, 17), (0, 5, 23), replace(
        SGLANG_LLAMA_LAYERS, input_norm=True,
        facts=SGLANG_LAYERS_FACTS + ("sglang.input_norm", "sglang.use_aux_flag"))),
    LoaderRow((0, 5, 12), (0, 5, 15), replace(SGLANG_MLA, facts=SGLANG_MLA_FACTS)),
    LoaderRow((0, 5, 16), (0, 5, 23), replace(
        SGLANG_MLA, fc_norm=True, norm_output=True,
        facts=SGLANG_MLA_FACTS + ("sglang.mla_fc_norm",))),
)
SGLANG_READ = frozenset({"0.5.5", "0.5.6", "0.5.7", "0.5.8", "0.5.9", "0.5.10", "0.5.11",
                         "0.5.12", "0.5.16", "0.5.17", "0.5.18", "0.5.19", "0.5.20",
                         "0.5.23"})
SGLANG_NEWEST = "0.5.23"

# -- vLLM -----------------------------------------------------------------------------------
VLLM_FACTS = ("vllm.midlayer_mapper", "vllm.d2t_rename", "vllm.norm_before_residual",
              "vllm.spec_norm_before_residual_true", "vllm.unknown_keys_raise",
              "vllm.own_lm_head", "vllm.no_tied_lm_head")
# a P-EAGLE `mask_hidden` key is skipped with a log warning unless parallel drafting is on
MASK_HIDDEN_SKIPPED = "vllm.mask_hidden_skipped"
SPECULATORS_IDS = ("eagle_aux_hidden_state_layer_ids",)
SPECULATORS_IDS_INPUT_NORM = SPECULATORS_IDS + ("norm_before_fc",)
SPECULATORS_IDS_NORMS = SPECULATORS_IDS_INPUT_NORM + ("fc_norm", "norm_output")
# llama_eagle3.py 0.10-0.12: builds the first layer only, fc for 3 aux layers, the
# target's default ids whatever the config says
VLLM_LLAMA_FIRST_LAYER = Loader(
    runtime=VLLM, version="", draft=DraftClass.LLAMA, arch="Eagle3LlamaForCausalLM",
    decoder=Decoder.LAYERS, layers=Layers.FIRST, upper_norm="input_layernorm",
    aux_count=AuxCount.THREE, fc_norm=False, input_norm=False, norm_output=False,
    norm_before_residual=True, honors_use_aux_flag=False, renames=(("midlayer.", "layers.0."),),
    unknown_keys=UnknownKeys.RAISES, aux_ids=AuxIds.NONE, reads_speculators=True)
# 0.13-0.21: every layer; top-level ids; use_aux_hidden_state honoured
VLLM_LLAMA_TOP_IDS = replace(
    VLLM_LLAMA_FIRST_LAYER, layers=Layers.MANY, honors_use_aux_flag=True, aux_ids=AuxIds.TOP,
    speculators_fields=SPECULATORS_IDS)
# from 0.22: fc sized from the config, fc_norm / input_norm / norm_output, and eagle_config's
# ids on the V1 runner
VLLM_LLAMA_FC_FROM_CONFIG = replace(
    VLLM_LLAMA_TOP_IDS, aux_count=AuxCount.CONFIG, fc_norm=True, input_norm=True,
    norm_output=True, aux_ids=AuxIds.TOP_OR_V1, speculators_fields=SPECULATORS_IDS_INPUT_NORM)
VLLM_ROWS = (
    LoaderRow((0, 10, 0), (0, 12, 99), replace(
        VLLM_LLAMA_FIRST_LAYER, facts=VLLM_FACTS + ("vllm.default_ids_only",))),
    LoaderRow((0, 13, 0), (0, 19, 99), replace(
        VLLM_LLAMA_TOP_IDS, facts=VLLM_FACTS + ("vllm.top_ids", "vllm.use_aux_flag"))),
    LoaderRow((0, 20, 0), (0, 21, 99), replace(
        VLLM_LLAMA_TOP_IDS, input_norm=True, speculators_fields=SPECULATORS_IDS_INPUT_NORM,
        facts=VLLM_FACTS + ("vllm.top_ids", "vllm.use_aux_flag", "vllm.input_norm",
                            MASK_HIDDEN_SKIPPED))),
    LoaderRow((0, 22, 0), (0, 24, 99), replace(
        VLLM_LLAMA_FC_FROM_CONFIG, facts=VLLM_FACTS + (
            "vllm.top_ids", "vllm.use_aux_flag", "vllm.input_norm", "vllm.fc_norm",
            "vllm.aux_count_config", MASK_HIDDEN_SKIPPED))),
    LoaderRow((0, 25, 0), (0, 30, 99), replace(
        VLLM_LLAMA_FC_FROM_CONFIG, speculators_fields=SPECULATORS_IDS_NORMS,
        speculators_qwen3=True, facts=VLLM_FACTS + (
            "vllm.top_ids", "vllm.fc_norm", "vllm.aux_count_config", "vllm.spec_fc_norm",
            "vllm.qwen3", MASK_HIDDEN_SKIPPED))),
    LoaderRow((0, 31, 0), (0, 99, 99), replace(
        VLLM_LLAMA_FC_FROM_CONFIG, speculators_fields=SPECULATORS_IDS_NORMS,
        speculators_qwen3=True, d2t_only_if_pruned=True, facts=VLLM_FACTS + (
            "vllm.top_ids", "vllm.fc_norm", "vllm.aux_count_config", "vllm.spec_fc_norm",
            "vllm.qwen3", "vllm.d2t_only_if_pruned", MASK_HIDDEN_SKIPPED))),
)
# The MLA draft (vllm deepseek_eagle3.py) from 0.20: fc from 3 aux layers and no fc_norm
# until 0.22; no `norm_before_fc` at all; use_aux_hidden_state not read.
VLLM_MLA = replace(
    VLLM_LLAMA_FIRST_LAYER, draft=DraftClass.MLA, arch="Eagle3DeepseekV2ForCausalLM",
    layers=Layers.MANY, norm_output=True, aux_ids=AuxIds.TOP_OR_V1)
VLLM_MLA_FACTS = VLLM_FACTS + ("vllm.mla_class", "vllm.mla_model_type_mtp")
VLLM_MLA_ROWS = (
    LoaderRow((0, 20, 0), (0, 21, 99), replace(VLLM_MLA, facts=VLLM_MLA_FACTS)),
    LoaderRow((0, 22, 0), (0, 30, 99), replace(
        VLLM_MLA, aux_count=AuxCount.CONFIG, fc_norm=True,
        facts=VLLM_MLA_FACTS + ("vllm.mla_fc_norm",))),
    LoaderRow((0, 31, 0), (0, 99, 99), replace(
        VLLM_MLA, aux_count=AuxCount.CONFIG, fc_norm=True, d2t_only_if_pruned=True,
        facts=VLLM_MLA_FACTS + ("vllm.mla_fc_norm", "vllm.d2t_only_if_pruned"))),
)
VLLM_READ = frozenset({"0.11.0", "0.13.0", "0.20.0", "0.22.0", "0.26.0", "0.33.0"})
VLLM_NEWEST = "0.33.0"
NEWEST = {SGLANG: SGLANG_NEWEST, VLLM: VLLM_NEWEST}  # the newest release each row set read

# Architectures each runtime builds an EAGLE-3 draft for (config.json `architectures`).
# vLLM renames a plain `LlamaForCausalLM` draft for method eagle3 (transformers_utils/configs/
# eagle.py), SGLang builds it as a target model.
DRAFT_ARCHS = {
    SGLANG: {"LlamaForCausalLMEagle3": DraftClass.LLAMA,
             "Eagle3DeepseekV2ForCausalLM": DraftClass.MLA},
    VLLM: {"LlamaForCausalLMEagle3": DraftClass.LLAMA, "Eagle3LlamaForCausalLM": DraftClass.LLAMA,
           "LlamaForCausalLM": DraftClass.LLAMA, "Eagle3Qwen3ForCausalLM": DraftClass.QWEN3,
           "Eagle3DeepseekV2ForCausalLM": DraftClass.MLA,
           "Eagle3DeepseekV3ForCausalLM": DraftClass.MLA},
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


def _rows(runtime: str, draft: str) -> list[LoaderRow]:
    if runtime == SGLANG:
        return [r for r in SGLANG_ROWS if r.loader.draft == draft]
    if draft == DraftClass.MLA:
        return list(VLLM_MLA_ROWS)
    if draft == DraftClass.QWEN3:
        return [r._replace(loader=replace(r.loader, draft=DraftClass.QWEN3,
                                          arch="Eagle3Qwen3ForCausalLM"))
                for r in VLLM_ROWS if r.loader.speculators_qwen3]
    return list(VLLM_ROWS)


def resolve_loader(runtime: str, version: str, draft: str = DraftClass.LLAMA) -> Loader | None:
    """The loader of `draft` in `runtime` `version`; None when that version has no such
    draft class. Versions outside every row get the nearest one, and `assumed` says so."""
    v = parse_version(version)
    rows = _rows(runtime, draft)
    if not rows:
        return None
    read = SGLANG_READ if runtime == SGLANG else VLLM_READ
    label = Runtime(runtime).label
    for first, last, loader in rows:
        if first <= v <= last:
            assumed = None if any(parse_version(r) == v for r in read) else (
                f"{label} {version} was not verified; assumed the loader of "
                f"{_fmt(first)}-{_fmt(last)}")
            return replace(loader, version=str(version), assumed=assumed)
    if v > rows[-1].last:
        (first, last, loader), edge = rows[-1], "newest"
    elif draft == DraftClass.LLAMA:
        (first, last, loader), edge = rows[0], "oldest"
    else:
        return None  # the class does not exist yet in that version
    return replace(loader, version=str(version), assumed=(
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
    if loader.aux_count == AuxCount.THREE:
        return 3
    if loader.aux_count == AuxCount.IDS:  # SGLang's MLA draft ignores num_aux_hidden_states
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


# -- replaying load_weights --------------------------------------------------------------
class RouteKind(Word):
    """Where `load_weights` puts one checkpoint key."""
    PARAM = "param"      # into a parameter (or a part of a stacked one)
    D2T = "d2t"          # the vocabulary map
    T2D = "t2d"          # read and thrown away (the target-to-draft mask)
    IGNORED = "ignored"  # skipped on purpose (a module switched off)
    DROPPED = "dropped"  # matches nothing


class Route(NamedTuple):
    kind: RouteKind
    param: str | None = None
    shard: Any = None


_STACKED = ((".qkv_proj", ".q_proj", "q"), (".qkv_proj", ".k_proj", "k"),
            (".qkv_proj", ".v_proj", "v"), (".gate_up_proj", ".gate_proj", 0),
            (".gate_up_proj", ".up_proj", 1))
_VLLM_MLA_STACKED = ((".gate_up_proj", ".gate_proj", 0), (".gate_up_proj", ".up_proj", 1),
                     (".fused_qkv_a_proj", ".q_a_proj", 0),
                     (".fused_qkv_a_proj", ".kv_a_proj_with_mqa", 1))


def _into(param: str, params: Mapping[str, Any], shard: Any = None) -> Route:
    """Into `param` (part `shard`) when the loader builds it, else dropped."""
    return Route(RouteKind.PARAM, param, shard) if param in params else Route(RouteKind.DROPPED)


def route_key(key: str, params: Mapping[str, Any], loader: Loader,
              cfg: Mapping[str, Any] | None = None) -> Route:
    """Where the loader's `load_weights` puts checkpoint key `key`, step for step."""
    if loader.runtime == VLLM:
        return _route_vllm(key, params, loader, cfg or {})
    if loader.draft == DraftClass.MLA:
        return _route_sglang_mla(key, params)
    name = key
    for old, new in loader.renames:
        if old in name:
            name = name.replace(old, new)
    if "d2t" in name:
        return Route(RouteKind.D2T)
    if "t2d" in name:
        return Route(RouteKind.T2D)
    for param_part, shard_part, shard in _STACKED:
        if shard_part in name:  # the first match decides, found or not
            name = name.replace(shard_part, param_part)
            full = name if name in params else f"model.{name}"
            return _into(full, params, shard)
    full = name if name in params else f"model.{name}"
    return _into(full, params)


def _route_sglang_mla(key: str, params: Mapping[str, Any]) -> Route:
    """kimi_k25_eagle3.py: exact d2t/t2d names; `^layers.0.` -> `midlayer.`; `model.` unless
    lm_head; gate/up stacked; q_a + kv_a_with_mqa fused once both arrived (see
    `simulate_load`); anything else unknown is skipped with a log warning."""
    if key == "d2t" or key.endswith(".d2t"):
        return Route(RouteKind.D2T)
    if key == "t2d" or key.endswith(".t2d"):
        return Route(RouteKind.T2D)
    name = re.sub(r"^layers\.0\.", "midlayer.", key)
    if not name.startswith("lm_head."):
        name = f"model.{name}"
    for param_part, shard_part, shard in _STACKED[3:]:
        if shard_part in name and name.replace(shard_part, param_part) in params:
            return Route(RouteKind.PARAM, name.replace(shard_part, param_part), shard)
    for part, shard in (("kv_a_proj_with_mqa", "kv_a"), ("q_a_proj", "q_a")):
        if part in name:
            fused = name.replace(part, "fused_qkv_a_proj_with_mqa")
            return _into(fused, params, shard)
    return _into(name, params)


def _route_vllm(key: str, params: Mapping[str, Any], loader: Loader,
                cfg: Mapping[str, Any]) -> Route:
    """llama_eagle3.py / deepseek_eagle3.py: skip t2d; d2t -> draft_id_to_target_id; `model.`
    unless lm_head; the mapper's substring `midlayer.` -> `layers.0.` and stacking;
    fc./input_norm. skipped when that module is off; anything else unknown raises."""
    if "t2d" in key:
        return Route(RouteKind.T2D)
    if "mask_hidden" in key and MASK_HIDDEN_SKIPPED in loader.facts:
        return Route(RouteKind.IGNORED)
    if "d2t" in key:
        name = key.replace("d2t", "draft_id_to_target_id")
        return Route(RouteKind.D2T, name) if name in params else Route(RouteKind.DROPPED)
    name = key if "lm_head" in key else "model." + key
    for old, new in loader.renames:
        name = name.replace(old, new)
    if "fc." in name and not uses_fc(cfg, loader) or (
            "input_norm." in name and not (loader.input_norm and norm_before_fc(cfg))):
        return Route(RouteKind.IGNORED)
    stacked = _VLLM_MLA_STACKED if loader.draft == DraftClass.MLA else _STACKED
    for param_part, shard_part, shard in stacked:
        if shard_part in name:
            full = name.replace(shard_part, param_part)
            return _into(full, params, shard)
    return _into(name, params)


def simulate_load(keys: Iterable[str], params: Mapping[str, Any], loader: Loader,
                  cfg: Mapping[str, Any] | None = None) -> tuple[list[str], list[str]]:
    """(keys the loader drops, parameters no key fills). A stacked parameter missing only
    some parts is listed as e.g. `model.midlayer.self_attn.qkv_proj.weight[k_proj]`.
    SGLang's MLA draft loads its fused q_a/kv_a projection only when both halves arrive:
    a lone half is dropped (silently) and the parameter stays empty."""
    unused, loaded, pending = [], {}, {}
    for key in keys:
        r = route_key(key, params, loader, cfg)
        if r.kind in (RouteKind.DROPPED, RouteKind.IGNORED):
            unused.append(key)
        elif r.kind == RouteKind.PARAM and r.shard in ("q_a", "kv_a"):
            pending.setdefault(r.param, {})[r.shard] = key
        elif r.kind == RouteKind.PARAM or r.kind == RouteKind.D2T and r.param:
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
    if loader.draft == DraftClass.MLA and loader.runtime == SGLANG:
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
