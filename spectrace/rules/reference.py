"""The acceptance a draft should reach (its reference) and the finding when a run stays
well below it: `acceptance.below_reference`, with the reference's source named.

Sources, first found wins:
- the operator's `SPECTRACE_EXPECTED_ACCEPT_LENGTH` (set for `spectrace report`, or on the
  server, which records it in its resource);
- the trainer's own evaluation next to the draft. Of the trainers read (docs/metrics.md,
  "A reference"), only speculators writes one there: `<save_path>/<epoch>/val_metrics.json`
  beside the epoch's `save_pretrained` weights (`speculators.train.checkpointer
  .save_val_metrics`), with `full_acc_<i>_epoch` the share of validation positions whose
  draft steps 0..i were all right (`speculators.models.metrics
  .compute_accuracy_single_step`), so the accepted tokens expected with K draft steps are
  their sum over i < K. SpecForge keeps its figure (`eval/simulated_acc_len`) in the
  training folder's `<run_id>.best_meta.json`, not in the exported draft; NVIDIA Model
  Optimizer writes none.

The rule, with a floor: at least FLOOR request-steps, the mean accept length at most
(1 - MARGIN) of the reference, and below it by SIGMAS standard errors of the mean (the
request-steps' accept lengths' spread).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Mapping

from .. import messages, names
from ..findings import WARNING, Finding, FindingSpec

FLOOR = 200     # request-steps before the run is compared with its reference
MARGIN = 0.15   # the mean accept length at most 85 % of the reference ...
SIGMAS = 3.0    # ... and that many standard errors below it
SETTING = "SPECTRACE_EXPECTED_ACCEPT_LENGTH"
SPECULATORS_FILE = "val_metrics.json"

# docs/metrics.md's section on the rule (its floor, where the reference comes from)
DOC = (
    f"`{names.BELOW_REFERENCE}` (warning) is raised when a run's mean accept length over at "
    f"least {FLOOR} request-steps is at most {1 - MARGIN:.0%} of the draft's "
    f"reference and {SIGMAS:g} standard errors below it "
    "(`spectrace/rules/reference.py`); the finding names the reference's source. "
    f"The reference, first found: `{SETTING}` set for `spectrace report`; the same "
    "setting on the server (recorded in its resource as "
    f"`{names.RES_EXPECTED_ACCEPT_LENGTH}`); the trainer's evaluation next to the draft. "
    "Of the trainers, only speculators writes one there: `val_metrics.json` in the "
    "epoch folder its `save_pretrained` writes the draft to "
    "(`speculators.train.checkpointer.BaseCheckpointer.save_val_metrics`), whose "
    "`full_acc_<i>_epoch` is the share of validation positions with draft steps 0..i "
    "all right (`speculators.models.metrics.compute_accuracy_single_step`): the "
    "reference is 1 + their sum over the served draft steps. SpecForge (0.2) keeps "
    "`eval/simulated_acc_len` in the training folder's `<run_id>.best_meta.json` "
    "(`specforge.training.checkpoint.CheckpointManager.update_best`), beside training "
    "state, not in the draft `specforge.export.to_sglang` writes; NVIDIA Model "
    "Optimizer (0.47) writes no acceptance figure. For those, set the figure.",
)

SPEC = FindingSpec(
    names.BELOW_REFERENCE, WARNING,
    "the run's mean accept length well below the acceptance its draft should reach (the "
    f"operator's {SETTING}, or the trainer's validation figures); it names the source",
    floor=f"{FLOOR} request-steps; at most {1 - MARGIN:.0%} of the reference and "
          f"{SIGMAS:g} standard errors below it",
    message=messages.BELOW_REFERENCE, doc_title="A reference", doc=DOC)


@dataclass(frozen=True)
class Reference:
    """A mean accept length (bonus token included) and where it came from, in words."""
    accept_length: float
    source: str
    kind: str  # "operator" | "trainer"


def from_setting(value: float, where: str) -> Reference:
    return Reference(float(value), f"{SETTING}={value:g} ({where})", "operator")


def from_speculators(metrics: Mapping, positions: int, path: str) -> Reference | None:
    """speculators' validation figures truncated to the served draft steps, or None
    where the file lacks one of them (or the served steps are unknown)."""
    if positions < 1 or not isinstance(metrics, Mapping):
        return None
    accs = [metrics.get(f"full_acc_{i}_epoch") for i in range(positions)]
    if not all(isinstance(a, (int, float)) and not isinstance(a, bool)
               and math.isfinite(a) and 0 <= a <= 1 for a in accs):
        return None
    return Reference(1 + sum(accs), f"speculators' validation ({path}: full_acc_0.."
                     f"{positions - 1}_epoch, {positions} draft steps)", "trainer")


def judge(ref: Reference | None, lengths: Mapping) -> Finding | None:
    """The finding, or None. `lengths`: request-steps by accept length."""
    if ref is None:
        return None
    counts = {int(k): v for k, v in lengths.items()
              if str(k).isdigit() and isinstance(v, (int, float)) and v > 0}
    n = sum(counts.values())
    if n < FLOOR:
        return None
    mean = sum(k * v for k, v in counts.items()) / n
    var = sum(v * (k - mean) ** 2 for k, v in counts.items()) / max(n - 1, 1)
    se = math.sqrt(var / n)
    if mean > (1 - MARGIN) * ref.accept_length or ref.accept_length - mean < SIGMAS * se:
        return None
    facts = dict(length=f"{mean:.2f}", drafts=int(n), reference=f"{ref.accept_length:.2f}",
                 source=ref.source, share=f"{mean / ref.accept_length:.0%}")
    return SPEC.found({
        **facts, "length": round(mean, 4), "reference": round(ref.accept_length, 4),
        "reference_kind": ref.kind, "floor": FLOOR, "margin": MARGIN}, **facts)
