"""A checkpoint's fc width and aux layers against its target and loader.

One cause gives one finding: a draft config whose hidden size differs from the target's,
or an fc width that is not a whole number of target layers, is `fc.width_mismatch`; a
multiple that disagrees with the layers the target captures is `aux.count_mismatch`; one
that agrees with them but not with what this loader builds is `fc.width_mismatch`. Ids the
target cannot capture are `aux.layer_ids_out_of_range`, capture switched off
`aux.capture_disabled`; only when none of these holds are the ids' meanings compared
(`aux.layer_ids_misread`).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

from .. import signals
from ..findings import ERROR, WARNING, Finding
from ..runtimes import SGLANG, VLLM
from .formats import Format
from .inputs import Target
from .layer_ids import capturable, captured_inputs, id_inputs, keeps_ids, misread_ids, \
    runtime_ids
from .loaders import AuxCount, Geometry, Loader, eagle_config, geometry, route_key


@dataclass(frozen=True)
class FcAux:
    """What the fc and aux checks compare, read once from the config, tensors and target."""

    loader: Loader
    geometry: Geometry
    target_hidden: int
    target_layers: int
    target_archs: tuple[str, ...]
    ids: list[int] | None       # the aux layer ids the target is given (first reading)
    inputs: list[int]           # the layer inputs it captures for them
    use_aux_flag: Any           # eagle_config.use_aux_hidden_state (True when absent)
    capture_on: bool            # the flag is on, or this loader ignores it
    fc_in: int | None           # fc.weight's input width (None: no 2-D fc.weight)
    details: dict[str, Any]     # the details every fc-width finding carries

    def id_inputs(self) -> list[int]:
        return id_inputs(self.loader.runtime, self.loader.version, self.target_archs,
                         self.target_layers, self.ids)


def read_fc_aux(cfg: Mapping[str, Any], shapes: Mapping[str, tuple], params: Mapping[str, Any],
                target: Target, loader: Loader) -> FcAux:
    g = geometry(cfg, loader)
    ids = runtime_ids(cfg, loader)[0][1]
    inputs = captured_inputs(loader.runtime, loader.version, target.archs, target.layers, ids)
    flag = eagle_config(cfg).get("use_aux_hidden_state", True)
    fc_key = next((k for k in shapes
                   if route_key(k, params, loader, cfg).param == "model.fc.weight"), None)
    fc = tuple(shapes[fc_key]) if fc_key else None
    w = fc[1] if fc and len(fc) == 2 else None
    details = {"fc_in": w, "target_hidden_size": target.hidden, "draft_hidden_in": g.hidden_in,
               "num_aux": g.num_aux, "aux_layer_ids": ids, "captured_inputs": inputs,
               "runtime": loader.runtime, "version": loader.version}
    return FcAux(loader, g, target.hidden, target.layers, target.archs, ids, inputs, flag,
                 bool(flag) or not loader.honors_use_aux_flag, w, details)


def check_fc_and_aux(fmt: Format, cfg: Mapping[str, Any], shapes: Mapping[str, tuple],
                     params: Mapping[str, Any], target: Target, loader: Loader
                     ) -> list[Finding]:
    """fc's input width against (aux layers the target sends) x (target hidden size), and
    the aux layers against the target (see the module docstring)."""
    a = read_fc_aux(cfg, shapes, params, target, loader)
    out, fc_layers = _fc_width(a, cfg)
    out += _ids_out_of_range(a)
    out += _capture_disabled(a, fc_layers)
    if a.capture_on and not any(f.code.startswith("aux.") for f in out):
        out += check_id_meaning(fmt, cfg, target, loader)
    return out


def _fc_width(a: FcAux, cfg: Mapping[str, Any]) -> tuple[list[Finding], int]:
    """(the fc-width finding, if any; the aux layers fc takes: its width over the target's
    hidden size, else what the loader builds)."""
    g, ht, w = a.geometry, a.target_hidden, a.fc_in
    if g.hidden_in != ht:
        return [_hidden_in_mismatch(a, cfg)], g.num_aux
    if w is None:
        return [], g.num_aux
    if w % ht:
        return [_not_whole_layers(a)], g.num_aux
    k = w // ht
    # out-of-range ids are reported on their own (one cause, one finding)
    sent = len(a.inputs) if a.ids is None else len(set(a.id_inputs()))
    if a.capture_on and k != sent:
        return [_count_mismatch(a, k, sent)], k
    if k != g.num_aux:
        return [_loader_width(a, k)], k
    return [], k


def _hidden_in_mismatch(a: FcAux, cfg: Mapping[str, Any]) -> Finding:
    g, ht = a.geometry, a.target_hidden
    src = "target_hidden_size" if cfg.get("target_hidden_size") else "hidden_size"
    return Finding(signals.FC_CONFIG_WIDTH_MISMATCH, ERROR, (
        f"the draft config's {src} = {g.hidden_in} but the target's hidden_size is {ht}: "
        f"{a.loader.name} builds fc for {g.num_aux} x {g.hidden_in} = "
        f"{g.hidden_in * g.num_aux} inputs while the target sends {g.num_aux} x {ht}, so "
        f"loading or the first target-fed draft pass fails (or fc is skipped when the widths "
        f"happen to match the draft's hidden size). Fix: set target_hidden_size = {ht} in the "
        f"draft's config.json, or pair the draft with the target it was trained on."), a.details)


def _not_whole_layers(a: FcAux) -> Finding:
    ht = a.target_hidden
    return Finding(signals.FC_CONFIG_WIDTH_MISMATCH, ERROR, (
        f"fc takes {a.fc_in} inputs, which is not a whole number of target layers of width "
        f"{ht}: the draft was trained for another target (or fc was exported wrongly), and "
        f"{a.loader.name} fails to load it or to run the first target-fed draft pass. Fix: use "
        f"the target this draft was trained on, or retrain fc for (aux layers) x {ht}."),
        a.details)


def _count_mismatch(a: FcAux, k: int, sent: int) -> Finding:
    ht = a.target_hidden
    what = (f"the target is given aux layer ids {a.ids} and captures {sent} layers"
            if a.ids else f"no aux layer ids are given, so the target captures its default "
            f"layers (the inputs of {a.inputs}: {sent} distinct for {a.target_layers} layers)")
    return Finding(signals.AUX_COUNT_MISMATCH, ERROR, (
        f"{what}, but fc takes {k} layers ({a.fc_in} = {k} x {ht}). The target sends "
        f"{sent} x {ht} wide hidden states, so the first target-fed draft pass fails, or "
        f"worse, runs on features the draft was not trained on. Fix: list exactly the {k} "
        f"layer ids the draft was trained with."),
        {**a.details, "fc_layers": k, "target_sends": sent})


def _loader_width(a: FcAux, k: int) -> Finding:
    g, three = a.geometry, a.loader.aux_count == AuxCount.THREE
    why = ("always builds fc for 3 aux layers" if three
           else f"builds fc for {g.num_aux} aux layers (from the config)")
    fix = ("deploy on a version that sizes fc from the config (SGLang >= 0.5.12, vLLM >= "
           "0.22)." if three else
           f"set num_aux_hidden_states = {k} (or list {k} layer ids) in config.json.")
    return Finding(signals.FC_CONFIG_WIDTH_MISMATCH, ERROR, (
        f"fc takes {k} x {a.target_hidden} = {a.fc_in} inputs, but {a.loader.name} {why}, "
        f"i.e. {g.num_aux * a.target_hidden}: loading the checkpoint fails. Fix: {fix}"),
        {**a.details, "fc_layers": k})


def _ids_out_of_range(a: FcAux) -> list[Finding]:
    if a.ids is None:
        return []
    n = a.target_layers
    lo, hi = capturable(a.loader.runtime, a.target_archs, n)
    bad = [i for i, x in zip(a.ids, a.id_inputs()) if not lo <= x <= hi]
    if not bad:
        return []
    return [Finding(signals.AUX_LAYER_IDS_OUT_OF_RANGE, ERROR, (
        f"aux layer ids {a.ids}, but the target has {n} layers: {a.loader.name} "
        f"{_id_rule(a.loader, a.target_archs)}, and can capture the inputs of layers "
        f"{lo}..{hi}, so {bad} are never captured. The target sends fewer aux layers than fc "
        f"expects: the draft pass fails, or fc is silently skipped when the width equals the "
        f"draft's hidden size. Fix: use the ids the draft was trained with, or pair the draft "
        f"with the deeper target it was trained for."),
        {"aux_layer_ids": a.ids, "out_of_range": bad, "target_num_layers": n,
         "capturable_inputs": [lo, hi]})]


def _id_rule(loader: Loader, archs) -> str:
    if loader.runtime == VLLM:
        return "captures the input of layer id (the state after id layers)"
    if keeps_ids(archs):
        return ("captures the input of layer id for a DeepSeek-family target (of id + 1 when "
                "the first id is 1, and before 0.5.16)")
    return "captures the input of layer id + 1 (the output of layer id)"


def _capture_disabled(a: FcAux, fc_layers: int) -> list[Finding]:
    if a.use_aux_flag or fc_layers <= 1:
        return []
    honored = a.loader.honors_use_aux_flag
    effect = ("The target then sends only its last hidden state; when its width equals the "
              "draft's hidden size the draft silently skips fc, sees features it was not "
              "trained on, and acceptance falls to about 1.0 with no error anywhere. "
              if honored else
              f"{a.loader.name} ignores this flag, but other versions would disable aux capture "
              f"and the draft would silently skip fc. ")
    return [Finding(signals.AUX_CAPTURE_DISABLED, ERROR if honored else WARNING, (
        f"eagle_config.use_aux_hidden_state is false, but fc expects {fc_layers} concatenated "
        f"target layers. {effect}Fix: set eagle_config.use_aux_hidden_state to true (or "
        f"remove it)."),
        {"use_aux_hidden_state": a.use_aux_flag, "fc_layers": fc_layers,
         "honored_by_version": honored, "runtime": a.loader.runtime,
         "version": a.loader.version})]


ID_CONVENTIONS = {
    SGLANG: "SGLang's convention (eagle_config, as SGLang's set_eagle3_layers_to_capture reads "
            "them for this target)",
    VLLM: "vLLM's convention (top level: the input of layer id)",
}


def check_id_meaning(fmt: Format, cfg: Mapping[str, Any], target: Target, loader: Loader
                     ) -> list[Finding]:
    """`aux.layer_ids_misread`: the layers the runtime captures are not the layers the
    draft was trained on, because the ids are read in another convention than they were
    written in, or ignored in favour of a default that differs."""
    want, wrong = misread_ids(fmt, cfg, target, loader)
    if not wrong:
        return []
    conv = ID_CONVENTIONS.get(fmt.id_convention or "",
                              "no id list (the inputs of layers 2, n//2, n-3)")
    how = "; ".join(f"{when + ': ' if when else ''}"
                    f"{'ids ' + str(ids) if ids is not None else 'the default'} capture the "
                    f"inputs of layers {got}" for when, ids, got in wrong)
    fix = ("write them at the top level as `eagle_aux_hidden_state_layer_ids` in vLLM's "
           "convention" if loader.runtime == VLLM else
           "write them in eagle_config in SGLang's convention")
    return [Finding(signals.AUX_LAYER_IDS_MISREAD, ERROR, (
        f"the draft was trained on the inputs of target layers {want} (its ids {fmt.ids} are "
        f"in {conv}), but under {loader.name} {how}: the draft sees other layers than it was "
        f"trained on, and acceptance drops with no error. Fix: {fix} (`--fix` does)."),
        {"trained_inputs": want, "runtime_inputs": [g for _, _, g in wrong],
         "ids": fmt.ids, "id_convention": fmt.id_convention})]
