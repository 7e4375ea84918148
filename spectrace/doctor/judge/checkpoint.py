"""A draft checkpoint judged against one runtime version's loader and its target. Pure
functions over a `CheckpointView` (`inputs`), so `spectrace doctor` judges real files and
`--fix` (`fix_plan`) judges the copy it is about to write with the same code.

`judge` recognises the format (`formats.recognise`), reads the config as the runtime
would (`runtime_view`; a config it cannot read at all is `config.unsupported`, and the
rest is judged on the config translation `--fix` would make, `translation`; a field its
transformers' strict config class refuses is `config.field_type`, `strict_fields`), replays the
loader on the keys (`loaders`), and checks weights, shapes, fc width and aux layers
(`checkpoint_aux`), settings (`trained_settings`) and the vocabulary map.
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, Mapping

from ... import messages, signals
from ...findings import ERROR, WARNING, Finding, FindingSpec
from ...runtimes import SGLANG, VLLM
from . import formats
from .checkpoint_aux import check_fc_and_aux
from .formats import Format, FormatName
from .inputs import CheckpointView, Target
from .draft_params import (
    eagle_config, expected_params, geometry, shard_shape, shared_from_target, ties_lm_head,
    unused_params)
from .load_replay import RouteKind, checkpoint_keys, route_key, simulate_load
from .loaders import Decoder, DraftClass, Layers, Loader, UnknownKeys
from .positions import check_positions
from .runtime_view import runtime_view
from .strict_fields import check_field_types
from .trained_settings import settings
from .translation import (borrows_target_head, q_lora_rows, suggest_renames, translate_config,
                          upper_norm_rename)
from ...rules.vocab import check_vocab_map
from ...rules.weights import (MAX_NAMES, is_network_weight, missing_params_finding, tied_head_cause,
                      unused_keys_finding)


# The findings the doctor raises here, declared once (`doctor.judge.codes` gathers them;
# docs/doctor.md's table of codes is written from them).
SPECS: tuple[FindingSpec, ...] = (
    FindingSpec(signals.CONFIG_UNSUPPORTED, ERROR,
                "the runtime cannot build an EAGLE-3 draft from this config at all (it cannot "
                "read it, has no class for the architecture, or builds another class); says "
                "whether `--fix` can translate it"),
    FindingSpec(signals.CONFIG_LAYERS_UNSUPPORTED, ERROR,
                "`num_hidden_layers` is not 1 for a loader that builds one layer and raises "
                "otherwise"),
    FindingSpec(signals.CONFIG_SETTING_IGNORED, ERROR,
                "the draft was trained with a setting the runtime computes differently (it "
                "lacks the option or its config reader drops it); also raised by `positions` "
                "for its window and RoPE settings"),
    FindingSpec(signals.SHAPE_MISMATCH, ERROR,
                "a tensor's shape disagrees with the parameter it loads into as the config "
                "sizes it (a warning for a vocabulary size unlike the target's)"),
    FindingSpec(signals.VOCAB_D2T_DTYPE, ERROR,
                "`d2t` is not an integer tensor"),
)

INT_DTYPES = ("I64", "I32")


@dataclass
class Judgement:
    format: Format
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


def judge(ck: CheckpointView, target: Target, runtime: str, version: str,
          runner: str | None = None) -> Judgement:
    """`runner`: vLLM's model runner (V1 / V2) to judge on; None: the release's default for
    the target (`vllm_runner`)."""
    fmt = formats.recognise(ck.config, ck.shapes)
    if fmt is None:
        archs = ck.config.get("architectures")
        known = ", ".join(formats.LLAMA_ARCHS + formats.MLA_ARCHS)
        raise NotADraft(f"not an EAGLE-3 draft any known trainer writes (architectures is "
                        f"{archs!r}; expected one of {known}, a speculators config, or an "
                        f"EAGLE LlamaForCausalLM draft)")
    view = runtime_view(fmt, ck.config, runtime, version)
    findings: list[Finding] = []
    translated = False
    cfg, loader = view.config, view.loader
    if cfg is None:
        plan = translate_config(fmt, ck.config, runtime, version, target, ck.shapes)
        fixed = runtime_view(formats.recognise(plan.config, ck.shapes) or fmt, plan.config,
                             runtime, version)
        message = (messages.CONFIG_TRANSLATABLE if fixed.config is not None and not plan.refusals
                   else messages.CONFIG_UNTRANSLATABLE)
        findings.append(Finding(signals.CONFIG_UNSUPPORTED, ERROR, message.render(
            problem=view.problem,
            refusals="; ".join(plan.refusals) or messages.CONFIG_NO_DRAFT_CLASS),
            {"format": fmt.name, "runtime": runtime, "version": version}))
        if fixed.config is None:
            return Judgement(fmt, loader, None, False, findings)
        cfg, loader, translated = fixed.config, fixed.loader, True
    if runner is not None:
        loader = replace(loader, runner=runner)
    if translated or fmt.name != FormatName.SPECULATORS:  # vLLM: SpeculatorsConfig, not strict
        findings += check_field_types(plan.config if translated else ck.config, runtime,
                                      version)
    findings += check_loaded(fmt, cfg, ck, target, loader,
                             plan.config if translated else ck.config)
    return Judgement(fmt, loader, cfg, translated, findings)


def check_loaded(fmt: Format, cfg: dict, ck: CheckpointView, target: Target,
                 loader: Loader, source: dict | None = None) -> list[Finding]:
    """Every check of a config the runtime can read, against its loader. `source`: the
    config.json a fix goes into (the file, or its translation), default `cfg`."""
    q_a = q_lora_rows(ck.shapes)
    if loader.draft == DraftClass.MLA and not cfg.get("q_lora_rank") and (
            loader.runtime == SGLANG or q_a):
        does = messages.NO_Q_LORA_SGLANG if loader.runtime == SGLANG else messages.NO_Q_LORA_VLLM
        first = Finding(signals.CONFIG_UNSUPPORTED, ERROR, messages.CONFIG_NO_Q_LORA.render(
            loader=loader.name, does=does, rank=f": {q_a}" if q_a else "",
            fixed=" (`--fix` does)" if q_a else ""),
            {"field": "q_lora_rank", "runtime": loader.runtime, "version": loader.version})
        # the rest is judged as the copy --fix writes (q_lora_rank from q_a_proj's rows)
        return [first] + (check_loaded(fmt, {**cfg, "q_lora_rank": q_a}, ck, target, loader)
                          if q_a else [])
    act = cfg.get("hidden_act", "silu")
    if act != "silu" and loader.draft == DraftClass.LLAMA:
        return [Finding(signals.CONFIG_UNSUPPORTED, ERROR, messages.UNSUPPORTED_ACTIVATION.render(
            act=act, loader=loader.name),
            {"field": "hidden_act", "runtime": loader.runtime, "version": loader.version})]
    params = expected_params(cfg, loader)
    out = check_weights(fmt, cfg, ck.shapes, params, loader)
    out += check_shapes(cfg, ck.shapes, params, target, loader)
    out += check_fc_and_aux(fmt, cfg, ck.shapes, params, target, loader, source)
    out += check_settings(fmt, cfg, loader)
    out += check_positions(fmt, cfg, target, loader)
    out += check_vocab(cfg, ck, params, target, loader)
    n = cfg.get("num_hidden_layers") or 1
    if loader.layers == Layers.ONE and int(n) != 1:
        message = (messages.LAYERS_ONE_ONLY if loader.draft == DraftClass.LLAMA else
                   messages.LAYERS_ONE_ONLY_MLA)
        out.append(Finding(signals.CONFIG_LAYERS_UNSUPPORTED, ERROR, message.render(
            layers=n, loader=loader.name),
            {"num_hidden_layers": n, "version": loader.version, "runtime": loader.runtime}))
    return out


# -- weights ---------------------------------------------------------------------------------
def check_weights(fmt: Format, cfg: Mapping[str, Any], shapes: Mapping[str, Any],
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
    tied = tied_head_cause(ties_lm_head(cfg, loader), unused, loader.name)
    if renames:
        shown = ", ".join(f"`{a}` -> `{b}`" for a, b in list(renames.items())[:3])
        hint = messages.UNUSED_RENAMED.format(loader=loader.name, shown=shown,
                                              more=" ..." if len(renames) > 3 else "")
        if loader.decoder == Decoder.MIDLAYER and loader.draft == DraftClass.LLAMA and any(
                k.startswith(("layers.", "model.layers.")) for k in unused):
            hint = messages.UNUSED_MIDLAYER.format(loader=loader.name)
    elif unused and not tied and all(is_network_weight(k) for k in unused):
        hint = _not_built_hint(fmt, cfg, unused, loader)
    out = []
    if unused:
        drop = UnknownKeys.RAISES if loader.unknown_keys == UnknownKeys.RAISES and any(
            route_key(k, params, loader, cfg).kind == RouteKind.DROPPED for k in unused) else \
            loader.unknown_keys if loader.unknown_keys != UnknownKeys.RAISES else \
            UnknownKeys.SILENT
        out.append(unused_keys_finding(unused, f"{loader.name} would drop", bool(missing), hint,
                                       details={**facts, "expected_keys": expected[:MAX_NAMES],
                                                **({"cause": "tie_word_embeddings"} if tied
                                                   else {})},
                                       drop=drop, cause=tied))
    if missing == ["lm_head.weight"] and borrows_target_head(cfg, shapes, loader.runtime):
        out.append(Finding(signals.WEIGHTS_MISSING_PARAMS, ERROR, messages.MISSING_HEAD.render(
            vocab=cfg.get("vocab_size"), loader=loader.name),
            {"count": 1, "params": missing, **facts, "cause": "draft_vocab_size"}))
    elif missing:
        renamed = {k: n for k in shapes if (n := upper_norm_rename(k, fmt, loader)) in expected}
        out.append(missing_params_finding(missing, loader.name, expected, details=facts,
                                          renamed=renamed))
    return out


# settings whose weights only some runtimes build: (key prefixes, config fields, where)
_OPTIONAL_MODULES = (
    (("fc_norm.", "aux_norm_"), ("fc_norm", "use_aux_norm"), "per-aux-layer norms before fc",
     "SGLang >= 0.5.12 (MLA: 0.5.16), vLLM >= 0.22 (from a speculators config: 0.25)"),
    (("input_norm.",), ("norm_before_fc",), "a norm over the concatenated aux states",
     "SGLang >= 0.5.17 (Llama draft only), vLLM >= 0.20"),
)


def _not_built_hint(fmt: Format, cfg: Mapping[str, Any], unused: list[str],
                    loader: Loader) -> str:
    """Why network weights have no place in this runtime's draft class."""
    trained = {**fmt.flat, **eagle_config(fmt.flat)}
    for prefixes, fields, what, where in _OPTIONAL_MODULES:
        if any(k.startswith(prefixes) for k in unused):
            said = [f for f in fields if trained.get(f)]
            if not said:
                how = messages.NOT_BUILT_NOT_SET.format(field=fields[0])
            elif fmt.name == FormatName.SPECULATORS and loader.runtime == VLLM:
                how = messages.NOT_BUILT_NOT_PASSED.format(field=said[0], loader=loader.name)
            else:
                how = messages.NOT_BUILT_NO_MODULE.format(field=said[0], loader=loader.name)
            return messages.UNUSED_NOT_BUILT.format(
                what=what, how=how, where=where,
                tail=messages.NOT_BUILT_TAIL_SET if said else messages.NOT_BUILT_TAIL_NOT_SET)
    return messages.UNUSED_NO_PARAMETER.format(loader=loader.name, arch=loader.arch)


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
        if r.kind == RouteKind.D2T:
            expected = (g.lm_rows,)
            why = "draft_vocab_size" if cfg.get("draft_vocab_size") else "vocab_size"
        elif r.kind == RouteKind.PARAM:
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
            effect = (messages.SHAPE_D2T_EFFECT if r.kind == RouteKind.D2T else
                      messages.SHAPE_PARAM_EFFECT)
            out.append(Finding(signals.SHAPE_MISMATCH, ERROR, messages.SHAPE_MISMATCH.render(
                key=key, shape=list(shape), expected=list(expected), why=why, effect=effect),
                {"key": key, "shape": list(shape), "expected": list(expected),
                 "param": r.param or r.kind}))
    dv = cfg.get("vocab_size")
    if dv is not None and int(dv) != target.vocab:
        out.append(Finding(signals.SHAPE_MISMATCH, WARNING, messages.VOCAB_SIZE_MISMATCH.render(
            draft_vocab=dv, target_vocab=target.vocab),
            {"key": "config.vocab_size", "shape": [int(dv)], "expected": [target.vocab],
             "param": "model.embed_tokens.weight"}))
    return out


