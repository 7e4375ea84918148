"""Write the tiny EAGLE-3 drafts of `harness.tiny_models` in each trainer's checkpoint
format, from the field and key names each format documents, so `spectrace doctor` can be
tested on every format and `--fix` output can be served by SGLang with the exact
acceptance of the `partial` weights (the tensors are the same; only names and config
change).

Sources of the field and key names (read from the released packages, see
/work/notes/formats.md for file and line references):
- `specforge`: SpecForge 0.2.0 `specforge/modeling/draft/llama3_eagle.py`
  (`LlamaForCausalLMEagle3`: `midlayer.*`, `fc`, `norm`, `lm_head`, `d2t`/`t2d` buffers),
  `specforge/export/to_sglang.py` (required keys `fc.weight`, `norm.weight`,
  `lm_head.weight`, `t2d`, `d2t`; embeddings left out), `configs/*-eagle3.json`
  (`draft_vocab_size`, `eagle_config.eagle_aux_hidden_state_layer_ids`,
  `use_aux_hidden_state`). This is the layout `harness.tiny_models` already writes.
- `speculators`: vllm-project/speculators 0.9.0 `speculators/models/eagle3/config.py`
  (`Eagle3SpeculatorConfig`: `speculators_model_type`, `transformer_layer_config`,
  `draft_vocab_size`, `norm_before_residual`, `target_hidden_size`,
  `eagle_aux_hidden_state_layer_ids`, `norm_before_fc`, `fc_norm`, `norm_output`,
  `embed_requires_grad`), `speculators/config.py` (`speculators_config`: algorithm,
  proposal_methods, default_proposal_method, verifier), `models/eagle3/core.py`
  (`Eagle3DraftModel`: `layers.N.*`, `embed_tokens.weight` saved, `d2t`/`t2d`). Its ids
  are vLLM's (the input of layer id): SGLang id k is speculators id k + 1.
- `modelopt`: nvidia-modelopt 0.47 `torch/export/plugins/hf_spec_configs.py`
  (`llama_eagle_template_config`: `eagle_config` with `use_input_layernorm_in_first_layer`,
  `use_last_layernorm`, `use_mtp_layernorm`, `next_layer_regular`, `parallel_draft_step`,
  `parallel_draft_heads_num_layers`), `hf_spec_export.py` (>= 0.43 `layers.{i}.*`,
  `d2t`, no `t2d`, no embeddings); 0.41 `export_spec_ckpt_state_dict` (`midlayer.*`, and
  `midlayer.{i}.*` when the draft has several layers).
- `eagle`: SafeAILab/EAGLE `eagle/traineagle3/config.json` (`LlamaForCausalLM`,
  `draft_vocab_size`, no `eagle_config`: the inputs of layers 2, n//2, n-3) and
  `eagle/traineagle3/cnets.py` (`midlayer.*`, `fc`, `norm`, `lm_head`, `d2t`, `t2d`). The
  authors publish `pytorch_model.bin`; the doctor never unpickles, so this writes the same
  tensors as safetensors (what its conversion hint produces).
- `mla`: SGLang 0.5.23 `srt/models/kimi_k25_eagle3.py` (`Eagle3DeepseekV2ForCausalLM`,
  `layers.0.self_attn.{q_a_proj,q_a_layernorm,q_b_proj,kv_a_proj_with_mqa,
  kv_a_layernorm,kv_b_proj,o_proj}`, `mlp.*`, the three norms, `fc`, `norm`, `lm_head`,
  `d2t`), modelopt 0.47 `kimik2_eagle_template_config` (`model_type: "kimi_k2"`, the
  DeepSeek-V3 attention fields, `eagle_config`). The Kimi-K2.5 target config is SGLang
  0.5.23's `KimiK25Config` (`srt/configs/kimi_k25.py`): `model_type: "kimi_k25"`,
  `KimiK25ForConditionalGeneration`, a DeepSeek-V3 `text_config` and a `vision_config`.

Usage: python -m harness.checkpoint_formats OUT FORMAT MODE
"""
from __future__ import annotations

import argparse
import json
import os
import shutil

