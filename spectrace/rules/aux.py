"""Audit of the target's aux hidden-state capture against what the EAGLE-3 draft expects.

SGLang passes the draft's `eagle_aux_hidden_state_layer_ids` (None when it has none) to the
target's `set_eagle3_layers_to_capture`, and each model family turns them into its
`layers_to_capture` by its own rule; the forward then captures the state *entering* each
layer listed (0 = the embeddings, k + 1 = the output of layer k). The rules differ by
family and release, so the audit compares what the target stores with what its own rule
makes of the draft's ids: a DeepSeek-V3 target given [2, 30, 58] stores them as given, a
Llama target stores [3, 31, 59], and both are healthy. vLLM's targets all keep the ids
they are given (`KEPT`: id k is already the state entering layer k).

Pure functions over plain values (`CaptureState` is filled in by the runtime adapter).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Sequence

from .. import messages, names
from ..findings import ERROR, WARNING, Finding, FindingSpec
from ..runtimes import SGLANG, Runtime

_AUDIT = "the pair's audit when the draft is loaded (once per worker)"
SPECS = (
    FindingSpec(names.AUX_CAPTURE_DISABLED, ERROR,
                "the target does not capture the aux hidden states the draft's fc expects",
                floor=_AUDIT, message=messages.CAPTURE_OFF_IN_TARGET),
    FindingSpec(names.AUX_COUNT_MISMATCH, ERROR,
                "the target captures another number of aux layers than the draft's fc expects",
                floor=_AUDIT, message=messages.TARGET_CAPTURE_COUNT),
    FindingSpec(names.AUX_ID_MISMATCH, WARNING,
                "the target captures other layers than the draft was configured with",
                floor=_AUDIT, message=messages.TARGET_IDS),
)

# How a family turns the ids SGLang passes into `layers_to_capture`.
PLUS_ONE = "plus_one"                              # every id + 1 (Llama, Qwen, most)
KEPT_UNLESS_FIRST_IS_ONE = "kept_unless_first_is_one"  # DeepSeek family (SGLang >= 0.5.16)
KEPT_IF_MAX_IS_NUM_LAYERS = "kept_if_max_is_num_layers"  # gpt-oss (SGLang >= 0.5.20)
PLUS_ONE_DEFAULTS_TOO = "plus_one_defaults_too"   # MiniMax-M3-VL: its defaults get + 1 too
KEPT = "kept"                                      # every vLLM target: ids as given


@dataclass(frozen=True)
class Family:
    """How one SGLang target architecture captures: its id `rule` from release `since` on
    (PLUS_ONE before), whether it can capture id == num_layers (the last layer's output),
    and whether its forward gates on per-layer `_is_layer_to_capture` flags."""

    rule: str = PLUS_ONE
    since: tuple[int, int, int] = (0, 0, 0)
    final_state: bool = False
    per_layer_flags: bool = False

    def rule_at(self, version: tuple[int, int, int] | None) -> str:
        """The rule of the release `version` (None: the newest)."""
        return self.rule if version is None or version >= self.since else PLUS_ONE

    def max_input(self, num_layers: int) -> int:
        """The last layer input it can capture (num_layers: the final pre-norm state)."""
        return num_layers if self.final_state else num_layers - 1


def _all(family: Family, *architectures: str) -> dict[str, Family]:
    return dict.fromkeys(architectures, family)


_DEEPSEEK = Family(KEPT_UNLESS_FIRST_IS_ONE, since=(0, 5, 16))
_FINAL = Family(final_state=True)
_FLAGS = Family(per_layer_flags=True)
# SGLang's target architectures that implement set_eagle3_layers_to_capture (0.5.12 -
# 0.5.23, read from the wheels; docs/sglang-versions.md), by registered class name: the
# `architectures` of a target config, and the class of the model object that keeps the
# capture state (a wrapper such as Kimi-K2.5 delegates to its text model, whose rule is
# the wrapper's). Shared by the run-time audit and `spectrace doctor`. An architecture
# without a row is checked for capture on/off and layer count only.
SGLANG_TARGETS: dict[str, Family] = {
    **_all(Family(), "ApertusForCausalLM", "BailingMoEForCausalLM", "BailingMoeForCausalLM",
           "BailingMoeV2ForCausalLM", "SarvamMoEForCausalLM", "ExaoneMoEForCausalLM",
           "ExaoneMoeForCausalLM", "Glm4MoeForCausalLM", "Glm5NextForConditionalGeneration",
           "IQuestCoderForCausalLM", "InternLM3ForCausalLM", "Llama4ForCausalLM",
           "LlamaForCausalLM", "Ministral3ForCausalLM", "MistralForCausalLM",
           "Phi3ForCausalLM", "TeleFLMForCausalLM", "Llama4ForConditionalGeneration",
           "LongcatFlashForCausalLM", "MiniMaxM2ForCausalLM", "Qwen2ForCausalLM",
           "Qwen2_5_VLForConditionalGeneration", "Qwen3ForCausalLM",
           "Qwen3VLForConditionalGeneration", "Qwen3VLMoeForConditionalGeneration",
           "Cosmos3ForConditionalGeneration", "InternS1ProForConditionalGeneration",
           "InternS2MobiusForConditionalGeneration", "InternS2PreviewForConditionalGeneration",
           "Qwen4ExpForConditionalGeneration"),
    **_all(_DEEPSEEK, "DeepseekV2ForCausalLM", "DeepseekV3ForCausalLM",
           "DeepseekV32ForCausalLM", "GlmMoeDsaForCausalLM", "MistralLarge3ForCausalLM",
           "KimiK25ForConditionalGeneration"),
    "Glm4MoeLiteForCausalLM": Family(KEPT_UNLESS_FIRST_IS_ONE),
    "GptOssForCausalLM": Family(KEPT_IF_MAX_IS_NUM_LAYERS, since=(0, 5, 20), final_state=True),
    **_all(_FINAL, "Gemma3ForCausalLM", "Gemma3ForConditionalGeneration", "Gemma4ForCausalLM",
           "Gemma4ForConditionalGeneration", "Gemma4UnifiedForConditionalGeneration"),
    **_all(_FLAGS, "Qwen2MoeForCausalLM", "Qwen3MoeForCausalLM", "MellumForCausalLM",
           "Qwen3NextForCausalLM", "Qwen3_5ForCausalLM", "Qwen3_5MoeForCausalLM",
           "Qwen3_5ForConditionalGeneration", "Qwen3_5MoeForConditionalGeneration"),
    "MiniMaxM3SparseForCausalLM": Family(final_state=True, per_layer_flags=True),
    "MiniMaxM3SparseForConditionalGeneration": Family(PLUS_ONE_DEFAULTS_TOO, final_state=True,
                                                      per_layer_flags=True),
}


def default_ids(num_layers: int) -> list[int]:
    """What SGLang's families (and every vLLM target) capture when the draft names no
    layers."""
    return [2, num_layers // 2, num_layers - 3]


def stored_ids(rule: str, draft_ids: Sequence[int] | None, num_layers: int) -> list[int]:
    """The `layers_to_capture` a family with `rule` stores for `draft_ids`."""
    if draft_ids is None:
        ids = default_ids(num_layers)
        return [i + 1 for i in ids] if rule == PLUS_ONE_DEFAULTS_TOO else ids
    ids = [int(i) for i in draft_ids]
    if rule == KEPT:
        return ids
    if rule == KEPT_UNLESS_FIRST_IS_ONE and not (ids and ids[0] == 1):
        return ids
    if rule == KEPT_IF_MAX_IS_NUM_LAYERS and ids and max(ids) == num_layers:
        return ids
    return [i + 1 for i in ids]


@dataclass(frozen=True)
class CaptureState:
    """What a target model's capture state says.

    `on`: its capture flag; `stored`: its `layers_to_capture`; `rule`: its family's id rule
    (None: a family spectrace has no rule for, whose ids are then not judged); `captured`:
    how many layers' states really reach the draft (None: as many as `stored` lists);
    `family`: the class that keeps the state, for messages; `off_cause`: why capture is
    off and how to fix it, when the adapter knows (else SGLang's causes); `runtime`: whose
    words the messages use."""

    on: bool
    stored: list[int] | None
    num_layers: int
    rule: str | None
    family: str
    captured: int | None = None
    notes: list[str] = field(default_factory=list)
    off_cause: str | None = None
    runtime: Runtime = SGLANG


def audit_aux_capture(state: CaptureState, draft_ids: Sequence[int] | None, fc_in: int,
                      target_hidden: int, algorithm: str | None = None) -> list[Finding]:
    """Findings for a target that should feed an EAGLE-3 draft whose fc takes `fc_in`
    inputs (`fc_in / target_hidden` layers); `algorithm` is SGLang's
    `--speculative-algorithm`, when known."""
    expected_layers = fc_in // target_hidden if target_hidden else 0
    draft_ids = list(draft_ids) if draft_ids is not None else None
    details = {"family": state.family, "capture_on": state.on,
               "stored_layers_to_capture": list(state.stored) if state.stored is not None
               else None, "draft_layer_ids": draft_ids, "fc_in": fc_in,
               "target_hidden": target_hidden, "num_layers": state.num_layers,
               "id_rule": state.rule, "speculative_algorithm": algorithm}
    if not state.on:
        if expected_layers <= 1:
            return []
        if state.off_cause is not None:
            cause = state.off_cause
        elif algorithm is not None and algorithm.upper() != "EAGLE3":
            cause = messages.CAUSE_NOT_EAGLE3.render(algorithm=algorithm)
        else:
            cause = messages.CAUSE_FLAG_OFF.render()
        return [Finding(names.AUX_CAPTURE_DISABLED, ERROR, messages.CAPTURE_OFF_IN_TARGET.render(
            family=state.family, expected_layers=expected_layers, fc_in=fc_in,
            runtime=state.runtime.label, cause=cause), details)]
    findings: list[Finding] = []
    stored = sorted(set(state.stored or []))
    captured = state.captured if state.captured is not None else len(stored)
    if captured != expected_layers:
        why = "; ".join(state.notes) or messages.TARGET_STORES.format(
            capture_attr=state.runtime.capture_attr, stored=list(state.stored or []))
        message = messages.TARGET_CAPTURE_COUNT.render(
            family=state.family, captured=captured, why=why, expected_layers=expected_layers,
            fc_in=fc_in, target_hidden=target_hidden, num_layers=state.num_layers)
        findings.append(Finding(names.AUX_COUNT_MISMATCH, ERROR, message,
                                {**details, "captured_layers": captured}))
    if state.rule is not None and state.stored is not None:
        expected = sorted(set(stored_ids(state.rule, draft_ids, state.num_layers)))
        if stored != expected:
            asked = (messages.ASKED_IDS.format(ids=draft_ids) if draft_ids is not None else
                     messages.ASKED_DEFAULT.format(defaults=default_ids(state.num_layers)))
            findings.append(Finding(names.AUX_ID_MISMATCH, WARNING, messages.TARGET_IDS.render(
                asked=asked, family=state.family, capture_attr=state.runtime.capture_attr,
                expected=expected, rule=state.rule.replace("_", " "), stored=stored,
                capture_method=state.runtime.capture_method),
                {**details, "expected_layers_to_capture": expected}))
    return findings


# -- SGLang's DFlash / DSpark drafts ----------------------------------------------------------
# They read the target's aux hidden states as EAGLE-3 does, but name them as layer
# *outputs* (`dflash_config.target_layer_ids`, DSpark's `dspark_target_layer_ids`: id k = the
# output of layer k); SGLang passes the ids it resolves to the target's
# `set_dflash_layers_to_capture` (`set_dspark_layers_to_capture` for DSPARK where the class
# has one), and each family stores them by its own rule: id + 1 for all those below (the
# state entering layer k + 1), some through per-layer flags. Read from the 0.5.23 wheel;
# checked on the real classes by tests/test_block_draft_inputs.py. A target without a row
# (Muse, Beam, Kimi-K3, DeepSeek-V4, Kimi-Linear, Inkling keep their ids elsewhere or as
# given; Qwen3-VL's own switch raises AttributeError in 0.5.23) is not audited: no false
# alarm on a rule we do not know.
_BLOCK_FLAGS = Family(per_layer_flags=True)
SGLANG_BLOCK_DRAFT_TARGETS: dict[str, Family] = {
    **_all(Family(), "LlamaForCausalLM", "Qwen3ForCausalLM", "DeepseekV2ForCausalLM",
           "DeepseekV3ForCausalLM", "Glm4MoeLiteForCausalLM", "Gemma4ForCausalLM",
           "Gemma4ForConditionalGeneration", "Glm5NextForConditionalGeneration"),
    "GptOssForCausalLM": Family(final_state=True),
    **_all(_BLOCK_FLAGS, "Qwen3MoeForCausalLM", "Qwen3NextForCausalLM", "Qwen3_5ForCausalLM",
           "Qwen3_5ForConditionalGeneration", "Qwen3_5MoeForConditionalGeneration"),
    "MiniMaxM3SparseForConditionalGeneration": Family(final_state=True, per_layer_flags=True),
}


@dataclass(frozen=True)
class TrainedIds:
    """The target layers a DFlash / DSpark draft was trained on, as layer outputs (None:
    its config names neither ids nor the trained target's depth), and in words."""

    ids: list[int] | None
    asked: str


def audit_block_draft_capture(state: CaptureState, trained: TrainedIds, fc_in: int,
                              target_hidden: int, algorithm: str,
                              capture_method: str) -> list[Finding]:
    """Findings for an SGLang target feeding a DFlash / DSpark draft whose fc takes `fc_in`
    inputs. Capture off is always an error (silent when one layer is expected: the last
    hidden state has the same width); ids other than the trained ones, a warning. A layer
    count that differs is left to SGLang, which raises on that width at the first prefill
    (`DFlashDraftModel.project_target_hidden`)."""
    expected_layers = fc_in // target_hidden if target_hidden else 0
    details = {"family": state.family, "capture_on": state.on,
               "stored_layers_to_capture": list(state.stored) if state.stored is not None
               else None, "draft_layer_ids": trained.ids, "fc_in": fc_in,
               "target_hidden": target_hidden, "num_layers": state.num_layers,
               "id_rule": state.rule, "speculative_algorithm": algorithm}
    if not state.on:
        consequence = (messages.BLOCK_DRAFT_SILENT if expected_layers == 1
                       else messages.BLOCK_DRAFT_LOUD)
        return [Finding(names.AUX_CAPTURE_DISABLED, ERROR,
                        messages.BLOCK_DRAFT_CAPTURE_OFF.render(
                            family=state.family, algorithm=algorithm,
                            expected_layers=expected_layers, fc_in=fc_in,
                            consequence=consequence, capture_method=capture_method),
                        details)]
    if state.rule is None or trained.ids is None or state.stored is None:
        return []
    expected = sorted(set(stored_ids(state.rule, trained.ids, state.num_layers)))
    stored = sorted(set(state.stored))
    if stored == expected:
        return []
    return [Finding(names.AUX_ID_MISMATCH, WARNING, messages.TARGET_IDS.render(
        asked=trained.asked, family=state.family, capture_attr="layers_to_capture",
        expected=expected, rule=state.rule.replace("_", " "), stored=stored,
        capture_method=capture_method), {**details, "expected_layers_to_capture": expected})]
