"""The model runner a vLLM release runs a pair on by default (vllm/config/vllm.py
`VllmConfig.use_v2_model_runner`), for the findings that are true of one runner only: the
V1 runner takes a draft's `eagle_config` ids when the top level names none, the V2 runner
only the top-level ids, else the target's default (v1/worker/gpu/spec_decode/eagle/
eagle3_utils.py `get_eagle3_aux_layers_from_config`).

- before 0.22: V1 (there is no V2 default).
- 0.22 to 0.25: V2 for a target in `DEFAULT_V2_MODEL_RUNNER_ARCHITECTURES` (Qwen3ForCausalLM)
  that is neither MoE nor quantized (`_is_default_v2_model_runner_model`), else V1.
- 0.26 to 0.28: V2 for a target that is not MoE, or whose architecture that release lists.
- 0.29 and later: V2.

In every release the V1 runner is still taken with `VLLM_USE_V2_MODEL_RUNNER=0`, on a build
without Triton (vLLM's CPU build), or for a feature the V2 runner lacks (pipeline
parallelism with EAGLE-3 in 0.22, ...); those are the operator's choice, not the default:
`spectrace doctor --vllm-runner v1|v2` judges for that runner instead (`judged_runner`).
The V2 runner exists from 0.13 (`VLLM_USE_V2_MODEL_RUNNER`, vllm/envs.py, off by default
until 0.22). `V2_ARCHITECTURES` is checked against each release's source
(tests/test_doctor_runner.py).
"""
from __future__ import annotations

from typing import Any, Mapping

from ...runtimes import VLLM, Runtime, parse_version

V1, V2 = "V1", "V2"
V2_DEFAULT_FROM = (0, 22, 0)   # for some targets (below)
V2_FOR_ALL_FROM = (0, 29, 0)
V2_EXISTS_FROM = (0, 13, 0)    # envs.VLLM_USE_V2_MODEL_RUNNER
# the V2 runner's `use_aux_hidden_state_outputs` is True for every EAGLE-3 draft in 0.18-0.32
# (v1/worker/gpu/model_runner.py), which reads eagle_config.use_aux_hidden_state from 0.33
# (spec_decode/eagle/eagle3_utils.py `requires_aux_hidden_states`); the V1 runner always
# reads it (llm_base_proposer.py `_get_eagle3_use_aux_hidden_state_from_config`)
V2_CAPTURES_AUX_FROM = (0, 18, 0)    # 0.13: the V2 runner passes no aux hidden states
V2_READS_AUX_FLAG_FROM = (0, 33, 0)
DEFAULT = "default"
OPTION = {DEFAULT: None, "v1": V1, "v2": V2}  # --vllm-runner

# each release's DEFAULT_V2_MODEL_RUNNER_ARCHITECTURES (vllm/config/vllm.py), 0.22-0.28
_MOE_V2 = ("DeepseekV2ForCausalLM", "GraniteMoeForCausalLM", "InklingForCausalLM",
           "InklingForConditionalGeneration", "LongcatFlashNgramForCausalLM",
           "Qwen2MoeForCausalLM")
V2_ARCHITECTURES: dict[str, frozenset[str]] = {
    "0.22.0": frozenset({"Qwen3ForCausalLM"}),
    "0.26.0": frozenset(_MOE_V2),
    "0.27.0": frozenset(_MOE_V2 + ("KimiK3ForConditionalGeneration",)),
    "0.28.0": frozenset(_MOE_V2 + ("KimiK3ForConditionalGeneration", "DeepseekV4ForCausalLM")),
}
# keys that name a MoE target's experts (transformers_utils/model_arch_config_convertor.py
# `get_num_experts`)
EXPERT_KEYS = ("num_experts", "moe_num_experts", "n_routed_experts", "num_local_experts")


def is_moe(target: Mapping[str, Any]) -> bool:
    """vLLM's `is_moe`: a target config that names a number of experts above 0 (its
    `text_config` for a multimodal one)."""
    cfg = target.get("text_config") if isinstance(target.get("text_config"), Mapping) \
        else target
    for k in EXPERT_KEYS:
        v = cfg.get(k)
        if v:
            return (v[0] if isinstance(v, list) else v) > 0
    return False


def default_runner(version: str, target: Mapping[str, Any],
                   v2_archs: frozenset[str] | None = None) -> str:
    """V1 or V2: what `use_v2_model_runner` answers for this target when nothing forces
    either (a GPU build with Triton, no environment variable, no unsupported feature).
    `v2_archs`: the release's listed architectures (0.22-0.28), default the nearest
    release's in `V2_ARCHITECTURES`."""
    v = parse_version(version)
    if v < V2_DEFAULT_FROM:
        return V1
    if v >= V2_FOR_ALL_FROM:
        return V2
    archs = set(target.get("architectures") or [])
    listed = bool(archs & (v2_archs if v2_archs is not None else _listed(version)))
    moe = is_moe(target)
    if v < (0, 26, 0):
        quantized = target.get("quantization_config") is not None
        return V2 if listed and not moe and not quantized else V1
    return V2 if listed or not moe else V1


def _listed(version: str) -> frozenset[str]:
    v = parse_version(version)
    rows = sorted(V2_ARCHITECTURES, key=parse_version)
    release = next((r for r in reversed(rows) if parse_version(r) <= v), rows[0])
    return V2_ARCHITECTURES[release]


def runner_option(option: str | None, runtime: str, version: str) -> str | None:
    """The runner `--vllm-runner default|v1|v2` asks for (None: the release's default for
    the target); ValueError with a one-line reason for a bad value, for a runtime other
    than vLLM, or for V2 on a release that has no V2 runner."""
    if option is None:
        return None
    key = option.strip().lower()
    if key not in OPTION:
        raise ValueError(f"--vllm-runner {option!r}: expected one of {', '.join(OPTION)}")
    runner = OPTION[key]
    if runner is None:
        return None
    if runtime != VLLM:
        raise ValueError(f"--vllm-runner {option}: only vLLM has model runners to choose "
                         f"from, and the judgement is for {Runtime(runtime).label}")
    if runner == V2 and parse_version(version) < V2_EXISTS_FROM:
        raise ValueError(f"--vllm-runner {option}: vLLM {version} has no V2 model runner "
                         f"(VLLM_USE_V2_MODEL_RUNNER exists from 0.13)")
    return runner


def judged_runner(version: str, target: Mapping[str, Any], chosen: str | None) -> str:
    """The runner the doctor judges a pair on: the one `--vllm-runner` chose, else the
    release's default for the target."""
    return chosen or default_runner(version, target)


def v2_ignores_aux_flag(version: str) -> bool:
    """The release's V2 runner captures the aux layers whatever eagle_config's
    `use_aux_hidden_state` says, while its V1 runner switches capture off."""
    return V2_CAPTURES_AUX_FROM <= parse_version(version) < V2_READS_AUX_FLAG_FROM
