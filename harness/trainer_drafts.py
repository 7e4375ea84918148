"""Tiny EAGLE-3 drafts written by the trainers' own code, for a tiny Llama target.

Runs in the trainers' environment (scripts/setup-env-trainers.sh: speculators 0.9.0,
SpecForge 0.2.0, NVIDIA Model Optimizer 0.47.0); the tests then run the doctor on what it
writes from the main .venv. Each draft is what the trainer writes before any training step
(random initial weights): the configs and key names are the trainer's own, which is what
the doctor reads.

  OUT/target                 tiny Llama (harness.tiny_models, 8 layers, 1024 positions),
                             with a Llama-3-style chat template in tokenizer_config.json
  OUT/speculators            speculators: create_transformer_layer_config (its default
                             training config: every layer a 2048-token sliding window) +
                             Eagle3DraftModel.from_training_args + save_pretrained
  OUT/speculators-4aux       the same, trained on four aux layers (target_layer_ids
                             SPECULATORS_4AUX_IDS: fc takes 4 x hidden; vllm#54526)
  OUT/specforge              SpecForge: LlamaForCausalLMEagle3 (aux ids [1, 3, 5]) +
                             export_to_sglang
  OUT/specforge-converted    speculators' Eagle3Converter on OUT/specforge
  OUT/modelopt-1, -2         Model Optimizer: mtsp.convert with EAGLE3_DEFAULT_CFG (1 and 2
                             draft layers) + export_speculative_decoding

Usage: python -m harness.trainer_drafts OUT [--only NAME ...]
"""
from __future__ import annotations

import argparse
import copy
import json
import os

SPECFORGE_AUX_IDS = [1, 3, 5]
SPECULATORS_4AUX_IDS = [1, 3, 5, 7]
TARGET_LAYERS = 8
DRAFT_VOCAB = 256
WRITERS = ("speculators", "speculators-4aux", "specforge", "specforge-converted", "modelopt-1", "modelopt-2")


# a Llama-3-style chat template (role headers, turn end, a default system prompt), the
# layout most instruct models publish: `chat_template` in tokenizer_config.json
CHAT_TEMPLATE = (
    "{{- bos_token }}\n"
    "{%- set default_system_message = 'You are a helpful assistant.' %}\n"
    "{%- if messages[0]['role'] == 'system' %}\n"
    "    {%- set system_message = messages[0]['content'] %}\n"
    "    {%- set messages = messages[1:] %}\n"
    "{%- else %}\n"
    "    {%- set system_message = default_system_message %}\n"
    "{%- endif %}\n"
    "{{- '<|start_header_id|>system<|end_header_id|>\\n\\n' + system_message + '<|eot_id|>' }}\n"
    "{%- for message in messages %}\n"
    "    {{- '<|start_header_id|>' + message['role'] + '<|end_header_id|>\\n\\n' + "
    "message['content'] + '<|eot_id|>' }}\n"
    "{%- endfor %}\n"
    "{%- if add_generation_prompt %}\n"
    "    {{- '<|start_header_id|>assistant<|end_header_id|>\\n\\n' }}\n"
    "{%- endif %}\n")


def write_target(out: str) -> str:
    from .tiny_models import _save_tokenizer, make_llama_target
    tgt = os.path.join(out, "target")
    os.makedirs(tgt, exist_ok=True)
    _save_tokenizer([tgt])
    config = os.path.join(tgt, "tokenizer_config.json")
    with open(config) as f:
        tok = json.load(f)
    tok["chat_template"] = CHAT_TEMPLATE
    with open(config, "w") as f:
        json.dump(tok, f, indent=2)
    make_llama_target(tgt, "random", layers=TARGET_LAYERS)
    return tgt


def _vocab_maps():
    """A pruned vocabulary: the draft's ids are the target's first DRAFT_VOCAB tokens
    (d2t as offsets, t2d as a mask, as every trainer stores them)."""
    import torch
    from .tiny_models import V
    d2t = torch.zeros(DRAFT_VOCAB, dtype=torch.long)
    t2d = torch.zeros(V, dtype=torch.bool)
    t2d[:DRAFT_VOCAB] = True
    return d2t, t2d


def write_speculators(target: str, out: str, aux_ids: list[int] | None = None) -> str:
    """speculators' default training path (speculators.train.cli): the draft's decoder
    config from the verifier, then Eagle3DraftModel.from_training_args (`aux_ids`: its
    `target_layer_ids`, default the verifier's three)."""
    from speculators.models.eagle3 import Eagle3DraftModel
    from speculators.train.cli import create_transformer_layer_config

    layer_cfg = create_transformer_layer_config(
        verifier_name_or_path=target, num_layers=1, draft_arch="llama", hidden_act=None,
        sliding_window=2048, full_attention_indices=[])  # the defaults of its train config
    d2t, t2d = _vocab_maps()
    model = Eagle3DraftModel.from_training_args(
        verifier_config=layer_cfg, t2d=t2d, d2t=d2t, verifier_name_or_path=target,
        draft_vocab_size=DRAFT_VOCAB, norm_before_residual=True, ttt_steps=3,
        draft_attn_impl="sdpa", target_layer_ids=aux_ids)
    model.save_pretrained(out)
    return out


