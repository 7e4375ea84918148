"""Published EAGLE-3 drafts and their targets, as the doctor's tests see them: each draft's
`config.json` as its source publishes it (verbatim: the trainer's config file that the
published checkpoint was trained and exported with), the key layout its trainer's code
writes (names, shapes, dtypes; no weights: the tests write header-only safetensors, or a
pickled state dict of zero-stride tensors for `.bin`), the target's config fields the
doctor reads (the values the model's published config.json states), and what each runtime
is known to do with the pair, with the source that says so.

Where no verbatim config was found in a public repository (RedHatAI's speculators drafts,
NVIDIA's Model Optimizer exports), the trainers' own code writes the draft instead
(tests/test_doctor_trainers.py); `KIMI_K26_NO_HEAD` is the one reconstructed layout, from
the issue thread that describes it (its `sources` say so).

No torch here: tests/test_doctor_published.py writes the files.
"""
from __future__ import annotations

from dataclasses import dataclass, field

SPECFORGE = "https://github.com/sgl-project/SpecForge/blob"
EAGLE = "https://github.com/SafeAILab/EAGLE/blob/cb7e0841fe0c206c6ed74a197ad5e2a1f13f5a2b"
ANGELSLIM = ("https://github.com/Tencent/AngelSlim/blob/67394ce55f6b6cfae702575fbc3c7a05c13fdd74/"
             "angelslim/compressor/speculative/train")
TORCHSPEC = ("https://github.com/lightseekorg/TorchSpec/blob/"
             "6f21829cd0e333c3b54d9d2706a0b0c8dc10de9d")
HF = "https://huggingface.co"


@dataclass(frozen=True)
class Published:
    name: str                  # the published draft (or the trainer's config it comes from)
    sources: tuple[str, ...]   # config, key layout, and the runtime behaviour cited
    config: dict               # config.json, verbatim
    layout: str                # which trainer's key layout (`layouts` in the test module)
    target: str                # a key of TARGETS
    weights: str = "safetensors"  # or "bin" (pytorch_model.bin)
    errors: dict = field(default_factory=dict)  # runtime -> the error codes known to be real
    known: str = ""            # what the runtimes are known to do, in words


