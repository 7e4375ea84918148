"""EAGLE-3 draft checkpoint formats: one recogniser per trainer's format, what each
runtime's loader makes of it (`runtime_view`), and the translation into the layout a
runtime reads (`translate`), which `spectrace doctor` uses both to judge and to `--fix`.

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

Aux layer ids are compared as the layers whose *input* the target captures (0: the
embeddings): SGLang's Llama-family targets capture the input of layer id + 1, DeepSeek
targets (0.5.16+) keep the ids unless the first is 1, vLLM's id k is the input of layer k.
"""
from __future__ import annotations

import copy
import re
from dataclasses import dataclass, field
from typing import Any, Mapping

from .. import signals
from . import aux
from .loaders import (DRAFT_ARCHS, LABELS, SGLANG, SGLANG_NEWEST, VLLM, Loader,
                      eagle_config, parse_version, resolve_loader)

MODELOPT_FIELDS = frozenset({"use_input_layernorm_in_first_layer", "use_last_layernorm",
                             "use_mtp_layernorm", "next_layer_regular", "parallel_draft_step",
                             "parallel_draft_heads_num_layers"})
MLA_ARCHS = ("Eagle3DeepseekV2ForCausalLM", "Eagle3DeepseekV3ForCausalLM",
             "DeepseekV3ForCausalLMEagle3")
LLAMA_ARCHS = ("LlamaForCausalLMEagle3", "Eagle3LlamaForCausalLM", "LlamaForCausalLMEagle3Deep")
SPECULATORS_DROP = ("speculators_model_type", "speculators_version", "speculators_config",
                    "transformer_layer_config", "norm_before_residual", "embed_requires_grad",
                    "auto_map", "eagle_aux_hidden_state_layer_ids", "has_no_defaults_at_init")
TITLES = {"specforge": "SpecForge (SGLang layout)", "speculators": "vllm-project/speculators",
          "modelopt": "NVIDIA Model Optimizer", "eagle": "EAGLE original (SafeAILab)",
          "mla": "MLA EAGLE-3 (Kimi-K2.x / DeepSeek)"}


@dataclass(frozen=True)
class Format:
    """A recognised checkpoint: its format, draft class, and the settings it was trained
    with, read the way its trainer wrote them."""

    name: str
    draft: str                  # "llama" | "mla" | "qwen3"
    evidence: str               # why this format
    flat: dict                  # the config with the layer's fields at the top level
    upper_norm: str             # pre-attention norm the trainer used in layers >= 1
    ids: list[int] | None       # aux ids as written
    id_convention: str | None   # "sglang" (eagle_config) | "vllm" (top level) | None
    norm_before_residual: bool | None  # None: the config does not say

    @property
    def title(self) -> str:
        return TITLES[self.name]

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "title": self.title, "draft_class": self.draft,
                "evidence": self.evidence, "aux_layer_ids": self.ids,
                "id_convention": self.id_convention}


