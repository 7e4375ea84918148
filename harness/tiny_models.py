"""Create tiny EAGLE-3 target + draft pairs with a local byte-level BPE tokenizer (no hub).

Pairs (`pair`):
  llama       : Llama target + SGLang's Llama EAGLE-3 draft (`LlamaForCausalLMEagle3`)
  qwen3-llama : dense Qwen3 target (SGLang adds 1 to every aux layer id) + Llama draft
  dsv3-llama  : DeepSeek-V3 target (MLA + MoE, dense first layer) + Llama draft
  dsv3-mla    : DeepSeek-V3 target + SGLang's MLA EAGLE-3 draft for Kimi-K2.5 / DeepSeek
                (`Eagle3DeepseekV2ForCausalLM`, see harness/tiny_mla.py): the seed's shape
  qwen3-dflash: dense Qwen3 target + vLLM's DFlash draft (`DFlashDraftModel`, vLLM's
                `DFlashQwen3ForCausalLM`: one layer, fc over the outputs of target layers
                `DFLASH_TARGET_LAYER_IDS`, vLLM capturing them + 1); `random` mode only
  dsv3-nextn  : DeepSeek-V3 target with its MTP layer; the draft folder is the same
                checkpoint (SGLang loads it as `DeepseekV3ForCausalLMNextN` for
                `--speculative-algorithm NEXTN`); partial / full / bypass all accept every
                draft token (no aux states, no fc: `bypass` changes nothing for MTP)

Modes:
  random  : random weights (the draft almost never agrees with the target)
  partial : hand-set weights: the target emits next = (x mod H) + 1; the draft's first
            proposal per step is right, later ones wrong -> exactly 1 accepted draft
            token per verify (acceptance length 2.0 with 3 steps)
  full    : target and draft both always emit token 0 -> every draft token accepted
            (acceptance length 4.0 with 3 steps)
  bypass  : partial weights, but the draft's eagle_config switches aux capture off: the
            target sends one hidden layer, the draft skips fc, and acceptance collapses to
            about 1.0 with no error anywhere
  context : acceptance that changes at a known context length (llama pair only): a
            4096-token vocabulary, each token written in two digits (x mod 64, x // 64:
            two one-hot halves of the hidden state), the target emits x + 1, and the
            draft is `partial` for proposals below CONTEXT_RIGHT_BELOW (1024) and wrong
            from there on. A prompt walking 0, 1, 2 ... n-1 puts token p at position p, so
            requests shorter than 1024 tokens accept 2.0 with 3 steps and requests past it
            1.0 (send such input_ids, `walk(n)`). Two more behaviours for per-request
            outliers: a request whose tokens stay in 1024-4095 (`walk(n, start)`) accepts
            nothing at any length (garbled-like), and token CONTEXT_LOOP repeats itself in
            both models (`loop(n)`): a generation loop that accepts every draft token
In partial/bypass, fc scrambles the first aux layer with a permutation and the draft's
lm_head undoes it, so only a draft whose input really went through fc proposes the right
token. Keep prompts' last token id small (send input_ids) so x + steps stays below H.

`layout` names the draft decoder keys: `midlayer` (read by every SGLang version) or
`layers` (`layers.0.*`, which SGLang <= 0.5.8 drops without a word). The MLA draft's
checkpoints use `layers.0.*` (its loader maps them to `midlayer.*`).

Usage: python -m harness.tiny_models OUT MODE [--pair P] [--layout midlayer|layers]
"""
from __future__ import annotations

import argparse
import json
import os
import shutil

