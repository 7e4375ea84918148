"""The words of the findings only `spectrace doctor` raises: a checkpoint's config, shapes,
fc width and aux layers, what a runtime reads, dtype, quantization, tokenizers, the chat
template, positions."""
from __future__ import annotations

from .. import names
from .message import Message


# -- a checkpoint's config (doctor.judge.checkpoint) -------------------------------------------------
CONFIG_TRANSLATABLE = Message(
    names.CONFIG_UNSUPPORTED, "{problem}.",
    "`spectrace doctor --fix OUT_DIR` writes the config in the form this runtime reads (the "
    "findings below are for that translation).")
CONFIG_UNTRANSLATABLE = Message(
    names.CONFIG_UNSUPPORTED,
    "{problem}. No translation makes this draft loadable here: {refusals}.")
CONFIG_NO_DRAFT_CLASS = "deploy it on a runtime version that has its draft class"
CONFIG_NO_Q_LORA = Message(
    names.CONFIG_UNSUPPORTED,
    "the MLA draft's config has no q_lora_rank, and {loader} {does}.",
    "set q_lora_rank to the rank the draft was trained with (the rows of q_a_proj.weight{rank})"
    "{fixed}.")
NO_Q_LORA_SGLANG = ("raises 'Eagle3 MLA layer requires q_lora_rank in the draft config' when "
                    "it builds the draft")
NO_Q_LORA_VLLM = ("builds a plain q_proj instead of the low-rank q_a/q_b pair the checkpoint "
                  "holds, so those keys match nothing and the server does not start")
LAYERS_ONE_ONLY = Message(
    names.CONFIG_LAYERS_UNSUPPORTED,
    "the draft has num_hidden_layers = {layers}, but {loader} builds a single `midlayer` and "
    "raises 'EAGLE3 currently only supports 1 layer' at load.",
    "deploy on SGLang >= 0.5.12 (multi-layer drafts, `layers.N.*` keys) or train a one-layer "
    "draft.")
LAYERS_ONE_ONLY_MLA = Message(
    names.CONFIG_LAYERS_UNSUPPORTED, LAYERS_ONE_ONLY.text,
    "train a one-layer draft (the MLA draft has one layer in every version).")
SETTING_UNSAID = Message(
    names.CONFIG_SETTING_IGNORED,
    "`{setting}`: {why}. {loader} therefore runs a different network than the one trained, "
    "silently, and acceptance drops.",
    "state it explicitly in config.json (what the draft was trained with).")
SETTING_IGNORED = Message(
    names.CONFIG_SETTING_IGNORED, SETTING_UNSAID.text,
    "deploy on a runtime that has this setting, or retrain without it; `--fix` cannot change "
    "what the weights compute.")

# -- a checkpoint's tensor shapes (doctor.judge.checkpoint) ------------------------------------------
SHAPE_MISMATCH = Message(
    names.SHAPE_MISMATCH,
    "tensor `{key}` has shape {shape} but the draft config implies {expected} ({why}). "
    "{effect}",
    "make config.json describe the trained model (or re-export the tensor to match).")
SHAPE_D2T_EFFECT = ("The runtime indexes this map with every draft id, so a short map fails on "
                    "the GPU and a long one hides which ids the lm_head really has.")
SHAPE_PARAM_EFFECT = ("The runtime's weight loader rejects it at load time, or the draft "
                      "computes with a layer of the wrong size.")
VOCAB_SIZE_MISMATCH = Message(
    names.SHAPE_MISMATCH,
    "the draft config says vocab_size = {draft_vocab} but the target's is {target_vocab}. The "
    "runtime shares the target's embeddings with the draft, so the draft's view of the "
    "vocabulary disagrees with the tokens it is fed.",
    "set the draft's vocab_size to {target_vocab}.")

