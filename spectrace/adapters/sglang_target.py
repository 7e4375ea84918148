"""The target side of an SGLang EAGLE-3 pair: which aux hidden-state layers the target
model really captures, checked against what the draft expects."""
from __future__ import annotations

from ..detectors.aux import audit_aux_capture
from .sglang_eagle3 import expected_widths
from ..findings import Finding


def captured_layer_ids(target_model) -> list[int] | None:
    """The draft-convention layer ids the target captures (SGLang stores id + 1: the input
    of that layer), or None when capture is off."""
    if not getattr(target_model, "capture_aux_hidden_states", False):
        return None
    layers = getattr(getattr(target_model, "model", None), "layers_to_capture", None)
    return [int(i) - 1 for i in layers] if layers is not None else None


def audit_pair(target_model, draft_model) -> list[Finding]:
    """Findings for a loaded target + EAGLE-3 draft pair (empty when healthy)."""
    inner = getattr(draft_model, "model", None)
    if inner is None or not hasattr(inner, "fc"):
        return []
    exp = expected_widths(inner)
    eagle_cfg = getattr(draft_model.config, "eagle_config", None) or {}
    draft_ids = eagle_cfg.get("eagle_aux_hidden_state_layer_ids")
    return audit_aux_capture(captured_layer_ids(target_model), draft_ids, exp.fc_in,
                             exp.target_hidden)
