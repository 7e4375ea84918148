"""The target side of an SGLang EAGLE-3 pair: where the target model keeps its aux
hidden-state capture state, and which rule turns the draft's layer ids into it.

The rules are data (`rules.aux.SGLANG_TARGETS`, by registered architecture name, shared
with `spectrace doctor`). Wrappers that delegate to a text model (Kimi-K2.5, Gemma-3 and
Llama-4 multimodal) are followed through `language_model`; pipeline-parallel ranks other
than the last capture nothing by design and are not audited. An architecture without a
row is still checked for capture on/off and layer count, but its ids are not judged (no
false alarm on a rule we do not know).
"""
from __future__ import annotations

from ..rules.aux import SGLANG_TARGETS, CaptureState, audit_aux_capture
from ..runtimes import parse_version
from ..findings import Finding
from ..runtimes import runtime_version
from .sglang_eagle3 import expected_widths, is_eagle3_draft


def _capture_holder(target):
    """The object that keeps the capture flag: the target itself, or the text model a
    wrapper delegates to (`language_model`: Kimi-K2.5, Gemma-3 / Llama-4 multimodal)."""
    inner = getattr(target, "language_model", None)
    if ("capture_aux_hidden_states" not in vars(target) and inner is not None
            and hasattr(inner, "capture_aux_hidden_states")):
        return inner
    return target


def _text_model(holder):
    """The object with `layers_to_capture`: `.model` for most, `.language_model` itself for
    Gemma-4 multimodal."""
    for name in ("model", "language_model"):
        obj = getattr(holder, name, None)
        if obj is not None and hasattr(obj, "layers_to_capture"):
            return obj
    return None


def _num_layers(holder, text) -> int:
    cfg = getattr(holder, "config", None)
    for c in (cfg, getattr(cfg, "text_config", None)):
        n = getattr(c, "num_hidden_layers", None)
        if isinstance(n, int):
            return n
    return len(getattr(text, "layers", ()) or ())


def is_last_pp_rank(holder) -> bool:
    """Only the last pipeline rank captures; most families read their own `pp_group`,
    some SGLang's process-wide one."""
    group = getattr(holder, "pp_group", None)
    if group is None:
        try:
            from sglang.srt.runtime_context import get_parallel
            group = get_parallel().pp_group
        except Exception:  # noqa: BLE001 - older SGLang, or no parallel state: one rank
            return True
    return bool(getattr(group, "is_last_rank", True))


def capture_state(target, sglang_version: str | None = None,
                  families: dict = SGLANG_TARGETS) -> CaptureState | None:
    """The target's capture state, or None on a pipeline rank that captures nothing by
    design; `families`: the id rules of the algorithm (EAGLE-3's, or DFlash's:
    `rules.aux.SGLANG_BLOCK_DRAFT_TARGETS`)."""
    holder = _capture_holder(target)
    if not is_last_pp_rank(holder):
        return None
    text = _text_model(holder)
    name = type(holder).__name__
    fam = families.get(name)
    num_layers = _num_layers(holder, text)
    stored = getattr(text, "layers_to_capture", None)
    stored = [int(i) for i in stored] if stored is not None else None
    on = bool(getattr(holder, "capture_aux_hidden_states", False)) and bool(stored)
    rule = None
    if fam is not None:
        version = sglang_version or runtime_version("sglang")
        rule = fam.rule_at(None if version == "unknown" else parse_version(version))
    captured, notes = None, []
    if on and fam is not None:
        reachable = [i for i in set(stored) if 0 <= i <= fam.max_input(num_layers)]
        lost = sorted(set(stored) - set(reachable))
        if lost:
            notes.append(f"layers_to_capture {sorted(set(stored))} names {lost}, which no "
                         f"layer of its {num_layers} reaches")
        if fam.per_layer_flags:
            flagged = [i for i, layer in enumerate(getattr(text, "layers", ()) or ())
                       if getattr(layer, "_is_layer_to_capture", False)]
            in_layers = [i for i in reachable if i < num_layers]
            if sorted(flagged) != sorted(in_layers):
                notes.append(f"its forward captures only the layers flagged "
                             f"_is_layer_to_capture {flagged}, not layers_to_capture "
                             f"{sorted(set(stored))}")
                reachable = flagged + [i for i in reachable if i == num_layers]
        captured = len(reachable)
    return CaptureState(on=on, stored=stored, num_layers=num_layers, rule=rule,
                        family=name, captured=captured, notes=notes)


def audit_pair(target_model, draft_model, algorithm: str | None = None,
               sglang_version: str | None = None) -> list[Finding]:
    """Findings for a loaded SGLang target + draft pair (empty when healthy). Only for
    SGLang's EAGLE-3 draft classes: MTP / NextN drafts take the target's last hidden state
    by design."""
    if not is_eagle3_draft(draft_model):
        return []
    inner = getattr(draft_model, "model", None)
    if inner is None or not hasattr(inner, "fc"):
        return []
    state = capture_state(target_model, sglang_version)
    if state is None:
        return []
    exp = expected_widths(inner)
    eagle_cfg = getattr(draft_model.config, "eagle_config", None) or {}
    draft_ids = eagle_cfg.get("eagle_aux_hidden_state_layer_ids")
    return audit_aux_capture(state, draft_ids, exp.fc_in, exp.target_hidden, algorithm)
