"""What a runtime's real EAGLE-3 draft model, once built from a config, decided from it
beyond its parameters: the "switches" of `spectrace.doctor.judge.config_fields` (residual,
norm_output, aux capture, head_dim, activation, rotary embedding, sliding window, norm eps,
tied lm_head, ...), read off the built modules by attribute, the same names for SGLang's
and vLLM's classes. A switch the class does not have reads None.

Used by harness/sglang_draft_probe.py and harness/vllm_draft_probe.py, in the runtime's
own environment; nothing here imports a runtime.
"""
from __future__ import annotations

from typing import Any


def _first_layer(inner):
    layers = getattr(inner, "layers", None)
    if layers is not None and len(layers):
        return list(layers)
    return [inner.midlayer] if hasattr(inner, "midlayer") else []


def _rope(rot) -> str | None:
    if rot is None:
        return None
    parts = [type(rot).__name__]
    for attr in ("base", "max_position_embeddings", "rotary_dim", "scaling_factor",
                 "original_max_position", "low_freq_factor", "high_freq_factor"):
        v = getattr(rot, attr, None)
        if isinstance(v, (int, float)) and not isinstance(v, bool):
            parts.append(f"{attr}={float(v):g}")
    return " ".join(parts)


def _window(layer) -> Any:
    attn = getattr(getattr(layer, "self_attn", None), "attn", None)
    for attr in ("sliding_window", "sliding_window_size"):
        v = getattr(attn, attr, None)
        if v is not None and v != -1:
            return v
    return None


def _residual(layer) -> str | None:
    fn = getattr(layer, "_residual_norm", None)
    name = getattr(fn, "__name__", None)
    return {"_norm_before_residual": "normed", "_norm_after_residual": "raw"}.get(name)


def switches(model) -> dict[str, Any]:
    inner = model.model
    layers = _first_layer(inner)
    l0 = layers[0] if layers else None
    attn = getattr(l0, "self_attn", None)
    mlp = getattr(l0, "mlp", None)
    norm = getattr(inner, "norm", None)
    logits = getattr(model, "logits_processor", None)
    return {
        "residual": _residual(l0),
        "norm_output": getattr(inner, "norm_output", None),
        "use_aux": getattr(inner, "use_aux_hidden_state", None),
        "num_aux": getattr(inner, "num_aux_hidden_states", None),
        "head_dim": getattr(attn, "head_dim", None),
        "act": type(getattr(mlp, "act_fn", None)).__name__ if mlp is not None else None,
        "rope": _rope(getattr(attn, "rotary_emb", None)),
        "window": sorted({w for w in map(_window, layers) if w is not None}),
        "eps": getattr(norm, "variance_epsilon", None),
        "lm_head_tied": getattr(model, "lm_head", None) is getattr(inner, "embed_tokens", 0),
        "lm_head_from_target": getattr(model, "load_lm_head_from_target", None),
        "logit_scale": getattr(logits, "scale", getattr(logits, "logit_scale", None)),
        "mask_hidden": "mask_hidden" in dict(model.named_buffers()) or None,
    }
