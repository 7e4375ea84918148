"""The target side of a vLLM pair whose draft reads the target's aux hidden states
(EAGLE-3, DFlash, DSpark): which aux hidden states the target captures, audited against
the draft.

vLLM's runner passes the draft config's aux layer ids (`eagle_aux_hidden_state_layer_ids`
top level or inside `eagle_config` from 0.22, DFlash's `dflash_config.target_layer_ids`
+ 1; else the target's defaults `(2, L // 2, L - 3)`) to the target's
`set_aux_hidden_state_layers`. Id k is the state entering layer k: 0 is the embeddings,
L the last layer's output. The runner sets them only for the `eagle3` method with the
draft config's `use_aux_hidden_state` on, and for `dflash`; otherwise the target
captures nothing.

Where the target keeps them differs by class (`ID_HOLDERS`): most in
`EagleModelMixin.aux_hidden_state_layers` on the decoder (sorted and deduplicated from
0.30), some on another module of theirs (DeepSeek-V2, Qwen3.5: unsorted on `.model`;
Plamo3: its decoder `model.layers`; Kimi-K2.5, Pixtral, Llama-4: their `language_model`),
and the Transformers backend in output-recorder switches (`_output_aux_hidden_states_kwargs`).
"""
from __future__ import annotations

from dataclasses import dataclass

from ..rules import aux
from ..rules.aux import CaptureState, audit_aux_capture
from ..findings import Finding
from ..runtimes import VLLM
from .vllm_dflash import is_dflash_draft
from .vllm_eagle3 import expected_widths, is_eagle3_draft


@dataclass(frozen=True)
class KeptIds:
    """The aux layer ids one module of a target keeps, and the layers they index."""

    ids: list[int]
    num_layers: int
    where: str  # the module's path in the target ("" = the target), for messages


def _decoder(target):
    """The decoder `SupportsEagle3.set_aux_hidden_state_layers` writes to (vLLM's own
    unwrapping: `get_language_model()` / `language_model`, then `.model` if any)."""
    parent = target
    if hasattr(target, "get_language_model"):
        parent = target.get_language_model()
    elif hasattr(target, "language_model"):
        parent = target.language_model
    return getattr(parent, "model", parent)


def _num_layers(module, target) -> int:
    layers = getattr(module, "layers", None)
    if layers is not None and hasattr(layers, "__len__"):
        return len(layers)
    cfg = getattr(target, "config", None)
    cfg = getattr(cfg, "get_text_config", lambda: cfg)()
    return int(getattr(cfg, "num_hidden_layers", 0) or 0)


def _mixin_field(target) -> KeptIds | None:
    """`EagleModelMixin.aux_hidden_state_layers` (a class default of `()` until set), on
    whichever module was given it: the decoder `SupportsEagle3` unwraps to; DeepSeek-V2 and
    Qwen3.5, which assign it unsorted to `self.model`; a multimodal wrapper's
    `language_model` (Kimi-K2.5, Pixtral, Llama-4), whose own override forwards it;
    Plamo3, whose `model` passes it on to its decoder (`model.layers`). The module that
    holds ids wins; with none, the canonical decoder (capture never set)."""
    decoder = _decoder(target)
    first = None
    if getattr(decoder, "aux_hidden_state_layers", None) is not None:
        first = KeptIds(list(decoder.aux_hidden_state_layers),
                        _num_layers(decoder, target), "")
        if first.ids:
            return first
    named = getattr(target, "named_modules", None)
    for where, module in (named() if callable(named) else ()):
        ids = getattr(module, "aux_hidden_state_layers", None)
        if ids:  # a tuple someone set (the class default is empty)
            return KeptIds(list(ids), _num_layers(module, target), where)
        if first is None and ids is not None:
            first = KeptIds([], _num_layers(module, target), where)
    return first


_RECORDER_KEY = "output_aux_hidden_state_"


def _output_recorders(target) -> KeptIds | None:
    """The Transformers backend keeps no id field: its `set_aux_hidden_state_layers`
    installs one Transformers output recorder per id and turns each on by a forward
    keyword, `_output_aux_hidden_states_kwargs["output_aux_hidden_state_<id>"]`."""
    kwargs = getattr(target, "_output_aux_hidden_states_kwargs", None)
    if not isinstance(kwargs, dict):
        return None
    ids = [int(k[len(_RECORDER_KEY):]) for k, on in kwargs.items()
           if on and k.startswith(_RECORDER_KEY) and k[len(_RECORDER_KEY):].isdigit()]
    return KeptIds(ids, _num_layers(getattr(target, "model", target), target), "")


# Where vLLM targets keep the ids they were given, tried in order (first found wins).
ID_HOLDERS = (_output_recorders, _mixin_field)


def kept_ids(target) -> KeptIds:
    for holder in ID_HOLDERS:
        found = holder(target)
        if found is not None:
            return found
    return KeptIds([], _num_layers(_decoder(target), target), "")


# speculative methods for which vLLM's runner switches the target's aux capture on
CAPTURING_METHODS = ("eagle3", "dflash", "dspark", "extract_hidden_states")


def _off_cause(method: str | None) -> str:
    if method is not None and method not in CAPTURING_METHODS:
        return (f"vLLM captures aux hidden states only for the speculative methods "
                f"\"eagle3\" and \"dflash\", and this engine runs \"{method}\". Fix: set "
                f"\"method\": \"eagle3\" in --speculative-config.")
    return ("vLLM captures aux hidden states only when the draft config's "
            "eagle_config.use_aux_hidden_state is true (or absent). Fix: set it to true "
            "(or remove it) in the draft's config.json.")


def capture_state(target, method: str | None = None) -> CaptureState:
    kept = kept_ids(target)
    stored, num_layers = [int(i) for i in kept.ids], kept.num_layers
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
    """The aux layer ids the draft names, in vLLM's convention and order of precedence
    (`GPUModelRunner._get_eagle3_aux_layers_from_config`): top level (speculators), else
    `dflash_config.target_layer_ids` (layer outputs: + 1), overridden by `eagle_config`
    when the config has one."""
    ids = getattr(draft_config, "eagle_aux_hidden_state_layer_ids", None)
    if not ids:
        dflash = getattr(draft_config, "dflash_config", None)
        eagle = getattr(draft_config, "eagle_config", None)
        if dflash and isinstance(dflash, dict):
            ids = [int(i) + 1 for i in (dflash.get("target_layer_ids") or [])]
        if eagle and isinstance(eagle, dict):
            ids = eagle.get("eagle_aux_hidden_state_layer_ids")
    return [int(i) for i in ids] if ids else None


def reads_target_aux(draft_model) -> bool:
    """An EAGLE-3, DFlash or DSpark draft: one that reads the target's aux hidden states."""
    return is_eagle3_draft(draft_model) or is_dflash_draft(draft_model)


def audit_pair(target_model, draft_model, method: str | None = None) -> list[Finding]:
    """Findings for a loaded vLLM target + a draft that reads its aux hidden states
    (EAGLE-3, DFlash, DSpark); empty when healthy, when the draft takes no aux layers, or
    for other drafts (EAGLE-1, MTP: no fc, nothing to audit). `method`: the speculative
    config's method."""
    if not reads_target_aux(draft_model):
        return []
    exp = expected_widths(draft_model)
    if exp is None:
        return []
    return audit_aux_capture(capture_state(target_model, method),
                             draft_layer_ids(draft_model.config), exp.fc_in, exp.target_hidden)
