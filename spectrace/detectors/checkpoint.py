"""A draft checkpoint judged against one runtime version's loader and its target, and
the plan of a corrected copy. Pure functions over a `CheckpointView` (config, tensor
names, shapes, dtypes, the small `d2t`/`t2d` values), so `spectrace doctor` judges real
files and `--fix` judges the copy it is about to write with the same code.

`judge` recognises the format (`formats.recognise`), reads the config as the runtime
would (`formats.runtime_view`; a config it cannot read at all is `config.unsupported`, and
the rest is judged on the minimal config translation `--fix` would make), replays the
loader on the keys (`loaders`), and checks shapes, fc width, aux layers, settings and the
vocabulary map. `plan_fix` builds the corrected copy from the same tables and judges it:
whatever error would remain becomes a refusal.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Mapping

from .. import signals
from ..findings import ERROR, WARNING, Finding
from . import SGLANG as SGLANG_TERMS
from . import VLLM as VLLM_TERMS
from . import formats as F
from .formats import Change
from .loaders import (SGLANG, VLLM, Loader, checkpoint_keys, eagle_config, expected_params,
                      geometry, route_key, shard_shape, shared_from_target, simulate_load,
                      unused_params)
from .vocab import absolute_to_offsets, check_vocab_map, t2d_reading
from .weights import MAX_NAMES, is_network_weight, missing_params_finding, unused_keys_finding

INT_DTYPES = ("I64", "I32")


@dataclass
class CheckpointView:
    """What the checks need from a checkpoint: config.json, tensor shapes and dtypes, the
    values of its `d2t` maps and the target ids marked in `t2d`."""

    config: dict
    shapes: dict[str, tuple[int, ...]]
    dtypes: dict[str, str] = field(default_factory=dict)
    d2t: dict[str, list[int]] = field(default_factory=dict)  # key -> values (integer maps)
    t2d_hot: list[int] | None = None


@dataclass
class Target:
    """The target's config as the runtime reads it (a multimodal wrapper's `text_config`
    fills what the top level lacks) and its architectures (both levels)."""

    config: dict
    archs: tuple[str, ...]

    @property
    def hidden(self) -> int:
        return int(self.config["hidden_size"])

    @property
    def layers(self) -> int:
        return int(self.config["num_hidden_layers"])

    @property
    def vocab(self) -> int:
        return int(self.config["vocab_size"])


@dataclass
class Judgement:
    format: F.Format
    loader: Loader | None
    view: dict | None           # the config the runtime's draft class reads (translated
                                # by --fix's rules when the runtime cannot read the original)
    translated: bool            # view is the translation, not the original
    findings: list[Finding]

    @property
    def errors(self) -> list[Finding]:
        return [f for f in self.findings if f.severity == ERROR]


class NotADraft(ValueError):
    """No known trainer writes a draft like this (the doctor reports unusable input)."""


def judge(ck: CheckpointView, target: Target, runtime: str, version: str) -> Judgement:
    fmt = F.recognise(ck.config, ck.shapes)
    if fmt is None:
        archs = ck.config.get("architectures")
        raise NotADraft(f"not an EAGLE-3 draft any known trainer writes (architectures is "
                        f"{archs!r}; expected one of {', '.join(F.LLAMA_ARCHS + F.MLA_ARCHS)}, "
                        f"a speculators config, or an EAGLE LlamaForCausalLM draft)")
    view = F.runtime_view(fmt, ck.config, runtime, version)
    findings: list[Finding] = []
    translated = False
    cfg, loader = view.config, view.loader
    if cfg is None:
        plan = F.translate_config(fmt, ck.config, runtime, version, target, ck.shapes)
        fixed = F.runtime_view(F.recognise(plan.config, ck.shapes) or fmt, plan.config,
                               runtime, version)
        findings.append(Finding(signals.CONFIG_UNSUPPORTED, ERROR, (
            f"{view.problem}. "
            + ("Fix: `spectrace doctor --fix OUT_DIR` writes the config in the form this "
               "runtime reads (the findings below are for that translation)."
               if fixed.config is not None and not plan.refusals else
               "No translation makes this draft loadable here: "
               + ("; ".join(plan.refusals) if plan.refusals else "deploy it on a runtime "
                  "version that has its draft class") + ".")),
            {"format": fmt.name, "runtime": runtime, "version": version}))
        if fixed.config is None:
            return Judgement(fmt, loader, None, False, findings)
        cfg, loader, translated = fixed.config, fixed.loader, True
    findings += check_loaded(fmt, cfg, ck, target, loader)
    return Judgement(fmt, loader, cfg, translated, findings)


def check_loaded(fmt: F.Format, cfg: dict, ck: CheckpointView, target: Target,
                 loader: Loader) -> list[Finding]:
    """Every check of a config the runtime can read, against its loader."""
    if loader.draft == "mla" and loader.runtime == SGLANG and not cfg.get("q_lora_rank"):
        return [Finding(signals.CONFIG_UNSUPPORTED, ERROR, (
            f"the MLA draft's config has no q_lora_rank, and {loader.name} raises 'Eagle3 MLA "
            f"layer requires q_lora_rank in the draft config' when it builds the draft. Fix: "
            f"set q_lora_rank to the rank the draft was trained with (the rows of "
            f"q_a_proj.weight)."),
            {"field": "q_lora_rank", "runtime": loader.runtime, "version": loader.version})]
    params = expected_params(cfg, loader)
    out = check_weights(fmt, cfg, ck.shapes, params, loader)
    out += check_shapes(cfg, ck.shapes, params, target, loader)
    out += check_fc_and_aux(fmt, cfg, ck.shapes, params, target, loader)
    out += check_settings(fmt, cfg, loader)
    out += check_vocab(cfg, ck, params, target, loader)
    n = cfg.get("num_hidden_layers") or 1
    if loader.layers == "one" and int(n) != 1:
        out.append(Finding(signals.CONFIG_LAYERS_UNSUPPORTED, ERROR, (
            f"the draft has num_hidden_layers = {n}, but {loader.name} builds a single "
            f"`midlayer` and raises 'EAGLE3 currently only supports 1 layer' at load. "
            + ("Fix: deploy on SGLang >= 0.5.12 (multi-layer drafts, `layers.N.*` keys) or "
               "train a one-layer draft." if loader.draft == "llama" else
               "Fix: train a one-layer draft (the MLA draft has one layer in every version).")),
            {"num_hidden_layers": n, "version": loader.version, "runtime": loader.runtime}))
    return out


# -- weights ---------------------------------------------------------------------------------
def suggest_renames(fmt: F.Format, keys, params: Mapping[str, Any], loader: Loader,
                    cfg: Mapping[str, Any]) -> dict[str, str]:
    """key -> the name this loader reads it under (`formats.KEY_RENAMES` for keys it would
    drop, and the upper layers' pre-attention norm where trainer and runtime differ)."""
    keys = list(keys)
    present = set(keys)
    out: dict[str, str] = {}
    for key in keys:
        new = key
        if route_key(key, params, loader, cfg).kind in ("dropped", "ignored"):
            cand = key
            for pattern, repl in F.key_renames(loader):
                cand = re.sub(pattern, repl, cand)
                if cand != key and route_key(cand, params, loader, cfg).kind == "param":
                    new = cand
                    break
        new = F.upper_norm_rename(new, fmt, loader) or new
        if new != key and new not in present and new not in out.values():
            out[key] = new
    return out


def check_weights(fmt: F.Format, cfg: Mapping[str, Any], shapes: Mapping[str, Any],
                  params: Mapping[str, Any], loader: Loader) -> list[Finding]:
    unused, missing = simulate_load(shapes, params, loader, cfg)
    skip = shared_from_target(cfg, loader) | unused_params(params, loader)
    missing = [m for m in missing if m.split("[")[0] not in skip]
    expected = [k for m in missing for k in checkpoint_keys(m, loader)]
    renames = suggest_renames(fmt, shapes, params, loader, cfg)
    facts = {"runtime": loader.runtime, "version": loader.version, "decoder": loader.decoder}
    if renames:
        facts["renames"] = dict(list(renames.items())[:MAX_NAMES])
    hint = None
    if renames:
        shown = ", ".join(f"`{a}` -> `{b}`" for a, b in list(renames.items())[:3])
        hint = (f"{loader.name} reads them under other names ({shown}"
                f"{' ...' if len(renames) > 3 else ''}); `--fix` renames them.")
        if loader.decoder == "midlayer" and loader.draft == "llama" and any(
                k.startswith(("layers.", "model.layers.")) for k in unused):
            hint = (f"{loader.name} names the decoder `midlayer`, so `layers.0.*` keys match "
                    f"nothing. Rename `layers.0.` to `midlayer.` (`--fix` does; SGLang >= "
                    f"0.5.12 reads both names) or deploy on SGLang >= 0.5.12.")
    elif unused and all(is_network_weight(k) for k in unused):
        hint = _not_built_hint(fmt, cfg, unused, loader)
    out = []
    if unused:
        drop = "raises" if loader.unknown_keys == "raises" and any(
            route_key(k, params, loader, cfg).kind == "dropped" for k in unused) else \
            loader.unknown_keys if loader.unknown_keys != "raises" else "silent"
        out.append(unused_keys_finding(unused, f"{loader.name} would drop", bool(missing), hint,
                                       details={**facts, "expected_keys": expected[:MAX_NAMES]},
                                       drop=drop))
    if missing:
        out.append(missing_params_finding(missing, loader.name, expected, details=facts))
    return out


# settings whose weights only some runtimes build: (key prefixes, config fields, where)
_OPTIONAL_MODULES = (
    (("fc_norm.", "aux_norm_"), ("fc_norm", "use_aux_norm"), "per-aux-layer norms before fc",
     "SGLang >= 0.5.12 (MLA: 0.5.16), vLLM >= 0.22 (from a speculators config: 0.25)"),
    (("input_norm.",), ("norm_before_fc",), "a norm over the concatenated aux states",
     "SGLang >= 0.5.17 (Llama draft only), vLLM >= 0.20"),
)


def _not_built_hint(fmt: F.Format, cfg: Mapping[str, Any], unused: list[str],
                    loader: Loader) -> str:
    """Why network weights have no place in this runtime's draft class."""
    trained = {**fmt.flat, **eagle_config(fmt.flat)}
    for prefixes, fields, what, where in _OPTIONAL_MODULES:
        if any(k.startswith(prefixes) for k in unused):
            said = [f for f in fields if trained.get(f)]
            how = (f"the config sets `{said[0]}` but {loader.name} "
                   + ("does not pass it on from a speculators config" if said and
                      fmt.name == "speculators" and loader.runtime == VLLM else
                      "does not build that module") if said else
                   f"the config does not switch it on (`{fields[0]}: true`)")
            return (f"The draft was trained with {what}; {how}. It is built by {where}: "
                    f"deploy there"
                    + (", or set it in config.json if the runtime has it." if not said else "."))
    return (f"{loader.name}'s {loader.arch} has no parameter for them: the draft was trained "
            f"as a different network, and `--fix` cannot add what the runtime does not build.")


# -- shapes ----------------------------------------------------------------------------------
_SHAPE_WHY = {
    "lm_head": "draft_vocab_size x hidden_size", "embed_tokens": "vocab_size x hidden_size",
    "qkv_proj": "heads x head_dim x (2 x hidden_size for layer 0)",
    "o_proj": "hidden_size x heads x head_dim",
    "gate_up_proj": "intermediate_size x hidden_size",
    "down_proj": "hidden_size x intermediate_size",
    "norm": "hidden_size", "hidden_norm": "hidden_size", "input_layernorm": "hidden_size",
    "post_attention_layernorm": "hidden_size", "input_norm": "num_aux x target hidden",
    "fused_qkv_a_proj_with_mqa": "q_lora_rank (+ kv_lora_rank + qk_rope_head_dim) x "
                                 "2 x hidden_size",
    "fused_qkv_a_proj": "q_lora_rank (+ kv_lora_rank + qk_rope_head_dim) x 2 x hidden_size",
    "q_b_proj": "heads x (qk_nope_head_dim + qk_rope_head_dim) x q_lora_rank",
    "kv_b_proj": "heads x (qk_nope_head_dim + v_head_dim) x kv_lora_rank",
}


def check_shapes(cfg: Mapping[str, Any], shapes: Mapping[str, tuple[int, ...]],
                 params: Mapping[str, tuple[int, ...]], target: Target, loader: Loader
                 ) -> list[Finding]:
    """Each tensor's shape against the parameter (part) it loads into. fc's input width is
    left to `check_fc_and_aux`, which can say why it is wrong."""
    g = geometry(cfg, loader)
    out = []
    for key, shape in shapes.items():
        shape = tuple(shape)
        r = route_key(key, params, loader, cfg)
        if r.kind == "d2t":
            expected = (g.lm_rows,)
            why = "draft_vocab_size" if cfg.get("draft_vocab_size") else "vocab_size"
        elif r.kind == "param":
            expected = shard_shape(r.param, r.shard, params[r.param], cfg, g)
            why = _SHAPE_WHY.get(r.param.rsplit(".", 2)[-2] if "." in r.param else r.param,
                                 "the draft config")
            if r.param == "model.fc.weight":
                if len(shape) == 2 and shape[0] == expected[0]:
                    continue
                expected, why = (expected[0], shape[1] if len(shape) == 2 else expected[1]), \
                    "hidden_size rows"
        else:
            continue
        if shape != expected:
            out.append(Finding(signals.SHAPE_MISMATCH, ERROR, (
                f"tensor `{key}` has shape {list(shape)} but the draft config implies "
                f"{list(expected)} ({why}). "
                + ("The runtime indexes this map with every draft id, so a short map fails on "
                   "the GPU and a long one hides which ids the lm_head really has. "
                   if r.kind == "d2t" else
                   "The runtime's weight loader rejects it at load time, or the draft computes "
                   "with a layer of the wrong size. ")
                + "Fix: make config.json describe the trained model (or re-export the tensor "
                  "to match)."),
                {"key": key, "shape": list(shape), "expected": list(expected),
                 "param": r.param or r.kind}))
    dv = cfg.get("vocab_size")
    if dv is not None and int(dv) != target.vocab:
        out.append(Finding(signals.SHAPE_MISMATCH, WARNING, (
            f"the draft config says vocab_size = {dv} but the target's is {target.vocab}. The "
            f"runtime shares the target's embeddings with the draft, so the draft's view of the "
            f"vocabulary disagrees with the tokens it is fed. Fix: set the draft's vocab_size "
            f"to {target.vocab}."),
            {"key": "config.vocab_size", "shape": [int(dv)], "expected": [target.vocab],
             "param": "model.embed_tokens.weight"}))
    return out


# -- fc width and aux layers -------------------------------------------------------------------
def check_fc_and_aux(fmt: F.Format, cfg: Mapping[str, Any], shapes: Mapping[str, tuple],
                     params: Mapping[str, Any], target: Target, loader: Loader
                     ) -> list[Finding]:
    """fc's input width against (aux layers the target sends) x (target hidden size), and
    the aux layers against the target. One cause gives one finding: a width that is not a
    multiple of the target hidden size is `fc.width_mismatch`; a multiple that disagrees
    with the layers the target captures is `aux.count_mismatch`; one that agrees with them
    but not with what this loader builds is `fc.width_mismatch`."""
    out: list[Finding] = []
    name = loader.name
    g = geometry(cfg, loader)
    ht, n = target.hidden, target.layers
    ec = eagle_config(cfg)
    readings = F.runtime_ids(cfg, loader)
    ids = readings[0][1]
    inputs = F.captured_inputs(loader.runtime, loader.version, target.archs, n, ids)
    flag = ec.get("use_aux_hidden_state", True)
    capture_on = bool(flag) or not loader.honors_use_aux_flag
    fc_key = next((k for k in shapes
                   if route_key(k, params, loader, cfg).param == "model.fc.weight"), None)
    fc_shape = tuple(shapes[fc_key]) if fc_key else None
    w = fc_shape[1] if fc_shape and len(fc_shape) == 2 else None
    details = {"fc_in": w, "target_hidden_size": ht, "draft_hidden_in": g.hidden_in,
               "num_aux": g.num_aux, "aux_layer_ids": ids, "captured_inputs": inputs,
               "runtime": loader.runtime, "version": loader.version}
    k = None
    if g.hidden_in != ht:
        src = "target_hidden_size" if cfg.get("target_hidden_size") else "hidden_size"
        out.append(Finding(signals.FC_CONFIG_WIDTH_MISMATCH, ERROR, (
            f"the draft config's {src} = {g.hidden_in} but the target's hidden_size is {ht}: "
            f"{name} builds fc for {g.num_aux} x {g.hidden_in} = {g.hidden_in * g.num_aux} "
            f"inputs while the target sends {g.num_aux} x {ht}, so loading or the first "
            f"target-fed draft pass fails (or fc is skipped when the widths happen to match the "
            f"draft's hidden size). Fix: set target_hidden_size = {ht} in the draft's "
            f"config.json, or pair the draft with the target it was trained on."), details))
    elif w is not None and w % ht:
        out.append(Finding(signals.FC_CONFIG_WIDTH_MISMATCH, ERROR, (
            f"fc takes {w} inputs, which is not a whole number of target layers of width {ht}: "
            f"the draft was trained for another target (or fc was exported wrongly), and "
            f"{name} fails to load it or to run the first target-fed draft pass. Fix: use the "
            f"target this draft was trained on, or retrain fc for (aux layers) x {ht}."),
            details))
    elif w is not None:
        k = w // ht
        # out-of-range ids are reported on their own below (one cause, one finding)
        sent = len(inputs) if ids is None else len(set(
            F.id_inputs(loader.runtime, loader.version, target.archs, n, ids)))
        if capture_on and k != sent:
            what = (f"the target is given aux layer ids {ids} and captures {sent} layers"
                    if ids else f"no aux layer ids are given, so the target captures its "
                    f"default layers (the inputs of {inputs}: {sent} distinct for {n} layers)")
            out.append(Finding(signals.AUX_COUNT_MISMATCH, ERROR, (
                f"{what}, but fc takes {k} layers ({w} = {k} x {ht}). The target sends "
                f"{sent} x {ht} wide hidden states, so the first target-fed draft pass fails, "
                f"or worse, runs on features the draft was not trained on. Fix: list exactly "
                f"the {k} layer ids the draft was trained with."),
                {**details, "fc_layers": k, "target_sends": sent}))
        elif k != g.num_aux:
            why = ("always builds fc for 3 aux layers" if loader.aux_count == "three"
                   else f"builds fc for {g.num_aux} aux layers (from the config)")
            out.append(Finding(signals.FC_CONFIG_WIDTH_MISMATCH, ERROR, (
                f"fc takes {k} x {ht} = {w} inputs, but {name} {why}, i.e. "
                f"{g.num_aux * ht}: loading the checkpoint fails. Fix: "
                + ("deploy on a version that sizes fc from the config (SGLang >= 0.5.12, "
                   "vLLM >= 0.22)." if loader.aux_count == "three" else
                   f"set num_aux_hidden_states = {k} (or list {k} layer ids) in config.json.")),
                {**details, "fc_layers": k}))
    if ids is not None:
        lo, hi = F.capturable(loader.runtime, target.archs, n)
        per_id = F.id_inputs(loader.runtime, loader.version, target.archs, n, ids)
        bad = [i for i, x in zip(ids, per_id) if not lo <= x <= hi]
        if bad:
            rule = _id_rule(loader, target.archs)
            out.append(Finding(signals.AUX_LAYER_IDS_OUT_OF_RANGE, ERROR, (
                f"aux layer ids {ids}, but the target has {n} layers: {name} {rule}, and can "
                f"capture the inputs of layers {lo}..{hi}, so {bad} are never captured. The "
                f"target sends fewer aux layers than fc expects: the draft pass fails, or fc is "
                f"silently skipped when the width equals the draft's hidden size. Fix: use the "
                f"ids the draft was trained with, or pair the draft with the deeper target it "
                f"was trained for."),
                {"aux_layer_ids": ids, "out_of_range": bad, "target_num_layers": n,
                 "capturable_inputs": [lo, hi]}))
    fc_layers = k if k is not None else g.num_aux
    if not flag and fc_layers > 1:
        honored = loader.honors_use_aux_flag
        out.append(Finding(signals.AUX_CAPTURE_DISABLED, ERROR if honored else WARNING, (
            f"eagle_config.use_aux_hidden_state is false, but fc expects {fc_layers} "
            f"concatenated target layers. "
            + ("The target then sends only its last hidden state; when its width equals the "
               "draft's hidden size the draft silently skips fc, sees features it was not "
               "trained on, and acceptance falls to about 1.0 with no error anywhere. "
               if honored else
               f"{name} ignores this flag, but other versions would disable aux capture and "
               f"the draft would silently skip fc. ")
            + "Fix: set eagle_config.use_aux_hidden_state to true (or remove it)."),
            {"use_aux_hidden_state": flag, "fc_layers": fc_layers, "honored_by_version": honored,
             "runtime": loader.runtime, "version": loader.version}))
    if capture_on and not any(f.code.startswith("aux.") for f in out):
        out += check_id_meaning(fmt, cfg, target, loader)
    return out


def _id_rule(loader: Loader, archs) -> str:
    if loader.runtime == VLLM:
        return "captures the input of layer id (the state after id layers)"
    if F.keeps_ids(archs):
        return ("captures the input of layer id for a DeepSeek-family target (of id + 1 when "
                "the first id is 1, and before 0.5.16)")
    return "captures the input of layer id + 1 (the output of layer id)"


def _misread_ids(fmt: F.Format, cfg: Mapping[str, Any], target: Target, loader: Loader
                 ) -> tuple[list[int], list[tuple[str, list[int] | None, list[int]]]]:
    """(the layer inputs the draft was trained on, [(when, ids, the inputs they capture)]
    for each way the runtime may read the ids that captures other inputs)."""
    n = target.layers
    want = F.trained_inputs(fmt, target.archs, n, loader.runtime, loader.version)
    wrong = []
    for when, ids in F.runtime_ids(cfg, loader):
        got = F.captured_inputs(loader.runtime, loader.version, target.archs, n, ids)
        if got != want:
            wrong.append((when, ids, got))
    return want, wrong


def check_id_meaning(fmt: F.Format, cfg: Mapping[str, Any], target: Target, loader: Loader
                     ) -> list[Finding]:
    """`aux.layer_ids_misread`: the layers the runtime captures are not the layers the
    draft was trained on, because the ids are read in another convention than they were
    written in, or ignored in favour of a default that differs."""
    want, wrong = _misread_ids(fmt, cfg, target, loader)
    if not wrong:
        return []
    conv = {"sglang": "SGLang's convention (eagle_config, as SGLang's "
                      "set_eagle3_layers_to_capture reads them for this target)",
            "vllm": "vLLM's convention (top level: the input of layer id)"}.get(
        fmt.id_convention or "", "no id list (the inputs of layers 2, n//2, n-3)")
    how = "; ".join(f"{when + ': ' if when else ''}"
                    f"{'ids ' + str(ids) if ids is not None else 'the default'} capture the "
                    f"inputs of layers {got}" for when, ids, got in wrong)
    fix = ("write them at the top level as `eagle_aux_hidden_state_layer_ids` in vLLM's "
           "convention" if loader.runtime == VLLM else
           "write them in eagle_config in SGLang's convention")
    return [Finding(signals.AUX_LAYER_IDS_MISREAD, ERROR, (
        f"the draft was trained on the inputs of target layers {want} (its ids {fmt.ids} are "
        f"in {conv}), but under {loader.name} {how}: the draft sees other layers than it was "
        f"trained on, and acceptance drops with no error. Fix: {fix} (`--fix` does)."),
        {"trained_inputs": want, "runtime_inputs": [g for _, _, g in wrong],
         "ids": fmt.ids, "id_convention": fmt.id_convention})]


def check_settings(fmt: F.Format, cfg: Mapping[str, Any], loader: Loader) -> list[Finding]:
    out = []
    for s in F.settings(fmt, cfg, loader):
        out.append(Finding(signals.CONFIG_SETTING_IGNORED, ERROR, (
            f"`{s.name}`: {s.why}. {loader.name} therefore runs a different network than the "
            f"one trained, silently, and acceptance drops. "
            + ("Fix: state it explicitly in config.json (what the draft was trained with)."
               if s.trained is None else
               "Fix: deploy on a runtime that has this setting, or retrain without it; "
               "`--fix` cannot change what the weights compute.")),
            {"setting": s.name, "trained": s.trained, "runtime": s.runtime,
             "runtime_name": loader.runtime, "version": loader.version}))
    return out


# -- vocabulary map ----------------------------------------------------------------------------
def check_vocab(cfg: Mapping[str, Any], ck: CheckpointView, params: Mapping[str, Any],
                target: Target, loader: Loader) -> list[Finding]:
    d2t_keys = [k for k in ck.shapes if route_key(k, params, loader, cfg).kind == "d2t"]
    draft_vocab = cfg.get("draft_vocab_size")
    terms = VLLM_TERMS if loader.runtime == VLLM else SGLANG_TERMS
    if not d2t_keys:
        return check_vocab_map(None, draft_vocab, target.vocab, terms=terms)
    key = d2t_keys[-1]  # the loader keeps the last one it sees
    dtype = ck.dtypes.get(key)
    if dtype is not None and dtype not in INT_DTYPES:
        return [Finding(signals.VOCAB_D2T_DTYPE, ERROR, (
            f"`{key}` has dtype {dtype}; the runtime adds it to an int64 arange and indexes "
            f"with the result, which fails (or rounds ids) unless it holds integers. Fix: save "
            f"d2t as int64 (d2t[i] = target_id - i)."),
            {"key": key, "dtype": dtype, "expected": list(INT_DTYPES)})]
    if len(ck.shapes[key]) != 1 or key not in ck.d2t:
        return []  # reported as shape.mismatch; values are not a map
    return check_vocab_map(ck.d2t[key], draft_vocab, target.vocab, ck.t2d_hot, terms)


def d2t_key(ck: CheckpointView, cfg: Mapping[str, Any], loader: Loader) -> str | None:
    """The key whose values the loader keeps as its vocabulary map (the last it sees)."""
    params = expected_params(cfg, loader)
    keys = [k for k in ck.shapes if route_key(k, params, loader, cfg).kind == "d2t"]
    return keys[-1] if keys else None


# -- the corrected copy --------------------------------------------------------------------------
def plan_fix(ck: CheckpointView, target: Target, runtime: str, version: str) -> tuple[
        F.Plan, CheckpointView, Judgement]:
    """The corrected copy for `runtime` `version`: (plan, the copy as the checks see it,
    the judgement of that copy). The plan's refusals say what cannot be fixed: everything
    the translation does not reach stays an error of the copy and is listed there."""
    orig = judge(ck, target, runtime, version)
    fmt = orig.format
    plan = F.translate_config(fmt, ck.config, runtime, version, target, ck.shapes)
    new_fmt = F.recognise(plan.config, ck.shapes) or fmt
    view = F.runtime_view(new_fmt, plan.config, runtime, version)
    if view.config is None:
        plan.refusals.append(view.problem or "the runtime cannot read the translated config")
        return plan, ck, orig
    loader = view.loader
    # speculators -> SGLang: the ids become eagle_config ids for this target
    _fix_aux(plan, fmt, target, runtime, version, loader, ck)
    view = F.runtime_view(F.recognise(plan.config, ck.shapes) or fmt, plan.config, runtime,
                          version)
    cfg, loader = view.config, view.loader
    _refuse_settings(plan, fmt, cfg, loader)
    params = expected_params(cfg, loader)
    # keys
    renames = suggest_renames(fmt, ck.shapes, params, loader, cfg)
    for old, new in renames.items():
        plan.renames[old] = new
        plan.changes.append(Change("rename", f"`{old}` -> `{new}`", _rename_code(orig, old)))
    for key in ck.shapes:
        r = route_key(plan.rename(key), params, loader, cfg)
        if r.kind != "dropped" or key in plan.renames:
            continue
        if loader.unknown_keys == "raises":
            if "d2t" in key and any(ck.d2t.get(key) or [1]):
                plan.refusals.append(f"`{key}` maps draft ids to other target ids, but "
                                     f"{loader.name} has no draft-to-target map when the "
                                     f"draft and target vocabularies are the same size")
            elif not is_network_weight(key):
                plan.drops.append(key)
                plan.changes.append(Change("drop", f"`{key}` left out ({loader.name} refuses "
                                                   f"unknown keys; not part of the network)",
                                           signals.WEIGHTS_UNUSED_KEYS))
    # d2t stored as absolute ids
    copy_d2t = dict(ck.d2t)
    key = d2t_key(ck, orig.view, orig.loader) if orig.view is not None else None
    if any(f.code == signals.VOCAB_D2T_ABSOLUTE for f in orig.findings) and key in ck.d2t:
        offsets = absolute_to_offsets(ck.d2t[key], target.vocab, ck.t2d_hot)
        reading = t2d_reading(ck.d2t[key], ck.t2d_hot)
        if offsets is None:
            why = (f"no `t2d` marking {len(ck.d2t[key])} ids to compare with, and its values "
                   f"are in ascending order, as offsets would be" if reading is None else
                   f"`t2d` marks exactly these ids, but not all are below the target's "
                   f"vocabulary size {target.vocab}" if reading == "absolute" else
                   "`t2d` marks neither these ids nor i + d2t[i]")
            plan.refusals.append(f"`d2t` looks like absolute target ids, but nothing confirms "
                                 f"it ({why}): rebuild it from your training data "
                                 f"(d2t[i] = hot_id[i] - i)")
        else:
            confirmed = " (t2d confirms the absolute ids)" if reading == "absolute" else ""
            plan.d2t_offsets, copy_d2t[key] = key, offsets
            plan.changes.append(Change("d2t", f"`{key}` rewritten as offsets (d2t[i] - i)"
                                              f"{confirmed}", signals.VOCAB_D2T_ABSOLUTE))
    shapes = {plan.rename(k): v for k, v in ck.shapes.items() if k not in plan.drops}
    dtypes = {plan.rename(k): v for k, v in ck.dtypes.items() if k not in plan.drops}
    copy_ck = CheckpointView(plan.config, shapes, dtypes,
                             {plan.rename(k): v for k, v in copy_d2t.items()
                              if k not in plan.drops}, ck.t2d_hot)
    after = judge(copy_ck, target, runtime, version)
    plan.refusals += [f"{f.code}: {f.message}" for f in after.errors
                      if not any(f.message in r or r in f.message for r in plan.refusals)]
    return plan, copy_ck, after


def _rename_code(orig: Judgement, key: str) -> str:
    """The finding a rename answers: the dropped key, or the parameter it leaves empty."""
    for f in orig.findings:
        if f.code == signals.WEIGHTS_UNUSED_KEYS and key in f.details.get("keys", []):
            return f.code
    return signals.WEIGHTS_MISSING_PARAMS


def _fix_aux(plan: F.Plan, fmt: F.Format, target: Target, runtime: str, version: str,
             loader: Loader, ck: CheckpointView) -> None:
    cfg = plan.config
    ec = cfg.get("eagle_config") if isinstance(cfg.get("eagle_config"), dict) else None
    fc = F.fc_shape(ck.shapes)
    if ec is not None and ec.get("use_aux_hidden_state") is False and fc and len(fc) == 2 \
            and fc[1] // max(target.hidden, 1) > 1:
        ec["use_aux_hidden_state"] = True
        plan.changes.append(Change("config", "eagle_config.use_aux_hidden_state: false -> true "
                                             f"(fc takes {fc[1] // target.hidden} target layers)",
                                   signals.AUX_CAPTURE_DISABLED))
    want, wrong = _misread_ids(fmt, cfg, target, loader)
    if not wrong:
        return
    if runtime == VLLM:
        cfg["eagle_aux_hidden_state_layer_ids"] = list(want)
        plan.changes.append(Change("config", f"eagle_aux_hidden_state_layer_ids: {want} at the "
                                             f"top level (vLLM's convention: the inputs of the "
                                             f"layers the draft was trained on)",
                                   signals.AUX_LAYER_IDS_MISREAD))
        return
    ids = F.plan_sglang_ids(plan, version, target, want)
    if ids is None:
        return
    ec = cfg.setdefault("eagle_config", {})
    ec["eagle_aux_hidden_state_layer_ids"] = ids
    plan.changes.append(Change("config", f"eagle_config.eagle_aux_hidden_state_layer_ids: {ids} "
                                         f"(SGLang's convention for the inputs of layers {want})",
                               signals.AUX_LAYER_IDS_MISREAD))


def _refuse_settings(plan: F.Plan, fmt: F.Format, cfg: Mapping[str, Any], loader: Loader) -> None:
    for s in F.settings(fmt, cfg, loader):
        plan.refusals.append(f"`{s.name}`: {s.why}")
