"""The translation `--fix` writes: a config.json the runtime reads natively for this draft
(`translate_config`), and the names its loader reads each key under (`suggest_renames`).
`spectrace doctor` judges a config the runtime cannot read on this translation, and the
plan of the corrected copy (`fix_plan`) starts from it."""
from __future__ import annotations

import copy
import re
from dataclasses import dataclass, field
from typing import Any, Mapping

from ... import signals
from ...runtimes import SGLANG, VLLM, Runtime, Word
from .formats import Format, FormatName, archs_of
from .inputs import Target
from .layer_ids import sglang_ids_for
from .load_replay import RouteKind, route_key
from .loaders import DRAFT_ARCHS, Decoder, DraftClass, Loader, resolve_loader
from .runtime_view import MTP_TYPES

# Structural key renames, tried in order on a key the loader would not load, until the
# key loads. The same table gives the doctor's hints and `--fix`'s renames.
KEY_RENAMES = {
    (SGLANG, Decoder.MIDLAYER): ((r"^model\.", ""), (r"^layers\.0\.", "midlayer.")),
    (SGLANG, Decoder.LAYERS): ((r"^model\.", ""), (r"^midlayer\.(\d+)\.", r"layers.\1.")),
    (SGLANG, DraftClass.MLA): ((r"^model\.", ""), (r"^midlayer\.0\.", "midlayer.")),
    (VLLM, Decoder.LAYERS): ((r"^model\.", ""), (r"^midlayer\.(\d+)\.", r"layers.\1."),
                              (r"^aux_norm_low\.", "fc_norm.0."),
                              (r"^aux_norm_mid\.", "fc_norm.1."),
                              (r"^aux_norm_high\.", "fc_norm.2.")),
    (VLLM, DraftClass.MLA): ((r"^model\.", ""), (r"^midlayer\.(\d+)\.", r"layers.\1.")),
}


def key_renames(loader: Loader) -> tuple[tuple[str, str], ...]:
    kind = DraftClass.MLA if loader.draft == DraftClass.MLA else loader.decoder
    return KEY_RENAMES.get((loader.runtime, kind), ())


def upper_norm_rename(key: str, fmt: Format, loader: Loader) -> str | None:
    """`layers.N.input_layernorm` <-> `layers.N.hidden_norm` for N >= 1, when the trainer
    and the runtime use different norms before attention in the upper layers."""
    if loader.upper_norm is None or fmt.upper_norm == loader.upper_norm:
        return None
    m = re.match(rf"^(layers\.[1-9]\d*\.){fmt.upper_norm}(\..*)$", key)
    return f"{m[1]}{loader.upper_norm}{m[2]}" if m else None


class ChangeKind(Word):
    CONFIG = "config"  # a config.json field
    RENAME = "rename"  # a tensor key
    DROP = "drop"      # a key left out
    D2T = "d2t"        # the vocabulary map rewritten as offsets


@dataclass
class Change:
    """One change `--fix` makes, and the finding code it answers."""

    kind: ChangeKind
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


def plan_sglang_ids(plan: Plan, version: str, target: Target, inputs: list[int]
                    ) -> list[int] | None:
    """`sglang_ids_for` the target; when no list exists, the plan refuses, once however
    many steps find it."""
    ids = sglang_ids_for(version, target.archs, target.layers, inputs)
    why = (f"the draft was trained on the inputs of target layers {inputs}, which no "
           f"eagle_aux_hidden_state_layer_ids make SGLang {version} capture for this target")
    if ids is None and why not in plan.refusals:
        plan.refusals.append(why)
    return ids


