"""How well the advisor predicts (spectrace.report.advisor, docs/advisor.md): figures side by side,
not a test. On the real SGLang CPU server with the tiny pairs (`partial`: position 0 always
accepted, the others never; `full`: every draft token accepted), over several server
instances (`--instances`), each instance serving the same prompts, one server at a time,
at batch 1 (a request alone) and batch 4 (four at once), taking turns (`--rounds`):

1. `partial` at 3 draft steps, spectrace measuring every step: the advisor's estimated
   speed-up against no speculation per batch-size bucket (with its interval) and its best
   number of draft steps per bucket;
2. `partial` at 1 draft step and the `partial` target without speculation: the measured
   tokens per second of each, so the measured speed-up of run 1 and the measured best K
   (of off, 1, 3) per batch size;
3. `full` at 3 draft steps and its target without speculation: the same for a pair where
   speculation pays.

Each instance runs them in turn (the order alternates between instances, so a drift of the
machine's load falls on both sides); the summary gives, per pair and batch size, the median
of predicted / measured over the instances with its range, and the share of instances whose
predicted best K was the measured one.

    PYTHONPATH=. python benchmarks/advisor_accuracy.py [--instances 3] [--tokens 64] \
        [--server-nice -10] [--batch-sizes 1] [--prompt-tokens 3,120]

`--batch-sizes 1` serves one request at a time only (issue 49: a latency deployment, one
batch size and one K, where the fit needs the prefill forwards); `--prompt-tokens LO,HI`
gives the prompts lengths spread from LO to HI tokens (default 3: the tiny prompts).
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor

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
BATCHES = {1: "1", 4: "4-7"}  # batch size driven -> the step-cost bucket it lands in


def prompts_of(lo: int, hi: int) -> list[list[int]]:
    """The prompts: the tiny ones (3 tokens), or eight of lengths spread from lo to hi."""
    if hi <= 3:
        return PROMPTS
    return [[3 + (7 * j + 11 * n) % 500 for j in range(lo + n * (hi - lo) // 7)]
            for n in range(8)]


def drive(server, rounds: int, tokens: int, prompts_all=PROMPTS) -> dict:
    """Client tokens per second at each batch size (`BATCHES`), the batch sizes taking turns
    for `rounds` rounds (a load that changes meanwhile falls on each alike)."""
    seconds, made = dict.fromkeys(BATCHES, 0.0), dict.fromkeys(BATCHES, 0)
    with ThreadPoolExecutor(max(BATCHES)) as pool:
        for r in range(rounds):
            for batch in BATCHES:
                prompts = [prompts_all[(r + i) % len(prompts_all)] for i in range(batch)]
                t0 = time.perf_counter()
                outs = list(pool.map(lambda p: server.generate(p, tokens, timeout=600),
                                     prompts))
                seconds[batch] += time.perf_counter() - t0
                made[batch] += sum(o["meta_info"]["completion_tokens"] for o in outs)
    return {b: made[b] / seconds[b] for b in BATCHES}


def serve(models: str, steps: int, work: str, args) -> tuple[dict, dict | None]:
    """({batch: client tokens/s}, the report's `speculation` or None) for one server:
    `steps` draft steps (0: no speculation, the same launcher without the speculative
    flags)."""
    log = os.path.join(work, f"server-{os.path.basename(models)}-{steps}.log")
    data = os.path.join(work, f"data-{os.path.basename(models)}-{steps}")
    if steps:
        env = {"SPECTRACE_ENABLED": "1", "SPECTRACE_OUTPUT_DIR": data,
               "SPECTRACE_STEP_COST_EVERY": "1", "SPECTRACE_METRIC_INTERVAL": "0.5"}
        server = start_server(models, log, env_extra=env, steps=steps, timeout=START_TIMEOUT,
                              nice=args.server_nice)
    else:
        port, cmd, flag_value = free_port(), [sys.executable, LAUNCHER], False
        for a in server_args(models, port):
            if flag_value:  # the value of a speculative flag
                flag_value = False
            elif a in SPEC_FLAGS:
                flag_value = True
            else:
                cmd.append(a)
        server = launch(cmd, cpu_env({}), port, log, START_TIMEOUT, nice=args.server_nice)
    try:
        server.generate(PROMPTS[0], 8)  # warm-up
        rates = drive(server, args.rounds, args.tokens, prompts_of(*args.prompt_tokens))
        time.sleep(2.0)  # one more export
    finally:
        server.stop()
    if not steps:
        return rates, None
    out = subprocess.run([sys.executable, "-m", "spectrace.cli", "report", data, "--json"],
                         capture_output=True, text=True, timeout=300, check=True)
    shutil.rmtree(data, ignore_errors=True)
    proc = next(p for p in json.loads(out.stdout)["processes"] if p.get("speculation"))
    return rates, {**proc["speculation"], "findings": proc["findings"]}  # the view's findings


def bucket(spec: dict, label: str) -> dict | None:
    return next((b for b in spec["buckets"] if b["batch_size_bucket"] == label), None)


def instance(i: int, pairs: dict, work: str, args) -> dict:
    """One instance of every run; the runs' order reversed on odd instances (a
    speculative run and its run without speculation always next to each other)."""
    runs = [("partial", 3), ("partial", 0), ("partial", 1), ("full", 3), ("full", 0)]
    if i % 2:
        runs.reverse()
    got, load = {}, [os.getloadavg()[0]]
    for mode, steps in runs:
        got[mode, steps] = serve(pairs[mode], steps, work, args)
        load.append(os.getloadavg()[0])
    rows = []
    for mode in pairs:
        spec = got[mode, 3][1]
        for batch, label in BATCHES.items():
            b = bucket(spec, label)
            measured = {k: got[mode, k][0][batch] for k in (0, 1, 3) if (mode, k) in got}
            rows.append({
                "instance": i, "pair": mode, "batch": batch, "bucket": label,
                "predicted": b and b["estimated_speedup"],
                "low": b and b["estimated_speedup_lower"],
                "high": b and b["estimated_speedup_upper"],
                "estimate": b and b["estimate"], "verdict": b and b["verdict"],
                "measured": measured[3] / measured[0],
                "best_predicted": b and b["best_num_steps"],
                "best_measured": max(measured, key=measured.get),
                "tokens_per_s": measured, "overall": spec["estimated_speedup"],
                "overall_verdict": spec["verdict"], "findings": [
                    f["code"] for f in spec["findings"]]})
    return {"rows": rows, "load": load}


def summary(rows: list[dict]) -> list[str]:
    lines = ["pair     batch  predicted/measured speed-up: median (range) over instances;"
             " best K predicted = measured"]
    for mode in sorted({r["pair"] for r in rows}):
        for batch in BATCHES:
            rs = [r for r in rows if r["pair"] == mode and r["batch"] == batch
                  and r["predicted"]]
            if not rs:
                continue
            ratios = [r["predicted"] / r["measured"] for r in rs]
            hits = sum(r["best_predicted"] == r["best_measured"] for r in rs)
            lines.append(
                f"{mode:<8} {batch:>5}  {statistics.median(ratios):.3f} ({min(ratios):.3f} - "
                f"{max(ratios):.3f}), predicted {statistics.median(r['predicted'] for r in rs):.3f}"
                f" measured {statistics.median(r['measured'] for r in rs):.3f};"
                f" best K {hits}/{len(rs)}")
    return lines


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--instances", type=int, default=3)
    ap.add_argument("--rounds", type=int, default=6,
                    help="rounds of one request alone and then four at once")
    ap.add_argument("--tokens", type=int, default=64)
    ap.add_argument("--json", help="also write every row here")
    ap.add_argument("--server-nice", type=int, default=None,
                    help="the servers' niceness (below 0 needs root; as overhead.py's)")
    ap.add_argument("--batch-sizes", default="1,4",
                    help="the batch sizes driven, of 1 and 4 (1: requests one at a time)")
    ap.add_argument("--prompt-tokens", default="3,3",
                    help="LO,HI: the prompts' lengths spread between these (default 3,3)")
    args = ap.parse_args()
    args.prompt_tokens = tuple(int(x) for x in args.prompt_tokens.split(","))
    for size in list(BATCHES):
        if str(size) not in args.batch_sizes.split(","):
            del BATCHES[size]
    work = tempfile.mkdtemp(prefix="spectrace-advisor-")
    try:
        pairs = {}
        for mode in ("partial", "full"):
            pairs[mode] = os.path.join(work, mode)
            make_tiny_models(pairs[mode], mode, "midlayer", "llama")
        rows = []
        for i in range(args.instances):
            got = instance(i, pairs, work, args)
            rows += got["rows"]
            print(f"instance {i}: load average {' -> '.join(f'{x:.1f}' for x in got['load'])}")
            for r in got["rows"]:
                interval = ("" if r["low"] is None else f" ({r['low']:.3f} - {r['high']:.3f}, "
                            f"{r['estimate']})")
                print(f"  {r['pair']:<8} batch {r['batch']}: predicted {r['predicted']:.3f}"
                      f"{interval} {r['verdict']}, measured {r['measured']:.3f}; best K "
                      f"predicted {r['best_predicted']} measured {r['best_measured']} "
                      f"(tokens/s {', '.join(f'{k}: {v:.1f}' for k, v in r['tokens_per_s'].items())});"
                      f" overall {r['overall']:.3f} {r['overall_verdict']} {r['findings']}",
                      flush=True)
        print("\n".join(summary(rows)))
        if args.json:
            with open(args.json, "w") as fh:
                json.dump(rows, fh, indent=1)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
