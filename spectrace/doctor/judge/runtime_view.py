"""What a runtime's config reader makes of a recognised checkpoint: the config its draft
class reads (vLLM translates a speculators config; SGLang reads none) and its loader, or
why it cannot build an EAGLE-3 draft from it."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

from ... import messages
from ...runtimes import SGLANG, VLLM, Runtime
from .formats import Format, FormatName, archs_of
from .loaders import DRAFT_ARCHS, DraftClass, Loader, resolve_loader

# model types vLLM's speculative config turns into DeepSeek's MTP module, whatever the
# method (fact vllm.mla_model_type_mtp)
MTP_TYPES = ("deepseek_v3", "deepseek_v32", "glm_moe_dsa")


@dataclass
class View:
    """What the runtime's config reader hands its draft class: `config` (None when the
    runtime cannot build an EAGLE-3 draft from it: `problem` says why) and its loader."""

    config: dict | None
    loader: Loader | None
    problem: str | None = None


def runtime_view(fmt: Format, cfg: Mapping[str, Any], runtime: str, version: str) -> View:
    label = Runtime(runtime).label
    archs = archs_of(cfg)
    if fmt.name == FormatName.SPECULATORS:
        if runtime == SGLANG:
            return View(None, resolve_loader(runtime, version, fmt.draft),
                        messages.SGLANG_READS_NO_SPECULATORS.format(runtime=label))
        return _vllm_speculators_view(fmt, cfg, version)
    registered = DRAFT_ARCHS[runtime]
    arch = next((a for a in archs if a in registered), None)
    loader = resolve_loader(runtime, version, fmt.draft)
    if loader is None:
        return View(None, None, messages.NO_DRAFT_CLASS.format(
            runtime=label, version=version, draft=fmt.draft.upper(), archs=archs))
    if runtime == VLLM and fmt.draft == DraftClass.MLA and cfg.get("model_type") in MTP_TYPES:
        return View(None, loader, messages.VLLM_MLA_AS_MTP.format(
            version=version, model_type=cfg.get("model_type")))
    if arch is None or registered[arch] != fmt.draft:
        problem = (messages.BUILDS_TARGET_CLASS if "LlamaForCausalLM" in archs
                   and runtime == SGLANG else messages.NO_CLASS_FOR_ARCH)
        return View(None, loader, problem.format(runtime=label, version=version,
                                                 archs=archs or "(none)"))
    return View(dict(cfg), loader)


def _vllm_speculators_view(fmt: Format, cfg: Mapping[str, Any], version: str) -> View:
    """vLLM's translation (transformers_utils/configs/speculators/algos.py update_eagle3)."""
    loader = resolve_loader(VLLM, version, DraftClass.LLAMA)
    tlc = cfg.get("transformer_layer_config")
    if not isinstance(tlc, Mapping):
        return View(None, loader, messages.SPECULATORS_NO_LAYER_CONFIG)
    mtype = tlc.get("model_type", "llama")
    if loader.speculators_qwen3 and mtype not in ("llama", "qwen3"):
        return View(None, loader, messages.SPECULATORS_MODEL_TYPE.format(version=version,
                                                                         model_type=mtype))
    draft = DraftClass.QWEN3 if mtype == "qwen3" and loader.speculators_qwen3 else \
        DraftClass.LLAMA
    loader = resolve_loader(VLLM, version, draft)
    view = dict(tlc)
    view["draft_vocab_size"] = cfg.get("draft_vocab_size")
    if cfg.get("target_hidden_size") is not None:
        view["target_hidden_size"] = cfg["target_hidden_size"]
    view["norm_before_residual"] = cfg.get("norm_before_residual", True)
    for k in loader.speculators_fields:
        if cfg.get(k):
            view[k] = cfg[k]
    view["architectures"] = [loader.arch]
    return View(view, loader)
