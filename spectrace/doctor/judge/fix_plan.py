"""The plan of `--fix`'s corrected copy for one runtime version: the translated config
(`translation`) with the fields its strict config class refuses repaired (`strict_fields`),
the key renames and keys left out, `d2t` rewritten as offsets, and what cannot be fixed. The plan is judged as the copy it describes (`checkpoint.judge`):
whatever error would remain becomes a refusal."""
from __future__ import annotations

import json
from typing import Any, Mapping

from ... import signals
from ...runtimes import VLLM
from .checkpoint import Judgement, d2t_key, judge
from .formats import Format, FormatName, recognise
from .inputs import CheckpointView, Target
from .layer_ids import misread_ids
from .draft_params import expected_params
from .fix_replay import replay_aux_count, with_value
from .load_replay import RouteKind, route_key
from .loaders import Loader, UnknownKeys
from .runtime_view import runtime_view
from .strict_fields import check_field_types
from .trained_settings import settings
from .translation import (Change, ChangeKind, Plan, borrow_target_head, fc_shape,
                          plan_sglang_ids, suggest_renames, translate_config,
                          untie_trained_head)
from ...rules.vocab import absolute_to_offsets, t2d_reading
from ...rules.weights import is_network_weight


def plan_fix(ck: CheckpointView, target: Target, runtime: str, version: str,
             runner: str | None = None) -> tuple[Plan, CheckpointView, Judgement]:
    """The corrected copy for `runtime` `version`: (plan, the copy as the checks see it,
    the judgement of that copy, on vLLM's model runner `runner`, default the
    release's). The plan's refusals say what cannot be fixed: everything
    the translation does not reach stays an error of the copy and is listed there."""
    orig = judge(ck, target, runtime, version, runner)
    fmt = orig.format
    plan = translate_config(fmt, ck.config, runtime, version, target, ck.shapes)
    new_fmt = recognise(plan.config, ck.shapes) or fmt
    if new_fmt.name != FormatName.SPECULATORS:  # vLLM's SpeculatorsConfig is not strict
        _fix_field_types(plan, runtime, version)
    view = runtime_view(new_fmt, plan.config, runtime, version)
    if view.config is None:
        plan.refusals.append(view.problem or "the runtime cannot read the translated config")
        return plan, ck, orig
    # speculators -> SGLang: the ids become eagle_config ids for this target
    _fix_aux(plan, fmt, target, runtime, version, view.loader, ck)
    _fix_aux_count(plan, orig, fmt, ck, runtime, version)
    untie_trained_head(plan, runtime, ck.shapes)
    borrow_target_head(plan, runtime, ck.shapes)
    view = runtime_view(recognise(plan.config, ck.shapes) or fmt, plan.config, runtime,
                        version)
    cfg, loader = view.config, view.loader
    _refuse_settings(plan, fmt, cfg, loader)
    _plan_keys(plan, orig, fmt, ck, cfg, loader)
    copy_d2t = _plan_d2t(plan, orig, ck, target)
    shapes = {plan.rename(k): v for k, v in ck.shapes.items() if k not in plan.drops}
    dtypes = {plan.rename(k): v for k, v in ck.dtypes.items() if k not in plan.drops}
    copy_ck = CheckpointView(plan.config, shapes, dtypes,
                             {plan.rename(k): v for k, v in copy_d2t.items()
                              if k not in plan.drops}, ck.t2d_hot)
    after = judge(copy_ck, target, runtime, version, runner)
    plan.refusals += [f"{f.code}: {f.message}" for f in after.errors
                      if not any(f.message in r or r in f.message for r in plan.refusals)]
    return plan, copy_ck, after


def _plan_keys(plan: Plan, orig: Judgement, fmt: Format, ck: CheckpointView,
               cfg: Mapping[str, Any], loader: Loader) -> None:
    """Keys renamed to what the loader reads, and leftovers left out for a loader that
    refuses unknown keys (a `d2t` it has no place for is refused instead)."""
    params = expected_params(cfg, loader)
    for old, new in suggest_renames(fmt, ck.shapes, params, loader, cfg).items():
        plan.renames[old] = new
        plan.changes.append(Change(ChangeKind.RENAME, f"`{old}` -> `{new}`",
                                   _rename_code(orig, old)))
    if loader.unknown_keys != UnknownKeys.RAISES:
        return
    for key in ck.shapes:
        r = route_key(plan.rename(key), params, loader, cfg)
        if r.kind != RouteKind.DROPPED or key in plan.renames:
            continue
        if "d2t" in key and any(ck.d2t.get(key) or [1]):
            plan.refusals.append(f"`{key}` maps draft ids to other target ids, but "
                                 f"{loader.name} has no draft-to-target map when the "
                                 f"draft and target vocabularies are the same size")
        elif not is_network_weight(key):
            plan.drops.append(key)
            plan.changes.append(Change(
                ChangeKind.DROP, f"`{key}` left out ({loader.name} refuses unknown keys; not "
                                 f"part of the network)", signals.WEIGHTS_UNUSED_KEYS))