# -- targets: the fields of each published config.json the doctor reads ----------------------------
TARGETS = {
    "meta-llama/Llama-3.1-8B-Instruct": {
        "architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 4096,
        "intermediate_size": 14336, "num_hidden_layers": 32, "num_attention_heads": 32,
        "num_key_value_heads": 8, "vocab_size": 128256, "max_position_embeddings": 131072,
        "rope_theta": 500000.0, "rope_scaling": {
            "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
            "original_max_position_embeddings": 8192, "rope_type": "llama3"},
        "tie_word_embeddings": False, "torch_dtype": "bfloat16", "bos_token_id": 128000,
        "eos_token_id": [128001, 128008, 128009]},
    "Qwen/Qwen3-8B": {
        "architectures": ["Qwen3ForCausalLM"], "model_type": "qwen3", "hidden_size": 4096,
        "intermediate_size": 12288, "num_hidden_layers": 36, "num_attention_heads": 32,
        "num_key_value_heads": 8, "head_dim": 128, "vocab_size": 151936,
        "max_position_embeddings": 40960, "rope_theta": 1000000, "tie_word_embeddings": False,
        "torch_dtype": "bfloat16", "bos_token_id": 151643, "eos_token_id": 151645},
    "Qwen/Qwen3-4B": {
        "architectures": ["Qwen3ForCausalLM"], "model_type": "qwen3", "hidden_size": 2560,
        "intermediate_size": 9728, "num_hidden_layers": 36, "num_attention_heads": 32,
        "num_key_value_heads": 8, "head_dim": 128, "vocab_size": 151936,
        "max_position_embeddings": 40960, "rope_theta": 1000000, "tie_word_embeddings": True,
        "torch_dtype": "bfloat16", "bos_token_id": 151643, "eos_token_id": 151645},
    "Qwen/Qwen3-1.7B": {
        "architectures": ["Qwen3ForCausalLM"], "model_type": "qwen3", "hidden_size": 2048,
        "intermediate_size": 6144, "num_hidden_layers": 28, "num_attention_heads": 16,
        "num_key_value_heads": 8, "head_dim": 128, "vocab_size": 151936,
        "max_position_embeddings": 40960, "rope_theta": 1000000, "tie_word_embeddings": True,
        "torch_dtype": "bfloat16", "bos_token_id": 151643, "eos_token_id": 151645},
    "microsoft/Phi-4-mini-instruct": {
        "architectures": ["Phi3ForCausalLM"], "model_type": "phi3", "hidden_size": 3072,
        "intermediate_size": 8192, "num_hidden_layers": 32, "num_attention_heads": 24,
        "num_key_value_heads": 8, "vocab_size": 200064, "max_position_embeddings": 131072,
        "original_max_position_embeddings": 4096, "rope_theta": 10000.0,
        "partial_rotary_factor": 0.75, "tie_word_embeddings": True, "torch_dtype": "bfloat16",
        "bos_token_id": 199999, "eos_token_id": 199999},
    "deepseek-ai/DeepSeek-V3": {
        "architectures": ["DeepseekV3ForCausalLM"], "model_type": "deepseek_v3",
        "hidden_size": 7168, "num_hidden_layers": 61, "vocab_size": 129280,
        "n_routed_experts": 256,
        "max_position_embeddings": 163840, "rope_theta": 10000, "rope_scaling": {
            "beta_fast": 32, "beta_slow": 1, "factor": 40, "mscale": 1.0, "mscale_all_dim": 1.0,
            "original_max_position_embeddings": 4096, "type": "yarn"},
        "tie_word_embeddings": False, "torch_dtype": "bfloat16", "bos_token_id": 0,
        "eos_token_id": 1,
        "quantization_config": {"activation_scheme": "dynamic", "fmt": "e4m3",
                                "quant_method": "fp8", "weight_block_size": [128, 128]}},
    "moonshotai/Kimi-K2.5": {
        "architectures": ["KimiK25ForConditionalGeneration"], "model_type": "kimi_k25",
        "text_config": {
            "architectures": ["DeepseekV3ForCausalLM"], "model_type": "deepseek_v3",
            "hidden_size": 7168, "num_hidden_layers": 61, "vocab_size": 163840,
            "n_routed_experts": 384,
            "max_position_embeddings": 262144, "rope_theta": 50000.0, "rope_scaling": {
                "beta_fast": 1.0, "beta_slow": 1.0, "factor": 64.0, "mscale": 1.0,
                "mscale_all_dim": 1.0, "original_max_position_embeddings": 4096,
                "type": "yarn"},
            "tie_word_embeddings": False, "torch_dtype": "bfloat16", "bos_token_id": 163584,
            "eos_token_id": 163585}},
    "openai/gpt-oss-20b": {
        "architectures": ["GptOssForCausalLM"], "model_type": "gpt_oss", "hidden_size": 2880,
        "num_hidden_layers": 24, "vocab_size": 201088, "max_position_embeddings": 131072,
        "num_local_experts": 32,
        "rope_theta": 150000, "rope_scaling": {
            "beta_fast": 32.0, "beta_slow": 1.0, "factor": 32.0,
            "original_max_position_embeddings": 4096, "rope_type": "yarn", "truncate": False},
        "tie_word_embeddings": False, "torch_dtype": "bfloat16", "eos_token_id": 200002},
}
TARGET_SOURCES = {name: f"{HF}/{name}/blob/main/config.json" for name in TARGETS}


def _specforge(name: str, commit: str = "a6b6b0230009d15ec2a97a57384e6f53f0f96946") -> str:
    return f"{SPECFORGE}/{commit}/configs/{name}"


SPECFORGE_LAYOUT = (f"{SPECFORGE}/a6b6b0230009d15ec2a97a57384e6f53f0f96946/specforge/modeling/"
                    "draft/llama3_eagle.py (midlayer.*, fc, norm, lm_head, d2t, t2d; export "
                    "specforge/export/to_sglang.py leaves the embedding out)")

