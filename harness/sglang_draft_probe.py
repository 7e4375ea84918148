"""Replay checkpoint keys through the installed SGLang's real EAGLE-3 draft classes
(`LlamaForCausalLMEagle3`, `Eagle3DeepseekV2ForCausalLM`), built on the CPU from a tiny
config without a checkpoint: which parameters they have (names, shapes) and, for a list
of (key, shape, dtype), which keys their own `load_weights` drops and which parameters
stay empty. The doctor's loader model (`spectrace.doctor.judge.loaders`) is checked against
this in tests/test_doctor_loader_facts.py.

Runs in its own process (it sets up SGLang's world-size-1 process groups):
    python -m harness.sglang_draft_probe CASES.json  ->  JSON on stdout
CASES.json: [{"draft": "llama"|"mla", "config": {...}, "keys": [[key, shape, dtype], ...]}
              (without keys: the parameters and `harness.draft_switches` only; a config
              the class refuses gives `build_error`)
             | {"read_config": DIR}]  (the latter: what SGLang's own config reader makes of
             DIR/config.json: its architectures, or the error it raises)
Uses the kernel stand-in on PYTHONPATH (harness.server.cpu_env()).
"""
from __future__ import annotations

import json
import os
import socket
import sys

os.environ.setdefault("SGLANG_USE_CPU_ENGINE", "1")
os.environ.setdefault("TORCHDYNAMO_DISABLE", "1")

DTYPES = {"BF16": "bfloat16", "F32": "float32", "F16": "float16", "I64": "int64",
          "I32": "int32", "BOOL": "bool", "U8": "uint8"}


def init_sglang() -> None:
    """SGLang's process state for building models outside a server: world-size-1 gloo
    groups and a published ServerArgs (as sglang.test.test_utils does)."""
    import torch
    from sglang.srt.distributed import parallel_state
    from sglang.srt.distributed.parallel_state import (init_distributed_environment,
                                                       initialize_model_parallel)
    from sglang.srt.runtime_context import SpawnRanks, get_parallel, publish, reset_context
    from sglang.srt.server_args import ServerArgs
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        os.environ["MASTER_PORT"] = str(s.getsockname()[1])
    if not torch.distributed.is_initialized():
        init_distributed_environment(world_size=1, rank=0, local_rank=0, backend="gloo")
    reset_context()
    publish(ServerArgs(model_path="dummy", tp_size=1, ep_size=1, pp_size=1, device="cpu"),
            role="test", ranks=SpawnRanks(world_rank=0))
    get_parallel().override_permanently(world_group=parallel_state._WORLD)
    initialize_model_parallel(backend="gloo")


def build(draft: str, config: dict):
    import torch
    import transformers
    from sglang.srt.utils.hf_transformers.common import _CONFIG_REGISTRY
    if draft == "mla":
        from sglang.srt.models import kimi_k25_eagle3 as module
        cls = module.Eagle3DeepseekV2ForCausalLM
    else:
        from sglang.srt.models import llama_eagle3 as module
        cls = module.LlamaForCausalLMEagle3
    mtype = config.get("model_type", "llama")
    fields = {k: v for k, v in config.items() if k not in ("model_type", "architectures")}
    cfg_cls = _CONFIG_REGISTRY.get(mtype) or transformers.CONFIG_MAPPING[mtype]
    cfg = cfg_cls(**fields)
    for k, v in fields.items():  # fields the config class does not declare
        if not hasattr(cfg, k):
            setattr(cfg, k, v)
    with torch.device("cpu"):
        return module, cls(cfg, quant_config=None)


def probe(case: dict) -> dict:
    import torch
    from harness.draft_switches import switches
    from spectrace.adapters.load_observer import LoadObserver
    from spectrace.adapters.sglang_eagle3 import DRAFT_CLASSES
    from spectrace.rules.weights import missing_parameters
    try:
        module, model = build(case["draft"], case["config"])
    except Exception as e:  # noqa: BLE001 (a config the class refuses is an answer too)
        return {"build_error": f"{type(e).__name__}: {str(e)[:300]}"}
    params = {n: list(p.shape) for n, p in model.named_parameters()}
    if not case.get("keys"):
        return {"params": params, "switches": switches(model), "build_error": None}
    deferred = DRAFT_CLASSES["kimi_k25_eagle3" if case["draft"] == "mla" else
                             "llama_eagle3"].deferred
    weights = [(k, torch.zeros(shape, dtype=getattr(torch, DTYPES[dtype])))
               for k, shape, dtype in case["keys"]]
    obs = LoadObserver(model, module, deferred)
    error = None
    try:
        model.load_weights(obs.iterate(iter(weights)))
    except Exception as e:  # noqa: BLE001 (a shape the loader refuses is a finding too)
        error = f"{type(e).__name__}: {e}"
    finally:
        obs.restore()
    obs.finish()
    return {"params": params, "unused": obs.unused, "error": error,
            "missing": missing_parameters(params, obs.loaded),
            "hot_token_id": model.hot_token_id is not None, "switches": switches(model),
            "build_error": None}


def read_config(path: str) -> dict:
    from sglang.srt.utils.hf_transformers_utils import get_config
    try:
        cfg = get_config(path, trust_remote_code=False)
    except Exception as e:  # noqa: BLE001 (what a server start would fail with)
        return {"architectures": None, "error": f"{type(e).__name__}: {str(e)[:300]}"}
    return {"architectures": list(cfg.architectures or []), "error": None}


def main() -> None:
    cases = json.load(open(sys.argv[1]))
    import sgl_kernel  # noqa: F401  (the stand-in, from PYTHONPATH)
    init_sglang()
    json.dump([read_config(c["read_config"]) if "read_config" in c else probe(c)
               for c in cases], sys.stdout)


if __name__ == "__main__":
    main()
