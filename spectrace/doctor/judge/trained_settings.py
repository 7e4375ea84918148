"""Settings that change the network: what the trainer used against what the runtime will
compute with (`norm_before_residual`, `norm_output`, `norm_before_fc`)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

from ... import messages
from ...runtimes import SGLANG, VLLM
from .formats import Format, FormatName
from .draft_params import eagle_config
from .loaders import DraftClass, Loader

@dataclass(frozen=True)
class Setting:
    """A config setting that changes the network: what the trainer used and what the
    runtime will compute with."""

    name: str
    trained: Any
    runtime: Any
    why: str


def settings(fmt: Format, view: Mapping[str, Any], loader: Loader) -> list[Setting]:
    """Settings where the runtime computes a different network than the one trained
    (keys the runtime does not load are reported by the weights check instead)."""
    out = []
    nbr = fmt.norm_before_residual
    run_nbr = bool(view.get("norm_before_residual", False)) and loader.norm_before_residual
    if nbr is None and loader.runtime == VLLM:
        out.append(Setting("norm_before_residual", None, run_nbr, messages.NBR_UNSAID_VLLM))
    elif nbr is None:
        out.append(Setting("norm_before_residual", None, False, messages.NBR_UNSAID_SGLANG))
    elif bool(nbr) != run_nbr:
        served = (messages.NBR_SERVED_SGLANG if loader.runtime == SGLANG else
                  messages.NBR_SERVED.format(loader=loader.name,
                                             served="normalised" if run_nbr else "raw"))
        out.append(Setting("norm_before_residual", bool(nbr), run_nbr, messages.NBR_DIFFERS.format(
            trained="normalised" if nbr else "raw", served=served)))
    trained_no = bool(fmt.flat.get("norm_output"))
    if trained_no and not (loader.norm_output and view.get("norm_output")):
        dropped = fmt.name == FormatName.SPECULATORS and loader.runtime == VLLM
        out.append(Setting("norm_output", True, False, messages.NORM_OUTPUT_IGNORED.format(
            loader=loader.name, dropped=messages.NORM_OUTPUT_DROPPED if dropped else "")))
    if fmt.draft == DraftClass.MLA and (view.get("norm_before_fc") or eagle_config(view).get(
            "norm_before_fc")):
        out.append(Setting("norm_before_fc", True, False,
                           messages.MLA_NO_INPUT_NORM.format(loader=loader.name)))
    return out