# -- a checkpoint's fc width and aux layers (doctor.judge.checkpoint_aux) ----------------------------
HIDDEN_IN_MISMATCH = Message(
    names.FC_CONFIG_WIDTH_MISMATCH,
    "the draft config's {field} = {hidden_in} but the target's hidden_size is {target_hidden}: "
    "{loader} builds fc for {num_aux} x {hidden_in} = {fc_built} inputs while the target sends "
    "{num_aux} x {target_hidden}, so loading or the first target-fed draft pass fails (or fc "
    "is skipped when the widths happen to match the draft's hidden size).",
    "set target_hidden_size = {target_hidden} in the draft's config.json, or pair the draft "
    "with the target it was trained on.")
FC_NOT_WHOLE_LAYERS = Message(
    names.FC_CONFIG_WIDTH_MISMATCH,
    "fc takes {fc_in} inputs, which is not a whole number of target layers of width "
    "{target_hidden}: the draft was trained for another target (or fc was exported wrongly), "
    "and {loader} fails to load it or to run the first target-fed draft pass.",
    "use the target this draft was trained on, or retrain fc for (aux layers) x "
    "{target_hidden}.")
FC_COUNT_MISMATCH = Message(
    names.AUX_COUNT_MISMATCH,
    "{what}, but fc takes {fc_layers} layers ({fc_in} = {fc_layers} x {target_hidden}). "
    "{consequence}",
    "list exactly the {fc_layers} layer ids the draft was trained with.")
COUNT_FAILS_AT_LOAD = (
    "{loader} sizes fc from {sized_by}, i.e. {num_aux} x {target_hidden} = {fc_built} inputs, so "
    "loading fc.weight fails with a shape mismatch ('Attempted to load weight ... into "
    "parameter ...' in default_weight_loader) and the server does not start.")
COUNT_FAILS_AT_RUN = (
    "{loader} builds fc for the checkpoint's {fc_layers} layers ({sized_by}), so the draft "
    "loads, but the target sends {sent} x {target_hidden} wide hidden states: the first "
    "target-fed draft pass fails on fc's shapes, or worse, runs on features the draft was not "
    "trained on.")
SENT_FOR_IDS = "the target is given aux layer ids {ids}{when} and captures {sent} layers"
# where vLLM's two model runners read the ids differently (top level empty, eagle_config ids),
# the fc and aux-count checks take the V1 runner's reading; they say so
IDS_READ_ON_V1 = (" on the V1 model runner, which takes eagle_config's ids when the top level "
                  "names none (the V2 model runner captures the default layers instead)")
SENT_BY_DEFAULT = ("no aux layer ids are given, so the target captures its default layers (the "
                   "inputs of {inputs}: {sent} distinct for {layers} layers)")
FC_LOADER_WIDTH = Message(
    names.FC_CONFIG_WIDTH_MISMATCH,
    "fc takes {fc_layers} x {target_hidden} = {fc_in} inputs, but {loader} always builds fc "
    "for 3 aux layers, i.e. {fc_built}: loading the checkpoint fails.",
    "deploy on a version that sizes fc from the config (SGLang >= 0.5.12, vLLM >= 0.22).")
FC_CONFIG_WIDTH = Message(
    names.FC_CONFIG_WIDTH_MISMATCH,
    "fc takes {fc_layers} x {target_hidden} = {fc_in} inputs, but {loader} builds fc for "
    "{num_aux} aux layers (from the config), i.e. {fc_built}: loading the checkpoint fails.",
    "{fix}")
# the Fix of FC_CONFIG_WIDTH, from the replay of the runtime's config path (fix_replay)
FC_WIDTH_PROVEN = ("set `{key}` = {fc_layers} in config.json (replayed on a copy: with it "
                   "{built}{rejected}); `--fix` writes it.")
FC_WIDTH_REJECTED = "; not elsewhere: {rejected}"
FC_WIDTH_UNPROVEN = ("no config.json value was found that makes {loader} build fc for "
                     "{fc_layers} aux layers (replayed on a copy: {rejected}): deploy on a "
                     "version that reads one, or retrain the draft.")
