"""How well the advisor predicts (spectrace.advisor, docs/advisor.md): figures side by side,
not a test. On the real SGLang CPU server with the tiny `partial` pair (position 0 always
accepted, the others never), the same prompts served three ways, one server at a time:

1. 3 draft steps, spectrace measuring every step: the advisor's prediction for 1 step and
   its estimated speed-up against no speculation;
2. 1 draft step: the measured tokens/s (client side, and spectrace's own per-step figure);
3. no speculation: the measured speed-up of run 1.

    PYTHONPATH=. python benchmarks/advisor_accuracy.py [--requests 8] [--tokens 48]

Batch size 1 (requests one after another), so every step lands in bucket "1".
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from harness.server import LAUNCHER, cpu_env, free_port, launch, server_args, start_server  # noqa: E402
from harness.tiny_models import make_tiny_models  # noqa: E402

PROMPTS = [[3, 7, 11], [5, 9, 2], [4, 6, 8], [10, 1, 3], [2, 8, 5], [6, 6, 1], [9, 4, 7],
           [1, 2, 3]]
START_TIMEOUT = 900  # seconds: a loaded 2-core machine starts SGLang slowly
SPEC_FLAGS = ("--speculative-algorithm", "--speculative-draft-model-path",
              "--speculative-num-steps", "--speculative-eagle-topk",
              "--speculative-num-draft-tokens")


def _drive(server, requests: int, tokens: int) -> tuple[float, int]:
    """Send the prompts one after another; (seconds, output tokens) after one warm-up."""
    server.generate(PROMPTS[0], 8)
    t0, n = time.perf_counter(), 0
    for i in range(requests):
        out = server.generate(PROMPTS[i % len(PROMPTS)], tokens)
        n += out["meta_info"]["completion_tokens"]
    return time.perf_counter() - t0, n


def _report(data: str) -> dict:
    out = subprocess.run([sys.executable, "-m", "spectrace.cli", "report", data, "--json"],
                         capture_output=True, text=True, timeout=120, check=True)
    rep = json.loads(out.stdout)
    procs = [p for p in rep["processes"] if p.get("speculation")]
    return procs[0]


def _spec_run(models: str, steps: int, args, work: str) -> tuple[float, dict]:
    data = os.path.join(work, f"data-{steps}")
    env = {"SPECTRACE_ENABLED": "1", "SPECTRACE_OUTPUT_DIR": data,
           "SPECTRACE_STEP_COST_EVERY": "1", "SPECTRACE_METRIC_INTERVAL": "0.5"}
    server = start_server(models, os.path.join(work, f"server-{steps}.log"), env_extra=env,
                          steps=steps, timeout=START_TIMEOUT)
    try:
        secs, n = _drive(server, args.requests, args.tokens)
        time.sleep(2.0)  # one more export
        return n / secs, _report(data)
    finally:
        server.stop()


def _plain_run(models: str, args, work: str) -> float:
    port = free_port()
    full = server_args(models, port)
    cmd, skip = [sys.executable, LAUNCHER], False
    for a in full:
        if skip:
            skip = False
            continue
        if a in SPEC_FLAGS:
            skip = True
            continue
        cmd.append(a)
    server = launch(cmd, cpu_env({}), port, os.path.join(work, "server-plain.log"),
                    START_TIMEOUT)
    try:
        secs, n = _drive(server, args.requests, args.tokens)
        return n / secs
    finally:
        server.stop()


def _bucket(proc: dict) -> dict:
    return proc["speculation"]["buckets"][0]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--requests", type=int, default=8)
    ap.add_argument("--tokens", type=int, default=48)
    args = ap.parse_args()
    work = tempfile.mkdtemp(prefix="spectrace-advisor-")
    models = os.path.join(work, "partial")
    make_tiny_models(models, "partial", "midlayer", "llama")
    client3, proc3 = _spec_run(models, 3, args, work)
    b3 = _bucket(proc3)
    opts = {o["num_steps"]: o for o in b3["options"]}
    adv = proc3["speculation"]
    client1, proc1 = _spec_run(models, 1, args, work)
    b1 = _bucket(proc1)
    now1 = {o["num_steps"]: o for o in b1["options"]}[1]
    plain = _plain_run(models, args, work)
    rows = [
        ("advisor recommends (at 3 steps)", f"{adv['best_num_steps']} steps: {adv['flags']}", ""),
        ("tokens/s/request at 1 step: predicted vs measured (spectrace, decode steps)",
         f"{opts[1]['tokens_per_second']:.1f}", f"{now1['tokens_per_second']:.1f}"),
        ("gain 1 step over 3: predicted vs measured (client tokens/s)",
         f"{adv['predicted_gain']:.3f}", f"{client1 / client3:.3f}"),
        ("speed-up of 3 steps vs no speculation: estimated vs measured (client)",
         f"{adv['estimated_speedup']:.3f}", f"{client3 / plain:.3f}"),
        ("speed-up of 1 step vs no speculation: estimated vs measured (client)",
         f"{proc1['speculation']['estimated_speedup']:.3f}", f"{client1 / plain:.3f}"),
    ]
    print(f"partial pair, {args.requests} requests x {args.tokens} tokens, batch 1")
    print(f"client tokens/s: 3 steps {client3:.1f}, 1 step {client1:.1f}, "
          f"no speculation {plain:.1f}")
    print(f"measured ms per phase at 3 steps: "
          + ", ".join(f"{k} {v * 1e3:.2f}" for k, v in b3["phase_seconds"].items()))
    print(f"measured ms per phase at 1 step:  "
          + ", ".join(f"{k} {v * 1e3:.2f}" for k, v in b1["phase_seconds"].items()))
    w = max(len(r[0]) for r in rows)
    for label, predicted, measured in rows:
        ratio = ""
        try:
            ratio = f"  (measured/predicted {float(measured) / float(predicted):.2f})"
        except ValueError:
            pass
        print(f"{label:<{w}}  {predicted:>10}  {measured:>10}{ratio}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