# -- the drafts ------------------------------------------------------------------------------------
# SafeAILab/EAGLE eagle/traineagle3/config.json, which the published draft carries
EAGLE_LLAMA31 = {
    "architectures": ["LlamaForCausalLM"], "bos_token_id": 128000, "eos_token_id": 128001,
    "hidden_act": "silu", "hidden_size": 4096, "initializer_range": 0.02,
    "intermediate_size": 14336, "max_position_embeddings": 2048, "model_type": "llama",
    "num_attention_heads": 32, "num_key_value_heads": 8, "num_hidden_layers": 1,
    "pad_token_id": 0, "rms_norm_eps": 1e-05, "tie_word_embeddings": False,
    "torch_dtype": "float16", "transformers_version": "4.28.1", "use_cache": True,
    "vocab_size": 128256, "draft_vocab_size": 32000}
SPECFORGE_LLAMA3_8B = {  # configs/llama3-8B-eagle3.json
    **EAGLE_LLAMA31, "architectures": ["LlamaForCausalLMEagle3"]}
SPECFORGE_QWEN3_8B = {  # configs/qwen3-8b-eagle3.json
    "architectures": ["LlamaForCausalLMEagle3"], "attention_bias": False,
    "attention_dropout": 0.0, "bos_token_id": 151643, "eos_token_id": 151645, "head_dim": 128,
    "hidden_act": "silu", "hidden_size": 4096, "initializer_range": 0.02,
    "intermediate_size": 12288, "max_position_embeddings": 40960, "max_window_layers": 36,
    "model_type": "llama", "num_attention_heads": 32, "num_hidden_layers": 1,
    "num_key_value_heads": 8, "rms_norm_eps": 1e-06, "rope_scaling": None,
    "rope_theta": 1000000, "sliding_window": None, "tie_word_embeddings": False,
    "torch_dtype": "bfloat16", "transformers_version": "4.51.0", "use_cache": True,
    "use_sliding_window": False, "vocab_size": 151936, "draft_vocab_size": 32000}
SPECFORGE_QWEN3_4B_TIED = {  # configs/qwen3-4b-eagle3.json before SpecForge PR 140
    **SPECFORGE_QWEN3_8B, "hidden_size": 2560, "intermediate_size": 9728,
    "tie_word_embeddings": True}
SPECFORGE_PHI4_MINI = {  # configs/phi4-mini-eagle3.json as added
    "architectures": ["LlamaForCausalLMEagle3"], "attention_bias": False,
    "attention_dropout": 0.0, "bos_token_id": 199999, "eos_token_id": 199999,
    "pad_token_id": 199999, "hidden_act": "silu", "hidden_size": 3072,
    "initializer_range": 0.02, "intermediate_size": 8192, "max_position_embeddings": 131072,
    "model_type": "phi3", "num_attention_heads": 24, "num_hidden_layers": 1,
    "num_key_value_heads": 8, "rms_norm_eps": 1e-05, "rope_theta": 10000.0,
    "tie_word_embeddings": True, "torch_dtype": "bfloat16", "transformers_version": "4.45.0",
    "use_cache": True, "vocab_size": 200064, "draft_vocab_size": 32000}
SPECFORGE_DEEPSEEK_V3 = {  # configs/deepseek-v3-671b-eagle3.json
    "architectures": ["LlamaForCausalLMEagle3"],
    "eagle_config": {"eagle_aux_hidden_state_layer_ids": [1, 29, 57],
                     "use_aux_hidden_state": True},
    "bos_token_id": 151643, "eos_token_id": 151645, "hidden_act": "silu", "hidden_size": 7168,
    "initializer_range": 0.02, "intermediate_size": 40960, "max_position_embeddings": 163840,
    "model_type": "llama", "num_attention_heads": 56, "num_key_value_heads": 8,
    "num_hidden_layers": 1, "pad_token_id": 0, "rms_norm_eps": 1e-05,
    "tie_word_embeddings": False, "torch_dtype": "float16", "transformers_version": "4.51.0",
    "use_cache": True, "vocab_size": 129280, "draft_vocab_size": 32000}