IDS_OUT_OF_RANGE = Message(
    names.AUX_LAYER_IDS_OUT_OF_RANGE,
    "aux layer ids {ids}{when}, but the target has {layers} layers: {loader} {rule}, and can "
    "capture "
    "the inputs of layers {lo}..{hi}, so {bad} are never captured. The target sends fewer aux "
    "layers than fc expects: the draft pass fails, or fc is silently skipped when the width "
    "equals the draft's hidden size.",
    "use the ids the draft was trained with, or pair the draft with the deeper target it was "
    "trained for.")
ID_RULE_VLLM = "captures the input of layer id (the state after id layers)"
ID_RULE_KEPT = ("captures the input of layer id for a DeepSeek-family target (of id + 1 when "
                "the first id is 1, and before 0.5.16)")
ID_RULE_PLUS_ONE = "captures the input of layer id + 1 (the output of layer id)"
CAPTURE_FLAG_OFF = Message(
    names.AUX_CAPTURE_DISABLED,
    "eagle_config.use_aux_hidden_state is false, but fc expects {fc_layers} concatenated "
    "target layers. The target then sends only its last hidden state; when its width equals "
    "the draft's hidden size the draft silently skips fc, sees features it was not trained on, "
    "and acceptance falls to about 1.0 with no error anywhere.{runner}",
    "set eagle_config.use_aux_hidden_state to true (or remove it).")
# vLLM 0.18-0.32: the V2 model runner captures aux layers for every EAGLE-3 draft
# (gpu/model_runner.py); from 0.33 it reads the flag too (eagle3_utils.requires_aux_hidden_states)
CAPTURE_FLAG_RUNNERS = (
    " That is the V1 model runner; {loader}'s V2 model runner captures the aux layers whatever "
    "the flag says, and the draft, built without fc, fails at its first draft pass on their "
    "width instead.{which}")
CAPTURE_FLAG_IGNORED = Message(
    names.AUX_CAPTURE_DISABLED,
    "eagle_config.use_aux_hidden_state is false, but fc expects {fc_layers} concatenated "
    "target layers. {loader} ignores this flag, but other versions would disable aux capture "
    "and the draft would silently skip fc.",
    CAPTURE_FLAG_OFF.fix)
IDS_MISREAD = Message(
    names.AUX_LAYER_IDS_MISREAD,
    "the draft was trained on the inputs of target layers {trained} (its ids {ids} are in "
    "{convention}), but under {loader} {how}: the draft sees other layers than it was trained "
    "on, and acceptance drops with no error.{runner}",
    "{fix} (`--fix` does).")
ID_CONVENTION = {
    names.RUNTIME_SGLANG: "SGLang's convention (eagle_config, as SGLang's "
                            "set_eagle3_layers_to_capture reads them for this target)",
    names.RUNTIME_VLLM: "vLLM's convention (top level: the input of layer id)",
}
ID_CONVENTION_NONE = "no id list (the inputs of layers 2, n//2, n-3)"
MISREAD_READING = "{when}{reading} capture the inputs of layers {got}"
MISREAD_DEFAULT_RUNNER = " {loader} runs this target on the {runner} model runner by default."
MISREAD_ONLY_OTHER_RUNNER = (
    " This holds only on the {other} model runner: {loader} runs this target on the {runner} "
    "model runner by default, which captures the layers the draft was trained on ({why}).")
# judged on the runner --vllm-runner chose, which is not the release's default for the target
MISREAD_CHOSEN_RUNNER = (" This is judged on the {runner} model runner (--vllm-runner); {loader} "
                         "runs this target on the {default} model runner by default.")
MISREAD_ONLY_OTHER_CHOSEN = (
    " This holds only on the {other} model runner, {loader}'s default for this target: the "
    "{runner} model runner it is judged on (--vllm-runner) captures the layers the draft was "
    "trained on.")
MISREAD_WHY_V1 = ("the V1 runner is taken with VLLM_USE_V2_MODEL_RUNNER=0, on a build without "
                  "Triton such as vLLM's CPU build, or for a feature the V2 runner lacks")
