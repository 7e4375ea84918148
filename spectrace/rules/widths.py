"""What the width of the hidden states reaching the EAGLE-3 draft means.

SGLang's `llama_eagle3.LlamaModel.forward` applies `fc` only when the incoming width differs
from the draft's hidden size; vLLM's `combine_hidden_states` only when the draft config's
`use_aux_hidden_state` is on. On a target-fed pass (extend / draft-extend) the width must
be fc's input (num_aux x target hidden); equal to the draft hidden size means fc was
skipped and the draft saw one layer. On the draft's own decode passes skipping fc is by
design. Pure functions over ints: no runtime, no tensors.
"""
from __future__ import annotations

from dataclasses import dataclass

from .. import messages, names
from ..findings import ERROR, Alert, Finding, FindingSpec
from ..runtimes import SGLANG, Runtime

SPECS = (
    FindingSpec(names.FC_BYPASS, ERROR,
                "a target-fed draft pass received the draft's own hidden width: the target "
                "sent one layer instead of the aux layers, so fc was skipped",
                floor="one target-fed draft pass of that width",
                message=messages.FC_BYPASS, alert=Alert(
                    "SpectraceFcBypass", "EAGLE-3 draft skipped fc on {{ $labels.instance }}",
                    "{{ $value }} target-fed draft passes had the draft's hidden width: the "
                    "target sent one hidden layer instead of the concatenated aux layers, so "
                    "fc was skipped and acceptance collapses without any error (finding "
                    "eagle3.fc_bypass).", counts=(names.METRIC_FC_BYPASS,))),
    FindingSpec(names.WIDTH_MISMATCH, ERROR,
                "a target-fed draft pass matched neither fc's input width nor the draft's "
                "hidden size (some aux layers missing)",
                floor="one target-fed draft pass of that width",
                message=messages.WIDTH_MISMATCH, alert=Alert(
                    "SpectraceWidthMismatch",
                    "EAGLE-3 draft input has the wrong width on {{ $labels.instance }}",
                    "{{ $value }} target-fed draft passes matched neither fc's input width nor "
                    "the draft hidden size (e.g. 2 of 3 aux layers captured).",
                    counts=(names.METRIC_WIDTH_MISMATCH,))),
)

DRAFT_DECODE_MODES = frozenset({"DECODE", "IDLE"})


def pass_kind(forward_mode_name: str) -> str:
    """`target_fed` for extend-like modes (EXTEND, MIXED, DRAFT_EXTEND, DRAFT_EXTEND_V2, ...),
    `draft_decode` for the draft's own steps."""
    return (names.PASS_DRAFT_DECODE if forward_mode_name in DRAFT_DECODE_MODES
            else names.PASS_TARGET_FED)


@dataclass(frozen=True)
class ExpectedWidths:
    fc_in: int          # fc.in_features = num_aux x target_hidden
    draft_hidden: int   # the draft's hidden size (width of its token embeddings)
    target_hidden: int
    num_aux: int

    def as_dict(self) -> dict[str, int]:
        return {"fc_in": self.fc_in, "draft_hidden": self.draft_hidden,
                "target_hidden": self.target_hidden, "num_aux": self.num_aux}


def expected_width(kind: str, exp: ExpectedWidths) -> int:
    """The width a pass of this kind should see: fc's input on target-fed passes, the
    draft's own hidden size on its decode passes (fc skipped by design)."""
    return exp.fc_in if kind == names.PASS_TARGET_FED else exp.draft_hidden


def check_width(kind: str, width: int, exp: ExpectedWidths,
                runtime: Runtime = SGLANG) -> Finding | None:
    """The finding for one draft pass, or None when the width is what the draft expects."""
    if kind != names.PASS_TARGET_FED or width == exp.fc_in:
        return None
    details = {"width": width, "pass_kind": kind, **exp.as_dict()}
    if width == exp.draft_hidden:
        return Finding(names.FC_BYPASS, ERROR, messages.FC_BYPASS.render(
            width=width, runtime=runtime.label, num_aux=exp.num_aux, fc_in=exp.fc_in,
            capture_method=runtime.capture_method), details)
    layers = width / exp.target_hidden if exp.target_hidden else float("nan")
    return Finding(names.WIDTH_MISMATCH, ERROR, messages.WIDTH_MISMATCH.render(
        width=width, layers=layers, fc_in=exp.fc_in, num_aux=exp.num_aux,
        target_hidden=exp.target_hidden), details)
