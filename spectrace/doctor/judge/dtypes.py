"""The dtype a draft was saved in against the dtype the runtime will run it in.

Which dtype the runtime picks for the draft (read from the released sources):
- SGLang 0.5.23 builds the draft's `ModelConfig` with the server's own `--dtype`
  (`ModelConfig.from_server_args(..., is_draft_model=True)`: `dtype=cfg.dtype`,
  `srt/configs/model_config.py`) and resolves `auto` from the **draft's** config in
  `_get_and_verify_dtype`: its `dtype` / `torch_dtype`, where float32 or no dtype at all
  becomes float16 (bfloat16 for Gemma).
- vLLM 0.32 builds the draft's `ModelConfig` with `dtype=self.target_model_config.dtype`
  (`config/speculative.py`): the draft always runs in the **target's** resolved dtype;
  `auto` is the target config's dtype (else its weights'), float32 downcast to the
  platform's first supported dtype (`_resolve_auto_dtype`, `config/model.py`: bfloat16 on
  GPUs that have it).

Pure functions; the weight scan for float16 overflow is `doctor.files.weight_scan`.
"""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Any, Mapping

from ... import messages, signals
from ...findings import ERROR, INFO, WARNING, Finding, FindingSpec
from ...runtimes import SGLANG, Runtime


# The findings the doctor raises here, declared once (`doctor.judge.codes` gathers them;
# docs/doctor.md's table of codes is written from them).
SPECS: tuple[FindingSpec, ...] = (
    FindingSpec(signals.DTYPE_FLOAT16_OVERFLOW, ERROR,
                "the draft runs in float16 and some of its weights lie beyond float16's range "
                "(inf at load, inf/nan out)"),
    FindingSpec(signals.DTYPE_FLOAT16, WARNING,
                "the draft runs in float16 but was saved in a wider-range dtype; no weight is "
                "out of range"),
    FindingSpec(signals.DTYPE_CAST, INFO,
                "the draft runs in another dtype than it was saved in, within range"),
)

AUTO = "auto"
FLOAT16, BFLOAT16, FLOAT32 = "float16", "bfloat16", "float32"
# the names both runtimes' `--dtype` accepts (`_STR_DTYPE_TO_TORCH_DTYPE`), and what they mean
DTYPE_OPTION = {"auto": AUTO, "half": FLOAT16, "float16": FLOAT16, "bfloat16": BFLOAT16,
                "float": FLOAT32, "float32": FLOAT32}
SAFETENSORS_FLOAT = {"F16": FLOAT16, "BF16": BFLOAT16, "F32": FLOAT32, "F64": "float64"}
CONFIG_NAMES = {"float16": FLOAT16, "half": FLOAT16, "bfloat16": BFLOAT16, "float32": FLOAT32,
                "float": FLOAT32, "float64": "float64"}
WIDE_RANGE = (BFLOAT16, FLOAT32, "float64")  # exponent ranges float16 does not have
FLOAT16_MAX = 65504.0


def parse_dtype_option(value: str | None) -> str:
    """`--dtype` as the runtimes read it; ValueError naming the option and the choices."""
    if value is None:
        return AUTO
    got = DTYPE_OPTION.get(str(value).strip().lower())
    if got is None:
        raise ValueError(f"--dtype {value!r}: expected one of {', '.join(DTYPE_OPTION)} "
                         f"(the runtime's --dtype)")
    return got


def config_dtype(cfg: Mapping[str, Any]) -> str | None:
    """The dtype a config records (`dtype`, transformers >= 4.56, else `torch_dtype`; a
    speculators config may keep it in `transformer_layer_config`)."""
    for c in (cfg, cfg.get("transformer_layer_config"), cfg.get("text_config")):
        if isinstance(c, Mapping):
            v = c.get("dtype") or c.get("torch_dtype")
            if isinstance(v, str):
                return CONFIG_NAMES.get(v.lower().removeprefix("torch."), v.lower())
    return None


def weights_dtype(dtypes: Mapping[str, str]) -> str | None:
    """The float dtype most of the tensors are stored in (None: no float tensors)."""
    seen = Counter(SAFETENSORS_FLOAT[d] for d in dtypes.values() if d in SAFETENSORS_FLOAT)
    return seen.most_common(1)[0][0] if seen else None


@dataclass(frozen=True)
class RuntimeDtype:
    dtype: str
    how: str  # why the runtime picks it, in words


def runtime_dtype(runtime: str, option: str, draft_cfg: Mapping[str, Any],
                  target_cfg: Mapping[str, Any], target_weights: str | None = None
                  ) -> RuntimeDtype:
    """The dtype `runtime` computes the draft in, launched with `--dtype option`."""
    if option != AUTO:
        return RuntimeDtype(option, messages.DTYPE_HOW_OPTION.format(dtype=option))
    if runtime == SGLANG:
        said = config_dtype(draft_cfg)
        if said is None or said == FLOAT32:
            return RuntimeDtype(FLOAT16, messages.DTYPE_HOW_SGLANG_F32.format(
                said=f"says {said}" if said else "records no dtype"))
        return RuntimeDtype(said, messages.DTYPE_HOW_SGLANG.format(dtype=said))
    said = config_dtype(target_cfg)
    source = "config"
    if said is None and target_weights:
        said, source = target_weights, "weights"
    if said is None or said == FLOAT32:
        return RuntimeDtype(BFLOAT16, messages.DTYPE_HOW_VLLM_F32.format(
            said=f"{source} {'says' if source == 'config' else 'say'} {said}" if said
            else "config and weights name no dtype"))
    return RuntimeDtype(said, messages.DTYPE_HOW_VLLM.format(dtype=said, source=source))


@dataclass(frozen=True)
class Overflow:
    """One tensor with values float16 cannot hold."""

    key: str
    count: int      # values with |x| > 65504
    largest: float  # the largest |x| (inf / nan count as inf)


def check_dtype(runtime: str, version: str, config_said: str | None, saved: str | None,
                run: RuntimeDtype, overflows: list[Overflow] | None) -> list[Finding]:
    """`overflows` is None when the weights were not scanned (the draft does not run in
    float16, or is stored in float16 already)."""
    label = f"{Runtime(runtime).label} {version}"
    trained = config_said or saved
    details = {"config_dtype": config_said, "weights_dtype": saved, "runtime_dtype": run.dtype,
               "runtime": runtime, "version": version}
    if run.dtype == FLOAT16 and overflows:
        worst = max(overflows, key=lambda o: o.largest)
        return [Finding(signals.DTYPE_FLOAT16_OVERFLOW, ERROR, messages.DTYPE_OVERFLOW.render(
            runtime=label, how=run.how, tensors=len(overflows),
            values=sum(o.count for o in overflows), key=worst.key,
            largest=f"{worst.largest:.6g}", saved=saved or trained),
            {**details, "tensors": {o.key: {"count": o.count, "largest": o.largest}
                                    for o in overflows[:50]}})]
    wide = [d for d in (config_said, saved) if d in WIDE_RANGE]
    if run.dtype == FLOAT16 and wide:
        return [Finding(signals.DTYPE_FLOAT16, WARNING, messages.DTYPE_FLOAT16.render(
            runtime=label, how=run.how, trained=wide[0]), details)]
    if trained is not None and run.dtype not in {config_said, saved} - {None}:
        said = trained if saved in (None, config_said) or config_said is None else \
            messages.DTYPE_SAID_TWICE.format(config=config_said, weights=saved)
        return [Finding(signals.DTYPE_CAST, INFO, messages.DTYPE_CAST.render(
            runtime=label, how=run.how, trained=said, dtype=run.dtype), details)]
    return []
