"""Settings that change the network: what the trainer used against what the runtime will
compute with (`norm_before_residual`, `norm_output`, `norm_before_fc`)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..runtimes import SGLANG, VLLM
from .formats import Format
from .loaders import DraftClass, Loader, eagle_config

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
        out.append(Setting("norm_before_residual", None, run_nbr, (
            "the speculators config does not say; vLLM reads a missing value as true "
            "(residual = hidden_norm(fc output)), while `speculators convert` and the config "
            "class default to false, and training defaults to true")))
    elif nbr is None:
        out.append(Setting("norm_before_residual", None, False, (
            "the speculators config does not say whether the residual is the normalised fc "
            "output (speculators' training default) or the raw one (the only choice SGLang "
            "has)")))
    elif bool(nbr) != run_nbr:
        out.append(Setting("norm_before_residual", bool(nbr), run_nbr, (
            f"the draft adds the {'normalised' if nbr else 'raw'} fc output as the residual; "
            + ("no SGLang version has this option (llama_eagle3 always adds the raw one), "
               if loader.runtime == SGLANG else
               f"{loader.name} adds the {'normalised' if run_nbr else 'raw'} one, ")
            + "and no rename or re-weighting makes them equal (RMSNorm is not linear)")))
    trained_no = bool(fmt.flat.get("norm_output"))
    if trained_no and not (loader.norm_output and view.get("norm_output")):
        out.append(Setting("norm_output", True, False, (
            f"the draft was trained to feed the post-norm state back to the next draft step "
            f"(EAGLE 3.1); {loader.name} feeds back the pre-norm state"
            + (" (its speculators translation drops the field)" if fmt.name == "speculators"
               and loader.runtime == VLLM else ""))))
    if fmt.draft == DraftClass.MLA and (view.get("norm_before_fc") or eagle_config(view).get(
            "norm_before_fc")):
        out.append(Setting("norm_before_fc", True, False, (
            f"the MLA draft of {loader.name} has no input_norm: the concatenated aux states "
            f"reach fc without the norm the draft was trained with")))
    return out
