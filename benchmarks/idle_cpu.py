"""How much CPU does a server the test harness started use while no request runs? On a
2-core CI machine an idle server that spins a core slows the other test worker's server
by half (docs/performance.md, "Idle servers").

    python benchmarks/idle_cpu.py [--idle-s 20] [--runtime sglang|vllm|both] [--spinning]

Each server is started as the tests start it (harness/server.py, harness/vllm_server.py,
spectrace on with the file exporter, the tiny `partial` pair), serves one request, and
once that answer is back waits 3 s; then the CPU seconds (user + system) of every process
of its process group are read from /proc before and after `--idle-s` idle seconds.
`--spinning` also starts the SGLang server without `--sleep-on-idle`, for comparison.
Then the same request is timed twice: once as the first after the idle time (the
scheduler wakes from its wait on its sockets) and once right after that (a busy server):
what waiting instead of spinning costs the next request. Prints one line per server.
"""
from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from harness.server import launch_on_free_port, cpu_env, server_args, LAUNCHER  # noqa: E402
from harness.tiny_models import make_tiny_models  # noqa: E402


def group_cpu_seconds(pgid: int) -> float:
    """User + system CPU seconds of the live processes in process group `pgid`."""
    tick = os.sysconf("SC_CLK_TCK")
    total = 0.0
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/stat") as fh:
                stat = fh.read()
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2:].split()
        if int(fields[2]) == pgid:  # fields: state ppid pgrp ... utime(11) stime(12)
            total += (int(fields[11]) + int(fields[12])) / tick
    return total


def idle_cpu(server, send_one, idle_s: float) -> tuple[float, float, float]:
    """(CPU seconds over `idle_s` idle, seconds of the request after it, of the next)."""
    send_one()
    time.sleep(3)  # the measurement's own settling time, not a test's synchronisation
    before = group_cpu_seconds(server.proc.pid)
    time.sleep(idle_s)
    used = group_cpu_seconds(server.proc.pid) - before
    t0 = time.monotonic()
    send_one()
    t1 = time.monotonic()
    send_one()
    return used, t1 - t0, time.monotonic() - t1


def line(what: str, idle_s: float, figures: tuple[float, float, float]) -> str:
    used, woken, busy = figures
    return (f"{what}: {used:.2f} CPU s over {idle_s:g} s idle; the next request "
            f"{woken * 1000:.0f} ms, the one after it {busy * 1000:.0f} ms")


def sglang(models: str, work: str, idle_s: float, sleep_on_idle: bool) -> tuple:
    env = cpu_env({"SPECTRACE_ENABLED": "1",
                   "SPECTRACE_OUTPUT_DIR": os.path.join(work, f"sglang-{sleep_on_idle}")})

    def command(port: int) -> list[str]:
        args = server_args(models, port)
        return [sys.executable, LAUNCHER] + (
            args if sleep_on_idle else [a for a in args if a != "--sleep-on-idle"])
    server = launch_on_free_port(command, env, os.path.join(work, "sglang.log"), 240)
    try:
        return idle_cpu(server, lambda: server.generate([3, 7, 11], 8), idle_s)
    finally:
        server.stop()


def start_vllm(models: str, work: str, env: dict | None = None):
    """A vLLM server as the tests start it, spectrace on (`env` on top), logging and
    writing under `work`; None, saying so, without the vLLM environment."""
    from harness.vllm_server import start_vllm_server, vllm_python
    python = vllm_python()
    if python is None:
        print("vLLM: skipped (set SPECTRACE_VLLM_PYTHON, scripts/setup-env-vllm.sh)")
        return None
    return start_vllm_server(python, models, os.path.join(work, "vllm.log"), env_extra={
        "SPECTRACE_ENABLED": "1", "SPECTRACE_OUTPUT_DIR": os.path.join(work, "vllm"),
        **(env or {})})


def vllm(models: str, work: str, idle_s: float) -> tuple | None:
    server = start_vllm(models, work)
    if server is None:
        return None
    try:
        return idle_cpu(server.server, lambda: server.complete([3, 7, 11], 8), idle_s)
    finally:
        server.stop()


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--idle-s", type=float, default=20.0)
    p.add_argument("--runtime", choices=("sglang", "vllm", "both"), default="both")
    p.add_argument("--spinning", action="store_true",
                   help="also measure SGLang without --sleep-on-idle")
    a = p.parse_args()
    with tempfile.TemporaryDirectory(prefix="idle-cpu-") as work:
        models = os.path.join(work, "models")
        make_tiny_models(models, "partial", "midlayer", "llama")
        if a.runtime in ("sglang", "both"):
            print(line("SGLang 0.5.23, harness settings (--sleep-on-idle)", a.idle_s,
                       sglang(models, work, a.idle_s, True)), flush=True)
            if a.spinning:
                print(line("SGLang 0.5.23 without --sleep-on-idle", a.idle_s,
                           sglang(models, work, a.idle_s, False)), flush=True)
        if a.runtime in ("vllm", "both"):
            figures = vllm(models, work, a.idle_s)
            if figures is not None:
                print(line("vLLM 0.32.0 CPU, harness settings", a.idle_s, figures),
                      flush=True)

if __name__ == "__main__":
    main()