def _archs(cfg: Mapping[str, Any]) -> list[str]:
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
    archs = _archs(cfg)
    ec = eagle_config(cfg)
    top_ids = cfg.get("eagle_aux_hidden_state_layer_ids") or None
    ec_ids = ec.get("eagle_aux_hidden_state_layer_ids") or None
    if is_speculators(cfg):
        tlc = cfg.get("transformer_layer_config")
        tlc = tlc if isinstance(tlc, Mapping) else {}
        flat = {**tlc, **{k: cfg[k] for k in ("draft_vocab_size", "target_hidden_size",
                                              "norm_before_fc", "fc_norm", "norm_output")
                          if cfg.get(k) is not None}}
        return Format("speculators", "qwen3" if tlc.get("model_type") == "qwen3" else "llama",
                      "speculators_model_type is \"eagle3\"", flat,
                      _upper_norm(keys, "input_layernorm"), top_ids, "vllm" if top_ids else None,
                      cfg.get("norm_before_residual"))
    ids, conv = (ec_ids, "sglang") if ec_ids else (top_ids, "vllm") if top_ids else (None, None)
    if any(a in MLA_ARCHS for a in archs) or (
            "kv_lora_rank" in cfg and any("kv_a_proj_with_mqa" in k for k in keys)):
        return Format("mla", "mla", f"architecture {archs[0] if archs else '(none)'} with "
                      f"DeepSeek MLA attention fields", dict(cfg), "input_layernorm", ids, conv,
                      False)
    modelopt = (MODELOPT_FIELDS & set(ec) or "LlamaForCausalLMEagle3Deep" in archs
                or any(re.match(r"^midlayer\.\d+\.", k) for k in keys))
    if modelopt and (set(archs) & set(LLAMA_ARCHS) or any(k.startswith("midlayer") for k in keys)):
        why = ("eagle_config has Model Optimizer's fields "
               f"({', '.join(sorted(MODELOPT_FIELDS & set(ec)))})" if MODELOPT_FIELDS & set(ec)
               else "Model Optimizer's layer keys / architecture")
        return Format("modelopt", "llama", why, dict(cfg), _upper_norm(keys, "input_layernorm"),
                      ids, conv, False)
    if set(archs) & set(LLAMA_ARCHS):
        return Format("specforge", "llama", f"architecture {archs[0]}", dict(cfg),
                      _upper_norm(keys, "hidden_norm"), ids, conv, False)
    draft_keys = any(k.startswith(("midlayer.", "fc.")) for k in keys)
    if "LlamaForCausalLM" in archs and (draft_keys or "draft_vocab_size" in cfg):
        return Format("eagle", "llama", "a LlamaForCausalLM config with EAGLE-3 draft keys "
                      "(midlayer.*, fc.weight)", dict(cfg), _upper_norm(keys, "input_layernorm"),
                      ids, conv, False)
    return None


# -- which layers the target captures -----------------------------------------------------
# SGLang: each target architecture's own rule (`aux.SGLANG_TARGETS`, shared with the
# run-time audit): most store id + 1 (the input of the next layer), the DeepSeek family
# keeps the ids unless the first is 1 (from 0.5.16), gpt-oss keeps them when
# max(ids) == num_layers (0.5.20+). vLLM: id k is the input of layer k. Default without
# ids: [2, n // 2, n - 3].
ID_RULE_FACTS = ("sglang.llama_ids_plus_one", "sglang.deepseek_keep_ids", "sglang.default_ids",
                 "sglang.kimi_k25_text_config", "vllm.before_convention", "vllm.default_ids")


def sglang_family(target_archs) -> aux.Family:
    """The capture rule of the target's architecture (the common one when unknown)."""
    return next((aux.SGLANG_TARGETS[a] for a in target_archs if a in aux.SGLANG_TARGETS),
                aux.Family())


def keeps_ids(target_archs) -> bool:
    return sglang_family(target_archs).rule == aux.KEPT_UNLESS_FIRST_IS_ONE


def default_inputs(n: int) -> list[int]:
    """Both runtimes' default: the inputs of layers 2, n // 2 and n - 3 (EAGLE's own)."""
    return sorted(set(aux.default_ids(n)))


def id_inputs(runtime: str, version: str, target_archs, n: int, ids: list[int] | None
              ) -> list[int]:
    """For each id, the layer whose input the target captures (0: the embeddings, n: the
    final pre-norm state)."""
    rule = aux.KEPT if runtime == VLLM else sglang_family(target_archs).rule_at(
        parse_version(version))
    return aux.stored_ids(rule, ids, n)


def captured_inputs(runtime: str, version: str, target_archs, n: int,
                    ids: list[int] | None) -> list[int]:
    """Sorted layer inputs the target captures for these ids (each layer once; an input
    outside what the target can capture is never captured)."""
    lo, hi = capturable(runtime, target_archs, n)
    return sorted({i for i in id_inputs(runtime, version, target_archs, n, ids) if lo <= i <= hi})


