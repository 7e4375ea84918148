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
from typing import Any, Callable, Mapping

from ... import messages, signals
from ...findings import ERROR, INFO, WARNING, Finding, FindingSpec
from ...runtimes import VLLM
from ...rules import aux
from .formats import Format, FormatName
from .inputs import Target
from .layer_ids import (RUNNER_OF, capturable, captured_inputs, id_inputs, keeps_ids,
                        misread_ids, runtime_ids)
from .draft_params import Geometry, eagle_config, geometry
from .fix_replay import replay_aux_count
from .load_replay import route_key
from .loaders import AuxCount, Loader
from .vllm_runner import V1, default_runner, judged_runner, v2_ignores_aux_flag


# The findings the doctor raises here, declared once (`doctor.judge.codes` gathers them;
# docs/doctor.md's table of codes is written from them).
SPECS: tuple[FindingSpec, ...] = (
    FindingSpec(signals.FC_CONFIG_WIDTH_MISMATCH, ERROR,
                "`fc`'s input width cannot be (aux layers) x (target hidden size) for this "
                "loader"),
    FindingSpec(signals.AUX_LAYER_IDS_OUT_OF_RANGE, ERROR,
                "an aux layer id makes the target capture a layer input it cannot capture"),
    FindingSpec(signals.AUX_LAYER_IDS_MISREAD, ERROR,
                "the target would capture other layers than the draft was trained on (the ids "
                "read in the other convention, or ignored for a default that differs); names "
                "vLLM's model runner, a warning where only a runner other than the one judged "
                "on (the release's default for the target, or --vllm-runner's) misreads them"),
    FindingSpec(signals.AUX_LAYER_IDS_DEFAULT, WARNING,
                "the draft names no aux layer ids, so the runtime captures its default for "
                "this target (a warning where that is not what the draft was trained on)"),
)


@dataclass(frozen=True)
class FcAux:
    """What the fc and aux checks compare, read once from the config, tensors and target."""

    loader: Loader
    geometry: Geometry
    target_hidden: int
    target_layers: int
    target_archs: tuple[str, ...]
    ids: list[int] | None       # the aux layer ids the target is given (first reading)
    when: str                   # "" or layer_ids.ON_V1: that reading is the V1 runner's only
    inputs: list[int]           # the layer inputs it captures for them
    use_aux_flag: Any           # eagle_config.use_aux_hidden_state (True when absent)
    capture_on: bool            # the flag is on, or this loader ignores it
    fc_in: int | None           # fc.weight's input width (None: no 2-D fc.weight)
    details: dict[str, Any]     # the details every fc-width finding carries

    def id_inputs(self) -> list[int]:
        return id_inputs(self.loader.runtime, self.loader.version, self.target_archs,
                         self.target_layers, self.ids)

    def read_on(self) -> str:
        """The words naming the runner whose reading of the ids these checks use, where
        vLLM's runners read them differently ("" elsewhere)."""
        return messages.IDS_READ_ON_V1 if self.when else ""

    def read_on_details(self) -> dict[str, str]:
        """`read_on()` for a finding's details: `{"ids_read_on": runner}`, or nothing."""
        return {"ids_read_on": RUNNER_OF[self.when]} if self.when else {}


def read_fc_aux(cfg: Mapping[str, Any], shapes: Mapping[str, tuple], params: Mapping[str, Any],
                target: Target, loader: Loader) -> FcAux:
    g = geometry(cfg, loader)
    # where vLLM's runners read the ids differently, the first reading (the V1 runner's,
    # whichever runner is judged): the V2 runner's is compared by `check_id_meaning`
    when, ids = runtime_ids(cfg, loader)[0]
    inputs = captured_inputs(loader.runtime, loader.version, target.archs, target.layers, ids)
    flag = eagle_config(cfg).get("use_aux_hidden_state", True)
    fc_key = next((k for k in shapes
                   if route_key(k, params, loader, cfg).param == "model.fc.weight"), None)
    fc = tuple(shapes[fc_key]) if fc_key else None
    w = fc[1] if fc and len(fc) == 2 else None
    details = {"fc_in": w, "target_hidden_size": target.hidden, "draft_hidden_in": g.hidden_in,
               "num_aux": g.num_aux, "aux_layer_ids": ids, "captured_inputs": inputs,
               "runtime": loader.runtime, "version": loader.version}
    return FcAux(loader, g, target.hidden, target.layers, target.archs, ids, when, inputs,
                 flag, bool(flag) or not loader.honors_use_aux_flag, w, details)


