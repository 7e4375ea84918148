"""Hooks on vLLM's EAGLE-3 draft models (V1 engine, in the worker process), one table per
draft class. All of them keep fc and the aux-layer settings on the inner `.model` and
share the two methods wrapped here:

- `combine_hidden_states(hidden_states)`: the hidden states the target fed the draft,
  before fc, on every target-fed pass (the draft's own later steps take its previous
  output and never come here). Both of vLLM's model runners call it in Python, outside
  CUDA graphs. Its width is read from the shape only and checked for fc bypass: vLLM
  skips fc (and builds none) when the draft config's `use_aux_hidden_state` is false,
  and then the target captures nothing either. A one-dimensional input is not a pass:
  parallel drafting (PEagle) combines its learnt mask state once at load
  (`load_model`: `combine_hidden_states(mask_hidden.view(-1))`), which says nothing
  about what the target feeds.
- `compute_logits(hidden_states)`: on a sampled call, the draft's hidden states (not the
  logits: they hold -inf by design outside the draft vocabulary) are checked for inf/nan
  on the device (`draft_checks.check_finite`, no sync). The proposer calls it in Python, outside CUDA
  graphs, on every draft step.
- `load_weights`: which checkpoint keys reached a parameter loader and which parameters
  were loaded (`load_observer`, linked by tensor: vLLM collects the pairs before loading
  them); then the vocabulary map (`draft_id_to_target_id`, vLLM's name for `d2t`). vLLM
  returns None from these loaders, which switches its own check for unloaded weights off.

A new draft class is one more row in `DRAFT_CLASSES` (and its module in
`adapters.ADAPTERS`).
"""
from __future__ import annotations

import sys

from .. import signals
from ..rules.vocab import check_vocab_map
from ..rules.weights import idle_parameters
from ..rules.widths import ExpectedWidths
from ..patching import WrapPoint
from ..runtimes import VLLM, runtime_version
from . import draft_checks
from .draft_checks import (
    capturing, check_finite, check_pass, count_if_healthy, draft_state, finite_due, report_load,
)
from .load_observer import load_weights_wrapper
from .vllm_identity import worker_recorder

# module -> the EAGLE-3 draft class it defines (all aliases in vLLM's registry map here)
DRAFT_CLASSES = {
    "vllm.model_executor.models.llama_eagle3": "Eagle3LlamaForCausalLM",
    "vllm.model_executor.models.deepseek_eagle3": "Eagle3DeepseekV2ForCausalLM",  # 0.18+
    "vllm.model_executor.models.qwen3_eagle3": "Eagle3Qwen3ForCausalLM",  # 0.24+
}
# parameters vLLM fills from the target when the checkpoint has none (embeddings, lm_head),
# or that the vocabulary-map check judges (`d2t`)
SHARED = {"model.embed_tokens.weight", "lm_head.weight", "draft_id_to_target_id"}


def is_eagle3_draft(model) -> bool:
    return type(model).__name__ in DRAFT_CLASSES.values()


# -- hidden-state widths ----------------------------------------------------------------
def expected_widths(draft) -> ExpectedWidths | None:
    """fc's input width, the draft and target hidden sizes and the aux-layer count; fc's
    width from the fc vLLM built, or else from the checkpoint's fc weight (None: the draft
    was never trained on aux layers)."""
    inner, cfg = draft.model, draft.config
    draft_hidden = int(cfg.hidden_size)
    target_hidden = int(getattr(cfg, "target_hidden_size", None) or draft_hidden)
    fc = getattr(inner, "fc", None)
    if fc is not None:
        fc_in = (getattr(inner, "fc_input_size", None) or getattr(fc, "input_size", None)
                 or fc.weight.shape[-1])
    else:
        fc_in = draft_checks.state(draft).checkpoint_fc_in
        if not fc_in:
            return None
    num_aux = getattr(inner, "num_aux_hidden_states", None) or int(fc_in) // target_hidden
    return ExpectedWidths(int(fc_in), draft_hidden, target_hidden, int(num_aux))