MISREAD_WHY_V2 = "the V2 runner is taken with VLLM_USE_V2_MODEL_RUNNER=1"
MISREAD_FIX = {
    names.RUNTIME_SGLANG: "write them in eagle_config in SGLang's convention",
    names.RUNTIME_VLLM: "write them at the top level as `eagle_aux_hidden_state_layer_ids` in "
                          "vLLM's convention",
}

# -- why a runtime cannot read a config (doctor.judge.runtime_view; the {problem} above) ------------
SGLANG_READS_NO_SPECULATORS = (
    "{runtime} reads config.json with transformers' AutoConfig, which needs a top-level "
    "model_type, and no SGLang version reads the speculators format (`speculators_config`, "
    "`transformer_layer_config`): the server fails at start-up")
NO_DRAFT_CLASS = ("{runtime} {version} has no EAGLE-3 draft class for this {draft} draft "
                  "(architecture {archs})")
BUILDS_TARGET_CLASS = (
    "{runtime} {version} builds the target model class LlamaForCausalLM from it, so none of "
    "the draft's keys (midlayer.*, fc, d2t) load and the draft is noise")
NO_CLASS_FOR_ARCH = "{runtime} {version} registers no draft class for architecture {archs}"
SPECULATORS_NO_LAYER_CONFIG = ("the speculators config has no transformer_layer_config object, "
                               "which vLLM takes as the draft's model config")
SPECULATORS_MODEL_TYPE = "vLLM {version} raises 'Unsupported model_type {model_type} for " \
                         "Eagle3 speculator'"
VLLM_MLA_AS_MTP = (
    "vLLM {version} turns a draft config whose model_type is {model_type} into DeepSeek's MTP "
    "module (`SpeculativeConfig.hf_config_override`: model_type deepseek_mtp), so "
    "`--speculative-config` with method eagle3 fails at start-up ('Eagle3DeepSeekMTPModel ... "
    "not supported'); the same draft with model_type deepseek_v2 (the fields are the same) "
    "builds Eagle3DeepseekV2ForCausalLM")
FIELD_TYPE = Message(
    names.CONFIG_FIELD_TYPE,
    "config.json's `{field}` is {value} where {cls} declares {expected} ({transformers}): "
    "{runtime}'s get_config builds the draft's config with that class (transformers' "
    "AutoConfig, model_type {model_type!r}) and raises StrictDataclassFieldValidationError "
    "(\"Field '{field}' expected ...\") before any weight is read{outcome}.",
    "{fix}")
FIELD_TYPE_STRICT = ", and the server does not start"
FIELD_TYPE_MAYBE = (" with a transformers 5.4 or later (pip's choice for this requirement; "
                    "a 4.x transformers reads it as it is)")
FIELD_TYPE_PINNED = "transformers {req} as {runtime} requires"
FIELD_TYPE_RANGE = "transformers {req} as {runtime} requires; {which}"
FIELD_TYPE_ALL_STRICT = "every one of them is a strict dataclass"
FIELD_TYPE_SOME_STRICT = "strict from 5.4"
FIELD_TYPE_DROP = ("remove `{field}` from config.json, so the class default ({default}) "
                   "applies (`--fix` does).")
FIELD_TYPE_SET = "write `{field}` as {new} (`--fix` does)."
FIELD_TYPE_BY_HAND = ("set `{field}` to the value the draft was trained with, as {expected} "
                      "(no default can stand in for it).")


UNSUPPORTED_ACTIVATION = Message(
    names.CONFIG_UNSUPPORTED,
    "the draft's hidden_act is {act!r}, and {loader}'s draft MLP raises 'Unsupported "
    "activation: {act}. Only silu is supported for now.' when it builds the draft: the server "
    "does not start.",
    "the runtimes serve EAGLE-3 drafts with silu only: retrain with hidden_act silu (no config "
    "change makes the trained weights compute silu).")