def capturable(runtime: str, target_archs, n: int) -> tuple[int, int]:
    """The range of layer inputs the target can capture (inclusive)."""
    return 0, (n if runtime == VLLM else sglang_family(target_archs).max_input(n))


def sglang_ids_for(version: str, target_archs, n: int, inputs: list[int]) -> list[int] | None:
    """Ids that make SGLang capture exactly `inputs`; None when no list does."""
    for ids in ([i - 1 for i in inputs], list(inputs)):
        if captured_inputs(SGLANG, version, target_archs, n, ids) == sorted(set(inputs)):
            return ids
    return None


def trained_inputs(fmt: Format, target_archs, n: int, runtime: str, version: str
                   ) -> list[int]:
    """The layer inputs the draft was trained on: vLLM-convention ids as they are,
    SGLang-convention ids as SGLang serves them (the version judged, or the newest when
    judging for vLLM), no ids: the default."""
    if fmt.ids is None:
        return default_inputs(n)
    if fmt.id_convention == "vllm":
        return sorted(set(fmt.ids))
    v = version if runtime == SGLANG else SGLANG_NEWEST
    return captured_inputs(SGLANG, v, target_archs, n, fmt.ids)


def runtime_ids(view: Mapping[str, Any], loader: Loader) -> list[tuple[str, list[int] | None]]:
    """[(when, ids the target is given)] for each way this runtime may read the view:
    vLLM's V1 runner (0.22+) falls back to eagle_config's ids as they are, its V2 runner
    and older releases to the default."""
    if loader.runtime == SGLANG:
        return [("", eagle_config(view).get("eagle_aux_hidden_state_layer_ids") or None)]
    top = view.get("eagle_aux_hidden_state_layer_ids") or None
    if loader.aux_ids == "none":
        return [("", None)]
    if top is not None:
        return [("", top)]
    ec_ids = eagle_config(view).get("eagle_aux_hidden_state_layer_ids") or None
    if loader.aux_ids == "top+v1" and ec_ids is not None:
        return [("on the V1 model runner", ec_ids), ("on the V2 model runner", None)]
    return [("", None)]


# -- what a runtime reads -----------------------------------------------------------------
@dataclass
class View:
    """What the runtime's config reader hands its draft class: `config` (None when the
    runtime cannot build an EAGLE-3 draft from it: `problem` says why) and its loader."""

    config: dict | None
    loader: Loader | None
    problem: str | None = None


def runtime_view(fmt: Format, cfg: Mapping[str, Any], runtime: str, version: str) -> View:
    label = LABELS[runtime]
    archs = _archs(cfg)
    if fmt.name == "speculators":
        if runtime == SGLANG:
            return View(None, resolve_loader(runtime, version, fmt.draft), (
                f"{label} reads config.json with transformers' AutoConfig, which needs a "
                f"top-level model_type, and no SGLang version reads the speculators format "
                f"(`speculators_config`, `transformer_layer_config`): the server fails at "
                f"start-up"))
        return _vllm_speculators_view(fmt, cfg, version)
    registered = DRAFT_ARCHS[runtime]
    arch = next((a for a in archs if a in registered), None)
    loader = resolve_loader(runtime, version, fmt.draft)
    if loader is None:
        return View(None, None, f"{label} {version} has no EAGLE-3 draft class for this "
                                f"{fmt.draft.upper()} draft (architecture {archs})")
    if arch is None or registered[arch] != fmt.draft:
        what = ("builds the target model class LlamaForCausalLM from it, so none of the "
                "draft's keys (midlayer.*, fc, d2t) load and the draft is noise"
                if "LlamaForCausalLM" in archs and runtime == SGLANG else
                f"registers no draft class for architecture {archs or '(none)'}")
        return View(None, loader, f"{label} {version} {what}")
    return View(dict(cfg), loader)


