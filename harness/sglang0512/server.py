"""Start a patched SGLang 0.5.12 CPU server (EAGLE-3, top-k 1, page size 1) from another
Python environment, e.g. the venv of `scripts/setup-env-sglang0512.sh`.

Plain `python -m sglang.launch_server`; the stand-ins in `shim/` are installed in every
process by `shim/sitecustomize.py` (on PYTHONPATH, gated by SGL512_CPU_SPEC=1). The server
runs in its own session, so `Server.stop()` also stops the scheduler and detokenizer.
"""
from __future__ import annotations

import os

from harness.server import Server, launch_on_free_port

SHIM = os.path.join(os.path.dirname(os.path.abspath(__file__)), "shim")


def server_args(models: str, port: int, steps: int = 3) -> list[str]:
    return [
        "--model-path", os.path.join(models, "target"),
        "--speculative-algorithm", "EAGLE3",
        "--speculative-draft-model-path", os.path.join(models, "draft"),
        "--speculative-num-steps", str(steps), "--speculative-eagle-topk", "1",
        "--speculative-num-draft-tokens", str(steps + 1),
        "--device", "cpu", "--attention-backend", "torch_native",
        "--sampling-backend", "pytorch", "--disable-cuda-graph",
        "--dtype", "bfloat16", "--max-total-tokens", "4096", "--max-running-requests", "4",
        "--host", "127.0.0.1", "--port", str(port), "--skip-server-warmup",
        "--sleep-on-idle",  # as harness/server.py: an idle scheduler waits, not spins
    ]


def cpu_env(extra: dict | None = None) -> dict:
    env = dict(os.environ)
    env.update({"SGL512_CPU_SPEC": "1", "SGLANG_USE_CPU_ENGINE": "1",
                "TORCHDYNAMO_DISABLE": "1",
                "PYTHONPATH": os.pathsep.join(p for p in (SHIM, env.get("PYTHONPATH")) if p)})
    env.update(extra or {})
    return env


def start_server(python: str, models: str, log_path: str, env_extra: dict | None = None,
                 steps: int = 3, timeout: float = 300) -> Server:
    return launch_on_free_port(
        lambda port: [python, "-m", "sglang.launch_server"] + server_args(models, port, steps),
        cpu_env(env_extra), log_path, timeout, label="SGLang 0.5.12 server",
        port_high=55535)  # 0.5.12 derives its gRPC port as port + 10000, refused past 65535