def _specforge_config(target: str) -> dict:
    with open(os.path.join(target, "config.json")) as f:
        t = json.load(f)
    keep = ("vocab_size", "hidden_size", "intermediate_size", "num_attention_heads",
            "num_key_value_heads", "hidden_act", "max_position_embeddings", "rms_norm_eps",
            "rope_theta", "rope_parameters", "bos_token_id", "eos_token_id")
    cfg = {k: copy.deepcopy(t[k]) for k in keep if k in t}
    cfg.update(architectures=["LlamaForCausalLMEagle3"], model_type="llama",
               num_hidden_layers=1, draft_vocab_size=DRAFT_VOCAB, tie_word_embeddings=False,
               eagle_config={"eagle_aux_hidden_state_layer_ids": SPECFORGE_AUX_IDS,
                             "use_aux_hidden_state": True})
    return cfg


def write_specforge(target: str, out: str) -> str:
    """SpecForge's draft class, its training state as its trainer saves it, then its
    exporter (specforge.export.to_sglang)."""
    import torch
    from specforge.export.to_sglang import export_to_sglang
    from specforge.modeling.draft.llama3_eagle import LlamaForCausalLMEagle3
    from transformers import LlamaConfig

    work = out + ".train"
    os.makedirs(work, exist_ok=True)
    cfg_path = os.path.join(work, "draft_config.json")
    with open(cfg_path, "w") as f:
        json.dump(_specforge_config(target), f, indent=2)
    torch.manual_seed(0)
    model = LlamaForCausalLMEagle3(LlamaConfig.from_json_file(cfg_path))
    d2t, t2d = _vocab_maps()
    model.d2t.copy_(d2t)
    model.t2d.copy_(t2d)
    state = {"strategy": "eagle3", "draft_state_dict": model.state_dict()}
    torch.save(state, os.path.join(work, "training_state.pt"))
    export_to_sglang(os.path.join(work, "training_state.pt"), cfg_path, out)
    return out


def write_specforge_converted(specforge_dir: str, target: str, out: str) -> str:
    """`speculators convert` of the SpecForge export (its Eagle3Converter)."""
    from speculators.convert.eagle.eagle3_converter import Eagle3Converter
    Eagle3Converter().convert(input_path=specforge_dir, output_path=out, base_model=target)
    return out


def write_modelopt(target: str, out: str, layers: int) -> str:
    """Model Optimizer's EAGLE-3 recipe: mtsp.convert with EAGLE3_DEFAULT_CFG (the draft
    layer count set as its examples do), then its speculative-decoding export."""
    import modelopt.torch.speculative as mtsp
    import torch
    from modelopt.torch.export import export_speculative_decoding
    from transformers import AutoModelForCausalLM

    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_pretrained(target, torch_dtype=torch.float32)
    cfg = copy.deepcopy(mtsp.config.EAGLE3_DEFAULT_CFG)
    cfg["config"]["eagle_architecture_config"]["num_hidden_layers"] = layers
    cfg["config"]["eagle_architecture_config"]["draft_vocab_size"] = DRAFT_VOCAB
    cfg["config"]["eagle_use_torch_compile"] = False
    mtsp.convert(model, [("eagle", cfg["config"])])
    export_speculative_decoding(model, dtype=torch.bfloat16, export_dir=out)
    return out


def write_all(out: str, only: tuple[str, ...] = WRITERS) -> dict[str, str]:
    """Write the target and the drafts named in `only`; {name: directory}."""
    dirs = {"target": write_target(out)}
    tgt = dirs["target"]
    path = {n: os.path.join(out, n) for n in WRITERS}
    if "speculators" in only:
        dirs["speculators"] = write_speculators(tgt, path["speculators"])
    if "speculators-4aux" in only:
        dirs["speculators-4aux"] = write_speculators(tgt, path["speculators-4aux"],
                                                     SPECULATORS_4AUX_IDS)
    if "specforge" in only or "specforge-converted" in only:
        dirs["specforge"] = write_specforge(tgt, path["specforge"])
    if "specforge-converted" in only:
        dirs["specforge-converted"] = write_specforge_converted(
            dirs["specforge"], tgt, path["specforge-converted"])
    for layers in (1, 2):
        if f"modelopt-{layers}" in only:
            dirs[f"modelopt-{layers}"] = write_modelopt(tgt, path[f"modelopt-{layers}"], layers)
    return dirs


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("out")
    p.add_argument("--only", nargs="+", choices=WRITERS, default=list(WRITERS))
    a = p.parse_args()
    print(json.dumps(write_all(a.out, tuple(a.only)), indent=2))


if __name__ == "__main__":
    main()