# -- settings trained with vs read (doctor.judge.trained_settings; the {why} above) ------------------
NBR_UNSAID_VLLM = (
    "the speculators config does not say; vLLM reads a missing value as true (residual = "
    "hidden_norm(fc output)), while `speculators convert` and the config class default to "
    "false, and training defaults to true")
NBR_UNSAID_SGLANG = (
    "the speculators config does not say whether the residual is the normalised fc output "
    "(speculators' training default) or the raw one (the only choice SGLang has)")
NBR_DIFFERS = ("the draft adds the {trained} fc output as the residual; {served}and no rename "
               "or re-weighting makes them equal (RMSNorm is not linear)")
NBR_SERVED_SGLANG = "no SGLang version has this option (llama_eagle3 always adds the raw one), "
NBR_SERVED = "{loader} adds the {served} one, "
NORM_OUTPUT_IGNORED = ("the draft was trained to feed the post-norm state back to the next "
                       "draft step (EAGLE 3.1); {loader} feeds back the pre-norm state{dropped}")
NORM_OUTPUT_DROPPED = " (its speculators translation drops the field)"
MLA_NO_INPUT_NORM = ("the MLA draft of {loader} has no input_norm: the concatenated aux states "
                     "reach fc without the norm the draft was trained with")

# -- dtype (doctor.judge.dtypes; doctor.files.weight_scan) -------------------------------------------------
DTYPE_HOW_OPTION = "launched with --dtype {dtype}"
DTYPE_HOW_SGLANG = ("SGLang resolves --dtype auto from the draft's own config.json, which says "
                    "{dtype}")
DTYPE_HOW_SGLANG_F32 = ("SGLang resolves --dtype auto from the draft's own config.json, which "
                        "{said}, and runs float32 or unstated as float16 (not as the target)")
DTYPE_HOW_VLLM = "vLLM runs the draft in the target's dtype, {dtype} from the target's {source}"
DTYPE_HOW_VLLM_F32 = ("vLLM runs the draft in the target's dtype, and the target's {said}, "
                      "which --dtype auto runs as bfloat16 on GPUs that have it (float16 on "
                      "those that do not, compute capability below 8.0)")
DTYPE_OVERFLOW = Message(
    names.DTYPE_FLOAT16_OVERFLOW,
    "{runtime} computes the draft in float16 ({how}), but {values} value(s) in {tensors} "
    "tensor(s) saved in {saved} lie beyond float16's largest value 65504 (e.g. `{key}`, "
    "|x| up to {largest}). Cast at load they become inf (65504 just below 65520), and every "
    "draft pass through them yields inf/nan: proposals are garbage and acceptance collapses.",
    "serve the draft in bfloat16 (--dtype bfloat16, on SGLang also torch_dtype: bfloat16 in "
    "the draft's config.json), or retrain with weight decay / clipping so the weights fit "
    "float16.")
DTYPE_FLOAT16 = Message(
    names.DTYPE_FLOAT16,
    "{runtime} computes the draft in float16 ({how}), but it was saved in {trained}, whose "
    "range float16 lacks. No weight is beyond 65504 (all were read), but activations that "
    "fit {trained} can overflow float16 (inf/nan from the first large hidden state) and "
    "values below 6e-8 flush to zero: acceptance may fall on long or unusual inputs with no "
    "error.",
    "serve in bfloat16 (--dtype bfloat16; on SGLang also torch_dtype: bfloat16 in the draft's "
    "config.json) when the GPU has it, or check acceptance in float16 with `spectrace report`.")
DTYPE_SAID_TWICE = "{config} by its config.json and {weights} by its weights"
DTYPE_CAST = Message(
    names.DTYPE_CAST,
    "{runtime} computes the draft in {dtype} ({how}); it was saved in {trained}. The cast "
    "keeps the values within range; only rounding differs from what was trained, which "
    "barely moves acceptance.")