def _vllm_speculators_view(fmt: Format, cfg: Mapping[str, Any], version: str) -> View:
    """vLLM's translation (transformers_utils/configs/speculators/algos.py update_eagle3)."""
    loader = resolve_loader(VLLM, version, "llama")
    tlc = cfg.get("transformer_layer_config")
    if not isinstance(tlc, Mapping):
        return View(None, loader, "the speculators config has no transformer_layer_config "
                                  "object, which vLLM takes as the draft's model config")
    mtype = tlc.get("model_type", "llama")
    if "vllm.qwen3" in loader.facts and mtype not in ("llama", "qwen3"):
        return View(None, loader, f"vLLM {version} raises 'Unsupported model_type {mtype} for "
                                  f"Eagle3 speculator'")
    draft = "qwen3" if mtype == "qwen3" and "vllm.qwen3" in loader.facts else "llama"
    loader = resolve_loader(VLLM, version, draft)
    view = dict(tlc)
    view["draft_vocab_size"] = cfg.get("draft_vocab_size")
    if cfg.get("target_hidden_size") is not None:
        view["target_hidden_size"] = cfg["target_hidden_size"]
    view["norm_before_residual"] = cfg.get("norm_before_residual", True)
    for k in loader.speculators_fields:
        if cfg.get(k):
            view[k] = cfg[k]
    view["architectures"] = [loader.arch]
    return View(view, loader)


# -- settings trained with vs settings read ------------------------------------------------
@dataclass(frozen=True)
class Setting:
    """A config setting that changes the network: what the trainer used and what the
    runtime will compute with."""

    name: str
    trained: Any
    runtime: Any
    why: str


def settings(fmt: Format, view: Mapping[str, Any], loader: Loader) -> list[Setting]:
    """Settings where the runtime computes a different network than the one trained
    (keys the runtime does not load are reported by the weights check instead)."""
    out = []
    nbr = fmt.norm_before_residual
    run_nbr = bool(view.get("norm_before_residual", False)) and loader.norm_before_residual
    if nbr is None and loader.runtime == VLLM:
        out.append(Setting("norm_before_residual", None, run_nbr, (
            "the speculators config does not say; vLLM reads a missing value as true "
            "(residual = hidden_norm(fc output)), while `speculators convert` and the config "
            "class default to false, and training defaults to true")))
    elif nbr is None:
        out.append(Setting("norm_before_residual", None, False, (
            "the speculators config does not say whether the residual is the normalised fc "
            "output (speculators' training default) or the raw one (the only choice SGLang "
            "has)")))
    elif bool(nbr) != run_nbr:
        out.append(Setting("norm_before_residual", bool(nbr), run_nbr, (
            f"the draft adds the {'normalised' if nbr else 'raw'} fc output as the residual; "
            + ("no SGLang version has this option (llama_eagle3 always adds the raw one), "
               if loader.runtime == SGLANG else
               f"{loader.name} adds the {'normalised' if run_nbr else 'raw'} one, ")
            + "and no rename or re-weighting makes them equal (RMSNorm is not linear)")))
    trained_no = bool(fmt.flat.get("norm_output"))
    if trained_no and not (loader.norm_output and view.get("norm_output")):
        out.append(Setting("norm_output", True, False, (
            f"the draft was trained to feed the post-norm state back to the next draft step "
            f"(EAGLE 3.1); {loader.name} feeds back the pre-norm state"
            + (" (its speculators translation drops the field)" if fmt.name == "speculators"
               and loader.runtime == VLLM else ""))))
    if fmt.draft == "mla" and (view.get("norm_before_fc") or eagle_config(view).get(
            "norm_before_fc")):
        out.append(Setting("norm_before_fc", True, False, (
            f"the MLA draft of {loader.name} has no input_norm: the concatenated aux states "
            f"reach fc without the norm the draft was trained with")))
    return out