def check_fc_and_aux(fmt: Format, cfg: Mapping[str, Any], shapes: Mapping[str, tuple],
                     params: Mapping[str, Any], target: Target, loader: Loader,
                     source: Mapping[str, Any] | None = None) -> list[Finding]:
    """fc's input width against (aux layers the target sends) x (target hidden size), and
    the aux layers against the target (see the module docstring). `source`: the config.json
    a fix is written into (default `cfg`, the config the draft class reads), on which a
    proposed fix is replayed."""
    a = read_fc_aux(cfg, shapes, params, target, loader)
    out, fc_layers = _fc_width(a, cfg, lambda k: _loader_width(
        a, k, fmt, cfg if source is None else source, shapes))
    out += _ids_out_of_range(a)
    out += _capture_disabled(a, fc_layers, target)
    if a.capture_on and not any(f.code.startswith("aux.") for f in out):
        out += check_id_meaning(fmt, cfg, target, loader)
    if a.capture_on and a.ids is None and not any(f.code.startswith("aux.") for f in out):
        out.append(_default_ids(fmt, cfg, a))
    return out


def _default_ids(fmt: Format, cfg: Mapping[str, Any], a: FcAux) -> Finding:
    """`aux.layer_ids_default`: no ids, so the runtime captures its default layers; a
    warning where the format records them (speculators: a null means a converter lost
    them), information where leaving them out is the format's practice."""
    lost = fmt.name == FormatName.SPECULATORS
    ids = aux.default_ids(a.target_layers)
    return Finding(signals.AUX_LAYER_IDS_DEFAULT, WARNING if lost else INFO,
                   messages.IDS_DEFAULT.render(
                       where=messages.IDS_DEFAULT_WHERE_NULL if lost else "",
                       loader=a.loader.name, layers=a.target_layers, ids=ids, inputs=a.inputs,
                       rule=messages.IDS_DEFAULT_RULE[a.loader.runtime],
                       meaning=messages.IDS_DEFAULT_LOST if lost else messages.IDS_DEFAULT_NORMAL,
                       fix=messages.IDS_DEFAULT_FIX_LOST if lost else
                       messages.IDS_DEFAULT_FIX_NORMAL),
                   {"default_ids": ids, "captured_inputs": a.inputs, "format": fmt.name,
                    "target_num_layers": a.target_layers, "runtime": a.loader.runtime,
                    "version": a.loader.version})


def _fc_width(a: FcAux, cfg: Mapping[str, Any], loader_width: Callable[[int], Finding]
              ) -> tuple[list[Finding], int]:
    """(the fc-width finding, if any; the aux layers fc takes: its width over the target's
    hidden size, else what the loader builds). `loader_width(k)`: the finding when fc takes
    k layers and the loader builds another number."""
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
        return [_count_mismatch(a, k, sent, cfg)], k
    if k != g.num_aux:
        return [loader_width(k)], k
    return [], k


def _hidden_in_mismatch(a: FcAux, cfg: Mapping[str, Any]) -> Finding:
    g = a.geometry
    return Finding(signals.FC_CONFIG_WIDTH_MISMATCH, ERROR, messages.HIDDEN_IN_MISMATCH.render(
        field="target_hidden_size" if cfg.get("target_hidden_size") else "hidden_size",
        hidden_in=g.hidden_in, target_hidden=a.target_hidden, loader=a.loader.name,
        num_aux=g.num_aux, fc_built=g.hidden_in * g.num_aux), a.details)


def _not_whole_layers(a: FcAux) -> Finding:
    return Finding(signals.FC_CONFIG_WIDTH_MISMATCH, ERROR, messages.FC_NOT_WHOLE_LAYERS.render(
        fc_in=a.fc_in, target_hidden=a.target_hidden, loader=a.loader.name), a.details)


