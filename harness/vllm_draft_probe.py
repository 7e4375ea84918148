"""The installed vLLM's real EAGLE-3 draft classes (`Eagle3LlamaForCausalLM`,
`Eagle3Qwen3ForCausalLM`, `Eagle3DeepseekV2ForCausalLM`), built on the CPU from a tiny
draft config without a checkpoint, as vLLM's proposer builds them: `EngineArgs` with a
speculative config naming the draft directory -> `VllmConfig` (vLLM's own config reader
turns the draft's config.json into the `hf_config` its class reads), then
`initialize_model` with the draft's `ModelConfig`. For each case: the parameters (names,
shapes), the switches the config set (`harness.draft_switches`), and, for a list of
(key, shape, dtype), what the class's own `load_weights` does with zeros of those shapes:
the keys that reached a parameter loader, the parameters left empty, the exception it
raises (vLLM refuses a key that matches nothing). The vLLM twin of
harness/sglang_draft_probe.py; tests/test_doctor_config_fields.py and
tests/test_doctor_loader_facts.py compare the doctor's facts with it.

What stands in: one gloo process group of world size 1 (`harness.vllm_families.prepare`)
and a tiny Llama target (`TARGET`, or the case's own). Runs in the vLLM environment:
    python -m harness.vllm_draft_probe CASES.json  ->  JSON on stdout (last line)
CASES.json: [{"draft": "llama"|"qwen3"|"mla", "config": {...}, "target": {...}?,
              "keys": [[key, shape, dtype], ...]?}]
"""
from __future__ import annotations

import json
import os
import sys
import tempfile

TARGET = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "vocab_size": 512,
          "hidden_size": 128, "num_hidden_layers": 4, "intermediate_size": 256,
          "num_attention_heads": 4, "num_key_value_heads": 2, "max_position_embeddings": 2048,
          "torch_dtype": "float32"}
DTYPES = {"BF16": "bfloat16", "F32": "float32", "F16": "float16", "I64": "int64",
          "I32": "int32", "BOOL": "bool", "U8": "uint8"}


def build(case: dict):
    """(the draft model, its module) built from the case's config, or raises what vLLM
    raises for it."""
    import importlib

    import torch
    from vllm.engine.arg_utils import EngineArgs
    from vllm.model_executor.model_loader.utils import initialize_model
    with tempfile.TemporaryDirectory() as tgt, tempfile.TemporaryDirectory() as drf:
        with open(os.path.join(tgt, "config.json"), "w") as f:
            json.dump(case.get("target") or TARGET, f)
        with open(os.path.join(drf, "config.json"), "w") as f:
            json.dump(case["config"], f)
        args = EngineArgs(model=tgt, skip_tokenizer_init=True, dtype="float32",
                          max_model_len=256, enforce_eager=True,
                          speculative_config={"method": "eagle3", "model": drf,
                                              "num_speculative_tokens": 3})
        vllm_config = args.create_engine_config()
        with torch.device("cpu"):
            model = initialize_model(vllm_config=vllm_config,
                                     model_config=vllm_config.speculative_config
                                     .draft_model_config)
    return model, importlib.import_module(type(model).__module__)


def probe(case: dict) -> dict:
    import torch

    from harness.draft_switches import switches
    from spectrace.adapters.load_observer import LoadObserver
    from spectrace.rules.weights import missing_parameters
    try:
        model, module = build(case)
    except Exception as e:  # noqa: BLE001 (a config the class refuses is an answer too)
        return {"build_error": f"{type(e).__name__}: {str(e)[:300]}"}
    import vllm
    out = {"class": type(model).__name__, "version": vllm.__version__, "build_error": None,
           "switches": switches(model),
           "params": {n: list(p.shape) for n, p in model.named_parameters()}}
    if not case.get("keys"):
        return out
    weights = [(k, torch.zeros(shape, dtype=getattr(torch, DTYPES[dtype])))
               for k, shape, dtype in case["keys"]]
    utils = sys.modules.get("vllm.model_executor.models.utils")
    obs = LoadObserver(model, (module, utils) if utils is not None else module,
                       by_tensor=True)
    error = None
    try:
        model.load_weights(obs.iterate(iter(weights)))
    except Exception as e:  # noqa: BLE001 (vLLM refuses an unknown key: an answer)
        error = f"{type(e).__name__}: {str(e)[:300]}"
    finally:
        obs.restore()
    obs.finish()
    out.update(error=error, unused=obs.unused,
               missing=missing_parameters(out["params"], obs.loaded))
    return out


def run_cases(python: str, cases: list[dict], workdir) -> list[dict]:
    """Run the probe on `cases` with the vLLM environment's `python` (from any
    environment: nothing here imports vLLM); its results, one per case."""
    import subprocess

    from harness.vllm_server import vllm_env
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    path = os.path.join(str(workdir), "vllm-probe-cases.json")
    with open(path, "w") as f:
        json.dump(cases, f)
    env = {k: v for k, v in vllm_env().items() if not k.startswith("SPECTRACE_")}
    env["PYTHONPATH"] = os.pathsep.join(p for p in (root, env.get("PYTHONPATH")) if p)
    out = subprocess.run([python, "-m", "harness.vllm_draft_probe", path], capture_output=True,
                         text=True, env=env, cwd=root, timeout=1800)
    if out.returncode != 0:
        raise RuntimeError(f"vLLM draft probe failed: {out.stderr[-4000:]}")
    line = next(x for x in out.stdout.splitlines() if x.startswith("RESULT "))
    return json.loads(line.removeprefix("RESULT "))


def main() -> None:
    cases = json.load(open(sys.argv[1]))
    from harness import vllm_families
    vllm_families.prepare()
    results = [probe(c) for c in cases]
    print("\nRESULT " + json.dumps(results))


if __name__ == "__main__":
    main()
