"""Static checks of an EAGLE-3 draft (config + tensor names and shapes) against the
loader of a given SGLang version and against the target's config.

Pure functions over dicts, so `spectrace doctor` (which reads safetensors headers) and the
run-time instrumentation can share them. The loader model mirrors
`LlamaForCausalLMEagle3` in `sglang/srt/models/llama_eagle3.py`; every row of `_LAYOUTS`
was checked against the released wheels named in its comment.
"""
from __future__ import annotations

import re
from dataclasses import asdict, dataclass
from typing import Any, Iterable, Mapping, NamedTuple

from .. import signals
from ..findings import ERROR, WARNING, Finding
from .weights import missing_parameters, missing_params_finding, unused_keys_finding

FC_WIDTH_MISMATCH = signals.FC_CONFIG_WIDTH_MISMATCH
AUX_LAYER_IDS_OUT_OF_RANGE = signals.AUX_LAYER_IDS_OUT_OF_RANGE
SHAPE_MISMATCH = signals.SHAPE_MISMATCH
LAYERS_UNSUPPORTED = signals.CONFIG_LAYERS_UNSUPPORTED

NEWEST_KNOWN = "0.5.23"
# Versions whose llama_eagle3.py (and model_runner aux-capture code) were read.
READ_VERSIONS = frozenset({"0.5.5", "0.5.6", "0.5.7", "0.5.8", "0.5.9", "0.5.10", "0.5.11",
                           "0.5.12", "0.5.16", "0.5.17", "0.5.18", "0.5.19", "0.5.20",
                           "0.5.23"})
MAX_NAMES = 50


@dataclass(frozen=True)
class Layout:
    """What one SGLang version's EAGLE-3 loader builds and reads."""

    sglang_version: str
    name: str                    # decoder attribute: "midlayer" or "layers"
    aux_count_from_config: bool  # fc width uses num_aux_hidden_states / len(ids) / 3 (else 3)
    fc_norm: bool                # per-aux RMSNorm before fc (`fc_norm` / `use_aux_norm`)
    input_norm: bool             # RMSNorm over the concatenation (`norm_before_fc`)
    legacy_names: bool           # load_weights maps midlayer -> layers.0, aux_norm_* -> fc_norm.*
    single_layer_only: bool      # raises unless num_hidden_layers == 1
    honors_use_aux_flag: bool    # target capture gated by eagle_config.use_aux_hidden_state
    assumed: str | None = None   # set when this exact version's source was not read

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


# (first, last, fields): read from 0.5.5-0.5.7 | 0.5.8-0.5.11 | 0.5.12, 0.5.16 |
# 0.5.17-0.5.20, 0.5.23. 0.5.13-0.5.15 and 0.5.21-0.5.22 lie between rows read the same.
_MID = dict(name="midlayer", aux_count_from_config=False, fc_norm=False, input_norm=False,
            legacy_names=False, single_layer_only=True)
_LAY = dict(name="layers", aux_count_from_config=True, fc_norm=True, legacy_names=True,
            single_layer_only=False, honors_use_aux_flag=True)
_LAYOUTS = (
    ((0, 5, 5), (0, 5, 7), {**_MID, "honors_use_aux_flag": False}),
    ((0, 5, 8), (0, 5, 11), {**_MID, "honors_use_aux_flag": True}),
    ((0, 5, 12), (0, 5, 16), {**_LAY, "input_norm": False}),
    ((0, 5, 17), (0, 5, 23), {**_LAY, "input_norm": True}),
)


def parse_version(version: str) -> tuple[int, int, int]:
    """`0.5.12`, `v0.5.12.post1`, `0.5.0rc2` -> (0, 5, 12) ...; ValueError otherwise."""
    m = re.match(r"^\s*v?(\d+)\.(\d+)(?:\.(\d+))?", str(version))
    if not m:
        raise ValueError(f"SGLang version {version!r} is not a version like 0.5.8")
    return int(m[1]), int(m[2]), int(m[3] or 0)


