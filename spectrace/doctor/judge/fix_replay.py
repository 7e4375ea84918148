"""A config fix proven before the doctor proposes or writes it: each place the fix could go
is applied to a copy of config.json, and the runtime's config path is replayed on that copy
(`runtime_view`: for vLLM and a speculators config, `transformer_layer_config` plus what
`update_eagle3` copies), then what the draft class builds from it (`num_aux`). A place that
would not change what the runtime builds is never proposed: vLLM never reads the top level
of a speculators config.json for fc's width (vllm#54526, speculators#1065).

Pure: the replay is the doctor's own model of the config path (no runtime is imported);
tests/test_doctor_fix_replay.py checks it against vLLM's real config path."""
from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any, Mapping

from .draft_params import num_aux
from .formats import Format, recognise
from .runtime_view import runtime_view

AUX_COUNT = "num_aux_hidden_states"


@dataclass(frozen=True)
class ProvenFix:
    """A value for one key of config.json (`path`: its keys from the top), and what the
    replayed config path builds with it; `rejected`: the places tried first that it
    would not read."""

    path: tuple[str, ...]
    value: Any
    replayed: str
    rejected: tuple[str, ...] = ()

    @property
    def key(self) -> str:
        return ".".join(self.path)

    def to_dict(self) -> dict[str, Any]:
        return {"set": {self.key: self.value}, "replayed": self.replayed,
                "rejected": list(self.rejected)}


def with_value(cfg: Mapping[str, Any], path: tuple[str, ...], value: Any) -> dict:
    """A deep copy of `cfg` with `value` at `path` (missing objects on the way created)."""
    out = copy.deepcopy(dict(cfg))
    node = out
    for k in path[:-1]:
        if not isinstance(node.get(k), dict):
            node[k] = {}
        node = node[k]
    node[path[-1]] = value
    return out


def aux_count_places(cfg: Mapping[str, Any]) -> list[tuple[str, ...]]:
    """Where a config.json may say fc's number of aux layers: the top level, and in a
    speculators config the decoder's own `transformer_layer_config`."""
    places = [(AUX_COUNT,)]
    if isinstance(cfg.get("transformer_layer_config"), Mapping):
        places.append(("transformer_layer_config", AUX_COUNT))
    return places


def replay_aux_count(fmt: Format, cfg: Mapping[str, Any], shapes: Mapping[str, tuple],
                     runtime: str, version: str, fc_layers: int
                     ) -> tuple[ProvenFix | None, tuple[str, ...]]:
    """(the first place where `num_aux_hidden_states = fc_layers` makes the runtime build
    fc for `fc_layers` aux layers, or None; every place tried and rejected, with what the
    replay built there)."""
    rejected: list[str] = []
    for path in aux_count_places(cfg):
        new = with_value(cfg, path, fc_layers)
        view = runtime_view(recognise(new, shapes) or fmt, new, runtime, version)
        key = ".".join(path)
        if view.config is None:
            rejected.append(f"`{key}`: the runtime cannot read that config ({view.problem})")
            continue
        built = num_aux(view.config, view.loader)
        what = f"{view.loader.name} builds fc for {built} aux layers"
        if built == fc_layers:
            return ProvenFix(path, fc_layers, what, tuple(rejected)), tuple(rejected)
        rejected.append(f"`{key}`: {what}, unchanged")
    return None, tuple(rejected)
