"""The server settings that change acceptance (`spectrace.server_settings`), read from the
ServerArgs an SGLang eagle worker receives in the scheduler process, as SGLang resolved
them: through SGLang's own `resolving_view` where the release resolves by declarations
(0.5.2x: `sglang.srt.arg_groups.model_override_base`), else the fields themselves.

Each setting lists the ways releases spell it, first that reads wins (feature detection:
a release without a field raises AttributeError and the next way is tried; none left:
the setting is not recorded). The fields are checked against the released sources 0.5.5 -
0.5.23 by tests/test_wrap_points.py (SETTINGS_FIELDS) and read from a running 0.5.23 server
by tests/test_e2e_runtime_causes.py.
"""
from __future__ import annotations

from .. import chat_template, server_settings


def _graph_on(a) -> bool:
    """0.5.16+: the decode phase's backend in `cuda_graph_config` (disabled or not), and
    the whole-switch `disable_cuda_graph`."""
    return (str(a.cuda_graph_config.decode.backend).lower() != "disabled"
            and not a.disable_cuda_graph and not getattr(a, "disable_decode_cuda_graph", False))


def _attention_dp(a) -> int:
    """Releases before attention DP's own size: `dp_size` with `enable_dp_attention`."""
    return a.dp_size if a.enable_dp_attention else 1


def _guessed_template(model_path) -> str | None:
    """SGLang's own guess of a registered template from the model path, which it prefers to
    the tokenizer's when no --chat-template is given (`TemplateManager.load_chat_template`)."""
    try:  # 0.5.5 - 0.5.23 (tests/test_wrap_points.py)
        from sglang.srt.parser.conversation import get_conv_template_by_model_path
    except ImportError:  # a release without it: no guess
        return None
    return get_conv_template_by_model_path(model_path)


def _chat_template(a) -> dict:
    """The template SGLang renders chat requests with: --chat-template (a registered name or
    a file), else a registered template guessed from the model path, else the tokenizer's
    own (--hf-chat-template-name picks among named ones)."""
    if not a.chat_template:
        guessed = _guessed_template(a.model_path)
        if guessed:
            return {"chat_template": f"model path {guessed}"}
    return chat_template.applied(a.chat_template, a.tokenizer_path,
                                 getattr(a, "hf_chat_template_name", None))


def _thresholds(a) -> str:
    """SGLang's own check (target-only sampling; greedy: the target's argmax), `relaxed`
    where an accept threshold below 1 accepts a draft token the target would not sample
    (`speculative_accept_threshold_single` / `_acc`, 1.0 by default: lossy under
    sampling)."""
    single, acc = a.speculative_accept_threshold_single, a.speculative_accept_threshold_acc
    if single < 1 or acc < 1:
        return f"relaxed (accept threshold single {single:g}, acc {acc:g})"
    return "standard"


def _verification(a) -> str:
    """0.5.23: block verification; 0.5.16+: rejection sampling (which ignores the
    thresholds: SGLang refuses both); else `_thresholds`."""
    if a.speculative_use_block_verification:
        return "block"
    return _since_16(a)


def _since_16(a) -> str:
    return "rejection sampling" if a.speculative_use_rejection_sampling else _thresholds(a)


READS = {
    "kv_cache_dtype": (lambda a: a.kv_cache_dtype,),
    # the draft's own (0.5.2x), else the draft shares the target's (one ServerArgs)
    "draft_kv_cache_dtype": (lambda a: a.speculative_draft_kv_cache_dtype or a.kv_cache_dtype,
                             lambda a: a.kv_cache_dtype),
    "quantization": (lambda a: a.quantization or "none",),
    "draft_quantization": (lambda a: a.speculative_draft_model_quantization or "none",),
    "cuda_graph": (_graph_on, lambda a: not a.disable_cuda_graph),
    # the largest batch a decode graph is captured for, only where graphs run
    "cuda_graph_max_bs": (lambda a: a.cuda_graph_config.decode.max_bs if _graph_on(a) else None,
                          lambda a: a.cuda_graph_max_bs if not a.disable_cuda_graph else None),
    "async_scheduling": (lambda a: not a.disable_overlap_schedule,),
    "prefix_caching": (lambda a: not a.disable_radix_cache,),
    "grammar_backend": (lambda a: a.grammar_backend,),
    # SGLang's "null": no disaggregation ("none", as for vLLM)
    "disaggregation": (lambda a: "none" if a.disaggregation_mode in (None, "null")
                       else a.disaggregation_mode,),
    "attention_dp_size": (lambda a: a.attn_dp_size, _attention_dp),
    "tp_size": (lambda a: a.tp_size,),
    "pp_size": (lambda a: a.pp_size,),
    "ep_size": (lambda a: a.ep_size,),
    "spec_method": (lambda a: str(a.speculative_algorithm).upper()
                    if a.speculative_algorithm else None,),
    "spec_num_steps": (lambda a: a.speculative_num_steps,),
    "spec_topk": (lambda a: a.speculative_eagle_topk,),
    "spec_num_draft_tokens": (lambda a: a.speculative_num_draft_tokens,),
    "spec_adaptive": (lambda a: bool(a.speculative_adaptive),),
    # the JSON file of --speculative-adaptive-config, else SGLang's own table
    # (`adaptive_spec_params.DEFAULT_ADAPTIVE_CONFIG`); only with adaptive K on
    "spec_adaptive_config": (lambda a: (a.speculative_adaptive_config or "built-in")
                             if a.speculative_adaptive else None,),
    "spec_verification": (_verification, _since_16, _thresholds),
    "chat_template": (lambda a: _chat_template(a).get("chat_template"),),
    "chat_template_hash": (lambda a: _chat_template(a).get("chat_template_hash"),),
}


def resolved(server_args):
    """What SGLang resolved: its own live view over the declarations (0.5.2x), else the
    ServerArgs themselves."""
    try:
        from sglang.srt.arg_groups.model_override_base import resolving_view
        return resolving_view(server_args)
    except Exception:  # noqa: BLE001 - a release that resolves in place
        return server_args


def read(server_args) -> dict:
    """The settings these ServerArgs hold (None in: nothing out)."""
    return server_settings.read(READS, None if server_args is None else resolved(server_args),
                                "settings:sglang")
