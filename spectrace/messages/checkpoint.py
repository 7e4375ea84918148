"""The words of the findings about a draft's vocabulary map and weights, raised alike at run
time (what the runtime loaded) and by `spectrace doctor` (the checkpoint)."""
from __future__ import annotations

from .. import names
from .message import Message


# -- the vocabulary map (rules.vocab; checkpoint) -------------------------------------------
D2T_MISSING = Message(
    names.VOCAB_D2T_MISSING,
    "the draft vocabulary ({draft_vocab} tokens) is smaller than the target's "
    "({target_vocab}) but the checkpoint has no `d2t` map, so {runtime} maps draft id i to "
    "target id i; unless the draft vocabulary is exactly the first {draft_vocab} target ids, "
    "the draft proposes wrong tokens and acceptance collapses.",
    "save the `d2t` tensor your training pipeline produced (int64, length {draft_vocab}, "
    "d2t[i] = target_id - i) into the checkpoint.")
D2T_ABSOLUTE = Message(
    names.VOCAB_D2T_ABSOLUTE,
    "`d2t` holds absolute target ids ({what}: values {first}...) instead of offsets"
    "{confirmed}. {runtime} adds the draft id (hot id = i + d2t[i]), so draft id i proposes "
    "target id {proposes}: wrong tokens, near-zero acceptance{outside}.",
    "store offsets, d2t[i] = target_id[i] - i (all zeros when the draft vocabulary is the "
    "first {length} target ids).")
D2T_ABSOLUTE_ARANGE = ("arange(draft_vocab)", "2i")           # (what, proposes)
D2T_ABSOLUTE_IDS = ("a list of distinct target ids", "i + id")
D2T_ABSOLUTE_CONFIRMED = " (t2d marks exactly these ids)"
D2T_ABSOLUTE_OUTSIDE = ", and {count} ids fall outside the target vocabulary"
D2T_OUT_OF_RANGE = Message(
    names.VOCAB_D2T_OUT_OF_RANGE,
    "{count} draft ids map outside the target vocabulary [0, {target_vocab}) (e.g. draft id "
    "{draft_id} -> i + d2t[i] = {target_id}). {runtime} indexes the target with these ids: "
    "proposals of those tokens are garbage or fail with an index error on the GPU.",
    "rebuild `d2t` against this target's tokenizer (d2t[i] = target_id[i] - i, "
    "0 <= target_id < {target_vocab}).")
D2T_DUPLICATES = Message(
    names.VOCAB_D2T_DUPLICATES,
    "{count} target ids are the image of more than one draft id (e.g. draft ids {sources} all "
    "map to target id {target_id}). The draft splits probability over copies of one token, "
    "proposes it twice in a tree, and some target tokens it was trained on become "
    "unreachable: acceptance drops.",
    "`d2t` must be injective; rebuild it from the sorted list of distinct hot target ids "
    "(d2t[i] = hot[i] - i).")
D2T_DTYPE = Message(
    names.VOCAB_D2T_DTYPE,
    "`{key}` has dtype {dtype}; the runtime adds it to an int64 arange and indexes with the "
    "result, which fails (or rounds ids) unless it holds integers.",
    "save d2t as int64 (d2t[i] = target_id - i).")

# -- weights (rules.weights; checkpoint) ------------------------------------------------------
UNUSED_KEYS = Message(
    names.WEIGHTS_UNUSED_KEYS,
    "{subject} {count}{of} draft checkpoint key(s) that match no parameter, {dropped} "
    "({names}): {consequence}. {advice}")
UNKNOWN_KEY_WORDS = {"silent": "without a word", "logged": "with only a log warning",
                     "raises": "and refuses to load them (an exception at start-up)"}
UNUSED_RAISES = "the server does not start until they are renamed or removed"
UNUSED_LEAVE_EMPTY = ("the parameters they were meant for keep uninitialised values, so the "
                      "draft proposes noise and acceptance collapses")
UNUSED_NETWORK = ("{count} of them hold weights of the draft network ({names}) that this "
                  "runtime does not build, so it runs a different network than the one "
                  "trained and acceptance drops")
UNUSED_HARMLESS = ("they are ignored; harmless if they are leftovers, but check that no weight "
                   "you trained is among them")
