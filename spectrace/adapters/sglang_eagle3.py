"""Hooks on SGLang's EAGLE-3 draft models, one table per draft class.

- the inner model's `forward`: width of `forward_batch.spec_info.hidden_states` and the
  pass kind, read from shapes only (no tensor data, no device sync), checked for fc
  bypass (SGLang applies `fc` only when that width differs from the embeddings');
- the same forward's output, on a sampled pass: its hidden states checked for inf/nan on
  the device (`draft_checks.check_finite`, no sync);
- the causal-LM class's `load_weights`: which checkpoint keys reached a parameter loader
  and which parameters were loaded, observed while SGLang's own loader runs; then the
  vocabulary map (`hot_token_id`) it built from `d2t`.

A new draft class is one more `DraftClass` row in `DRAFT_CLASSES` (and its module in
`adapters.ADAPTERS`).
"""
from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Callable

from .. import signals
from ..rules.vocab import check_vocab_map
from ..rules.weights import idle_parameters, tied_head_cause
from ..rules.widths import ExpectedWidths, pass_kind
from ..patching import WrapPoint
from ..objstate import ATTR
from ..process import STATE, recorder
from ..runtimes import SGLANG, runtime_version
from .draft_checks import (
    capturing, check_finite, check_pass, draft_state, report_load,
)
from . import draft_checks
from .load_observer import load_weights_wrapper


@dataclass(frozen=True)
class DraftClass:
    """One EAGLE-3 draft model class SGLang ships (keyed by its module in
    `sglang.srt.models`)."""

    inner: str    # the model whose forward reads spec_info.hidden_states and applies fc
    causal: str   # the causal-LM wrapper: config, load_weights, hot_token_id
    # a key SGLang holds back and loads later fused with another (see LoadObserver)
    deferred: Callable[[str, set], bool] | None = None
    # the pre-attention norm of layers >= 1 (the other one is allocated, never used)
    upper_norm: str | None = None


def _mla_fused_a_proj(key: str, loaded: set) -> bool:
    """The MLA draft holds `q_a_proj` and `kv_a_proj_with_mqa` back until both arrive, then
    loads them concatenated into `fused_qkv_a_proj_with_mqa`."""
    return (("q_a_proj" in key or "kv_a_proj_with_mqa" in key)
            and any("fused_qkv_a_proj_with_mqa" in name for name in loaded))


DRAFT_CLASSES = {
    "llama_eagle3": DraftClass("LlamaModel", "LlamaForCausalLMEagle3",
                               upper_norm="hidden_norm"),
    # Kimi-K2.5 / DeepSeek targets: MLA attention (0.5.12+)
    "kimi_k25_eagle3": DraftClass("Eagle3MLAModel", "Eagle3DeepseekV2ForCausalLM",
                                  deferred=_mla_fused_a_proj),
}


