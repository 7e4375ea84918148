"""A runtime's `load_weights` replayed on a checkpoint's key names, as its loader row says
(`loaders`): where each key is routed (`route_key`), which parameters a load fills and
which keys it drops (`simulate_load`), and the keys that fill a parameter. Pure."""
from __future__ import annotations

import re
from typing import Any, Iterable, Mapping, NamedTuple

from ...runtimes import SGLANG, VLLM, Word
from ...rules.weights import missing_parameters
from .loaders import DraftClass, Loader, MASK_HIDDEN_SKIPPED
from .draft_params import norm_before_fc, uses_fc


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