UNUSED_ADVICE = ("Rename them to the names this runtime reads, or remove them if they are not "
                 "part of the draft; `spectrace doctor` lists the expected names.")
UNUSED_RENAMED = "{loader} reads them under other names ({shown}{more}); `--fix` renames them."
UNUSED_MIDLAYER = (
    "{loader} names the decoder `midlayer`, so `layers.0.*` keys match nothing. Rename "
    "`layers.0.` to `midlayer.` (`--fix` does; SGLang >= 0.5.12 reads both names) or deploy on "
    "SGLang >= 0.5.12.")
UNUSED_NOT_BUILT = ("The draft was trained with {what}; {how}. It is built by {where}: deploy "
                    "there{tail}")
NOT_BUILT_NOT_PASSED = "the config sets `{field}` but {loader} does not pass it on from a " \
                       "speculators config"
NOT_BUILT_NO_MODULE = "the config sets `{field}` but {loader} does not build that module"
NOT_BUILT_NOT_SET = "the config does not switch it on (`{field}: true`)"
NOT_BUILT_TAIL_SET = "."
NOT_BUILT_TAIL_NOT_SET = ", or set it in config.json if the runtime has it."
UNUSED_TIED = (
    "`tie_word_embeddings: true` in config.json makes {loader}'s draft class tie lm_head to "
    "the embedding (`self.lm_head = self.model.embed_tokens`), which it then shares with the "
    "target: the trained head is dropped and the draft scores its tokens with the target's "
    "embedding matrix, so its proposals are mostly wrong and acceptance collapses")
UNUSED_TIED_FIX = (
    "Set \"tie_word_embeddings\": false in the draft's config.json (`--fix` does): the trained "
    "head then loads (vLLM never reads the flag and loads it either way).")
UNUSED_NO_PARAMETER = (
    "{loader}'s {arch} has no parameter for them: the draft was trained as a different "
    "network, and `--fix` cannot add what the runtime does not build.")
MISSING_HEAD = Message(
    names.WEIGHTS_MISSING_PARAMS,
    "the checkpoint has no `lm_head.weight` and config.json declares draft_vocab_size = "
    "vocab_size ({vocab}), so {loader} builds the draft its own lm_head and leaves it "
    "uninitialised (it takes the target's head only when draft_vocab_size is absent: "
    "load_lm_head_from_target): the server starts and the draft proposes noise, acceptance "
    "length 1.0 (SGLang issue 27829).",
    "remove draft_vocab_size from config.json (`--fix` does): SGLang then takes the target's "
    "lm_head, as vLLM does for a draft without one.")
MISSING_PARAMS = Message(
    names.WEIGHTS_MISSING_PARAMS,
    "{count} draft parameter(s) get no weight from the checkpoint under {subject} ({names}). "
    "The runtime allocates them uninitialised and does not complain, so the draft proposes "
    "noise and acceptance collapses.",
    "add the tensors under the names this version reads ({expected}).")
MISSING_PARAMS_UNNAMED = Message(
    names.WEIGHTS_MISSING_PARAMS, MISSING_PARAMS.text,
    "check the checkpoint's key names against this runtime's draft class (`spectrace doctor` "
    "lists the expected names).")
MISSING_NORMS = Message(
    names.WEIGHTS_MISSING_PARAMS,
    "{count} draft norm weight(s) get no weight from the checkpoint under {subject} ({names}). "
    "Not noise: the runtime builds them as RMSNorm, whose weight starts at ones (SGLang "
    "`srt/layers/layernorm.py`, vLLM `model_executor/layers/layernorm.py`: "
    "`torch.ones(hidden_size)`), so these layers normalise with unit weights instead of the "
    "trained ones. The draft runs a different network than the one trained, silently, and "
    "loses acceptance by as much as the trained weights differ from 1.{renamed}",
    "add the tensors under the names this version reads ({expected}).")
MISSING_NORMS_EXPECTED = "`spectrace doctor` lists them for this runtime"
MISSING_NORMS_RENAMED = (" The trained weights are in the checkpoint under {shown}, which "
                         "{subject} loads into a norm that layer never computes with; `--fix` "
                         "renames them.")
