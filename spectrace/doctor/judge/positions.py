"""Positions and attention: the draft's `max_position_embeddings`, RoPE (`rope_theta`,
`rope_scaling` / `rope_parameters`) and sliding window, against what the trainer recorded,
the target, the context length the pair will be served at, and what the runtime's draft
class does with each setting (docs/doctor.md "Positions and attention" cites the sources).

- SGLang (every release read): the draft's rotary embedding follows its config
  (`rope_parameters`, else `rope_theta` / `rope_scaling`: models/llama.py); a draft whose
  context (`max_position_embeddings`, times a YaRN factor without
  `original_max_position_embeddings`) is shorter than the target's refuses to start unless
  `SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN=1`, which then overwrites the draft's
  `max_position_embeddings` (configs/model_config.py `_derive_context_length`). Its
  `LlamaForCausalLMEagle3` never reads `sliding_window` from the config: a window comes only
  from `--speculative-draft-window-size` (0.5.12+, models/llama_eagle3.py).
- vLLM (0.11 to 0.33): the draft's `LlamaAttention` takes `config.sliding_window` for each
  layer that `layer_types` marks `sliding_attention` (models/llama.py, draft-relative via
  `target_layer_count`), and nothing without `layer_types`; rotary from the config as SGLang.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

from ... import messages, signals
from ...findings import INFO, WARNING, Finding, FindingSpec
from ...runtimes import SGLANG, VLLM
from .formats import Format, FormatName
from .inputs import Target
from ...runtimes import parse_version
from .loaders import DraftClass, Loader
from .rope import differences, rope_of


# The findings the doctor raises here, declared once (`doctor.judge.codes` gathers them;
# docs/doctor.md's table of codes is written from them).
SPECS: tuple[FindingSpec, ...] = (
    FindingSpec(signals.POSITIONS_BEYOND_DRAFT, WARNING,
                "the draft's context is shorter than the context the pair is served at"),
    FindingSpec(signals.POSITIONS_ROPE_CHANGED, WARNING,
                "the draft's RoPE differs from the target's (information where it cannot "
                "matter at the served context)"),
)

SGLANG_WINDOW_FLAG_FROM = (0, 5, 12)  # --speculative-draft-window-size
# Model Optimizer's `eagle_export_rope_scaling` default (modelopt/torch/speculative/config.py)
MODELOPT_EXPORT_ROPE = {"rope_type": "yarn", "factor": 32.0, "original_max_position_embeddings": 2048}


def draft_context(cfg: Mapping[str, Any]) -> int | None:
    """The context length SGLang derives for the draft (utils/hf_transformers/common.py
    `get_context_length`): max_position_embeddings, times a rope factor unless the scaling
    names original_max_position_embeddings or is llama3."""
    mpe = cfg.get("max_position_embeddings")
    if type(mpe) is not int:
        return None
    r = rope_of(cfg)
    if r.scaling and "original_max_position_embeddings" not in r.scaling and r.kind != "llama3":
        return int(mpe * float(r.scaling.get("factor", 1)))
    return mpe


def serving_context(target: Target) -> int | None:
    """The context the pair is served at: the doctor's --context-length, else the target's
    own (what both runtimes default to)."""
    if target.context is not None:
        return target.context
    v = target.config.get("max_position_embeddings")
    return v if type(v) is int else None


@dataclass(frozen=True)
class Window:
    size: int
    layers: list[int]     # the draft layers trained windowed
    marked: bool          # layer_types marks them (what vLLM reads)


def window_of(cfg: Mapping[str, Any]) -> Window | None:
    """The sliding window the draft was trained with, from its (layer) config."""
    size = cfg.get("sliding_window")
    if type(size) is not int or size <= 0 or cfg.get("use_sliding_window") is False:
        return None
    types = cfg.get("layer_types")
    n = cfg.get("num_hidden_layers") or 1
    if isinstance(types, list):
        layers = [i for i, t in enumerate(types) if t == "sliding_attention"]
        return Window(size, layers, True) if layers else None
    return Window(size, list(range(int(n))), False)


def check_positions(fmt: Format, cfg: Mapping[str, Any], target: Target, loader: Loader
                    ) -> list[Finding]:
    """positions.beyond_draft, positions.rope_changed and the sliding window's
    config.setting_ignored, for the config the runtime reads (`cfg`) and the settings the
    trainer recorded (`fmt.flat`)."""
    trained = {**cfg, **fmt.flat}
    context = serving_context(target)
    out = []
    out += _beyond_draft(cfg, context, loader)
    out += _rope(fmt, trained, target, context, loader)
    out += _window(trained, cfg, context, loader)
    return out


def _beyond_draft(cfg: Mapping[str, Any], context: int | None, loader: Loader) -> list[Finding]:
    have = draft_context(cfg)
    if have is None or context is None or context <= have:
        return []
    how = (messages.BEYOND_SGLANG if loader.runtime == SGLANG else messages.BEYOND_VLLM)
    return [Finding(signals.POSITIONS_BEYOND_DRAFT, WARNING, messages.POSITIONS_BEYOND.render(
        draft=have, context=context, loader=loader.name, how=how),
        {"draft_context": have, "serving_context": context,
         "max_position_embeddings": cfg.get("max_position_embeddings"),
         "runtime": loader.runtime, "version": loader.version})]


def _rope(fmt: Format, trained: Mapping[str, Any], target: Target, context: int | None,
          loader: Loader) -> list[Finding]:
    draft, tgt = rope_of(trained), rope_of(target.config)
    differ = differences(draft, tgt)  # read from either spelling on either side
    if not differ:
        return []
    facts = {"draft_rope": draft.describe(differ), "target_rope": tgt.describe(differ),
             "differ": differ, "serving_context": context, "runtime": loader.runtime,
             "version": loader.version}
    s = draft.scaling or {}
    original = s.get("original_max_position_embeddings")
    if (fmt.name == FormatName.MODELOPT and draft.kind == "yarn" and tgt.scaling is None
            and original):
        reach = int(float(s.get("factor", 1)) * int(original))
        beyond = context is not None and context > reach
        within = context is not None and context <= int(original)
        where = (messages.ROPE_WITHIN.format(context=context, original=original) if within else
                 messages.ROPE_EXTENDED.format(context=context, original=original, reach=reach)
                 if not beyond else
                 messages.ROPE_BEYOND_REACH.format(context=context, reach=reach))
        return [Finding(signals.POSITIONS_ROPE_CHANGED, WARNING if beyond else INFO,
                        messages.ROPE_MODELOPT.render(draft=facts["draft_rope"],
                                                      target=facts["target_rope"],
                                                      loader=loader.name, where=where),
                        {**facts, "yarn_reach": reach, "exported_by": "modelopt"})]
    return [Finding(signals.POSITIONS_ROPE_CHANGED, INFO, messages.ROPE_DIFFERS.render(
        draft=facts["draft_rope"], target=facts["target_rope"], loader=loader.name), facts)]


def honours_window(cfg: Mapping[str, Any], loader: Loader) -> bool:
    """Whether the runtime's draft class runs the config's sliding window."""
    if loader.runtime == VLLM:
        w = window_of(cfg)
        # the Qwen3 draft's config class (transformers' Qwen3Config) keeps sliding_window
        # only with use_sliding_window: true
        return bool(w and w.marked) and (loader.draft != DraftClass.QWEN3
                                         or cfg.get("use_sliding_window") is True)
    return False


def _window(trained: Mapping[str, Any], cfg: Mapping[str, Any], context: int | None,
            loader: Loader) -> list[Finding]:
    w = window_of(trained)
    if w is None or honours_window(cfg, loader):
        return []
    flag = (loader.runtime == SGLANG
            and parse_version(loader.version) >= SGLANG_WINDOW_FLAG_FROM)
    if loader.runtime == SGLANG:
        fix = (messages.WINDOW_FIX_FLAG.format(size=w.size) if flag else
               messages.WINDOW_FIX_UPGRADE.format(size=w.size))
        how = messages.WINDOW_SGLANG.format(loader=loader.name)
    else:
        fix = messages.WINDOW_FIX_LAYER_TYPES.format(size=w.size)
        how = messages.WINDOW_VLLM.format(loader=loader.name)
    longer = context is None or context > w.size
    served = (messages.WINDOW_SERVED_WITHIN if not longer else messages.WINDOW_SERVED_UNKNOWN
              if context is None else messages.WINDOW_SERVED_LONGER).format(context=context,
                                                                             size=w.size)
    return [Finding(signals.CONFIG_SETTING_IGNORED, WARNING if longer else INFO,
                    messages.WINDOW_IGNORED.render(size=w.size, layers=w.layers,
                                                   loader=loader.name, how=how, served=served,
                                                   fix=fix),
                    {"setting": "sliding_window", "trained": w.size, "runtime": None,
                     "layers": w.layers, "serving_context": context, "fixable_by": "launch"
                     if flag else "runtime", "runtime_name": loader.runtime,
                     "version": loader.version})]
