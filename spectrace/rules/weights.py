"""Which draft weights a loader dropped or never filled, and what that means.

Shared by the run-time hook (what the runtime's `load_weights` really did) and the doctor
(what it will do), so both count the same way and speak the same words. Pure functions
over names; no runtime imports.

Counting: a stacked parameter (`qkv_proj`, `gate_up_proj`, MLA's fused `q_a` + `kv_a`
projection) is filled part by part, so a checkpoint that lacks only `k_proj` leaves
`...qkv_proj.weight[k_proj]` missing.
Severity of a dropped key: an error when something the draft needs stays empty, when the
key holds a weight of the draft network itself (decoder layer, fc, norms, heads: the
runtime then runs a different network than the one trained), or when the runtime refuses
unknown keys (vLLM raises at load). Leftovers outside the network (`t2d`, optimizer state,
derived buffers such as `rotary_emb.inv_freq`) are warnings.
"""
from __future__ import annotations

import re
from typing import Iterable, Mapping

from .. import messages, names
from ..findings import ERROR, WARNING, Alert, Finding, FindingSpec

DROPPED = Alert(
    "SpectraceDroppedWeights", "Draft checkpoint weights were dropped on {{ $labels.instance }}",
    "{{ $value }} checkpoint keys matched no parameter or parameters were never loaded "
    "(e.g. `layers.0.*` instead of `midlayer.*`). Run `spectrace doctor` on the draft.",
    counts=(names.METRIC_UNUSED_KEYS, names.METRIC_UNLOADED_PARAMS))
SPECS = (
    FindingSpec(names.WEIGHTS_UNUSED_KEYS, ERROR,
                "checkpoint keys the draft's loader dropped (a warning where they are "
                "harmless, such as a tied head)",
                floor="one load of the draft", alert=DROPPED,
                message=messages.UNUSED_KEYS),
    FindingSpec(names.WEIGHTS_MISSING_PARAMS, ERROR,
                "parameters of the draft that no checkpoint key filled",
                floor="one load of the draft", alert=DROPPED,
                message=messages.MISSING_PARAMS),
)

MAX_NAMES = 50

# stacked parameter suffix -> (shard id its loader is called with, checkpoint projection)
STACKED_SHARDS = {
    ".qkv_proj.weight": (("q", "q_proj"), ("k", "k_proj"), ("v", "v_proj")),
    ".gate_up_proj.weight": ((0, "gate_proj"), (1, "up_proj")),
    ".fused_qkv_a_proj_with_mqa.weight": (("q_a", "q_a_proj"), ("kv_a", "kv_a_proj_with_mqa")),
    ".fused_qkv_a_proj.weight": ((0, "q_a_proj"), (1, "kv_a_proj_with_mqa")),
}

_NETWORK = re.compile(r"^(model\.)?(midlayer\.|layers\.\d+\.|fc\.|fc_norm\.|input_norm\.|"
                      r"norm\.|lm_head\.|embed_tokens\.|hidden_norm\.|aux_norm_)")
_DERIVED_BUFFERS = ("rotary_emb.inv_freq", "rotary_emb.cos_cached", "rotary_emb.sin_cached",
                    "rotary_emb.cos_sin_cache")


def missing_parameters(params: Iterable[str], loaded: Mapping[str, set]) -> list[str]:
    """Parameters (names in `params`) that no key filled, and the unfilled parts of
    stacked ones as `name[k_proj]`. `loaded` maps a parameter to the shard ids its loader
    was called with (None: the whole parameter at once)."""
    missing = []
    for name in params:
        got = loaded.get(name)
        if not got:
            missing.append(name)
            continue
        if None in got:
            continue
        shards = next((s for suffix, s in STACKED_SHARDS.items() if name.endswith(suffix)), ())
        missing += [f"{name}[{key}]" for shard, key in shards if shard not in got]
    return missing


def idle_parameters(params: Iterable[str], upper_norm: str | None) -> set[str]:
    """Parameters a draft class allocates but never computes with, so that no weight for
    them is no loss: the pre-attention norm of layers >= 1 other than `upper_norm` (SGLang's
    Llama draft normalises there with `hidden_norm`, vLLM's with `input_layernorm`)."""
    other = {"hidden_norm": "input_layernorm", "input_layernorm": "hidden_norm"}.get(
        upper_norm or "")
    if other is None:
        return set()
    return {p for p in params if re.match(rf"^model\.layers\.([1-9]\d*)\.{other}\.weight$", p)}


