"""A process for tests/test_doctor_fix_replay.py, run with the vLLM environment's python:
what vLLM's own code makes of EAGLE-3 drafts. For each draft, vLLM's config path
(`EngineArgs.create_engine_config` with `speculative_config={"method": "eagle3", "model":
DRAFT}`: its `get_config`, which builds a speculators config as `SpeculatorsConfig`), the
real draft class built from that config on the CPU (`initialize_model`), and its real
`load_weights` run on the draft's safetensors. Prints `RESULT {json}` last.

What stands in for what cannot run here: one gloo process group of world size 1 (vLLM's
parallel state, harness/vllm_families.py) instead of a worker process.

    python tests/programs/vllm_draft_load.py TARGET_DIR DRAFT_DIR...
        each DRAFT_DIR -> {"config_class", "aux_layer_ids" (the top-level ids of the config
        vLLM built: what the target captures), "num_aux_hidden_states" (what the draft
        class built fc for: its `num_aux_hidden_states`, or the Qwen3 draft's
        `num_aux_layers`), "fc_in", "loaded": bool, "error": the load's first line}
"""
import glob
import json
import logging
import os
import sys

from harness.cpu_isa import without_amx

without_amx()  # the CPU path CI's machines take (harness/cpu_isa.py)

from harness import vllm_families as vf  # noqa: E402 (after without_amx)


def engine_config(target: str, draft: str):
    from vllm.engine.arg_utils import EngineArgs
    return EngineArgs(model=target, dtype="float32", enforce_eager=True, max_model_len=256,
                      max_num_seqs=2, max_num_batched_tokens=256, load_format="dummy",
                      skip_tokenizer_init=True,
                      speculative_config={"method": "eagle3", "model": draft,
                                          "num_speculative_tokens": 3}).create_engine_config()


def weights(draft: str):
    from safetensors.torch import load_file
    for path in sorted(glob.glob(os.path.join(draft, "*.safetensors"))):
        yield from load_file(path).items()


def draft_load(target: str, draft: str) -> dict:
    import torch
    from vllm.config import set_current_vllm_config
    from vllm.model_executor.model_loader.utils import initialize_model
    cfg = engine_config(target, draft)
    spec = cfg.speculative_config.draft_model_config
    hf = spec.hf_config
    out = {"config_class": type(hf).__name__,
           "aux_layer_ids": getattr(hf, "eagle_aux_hidden_state_layer_ids", None)}
    with set_current_vllm_config(cfg), torch.device("cpu"):
        model = initialize_model(vllm_config=cfg, model_config=spec)
    out["draft_class"] = type(model).__name__
    inner = model.model  # the Llama draft's count, or the Qwen3 draft's (num_aux_layers)
    out["num_aux_hidden_states"] = getattr(inner, "num_aux_hidden_states", None) or \
        getattr(inner, "num_aux_layers", None)
    out["fc_in"] = int(model.model.fc.weight.shape[1])
    try:
        model.load_weights(weights(draft))
        out["loaded"] = True
    except Exception as exc:  # noqa: BLE001 - vLLM's own refusal is the answer
        out["loaded"] = False
        out["error"] = f"{type(exc).__name__}: {str(exc).strip().splitlines()[0]}"[:300]
    return out


logging.disable(logging.WARNING)
vf.prepare()
target_dir, drafts = sys.argv[1], sys.argv[2:]
print("RESULT " + json.dumps({d: draft_load(target_dir, d) for d in drafts}), flush=True)