def translate_config(fmt: Format, cfg: Mapping[str, Any], runtime: str, version: str,
                     target: Target, shapes: Mapping[str, tuple]) -> Plan:
    """The config.json the runtime reads natively for this draft, listing each change."""
    plan = Plan(copy.deepcopy(dict(cfg)))
    new = plan.config
    label = Runtime(runtime).label

    def change(text: str, code: str) -> None:
        plan.changes.append(Change(ChangeKind.CONFIG, text, code))

    if fmt.name == FormatName.SPECULATORS and runtime == SGLANG:
        if fmt.draft != DraftClass.LLAMA:
            plan.refusals.append(f"transformer_layer_config.model_type is "
                                 f"{fmt.flat.get('model_type')!r}: SGLang's EAGLE-3 draft is a "
                                 f"Llama layer and has no place for its q_norm/k_norm weights")
        new = plan.config = {k: v for k, v in fmt.flat.items()}
        new.update(architectures=["LlamaForCausalLMEagle3"], model_type="llama")
        # SGLang resolves --dtype auto from this config: without it, float16 (dtypes.py)
        new.update({k: cfg[k] for k in ("torch_dtype", "dtype") if cfg.get(k)})
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
    elif fmt.name != FormatName.SPECULATORS:
        loader = resolve_loader(runtime, version, fmt.draft)
        registered = DRAFT_ARCHS[runtime]
        archs = archs_of(cfg)
        if loader is not None and not any(registered.get(a) == fmt.draft for a in archs):
            new["architectures"] = [loader.arch if runtime == SGLANG or fmt.draft == DraftClass.MLA
                                    else "LlamaForCausalLMEagle3"]
            change(f"architectures {archs} -> {new['architectures']} (the {fmt.draft} EAGLE-3 "
                   f"draft class {label} registers)", signals.CONFIG_UNSUPPORTED)
        if runtime == VLLM and fmt.draft == DraftClass.MLA and new.get("model_type") in MTP_TYPES:
            change(f"model_type {new['model_type']!r} -> 'deepseek_v2' (vLLM serves a "
                   f"{new['model_type']} draft as DeepSeek's MTP module)",
                   signals.CONFIG_UNSUPPORTED)
            new["model_type"] = "deepseek_v2"
        if runtime == VLLM and new.get("use_aux_norm") and not new.get("fc_norm"):
            new["fc_norm"] = True
            change("fc_norm: true (vLLM does not read SGLang's legacy use_aux_norm)",
                   signals.WEIGHTS_UNUSED_KEYS)
    _fill_from_shapes(plan, target.config, shapes)
    return plan


def borrows_target_head(cfg: Mapping[str, Any], shapes: Mapping[str, tuple],
                        runtime: str) -> bool:
    """A draft without `lm_head.weight` that names draft_vocab_size = vocab_size: SGLang
    builds (and leaves empty) its own head unless draft_vocab_size is absent, when it takes
    the target's (vLLM takes the target's either way)."""
    dv, vocab = cfg.get("draft_vocab_size"), cfg.get("vocab_size")
    return (runtime == SGLANG and dv is not None and dv == vocab
            and not cfg.get("tie_word_embeddings")
            and not any(k.endswith("lm_head.weight") for k in shapes))


def borrow_target_head(plan: Plan, runtime: str, shapes: Mapping[str, tuple]) -> None:
    if borrows_target_head(plan.config, shapes, runtime):
        del plan.config["draft_vocab_size"]
        plan.changes.append(Change(ChangeKind.CONFIG, "draft_vocab_size removed (the "
                                   "checkpoint has no lm_head: SGLang then takes the target's)",
                                   signals.WEIGHTS_MISSING_PARAMS))


def untie_trained_head(plan: Plan, runtime: str, shapes: Mapping[str, tuple]) -> None:
    """SGLang ties lm_head to the embedding when `tie_word_embeddings` is true and drops a
    trained `lm_head.weight`: the copy says false (and names `draft_vocab_size`, without
    which SGLang replaces the head with the target's). A fix, not a translation: the
    doctor reports the tied original (`weights.unused_keys`)."""
    new = plan.config
    lm = next((s for k, s in shapes.items() if k.endswith("lm_head.weight")), None)
    if runtime != SGLANG or not new.get("tie_word_embeddings") or not lm or len(lm) != 2:
        return
    new["tie_word_embeddings"] = False
    text = ("tie_word_embeddings: true -> false (SGLang ties lm_head to the embedding and "
            "drops the trained lm_head.weight)")
    if new.get("draft_vocab_size") is None:
        new["draft_vocab_size"] = int(lm[0])
        text += (f"; draft_vocab_size: {lm[0]} (the rows of lm_head.weight; without it SGLang "
                 f"takes lm_head from the target)")
    plan.changes.append(Change(ChangeKind.CONFIG, text, signals.WEIGHTS_UNUSED_KEYS))


