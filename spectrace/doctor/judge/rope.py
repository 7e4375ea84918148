"""The RoPE a config asks for, in one normalised form whichever way the file spells it, so
that two configs are compared on what the runtime builds and not on how they are written.

A config spells RoPE in one of two ways: transformers 5's `rope_parameters` (the scaling
and `rope_theta` in one dict; `partial_rotary_factor` may be moved in too), or the older
`rope_scaling` dict beside a top-level `rope_theta`; within either, the scaling's type is
`rope_type` or its legacy alias `type`. transformers 5 (modeling_rope_utils.py
`convert_rope_params_to_dict` / `standardize_rope_params`) folds all of these into one
`rope_parameters`; SGLang and vLLM build the rotary embedding from that (or, on
transformers 4, from `rope_parameters` first, else `rope_theta` / `rope_scaling`).

`differences` names what differs between two normalised forms and `Rope.describe` prints
every name it is given, so a difference is never reported between values printed equal.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

# keys that say nothing about the scaling: the base (kept apart), the rotated share (not
# RoPE scaling; transformers 5 moves it into rope_parameters), the type's legacy alias
_NOT_SCALING = ("rope_theta", "partial_rotary_factor", "type")
_ALWAYS_SHOWN = ("factor", "original_max_position_embeddings")


@dataclass(frozen=True)
class Rope:
    theta: float | None   # None: the config does not say
    scaling: dict | None  # normalised (`rope_type` set, numbers as floats); None: plain RoPE

    @property
    def kind(self) -> str:
        return str((self.scaling or {}).get("rope_type") or "default")

    def describe(self, also: tuple[str, ...] | list[str] = ()) -> str:
        """In words: the type, factor and original context, and each key of `also` (the
        keys that differ from the other side, so that a difference is always printed)."""
        theta = "rope_theta" in also or self.theta is not None
        tail = (f"rope_theta {_num(self.theta)}" if self.theta is not None
                else "rope_theta unset") if theta else ""
        if self.scaling is None:
            return f"plain RoPE ({tail})" if tail else "plain RoPE"
        s = self.scaling
        keys = [k for k in _ALWAYS_SHOWN if k in s]
        keys += [k for k in also if k not in keys and k not in ("rope_theta", "rope_type")]
        extra = ", ".join(f"{k} {_num(s[k])}" if k in s else f"no {k}" for k in keys)
        return f"{self.kind} rope_scaling ({extra})" + (f", {tail}" if tail else "")


def _num(v: Any) -> str:
    """A value printed exactly (`:g` would print 1000000 and 1000001 alike)."""
    if isinstance(v, float) and v.is_integer() and abs(v) < 1e16:
        return str(int(v))
    return repr(v) if isinstance(v, float) else str(v)


def _normal(v: Any) -> Any:
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else v


def rope_of(cfg: Mapping[str, Any]) -> Rope:
    """The RoPE a runtime builds from a config: `rope_parameters` if it is a dict, else
    `rope_scaling`; the base from that dict's `rope_theta`, else the top-level one."""
    rp, rs = cfg.get("rope_parameters"), cfg.get("rope_scaling")
    src = rp if isinstance(rp, Mapping) else rs if isinstance(rs, Mapping) else {}
    theta = src.get("rope_theta")
    theta = theta if theta is not None else cfg.get("rope_theta")
    kind = src.get("rope_type") or src.get("type") or "default"
    scaling = None
    if kind != "default":
        scaling = {k: _normal(v) for k, v in src.items() if k not in _NOT_SCALING}
        scaling["rope_type"] = kind
    ok = isinstance(theta, (int, float)) and not isinstance(theta, bool)
    return Rope(float(theta) if ok else None, scaling)


def differences(a: Rope, b: Rope) -> list[str]:
    """The names on which two RoPEs differ: `rope_theta` where both configs say it, then
    `rope_type`, or for the same type each scaling key the two do not share with the same
    value."""
    out = []
    if a.theta is not None and b.theta is not None and a.theta != b.theta:
        out.append("rope_theta")
    if a.kind != b.kind:  # printed as the kind: its keys need not be listed
        return out + ["rope_type"]
    sa, sb = a.scaling or {}, b.scaling or {}
    out += [k for k in sorted((set(sa) | set(sb)) - {"rope_type"})
            if sa.get(k, _MISSING) != sb.get(k, _MISSING)]
    return out


_MISSING = object()
