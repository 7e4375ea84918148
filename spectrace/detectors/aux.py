"""Audit of the target's aux hidden-state capture against what the draft expects.

Pure function: the layer ids the target really captures (None when capture is off), the
draft's `eagle_aux_hidden_state_layer_ids`, and its fc input width.
"""
from __future__ import annotations

from typing import Sequence

from .. import signals
from ..findings import ERROR, WARNING, Finding


def audit_aux_capture(captured: Sequence[int] | None, draft_ids: Sequence[int] | None,
                      fc_in: int, target_hidden: int) -> list[Finding]:
    findings: list[Finding] = []
    expected_layers = fc_in // target_hidden if target_hidden else 0
    details = {"captured_layer_ids": list(captured) if captured is not None else None,
               "draft_layer_ids": list(draft_ids) if draft_ids is not None else None,
               "fc_in": fc_in, "target_hidden": target_hidden}
    if captured is None:
        if expected_layers > 1:
            findings.append(Finding(signals.AUX_CAPTURE_DISABLED, ERROR, (
                f"aux hidden-state capture is off in the target, but the draft's fc expects "
                f"{expected_layers} concatenated layers ({fc_in} wide). The draft will get one "
                f"layer and SGLang will skip fc (fc bypass): acceptance length about 1.0. Fix: "
                f"set eagle_config.use_aux_hidden_state to true in the draft's config.json."),
                details))
        return findings
    if len(captured) != expected_layers:
        findings.append(Finding(signals.AUX_COUNT_MISMATCH, ERROR, (
            f"the target captures {len(captured)} aux layers {list(captured)}, but the draft's "
            f"fc expects {expected_layers} ({fc_in} / {target_hidden}). Fix "
            f"eagle_config.eagle_aux_hidden_state_layer_ids or the draft's fc."), details))
    if draft_ids is not None and list(captured) != list(draft_ids):
        findings.append(Finding(signals.AUX_ID_MISMATCH, WARNING, (
            f"the target captures layers {list(captured)}, but the draft was configured "
            f"with eagle_aux_hidden_state_layer_ids {list(draft_ids)}: the draft sees "
            f"different layers than it was trained on. Check which layer ids the serving "
            f"stack passes to set_eagle3_layers_to_capture."), details))
    return findings
