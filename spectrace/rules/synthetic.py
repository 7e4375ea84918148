"""Acceptance the runtime fakes: both runtimes have a benchmarking switch that accepts
draft tokens by a synthetic rule instead of verifying them against the target. Left on
by mistake, every acceptance figure, spectrace's included, is fiction.

- SGLang: `SGLANG_SIMULATE_ACC_LEN` (> 0 switches it on) and `SGLANG_SIMULATE_ACC_METHOD`,
  read once into `sglang.srt.speculative.spec_utils.SIMULATE_ACC_LEN` / `_METHOD` when that
  module is imported (0.5.5 - 0.5.23); verify reads those module constants.
- vLLM: `rejection_sample_method: "synthetic"` in the speculative config, with
  `synthetic_acceptance_rates` (or `synthetic_acceptance_length`, which the config turns
  into rates); the rejection sampler builds its synthetic rates from them.

The adapters read what the runtime's own process uses and hand the values here. Pure
functions: no runtime imports.
"""
from __future__ import annotations

from .. import messages, names
from ..findings import ERROR, Alert, Finding, FindingSpec
from ..runtimes import SGLANG, VLLM

SPECS = (FindingSpec(
    names.ACCEPTANCE_SYNTHETIC, ERROR,
    "the runtime accepts draft tokens by a synthetic rule (a benchmarking switch): every "
    "acceptance figure is fiction",
    floor="the setting, read once at start-up", message=messages.SYNTHETIC_ACCEPTANCE,
    alert=Alert(
        "SpectraceSyntheticAcceptance",
        "Acceptance figures are synthetic on {{ $labels.instance }}",
        "The runtime accepts draft tokens by a synthetic rule (SGLang: "
        "SGLANG_SIMULATE_ACC_LEN; vLLM: rejection_sample_method \"synthetic\"), so every "
        "acceptance figure is fiction and the output is not the target's. Unset it and "
        "restart (finding acceptance.synthetic).")),)


def sglang_simulated(acc_len, method) -> Finding | None:
    """SGLang simulates acceptance when SIMULATE_ACC_LEN > 0 (its own test: `> 0`)."""
    try:
        on = float(acc_len) > 0
    except (TypeError, ValueError):
        return None
    if not on:
        return None
    setting = f"SGLANG_SIMULATE_ACC_LEN={acc_len:g}" if isinstance(acc_len, (int, float)) \
        else f"SGLANG_SIMULATE_ACC_LEN={acc_len}"
    if method:
        setting += f", SGLANG_SIMULATE_ACC_METHOD={method}"
    return _finding(SGLANG, setting, {"simulate_acc_len": float(acc_len),
                                      "simulate_acc_method": method})


def vllm_synthetic(method, rates, length=None) -> Finding | None:
    """vLLM accepts synthetically when `rejection_sample_method == "synthetic"`."""
    if method != "synthetic":
        return None
    rates = [float(r) for r in rates] if rates else None
    setting = 'rejection_sample_method "synthetic"'
    if rates:
        setting += ", synthetic_acceptance_rates " + "[" + ", ".join(f"{r:g}" for r in rates) + "]"
    elif length is not None:
        setting += f", synthetic_acceptance_length {length}"
    return _finding(VLLM, setting, {"rejection_sample_method": method,
                                    "synthetic_acceptance_rates": rates})


def _finding(runtime, setting: str, details: dict) -> Finding:
    msg = messages.SYNTHETIC_ACCEPTANCE
    text = msg.render(runtime=runtime.label, setting=setting,
                      fix=messages.SYNTHETIC_FIX[runtime.value])
    return Finding(msg.code, ERROR, text, {"runtime": runtime.value, "setting": setting,
                                           **details})