def _count_mismatch(a: FcAux, k: int, sent: int, cfg: Mapping[str, Any]) -> Finding:
    what = (messages.SENT_FOR_IDS.format(ids=a.ids, sent=sent, when=a.read_on()) if a.ids else
            messages.SENT_BY_DEFAULT.format(inputs=a.inputs, sent=sent, layers=a.target_layers))
    g = a.geometry
    facts = dict(loader=a.loader.name, sized_by=_sized_by(a, cfg), num_aux=g.num_aux,
                 target_hidden=a.target_hidden, fc_built=g.num_aux * g.hidden_in, fc_layers=k,
                 sent=sent)
    fails_at_load = g.num_aux != k
    consequence = (messages.COUNT_FAILS_AT_LOAD if fails_at_load else
                   messages.COUNT_FAILS_AT_RUN).format(**facts)
    return Finding(signals.AUX_COUNT_MISMATCH, ERROR, messages.FC_COUNT_MISMATCH.render(
        what=what, fc_layers=k, fc_in=a.fc_in, target_hidden=a.target_hidden,
        consequence=consequence),
        {**a.details, "fc_layers": k, "target_sends": sent,
         "fails": "load" if fails_at_load else "first target-fed draft pass",
         **a.read_on_details()})


def _sized_by(a: FcAux, cfg: Mapping[str, Any]) -> str:
    """What this loader's fc width comes from, for this config (`loaders.num_aux`)."""
    if a.loader.aux_count == AuxCount.THREE:
        return "nothing in the config (always 3 aux layers)"
    keys = {AuxCount.CONFIG: ("num_aux_hidden_states",),
            AuxCount.CONFIG_OR_TOP: ("num_aux_layers", "num_aux_hidden_states")}
    for key in keys.get(a.loader.aux_count, ()):
        if cfg.get(key) is not None:
            return f"{key} = {cfg[key]}"
    return (f"the number of aux layer ids ({len(a.ids)})" if a.ids else
            "no ids: the default of 3 aux layers")


def _loader_width(a: FcAux, k: int, fmt: Format, source: Mapping[str, Any],
                  shapes: Mapping[str, tuple]) -> Finding:
    """fc is built for another number of aux layers than it takes. For a loader that sizes
    fc from the config, the fix proposed is the place in config.json where the replayed
    config path reads the count (`fix_replay`), in `details["fix"]` for `--fix`."""
    facts = dict(fc_layers=k, target_hidden=a.target_hidden, fc_in=a.fc_in,
                 loader=a.loader.name, num_aux=a.geometry.num_aux,
                 fc_built=a.geometry.num_aux * a.target_hidden)
    details: dict[str, Any] = {**a.details, "fc_layers": k}
    if a.loader.aux_count == AuxCount.THREE:
        return Finding(signals.FC_CONFIG_WIDTH_MISMATCH, ERROR,
                       messages.FC_LOADER_WIDTH.render(**facts), details)
    proven, rejected = replay_aux_count(fmt, source, shapes, a.loader.runtime,
                                        a.loader.version, k)
    if proven is None:
        fix = messages.FC_WIDTH_UNPROVEN.format(rejected="; ".join(rejected), **facts)
    else:
        details["fix"] = proven.to_dict()
        fix = messages.FC_WIDTH_PROVEN.format(
            key=proven.key, fc_layers=k, built=proven.replayed,
            rejected=messages.FC_WIDTH_REJECTED.format(rejected="; ".join(rejected))
            if rejected else "")
    return Finding(signals.FC_CONFIG_WIDTH_MISMATCH, ERROR,
                   messages.FC_CONFIG_WIDTH.render(fix=fix, **facts), details)


def _ids_out_of_range(a: FcAux) -> list[Finding]:
    if a.ids is None:
        return []
    n = a.target_layers
    lo, hi = capturable(a.loader.runtime, a.target_archs, n)
    bad = [i for i, x in zip(a.ids, a.id_inputs()) if not lo <= x <= hi]
    if not bad:
        return []
    return [Finding(signals.AUX_LAYER_IDS_OUT_OF_RANGE, ERROR, messages.IDS_OUT_OF_RANGE.render(
        ids=a.ids, when=a.read_on(), layers=n, loader=a.loader.name,
        rule=_id_rule(a.loader, a.target_archs), lo=lo, hi=hi, bad=bad),
        {"aux_layer_ids": a.ids, "out_of_range": bad, "target_num_layers": n,
         "capturable_inputs": [lo, hi], **a.read_on_details()})]


