"""Hooks on vLLM's DFlash and DSpark drafts (worker process): like EAGLE-3 they read the
target's aux hidden states, concatenated, through `fc` in `combine_hidden_states`, so
the same width check runs there (`vllm_eagle3._before_combine`: fc's input width, the
target hidden size, fc bypass when vLLM built no fc).

Their aux layer ids are `dflash_config.target_layer_ids`, each the output of layer i,
which vLLM's runner turns into its EAGLE-3 ids (the state entering layer i + 1) before
`set_aux_hidden_state_layers` (`vllm_target.draft_layer_ids` does the same); the runner
switches capture on for the `dflash` method regardless of `use_aux_hidden_state`.

Wrapped on the class that defines `combine_hidden_states`; the subclasses that inherit it
(DFlash2, Qwen3 DSpark, Gemma-4 DSpark) go through the same wrapper and are named in
`AUX_DRAFTS` so the runner's audit recognises them.
"""
from __future__ import annotations

from ..patching import WrapPoint
from .vllm_eagle3 import _before_combine

# module -> the class that defines combine_hidden_states (wrapped there)
DEFINING = {
    "vllm.model_executor.models.qwen3_dflash": "DFlashQwen3ForCausalLM",  # 0.20+
    "vllm.model_executor.models.laguna_dflash": "DFlashLagunaForCausalLM",  # 0.26+
}
# every DFlash / DSpark draft class whose combine_hidden_states is one of the above
AUX_DRAFTS = frozenset({
    *DEFINING.values(),
    "DFlash2Qwen3ForCausalLM",    # qwen3_dflash2 (0.33+), a DFlashQwen3ForCausalLM
    "Qwen3DSparkForCausalLM",     # qwen3_dspark (0.26+), likewise
    "Gemma4DSparkForCausalLM",    # gemma4_dspark (0.26+), a Qwen3DSparkForCausalLM
})


def is_dflash_draft(model) -> bool:
    return type(model).__name__ in AUX_DRAFTS


def wrap_points(cls: str) -> tuple[WrapPoint, ...]:
    return (WrapPoint(f"{cls}.combine_hidden_states", "vllm.dflash.combine_hidden_states",
                      before=_before_combine, reads=("hidden_states",)),)


QWEN3_DFLASH, LAGUNA_DFLASH = (wrap_points(c) for c in DEFINING.values())
