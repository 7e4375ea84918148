"""What each runtime's EAGLE-3 loader builds and reads, as data: one `LoaderRow` per
(runtime, version range, draft class), whose `Loader` states each fact as a typed field
(`Layers`, `AuxCount`, `AuxIds`, `UnknownKeys`, ...), and which row a runtime's release
uses (`resolve_loader`). What a row builds is `draft_params`'; its load replayed on a
checkpoint's key names, `load_replay`'s.

Pure (no torch, no runtime imports), shared by `spectrace doctor` and `--fix`. Every fact a
row relies on is named in its `facts` and checked against the released wheels by
tests/test_doctor_loader_facts.py (sources parsed with `ast`, nothing imported); the
SGLang rows are also replayed against the installed SGLang's real classes there.

Draft classes: `llama` (SGLang `LlamaForCausalLMEagle3`, vLLM `Eagle3LlamaForCausalLM`),
`mla` (`Eagle3DeepseekV2ForCausalLM`, Kimi-K2.x / DeepSeek targets), `qwen3` (vLLM
`Eagle3Qwen3ForCausalLM`: the llama layer plus `q_norm`/`k_norm`).
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, replace
from typing import Any, NamedTuple

from ...runtimes import SGLANG, VLLM, Runtime, Word, parse_version


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
    CONFIG_OR_TOP = "config+top"  # num_aux_layers, num_aux_hidden_states, the top-level
                                  # ids, the eagle_config ids, else 3 (vLLM's Qwen3 draft)


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
    # vLLM: the model runner `--vllm-runner` chose (V1 / V2); None: the release's default
    # for the target (`vllm_runner.judged_runner`)
    runner: str | None = None

    @property
    def name(self) -> str:
        return f"{self.runtime.label} {self.version}"

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        del out["speculators_qwen3"]
        if self.runner is None:
            del out["runner"]
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


def _fmt(v: tuple[int, ...]) -> str:
    return ".".join(map(str, v)).replace(".99", ".x")


def _rows(runtime: str, draft: str) -> list[LoaderRow]:
    if runtime == SGLANG:
        return [r for r in SGLANG_ROWS if r.loader.draft == draft]
    if draft == DraftClass.MLA:
        return list(VLLM_MLA_ROWS)
    if draft == DraftClass.QWEN3:
        return [r._replace(loader=replace(
            r.loader, draft=DraftClass.QWEN3, arch="Eagle3Qwen3ForCausalLM",
            aux_count=AuxCount.CONFIG_OR_TOP, facts=r.loader.facts + ("vllm.qwen3_aux_count",)))
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