# -- the target's quantization (doctor.judge.quantization) -------------------------------------------
TARGET_QUANTIZED = Message(
    names.TARGET_QUANTIZED,
    "the target is quantized ({method}: {scheme}; from {where}) and {runtime} serves it so. "
    "Its hidden states, which the draft reads from the aux layers, and the tokens it accepts "
    "are the quantized model's; {effect}",
    "train (or fine-tune) the draft on hidden states generated by this quantized target, "
    "served the way it will be served; then compare acceptance with `spectrace report`.")
QUANT_EFFECT = ("a draft trained on the unquantized model's hidden states sees slightly "
                "shifted features and usually loses some acceptance.")
QUANT_EFFECT_LOW_BITS = ("at 4 bits or fewer the features shift visibly, and a draft trained on "
                         "the unquantized model's hidden states loses noticeably more acceptance "
                         "than at 8 bits.")

# -- the tokenizers (doctor.judge.tokenizers) ---------------------------------------------------
TOKENIZER_VOCAB_DIFFERS = Message(
    names.VOCAB_TOKENIZER_MISMATCH,
    "the draft's tokenizer.json has another vocabulary than the target's ({draft_size} vs "
    "{target_size} tokens; {moved} of the draft's tokens have another id in the target's, "
    "{only_target} of the target's are not in the draft's). Both runtimes tokenize with the "
    "target's tokenizer only, so the draft reads ids that meant other strings in training and "
    "proposes ids that mean other strings to the target: acceptance collapses.",
    "pair the draft with the target it was trained for, or retrain it with the target's "
    "tokenizer (and rebuild `d2t` from it).")
TOKENIZER_FILE_DIFFERS = Message(
    names.VOCAB_TOKENIZER_MISMATCH,
    "the draft's {file} differs from the target's ({sections}), though the vocabulary is the "
    "same where it can be compared. The runtime uses the target's; if the draft was trained "
    "with the other one, texts were split differently and acceptance may drop.",
    "check that the draft was trained with the target's tokenizer (copy the target's files "
    "into the draft directory once it is).")
SPECIAL_TOKENS_DIFFER = Message(
    names.VOCAB_SPECIAL_TOKENS_MISMATCH,
    "the draft and the target state different special tokens ({differences}). The runtime "
    "uses the target's; a draft trained with other ids for begin/end/padding proposes its "
    "own end token where the target continues (or misses the target's), so acceptance drops "
    "around turn boundaries.",
    "check that the draft was trained with the target's tokenizer and chat template, then "
    "write the target's ids into the draft's config.json.")
SPECIAL_IDS_DIFFER = Message(
    names.VOCAB_SPECIAL_TOKENS_MISMATCH,
    "the draft's config.json states other special token ids than the target's "
    "({differences}). Neither runtime reads the draft's ids (both use the target's tokenizer "
    "and ids), and some exporters write template defaults here (Model Optimizer's "
    "llama_eagle_template_config: bos 1, eos 2), so this alone changes nothing at run time; "
    "it matters only if the draft was trained with a tokenizer whose ids these are.",
    "write the target's ids into the draft's config.json once you have checked which "
    "tokenizer it was trained with.")
# -- the chat template (doctor.judge.chat_templates) ------------------------------------------
CHAT_TEMPLATE_DIFFERS = Message(
    names.CHAT_TEMPLATE_MISMATCH,
    "the draft was trained with another chat template than the target's: {trained} (sha256 "
    "{trained_hash}) against the target's {target} (sha256 {target_hash}); {differences}. "
    "The server renders chat requests with the target's template (unless --chat-template "
    "names another), so the draft reads role markers and a system prompt it was not trained "
    "on, and acceptance drops on chat traffic with no error (sglang#4247, EAGLE#132).",
    "serve with the template the draft was trained with (--chat-template FILE, on SGLang and "
    "vLLM alike; `spectrace report` shows the hash of the template the server applies), or "
    "retrain the draft on data rendered with the target's template.")