def _id_rule(loader: Loader, archs) -> str:
    if loader.runtime == VLLM:
        return messages.ID_RULE_VLLM
    return messages.ID_RULE_KEPT if keeps_ids(archs) else messages.ID_RULE_PLUS_ONE


def _capture_disabled(a: FcAux, fc_layers: int, target: Target) -> list[Finding]:
    if a.use_aux_flag or fc_layers <= 1:
        return []
    honored = a.loader.honors_use_aux_flag
    message = messages.CAPTURE_FLAG_OFF if honored else messages.CAPTURE_FLAG_IGNORED
    runner, both = "", {}
    if honored and a.loader.runtime == VLLM and v2_ignores_aux_flag(a.loader.version):
        # an error on both runners, for different reasons: say which is which
        default = default_runner(a.loader.version, target.config)
        judged = judged_runner(a.loader.version, target.config, a.loader.runner)
        which = _runner_note(a.loader, judged, default)
        runner = messages.CAPTURE_FLAG_RUNNERS.format(loader=a.loader.name, which=which)
        both = {"flag_read_on": [V1], "judged_runner": judged}
    return [Finding(signals.AUX_CAPTURE_DISABLED, ERROR if honored else WARNING, message.render(
        fc_layers=fc_layers, loader=a.loader.name, runner=runner),
        {"use_aux_hidden_state": a.use_aux_flag, "fc_layers": fc_layers,
         "honored_by_version": honored, "runtime": a.loader.runtime,
         "version": a.loader.version, **both})]


def _runner_note(loader: Loader, judged: str, default: str, only_other: bool = False,
                 other: list[str] | None = None) -> str:
    """The sentence naming the vLLM model runner a finding is judged on: the one
    --vllm-runner chose where it is not the release's default for the target, else that
    default. `only_other`: the finding holds only on the `other` runner(s), not this one."""
    if judged != default:
        template = (messages.MISREAD_ONLY_OTHER_CHOSEN if only_other else
                    messages.MISREAD_CHOSEN_RUNNER)
    else:
        template = (messages.MISREAD_ONLY_OTHER_RUNNER if only_other else
                    messages.MISREAD_DEFAULT_RUNNER)
    return template.format(loader=loader.name, runner=judged, default=default,
                           other="/".join(other or ()),
                           why=messages.MISREAD_WHY_V2 if judged == V1 else
                           messages.MISREAD_WHY_V1)


def check_id_meaning(fmt: Format, cfg: Mapping[str, Any], target: Target, loader: Loader
                     ) -> list[Finding]:
    """`aux.layer_ids_misread`: the layers the runtime captures are not the layers the
    draft was trained on, because the ids are read in another convention than they were
    written in, or ignored in favour of a default that differs."""
    want, wrong = misread_ids(fmt, cfg, target, loader)
    if not wrong:
        return []
    how = "; ".join(messages.MISREAD_READING.format(
        when=f"{when}: " if when else "", got=got,
        reading=f"ids {ids}" if ids is not None else "the default") for when, ids, got in wrong)
    runners = [RUNNER_OF[when] for when, _, _ in wrong if when in RUNNER_OF]
    default = default_runner(loader.version, target.config) if runners else None
    judged = judged_runner(loader.version, target.config, loader.runner) if runners else None
    # true only of a runner other than the one judged on (the release's default for this
    # target, or --vllm-runner's): a warning
    only_other = bool(runners) and len(runners) == len(wrong) and judged not in runners
    note = _runner_note(loader, judged, default, only_other, runners) if default else ""
    return [Finding(signals.AUX_LAYER_IDS_MISREAD, WARNING if only_other else ERROR,
                    messages.IDS_MISREAD.render(
        trained=want, ids=fmt.ids, loader=loader.name, how=how, runner=note,
        convention=messages.ID_CONVENTION.get(fmt.id_convention or "",
                                              messages.ID_CONVENTION_NONE),
        fix=messages.MISREAD_FIX[loader.runtime]),
        {"trained_inputs": want, "runtime_inputs": [g for _, _, g in wrong],
         "ids": fmt.ids, "id_convention": fmt.id_convention,
         **({"misread_on": runners, "default_runner": default} if runners else {}),
         **({"judged_runner": judged} if runners and loader.runner else {})})]
