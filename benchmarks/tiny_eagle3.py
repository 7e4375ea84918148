"""A tiny EAGLE-3-shaped draft in pure PyTorch, for `gpu_check.py`: real tensor work
(fc over the three concatenated aux hidden states, one decoder layer, lm_head) behind
the class and method names spectrace's adapters wrap, so that its wrappers can be
installed on it, and the draft can be captured in a CUDA graph and replayed.

- `make_module()` returns a module object shaped like SGLang's
  `sglang.srt.models.llama_eagle3`: `LlamaModel.forward(input_ids, positions,
  forward_batch)` reads `forward_batch.spec_info.hidden_states` and applies `fc` only when
  its width differs from the embeddings' (SGLang's rule, hence the fc bypass), and
  `LlamaForCausalLMEagle3` adds `lm_head`; plus vLLM's `Eagle3LlamaForCausalLM` with
  `combine_hidden_states` (fc on the target's aux states).
- `DraftStep` is one speculative step of the draft at one batch size on static tensors:
  `STEPS - 1` decode passes on the draft's own hidden state (H wide) and one draft extend
  on the target's aux states (3 x H wide, `STEPS + 1` tokens a request), each followed by
  `lm_head`, the shape of the test kit's v2 step.

Random weights, no checkpoint: the figures are about time and counts, not tokens.
"""
from __future__ import annotations

import types

import torch
from torch import nn
from torch.nn import functional as F

HIDDEN = 256        # draft and target hidden size
NUM_AUX = 3         # aux layers the target captures: fc is 3 x HIDDEN -> HIDDEN
HEADS = 4
INTERMEDIATE = 768
VOCAB = 8192
STEPS = 3           # draft passes a step: STEPS - 1 decode + 1 draft extend
EXTEND_TOKENS = STEPS + 1


class RMSNorm(nn.Module):
    def __init__(self, dim: int, eps: float = 1e-6) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))
        self.eps = eps

    def forward(self, x):
        var = x.float().pow(2).mean(-1, keepdim=True)
        return (x.float() * torch.rsqrt(var + self.eps)).to(x.dtype) * self.weight