# the report's `chat template:` line where nothing can be compared (information, no finding)
CHAT_TEMPLATE_UNRECORDED = ("cannot be checked: {why} The target's: {target}. If you know the "
                            "tokenizer the draft was trained with, put its "
                            "tokenizer_config.json (or chat_template.jinja) in the draft "
                            "folder and run the doctor again.")
CHAT_TEMPLATE_TARGET_NONE = ("the target carries none (neither chat_template.jinja nor a "
                             "chat_template in tokenizer_config.json), so the server applies "
                             "only what --chat-template names; the draft was trained with "
                             "{trained} (sha256 {trained_hash}): start the server with "
                             "--chat-template set to it.")
CHAT_TEMPLATE_SAME = "{trained} is the target's {target} (sha256 {hash})"
# what each trainer records about the template (the `why` above), read from their sources
TEMPLATE_UNRECORDED = {
    "specforge": "SpecForge keeps the template's name only in its training run (0.1.x: the "
                 "--chat-template argument, pickled in the training_state.pt beside each saved "
                 "draft, read when it is there; 0.2.0: `data.chat_template` of the run config) "
                 "and its exporter (export_to_sglang) writes config.json and the weights only. "
                 "It renders the training data with "
                 "the target tokenizer's own template and adds its registry template's system "
                 "prompt where a conversation has none (data/parse.py GeneralParser), so "
                 "serve with that system prompt.",
    "speculators": "speculators records the verifier it was trained for "
                   "(speculators_config.verifier.name_or_path {verifier!r}) and renders the "
                   "training data with that verifier's own template, but {verifier_state}.",
    "modelopt": "NVIDIA Model Optimizer's export (export_speculative_decoding) writes "
                "config.json and model.safetensors only; training used the base tokenizer's "
                "template, or DataArguments.chat_template in its place "
                "(LanguageDataCollator), which the training run saves with its tokenizer, "
                "not with the export.",
    "other": "the draft folder carries no chat template (no chat_template.jinja, no "
             "chat_template in tokenizer_config.json) and its format records none.",
}
# -- positions and attention (doctor.judge.positions) ------------------------------------------------
POSITIONS_BEYOND = Message(
    names.POSITIONS_BEYOND_DRAFT,
    "the draft knows {draft} positions (max_position_embeddings, with its rope scaling) but "
    "the pair is served at a context of {context} tokens. {how} Past {draft} tokens the draft "
    "runs at positions it was never trained on and acceptance falls with the length.",
    "serve at --context-length {draft} or less, or retrain (or fine-tune) the draft on longer "
    "sequences; raising max_position_embeddings in config.json only silences the check "
    "(`--fix` leaves it as it is).")
BEYOND_SGLANG = ("SGLang refuses to start such a pair (configs/model_config.py) unless "
                 "SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN=1 is set, which overwrites the "
                 "draft's max_position_embeddings with the target's context and warns only in "
                 "the log.")
BEYOND_VLLM = ("vLLM starts it: the draft's max_model_len is capped at its own length "
               "(config/speculative.py `_maybe_override_draft_max_model_len`) while the target "
               "runs to the full context.")
ROPE_MODELOPT = Message(
    names.POSITIONS_ROPE_CHANGED,
    "the draft's config has {draft} where the target has {target}: NVIDIA Model Optimizer "
    "trains the draft on plain RoPE and writes this YaRN scaling at export (its "
    "eagle_export_rope_scaling default), a deliberate length extension. {loader} applies the "
    "scaling (the draft's rotary embedding follows its config). {where}",
    "nothing, if that extension is what you want; to serve the draft exactly as trained, "
    "export with eagle_export_rope_scaling={{}} (plain RoPE) and serve within its "
    "original_max_position_embeddings.")
ROPE_WITHIN = ("Served at {context} tokens, within the {original} positions it was trained "
               "at, the scaling still changes the rotary frequencies it was trained with.")
