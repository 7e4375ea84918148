"""The words of the findings the run-time rules raise in the server's processes: hidden-state
widths, synthetic acceptance, non-finite drafts, the target's aux capture."""
from __future__ import annotations

from .. import names
from .message import Message


# -- hidden-state widths at run time (rules.widths) ----------------------------------------
FC_BYPASS = Message(
    names.FC_BYPASS,
    "fc bypass: a target-fed draft pass received hidden states {width} wide, the draft's own "
    "hidden size, so {runtime} skipped fc and the draft saw one layer instead of {num_aux} "
    "concatenated aux layers ({fc_in} wide); its proposals are near random and acceptance "
    "length falls to about 1.0. Cause: the target is not capturing aux hidden states.",
    "check the draft's eagle_config.use_aux_hidden_state (must be true), "
    "eagle_config.eagle_aux_hidden_state_layer_ids, and that the target model class "
    "implements {capture_method}.")
WIDTH_MISMATCH = Message(
    names.WIDTH_MISMATCH,
    "hidden-state width mismatch: a target-fed draft pass received {width} wide hidden states "
    "(about {layers:g} target layers), but fc expects {fc_in} ({num_aux} x {target_hidden}). "
    "The draft runs on features it was not trained on. Check that the target captures exactly "
    "the layers in eagle_config.eagle_aux_hidden_state_layer_ids (no duplicates dropped) and "
    "that transfer buffers are sized for {fc_in}.")

# -- acceptance the runtime fakes (rules.synthetic) -----------------------------------
SYNTHETIC_ACCEPTANCE = Message(
    names.ACCEPTANCE_SYNTHETIC,
    "the acceptance figures are synthetic: {runtime} accepts draft tokens by a synthetic "
    "rule ({setting}), not by comparing them with the target, so every acceptance figure "
    "(the runtime's and spectrace's) is fiction and the output is not the target's.",
    "{fix}")
SYNTHETIC_FIX = {
    names.RUNTIME_SGLANG: "unset SGLANG_SIMULATE_ACC_LEN (and SGLANG_SIMULATE_ACC_METHOD) "
                            "in the server's environment and restart it; it is a "
                            "benchmarking switch.",
    names.RUNTIME_VLLM: "remove rejection_sample_method \"synthetic\" (and "
                          "synthetic_acceptance_rates / synthetic_acceptance_length) from "
                          "--speculative-config and restart; it is a benchmarking switch.",
}

# -- numbers the draft computes (rules.finite) ----------------------------------------------
NON_FINITE = Message(
    names.DRAFT_NON_FINITE,
    "non-finite values (inf or nan) in the draft's {where}, found by {bad} of {checks} "
    "sampled on-device checks; the draft runs in {dtype}. Its proposals are then garbage and "
    "acceptance falls to about 1.0 (0 % of draft tokens), with nothing in the logs.",
    "{fix}")
NON_FINITE_FIX_HALF = (
    "float16 overflows above 65504 where bfloat16 does not: serve a draft trained in "
    "bfloat16 in bfloat16 (or float32), e.g. --dtype bfloat16; otherwise check the "
    "checkpoint for inf/nan weights (`spectrace doctor`).")
NON_FINITE_FIX = (
    "check the draft checkpoint for inf/nan weights and that it is served in the dtype it "
    "was trained in (torch_dtype in its config.json).")

# -- the target's aux capture at run time (rules.aux) ---------------------------------------
CAPTURE_OFF_IN_TARGET = Message(
    names.AUX_CAPTURE_DISABLED,
    "aux hidden-state capture is off in the target ({family}), but the EAGLE-3 draft's fc "
    "expects {expected_layers} concatenated layers ({fc_in} wide). The draft gets one layer, "
    "{runtime} skips fc (fc bypass) and acceptance length falls to about 1.0. {cause}")
CAUSE_NOT_EAGLE3 = Message(
    names.AUX_CAPTURE_DISABLED,
    "SGLang switches capture on only for --speculative-algorithm EAGLE3, and this server runs "
    "{algorithm} (NEXTN is an alias of EAGLE), which also replaces the draft's own lm_head and "
    "d2t map with the target's.",
    "launch with --speculative-algorithm EAGLE3.")
CAUSE_FLAG_OFF = Message(
    names.AUX_CAPTURE_DISABLED, "",
    "set eagle_config.use_aux_hidden_state to true (or remove it) in the draft's config.json.")
TARGET_CAPTURE_COUNT = Message(
    names.AUX_COUNT_MISMATCH,
    "the target ({family}) captures {captured} aux layers ({why}), but the draft's fc expects "
    "{expected_layers} ({fc_in} / {target_hidden}): every target-fed draft pass gets the wrong "
    "width. Fix eagle_config.eagle_aux_hidden_state_layer_ids (distinct ids, each below the "
    "target's {num_layers} layers) or the draft's fc.")
TARGET_STORES = "it stores {capture_attr} {stored}"
TARGET_IDS = Message(
    names.AUX_ID_MISMATCH,
    "the draft was configured with {asked}, which {family} stores as {capture_attr} {expected} "
    "({rule}), but the target captures {stored}: the draft sees other layers than it was "
    "trained on. Check which layer ids the serving stack passes to {capture_method}.")
ASKED_IDS = "eagle_aux_hidden_state_layer_ids {ids}"
ASKED_DEFAULT = "no eagle_aux_hidden_state_layer_ids (the defaults {defaults})"
# SGLang's DFlash / DSpark drafts (rules.aux.audit_block_draft_capture)
BLOCK_DRAFT_CAPTURE_OFF = Message(
    names.AUX_CAPTURE_DISABLED,
    "aux hidden-state capture is off in the target ({family}), but the {algorithm} draft's fc "
    "expects {expected_layers} target layer(s) ({fc_in} wide). {consequence}",
    "SGLang switches it on when the target's model runner is built ({capture_method}, from "
    "the draft's dflash_config); check that the target model class implements it and that "
    "nothing resets capture_aux_hidden_states or layers_to_capture afterwards.")
BLOCK_DRAFT_SILENT = (
    "With one layer expected, the target's last hidden state has the same width, so SGLang "
    "runs on without an error: the draft reads the final layer instead of the one it was "
    "trained on, and acceptance falls.")
BLOCK_DRAFT_LOUD = (
    "SGLang stops at the first prefill (no target hidden states, or DFLASH target_hidden "
    "feature dim mismatch).")
ASKED_BLOCK_IDS = "{key} {ids} (layer outputs)"
ASKED_BLOCK_DEPTH = ("no target_layer_ids but num_target_layers {trained} (SGLang's layer "
                     "selection for {trained} layers: {ids}; this target has {num_layers}, "
                     "so SGLang selected for {num_layers})")
