"""SGLang's DFlash and DSpark drafts (0.5.23: `models/dflash.py`, `models/dspark.py`): like
EAGLE-3 they read the target's aux hidden states, concatenated, through `fc`
(`DFlashDraftModel.project_target_hidden`, which DSpark's drafts inherit).

- Widths: `project_target_hidden` is wrapped (`WIDTH_POINTS`; every call is a target-fed
  pass, at prefill and after each verify). A healthy width is counted once per width, as
  the EAGLE-3 hook does; any other width SGLang itself refuses at once (`ValueError: DFLASH
  target_hidden feature dim mismatch`), so spectrace adds no finding of its own for it.
  Where DSpark installs the projection inside the target's forward (its pre-gather
  projection), CUDA-graph replays do not call it: only eager passes are counted.
- The aux capture audit, once per worker at its first step (`audit`): SGLang switches the
  target's capture on from the draft's config while building the target's model runner
  (`configure_aux_hidden_state_capture`) with the ids it resolves
  (`spec_aux_hidden_state._resolve_dflash_aux_hidden_state`): the draft's
  `dflash_config.target_layer_ids` (DSPARK: `dspark_target_layer_ids` first), each a layer
  *output*; with none, its selection for the *runtime* target's depth, even when the draft
  says it was trained on another (`num_target_layers`: SGLang only logs a warning). The
  target stores them by its family's rule (`rules.aux.SGLANG_BLOCK_DRAFT_TARGETS`: + 1
  for every family there).

The trained ids are read as the draft model itself reads them: its own parse of the config
(`draft_config`, SGLang's `DFlashDraftConfig`) and SGLang's `build_target_layer_ids`.
"""
from __future__ import annotations

from .. import messages
from ..rules.aux import (
    SGLANG_BLOCK_DRAFT_TARGETS, TrainedIds, audit_block_draft_capture,
)
from ..rules.widths import ExpectedWidths
from ..findings import Finding
from ..patching import WrapPoint
from ..process import recorder
from .. import signals
from ..runtimes import SGLANG
from .draft_checks import capturing, check_pass, count_if_healthy, draft_state
from .sglang_target import capture_state

DSPARK_IDS = "dspark_target_layer_ids"  # DSPARK's own key, read before dflash_config's


def is_block_draft(model) -> bool:
    """A DFlash-style draft: `fc` over `num_context_features` target layers, and SGLang's
    parse of its config (DFlashDraftModel and its DSpark subclasses)."""
    return (model is not None and hasattr(model, "fc") and hasattr(model, "draft_config")
            and isinstance(getattr(model, "num_context_features", None), int))


def expected_widths(model) -> ExpectedWidths:
    """fc takes `num_context_features` layers of the draft's own hidden size (SGLang
    builds it so: the target's hidden size must equal the draft's)."""
    hidden = int(model.config.hidden_size)
    fc = model.fc
    fc_in = int(getattr(fc, "in_features", None) or fc.input_size)
    return ExpectedWidths(fc_in, hidden, hidden, int(model.num_context_features))


# -- widths ---------------------------------------------------------------------------------
def _before_project(instance, target_hidden) -> None:
    if target_hidden is None or target_hidden.ndim != 2:
        return  # SGLang raises on these itself
    if target_hidden.is_cuda and capturing():
        return  # DSpark's pre-gather projection inside the target's CUDA-graph capture
    width = int(target_hidden.shape[-1])
    rec = recorder()
    st = draft_state(instance, rec, expected_widths)
    if count_if_healthy(rec, st, width):
        return
    if width != st.expected.fc_in:
        return  # SGLang raises ValueError on this width right after this hook
    check_pass(rec, st, width, signals.PASS_TARGET_FED, width, SGLANG)


WIDTH_POINTS = tuple(
    WrapPoint(f"{cls}.project_target_hidden", "dflash.project_target_hidden",
              before=_before_project, reads=("target_hidden",), required=False)
    for cls in ("DFlashDraftModel", "DFlashLagunaForCausalLM"))


# -- the aux capture audit ------------------------------------------------------------------
def _build_target_layer_ids(num_target_layers: int, num_draft_layers: int):
    """SGLang's own default selection (None where this release has none)."""
    try:
        from sglang.srt.speculative.dflash_utils import build_target_layer_ids
        return [int(i) for i in build_target_layer_ids(num_target_layers, num_draft_layers)]
    except Exception:  # noqa: BLE001 - another release, or a depth it refuses: not judged
        return None


def trained_ids(draft_model, algorithm: str, num_layers: int) -> TrainedIds:
    """The target layers the draft was trained on, as its config names them."""
    parsed = draft_model.draft_config
    if algorithm == "DSPARK":
        ids = getattr(draft_model.config, DSPARK_IDS, None)
        if ids:
            ids = [int(i) for i in ids]
            return TrainedIds(ids, messages.ASKED_BLOCK_IDS.format(key=DSPARK_IDS, ids=ids))
    if parsed.target_layer_ids is not None:
        ids = [int(i) for i in parsed.target_layer_ids]
        return TrainedIds(ids, messages.ASKED_BLOCK_IDS.format(
            key="dflash_config.target_layer_ids", ids=ids))
    depth = parsed.num_target_layers
    draft_layers = parsed.num_hidden_layers
    if depth is None or draft_layers is None:
        return TrainedIds(None, "no target_layer_ids and no num_target_layers")
    ids = _build_target_layer_ids(int(depth), int(draft_layers))
    return TrainedIds(ids, messages.ASKED_BLOCK_DEPTH.format(
        trained=depth, ids=ids, num_layers=num_layers))


def algorithm_of(draft_model, algorithm: str | None = None) -> str:
    """DSPARK or DFLASH: the algorithm given, else the draft's class (DSpark's drafts)."""
    if algorithm is not None and algorithm.upper() in ("DFLASH", "DSPARK"):
        return algorithm.upper()
    return "DSPARK" if "DSpark" in type(draft_model).__name__ else "DFLASH"


def capture_method(target_model, algorithm: str) -> str:
    """The target's method SGLang calls: DSPARK's own where the class has it."""
    if algorithm == "DSPARK" and hasattr(target_model, "set_dspark_layers_to_capture"):
        return "set_dspark_layers_to_capture"
    return "set_dflash_layers_to_capture"


def audit_pair(target_model, draft_model, algorithm: str,
               sglang_version: str | None = None) -> list[Finding]:
    """Findings for a loaded SGLang target + DFlash / DSpark draft (empty when healthy, for
    another draft, on a pipeline rank that captures nothing, or for a target family
    without a rule: `SGLANG_BLOCK_DRAFT_TARGETS`)."""
    if not is_block_draft(draft_model):
        return []
    state = capture_state(target_model, sglang_version, SGLANG_BLOCK_DRAFT_TARGETS)
    if state is None or state.rule is None:
        return []
    exp = expected_widths(draft_model)
    return audit_block_draft_capture(state, trained_ids(draft_model, algorithm,
                                                        state.num_layers),
                                     exp.fc_in, exp.target_hidden, algorithm,
                                     capture_method(target_model, algorithm))


def models(worker) -> tuple:
    """(target model, draft model) of a DFlashWorkerV2 / DSparkWorkerV2, read from its own
    fields (its `__getattr__` forwards everything else to the target worker)."""
    fields = vars(worker)
    runner = fields.get("model_runner")
    return getattr(runner, "model", None), fields.get("draft_model")
