"""What the target's quantization is, read where both runtimes read it, and what it means
for a draft trained on the unquantized target.

Where (SGLang 0.5.23 and vLLM 0.32 `ModelConfig._parse_quant_hf_config`, in
`srt/configs/model_config.py` / `config/model.py`): config.json's `quantization_config`
(of a multimodal wrapper's `text_config` too), else `compression_config` (older
compressed-tensors), else a standalone `hf_quant_config.json` (Model Optimizer's export).
Both serve the target with that quantization unless told otherwise; the draft is
quantized only when asked (`--speculative-draft-model-quantization`, vLLM's
speculative `quantization`).

Pure functions over the parsed JSON; `doctor.check` reads the files.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

from ... import messages, signals
from ...findings import INFO, Finding, FindingSpec


# The findings the doctor raises here, declared once (`doctor.judge.codes` gathers them;
# docs/doctor.md's table of codes is written from them).
SPECS: tuple[FindingSpec, ...] = (
    FindingSpec(signals.TARGET_QUANTIZED, INFO,
                "the target is served quantized: its hidden states and accepted tokens are the "
                "quantized model's"),
)


@dataclass(frozen=True)
class Quantization:
    method: str    # compressed-tensors, fp8, modelopt, awq, gptq, mxfp4, ...
    scheme: str    # what is quantized how, in words ("int4 weights, group 32, ...")
    where: str     # the file and key it was read from
    bits: int | None  # the narrowest weight width found (None: not stated)


def target_quantization(cfg: Mapping[str, Any], hf_quant_config: Mapping[str, Any] | None,
                        config_name: str = "config.json") -> Quantization | None:
    """The target's quantization, or None when it is served unquantized."""
    for where, c in ((config_name, cfg), (f"{config_name} text_config", cfg.get("text_config"))):
        if not isinstance(c, Mapping):
            continue
        for key in ("quantization_config", "compression_config"):
            q = c.get(key)
            if isinstance(q, Mapping) and q:
                return _describe(q, f"{where} `{key}`")
    if isinstance(hf_quant_config, Mapping) and hf_quant_config:
        q = hf_quant_config.get("quantization", hf_quant_config)
        if isinstance(q, Mapping) and q:
            return _describe({"quant_method": "modelopt", **q}, "hf_quant_config.json")
    return None


def _describe(q: Mapping[str, Any], where: str) -> Quantization:
    method = str(q.get("quant_method") or ("modelopt" if "quant_algo" in q else "unknown"))
    if isinstance(q.get("quantization"), Mapping):  # Model Optimizer's nested form
        q = {**q, **q["quantization"]}
    if method == "compressed-tensors" or "config_groups" in q:
        return _compressed_tensors(q, where)
    if method == "modelopt" or "quant_algo" in q:
        algo = str(q.get("quant_algo") or "?")
        parts = [algo]
        if q.get("group_size"):
            parts.append(f"group {q['group_size']}")
        if q.get("kv_cache_quant_algo"):
            parts.append(f"KV cache {q['kv_cache_quant_algo']}")
        excluded = q.get("exclude_modules") or q.get("ignore") or []
        if excluded:
            parts.append(f"{len(excluded)} module patterns left unquantized")
        bits = 4 if "FP4" in algo.upper() or "INT4" in algo.upper() or "W4" in algo.upper() \
            else 8 if "FP8" in algo.upper() or "INT8" in algo.upper() else None
        return Quantization("modelopt", ", ".join(parts), where, bits)
    if method == "fp8":
        block = q.get("weight_block_size")
        scheme = f"fp8 ({q.get('fmt', 'e4m3')}) weights" + (
            f", blocks {block[0]}x{block[1]}" if isinstance(block, list) and len(block) == 2
            else "") + (f", {q['activation_scheme']} activation scales"
                        if q.get("activation_scheme") else "")
        return Quantization("fp8", scheme, where, 8)
    bits = q.get("bits") or q.get("w_bit")
    bits = int(bits) if isinstance(bits, int) else (4 if method == "mxfp4" else None)
    scheme = f"{method}" + (f", {bits}-bit weights" if bits else "") + (
        f", group {q['group_size']}" if q.get("group_size") else "")
    return Quantization(method, scheme, where, bits)


def _compressed_tensors(q: Mapping[str, Any], where: str) -> Quantization:
    parts, widths = [], []
    groups = q.get("config_groups") if isinstance(q.get("config_groups"), Mapping) else {}
    for group in groups.values():
        if not isinstance(group, Mapping):
            continue
        w = group.get("weights") if isinstance(group.get("weights"), Mapping) else {}
        a = group.get("input_activations")
        text = f"{w.get('type', '?')}{w.get('num_bits', '?')} weights"
        if w.get("group_size"):
            text += f" (group {w['group_size']})"
        if isinstance(a, Mapping) and a.get("num_bits"):
            text += f", {a.get('type', '?')}{a['num_bits']} activations"
        targets = group.get("targets")
        if targets:
            text += f" on {', '.join(map(str, targets))[:80]}"
        parts.append(text)
        if isinstance(w.get("num_bits"), int):
            widths.append(w["num_bits"])
    ignore = q.get("ignore") or []
    if ignore:
        parts.append(f"{len(ignore)} modules left unquantized")
    if q.get("format"):
        parts.append(f"format {q['format']}")
    return Quantization("compressed-tensors", "; ".join(parts) or "no config_groups", where,
                        min(widths) if widths else None)


def check_quantized_target(quant: Quantization | None, runtime_label: str) -> list[Finding]:
    if quant is None:
        return []
    effect = messages.QUANT_EFFECT_LOW_BITS if quant.bits is not None and quant.bits <= 4 \
        else messages.QUANT_EFFECT
    return [Finding(signals.TARGET_QUANTIZED, INFO, messages.TARGET_QUANTIZED.render(
        method=quant.method, scheme=quant.scheme, where=quant.where, runtime=runtime_label,
        effect=effect),
        {"method": quant.method, "scheme": quant.scheme, "where": quant.where,
         "weight_bits": quant.bits})]