# -- translation into the layout a runtime reads -------------------------------------------
# Structural key renames, tried in order on a key the loader would not load, until the
# key loads. The same table gives the doctor's hints and `--fix`'s renames.
KEY_RENAMES = {
    (SGLANG, "midlayer"): ((r"^model\.", ""), (r"^layers\.0\.", "midlayer.")),
    (SGLANG, "layers"): ((r"^model\.", ""), (r"^midlayer\.(\d+)\.", r"layers.\1.")),
    (SGLANG, "mla"): ((r"^model\.", ""), (r"^midlayer\.0\.", "midlayer.")),
    (VLLM, "layers"): ((r"^model\.", ""), (r"^midlayer\.(\d+)\.", r"layers.\1."),
                       (r"^aux_norm_low\.", "fc_norm.0."), (r"^aux_norm_mid\.", "fc_norm.1."),
                       (r"^aux_norm_high\.", "fc_norm.2.")),
    (VLLM, "mla"): ((r"^model\.", ""), (r"^midlayer\.(\d+)\.", r"layers.\1.")),
}


def key_renames(loader: Loader) -> tuple[tuple[str, str], ...]:
    kind = "mla" if loader.draft == "mla" else loader.decoder
    return KEY_RENAMES.get((loader.runtime, kind), ())


def upper_norm_rename(key: str, fmt: Format, loader: Loader) -> str | None:
    """`layers.N.input_layernorm` <-> `layers.N.hidden_norm` for N >= 1, when the trainer
    and the runtime use different norms before attention in the upper layers."""
    if loader.upper_norm is None or fmt.upper_norm == loader.upper_norm:
        return None
    m = re.match(rf"^(layers\.[1-9]\d*\.){fmt.upper_norm}(\..*)$", key)
    return f"{m[1]}{loader.upper_norm}{m[2]}" if m else None


@dataclass
class Change:
    """One change `--fix` makes, and the finding code it answers."""

    kind: str       # "config" | "rename" | "drop" | "d2t"
    text: str
    addresses: str

    def to_dict(self) -> dict[str, str]:
        return {"kind": self.kind, "text": self.text, "addresses": self.addresses}


@dataclass
class Plan:
    """The corrected copy for one runtime version: its config.json, key renames, keys
    left out, whether `d2t` is rewritten as offsets, every change, and what cannot be
    fixed (with the reason)."""

    config: dict
    renames: dict[str, str] = field(default_factory=dict)
    drops: list[str] = field(default_factory=list)
    d2t_offsets: str | None = None  # the d2t key rewritten as offsets
    changes: list[Change] = field(default_factory=list)
    refusals: list[str] = field(default_factory=list)

    def rename(self, key: str) -> str:
        return self.renames.get(key, key)


def plan_sglang_ids(plan: Plan, version: str, target, inputs: list[int]) -> list[int] | None:
    """`sglang_ids_for` the target (`checkpoint.Target`); when no list exists, the plan
    refuses, once however many steps find it."""
    ids = sglang_ids_for(version, target.archs, target.layers, inputs)
    why = (f"the draft was trained on the inputs of target layers {inputs}, which no "
           f"eagle_aux_hidden_state_layer_ids make SGLang {version} capture for this target")
    if ids is None and why not in plan.refusals:
        plan.refusals.append(why)
    return ids


