"""Pure checks shared by `spectrace doctor` (static) and the run-time instrumentation.

Their messages name the runtime and the target method that sets which layers are
captured, so the advice fits the runtime that ran them: `Terms` holds those words (the
only runtime knowledge here; SGLang's are the default)."""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Terms:
    runtime: str         # as people write it: "SGLang", "vLLM"
    capture_method: str  # the target model's method that sets the aux layers it captures
    capture_attr: str    # where the target keeps them


SGLANG = Terms("SGLang", "set_eagle3_layers_to_capture", "layers_to_capture")
VLLM = Terms("vLLM", "set_aux_hidden_state_layers", "aux_hidden_state_layers")