MODES = ("random", "partial", "full", "bypass", "context")
LAYOUTS = ("midlayer", "layers")
PAIRS = ("llama", "qwen3-llama", "qwen3-dflash", "dsv3-llama", "dsv3-mla", "dsv3-nextn")
V, H, L, DV = 512, 128, 4, 256  # target vocab, hidden size, target layers, draft vocab
AUX_IDS = [0, 1, 2]             # the draft's eagle_aux_hidden_state_layer_ids
DFLASH_TARGET_LAYER_IDS = [0, 1, 2]  # the DFlash draft's dflash_config.target_layer_ids
CONTEXT_V, DIGIT = 4096, 64     # `context`: vocabulary, base of its two digits (H = 2 x 64)
CONTEXT_RIGHT_BELOW = 1024      # `context`: the draft proposes right only below this id
CONTEXT_MAX_POSITIONS = 4096    # `context`: max_position_embeddings of target and draft
CONTEXT_LOOP = 3000             # `context`: a token both models continue with itself


def _save_tokenizer(dirs: list[str]) -> None:
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    words = ("the quick brown fox jumps over a lazy dog speculative decoding eagle draft "
             "target token").split()
    corpus = [" ".join(words[(i * 7 + j) % len(words)] for j in range(12)) for i in range(200)]
    tok.train_from_iterator(corpus, trainers.BpeTrainer(
        vocab_size=V, special_tokens=["<s>", "</s>", "<unk>"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    hf_tok = PreTrainedTokenizerFast(tokenizer_object=tok, bos_token="<s>", eos_token="</s>",
                                     unk_token="<unk>")
    for d in dirs:
        hf_tok.save_pretrained(d)


def _shift(k: int):
    import torch
    return torch.roll(torch.eye(H), shifts=k, dims=0)


def _r(*shape):
    import torch
    return torch.randn(*shape) * 0.02


# -- pieces every pair shares ----------------------------------------------------------------
def exact_target_head(mode: str, prefix: str = "model.") -> dict:
    """Embeddings, final norm and lm_head of an exact-acceptance target: E[i] = e_(i mod H),
    lm_head maps e_x to x + 1 (`full`: a zero norm, so every logit is 0 and token 0 wins)."""
    import torch
    head = torch.zeros(V, H)
    head[:H] = _shift(1)
    return {f"{prefix}embed_tokens.weight": torch.eye(H).repeat(V // H, 1),
            f"{prefix}norm.weight": torch.zeros(H) if mode == "full" else torch.ones(H),
            "lm_head.weight": head}


def draft_head(mode: str) -> dict:
    """fc, final norm and lm_head of a draft. Exact modes: fc(aux) = P E[x_t] (the first aux
    layer, permuted) and lm_head undoes P and predicts x_t + 2 (`full`: a zero norm)."""
    import torch
    sd = {"fc.weight": _r(H, 3 * H), "norm.weight": torch.ones(H), "lm_head.weight": _r(DV, H)}
    if mode != "random":
        perm = torch.eye(H)[torch.randperm(H)]                       # a fixed permutation
        sd["fc.weight"] = torch.cat([perm, torch.zeros(H, 2 * H)], 1)
        sd["lm_head.weight"] = torch.zeros(DV, H)
        sd["lm_head.weight"][:H] = _shift(2) @ perm.T
        if mode == "full":
            sd["norm.weight"].zero_()
    return sd


def finish_draft(sd: dict, dv: int = DV, v: int = V) -> dict:
    """bfloat16 weights plus the vocabulary map: `d2t` offsets (draft id i -> target id
    i + d2t[i]; zeros: the draft vocabulary is the first DV target ids) and `t2d`."""
    import torch
    sd = {k: v.to(torch.bfloat16) for k, v in sd.items()}
    sd["d2t"] = torch.zeros(dv, dtype=torch.int64)
    sd["t2d"] = torch.arange(v) < dv
    return sd


# -- `context`: a vocabulary the sequence walks through in order -----------------------------
def walk(n: int, start: int = 0) -> list[int]:
    """A `context` prompt: token p at position p (the target continues n, n + 1, ...);
    from `start` (>= CONTEXT_RIGHT_BELOW: a request the draft never gets right)."""
    return list(range(start, start + n))


def loop(n: int) -> list[int]:
    """A `context` prompt of CONTEXT_LOOP repeated: both models continue it forever."""
    return [CONTEXT_LOOP] * n


def _loop_row(head, token: int):
    """Row `token` of a two-digit head scores 3 on token itself (its two digits)."""
    head[token].zero_()
    head[token, token % DIGIT] = 2
    head[token, DIGIT + token // DIGIT] = 1
    return head


def two_digit_embeddings():
    """E[x]: one-hot of x mod 64 in the first half, of x // 64 in the second."""
    import torch
    e = torch.zeros(CONTEXT_V, H)
    x = torch.arange(CONTEXT_V)
    e[x, x % DIGIT] = 1
    e[x, DIGIT + x // DIGIT] = 1
    return e


def two_digit_head(shift: int, right_below: int = CONTEXT_V):
    """An lm_head over two-digit hidden states whose argmax is x + shift: row y scores 2
    on the low digit y - shift (mod 64) and 1 on the high digit y // 64 less the carry,
    so only y = x + shift scores 3. Rows from `right_below` on are zero (never chosen
    over a 2)."""
    import torch
    head = torch.zeros(CONTEXT_V, H)
    for y in range(min(right_below, CONTEXT_V)):
        low, high = y % DIGIT, y // DIGIT
        head[y, (low - shift) % DIGIT] = 2
        carry = 1 if low < shift else 0
        if 0 <= high - carry < DIGIT:
            head[y, DIGIT + high - carry] = 1
    return head


def context_target_head(prefix: str = "model.") -> dict:
    """x -> x + 1, except CONTEXT_LOOP -> CONTEXT_LOOP (its successor's row cleared)."""
    head = _loop_row(two_digit_head(1), CONTEXT_LOOP)
    head[CONTEXT_LOOP + 1].zero_()
    return {f"{prefix}embed_tokens.weight": two_digit_embeddings(),
            f"{prefix}norm.weight": torch_ones(H), "lm_head.weight": head}


def torch_ones(n: int):
    import torch
    return torch.ones(n)


# -- the Llama EAGLE-3 draft ------------------------------------------------------------------
def draft_config(mode: str) -> dict:
    context = mode == "context"
    return dict(
        architectures=["LlamaForCausalLMEagle3"], model_type="llama",
        vocab_size=CONTEXT_V if context else V, draft_vocab_size=CONTEXT_V if context else DV,
        hidden_size=H, intermediate_size=2 * H, num_hidden_layers=1,
        num_attention_heads=4, num_key_value_heads=2,
        max_position_embeddings=CONTEXT_MAX_POSITIONS if context else 2048,
        rms_norm_eps=1e-6, hidden_act="silu", bos_token_id=0, eos_token_id=1,
        tie_word_embeddings=False, torch_dtype="bfloat16", rope_theta=10000.0,
        eagle_config={"eagle_aux_hidden_state_layer_ids": list(AUX_IDS),
                      "use_aux_hidden_state": mode != "bypass"})


def draft_state_dict(mode: str, layout: str = "midlayer") -> dict:
    """The Llama draft's tensors, keyed as a SpecForge-style EAGLE-3 checkpoint."""
    import torch

    torch.manual_seed(1)
    hd = H // 4
    dec = {
        "hidden_norm.weight": torch.ones(H), "input_layernorm.weight": torch.ones(H),
        "post_attention_layernorm.weight": torch.ones(H),
        "self_attn.q_proj.weight": _r(4 * hd, 2 * H), "self_attn.k_proj.weight": _r(2 * hd, 2 * H),
        "self_attn.v_proj.weight": _r(2 * hd, 2 * H), "self_attn.o_proj.weight": _r(H, 4 * hd),
        "mlp.gate_proj.weight": _r(2 * H, H), "mlp.up_proj.weight": _r(2 * H, H),
        "mlp.down_proj.weight": _r(H, 2 * H),
    }
    if mode != "random":
        dec["self_attn.o_proj.weight"].zero_()
        dec["mlp.down_proj.weight"].zero_()
    sd = draft_head("partial" if mode == "context" else mode)
    if mode == "context":  # lm_head: P undone, x_t + 2, right only below CONTEXT_RIGHT_BELOW
        perm = sd["fc.weight"][:, :H]
        sd["lm_head.weight"] = _loop_row(two_digit_head(2, CONTEXT_RIGHT_BELOW),
                                         CONTEXT_LOOP) @ perm.T
    prefix = "midlayer." if layout == "midlayer" else "layers.0."
    sd.update({prefix + k: v for k, v in dec.items()})
    return finish_draft(sd, CONTEXT_V if mode == "context" else DV,
                        CONTEXT_V if mode == "context" else V)


# -- HF-built targets -------------------------------------------------------------------------
def _exact_hf_target(m, mode: str) -> None:
    """Every layer adds zero, so the residual stays E[x]; the head emits x + 1 (or 0)."""
    import torch
    with torch.no_grad():
        head = context_target_head() if mode == "context" else exact_target_head(mode)
        for name, value in head.items():
            owner = m if name == "lm_head.weight" else m.model
            getattr(owner, name.removeprefix("model.").split(".")[0]).weight.copy_(value)
        for lyr in m.model.layers:
            lyr.self_attn.o_proj.weight.zero_()
            lyr.mlp.down_proj.weight.zero_()


def make_llama_target(out_dir: str, mode: str, layers: int = L) -> None:
    """`layers`: 8 gives the default aux capture (inputs of layers 2, n//2, n-3) three
    distinct layers, as drafts without an id list (EAGLE's own) need."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    context = mode == "context"
    m = LlamaForCausalLM(LlamaConfig(
        vocab_size=CONTEXT_V if context else V, hidden_size=H, intermediate_size=2 * H,
        num_hidden_layers=layers, num_attention_heads=4, num_key_value_heads=2,
        max_position_embeddings=CONTEXT_MAX_POSITIONS if context else 1024,
        bos_token_id=0, eos_token_id=1, tie_word_embeddings=False))
    if mode != "random":
        _exact_hf_target(m, mode)
    m.to(torch.bfloat16).save_pretrained(out_dir, safe_serialization=True)


def make_qwen3_target(out_dir: str, mode: str) -> None:
    import torch
    from transformers import Qwen3Config, Qwen3ForCausalLM

    torch.manual_seed(0)
    m = Qwen3ForCausalLM(Qwen3Config(
        vocab_size=V, hidden_size=H, intermediate_size=2 * H, num_hidden_layers=L,
        num_attention_heads=4, num_key_value_heads=2, head_dim=32, max_position_embeddings=2048,
        bos_token_id=0, eos_token_id=1, tie_word_embeddings=False))
    if mode != "random":
        _exact_hf_target(m, mode)
    m.to(torch.bfloat16).save_pretrained(out_dir, safe_serialization=True)


def _write_llama_draft(out_dir: str, mode: str, layout: str) -> None:
    from safetensors.torch import save_file
    with open(os.path.join(out_dir, "config.json"), "w") as f:
        json.dump(draft_config(mode), f, indent=2)
    save_file(draft_state_dict(mode, layout), os.path.join(out_dir, "model.safetensors"))


def _write_dflash_draft(out_dir: str) -> None:
    """vLLM's DFlash draft (random weights), keyed as its checkpoints are: one Qwen3
    decoder layer (`layers.0.*`), `fc` (3 target layers -> H), `hidden_norm`, `norm`,
    `lm_head`; the token embedding comes from the target (vLLM shares it)."""
    import torch
    from safetensors.torch import save_file

    torch.manual_seed(2)
    hd = H // 4
    sd = {"fc.weight": _r(H, len(DFLASH_TARGET_LAYER_IDS) * H), "hidden_norm.weight": torch.ones(H),
          "norm.weight": torch.ones(H), "lm_head.weight": _r(V, H)}
    layer = {"self_attn.q_proj.weight": _r(4 * hd, H), "self_attn.k_proj.weight": _r(2 * hd, H),
             "self_attn.v_proj.weight": _r(2 * hd, H), "self_attn.o_proj.weight": _r(H, 4 * hd),
             "self_attn.q_norm.weight": torch.ones(hd), "self_attn.k_norm.weight": torch.ones(hd),
             "input_layernorm.weight": torch.ones(H), "post_attention_layernorm.weight": torch.ones(H),
             "mlp.gate_proj.weight": _r(2 * H, H), "mlp.up_proj.weight": _r(2 * H, H),
             "mlp.down_proj.weight": _r(H, 2 * H)}
    sd.update({f"layers.0.{k}": v for k, v in layer.items()})
    with open(os.path.join(out_dir, "config.json"), "w") as f:
        json.dump(dict(
            architectures=["DFlashDraftModel"], model_type="qwen3", vocab_size=V, hidden_size=H,
            intermediate_size=2 * H, num_hidden_layers=1, num_attention_heads=4,
            num_key_value_heads=2, head_dim=hd, max_position_embeddings=2048, rms_norm_eps=1e-6,
            hidden_act="silu", bos_token_id=0, eos_token_id=1, tie_word_embeddings=False,
            torch_dtype="bfloat16", rope_theta=10000.0, block_size=4,
            dflash_config={"target_layer_ids": list(DFLASH_TARGET_LAYER_IDS),
                           "mask_token_id": 2}), f, indent=2)
    save_file({k: v.to(torch.bfloat16) for k, v in sd.items()},
              os.path.join(out_dir, "model.safetensors"))


def make_tiny_models(out: str, mode: str, layout: str | None = None,
                     pair: str = "llama") -> tuple[str, str]:
    """Write OUT/target and OUT/draft; return their paths."""
    if mode not in MODES:
        raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
    if pair not in PAIRS:
        raise ValueError(f"pair must be one of {PAIRS}, got {pair!r}")
    if layout is None:
        layout = "layers" if pair == "dsv3-mla" else "midlayer"
    if layout not in LAYOUTS:
        raise ValueError(f"layout must be one of {LAYOUTS}, got {layout!r}")
    if mode == "context" and pair != "llama":
        raise ValueError(f"mode 'context' is made for pair 'llama' only, got {pair!r}")
    if pair == "qwen3-dflash" and mode != "random":
        raise ValueError(f"pair 'qwen3-dflash' has mode 'random' only, got {mode!r}")
    from . import tiny_mla

    tgt, drf = os.path.join(out, "target"), os.path.join(out, "draft")
    os.makedirs(tgt, exist_ok=True)
    os.makedirs(drf, exist_ok=True)
    _save_tokenizer([tgt, drf])
    if pair == "dsv3-nextn":
        tiny_mla.make_target(tgt, mode, nextn=True)
        shutil.rmtree(drf)
        shutil.copytree(tgt, drf)  # the MTP draft is the target's own checkpoint
        return tgt, drf
    if pair == "qwen3-dflash":
        make_qwen3_target(tgt, mode)
        _write_dflash_draft(drf)
        return tgt, drf
    target = {"llama": make_llama_target, "qwen3-llama": make_qwen3_target,
              "dsv3-llama": tiny_mla.make_target, "dsv3-mla": tiny_mla.make_target}[pair]
    target(tgt, mode)
    if pair == "dsv3-mla":
        tiny_mla.make_draft(drf, mode, list(AUX_IDS), layout)
    else:
        _write_llama_draft(drf, mode, layout)
    return tgt, drf


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("out")
    p.add_argument("mode", choices=MODES)
    p.add_argument("--pair", choices=PAIRS, default="llama")
    p.add_argument("--layout", choices=LAYOUTS, default=None)
    a = p.parse_args()
    print("wrote", *make_tiny_models(a.out, a.mode, a.layout, a.pair))


if __name__ == "__main__":
    main()