def resolve_layout(sglang_version: str | Layout) -> Layout:
    """The loader layout of `sglang_version`; unknown versions get the nearest row, and
    `Layout.assumed` says so."""
    if isinstance(sglang_version, Layout):
        return sglang_version
    v = parse_version(sglang_version)
    key = ".".join(map(str, v))
    for first, last, fields in _LAYOUTS:
        if first <= v <= last:
            assumed = None if key in READ_VERSIONS else (
                f"SGLang {sglang_version} was not read; assumed the {fields['name']} layout "
                f"of {_fmt(first)}-{_fmt(last)}")
            return Layout(sglang_version=str(sglang_version), assumed=assumed, **fields)
    first, last, fields = _LAYOUTS[0] if v < _LAYOUTS[0][0] else _LAYOUTS[-1]
    edge = "oldest" if v < first else "newest"
    return Layout(sglang_version=str(sglang_version), **fields, assumed=(
        f"SGLang {sglang_version} is outside the versions read ({_fmt(_LAYOUTS[0][0])}-"
        f"{NEWEST_KNOWN}); assumed the {edge} known layout ({fields['name']}, as in "
        f"{_fmt(first)}-{_fmt(last)})"))


def _fmt(v: tuple[int, ...]) -> str:
    return ".".join(map(str, v))


# -- the draft's parameters --------------------------------------------------------------
@dataclass(frozen=True)
class _Geometry:
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


def _eagle_config(cfg: Mapping[str, Any]) -> Mapping[str, Any]:
    ec = cfg.get("eagle_config")
    return ec if isinstance(ec, Mapping) else {}


def aux_layer_ids(cfg: Mapping[str, Any]) -> list[int] | None:
    ids = _eagle_config(cfg).get("eagle_aux_hidden_state_layer_ids")
    return list(ids) if ids else None


def num_aux(cfg: Mapping[str, Any], layout: Layout) -> int:
    """How many aux layers SGLang builds fc for: always 3 before 0.5.12; then
    `num_aux_hidden_states`, else len(eagle_aux_hidden_state_layer_ids), else 3."""
    if not layout.aux_count_from_config:
        return 3
    n = cfg.get("num_aux_hidden_states")
    if n is None:
        ids = aux_layer_ids(cfg)
        n = len(ids) if ids else 3
    return int(n)