def is_network_weight(key: str) -> bool:
    """The checkpoint key holds a weight of the draft network (not a leftover)."""
    return bool(_NETWORK.match(key)) and not key.endswith(_DERIVED_BUFFERS)


def unused_keys_finding(unused: list[str], subject: str, missing_any: bool,
                        hint: str | None = None, seen: int | None = None,
                        details: dict | None = None, drop: str = "silent",
                        cause: str | None = None) -> Finding:
    """`subject` says who drops them and when, e.g. "SGLang 0.5.23's load_weights dropped"
    (observed) or "SGLang 0.5.23 would drop" (predicted); `drop` is how that loader treats
    unknown keys (a key of `messages.UNKNOWN_KEY_WORDS`); `cause`: a known cause and its
    consequence (`tied_head_cause`), which comes with its own fix."""
    network = [k for k in unused if is_network_weight(k)]
    if cause is not None:
        consequence, hint = cause, messages.UNUSED_TIED_FIX
    elif drop == "raises":
        consequence = messages.UNUSED_RAISES
    elif missing_any:
        consequence = messages.UNUSED_LEAVE_EMPTY
    elif network:
        consequence = messages.UNUSED_NETWORK.format(count=len(network), names=_names(network))
    else:
        consequence = messages.UNUSED_HARMLESS
    error = missing_any or bool(network) or drop == "raises"
    message = messages.UNUSED_KEYS.render(
        subject=subject, count=len(unused), of=f" of {seen}" if seen is not None else "",
        dropped=messages.UNKNOWN_KEY_WORDS[drop], names=_names(unused), consequence=consequence,
        advice=hint or messages.UNUSED_ADVICE)
    return Finding(names.WEIGHTS_UNUSED_KEYS, ERROR if error else WARNING, message,
                   {"count": len(unused), "keys": sorted(unused)[:MAX_NAMES],
                    "network_keys": sorted(network)[:MAX_NAMES], **(details or {})})


def tied_head_cause(tied: bool, unused: Iterable[str], subject: str) -> str | None:
    """What dropping a trained `lm_head` means when the config ties it to the embedding
    (`tie_word_embeddings: true`, which SGLang's draft classes honour); None when that is not
    the cause. `unused_keys_finding(..., cause=...)` says it with its fix."""
    if tied and any(k.endswith("lm_head.weight") for k in unused):
        return messages.UNUSED_TIED.format(loader=subject)
    return None


def is_norm_param(name: str) -> bool:
    """An RMSNorm weight: both runtimes start it at ones, not uninitialised."""
    return bool(re.search(r"(^|\.)(\w*norm(_\d+)?|fc_norm\.\d+)\.weight$", name))


def missing_params_finding(missing: list[str], subject: str, expected_keys: list[str] | None = None,
                           details: dict | None = None,
                           renamed: dict[str, str] | None = None) -> Finding:
    """`subject` names the runtime and version, e.g. "SGLang 0.5.23"; `renamed` maps
    checkpoint keys that hold the missing weights under another name to that name."""
    expected = _names(expected_keys or [])
    if missing and all(is_norm_param(m) for m in missing):
        shown = ", ".join(f"`{a}`" for a in list(renamed or {})[:3])
        message = messages.MISSING_NORMS
        extra = {"renamed": messages.MISSING_NORMS_RENAMED.format(shown=shown, subject=subject)
                 if renamed else ""}
        expected = expected or messages.MISSING_NORMS_EXPECTED
    else:
        message = messages.MISSING_PARAMS if expected_keys else messages.MISSING_PARAMS_UNNAMED
        extra = {}
    return Finding(names.WEIGHTS_MISSING_PARAMS, ERROR, message.render(
        count=len(missing), subject=subject, names=_names(missing), expected=expected,
        **extra),
        {"count": len(missing), "params": missing[:MAX_NAMES],
         **({"expected_keys": expected_keys[:MAX_NAMES]} if expected_keys else {}),
         **(details or {})})


def _names(items: list[str], n: int = 3) -> str:
    shown = ", ".join(f"`{x}`" for x in items[:n])
    return shown + (f" and {len(items) - n} more" if len(items) > n else "")
