"""Where an end-to-end cost lives: two real SGLang CPU servers (tiny `partial` models),
spectrace off and on, the same request set run on each in turn (the other one frozen),
and per run each scheduler thread's CPU seconds and minor page faults. See
docs/performance.md ("End to end: what the cost is not").

    python benchmarks/e2e_probe.py --pairs 8
    python benchmarks/e2e_probe.py --pairs 8 --on-env SPECTRACE_STEP_SAMPLE_RATIO=0

Faster to turn around than `overhead.py --e2e-only` (one server instance per arm, no
control, about 4 minutes), so it tells settings apart only when their effect is larger
than the instance-to-instance spread (about 5 % here): a probe, not the figure.
"""
from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

from benchmarks.overhead import (  # noqa: E402
    E2E_MAX_NEW, E2E_PROMPTS, SERVER_ENV, scheduler_pid)

TICK = os.sysconf("SC_CLK_TCK")
REPEATS = 4  # the request set is sent this many times per run


def thread_stats(pid: int) -> dict:
    """Per thread of `pid`: (CPU seconds, minor faults), the main thread as `main`."""
    out = {}
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{tid}/stat") as fh:
                s = fh.read()
        except FileNotFoundError:
            continue
        f = s[s.rindex(")") + 2:].split()
        name = "main" if tid == str(pid) else f"{s[s.index('(') + 1:s.rindex(')')]}:{tid}"
        out[name] = ((int(f[11]) + int(f[12])) / TICK, int(f[7]))
    return out


def one_run(server) -> float:
    """The request set (4 at a time, `REPEATS` times), timed."""
    t = time.perf_counter()
    with ThreadPoolExecutor(len(E2E_PROMPTS)) as pool:
        for _ in range(REPEATS):
            list(pool.map(lambda p: server.generate(p, E2E_MAX_NEW, timeout=300),
                          E2E_PROMPTS))
    return time.perf_counter() - t


def probe(pairs: int, on_env: dict, on_first: bool, out_dir: str) -> dict:
    from harness.server import start_server
    from harness.tiny_models import make_tiny_models
    models = os.path.join(out_dir, "tiny-partial")
    make_tiny_models(models, "partial")
    env = {"off": {**SERVER_ENV, "SPECTRACE_ENABLED": "0"},
           "on": {**SERVER_ENV, "SPECTRACE_ENABLED": "1",
                  "SPECTRACE_OUTPUT_DIR": os.path.join(out_dir, "data"), **on_env}}
    order = ("on", "off") if on_first else ("off", "on")
    servers: dict = {}
    walls = {a: [] for a in order}
    cpu = {a: {} for a in order}
    try:
        for arm in order:  # started one after the other, in `order`
            servers[arm] = start_server(models, os.path.join(out_dir, f"{arm}.log"),
                                        env_extra=env[arm])
        pids = {a: scheduler_pid(s.proc.pid) for a, s in servers.items()}
        for k in range(pairs + 1):  # round 0 warms both up and is not counted
            for arm in (order if k % 2 else order[::-1]):
                other = servers["on" if arm == "off" else "off"]
                os.killpg(other.proc.pid, signal.SIGSTOP)
                try:
                    time.sleep(0.2)
                    before = thread_stats(pids[arm])
                    wall = one_run(servers[arm])
                    after = thread_stats(pids[arm])
                finally:
                    os.killpg(other.proc.pid, signal.SIGCONT)
                if k:
                    walls[arm].append(wall)
                    for name, (c, flt) in after.items():
                        c0, f0 = before.get(name, (0.0, 0))
                        acc = cpu[arm].setdefault(name, [0.0, 0])
                        acc[0] += c - c0
                        acc[1] += flt - f0
                    print(f"  pair {k}: {arm} {wall:.2f} s", file=sys.stderr)
    finally:
        for s in servers.values():
            s.stop()
    ratios = [off / on for off, on in zip(walls["off"], walls["on"])]
    res = {"pairs": pairs, "on_env": on_env, "started": "/".join(order),
           "on_off": statistics.median(ratios), "ratios": [round(r, 3) for r in ratios],
           "median_wall_s": {a: statistics.median(w) for a, w in walls.items()}}
    for arm in order:
        main = cpu[arm].get("main", [0.0, 0])
        others = [v for n, v in cpu[arm].items() if n != "main" and v[0] > 0]
        res[arm] = {"main_cpu_s": round(main[0], 2), "main_minor_faults": main[1],
                    "other_threads_cpu_s": round(sum(v[0] for v in others), 2)}
    return res


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--pairs", type=int, default=8)
    ap.add_argument("--on-env", action="append", default=[], metavar="VAR=VALUE",
                    help="a setting for the 'on' server (repeatable)")
    ap.add_argument("--on-first", action="store_true", help="start the 'on' server first")
    ap.add_argument("--json", default=None, help="also write the result here")
    args = ap.parse_args(argv)
    on_env = {}
    for item in args.on_env:
        var, sep, value = item.partition("=")
        if not sep or not var:
            ap.error(f"--on-env {item!r}: expected VAR=VALUE")
        on_env[var] = value
    with tempfile.TemporaryDirectory(prefix="spectrace-e2e-probe-") as d:
        res = probe(args.pairs, on_env, args.on_first, d)
    text = json.dumps(res, indent=1)
    print(text)
    if args.json:
        with open(args.json, "w") as fh:
            fh.write(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