from . import tiny_mla
from .tiny_models import AUX_IDS, DV, H, V, draft_config, draft_state_dict

FORMATS = ("specforge", "speculators", "modelopt", "modelopt-0.41", "eagle", "mla")
MODELOPT_EAGLE_FIELDS = dict(use_input_layernorm_in_first_layer=True, use_last_layernorm=True,
                             use_mtp_layernorm=False, next_layer_regular=True,
                             parallel_draft_step=1, parallel_draft_heads_num_layers=1)
LLAMA_LAYER_FIELDS = ("vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers",
                      "num_attention_heads", "num_key_value_heads", "max_position_embeddings",
                      "rms_norm_eps", "hidden_act", "rope_theta", "tie_word_embeddings",
                      "bos_token_id", "eos_token_id")


def _rename(sd: dict, old: str, new: str) -> dict:
    return {(new + k[len(old):] if k.startswith(old) else k): v for k, v in sd.items()}


def specforge(mode: str) -> tuple[dict, dict]:
    return draft_config(mode), draft_state_dict(mode, "midlayer")


def speculators(mode: str, norm_before_residual: bool | None = False) -> tuple[dict, dict]:
    """The config `Eagle3SpeculatorConfig` serialises (every pydantic field, no top-level
    model_type) and `Eagle3DraftModel`'s keys: `layers.0.*`, embeddings saved."""
    import torch
    base = draft_config(mode)
    layer = {k: base[k] for k in LLAMA_LAYER_FIELDS}
    layer.update(model_type="llama", head_dim=H // base["num_attention_heads"],
                 attention_bias=False, mlp_bias=False)
    cfg = {
        "architectures": ["Eagle3DraftModel"], "speculators_model_type": "eagle3",
        "speculators_version": "0.9.0",
        "speculators_config": {
            "algorithm": "eagle3", "default_proposal_method": "greedy",
            "proposal_methods": [{"proposal_type": "greedy", "speculative_tokens": 3,
                                  "verifier_accept_k": 1, "accept_tolerance": 0.0}],
            "verifier": {"name_or_path": "tiny/llama-target", "architectures":
                         ["LlamaForCausalLM"]}},
        "transformer_layer_config": layer, "draft_vocab_size": DV,
        "norm_before_residual": norm_before_residual, "target_hidden_size": None,
        # vLLM's convention: the input of layer id (SGLang's id k is k + 1 here)
        "eagle_aux_hidden_state_layer_ids": [i + 1 for i in AUX_IDS],
        "norm_before_fc": False, "fc_norm": False, "norm_output": False,
        "embed_requires_grad": False, "torch_dtype": "bfloat16"}
    if norm_before_residual is None:
        del cfg["norm_before_residual"]
    sd = draft_state_dict(mode, "layers")
    sd["embed_tokens.weight"] = torch.eye(H).repeat(V // H, 1).to(torch.bfloat16)
    return cfg, sd


def modelopt(mode: str, version: str = "0.47") -> tuple[dict, dict]:
    """`llama_eagle_template_config` and the >= 0.43 keys (`layers.{i}.*`, no `t2d`); with
    version "0.41" and two layers, 0.41's `midlayer.{i}.*` keys. The second layer adds
    zero (o_proj and down_proj zeroed), so the partial acceptance is unchanged."""
    import torch
    cfg = draft_config(mode)
    cfg["eagle_config"].update(MODELOPT_EAGLE_FIELDS)
    cfg.update(initializer_range=0.02, use_cache=True, pretraining_tp=1, attention_bias=False,
               attention_dropout=0.0, mlp_bias=False, head_dim=H // cfg["num_attention_heads"])
    sd = draft_state_dict(mode, "layers")
    del sd["t2d"]
    if version == "0.41":
        cfg["num_hidden_layers"] = 2
        upper = {k.replace("layers.0.", "layers.1."): v.clone() for k, v in sd.items()
                 if k.startswith("layers.0.") and "hidden_norm" not in k}
        for k in list(upper):
            if k.endswith(("q_proj.weight", "k_proj.weight", "v_proj.weight")):
                upper[k] = upper[k][:, :H].contiguous()  # upper layers take H inputs
            if k.endswith(("o_proj.weight", "down_proj.weight")):
                upper[k] = torch.zeros_like(upper[k])
        sd.update(upper)
        sd = _rename(_rename(sd, "layers.0.", "midlayer.0."), "layers.1.", "midlayer.1.")
    return cfg, sd


def eagle(mode: str) -> tuple[dict, dict]:
    """`eagle/traineagle3/config.json` (a plain `LlamaForCausalLM`, no eagle_config)."""
    base = draft_config(mode)
    cfg = {k: base[k] for k in LLAMA_LAYER_FIELDS}
    cfg.update(architectures=["LlamaForCausalLM"], model_type="llama", draft_vocab_size=DV,
               torch_dtype="float16", pad_token_id=0)
    return cfg, draft_state_dict(mode, "midlayer")


def mla(mode: str, layout: str = "layers", model_type: str = "kimi_k2") -> tuple[dict, dict]:
    cfg = tiny_mla.draft_config(mode, list(AUX_IDS))
    cfg["model_type"] = model_type
    return cfg, tiny_mla.draft_state_dict(mode, layout)


def kimi_k25_target_config() -> dict:
    """SGLang's `KimiK25Config` around the tiny DeepSeek-V3 text model."""
    text = tiny_mla.target_config()
    return {"architectures": ["KimiK25ForConditionalGeneration"], "model_type": "kimi_k25",
            "text_config": text,
            "vision_config": {"model_type": "kimi_k25", "patch_size": 14,
                              "num_attention_heads": 4, "num_hidden_layers": 2,
                              "hidden_size": 64, "intermediate_size": 128,
                              "text_hidden_size": H, "mm_projector_type": "patchmerger"},
            "media_placeholder_token_id": V - 1, "pad_token_id": 0,
            "tie_word_embeddings": False}


WRITERS = {"specforge": specforge, "speculators": speculators, "modelopt": modelopt,
           "modelopt-0.41": lambda mode: modelopt(mode, "0.41"), "eagle": eagle, "mla": mla}


def write_draft(out_dir: str, cfg: dict, sd: dict, tokenizer_from: str | None = None) -> str:
    """config.json + model.safetensors (+ the tokenizer files of another model dir)."""
    from safetensors.torch import save_file
    os.makedirs(out_dir, exist_ok=True)
    with open(os.path.join(out_dir, "config.json"), "w") as f:
        json.dump(cfg, f, indent=2)
    save_file({k: v.contiguous() for k, v in sd.items()},
              os.path.join(out_dir, "model.safetensors"), metadata={"format": "pt"})
    if tokenizer_from:
        for name in os.listdir(tokenizer_from):
            if name.startswith(("tokenizer", "special_tokens")):
                shutil.copyfile(os.path.join(tokenizer_from, name), os.path.join(out_dir, name))
    return out_dir


def tensor_bytes(d) -> dict[str, bytes]:
    """key -> the raw bytes of that tensor, for every safetensors file in `d` (to compare
    a `--fix` copy with its original byte for byte)."""
    from pathlib import Path

    from spectrace.doctor.files.safetensors_header import parse_header
    out = {}
    for f in sorted(Path(d).glob("*.safetensors")):
        h = parse_header(f)
        with open(f, "rb") as fh:
            for k, info in h.tensors.items():
                fh.seek(h.data_start + info.begin)
                out[k] = fh.read(info.end - info.begin)
    return out


def write_format(out_dir: str, fmt: str, mode: str, **kwargs) -> str:
    if fmt not in WRITERS:
        raise ValueError(f"format must be one of {FORMATS}, got {fmt!r}")
    cfg, sd = WRITERS[fmt](mode, **kwargs)
    return write_draft(out_dir, cfg, sd)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("out")
    p.add_argument("format", choices=FORMATS)
    p.add_argument("mode", choices=("random", "partial", "full", "bypass"))
    a = p.parse_args()
    print("wrote", write_format(a.out, a.format, a.mode))


if __name__ == "__main__":
    main()