def translate_config(fmt: Format, cfg: Mapping[str, Any], runtime: str, version: str,
                     target, shapes: Mapping[str, tuple]) -> Plan:
    """The config.json the runtime reads natively for this draft, listing each change.
    `target`: `checkpoint.Target` (its config, architectures, layer count)."""
    plan = Plan(copy.deepcopy(dict(cfg)))
    new = plan.config
    label = LABELS[runtime]

    def change(text: str, code: str) -> None:
        plan.changes.append(Change("config", text, code))

    if fmt.name == "speculators" and runtime == SGLANG:
        if fmt.draft != "llama":
            plan.refusals.append(f"transformer_layer_config.model_type is "
                                 f"{fmt.flat.get('model_type')!r}: SGLang's EAGLE-3 draft is a "
                                 f"Llama layer and has no place for its q_norm/k_norm weights")
        new = plan.config = {k: v for k, v in fmt.flat.items()}
        new.update(architectures=["LlamaForCausalLMEagle3"], model_type="llama")
        ec: dict[str, Any] = {"use_aux_hidden_state": True}
        new["eagle_config"] = ec
        change("config.json rewritten in SpecForge/SGLang form: transformer_layer_config's "
               "fields at the top level, architectures [\"LlamaForCausalLMEagle3\"], "
               "model_type \"llama\", eagle_config {use_aux_hidden_state: true}; speculators' "
               "own fields dropped", signals.CONFIG_UNSUPPORTED)
        if cfg.get("norm_before_fc"):
            ec["norm_before_fc"] = True
        if fmt.ids:
            ids = plan_sglang_ids(plan, version, target, sorted(set(fmt.ids)))
            if ids is not None:
                ec["eagle_aux_hidden_state_layer_ids"] = ids
                change(f"eagle_config.eagle_aux_hidden_state_layer_ids: {ids} (speculators' "
                       f"{fmt.ids} are inputs of layers; SGLang's ids for those layers)",
                       signals.CONFIG_UNSUPPORTED)
    elif fmt.name != "speculators":
        loader = resolve_loader(runtime, version, fmt.draft)
        registered = DRAFT_ARCHS[runtime]
        archs = _archs(cfg)
        if loader is not None and not any(registered.get(a) == fmt.draft for a in archs):
            new["architectures"] = [loader.arch if runtime == SGLANG or fmt.draft == "mla"
                                    else "LlamaForCausalLMEagle3"]
            change(f"architectures {archs} -> {new['architectures']} (the {fmt.draft} EAGLE-3 "
                   f"draft class {label} registers)", signals.CONFIG_UNSUPPORTED)
        if runtime == VLLM and new.get("use_aux_norm") and not new.get("fc_norm"):
            new["fc_norm"] = True
            change("fc_norm: true (vLLM does not read SGLang's legacy use_aux_norm)",
                   signals.WEIGHTS_UNUSED_KEYS)
    _fill_from_shapes(plan, target.config, shapes)
    return plan


def _fill_from_shapes(plan: Plan, target: Mapping[str, Any], shapes: Mapping[str, tuple]) -> None:
    """Fields a config can lack although the tensors say what they must be."""
    new = plan.config
    lm = next((s for k, s in shapes.items() if k.endswith("lm_head.weight")), None)
    vocab = new.get("vocab_size")
    if new.get("draft_vocab_size") is None and lm and vocab and len(lm) == 2 and lm[0] < vocab:
        new["draft_vocab_size"] = int(lm[0])
        plan.changes.append(Change("config", f"draft_vocab_size: {lm[0]} (the rows of "
                                             f"lm_head.weight)", signals.SHAPE_MISMATCH))
    fc = fc_shape(shapes)
    ht = target.get("hidden_size")
    hidden_in = new.get("target_hidden_size") or new.get("hidden_size")
    if (fc and len(fc) == 2 and ht and hidden_in and int(hidden_in) != int(ht)
            and fc[1] % int(ht) == 0 and fc[1] % int(hidden_in)):
        new["target_hidden_size"] = int(ht)
        plan.changes.append(Change("config", f"target_hidden_size: {ht} (fc.weight takes "
                                             f"{fc[1]} = {fc[1] // int(ht)} x {ht} inputs, the "
                                             f"target's hidden size)",
                                   signals.FC_CONFIG_WIDTH_MISMATCH))


def fc_shape(shapes: Mapping[str, tuple]) -> tuple | None:
    """The shape of the checkpoint's `fc.weight` (or `model.fc.weight`); None without one."""
    return next((s for k, s in shapes.items() if re.match(r"^(model\.)?fc\.weight$", k)), None)
