"""The target side of a vLLM EAGLE-3 pair: which aux hidden states the target captures,
audited against the draft.

vLLM's runner passes the draft config's `eagle_aux_hidden_state_layer_ids` (top level,
or inside `eagle_config` from 0.22; else the target's defaults `(2, L // 2, L - 3)`) to
the target's `set_aux_hidden_state_layers`, which every target family keeps as given in
`aux_hidden_state_layers` on its decoder (`EagleModelMixin`, 0.18+; sorted and
deduplicated from 0.30). Id k is the state entering layer k: 0 is the embeddings, L the
last layer's output. The runner sets them only for the `eagle3` method and only when the
draft config's `use_aux_hidden_state` is on; otherwise the tuple stays empty and the
target captures nothing.
"""
from __future__ import annotations

from ..detectors import aux
from ..detectors.aux import CaptureState, audit_aux_capture
from ..findings import Finding
from ..runtimes import VLLM
from .vllm_eagle3 import expected_widths, is_eagle3_draft


def _decoder(target):
    """The decoder that keeps the ids (vLLM's own unwrapping, `SupportsEagle3`)."""
    parent = target
    if hasattr(target, "get_language_model"):
        parent = target.get_language_model()
    elif hasattr(target, "language_model"):
        parent = target.language_model
    return getattr(parent, "model", parent)


def _off_cause(method: str | None) -> str:
    if method is not None and method != "eagle3":
        return (f"vLLM captures aux hidden states only for the speculative method \"eagle3\", "
                f"and this engine runs \"{method}\". Fix: set \"method\": \"eagle3\" in "
                f"--speculative-config.")
    return ("vLLM captures aux hidden states only when the draft config's "
            "eagle_config.use_aux_hidden_state is true (or absent). Fix: set it to true "
            "(or remove it) in the draft's config.json.")


def capture_state(target, method: str | None = None) -> CaptureState:
    decoder = _decoder(target)
    stored = [int(i) for i in (getattr(decoder, "aux_hidden_state_layers", None) or ())]
    layers = getattr(decoder, "layers", None)
    num_layers = len(layers) if layers is not None else int(
        getattr(getattr(target, "config", None), "num_hidden_layers", 0) or 0)
    reachable = sorted(i for i in set(stored) if 0 <= i <= num_layers)
    notes = []
    if len(reachable) != len(set(stored)):
        notes.append(f"aux_hidden_state_layers {sorted(set(stored))} names ids no state of its "
                     f"{num_layers} layers has (0 = embeddings .. {num_layers} = last output)")
    cls = type(target)
    return CaptureState(on=bool(stored), stored=stored, num_layers=num_layers, rule=aux.KEPT,
                        family=f"{cls.__module__.rsplit('.', 1)[-1]}.{cls.__qualname__}",
                        captured=len(reachable), notes=notes, off_cause=_off_cause(method),
                        runtime=VLLM)


def draft_layer_ids(draft_config) -> list[int] | None:
    """The aux layer ids the draft names: top level (speculators) or in `eagle_config`."""
    ids = getattr(draft_config, "eagle_aux_hidden_state_layer_ids", None)
    if not ids:
        ids = (getattr(draft_config, "eagle_config", None) or {}).get(
            "eagle_aux_hidden_state_layer_ids")
    return [int(i) for i in ids] if ids else None


def audit_pair(target_model, draft_model, method: str | None = None) -> list[Finding]:
    """Findings for a loaded vLLM target + EAGLE-3 draft pair (empty when healthy, or when
    the draft takes no aux layers). `method`: the speculative config's method."""
    if not is_eagle3_draft(draft_model):
        return []
    exp = expected_widths(draft_model)
    if exp is None:
        return []
    return audit_aux_capture(capture_state(target_model, method),
                             draft_layer_ids(draft_model.config), exp.fc_in, exp.target_hidden)