def _before_combine(instance, hidden):
    if hidden.dim() < 2:
        return  # one vector, no tokens: parallel drafting's mask state, combined at load
    if hidden.is_cuda and capturing():
        return  # CUDA-graph capture runs on dummy batches
    width = hidden.shape[-1]
    rec = worker_recorder()
    st = draft_state(instance, rec, expected_widths)
    if count_if_healthy(rec, st, width):  # seen before and healthy: only count it
        return
    check_pass(rec, st, width, signals.PASS_TARGET_FED, int(width), VLLM)


def _before_compute_logits(instance, hidden) -> None:
    """On a due call, the hidden states the logits are computed from (not the logits:
    vLLM's draft logits hold -inf by design, target-vocabulary ids outside the draft's
    filled through d2t, which a finite check would call a fault on every healthy run)."""
    rec = worker_recorder()
    if finite_due(rec, instance):
        check_finite(rec, instance, ("hidden states",), (hidden,))


# -- weights and vocabulary map -----------------------------------------------------------
def _report_load(model, obs) -> None:
    fc_key = next((k for k in obs.shapes if k == "fc.weight" or k.endswith(".fc.weight")), None)
    hint = None
    if getattr(model.model, "fc", None) is None and fc_key is not None:
        draft_checks.state(model).checkpoint_fc_in = obs.shapes[fc_key][-1]
        hint = ("vLLM builds no fc and drops its weights because the draft config's "
                "eagle_config.use_aux_hidden_state is false, so the draft also gets one "
                "target layer instead of the aux layers its fc was trained on. Fix: set "
                "use_aux_hidden_state to true (or remove it).")
    # layers >= 1 normalise with input_layernorm: their hidden_norm is built and unused
    skip = SHARED | idle_parameters(obs.names.values(), "input_layernorm")
    report_load(worker_recorder(), obs, f"vLLM {runtime_version(signals.RUNTIME_VLLM)}", skip,
                vocab_findings(model, obs.loaded), hint)


def vocab_findings(model, loaded: dict) -> list:
    """Check `draft_id_to_target_id` (d2t offsets; draft id i proposes i + d2t[i]). It
    exists only when the draft vocabulary is smaller; left at zeros (the identity onto
    the first target ids) when the checkpoint has no `d2t`."""
    cfg = model.config
    target_vocab = int(cfg.vocab_size)
    draft_vocab = int(getattr(cfg, "draft_vocab_size", None) or target_vocab)
    d2t = getattr(model, "draft_id_to_target_id", None)
    offsets = None
    if d2t is not None and "draft_id_to_target_id" in loaded:
        offsets = d2t.detach().to("cpu").tolist()  # load time, small: not the decode path
    return check_vocab_map(offsets, draft_vocab, target_vocab, runtime=VLLM)


# -- wrap points ----------------------------------------------------------------------------
def _load_wrapper(module):
    """vLLM's loaders fall back to `default_weight_loader` from the model's module or
    from `models.utils` (`AutoWeightsLoader`, which every draft module imports first)."""
    utils = sys.modules.get("vllm.model_executor.models.utils")
    return load_weights_wrapper("vllm.eagle3.load_weights",
                                (module, utils) if utils is not None else module,
                                _report_load, by_tensor=True)


def wrap_points(cls: str) -> tuple[WrapPoint, ...]:
    return (
        WrapPoint(f"{cls}.combine_hidden_states", "vllm.eagle3.combine_hidden_states",
                  before=_before_combine, reads=("hidden_states",)),
        WrapPoint(f"{cls}.compute_logits", "vllm.eagle3.compute_logits",
                  before=_before_compute_logits, reads=("hidden_states",)),
        WrapPoint(f"{cls}.load_weights", "vllm.eagle3.load_weights", make_wrapper=_load_wrapper),
    )


LLAMA_EAGLE3, DEEPSEEK_EAGLE3, QWEN3_EAGLE3 = (wrap_points(c) for c in DRAFT_CLASSES.values())