def check_settings(fmt: Format, cfg: Mapping[str, Any], loader: Loader) -> list[Finding]:
    out = []
    for s in settings(fmt, cfg, loader):
        message = messages.SETTING_UNSAID if s.trained is None else messages.SETTING_IGNORED
        out.append(Finding(signals.CONFIG_SETTING_IGNORED, ERROR, message.render(
            setting=s.name, why=s.why, loader=loader.name),
            {"setting": s.name, "trained": s.trained, "runtime": s.runtime,
             "runtime_name": loader.runtime, "version": loader.version}))
    return out


# -- vocabulary map ----------------------------------------------------------------------------
def check_vocab(cfg: Mapping[str, Any], ck: CheckpointView, params: Mapping[str, Any],
                target: Target, loader: Loader) -> list[Finding]:
    key = _last_d2t_key(ck, params, loader, cfg)
    draft_vocab = cfg.get("draft_vocab_size")
    if key is None:
        return check_vocab_map(None, draft_vocab, target.vocab, runtime=loader.runtime)
    dtype = ck.dtypes.get(key)
    if dtype is not None and dtype not in INT_DTYPES:
        return [Finding(signals.VOCAB_D2T_DTYPE, ERROR, messages.D2T_DTYPE.render(
            key=key, dtype=dtype),
            {"key": key, "dtype": dtype, "expected": list(INT_DTYPES)})]
    if len(ck.shapes[key]) != 1 or key not in ck.d2t:
        return []  # reported as shape.mismatch; values are not a map
    return check_vocab_map(ck.d2t[key], draft_vocab, target.vocab, ck.t2d_hot, loader.runtime)


def d2t_key(ck: CheckpointView, cfg: Mapping[str, Any], loader: Loader) -> str | None:
    """The key whose values the loader keeps as its vocabulary map (the last it sees)."""
    return _last_d2t_key(ck, expected_params(cfg, loader), loader, cfg)


def _last_d2t_key(ck: CheckpointView, params: Mapping[str, Any], loader: Loader,
                  cfg: Mapping[str, Any]) -> str | None:
    keys = [k for k in ck.shapes if route_key(k, params, loader, cfg).kind == RouteKind.D2T]
    return keys[-1] if keys else None
