"""Every config field the runtimes' EAGLE-3 draft classes read, as data: one `FieldFact`
per (field, runtime, draft class), saying what the class does with it to the network, the
weights it loads and the positions, and exactly what changes on the real class when the
field is set (`changes`: parameters added `+`, removed `-`, reshaped `~`; the switches of
harness/draft_switches.py by name; `raises` when the class refuses the config; nothing
when it does not read the field).

Ground truth: tests/test_doctor_config_fields.py builds each runtime's real draft class
from the tiny base config (harness/tiny_models.py, harness/tiny_mla.py) and from the base
with `sets` applied, without weights (harness/sglang_draft_probe.py in SGLang's
environment, harness/vllm_draft_probe.py in vLLM's), and fails when the difference is not
`changes`; it also checks that the doctor's own model (`loaders.expected_params`,
`Loader` fields, `positions.honours_window`) predicts the same. The table in docs/doctor.md
is generated from these rows (`scripts/doctor_tables.py`) and kept in step by a test.
Verified on the releases in `VERIFIED`; other releases take the `loaders` rows, whose facts
are checked against their sources.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

from ...runtimes import SGLANG, VLLM, Runtime, Word
from .loaders import DraftClass

VERIFIED = {SGLANG: "0.5.23", VLLM: "0.32.0"}  # the real classes the probes build
CLASSES = {(SGLANG, DraftClass.LLAMA): "LlamaForCausalLMEagle3",
           (SGLANG, DraftClass.MLA): "Eagle3DeepseekV2ForCausalLM",
           (VLLM, DraftClass.LLAMA): "Eagle3LlamaForCausalLM",
           (VLLM, DraftClass.QWEN3): "Eagle3Qwen3ForCausalLM",
           (VLLM, DraftClass.MLA): "Eagle3DeepseekV2ForCausalLM"}


class Part(Word):
    """What a field acts on."""
    NETWORK = "network"      # what the draft computes
    WEIGHTS = "weights"      # which parameters exist / which keys load
    POSITIONS = "positions"  # rotary embedding, context, attention window
    NOT_READ = "not read"    # the class is the same with or without it
    REFUSED = "refused"      # the class raises for this value


@dataclass(frozen=True)
class FieldFact:
    field: str                    # as the table names it (`eagle_config.x` inside eagle_config)
    sets: Mapping[str, Any]       # what the probe sets on the base config
    runtime: Runtime
    draft: DraftClass
    part: Part
    changes: tuple[str, ...]      # on the real class (see the module docstring)
    effect: str                   # what it does, in words (the table's cell)
    doctor: str = ""              # how the doctor uses it (finding code, --fix)


def _layer(i: int, *names: str) -> tuple[str, ...]:
    return tuple(f"model.layers.{i}.{n}" for n in names)


FC_NORM = tuple(f"+model.fc_norm.{j}.weight" for j in range(3))
LAYER1 = tuple("+" + p for p in _layer(1, "self_attn.qkv_proj.weight", "self_attn.o_proj.weight",
                                        "mlp.gate_up_proj.weight", "mlp.down_proj.weight",
                                        "input_layernorm.weight", "post_attention_layernorm.weight",
                                        "hidden_norm.weight"))
QKV, O_PROJ = _layer(0, "self_attn.qkv_proj.weight", "self_attn.o_proj.weight")
MLP = _layer(0, "mlp.gate_up_proj.weight", "mlp.down_proj.weight")
ACT = "any activation but silu raises at start-up ('Unsupported activation')"
IDS = {"eagle_aux_hidden_state_layer_ids": [0, 1], "use_aux_hidden_state": True}
NO_AUX = {"eagle_aux_hidden_state_layer_ids": [0, 1, 2], "use_aux_hidden_state": False}


def _both(field, sets, draft, part, changes, effect, doctor="", runtimes=(SGLANG, VLLM)):
    return tuple(FieldFact(field, sets, rt, draft, part, tuple(changes), effect, doctor)
                 for rt in runtimes)


def _each(field, sets, draft, sglang, vllm, doctor=""):
    """`sglang` / `vllm`: (part, changes, effect) for each runtime."""
    return tuple(FieldFact(field, sets, rt, draft, part, tuple(changes), effect, doctor)
                 for rt, (part, changes, effect) in ((SGLANG, sglang), (VLLM, vllm)))


L, M, Q = DraftClass.LLAMA, DraftClass.MLA, DraftClass.QWEN3
N, W, P, X, R = Part.NETWORK, Part.WEIGHTS, Part.POSITIONS, Part.NOT_READ, Part.REFUSED

LLAMA = (
    *_each("tie_word_embeddings", {"tie_word_embeddings": True}, L,
           (W, ("-lm_head.weight", "lm_head_tied"),
            "lm_head is the embedding (shared with the target's at start-up): a trained "
            "`lm_head.weight` matches nothing and is dropped without a word"),
           (X, (), "never read: lm_head is its own ParallelLMHead(draft_vocab_size) and "
                   "`lm_head.weight` loads into it"),
           "weights.unused_keys names the flag on SGLang; --fix writes it false"),
    *_each("draft_vocab_size", {"draft_vocab_size": None}, L,
           (W, ("~lm_head.weight", "lm_head_from_target"),
            "absent: lm_head gets vocab_size rows and is replaced by the target's at start-up "
            "(load_lm_head_from_target): a trained head is not used"),
           (W, ("~lm_head.weight", "-draft_id_to_target_id"),
            "absent: read as vocab_size; lm_head gets vocab_size rows and there is no "
            "draft-to-target map (a `d2t` key then raises); without `lm_head.weight` the "
            "target's head is shared"),
           "shape.mismatch, vocab.*; --fix fills it from lm_head's rows"),
    *_both("target_hidden_size", {"target_hidden_size": 64}, L, W, ("~model.fc.weight",),
           "fc's input is aux layers x target_hidden_size (else hidden_size)",
           "fc.width_mismatch; --fix fills it from fc's shape"),
    *_each("eagle_config.use_aux_hidden_state", {"eagle_config": NO_AUX}, L,
           (X, (), "not read by the draft class; the model runner reads it: false makes the "
                   "target capture nothing, the draft gets one layer and skips fc (fc bypass)"),
           (W, ("-model.fc.weight", "use_aux", "num_aux"),
            "false: no fc at all (fc.* keys are skipped) and the target captures nothing"),
           "aux.capture_disabled; --fix switches it on"),
    *_both("eagle_config.eagle_aux_hidden_state_layer_ids", {"eagle_config": IDS}, L, W,
           ("~model.fc.weight", "num_aux"),
           "fc takes as many layers as there are ids (when num_aux_hidden_states is absent); "
           "which layers the target captures: SGLang always from here, vLLM's V1 runner when "
           "the top level names none",
           "aux.count_mismatch, aux.layer_ids_*"),
    *_both("eagle_aux_hidden_state_layer_ids (top level)",
           {"eagle_aux_hidden_state_layer_ids": [0, 1]}, L, X, (),
           "not read by the draft class (fc keeps its count); vLLM's model runner takes the "
           "target's capture ids from here first, SGLang never reads it",
           "aux.layer_ids_misread; --fix writes vLLM's ids here"),
    *_both("num_aux_hidden_states", {"num_aux_hidden_states": 2}, L, W,
           ("~model.fc.weight", "num_aux"), "fc for that many aux layers, before any id list",
           "aux.count_mismatch"),
    *_each("norm_before_residual", {"norm_before_residual": True}, L,
           (X, (), "not read: the residual is always the raw fc output"),
           (N, ("residual",), "the residual after attention is hidden_norm(fc output)"),
           "config.setting_ignored (SGLang; a speculators config that does not say, on vLLM)"),
    *_both("norm_before_fc", {"norm_before_fc": True}, L, W, ("+model.input_norm.weight",),
           "one RMSNorm over the concatenated aux states before fc (`input_norm`)",
           "weights.unused_keys where the release lacks it"),
    *_both("eagle_config.norm_before_fc",
           {"eagle_config": {**NO_AUX, "use_aux_hidden_state": True, "norm_before_fc": True}},
           L, W, ("+model.input_norm.weight",), "as norm_before_fc (read first)"),
    *_both("fc_norm", {"fc_norm": True}, L, W, FC_NORM,
           "an RMSNorm per aux layer before fc (`fc_norm.N`)",
           "weights.unused_keys where the release lacks it"),
    *_each("use_aux_norm", {"use_aux_norm": True}, L,
           (W, FC_NORM, "the legacy name of fc_norm"),
           (X, (), "not read (vLLM reads fc_norm only): `fc_norm.*` keys then raise"),
           "--fix writes fc_norm: true for vLLM"),
    *_both("norm_output", {"norm_output": True}, L, N, ("norm_output",),
           "the state fed back to the next draft step is the normed one (else pre-norm)",
           "config.setting_ignored where a release lacks it"),
    *_each("bias", {"bias": True}, L,
           (W, ("+model.fc.bias", "+" + O_PROJ.replace("weight", "bias")),
            "fc and o_proj get a bias"),
           (W, ("+" + O_PROJ.replace("weight", "bias"),),
            "o_proj gets a bias (the Llama layer it builds on reads it); fc never has one, "
            "so an `fc.bias` key raises"),
           "weights.*"),
    *_each("attention_bias", {"attention_bias": True}, L,
           (W, ("+" + O_PROJ.replace("weight", "bias"),),
            "o_proj gets a bias; qkv_proj never has one (the EAGLE-3 layer rebuilds it "
            "without): q/k/v bias keys are dropped"),
           (W, ("+" + QKV.replace("weight", "bias"), "+" + O_PROJ.replace("weight", "bias")),
            "qkv_proj and o_proj get biases"),
           "weights.*"),
    *_each("mlp_bias", {"mlp_bias": True}, L,
           (X, (), "not read: the MLP has no biases, bias keys are dropped"),
           (W, tuple("+" + p.replace("weight", "bias") for p in MLP),
            "gate_up_proj and down_proj get biases"),
           "weights.*"),
    *_both("head_dim", {"head_dim": 64}, L, W, ("~" + QKV, "~" + O_PROJ, "head_dim", "rope"),
           "the attention's head size (else hidden_size / num_attention_heads)", "shape.mismatch"),
    *_both("hidden_act", {"hidden_act": "gelu"}, L, R, ("raises",), ACT),
    *_both("rope_theta", {"rope_theta": 500000.0}, L, P, ("rope",), "the rotary base",
           "positions.rope_changed"),
    *_both("rope_scaling", {"rope_scaling": {
        "rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
        "original_max_position_embeddings": 1024}}, L, P, ("rope",),
        "the rotary embedding's scaling (rope_parameters first)", "positions.rope_changed"),
    *_both("max_position_embeddings", {"max_position_embeddings": 4096}, L, P, ("rope",),
           "the rotary table's length, and the draft's context at start-up",
           "positions.beyond_draft"),
    *_both("partial_rotary_factor", {"partial_rotary_factor": 0.5}, L, P, ("rope",),
           "the share of each head the rotation covers"),
    *_each("layer_types (+ sliding_window)",
           {"layer_types": ["sliding_attention"], "sliding_window": 64}, L,
           (X, (), "not read: full attention (a window only from "
                   "--speculative-draft-window-size)"),
           (P, ("window",), "a sliding_window window on each layer marked sliding_attention "
                            "(draft-relative)"),
           "config.setting_ignored (the window, on SGLang)"),
    *_both("sliding_window", {"sliding_window": 64}, L, X, (),
           "not read without layer_types: full attention"),
    *_both("rms_norm_eps", {"rms_norm_eps": 1e-5}, L, N, ("eps",), "every RMSNorm's epsilon"),
    *_both("num_hidden_layers", {"num_hidden_layers": 2}, L, W, LAYER1,
           "the decoder layers (layers >= 1 take hidden_size inputs)",
           "config.num_layers_unsupported before SGLang 0.5.12"),
    *_both("num_key_value_heads", {"num_key_value_heads": 4}, L, W, ("~" + QKV,),
           "the K/V heads of qkv_proj", "shape.mismatch"),
    *_both("intermediate_size", {"intermediate_size": 384}, L, W, tuple("~" + p for p in MLP),
           "the MLP's width", "shape.mismatch"),
    *_both("vocab_size", {"vocab_size": 1024}, L, W, ("~model.embed_tokens.weight",),
           "the embedding's rows (replaced by the target's at start-up)", "shape.mismatch"),
    *_each("logit_scale", {"logit_scale": 2.0}, L,
           (X, (), "not read: logits unscaled"),
           (N, ("logit_scale",), "the draft's logits are multiplied by it")),
)

MLA = (
    *_each("tie_word_embeddings", {"tie_word_embeddings": True}, M,
           (W, ("-lm_head.weight", "lm_head_tied"), "as the Llama draft: the trained head is "
                                                    "dropped (with a log warning)"),
           (X, (), "never read"), "weights.unused_keys names the flag on SGLang"),
    *_each("draft_vocab_size", {"draft_vocab_size": None}, M,
           (W, ("~lm_head.weight", "lm_head_from_target"), "as the Llama draft"),
           (W, ("~lm_head.weight", "-draft_id_to_target_id"), "as the Llama draft")),
    *_both("fc_norm", {"fc_norm": True}, M, W, FC_NORM, "an RMSNorm per aux layer before fc"),
    *_each("norm_before_fc", {"norm_before_fc": True}, M,
           (X, (), "not read: no input_norm"), (X, (), "not read: no input_norm"),
           "config.setting_ignored"),
    *_both("norm_output", {"norm_output": True}, M, N, ("norm_output",),
           "the state fed back is the normed one"),
    *_each("num_aux_hidden_states", {"num_aux_hidden_states": 2}, M,
           (X, (), "not read: fc from the id list"),
           (W, ("~model.fc.weight", "num_aux"), "fc for that many aux layers"),
           "aux.count_mismatch"),
    *_both("eagle_config.eagle_aux_hidden_state_layer_ids", {"eagle_config": IDS}, M, W,
           ("~model.fc.weight", "num_aux"), "fc takes as many layers as there are ids"),
    *_each("q_lora_rank", {"q_lora_rank": None}, M,
           (R, ("raises",), "absent: raises ('requires q_lora_rank')"),
           (W, tuple(f"{s}{p}" for s, p in (
               ("-", "model.layers.0.self_attn.fused_qkv_a_proj.weight"),
               ("-", "model.layers.0.self_attn.q_a_layernorm.weight"),
               ("-", "model.layers.0.self_attn.q_b_proj.weight"),
               ("+", "model.layers.0.self_attn.q_proj.weight"),
               ("+", "model.layers.0.self_attn.kv_a_proj_with_mqa.weight"))),
            "absent: a plain q_proj instead of the low-rank q_a/q_b pair"),
           "config.unsupported on SGLang"),
    *_each("num_hidden_layers", {"num_hidden_layers": 2}, M,
           (R, ("raises",), "anything but 1 raises ('only supports 1 layer')"),
           (W, tuple("+model.layers.1." + n for n in (
               "self_attn.fused_qkv_a_proj.weight", "self_attn.q_a_layernorm.weight",
               "self_attn.q_b_proj.weight", "self_attn.kv_a_layernorm.weight",
               "self_attn.kv_b_proj.weight", "self_attn.o_proj.weight",
               "mlp.gate_up_proj.weight", "mlp.down_proj.weight", "input_layernorm.weight",
               "post_attention_layernorm.weight", "hidden_norm.weight")),
            "the decoder layers"),
           "config.num_layers_unsupported on SGLang"),
    *_each("bias", {"bias": True}, M, (W, ("+model.fc.bias",), "fc gets a bias"),
           (X, (), "not read")),
    *_both("rope_theta", {"rope_theta": 50000.0}, M, P, ("rope",), "the rotary base",
           "positions.rope_changed"),
    *_each("model_type", {"model_type": "deepseek_v3"}, M,
           (X, (), "read by the config reader only (DeepSeek-V3's config class)"),
           (R, ("raises",), "deepseek_v3 (also deepseek_v32, glm_moe_dsa): vLLM's speculative "
                            "config turns the draft into a DeepSeek MTP module "
                            "('Eagle3DeepSeekMTPModel ... not supported'): the server does not "
                            "start"),
           "config.unsupported on vLLM; --fix writes model_type deepseek_v2"),
)

QWEN3 = (
    FieldFact("tie_word_embeddings", {"tie_word_embeddings": True}, VLLM, Q, X, (),
              "never read"),
    FieldFact("layer_types (+ sliding_window)",
              {"layer_types": ["sliding_attention"], "sliding_window": 64}, VLLM, Q, X, (),
              "not read: Qwen3's config class drops sliding_window unless use_sliding_window "
              "is true, so full attention"),
    FieldFact("layer_types (+ sliding_window, use_sliding_window)",
              {"layer_types": ["sliding_attention"], "sliding_window": 64,
               "use_sliding_window": True}, VLLM, Q, P, ("window",),
              "a sliding_window window on each layer marked sliding_attention"),
    FieldFact("attention_bias", {"attention_bias": True}, VLLM, Q, W,
              ("+" + QKV.replace("weight", "bias"),), "qkv_proj gets a bias (o_proj never)"),
    FieldFact("norm_before_residual", {"norm_before_residual": True}, VLLM, Q, N, ("residual",),
              "the residual after attention is hidden_norm(fc output)"),
    FieldFact("head_dim", {"head_dim": 64}, VLLM, Q, W,
              ("~" + QKV, "~" + O_PROJ, "~model.layers.0.self_attn.q_norm.weight",
               "~model.layers.0.self_attn.k_norm.weight", "head_dim", "rope"),
              "the head size, q_norm and k_norm too"),
    FieldFact("fc_norm", {"fc_norm": True}, VLLM, Q, W, FC_NORM, "an RMSNorm per aux layer"),
    FieldFact("norm_output", {"norm_output": True}, VLLM, Q, N, ("norm_output",),
              "the state fed back is the normed one"),
)

FACTS: tuple[FieldFact, ...] = LLAMA + MLA + QWEN3


def param_changes(changes: tuple[str, ...]) -> set[str]:
    """The parameter part of `changes` (`+name`, `-name`, `~name`)."""
    return {c for c in changes if c[:1] in "+-~"}


def observed(base: Mapping[str, Any], variant: Mapping[str, Any]) -> set[str]:
    """What changed between two probes of a real class (`params`, `switches`, or a
    `build_error`), in the terms of `FieldFact.changes`."""
    if variant.get("build_error"):
        return {"raises"}
    bp, vp = base["params"], variant["params"]
    out = {f"+{k}" for k in vp if k not in bp} | {f"-{k}" for k in bp if k not in vp}
    out |= {f"~{k}" for k in vp if k in bp and list(vp[k]) != list(bp[k])}
    out |= {k for k, v in variant["switches"].items() if base["switches"].get(k) != v}
    return out
