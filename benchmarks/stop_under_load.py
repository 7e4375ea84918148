"""Ctrl-C right after the last answer, on a loaded machine, ten times in a row: does
`spectrace report` still hold exactly what SGLang counted? See docs/reliability.md.

    python benchmarks/stop_under_load.py [--runs 10] [--requests 4] [--busy 2] [--without]
                                         [--json OUT]

Each run starts a real SGLang 0.5.23 CPU server (harness/server.py: the tiny `partial`
models, spectrace on with its defaults: file exporter, 2 s export interval) in its own
process group, sends `--requests` requests at once, and as soon as the last answer is in,
sends SIGINT to the whole group (what a terminal's Ctrl-C does). Meanwhile `--busy`
processes (`python -c 'while True: pass'`) keep the cores busy, from before the first
server starts until after the last one is gone. Then `spectrace report --json` is run on
the folder, and its scheduler's request-steps and accepted tokens are compared with the
sums of SGLang's own `meta_info` (`spec_verify_ct`, `spec_num_correct_drafts`).

Also printed per run: whether the newest snapshot was written after the signal (the final
snapshot beat SGLang's SIGKILL of the scheduler) or before it (a periodic one already held
everything), and how long the stop took. `--without`: each run is followed by the same run
with spectrace off (`SPECTRACE_ENABLED` empty), and its stop time is printed beside: does
the stop take longer with spectrace? (tests/test_shutdown.py asked this of one stop, with a
loose bound, until the figures moved here; tests/test_final_flush.py proves the bound on
spectrace's own wait.) The `*_cpu` kernels come from the pure-torch
stand-in in harness/sgl_kernel_standin (the one part that is not SGLang's own code).
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, ROOT)

PROMPTS = [[3, 7, 11], [5, 9, 2], [4, 6, 8], [10, 1, 3], [2, 4, 6], [7, 7, 1]]


def start_busy(n: int) -> list[subprocess.Popen]:
    return [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(n)]


def report(folder: str, timeout: float = 600) -> dict:
    """`spectrace report --json` of `folder` (also used by soak.py)."""
    out = subprocess.run([sys.executable, "-m", "spectrace.cli", "report", folder, "--json"],
                         capture_output=True, text=True, timeout=timeout, cwd=ROOT)
    if out.returncode != 0:
        raise RuntimeError(f"spectrace report failed: {out.stderr[-2000:]}")
    return json.loads(out.stdout)


def newest_snapshot_time(folder: str, process: str) -> float | None:
    path = os.path.join(folder, process, "metrics.jsonl")
    with open(path, "rb") as fh:
        for line in reversed(fh.read().split(b"\n")):
            try:
                return float(json.loads(line)["time"])
            except (ValueError, KeyError, TypeError):
                continue
    return None


def run_files(folder: str) -> tuple[str, str]:
    """(spectrace's data folder, the server's log) of the run in `folder`."""
    return os.path.join(folder, "spectrace-data"), os.path.join(folder, "server.log")


def answer_then_interrupt(models: str, folder: str, requests: int, max_new: int,
                          spectrace: bool):
    """Start a server, send `requests` at once, SIGINT its group right after the last
    answer: (the answers, seconds to start, seconds to stop, the time of the signal)."""
    from harness.server import start_server
    data, log = run_files(folder)
    os.makedirs(folder)
    t0 = time.monotonic()
    server = start_server(models, log, env_extra={"SPECTRACE_ENABLED": "1" if spectrace else "",
                                                  "SPECTRACE_OUTPUT_DIR": data})
    try:
        started_s = time.monotonic() - t0
        prompts = [PROMPTS[i % len(PROMPTS)] for i in range(requests)]
        with ThreadPoolExecutor(requests) as pool:
            answers = list(pool.map(lambda p: server.generate(p, max_new, timeout=600), prompts))
        t_sig = time.time()
        server.send(2, group=True)  # SIGINT to the group, right after the last answer
        stop_s = server.wait_stopped(timeout=300)
    finally:
        server.stop()
    return answers, started_s, stop_s, t_sig


def one_run(k: int, models: str, work: str, requests: int, max_new: int,
            without: bool) -> dict:
    folder = os.path.join(work, f"run-{k}")
    answers, started_s, stop_s, t_sig = answer_then_interrupt(models, folder, requests,
                                                              max_new, True)
    data, log = run_files(folder)
    verify = sum(a["meta_info"].get("spec_verify_ct", 0) for a in answers)
    accepted = sum(a["meta_info"].get("spec_num_correct_drafts", 0) for a in answers)
    procs = [p for p in report(data)["processes"] if p["drafts"] or p["hidden_state_passes"]]
    row = {"run": k, "requests": requests, "sglang_verify": verify, "sglang_accepted": accepted,
           "startup_s": round(started_s, 1), "stop_s": round(stop_s, 2),
           "load": [round(x, 2) for x in os.getloadavg()], "log": log}
    if without:
        row["stop_without_s"] = round(answer_then_interrupt(
            models, os.path.join(work, f"run-{k}-without"), requests, max_new, False)[2], 2)
    if len(procs) != 1:
        row.update(report_drafts=None, report_accepted=None, exact=False,
                   note=f"{len(procs)} scheduler processes in the report")
        return row
    p = procs[0]
    newest = newest_snapshot_time(data, p["process"])
    row.update(report_drafts=p["drafts"], report_accepted=p["accepted_tokens"],
               skipped_lines=p["skipped_lines"],
               exact=(p["drafts"], p["accepted_tokens"]) == (verify, accepted),
               final_after_signal=newest is not None and newest >= t_sig,
               newest_minus_signal_ms=None if newest is None else round(
                   1000 * (newest - t_sig), 1))
    return row


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=10)
    ap.add_argument("--requests", type=int, default=4)
    ap.add_argument("--max-new-tokens", type=int, default=24)
    ap.add_argument("--busy", type=int, default=2, help="busy processes beside the server")
    ap.add_argument("--without", action="store_true",
                    help="also time each stop with spectrace off")
    ap.add_argument("--json", help="write the rows here")
    args = ap.parse_args()
    from harness.tiny_models import make_tiny_models
    work = tempfile.mkdtemp(prefix="spectrace-stop-under-load-")
    models = os.path.join(work, "tiny-partial")
    make_tiny_models(models, "partial")
    rows = []
    busy = start_busy(args.busy)
    try:
        for k in range(args.runs):
            row = one_run(k, models, work, args.requests, args.max_new_tokens, args.without)
            rows.append(row)
            print(f"run {k}: {json.dumps(row)}", file=sys.stderr, flush=True)
    finally:
        for b in busy:
            b.kill()
            b.wait()
    head = ("run", "SGLang steps", "report steps", "SGLang accepted", "report accepted",
            "exact", "final snapshot", "newest - signal", "stop", "stop without spectrace",
            "load (1 min)")
    print(" | ".join(head))
    print(" | ".join("---" for _ in head))
    for r in rows:
        final = ("after signal" if r.get("final_after_signal") else "before signal")
        lag = r.get("newest_minus_signal_ms")
        print(" | ".join(str(x) for x in (
            r["run"], r["sglang_verify"], r["report_drafts"], r["sglang_accepted"],
            r["report_accepted"], "yes" if r["exact"] else "NO", final,
            "-" if lag is None else f"{lag:+.0f} ms", f"{r['stop_s']:.2f} s",
            f"{r['stop_without_s']:.2f} s" if "stop_without_s" in r else "-", r["load"][0])))
    exact = sum(r["exact"] for r in rows)
    print(f"\n{exact} of {len(rows)} runs exact; {args.busy} busy processes; "
          f"{args.requests} requests per run; data in {work}")
    if args.json:
        with open(args.json, "w") as fh:
            json.dump({"busy": args.busy, "requests": args.requests, "rows": rows}, fh, indent=1)
    return 0 if exact == len(rows) else 1


if __name__ == "__main__":
    sys.exit(main())