def _fill_from_shapes(plan: Plan, target: Mapping[str, Any], shapes: Mapping[str, tuple]) -> None:
    """Fields a config can lack although the tensors say what they must be."""
    new = plan.config
    lm = next((s for k, s in shapes.items() if k.endswith("lm_head.weight")), None)
    vocab = new.get("vocab_size")
    if new.get("draft_vocab_size") is None and lm and vocab and len(lm) == 2 and lm[0] < vocab:
        new["draft_vocab_size"] = int(lm[0])
        plan.changes.append(Change(ChangeKind.CONFIG, f"draft_vocab_size: {lm[0]} (the rows of "
                                             f"lm_head.weight)", signals.SHAPE_MISMATCH))
    q = q_lora_rows(shapes)
    if new.get("kv_lora_rank") and not new.get("q_lora_rank") and q:
        new["q_lora_rank"] = q
        plan.changes.append(Change(ChangeKind.CONFIG, f"q_lora_rank: {q} (the rows of "
                                   f"q_a_proj.weight)", signals.CONFIG_UNSUPPORTED))
    fc = fc_shape(shapes)
    ht = target.get("hidden_size")
    hidden_in = new.get("target_hidden_size") or new.get("hidden_size")
    if (fc and len(fc) == 2 and ht and hidden_in and int(hidden_in) != int(ht)
            and fc[1] % int(ht) == 0 and fc[1] % int(hidden_in)):
        new["target_hidden_size"] = int(ht)
        plan.changes.append(Change(ChangeKind.CONFIG, f"target_hidden_size: {ht} (fc.weight takes "
                                             f"{fc[1]} = {fc[1] // int(ht)} x {ht} inputs, the "
                                             f"target's hidden size)",
                                   signals.FC_CONFIG_WIDTH_MISMATCH))


def q_lora_rows(shapes: Mapping[str, tuple]) -> int | None:
    """The rank of an MLA draft's low-rank query (the rows of its `q_a_proj.weight`)."""
    s = next((s for k, s in shapes.items() if k.endswith("q_a_proj.weight")), None)
    return int(s[0]) if s and len(s) == 2 else None


def fc_shape(shapes: Mapping[str, tuple]) -> tuple | None:
    """The shape of the checkpoint's `fc.weight` (or `model.fc.weight`); None without one."""
    return next((s for k, s in shapes.items() if re.match(r"^(model\.)?fc\.weight$", k)), None)


def suggest_renames(fmt: Format, keys, params: Mapping[str, Any], loader: Loader,
                    cfg: Mapping[str, Any]) -> dict[str, str]:
    """key -> the name this loader reads it under (`KEY_RENAMES` for keys it would
    drop, and the upper layers' pre-attention norm where trainer and runtime differ)."""
    keys = list(keys)
    present = set(keys)
    out: dict[str, str] = {}
    def kind(key: str) -> RouteKind:
        return route_key(key, params, loader, cfg).kind

    for key in keys:
        new = key
        if kind(key) in (RouteKind.DROPPED, RouteKind.IGNORED):
            cand = key
            for pattern, repl in key_renames(loader):
                cand = re.sub(pattern, repl, cand)
                if cand != key and kind(cand) == RouteKind.PARAM:
                    new = cand
                    break
        new = upper_norm_rename(new, fmt, loader) or new
        if new != key and new not in present and new not in out.values():
            out[key] = new
    return out