ROPE_EXTENDED = ("Served at {context} tokens, beyond the {original} trained positions and "
                 "within YaRN's reach ({reach}): the extension Model Optimizer intends.")
ROPE_BEYOND_REACH = ("Served at {context} tokens, beyond even YaRN's reach ({reach}): the "
                     "draft runs at positions neither its training nor the scaling covers.")
ROPE_DIFFERS = Message(
    names.POSITIONS_ROPE_CHANGED,
    "the draft's RoPE ({draft}) differs from the target's ({target}). {loader} builds the "
    "draft's rotary embedding from the draft's own config, so the draft runs as its config "
    "says; this matters only if the draft was trained with the target's RoPE and the config "
    "was edited since.",
    "nothing if the config is what the trainer wrote; otherwise restore the trainer's values.")
WINDOW_IGNORED = Message(
    names.CONFIG_SETTING_IGNORED,
    "`sliding_window`: the draft was trained with a {size}-token sliding window (draft layers "
    "{layers}), but {how} {served}",
    "{fix}")
WINDOW_SGLANG = ("{loader}'s LlamaForCausalLMEagle3 never reads sliding_window from the "
                 "config (a window comes only from a server argument, models/llama_eagle3.py), "
                 "so it runs full attention.")
WINDOW_VLLM = ("{loader}'s draft class takes a window only for layers that `layer_types` marks "
               "\"sliding_attention\" (models/llama.py), and this config has no layer_types, "
               "so it runs full attention.")
WINDOW_SERVED_LONGER = ("Served at {context} tokens, beyond {size} the draft attends to keys "
                        "it never saw in training and acceptance falls with the length.")
WINDOW_SERVED_UNKNOWN = ("Beyond {size} tokens the draft attends to keys it never saw in "
                         "training.")
WINDOW_SERVED_WITHIN = ("Served at {context} tokens (no more than the {size}-token window) "
                        "that makes no difference.")
WINDOW_FIX_FLAG = ("launch SGLang with --speculative-draft-window-size {size} (a server "
                   "argument: no config change makes SGLang apply it, so `--fix` cannot).")
WINDOW_FIX_UPGRADE = ("use SGLang 0.5.12 or later and launch with "
                      "--speculative-draft-window-size {size}, or serve on vLLM, which "
                      "honours the config's window.")
WINDOW_FIX_LAYER_TYPES = ("add \"layer_types\": [\"sliding_attention\", ...] (one per draft "
                          "layer) next to sliding_window {size} in config.json.")

# -- no aux layer ids (doctor.judge.checkpoint_aux) ---------------------------------------------------
IDS_DEFAULT = Message(
    names.AUX_LAYER_IDS_DEFAULT,
    "the draft names no aux layer ids{where}, so {loader} captures its default for this "
    "{layers}-layer target: ids {ids} (the inputs of layers {inputs}; {rule}). {meaning}",
    "{fix}")
IDS_DEFAULT_WHERE_NULL = " (eagle_aux_hidden_state_layer_ids is null or absent)"
IDS_DEFAULT_LOST = ("A speculators config records the ids it was trained on; a null there "
                    "means a converter lost them (`speculators convert` of a SpecForge draft "
                    "writes null), and a draft trained on other layers gets the wrong inputs.")
IDS_DEFAULT_NORMAL = ("Leaving them out is this format's normal practice when the draft was "
                      "trained on the runtime's defaults.")
IDS_DEFAULT_FIX_LOST = ("write the ids the draft was trained on into "
                        "eagle_aux_hidden_state_layer_ids (from the trainer's config or the "
                        "original checkpoint); no check can recover them from the weights.")
IDS_DEFAULT_FIX_NORMAL = ("nothing, if the draft was trained on those layers; otherwise write "
                          "the trained ids into the config.")
IDS_DEFAULT_RULE = {"vllm": "vLLM's default, models/llama.py get_eagle3_aux_hidden_state_layers",
                    "sglang": "SGLang's default, models/llama.py set_eagle3_layers_to_capture"}