SPECFORGE_KIMI_K25 = {  # configs/kimi-k25-eagle3.json
    "architectures": ["LlamaForCausalLMEagle3"], "attention_bias": False,
    "attention_dropout": 0.0, "bos_token_id": 163584, "draft_vocab_size": 32000,
    "dtype": "bfloat16", "eagle_config": {"eagle_aux_hidden_state_layer_ids": [2, 30, 58],
                                          "use_aux_hidden_state": True},
    "eos_token_id": 163585, "head_dim": 128, "hidden_act": "silu", "hidden_size": 7168,
    "initializer_range": 0.02, "intermediate_size": 18432, "max_position_embeddings": 131072,
    "max_window_layers": 48, "mlp_bias": False, "model_type": "llama",
    "num_attention_heads": 64, "num_hidden_layers": 1, "num_key_value_heads": 64,
    "pretraining_tp": 1, "rms_norm_eps": 1e-06, "rope_scaling": None, "rope_theta": 1000000.0,
    "sliding_window": None, "tie_word_embeddings": False, "transformers_version": "4.57.0",
    "use_cache": True, "use_sliding_window": False, "vocab_size": 163840}
SPECFORGE_GPT_OSS_20B = {  # configs/gpt-oss-20B-eagle3.json
    "architectures": ["LlamaForCausalLMEagle3"],
    "eagle_config": {"eagle_aux_hidden_state_layer_ids": [1, 11, 21]}, "head_dim": 64,
    "hidden_act": "silu", "hidden_size": 2880, "initializer_range": 0.02,
    "intermediate_size": 17280, "max_position_embeddings": 4096, "model_type": "llama",
    "num_attention_heads": 64, "num_key_value_heads": 8, "num_hidden_layers": 1,
    "pad_token_id": 0, "rms_norm_eps": 1e-05, "tie_word_embeddings": False,
    "torch_dtype": "bfloat16", "transformers_version": "4.52.3", "use_cache": True,
    "vocab_size": 201088, "draft_vocab_size": 32000}
ANGELSLIM_QWEN3_1_7B = {  # configs/qwen3-1.7b-eagle3.json
    "architectures": ["Eagle3LlamaForCausalLM"], "model_type": "llama",
    "target_model_type": "qwen3", "torch_dtype": "bfloat16", "attention_bias": False,
    "attention_dropout": 0.0, "bos_token_id": 151643, "eos_token_id": 151645, "head_dim": 128,
    "hidden_act": "silu", "hidden_size": 2048, "initializer_range": 0.02,
    "intermediate_size": 6144, "max_position_embeddings": 40960, "max_window_layers": 28,
    "num_attention_heads": 16, "num_hidden_layers": 1, "num_key_value_heads": 8,
    "rms_norm_eps": 1e-06, "rope_scaling": None, "rope_theta": 1000000,
    "sliding_window": None, "tie_word_embeddings": True, "transformers_version": "4.51.0",
    "use_cache": True, "use_sliding_window": False, "vocab_size": 151936,
    "draft_vocab_size": 32000}
TORCHSPEC_KIMI_K25_MLA = {  # configs/draft_models/kimi_k25_eagle3_mla.json
    "architectures": ["Eagle3DeepseekV2ForCausalLM"], "model_type": "kimi_k2",
    "hidden_size": 7168, "intermediate_size": 18432, "num_hidden_layers": 1,
    "num_attention_heads": 64, "num_key_value_heads": 64, "q_lora_rank": 1536,
    "kv_lora_rank": 512, "qk_nope_head_dim": 128, "qk_rope_head_dim": 64, "v_head_dim": 128,
    "hidden_act": "silu", "rms_norm_eps": 1e-05, "vocab_size": 163840,
    "draft_vocab_size": 163840, "torch_dtype": "bfloat16", "rope_theta": 50000.0,
    "rope_scaling": {"beta_fast": 1.0, "beta_slow": 1.0, "factor": 64.0, "mscale": 1.0,
                     "mscale_all_dim": 1.0, "original_max_position_embeddings": 4096,
                     "type": "yarn"},
    "eagle_config": {"eagle_aux_hidden_state_layer_ids": [1, 29, 57],
                     "use_aux_hidden_state": True, "use_input_layernorm_in_first_layer": True,
                     "use_last_layernorm": True, "use_mtp_layernorm": False},
    "bos_token_id": 163584, "eos_token_id": 163585, "pad_token_id": 0}
KIMI_K26_NO_HEAD = {  # the MLA draft SGLang issue 27829 describes: full vocab, not tied
    **TORCHSPEC_KIMI_K25_MLA, "tie_word_embeddings": False}

