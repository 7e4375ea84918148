"""Which layers a target captures for a draft's aux layer ids, in each runtime's
convention, and which layers the draft was trained on.

Aux layer ids are compared as the layers whose *input* the target captures (0: the
embeddings): SGLang's Llama-family targets capture the input of layer id + 1, DeepSeek
targets (0.5.16+) keep the ids unless the first is 1, vLLM's id k is the input of layer k.
"""
from __future__ import annotations

from typing import Any, Mapping

from ...runtimes import SGLANG, VLLM
from ...rules import aux
from .formats import Format
from .inputs import Target
from ...runtimes import parse_version
from .draft_params import eagle_config
from .loaders import SGLANG_NEWEST, AuxIds, Loader

# SGLang: each target architecture's own rule (`aux.SGLANG_TARGETS`, shared with the
# run-time audit): most store id + 1 (the input of the next layer), the DeepSeek family
# keeps the ids unless the first is 1 (from 0.5.16), gpt-oss keeps them when
# max(ids) == num_layers (0.5.20+). vLLM: id k is the input of layer k. Default without
# ids: [2, n // 2, n - 3].
ID_RULE_FACTS = ("sglang.llama_ids_plus_one", "sglang.deepseek_keep_ids", "sglang.default_ids",
                 "sglang.kimi_k25_text_config", "vllm.before_convention", "vllm.default_ids")


def sglang_family(target_archs) -> aux.Family:
    """The capture rule of the target's architecture (the common one when unknown)."""
    return next((aux.SGLANG_TARGETS[a] for a in target_archs if a in aux.SGLANG_TARGETS),
                aux.Family())


def keeps_ids(target_archs) -> bool:
    return sglang_family(target_archs).rule == aux.KEPT_UNLESS_FIRST_IS_ONE


def default_inputs(n: int) -> list[int]:
    """Both runtimes' default: the inputs of layers 2, n // 2 and n - 3 (EAGLE's own)."""
    return sorted(set(aux.default_ids(n)))


def id_inputs(runtime: str, version: str, target_archs, n: int, ids: list[int] | None
              ) -> list[int]:
    """For each id, the layer whose input the target captures (0: the embeddings, n: the
    final pre-norm state)."""
    rule = aux.KEPT if runtime == VLLM else sglang_family(target_archs).rule_at(
        parse_version(version))
    return aux.stored_ids(rule, ids, n)


def captured_inputs(runtime: str, version: str, target_archs, n: int,
                    ids: list[int] | None) -> list[int]:
    """Sorted layer inputs the target captures for these ids (each layer once; an input
    outside what the target can capture is never captured)."""
    lo, hi = capturable(runtime, target_archs, n)
    return sorted({i for i in id_inputs(runtime, version, target_archs, n, ids) if lo <= i <= hi})


def capturable(runtime: str, target_archs, n: int) -> tuple[int, int]:
    """The range of layer inputs the target can capture (inclusive)."""
    return 0, (n if runtime == VLLM else sglang_family(target_archs).max_input(n))


def sglang_ids_for(version: str, target_archs, n: int, inputs: list[int]) -> list[int] | None:
    """Ids that make SGLang capture exactly `inputs`; None when no list does."""
    for ids in ([i - 1 for i in inputs], list(inputs)):
        if captured_inputs(SGLANG, version, target_archs, n, ids) == sorted(set(inputs)):
            return ids
    return None


def trained_inputs(fmt: Format, target_archs, n: int, runtime: str, version: str
                   ) -> list[int]:
    """The layer inputs the draft was trained on: vLLM-convention ids as they are,
    SGLang-convention ids as SGLang serves them (the version judged, or the newest when
    judging for vLLM), no ids: the default."""
    if fmt.ids is None:
        return default_inputs(n)
    if fmt.id_convention == VLLM:
        return sorted(set(fmt.ids))
    v = version if runtime == SGLANG else SGLANG_NEWEST
    return captured_inputs(SGLANG, v, target_archs, n, fmt.ids)


ON_V1, ON_V2 = "on the V1 model runner", "on the V2 model runner"
RUNNER_OF = {ON_V1: "V1", ON_V2: "V2"}  # vllm_runner's names


def runtime_ids(view: Mapping[str, Any], loader: Loader) -> list[tuple[str, list[int] | None]]:
    """[(when, ids the target is given)] for each way this runtime may read the view:
    vLLM's V1 runner (0.22+) falls back to eagle_config's ids as they are, its V2 runner
    and older releases to the default."""
    if loader.runtime == SGLANG:
        return [("", eagle_config(view).get("eagle_aux_hidden_state_layer_ids") or None)]
    top = view.get("eagle_aux_hidden_state_layer_ids") or None
    if loader.aux_ids == AuxIds.NONE:
        return [("", None)]
    if top is not None:
        return [("", top)]
    ec_ids = eagle_config(view).get("eagle_aux_hidden_state_layer_ids") or None
    if loader.aux_ids == AuxIds.TOP_OR_V1 and ec_ids is not None:
        return [(ON_V1, ec_ids), (ON_V2, None)]
    return [("", None)]


def misread_ids(fmt: Format, cfg: Mapping[str, Any], target: Target, loader: Loader
                 ) -> tuple[list[int], list[tuple[str, list[int] | None, list[int]]]]:
    """(the layer inputs the draft was trained on, [(when, ids, the inputs they capture)]
    for each way the runtime may read the ids that captures other inputs)."""
    n = target.layers
    want = trained_inputs(fmt, target.archs, n, loader.runtime, loader.version)
    wrong = []
    for when, ids in runtime_ids(cfg, loader):
        got = captured_inputs(loader.runtime, loader.version, target.archs, n, ids)
        if got != want:
            wrong.append((when, ids, got))
    return want, wrong
