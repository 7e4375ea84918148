"""How much CPU does a server the test harness started use while it decodes, with one
OpenMP thread (the harness's setting, `harness.server.ONE_THREAD`) and with torch's default
(one per core)? On CI's two cores the suite runs two servers at once, so a thread that only
spin-waits takes a core from the other test worker (docs/performance.md, "Idle servers").

    python benchmarks/busy_cpu.py [--requests 12] [--tokens 64] [--runtime sglang|vllm|both]

Each server is started as the tests start it (harness/server.py, harness/vllm_server.py,
spectrace on with the file exporter, the tiny `partial` pair), answers one request (its
first, which warms it), then `--requests` requests one after the other, `--tokens` tokens
each; the CPU seconds (user + system) of every process of its process group are read from
/proc before and after those requests. Prints one line per server and thread setting.
"""
from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from benchmarks.idle_cpu import group_cpu_seconds, start_vllm  # noqa: E402
from harness.server import start_server  # noqa: E402
from harness.tiny_models import make_tiny_models  # noqa: E402

PROMPTS = ([3, 7, 11], [5, 9, 2], [4, 6, 8])
# what -> OMP_NUM_THREADS for the server (set explicitly: the harness's one thread is only
# a default)
SETTINGS = {"one OpenMP thread (harness)": "1",
            "one per core (torch's default)": str(len(os.sched_getaffinity(0)))}


def decode(server, send, requests: int, tokens: int) -> tuple[float, float]:
    """(seconds, CPU seconds) of `requests` requests sent one after the other."""
    send(PROMPTS[0], tokens)
    before, t0 = group_cpu_seconds(server.proc.pid), time.monotonic()
    for i in range(requests):
        send(PROMPTS[i % len(PROMPTS)], tokens)
    return time.monotonic() - t0, group_cpu_seconds(server.proc.pid) - before


def sglang(models: str, work: str, threads: str, requests: int,
           tokens: int) -> tuple[float, float]:
    server = start_server(models, os.path.join(work, "sglang.log"), env_extra={
        "SPECTRACE_ENABLED": "1", "SPECTRACE_OUTPUT_DIR": os.path.join(work, "sglang"),
        "OMP_NUM_THREADS": threads})
    try:
        return decode(server, server.generate, requests, tokens)
    finally:
        server.stop()


def vllm(models: str, work: str, threads: str, requests: int,
         tokens: int) -> tuple[float, float] | None:
    server = start_vllm(models, work, {"OMP_NUM_THREADS": threads})
    if server is None:
        return None
    try:
        return decode(server.server, server.complete, requests, tokens)
    finally:
        server.stop()


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--requests", type=int, default=12)
    p.add_argument("--tokens", type=int, default=64)
    p.add_argument("--runtime", choices=("sglang", "vllm", "both"), default="both")
    a = p.parse_args()
    runtimes = {"SGLang 0.5.23": sglang, "vLLM 0.32.0 CPU": vllm}
    if a.runtime != "both":
        runtimes = {k: v for k, v in runtimes.items() if k.lower().startswith(a.runtime)}
    with tempfile.TemporaryDirectory(prefix="busy-cpu-") as work:
        models = os.path.join(work, "models")
        make_tiny_models(models, "partial", "midlayer", "llama")
        for name, run in runtimes.items():
            for what, threads in SETTINGS.items():
                folder = os.path.join(work, f"{run.__name__}-{threads}")
                os.makedirs(folder)
                figures = run(models, folder, threads, a.requests, a.tokens)
                if figures is not None:
                    print(f"{name}, {what}: {a.requests} requests of {a.tokens} tokens in "
                          f"{figures[0]:.1f} s, {figures[1]:.1f} CPU s", flush=True)


if __name__ == "__main__":
    main()