MISREAD = "aux.layer_ids_misread"  # eagle_config ids (SGLang's convention) read by vLLM
# drafts whose eagle_config ids only vLLM's V1 runner misreads: its default V2 runner (0.29+;
# 0.26-0.28 for a target that is not MoE) captures its default, the layers they were
# trained on
V1_ONLY_MISREAD = ("SpecForge configs/deepseek-v3-671b-eagle3.json",
                   "TorchSpec configs/draft_models/kimi_k25_eagle3_mla.json (lightseekorg's "
                   "Kimi MLA drafts)",
                   "nvidia/Kimi-K2.6-Eagle3's layout (no lm_head, draft_vocab_size = vocab_size)")
SG, VL = "sglang==0.5.23", "vllm==0.33.0"
PUBLISHED = (
    Published(
        "yuhuili/EAGLE3-LLaMA3.1-Instruct-8B",
        (f"{EAGLE}/eagle/traineagle3/config.json",
         f"{EAGLE}/eagle/traineagle3/cnets.py (Model: midlayer, fc, norm, lm_head, d2t, t2d; "
         f"main.py save_16bit_model(exclude_frozen_parameters=True): no embedding)",
         "vLLM 0.33 examples/features/speculative_decoding/spec_decode_offline.py, "
         "tests/v1/spec_decode/test_eagle.py (served as is)",
         "SGLang 0.5.23 sglang/test/test_utils.py DEFAULT_DRAFT_MODEL_EAGLE3 = "
         "lmsys/sglang-EAGLE3-LLaMA3.1-Instruct-8B (a converted copy)"),
        EAGLE_LLAMA31, "eagle", "meta-llama/Llama-3.1-8B-Instruct", weights="bin",
        errors={SG: {"config.unsupported"}, VL: set()},
        known="vLLM serves it as published (its own examples and tests use it); SGLang would "
              "build a target LlamaForCausalLM from its config, so SGLang serves a converted "
              "copy (LlamaForCausalLMEagle3), what --fix writes"),
    Published(
        "SpecForge configs/llama3-8B-eagle3.json (lmsys/sglang-EAGLE3-LLaMA3.1-Instruct-8B's "
        "form)", (_specforge("llama3-8B-eagle3.json"), SPECFORGE_LAYOUT),
        SPECFORGE_LLAMA3_8B, "specforge", "meta-llama/Llama-3.1-8B-Instruct",
        errors={SG: set(), VL: set()}, known="served by both"),
    Published(
        "SpecForge configs/qwen3-8b-eagle3.json", (_specforge("qwen3-8b-eagle3.json"),
                                                   SPECFORGE_LAYOUT),
        SPECFORGE_QWEN3_8B, "specforge", "Qwen/Qwen3-8B", errors={SG: set(), VL: set()},
        known="served by both"),
    Published(
        "SpecForge configs/qwen3-4b-eagle3.json before PR 140 (tie_word_embeddings: true)",
        (_specforge("qwen3-4b-eagle3.json", "d0bd219bdf6d4602da43b206920f4f7872509162"),
         SPECFORGE_LAYOUT, "https://github.com/sgl-project/SpecForge/pull/140 (set it false: "
                           "tied, the draft's lm_head takes the embedding's shape)"),
        SPECFORGE_QWEN3_4B_TIED, "specforge", "Qwen/Qwen3-4B",
        errors={SG: {"weights.unused_keys"}, VL: set()},
        known="SGLang ties lm_head to the embedding and drops the trained head (issue 33); "
              "vLLM never reads the flag"),
    Published(
        "SpecForge configs/phi4-mini-eagle3.json as added (tie_word_embeddings: true)",
        (_specforge("phi4-mini-eagle3.json", "169f9077d3ac81cfe4613f5d8401186046509367"),
         SPECFORGE_LAYOUT),
        SPECFORGE_PHI4_MINI, "specforge", "microsoft/Phi-4-mini-instruct",
        errors={SG: {"weights.unused_keys"}, VL: set()},
        known="as the tied Qwen3-4B config"),
    Published(
        "SpecForge configs/deepseek-v3-671b-eagle3.json", (
            _specforge("deepseek-v3-671b-eagle3.json"), SPECFORGE_LAYOUT),
        SPECFORGE_DEEPSEEK_V3, "specforge", "deepseek-ai/DeepSeek-V3",
        errors={SG: set(), VL: set()},
        known="trained with SGLang, which reads its eagle_config ids; vLLM 0.33's default V2 "
              "runner ignores them for its default, the layers it was trained on (healthy); "
              "the V1 runner (opt-in) reads them as layer inputs: a warning"),
    Published(
        "SpecForge configs/kimi-k25-eagle3.json", (
            _specforge("kimi-k25-eagle3.json", "3f9b5fca8fe63c76795e5869bcc5c14e364f6db6"),
            SPECFORGE_LAYOUT),
        SPECFORGE_KIMI_K25, "specforge", "moonshotai/Kimi-K2.5",
        errors={SG: set(), VL: set()},
        known="served by both: on a DeepSeek-family target SGLang reads ids not starting at 1 "
              "as layer inputs, as vLLM does, so both capture the same layers"),
    Published(
        "SpecForge configs/gpt-oss-20B-eagle3.json", (
            _specforge("gpt-oss-20B-eagle3.json"), SPECFORGE_LAYOUT),
        SPECFORGE_GPT_OSS_20B, "specforge", "openai/gpt-oss-20b",
        errors={SG: set(), VL: {MISREAD}}, known="as the DeepSeek-V3 draft"),
    Published(
        "AngelSlim configs/qwen3-1.7b-eagle3.json (tie_word_embeddings: true), as its trainer "
        "saves it", (f"{ANGELSLIM}/configs/qwen3-1.7b-eagle3.json",
                     f"{ANGELSLIM}/models/draft/llama_eagle3.py (Eagle3LlamaForCausalLM: "
                     f"midlayer, fc, norm, lm_head (draft_vocab_size), d2t, t2d)",
                     f"{ANGELSLIM}/trainer/eagle3_trainer.py (save_pretrained without the "
                     f"embedding)"),
        ANGELSLIM_QWEN3_1_7B, "specforge", "Qwen/Qwen3-1.7B",
        errors={SG: {"config.unsupported", "weights.unused_keys"}, VL: set()},
        known="vLLM registers Eagle3LlamaForCausalLM and never reads the tie flag; SGLang "
              "registers LlamaForCausalLMEagle3 only, and tied, drops the trained head"),
    Published(
        "TorchSpec configs/draft_models/kimi_k25_eagle3_mla.json (lightseekorg's Kimi MLA "
        "drafts)", (f"{TORCHSPEC}/configs/draft_models/kimi_k25_eagle3_mla.json",
                    f"{TORCHSPEC}/torchspec/models/draft/deepseek_eagle.py, "
                    f"tools/convert_to_hf.py (midlayer. -> layers.0., embed_tokens kept, no "
                    f"d2t/t2d without vocabulary pruning)"),
        TORCHSPEC_KIMI_K25_MLA, "torchspec-mla", "moonshotai/Kimi-K2.5",
        errors={SG: set(), VL: set()},
        known="SGLang 0.5.12+ serves it (Eagle3DeepseekV2ForCausalLM); vLLM 0.33's default V2 "
              "runner captures its default, the layers it was trained on; the V1 runner "
              "(opt-in) reads its eagle_config ids in the other convention: a warning"),
    Published(
        "nvidia/Kimi-K2.6-Eagle3's layout (no lm_head, draft_vocab_size = vocab_size)",
        ("https://github.com/sgl-project/sglang/issues/27829 (accept length 1.00 on SGLang)",
         "https://github.com/sgl-project/sglang/pull/27908 (the draft ships no lm_head and "
         "declares draft_vocab_size == vocab_size; a sibling with lm_head works)",
         "vLLM 0.33 v1/spec_decode/llm_base_proposer.py _maybe_share_lm_head (shares the "
         "target's head when the checkpoint has none)",
         f"{TORCHSPEC}/configs/draft_models/kimi_k25_eagle3_mla.json (the same MLA fields)"),
        KIMI_K26_NO_HEAD, "modelopt-mla-no-head", "moonshotai/Kimi-K2.5",
        errors={SG: {"weights.missing_params"}, VL: set()},
        known="SGLang allocates a fresh lm_head and leaves it random (accept length 1.00); "
              "vLLM takes the target's (its ids: as the TorchSpec Kimi draft)"),
)
