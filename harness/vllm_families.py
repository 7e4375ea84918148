"""vLLM's real target model classes built without weights, on the meta device, in one
process (the vLLM environment): every architecture of the installed vLLM's registry whose
class implements `SupportsEagle3` (drafts excluded), each from a tiny config of its own
model type (4 layers; widths as the config class defaults them, which costs nothing on
the meta device).

What stands in for what cannot run here: one gloo process group of world size 1 (vLLM's
parallel state), and the config: each architecture's Transformers (or vLLM) config class
with its defaults, found by the model type its registry entry or Transformers' auto
mappings name. A class whose config cannot be found or whose construction fails is
reported with why (`build` raises; the caller records it).
"""
from __future__ import annotations

import json
import os
import tempfile

LAYERS = 4
_LAYER_COUNT_KEYS = ("num_hidden_layers", "num_layers", "n_layers", "depth", "num_decoder_layers")
# fewer experts too (construction time grows with them, even on the meta device)
_SMALL = {"n_routed_experts": 4, "num_experts": 4, "num_local_experts": 4, "moe_num_experts": 4,
          "num_experts_per_tok": 2, "moe_k": 2, "n_group": 1, "topk_group": 1,
          "first_k_dense_replace": 1}


def prepare() -> None:
    """vLLM's parallel state for one CPU process (gloo, world size 1)."""
    import socket

    from vllm.config import VllmConfig, set_current_vllm_config
    from vllm.distributed import init_distributed_environment, initialize_model_parallel
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    with set_current_vllm_config(VllmConfig()):
        init_distributed_environment(world_size=1, rank=0, local_rank=0, backend="gloo",
                                     distributed_init_method=f"tcp://127.0.0.1:{port}")
        initialize_model_parallel(1, 1)
    _register_remote_configs()
    # vLLM's registry inspects each model class (`_ModelInfo.from_model_cls`) in a fresh
    # process (`_run_in_subprocess`), so that a GPU machine's parent does not initialize
    # CUDA, and caches the answer under VLLM_CACHE_ROOT. On this CPU build that process is
    # only a vLLM import, 8-10 s for each of about a hundred classes on a machine without
    # the cache (25 minutes of CI): the same inspection runs here, in this process.
    from vllm.model_executor.models import registry
    registry._run_in_subprocess = lambda fn: fn()


def _import_error(arch: str) -> str:
    import importlib

    from vllm.model_executor.models.registry import _VLLM_MODELS
    module = _VLLM_MODELS[arch][0] if arch in _VLLM_MODELS else None
    try:
        importlib.import_module(module if "." in module else
                                f"vllm.model_executor.models.{module}")
    except Exception as exc:  # noqa: BLE001 - the reason is the answer
        return f"{type(exc).__name__}: {exc}"[:200]
    return "the registry could not load its class"


def eagle3_targets(only=None) -> tuple[dict[str, type], dict[str, str]]:
    """(architecture -> class for every registered target class that implements
    SupportsEagle3, architecture -> why its module does not import here). Drafts (the
    registry's speculative-decoding entries: EAGLE-1 drafts subclass their target) and
    classes that define `combine_hidden_states` are not targets. `only`: these
    architectures alone (None: all)."""
    from vllm.model_executor.models import ModelRegistry
    from vllm.model_executor.models.interfaces import supports_eagle3
    from vllm.model_executor.models.registry import _SPECULATIVE_DECODING_MODELS
    out, unimportable = {}, {}
    for arch in sorted(ModelRegistry.get_supported_archs()):
        if arch in _SPECULATIVE_DECODING_MODELS or (only is not None and arch not in only):
            continue
        cls = ModelRegistry._try_load_model_cls(arch)  # logs and returns None on failure
        if cls is None:
            unimportable[arch] = _import_error(arch)
        elif supports_eagle3(cls) and not hasattr(cls, "combine_hidden_states"):
            out[arch] = cls
    return out, unimportable


# The Transformers backend's classes serve any model type: a dense, an MoE and a
# multimodal one stand for them.
MODEL_TYPE_OF = {
    **{a: "llama" for a in ("TransformersForCausalLM", "TransformersEmbeddingModel",
                            "TransformersForSequenceClassification")},
    **{a: "qwen3_moe" for a in ("TransformersMoEForCausalLM", "TransformersMoEEmbeddingModel",
                                "TransformersMoEForSequenceClassification")},
    **{a: "llava" for a in ("TransformersMultiModalForCausalLM",
                            "TransformersMultiModalEmbeddingModel",
                            "TransformersMultiModalForSequenceClassification")},
    "TransformersMultiModalMoEForCausalLM": "llava",
}
# ... with narrow layers: Transformers builds its own modules first, which is slow at the
# default widths even on the meta device
NARROW = {"hidden_size": 64, "intermediate_size": 128, "num_attention_heads": 4,
          "num_key_value_heads": 2, "head_dim": 16, "vocab_size": 512,
          "moe_intermediate_size": 64}