class DecoderLayer(nn.Module):
    """EAGLE-3's one layer: attention over [norm(embeddings), norm(hidden)] (2 x H in),
    then an MLP; causal attention within each request's tokens."""

    def __init__(self) -> None:
        super().__init__()
        self.input_layernorm = RMSNorm(HIDDEN)
        self.hidden_norm = RMSNorm(HIDDEN)
        self.qkv_proj = nn.Linear(2 * HIDDEN, 3 * HIDDEN, bias=False)
        self.o_proj = nn.Linear(HIDDEN, HIDDEN, bias=False)
        self.post_attention_layernorm = RMSNorm(HIDDEN)
        self.gate_up_proj = nn.Linear(HIDDEN, 2 * INTERMEDIATE, bias=False)
        self.down_proj = nn.Linear(INTERMEDIATE, HIDDEN, bias=False)

    def forward(self, embeds, hidden, batch_size: int):
        tokens = hidden.shape[0] // batch_size
        x = torch.cat([self.input_layernorm(embeds), self.hidden_norm(hidden)], -1)
        q, k, v = (t.reshape(batch_size, tokens, HEADS, HIDDEN // HEADS).transpose(1, 2)
                   for t in self.qkv_proj(x).chunk(3, -1))
        attn = F.scaled_dot_product_attention(q, k, v, is_causal=tokens > 1)
        h = hidden + self.o_proj(attn.transpose(1, 2).reshape(hidden.shape))
        gate, up = self.gate_up_proj(self.post_attention_layernorm(h)).chunk(2, -1)
        return h + self.down_proj(F.silu(gate) * up)


def make_module():
    """Module object with SGLang's and vLLM's EAGLE-3 draft class names (see above)."""

    class LlamaModel(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.config = types.SimpleNamespace(hidden_size=HIDDEN, target_hidden_size=HIDDEN,
                                                vocab_size=VOCAB)
            self.embed_tokens = nn.Embedding(VOCAB, HIDDEN)
            self.fc = nn.Linear(NUM_AUX * HIDDEN, HIDDEN, bias=False)
            self.midlayer = DecoderLayer()
            self.norm = RMSNorm(HIDDEN)

        def forward(self, input_ids, positions, forward_batch, input_embeds=None,
                    pp_proxy_tensors=None):
            embeds = self.embed_tokens(input_ids)
            hidden = forward_batch.spec_info.hidden_states
            if hidden.shape[-1] != embeds.shape[-1]:  # SGLang's rule: fc only when wider
                hidden = self.fc(hidden)
            return self.norm(self.midlayer(embeds, hidden, forward_batch.batch_size))

    class LlamaForCausalLMEagle3(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.model = LlamaModel()
            self.config = self.model.config
            self.lm_head = nn.Linear(HIDDEN, VOCAB, bias=False)

        def forward(self, input_ids, positions, forward_batch):
            return self.lm_head(self.model(input_ids, positions, forward_batch))

        def load_weights(self, weights):
            return None

    class Eagle3LlamaForCausalLM(nn.Module):
        """vLLM's shape: fc applied in `combine_hidden_states`, outside the model's graph."""

        def __init__(self, model: LlamaModel) -> None:
            super().__init__()
            self.model = model
            self.config = model.config

        def combine_hidden_states(self, hidden_states):
            return self.model.fc(hidden_states)

        def load_weights(self, weights):
            return None

    mod = types.ModuleType("spectrace_bench.tiny_eagle3")
    mod.LlamaModel = LlamaModel
    mod.LlamaForCausalLMEagle3 = LlamaForCausalLMEagle3
    mod.Eagle3LlamaForCausalLM = Eagle3LlamaForCausalLM
    return mod


def _forward_batch(mode, input_ids, hidden, batch_size: int):
    return types.SimpleNamespace(forward_mode=mode, batch_size=batch_size, input_ids=input_ids,
                                 positions=None,
                                 spec_info=types.SimpleNamespace(hidden_states=hidden))


class DraftStep:
    """One speculative step of the draft at batch `bs` on static input tensors (a CUDA
    graph replays on the same buffers): `STEPS - 1` decode passes, one draft extend.
    `bypass`: the target sends one layer (H wide) to the extend pass instead of three,
    so fc is skipped (the fc bypass)."""

    def __init__(self, model, forward_mode, bs: int, device, dtype, bypass: bool = False,
                 seed: int = 0) -> None:
        g = torch.Generator().manual_seed(seed)
        self.model, self.bs = model, bs
        aux = HIDDEN if bypass else NUM_AUX * HIDDEN
        self.decode = _forward_batch(
            forward_mode.DECODE, torch.randint(0, VOCAB, (bs,), generator=g).to(device),
            torch.randn(bs, HIDDEN, generator=g).to(device, dtype), bs)
        self.extend = _forward_batch(
            forward_mode.DRAFT_EXTEND_V2,
            torch.randint(0, VOCAB, (bs * EXTEND_TOKENS,), generator=g).to(device),
            torch.randn(bs * EXTEND_TOKENS, aux, generator=g).to(device, dtype), bs)

    def __call__(self):
        m, d, e = self.model, self.decode, self.extend
        logits = None
        for _ in range(STEPS - 1):
            logits = m(d.input_ids, None, d)
        return logits, m(e.input_ids, None, e)

    def refill(self, seed: int) -> None:
        """New input values in the same buffers (what a graph replay reads)."""
        g = torch.Generator().manual_seed(seed)
        for fb in (self.decode, self.extend):
            h = fb.spec_info.hidden_states
            h.copy_(torch.randn(h.shape, generator=g).to(h.dtype))
            fb.input_ids.copy_(torch.randint(0, VOCAB, fb.input_ids.shape, generator=g))


def build(device, dtype, seed: int = 0):
    """(module, causal-LM draft, vLLM-shaped draft sharing its inner model) on `device`."""
    torch.manual_seed(seed)
    mod = make_module()
    draft = mod.LlamaForCausalLMEagle3().to(device, dtype).eval()
    return mod, draft, mod.Eagle3LlamaForCausalLM(draft.model)