# -- hidden-state widths ----------------------------------------------------------------
def expected_widths(model) -> ExpectedWidths:
    """fc's input width, the draft hidden size, the target hidden size and the number of
    aux layers, from the inner model itself (attribute names differ across versions and
    classes: `nn.Linear.in_features`, SGLang's parallel linear `input_size`)."""
    cfg = model.config
    draft_hidden = int(cfg.hidden_size)
    target_hidden = int(getattr(model, "hidden_size_in", None)
                        or getattr(cfg, "target_hidden_size", None) or draft_hidden)
    fc = model.fc
    fc_in = int(getattr(fc, "in_features", None) or fc.input_size)
    num_aux = int(getattr(model, "num_aux_hidden_states", None)
                  or (fc_in // target_hidden if target_hidden else 3))
    return ExpectedWidths(fc_in, draft_hidden, target_hidden, num_aux)


def _before_forward(instance, forward_batch):
    """Check the pass's input width; returns True when its output is due a non-finite
    check (`_after_forward`), else None."""
    rec = STATE.recorder or recorder()  # per pass: no call when it exists
    st = instance.__dict__.get(ATTR) or draft_checks.state(instance)
    due = st.finite_due(rec.cfg.finite_every) or None
    hidden = forward_batch.spec_info.hidden_states
    if hidden is None:
        return due
    if not st.widths_known:
        st = draft_state(instance, rec, expected_widths, bool(hidden.is_cuda))
    if st.on_cuda and capturing():
        return None  # CUDA-graph capture runs on dummy batches
    mode = forward_batch.forward_mode
    width = hidden.shape[-1]
    seen = st.healthy.get((mode, width))
    if seen is not None:  # seen before and healthy: only count it (DraftPasses.count, inline)
        counts = rec.draft.counts
        counts[seen] = counts.get(seen, 0) + 1
        return due
    name = getattr(mode, "name", str(mode))
    check_pass(rec, st, (mode, width), pass_kind(name), int(width), SGLANG,
               {signals.SPAN_ATTR_FORWARD_MODE: name})
    return due


def _after_forward(due, instance, result) -> None:
    """The inner model returns (hidden states the logits are computed from, [aux])."""
    hidden = result[0] if isinstance(result, tuple) else result
    check_finite(recorder(), instance, ("hidden states",), (hidden,))


# -- weights and vocabulary map -----------------------------------------------------------
def shared_from_target(model) -> set[str]:
    """Parameters the eagle worker fills from the target, so a checkpoint need not carry
    them (the doctor's `doctor.judge.checkpoint.shared_from_target` reads the same rule from
    the config)."""
    shared = {"model.embed_tokens.weight"}
    if getattr(model, "load_lm_head_from_target", False):
        shared.add("lm_head.weight")
    return shared


def _report_load(draft: DraftClass, model, obs) -> None:
    skip = shared_from_target(model) | idle_parameters(obs.names.values(), draft.upper_norm)
    subject = f"SGLang {runtime_version('sglang')}"
    # a trained lm_head dropped because the config ties it to the embedding: say so
    tied = getattr(model, "lm_head", None) is getattr(getattr(model, "model", None),
                                                       "embed_tokens", False)
    report_load(recorder(), obs, subject, skip, vocab_findings(model),
                cause=tied_head_cause(tied, obs.unused, subject))


def vocab_findings(model) -> list:
    """Check the `hot_token_id` SGLang built from `d2t` (hot id i = i + d2t[i])."""
    cfg = model.config
    target_vocab = int(cfg.vocab_size)
    draft_vocab = int(getattr(cfg, "draft_vocab_size", None) or target_vocab)
    hot = getattr(model, "hot_token_id", None)
    offsets = None
    if hot is not None:
        ids = hot.detach().to("cpu").tolist()  # load time, small: not the decode path
        offsets = [h - i for i, h in enumerate(ids)]
    return check_vocab_map(offsets, draft_vocab, target_vocab)


# -- wrap points ----------------------------------------------------------------------------

def wrap_points(draft: DraftClass) -> tuple[WrapPoint, ...]:
    return (
        WrapPoint(f"{draft.inner}.forward", "eagle3.forward", before=_before_forward,
                  reads=("forward_batch",), after=_after_forward, after_needs_ctx=True),
        WrapPoint(f"{draft.causal}.load_weights", "eagle3.load_weights",
                  make_wrapper=lambda module: load_weights_wrapper(
                      "eagle3.load_weights", module, functools.partial(_report_load, draft),
                      draft.deferred)),
    )


LLAMA_EAGLE3 = wrap_points(DRAFT_CLASSES["llama_eagle3"])
KIMI_K25_EAGLE3 = wrap_points(DRAFT_CLASSES["kimi_k25_eagle3"])


def is_eagle3_draft(model) -> bool:
    """One of SGLang's EAGLE-3 draft classes (not an MTP / NextN draft)."""
    return type(model).__name__ in {d.causal for d in DRAFT_CLASSES.values()}