def _geometry(cfg: Mapping[str, Any], layout: Layout) -> _Geometry:
    h = int(cfg["hidden_size"])
    heads = int(cfg["num_attention_heads"])
    inter_key = "intermediate_size_mlp" if cfg.get("model_type") == "llama4_text" else \
        "intermediate_size"
    vocab = int(cfg["vocab_size"])
    return _Geometry(
        hidden=h, hidden_in=int(cfg.get("target_hidden_size") or h), num_aux=num_aux(cfg, layout),
        heads=heads, kv_heads=int(cfg.get("num_key_value_heads") or heads),
        head_dim=int(cfg.get("head_dim") or h // heads), inter=int(cfg[inter_key]),
        vocab=vocab, lm_rows=int(cfg.get("draft_vocab_size") or vocab),
        layers=int(cfg.get("num_hidden_layers") or 1))


def expected_draft_params(draft_config: Mapping[str, Any],
                          sglang_version: str | Layout) -> dict[str, tuple[int, ...]]:
    """Parameter name -> shape of `LlamaForCausalLMEagle3` as that SGLang version builds it
    from `draft_config` (names as in `named_parameters()`, before tensor parallelism)."""
    layout = resolve_layout(sglang_version)
    g = _geometry(draft_config, layout)
    ec = _eagle_config(draft_config)
    p: dict[str, tuple[int, ...]] = {"model.embed_tokens.weight": (g.vocab, g.hidden)}
    fc_in = g.hidden_in * g.num_aux
    p["model.fc.weight"] = (g.hidden, fc_in)
    if draft_config.get("bias"):
        p["model.fc.bias"] = (g.hidden,)
    if layout.input_norm and ec.get("norm_before_fc", draft_config.get("norm_before_fc", False)):
        p["model.input_norm.weight"] = (fc_in,)
    if layout.fc_norm and (draft_config.get("fc_norm") or draft_config.get("use_aux_norm")):
        for j in range(g.num_aux):
            p[f"model.fc_norm.{j}.weight"] = (g.hidden_in,)
    attn_bias = bool(draft_config.get("attention_bias") or draft_config.get("bias"))
    if layout.name == "midlayer":
        prefixes = [("model.midlayer.", 2 * g.hidden)]
    else:  # from 0.5.12 only layer 0 concatenates embeddings with the hidden state
        prefixes = [(f"model.layers.{i}.", 2 * g.hidden if i == 0 else g.hidden)
                    for i in range(g.layers)]
    for pre, qkv_in in prefixes:
        p[pre + "self_attn.qkv_proj.weight"] = ((g.heads + 2 * g.kv_heads) * g.head_dim, qkv_in)
        p[pre + "self_attn.o_proj.weight"] = (g.hidden, g.heads * g.head_dim)
        if attn_bias:
            p[pre + "self_attn.o_proj.bias"] = (g.hidden,)
        p[pre + "mlp.gate_up_proj.weight"] = (2 * g.inter, g.hidden)
        p[pre + "mlp.down_proj.weight"] = (g.hidden, g.inter)
        for norm in ("input_layernorm", "post_attention_layernorm", "hidden_norm"):
            p[pre + norm + ".weight"] = (g.hidden,)
    p["model.norm.weight"] = (g.hidden,)
    if not draft_config.get("tie_word_embeddings"):  # tied: lm_head *is* embed_tokens
        p["lm_head.weight"] = (g.lm_rows, g.hidden)
    return p


def shared_from_target(draft_config: Mapping[str, Any]) -> set[str]:
    """Parameters SGLang fills from the target, so a checkpoint need not carry them."""
    shared = {"model.embed_tokens.weight"}
    if draft_config.get("draft_vocab_size") is None:  # load_lm_head_from_target
        shared.add("lm_head.weight")
    return shared


def _shard_shape(param: str, shard: Any, shape: tuple[int, ...], g: _Geometry
                 ) -> tuple[int, ...]:
    if shard == "q":
        return (g.heads * g.head_dim, shape[1])
    if shard in ("k", "v"):
        return (g.kv_heads * g.head_dim, shape[1])
    if shard in (0, 1):
        return (g.inter, shape[1])
    return shape


# -- simulating load_weights -------------------------------------------------------------
_STACKED = ((".qkv_proj", ".q_proj", "q"), (".qkv_proj", ".k_proj", "k"),
            (".qkv_proj", ".v_proj", "v"), (".gate_up_proj", ".gate_proj", 0),
            (".gate_up_proj", ".up_proj", 1))
_LEGACY = (("midlayer", "layers.0"), ("aux_norm_low", "fc_norm.0"),
           ("aux_norm_mid", "fc_norm.1"), ("aux_norm_high", "fc_norm.2"))


class Route(NamedTuple):
    kind: str                 # "param", "d2t", "t2d" or "dropped"
    param: str | None = None
    shard: Any = None


def route_key(key: str, params: Mapping[str, Any], layout: Layout) -> Route:
    """Where `load_weights` puts checkpoint key `key`, step for step as SGLang does."""
    name = key
    if layout.legacy_names:
        for old, new in _LEGACY:
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


def simulate_load(keys: Iterable[str], params: Mapping[str, Any], sglang_version: str | Layout
                  ) -> tuple[list[str], list[str]]:
    """(keys the loader drops, parameters no key fills). A stacked parameter missing only
    some parts is listed as e.g. `model.midlayer.self_attn.qkv_proj.weight[k_proj]`."""
    layout = resolve_layout(sglang_version)
    unused, loaded = [], {}
    for key in keys:
        r = route_key(key, params, layout)
        if r.kind == "dropped":
            unused.append(key)
        elif r.kind == "param":
            loaded.setdefault(r.param, set()).add(r.shard)
    return unused, missing_parameters(params, loaded)


def checkpoint_keys(param: str) -> list[str]:
    """The checkpoint keys a SpecForge-style draft uses for `param` (for fix-it hints):
    `model.midlayer.self_attn.qkv_proj.weight` -> `midlayer.self_attn.{q,k,v}_proj.weight`."""
    m = re.match(r"^(.*)\[(\w+)\]$", param)
    name, part = (m[1], m[2]) if m else (param, None)
    name = name.removeprefix("model.")
    for stacked, parts in ((".qkv_proj", ("q_proj", "k_proj", "v_proj")),
                           (".gate_up_proj", ("gate_proj", "up_proj"))):
        if stacked in name:
            return [name.replace(stacked, "." + p) for p in parts if part in (None, p)]
    return [name]


# -- the checks ---------------------------------------------------------------------------
def check_draft(draft_config: Mapping[str, Any], tensors: Mapping[str, tuple[int, ...]],
                target_config: Mapping[str, Any], sglang_version: str | Layout) -> list[Finding]:
    """Weights, shape, fc and aux findings for a draft whose checkpoint holds `tensors`
    (key -> shape), paired with a target config (`hidden_size`, `num_hidden_layers`,
    `vocab_size`). Vocabulary-map values are checked by `detectors.vocab`."""
    layout = resolve_layout(sglang_version)
    params = expected_draft_params(draft_config, layout)
    findings = check_weights(draft_config, tensors, params, layout)
    findings += check_shapes(draft_config, tensors, params, target_config, layout)
    findings += check_fc_and_aux(draft_config, tensors, params, target_config, layout)
    if layout.single_layer_only and int(draft_config.get("num_hidden_layers") or 1) != 1:
        n = draft_config.get("num_hidden_layers")
        findings.append(Finding(LAYERS_UNSUPPORTED, ERROR, (
            f"the draft has num_hidden_layers = {n}, but SGLang {layout.sglang_version} builds "
            f"a single `midlayer` and raises 'EAGLE3 currently only supports 1 layer' at load. "
            f"Fix: deploy on SGLang >= 0.5.12 (multi-layer drafts, `layers.N.*` keys) or train "
            f"a one-layer draft."), {"num_hidden_layers": n,
                                     "sglang_version": layout.sglang_version}))
    return findings


def check_weights(draft_config: Mapping[str, Any], tensors: Mapping[str, Any],
                  params: Mapping[str, Any], layout: Layout) -> list[Finding]:
    unused, missing = simulate_load(tensors, params, layout)
    shared = shared_from_target(draft_config)
    missing = [m for m in missing if m.split("[")[0] not in shared]
    v = layout.sglang_version
    expected = [k for m in missing for k in checkpoint_keys(m)]
    facts = {"sglang_version": v, "layout": layout.name}
    out = []
    if unused:
        hint = ("Rename them to the names this version reads (details.expected_keys), or "
                "remove them if they are not part of the draft.")
        if layout.name == "midlayer" and any(k.startswith(("layers.", "model.layers."))
                                             for k in unused):
            hint = (f"SGLang {v} names the decoder `midlayer`, so `layers.0.*` keys match "
                    f"nothing. Rename `layers.0.` to `midlayer.` (SGLang >= 0.5.12 reads both "
                    f"names) or deploy on SGLang >= 0.5.12.")
        out.append(unused_keys_finding(unused, f"SGLang {v} would drop", bool(missing), hint,
                                       details={**facts, "expected_keys": expected[:MAX_NAMES]}))
    if missing:
        out.append(missing_params_finding(missing, f"SGLang {v}", expected, details=facts))
    return out


def check_shapes(draft_config: Mapping[str, Any], tensors: Mapping[str, tuple[int, ...]],
                 params: Mapping[str, tuple[int, ...]], target_config: Mapping[str, Any],
                 layout: Layout) -> list[Finding]:
    """Each tensor's shape against the parameter (part) it loads into. fc's input width is
    left to `check_fc_and_aux`, which can say why it is wrong."""
    g = _geometry(draft_config, layout)
    out = []
    for key, shape in tensors.items():
        shape = tuple(shape)
        r = route_key(key, params, layout)
        if r.kind == "d2t":
            expected = (g.lm_rows,)
            why = "draft_vocab_size" if draft_config.get("draft_vocab_size") else "vocab_size"
        elif r.kind == "param":
            expected = _shard_shape(r.param, r.shard, params[r.param], g)
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
            out.append(Finding(SHAPE_MISMATCH, ERROR, (
                f"tensor `{key}` has shape {list(shape)} but the draft config implies "
                f"{list(expected)} ({why}). "
                + ("SGLang indexes this map with every draft id, so a short map fails on the "
                   "GPU and a long one hides which ids the lm_head really has. "
                   if r.kind == "d2t" else
                   "SGLang's weight loader rejects it at load time, or the draft computes with "
                   "a layer of the wrong size. ")
                + "Fix: make config.json describe the trained model (or re-export the tensor "
                  "to match)."),
                {"key": key, "shape": list(shape), "expected": list(expected),
                 "param": r.param or r.kind}))
    tv, dv = target_config.get("vocab_size"), draft_config.get("vocab_size")
    if tv is not None and dv is not None and int(tv) != int(dv):
        out.append(Finding(SHAPE_MISMATCH, WARNING, (
            f"the draft config says vocab_size = {dv} but the target's is {tv}. SGLang shares "
            f"the target's embeddings with the draft, so the draft's view of the vocabulary "
            f"disagrees with the tokens it is fed. Fix: set the draft's vocab_size to {tv}."),
            {"key": "config.vocab_size", "shape": [int(dv)], "expected": [int(tv)],
             "param": "model.embed_tokens.weight"}))
    return out


_SHAPE_WHY = {
    "lm_head": "draft_vocab_size x hidden_size", "embed_tokens": "vocab_size x hidden_size",
    "qkv_proj": "heads x head_dim x (2 x hidden_size for layer 0)",
    "o_proj": "hidden_size x heads x head_dim",
    "gate_up_proj": "intermediate_size x hidden_size",
    "down_proj": "hidden_size x intermediate_size",
    "norm": "hidden_size", "hidden_norm": "hidden_size", "input_layernorm": "hidden_size",
    "post_attention_layernorm": "hidden_size", "input_norm": "num_aux x target hidden",
}


def check_fc_and_aux(draft_config: Mapping[str, Any], tensors: Mapping[str, tuple[int, ...]],
                     params: Mapping[str, Any], target_config: Mapping[str, Any],
                     layout: Layout) -> list[Finding]:
    """fc's input width against (aux layers the target sends) x (target hidden size), and
    the aux layer ids against the target. One cause gives one finding: a width that is
    not a multiple of the target hidden size is `fc.width_mismatch`; a multiple that
    disagrees with the layer-id list is `aux.count_mismatch`; one that agrees with the
    list but not with what this SGLang builds is `fc.width_mismatch`."""
    out: list[Finding] = []
    v = layout.sglang_version
    g = _geometry(draft_config, layout)
    ht = int(target_config["hidden_size"])
    n_target = int(target_config["num_hidden_layers"])
    ec = _eagle_config(draft_config)
    ids = aux_layer_ids(draft_config)
    flag = ec.get("use_aux_hidden_state", True)
    capture_on = bool(flag) or not layout.honors_use_aux_flag
    fc_key = next((k for k in tensors if route_key(k, params, layout).param == "model.fc.weight"),
                  None)
    fc_shape = tuple(tensors[fc_key]) if fc_key else None
    w = fc_shape[1] if fc_shape and len(fc_shape) == 2 else None
    details = {"fc_in": w, "target_hidden_size": ht, "draft_hidden_in": g.hidden_in,
               "sglang_num_aux": g.num_aux, "aux_layer_ids": ids, "sglang_version": v}
    k = None
    if g.hidden_in != ht:
        src = "target_hidden_size" if draft_config.get("target_hidden_size") else "hidden_size"
        out.append(Finding(FC_WIDTH_MISMATCH, ERROR, (
            f"the draft config's {src} = {g.hidden_in} but the target's hidden_size is {ht}: "
            f"SGLang builds fc for {g.num_aux} x {g.hidden_in} = {g.hidden_in * g.num_aux} "
            f"inputs while the target sends {g.num_aux} x {ht}, so loading or the first "
            f"target-fed draft pass fails (or fc is skipped when the widths happen to match the "
            f"draft's hidden size). Fix: set target_hidden_size = {ht} in the draft's "
            f"config.json, or pair the draft with the target it was trained on."), details))
    elif w is not None and w % ht:
        out.append(Finding(FC_WIDTH_MISMATCH, ERROR, (
            f"fc takes {w} inputs, which is not a whole number of target layers of width {ht}: "
            f"the draft was trained for another target (or fc was exported wrongly), and "
            f"SGLang fails to load it or to run the first target-fed draft pass. Fix: use the "
            f"target this draft was trained on, or retrain fc for (aux layers) x {ht}."),
            details))
    elif w is not None:
        k = w // ht
        sent = len(ids) if ids else 3
        if capture_on and k != sent:
            what = (f"eagle_config.eagle_aux_hidden_state_layer_ids lists {len(ids)} layers "
                    f"{ids}" if ids else "eagle_config has no eagle_aux_hidden_state_layer_ids, "
                    "so the target captures its default 3 layers")
            out.append(Finding(signals.AUX_COUNT_MISMATCH, ERROR, (
                f"{what}, but fc takes {k} layers ({w} = {k} x {ht}). The target sends "
                f"{sent} x {ht} wide hidden states, so the first target-fed draft pass fails, "
                f"or worse, runs on features the draft was not trained on. Fix: list exactly "
                f"the {k} layer ids the draft was trained with."),
                {**details, "fc_layers": k, "target_sends": sent}))
        elif k != g.num_aux:
            why = ("always builds fc for 3 aux layers" if not layout.aux_count_from_config
                   else f"builds fc for {g.num_aux} aux layers (num_aux_hidden_states, else the "
                        f"length of eagle_aux_hidden_state_layer_ids, else 3)")
            out.append(Finding(FC_WIDTH_MISMATCH, ERROR, (
                f"fc takes {k} x {ht} = {w} inputs, but SGLang {v} {why}, i.e. "
                f"{g.num_aux * ht}: loading the checkpoint fails. Fix: "
                + ("deploy on SGLang >= 0.5.12, which sizes fc from the config."
                   if not layout.aux_count_from_config else
                   f"set num_aux_hidden_states = {k} (or list {k} layer ids) in config.json.")),
                {**details, "fc_layers": k}))
    if ids is not None:
        bad = [i for i in ids if not isinstance(i, int) or not -1 <= i <= n_target - 2]
        if bad:
            out.append(Finding(AUX_LAYER_IDS_OUT_OF_RANGE, ERROR, (
                f"eagle_config.eagle_aux_hidden_state_layer_ids = {ids}, but the target has "
                f"{n_target} layers: SGLang captures the input of layer id + 1, so valid ids "
                f"are -1..{n_target - 2}, and {bad} are never captured. The target sends fewer "
                f"aux layers than fc expects: the draft pass fails, or fc is silently skipped "
                f"when the width equals the draft's hidden size. Fix: use the ids the draft was "
                f"trained with, each within -1..{n_target - 2}, or pair the draft with the "
                f"deeper target it was trained for."),
                {"aux_layer_ids": ids, "out_of_range": bad, "target_num_layers": n_target,
                 "valid_range": [-1, n_target - 2]}))
    fc_layers = k if k is not None else g.num_aux
    if not flag and fc_layers > 1:
        honored = layout.honors_use_aux_flag
        out.append(Finding(signals.AUX_CAPTURE_DISABLED, ERROR if honored else WARNING, (
            f"eagle_config.use_aux_hidden_state is false, but fc expects {fc_layers} "
            f"concatenated target layers. "
            + ("SGLang then sends only the target's last hidden state; when its width equals "
               "the draft's hidden size the draft silently skips fc, sees features it was not "
               "trained on, and acceptance falls to about 1.0 with no error anywhere. "
               if honored else
               f"SGLang {v} ignores this flag (it is honoured from 0.5.8), but newer versions "
               f"would disable aux capture and the draft would silently skip fc. ")
            + "Fix: set eagle_config.use_aux_hidden_state to true (or remove it)."),
            {"use_aux_hidden_state": flag, "fc_layers": fc_layers, "honored_by_version": honored,
             "sglang_version": v}))
    return out