def _plan_d2t(plan: Plan, orig: Judgement, ck: CheckpointView, target: Target
              ) -> dict[str, list[int]]:
    """The copy's integer maps: a `d2t` the original's judgement found absolute rewritten as
    offsets when nothing leaves that in doubt, else refused."""
    copy_d2t = dict(ck.d2t)
    key = d2t_key(ck, orig.view, orig.loader) if orig.view is not None else None
    if not any(f.code == signals.VOCAB_D2T_ABSOLUTE for f in orig.findings) or \
            key not in ck.d2t:
        return copy_d2t
    offsets = absolute_to_offsets(ck.d2t[key], target.vocab, ck.t2d_hot)
    reading = t2d_reading(ck.d2t[key], ck.t2d_hot)
    if offsets is None:
        why = (f"no `t2d` marking {len(ck.d2t[key])} ids to compare with, and its values "
               f"are in ascending order, as offsets would be" if reading is None else
               f"`t2d` marks exactly these ids, but not all are below the target's "
               f"vocabulary size {target.vocab}" if reading == "absolute" else
               "`t2d` marks neither these ids nor i + d2t[i]")
        plan.refusals.append(f"`d2t` looks like absolute target ids, but nothing confirms "
                             f"it ({why}): rebuild it from your training data "
                             f"(d2t[i] = hot_id[i] - i)")
        return copy_d2t
    confirmed = " (t2d confirms the absolute ids)" if reading == "absolute" else ""
    plan.d2t_offsets, copy_d2t[key] = key, offsets
    plan.changes.append(Change(ChangeKind.D2T, f"`{key}` rewritten as offsets (d2t[i] - i)"
                                               f"{confirmed}", signals.VOCAB_D2T_ABSOLUTE))
    return copy_d2t


def _rename_code(orig: Judgement, key: str) -> str:
    """The finding a rename answers: the dropped key, or the parameter it leaves empty."""
    for f in orig.findings:
        if f.code == signals.WEIGHTS_UNUSED_KEYS and key in f.details.get("keys", []):
            return f.code
    return signals.WEIGHTS_MISSING_PARAMS


def _fix_aux(plan: Plan, fmt: Format, target: Target, runtime: str, version: str,
             loader: Loader, ck: CheckpointView) -> None:
    cfg = plan.config
    ec = cfg.get("eagle_config") if isinstance(cfg.get("eagle_config"), dict) else None
    fc = fc_shape(ck.shapes)
    if ec is not None and ec.get("use_aux_hidden_state") is False and fc and len(fc) == 2 \
            and fc[1] // max(target.hidden, 1) > 1:
        ec["use_aux_hidden_state"] = True
        plan.changes.append(Change(
            ChangeKind.CONFIG, f"eagle_config.use_aux_hidden_state: false -> true (fc takes "
                               f"{fc[1] // target.hidden} target layers)",
            signals.AUX_CAPTURE_DISABLED))
    want, wrong = misread_ids(fmt, cfg, target, loader)
    if not wrong:
        return
    if runtime == VLLM:
        cfg["eagle_aux_hidden_state_layer_ids"] = list(want)
        plan.changes.append(Change(
            ChangeKind.CONFIG, f"eagle_aux_hidden_state_layer_ids: {want} at the top level "
                               f"(vLLM's convention: the inputs of the layers the draft was "
                               f"trained on)", signals.AUX_LAYER_IDS_MISREAD))
        return
    ids = plan_sglang_ids(plan, version, target, want)
    if ids is None:
        return
    ec = cfg.setdefault("eagle_config", {})
    ec["eagle_aux_hidden_state_layer_ids"] = ids
    plan.changes.append(Change(
        ChangeKind.CONFIG, f"eagle_config.eagle_aux_hidden_state_layer_ids: {ids} (SGLang's "
                           f"convention for the inputs of layers {want})",
        signals.AUX_LAYER_IDS_MISREAD))


def _fix_aux_count(plan: Plan, orig: Judgement, fmt: Format, ck: CheckpointView,
                   runtime: str, version: str) -> None:
    """fc's aux-layer count where the replayed config path reads it (`fix_replay`), replayed
    again on the copy's own config; a count no place in the file changes is a refusal."""
    for f in orig.findings:
        if f.code != signals.FC_CONFIG_WIDTH_MISMATCH or "fix" not in f.details:
            continue
        k = f.details["fc_layers"]
        proven, rejected = replay_aux_count(fmt, plan.config, ck.shapes, runtime, version, k)
        if proven is None:
            plan.refusals.append(f"{f.code}: no place in config.json makes the runtime build "
                                 f"fc for {k} aux layers ({'; '.join(rejected)})")
            continue
        plan.config = with_value(plan.config, proven.path, proven.value)
        also = f"; not elsewhere: {'; '.join(proven.rejected)}" if proven.rejected else ""
        plan.changes.append(Change(ChangeKind.CONFIG, f"{proven.key}: {proven.value} (replayed "
                                   f"on a copy: {proven.replayed}{also})", f.code))


def _fix_field_types(plan: Plan, runtime: str, version: str) -> None:
    """The repair each config.field_type names: a null dropped (the class default applies), a
    number or boolean written as its type. One without a repair stays an error of the copy,
    and so a refusal."""
    for f in check_field_types(plan.config, runtime, version):
        repair = f.details["repair"]
        if repair is None:
            continue
        field, was = f.details["field"], json.dumps(f.details["value"])
        if "drop" in repair:
            del plan.config[field]
            text = f"`{field}` ({was}) removed: {f.details['config_class']}'s default applies"
        else:
            plan.config[field] = repair["set"][field]
            text = f"`{field}`: {was} -> {json.dumps(repair['set'][field])}"
        plan.changes.append(Change(ChangeKind.CONFIG, text + f" ({f.details['expected']} "
                                   f"declared)", signals.CONFIG_FIELD_TYPE))


def _refuse_settings(plan: Plan, fmt: Format, cfg: Mapping[str, Any], loader: Loader) -> None:
    for s in settings(fmt, cfg, loader):
        plan.refusals.append(f"`{s.name}`: {s.why}")
