"""Create a tiny Llama target + EAGLE-3 draft + local byte-level BPE tokenizer (no hub).

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
In partial/bypass, fc scrambles the first aux layer with a permutation and the draft's
lm_head undoes it, so only a draft whose input really went through fc proposes the right
token. Keep prompts' last token id small (send input_ids) so x + steps stays below H.

`layout` names the draft decoder keys: `midlayer` (read by every SGLang version) or
`layers` (`layers.0.*`, which SGLang <= 0.5.8 drops without a word).

Usage: python -m harness.tiny_models OUT MODE [--layout midlayer|layers]
"""
from __future__ import annotations

import argparse
import json
import os

MODES = ("random", "partial", "full", "bypass")
LAYOUTS = ("midlayer", "layers")
V, H, L, DV = 512, 128, 4, 256  # target vocab, hidden size, target layers, draft vocab


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


def draft_config(mode: str) -> dict:
    return dict(
        architectures=["LlamaForCausalLMEagle3"], model_type="llama", vocab_size=V,
        draft_vocab_size=DV, hidden_size=H, intermediate_size=2 * H, num_hidden_layers=1,
        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=1024,
        rms_norm_eps=1e-6, hidden_act="silu", bos_token_id=0, eos_token_id=1,
        tie_word_embeddings=False, torch_dtype="bfloat16", rope_theta=10000.0,
        eagle_config={"eagle_aux_hidden_state_layer_ids": [0, 1, 2],
                      "use_aux_hidden_state": mode != "bypass"})


def draft_state_dict(mode: str, layout: str = "midlayer") -> dict:
    """The draft's tensors, keyed as a SpecForge-style EAGLE-3 checkpoint."""
    import torch

    torch.manual_seed(1)
    hd = H // 4
    r = lambda *s: torch.randn(*s) * 0.02  # noqa: E731
    shift = lambda k: torch.roll(torch.eye(H), shifts=k, dims=0)  # noqa: E731
    dec = {
        "hidden_norm.weight": torch.ones(H), "input_layernorm.weight": torch.ones(H),
        "post_attention_layernorm.weight": torch.ones(H),
        "self_attn.q_proj.weight": r(4 * hd, 2 * H), "self_attn.k_proj.weight": r(2 * hd, 2 * H),
        "self_attn.v_proj.weight": r(2 * hd, 2 * H), "self_attn.o_proj.weight": r(H, 4 * hd),
        "mlp.gate_proj.weight": r(2 * H, H), "mlp.up_proj.weight": r(2 * H, H),
        "mlp.down_proj.weight": r(H, 2 * H),
    }
    sd = {"fc.weight": r(H, 3 * H), "norm.weight": torch.ones(H), "lm_head.weight": r(DV, H)}
    if mode in ("partial", "full", "bypass"):
        perm = torch.eye(H)[torch.randperm(H)]                       # a fixed permutation
        sd["fc.weight"] = torch.cat([perm, torch.zeros(H, 2 * H)], 1)  # fc(aux) = P E[x_t]
        dec["self_attn.o_proj.weight"].zero_()
        dec["mlp.down_proj.weight"].zero_()
        sd["lm_head.weight"] = torch.zeros(DV, H)
        sd["lm_head.weight"][:H] = shift(2) @ perm.T               # predicts x_t + 2 after fc
        if mode == "full":
            sd["norm.weight"].zero_()
    prefix = "midlayer." if layout == "midlayer" else "layers.0."
    sd.update({prefix + k: v for k, v in dec.items()})
    sd = {k: v.to(torch.bfloat16) for k, v in sd.items()}
    sd["d2t"] = torch.zeros(DV, dtype=torch.int64)  # draft id i -> target id i + d2t[i]
    sd["t2d"] = torch.arange(V) < DV
    return sd


def make_target(out_dir: str, mode: str) -> None:
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    cfg = LlamaConfig(vocab_size=V, hidden_size=H, intermediate_size=2 * H,
                      num_hidden_layers=L, num_attention_heads=4, num_key_value_heads=2,
                      max_position_embeddings=1024, bos_token_id=0, eos_token_id=1,
                      tie_word_embeddings=False)
    m = LlamaForCausalLM(cfg)
    shift = lambda k: torch.roll(torch.eye(H), shifts=k, dims=0)  # noqa: E731
    with torch.no_grad():
        if mode in ("partial", "full", "bypass"):
            m.model.embed_tokens.weight.copy_(torch.eye(H).repeat(V // H, 1))  # E[i] = e_(i mod H)
            for lyr in m.model.layers:                                        # residual == E[x]
                lyr.self_attn.o_proj.weight.zero_()
                lyr.mlp.down_proj.weight.zero_()
            m.lm_head.weight.zero_()
            m.lm_head.weight[:H] = shift(1)                                    # next = x + 1
            if mode == "full":
                m.model.norm.weight.zero_()                                   # token 0 always
    m.to(torch.bfloat16).save_pretrained(out_dir, safe_serialization=True)


def make_tiny_models(out: str, mode: str, layout: str = "midlayer") -> tuple[str, str]:
    """Write OUT/target and OUT/draft; return their paths."""
    if mode not in MODES:
        raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
    if layout not in LAYOUTS:
        raise ValueError(f"layout must be one of {LAYOUTS}, got {layout!r}")
    from safetensors.torch import save_file

    tgt, drf = os.path.join(out, "target"), os.path.join(out, "draft")
    os.makedirs(tgt, exist_ok=True)
    os.makedirs(drf, exist_ok=True)
    _save_tokenizer([tgt, drf])
    make_target(tgt, mode)
    with open(os.path.join(drf, "config.json"), "w") as f:
        json.dump(draft_config(mode), f, indent=2)
    save_file(draft_state_dict(mode, layout), os.path.join(drf, "model.safetensors"))
    return tgt, drf


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("out")
    p.add_argument("mode", choices=MODES)
    p.add_argument("--layout", choices=LAYOUTS, default="midlayer")
    a = p.parse_args()
    print("wrote", *make_tiny_models(a.out, a.mode, a.layout))


if __name__ == "__main__":
    main()
