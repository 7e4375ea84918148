"""EAGLE-3 draft checkpoint formats: one recogniser per trainer's format (`recognise`), and
the settings each writes as its trainer wrote them (`Format`). What a runtime makes of a
format is `runtime_view`, the layer-id conventions `layer_ids`, the translation `--fix`
writes `translation`.

Formats (field and key names from the trainers' save/export code, see docs/doctor.md):
- `specforge`: SpecForge / SGLang's layout. `LlamaForCausalLMEagle3`, flat Llama config,
  `eagle_config.eagle_aux_hidden_state_layer_ids` in SGLang's convention, `midlayer.*` or
  `layers.N.*`, `d2t` offsets and `t2d`.
- `speculators`: vllm-project/speculators. `speculators_model_type: "eagle3"`, the layer
  config in `transformer_layer_config`, top-level `draft_vocab_size`,
  `norm_before_residual`, ids at the top level in vLLM's convention, `layers.N.*`.
- `modelopt`: NVIDIA Model Optimizer's EAGLE-3 export. `LlamaForCausalLMEagle3` (Megatron:
  `LlamaForCausalLMEagle3Deep`), `eagle_config` with modelopt's own fields
  (`use_input_layernorm_in_first_layer`, ...); `midlayer.*` (<= 0.41, `midlayer.N.*` for
  several layers) or `layers.N.*` (>= 0.43); no `t2d`.
- `eagle`: the EAGLE authors' checkpoints. `LlamaForCausalLM` config with
  `draft_vocab_size`, no id list (inputs of layers 2, n//2, n-3), `midlayer.*`.
- `mla`: the MLA draft for Kimi-K2.x / DeepSeek targets (`Eagle3DeepseekV2ForCausalLM`;
  SpecForge's unfinished `DeepseekV3ForCausalLMEagle3`), DeepSeek-V3 attention fields,
  `layers.0.*` or `midlayer.*`.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Mapping

from ...runtimes import SGLANG, VLLM, Runtime, Word
from .draft_params import eagle_config
from .loaders import DraftClass

LLAMA, MLA, QWEN3 = DraftClass.LLAMA, DraftClass.MLA, DraftClass.QWEN3
MODELOPT_FIELDS = frozenset({"use_input_layernorm_in_first_layer", "use_last_layernorm",
                             "use_mtp_layernorm", "next_layer_regular", "parallel_draft_step",
                             "parallel_draft_heads_num_layers"})
MLA_ARCHS = ("Eagle3DeepseekV2ForCausalLM", "Eagle3DeepseekV3ForCausalLM",
             "DeepseekV3ForCausalLMEagle3")
LLAMA_ARCHS = ("LlamaForCausalLMEagle3", "Eagle3LlamaForCausalLM", "LlamaForCausalLMEagle3Deep")


class FormatName(Word):
    SPECFORGE = "specforge"
    SPECULATORS = "speculators"
    MODELOPT = "modelopt"
    EAGLE = "eagle"
    MLA = "mla"


TITLES = {FormatName.SPECFORGE: "SpecForge (SGLang layout)",
          FormatName.SPECULATORS: "vllm-project/speculators",
          FormatName.MODELOPT: "NVIDIA Model Optimizer",
          FormatName.EAGLE: "EAGLE original (SafeAILab)",
          FormatName.MLA: "MLA EAGLE-3 (Kimi-K2.x / DeepSeek)"}


@dataclass(frozen=True)
class Format:
    """A recognised checkpoint: its format, draft class, and the settings it was trained
    with, read the way its trainer wrote them."""

    name: FormatName
    draft: DraftClass
    evidence: str               # why this format
    flat: dict                  # the config with the layer's fields at the top level
    upper_norm: str             # pre-attention norm the trainer used in layers >= 1
    ids: list[int] | None       # aux ids as written
    id_convention: Runtime | None  # whose convention the ids are in: SGLang's
                                   # (eagle_config) or vLLM's (top level)
    norm_before_residual: bool | None  # None: the config does not say

    @property
    def title(self) -> str:
        return TITLES[self.name]

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "title": self.title, "draft_class": self.draft,
                "evidence": self.evidence, "aux_layer_ids": self.ids,
                "id_convention": self.id_convention}


def archs_of(cfg: Mapping[str, Any]) -> list[str]:
    a = cfg.get("architectures") or []
    return [x for x in (a if isinstance(a, list) else [a]) if isinstance(x, str)]


def _upper_norm(keys, default: str) -> str:
    """Which norm the checkpoint's layers >= 1 carry (SGLang: hidden_norm; HF-style
    trainers: input_layernorm); `default` when it has neither or both."""
    seen = {m[2] for k in keys if (m := re.match(
        r"^(?:model\.)?(?:layers|midlayer)\.([1-9]\d*)\.(hidden_norm|input_layernorm)\.", k))}
    return seen.pop() if len(seen) == 1 else default


def is_speculators(cfg: Mapping[str, Any]) -> bool:
    """A vllm-project/speculators EAGLE-3 config (the layer's fields in
    `transformer_layer_config`)."""
    return cfg.get("speculators_model_type") == "eagle3" or "speculators_config" in cfg


def recognise(cfg: Mapping[str, Any], keys) -> Format | None:
    """The format of a draft checkpoint from its config.json and tensor names; None when
    it is no EAGLE-3 draft any of the known trainers writes."""
    keys = list(keys)
    archs = archs_of(cfg)
    ec = eagle_config(cfg)
    top_ids = cfg.get("eagle_aux_hidden_state_layer_ids") or None
    ec_ids = ec.get("eagle_aux_hidden_state_layer_ids") or None
    if is_speculators(cfg):
        tlc = cfg.get("transformer_layer_config")
        tlc = tlc if isinstance(tlc, Mapping) else {}
        flat = {**tlc, **{k: cfg[k] for k in ("draft_vocab_size", "target_hidden_size",
                                              "norm_before_fc", "fc_norm", "norm_output")
                          if cfg.get(k) is not None}}
        return Format(FormatName.SPECULATORS, QWEN3 if tlc.get("model_type") == "qwen3" else LLAMA,
                      "speculators_model_type is \"eagle3\"", flat,
                      _upper_norm(keys, "input_layernorm"), top_ids, VLLM if top_ids else None,
                      cfg.get("norm_before_residual"))
    ids, conv = (ec_ids, SGLANG) if ec_ids else (top_ids, VLLM) if top_ids else (None, None)
    if any(a in MLA_ARCHS for a in archs) or (
            "kv_lora_rank" in cfg and any("kv_a_proj_with_mqa" in k for k in keys)):
        return Format(FormatName.MLA, MLA, f"architecture {archs[0] if archs else '(none)'} with "
                      f"DeepSeek MLA attention fields", dict(cfg), "input_layernorm", ids, conv,
                      False)
    modelopt = (MODELOPT_FIELDS & set(ec) or "LlamaForCausalLMEagle3Deep" in archs
                or any(re.match(r"^midlayer\.\d+\.", k) for k in keys))
    if modelopt and (set(archs) & set(LLAMA_ARCHS) or any(k.startswith("midlayer") for k in keys)):
        why = ("eagle_config has Model Optimizer's fields "
               f"({', '.join(sorted(MODELOPT_FIELDS & set(ec)))})" if MODELOPT_FIELDS & set(ec)
               else "Model Optimizer's layer keys / architecture")
        return Format(FormatName.MODELOPT, LLAMA, why, dict(cfg),
                      _upper_norm(keys, "input_layernorm"), ids, conv, False)
    if set(archs) & set(LLAMA_ARCHS):
        return Format(FormatName.SPECFORGE, LLAMA, f"architecture {archs[0]}", dict(cfg),
                      _upper_norm(keys, "hidden_norm"), ids, conv, False)
    draft_keys = any(k.startswith(("midlayer.", "fc.")) for k in keys)
    if "LlamaForCausalLM" in archs and (draft_keys or "draft_vocab_size" in cfg):
        return Format(FormatName.EAGLE, LLAMA, "a LlamaForCausalLM config with EAGLE-3 draft keys "
                      "(midlayer.*, fc.weight)", dict(cfg), _upper_norm(keys, "input_layernorm"),
                      ids, conv, False)
    return None