def _register_remote_configs() -> None:
    """Config classes of models whose config is remote code (not in Transformers or vLLM):
    Llama's defaults plus the fields vLLM's class reads."""
    from transformers import AutoConfig, LlamaConfig

    class Plamo3Config(LlamaConfig):
        model_type = "plamo3"

        def __init__(self, **kw):
            kw.setdefault("head_dim", 128)
            super().__init__(**kw)
            self.layer_types = kw.get("layer_types") or ["full_attention"] * self.num_hidden_layers
            self.interleaved_sliding_window = (kw.get("interleaved_sliding_window")
                                               or [None] * self.num_hidden_layers)
            self.rope_local_theta = kw.get("rope_local_theta", 10000.0)

    try:
        AutoConfig.register("plamo3", Plamo3Config)
    except ValueError:
        pass  # registered already
    REMOTE_CONFIGS["plamo3"] = Plamo3Config


REMOTE_CONFIGS: dict = {}


def _model_types(arch: str) -> list[str]:
    """Model types whose config could serve `arch`: Transformers' auto mappings that name
    it, then the registry module's name (vLLM names most modules after the model type)."""
    from transformers.models.auto import modeling_auto
    from vllm.model_executor.models.registry import _VLLM_MODELS
    types = [MODEL_TYPE_OF[arch]] if arch in MODEL_TYPE_OF else []
    for name in dir(modeling_auto):
        mapping = getattr(modeling_auto, name)
        if name.endswith("_MAPPING_NAMES") and isinstance(mapping, dict):
            types += [t for t, a in mapping.items()
                      if a == arch or (isinstance(a, (list, tuple)) and arch in a)]
    entry = _VLLM_MODELS.get(arch)
    if entry is not None:
        types.append(entry[0].rsplit(".", 1)[-1])
    # a text-only class takes the text model's config (Llama-4: `llama4_text`)
    types.sort(key=lambda t: not (arch.endswith("ForCausalLM") and t.endswith("_text")))
    return list(dict.fromkeys(types))


def _config_class(model_type: str):
    from transformers import CONFIG_MAPPING
    try:
        from vllm.transformers_utils.config import _CONFIG_REGISTRY
    except ImportError:
        _CONFIG_REGISTRY = {}
    if model_type in REMOTE_CONFIGS:
        return REMOTE_CONFIGS[model_type]
    if model_type in _CONFIG_REGISTRY:
        return _CONFIG_REGISTRY[model_type]
    if model_type in CONFIG_MAPPING:
        return CONFIG_MAPPING[model_type]
    return None


def _shrink(cfg, seen=None) -> None:
    """Fewer layers in every (sub)config; per-layer lists cut to match."""
    seen = seen if seen is not None else set()
    if id(cfg) in seen:
        return
    seen.add(id(cfg))
    for key in _LAYER_COUNT_KEYS:
        n = getattr(cfg, key, None)
        if isinstance(n, int) and n > LAYERS:
            setattr(cfg, key, LAYERS)
            for k, v in list(vars(cfg).items()):
                if isinstance(v, list) and len(v) == n:
                    setattr(cfg, k, v[:LAYERS])
    for key, small in _SMALL.items():
        n = getattr(cfg, key, None)
        if isinstance(n, int) and n > small:
            setattr(cfg, key, small)
    for v in list(vars(cfg).values()):
        if hasattr(v, "to_dict") and hasattr(v, "model_type"):
            _shrink(v, seen)


def tiny_config(arch: str):
    """A config of one of `arch`'s model types, shrunk (None: none found)."""
    for model_type in _model_types(arch):
        cls = _config_class(model_type)
        if cls is None:
            continue
        cfg = cls(**NARROW) if arch in MODEL_TYPE_OF else cls()
        _shrink(cfg)
        cfg.architectures = [arch]
        return cfg
    return None


def build(arch: str, cls: type):
    """`cls`, the real class of `arch`, constructed on the meta device from its tiny config
    (vLLM's own `initialize_model`, told the class: left to resolve the architecture
    itself it may pick the Transformers backend instead)."""
    import torch
    from vllm.config import ModelConfig, VllmConfig, set_current_vllm_config
    from vllm.model_executor.model_loader.utils import initialize_model
    cfg = tiny_config(arch)
    if cfg is None:
        raise LookupError(f"no config class for {arch} (model types {_model_types(arch)})")
    with tempfile.TemporaryDirectory() as d:
        with open(os.path.join(d, "config.json"), "w") as fh:
            json.dump(cfg.to_dict(), fh)
        model_config = ModelConfig(model=d, tokenizer=d, skip_tokenizer_init=True,
                                   dtype="float32", max_model_len=256,
                                   trust_remote_code=False)
        vllm_config = VllmConfig(model_config=model_config)
        with set_current_vllm_config(vllm_config), torch.device("meta"):
            return initialize_model(vllm_config=vllm_config, model_class=cls)
