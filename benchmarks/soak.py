"""A real SGLang CPU server under steady concurrent load for a long time, spectrace on:
does the scheduler's memory stay flat, do the files stay within their bounds, does
spectrace count anything as its own error, and are the totals exact at the end? The
figures are in docs/reliability.md ("Soak").

    nice python benchmarks/soak.py [--minutes 20] [--clients 4] [--json OUT]
    nice python benchmarks/soak.py --spectrace off ...   # the same server without spectrace

`--spectrace off` is the comparison run that attributes the scheduler's memory: the same
server, models, clients and sampling with `SPECTRACE_ENABLED=0` (no files; the scheduler is
found by SGLang's own process title `sglang::scheduler`; only RSS, threads and SGLang's
`meta_info` sums are recorded).

One SGLang 0.5.23 CPU server (harness/server.py, the tiny `partial` models, at most 4
running requests) with spectrace on (`SPECTRACE_ENABLED=1`, the file exporter). So that
the files reach their bound (`export.history.MAX_BYTES`, 8 MiB) within the run and their
compaction is exercised, the export interval is 0.2 s (`--metric-interval`; default 2 s)
and every step is a span (`--step-sample-ratio 1`; default 0.01): both write about 10 to
30 times as much as the defaults. `--clients` threads send requests one after another
(24 to 64 new tokens) for `--minutes`.

Every `--sample-s` seconds: the scheduler's RSS and thread count (`/proc/PID/status`), the
size of each of its spectrace files, and from the newest snapshot its request-steps and
`spectrace.internal_errors`. At the end the clients stop; once the periodic export has
caught up, the scheduler's totals are compared with the sums of SGLang's own `meta_info`
over every answer; then the server is stopped with SIGINT to its process group (Ctrl-C)
and `spectrace report --json` is compared again. The `*_cpu` kernels come from the
pure-torch stand-in in harness/sgl_kernel_standin (the one part not SGLang's own code).
"""
from __future__ import annotations

import argparse
import json
import os
import random
import signal
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, ROOT)

from benchmarks import stop_under_load  # noqa: E402
from spectrace import signals  # noqa: E402
from spectrace.export import history  # noqa: E402
from spectrace.file_layout import EVENTS_FILE, METRICS_FILE, SPANS_FILE  # noqa: E402

MIB = 1 << 20


class Clients:
    """`n` threads sending requests one after another until `stop`; SGLang's own counts
    of every answer are summed."""

    def __init__(self, server, n: int) -> None:
        self.server = server
        self.verify = self.accepted = self.answers = 0
        self.errors: list[str] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._threads = [threading.Thread(target=self._run, args=(i,), daemon=True)
                         for i in range(n)]

    def start(self) -> None:
        for t in self._threads:
            t.start()

    def _run(self, i: int) -> None:
        rnd = random.Random(i)
        while not self._stop.is_set():
            prompt = [rnd.randrange(1, 500) for _ in range(rnd.randrange(3, 12))]
            try:
                r = self.server.generate(prompt, rnd.randrange(24, 65), timeout=600)
            except Exception as exc:  # noqa: BLE001 - counted; a failed request is a finding
                with self._lock:
                    self.errors.append(f"{type(exc).__name__}: {exc}")
                time.sleep(1)
                continue
            # SGLang leaves the spec_* fields out of an answer that had no verify step
            # (num_proposed_drafts 0: finished at its first token), so they count 0
            with self._lock:
                self.verify += r["meta_info"].get("spec_verify_ct", 0)
                self.accepted += r["meta_info"].get("spec_num_correct_drafts", 0)
                self.answers += 1

    def stop(self) -> None:
        self._stop.set()
        for t in self._threads:
            t.join(timeout=900)


def scheduler_folder(data: str, timeout: float = 600) -> str:
    """The scheduler's process folder, once it has one (first step)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if os.path.isdir(data):
            for name in os.listdir(data):
                if os.path.exists(os.path.join(data, name, METRICS_FILE)):
                    return os.path.join(data, name)
        time.sleep(0.5)
    raise TimeoutError(f"no scheduler folder in {data} after {timeout} s")


def newest_snapshot(path: str) -> dict | None:
    """The newest whole line of a metrics file (read from its end)."""
    try:
        with open(path, "rb") as fh:
            fh.seek(0, os.SEEK_END)
            size = fh.tell()
            fh.seek(max(0, size - (256 << 10)))
            tail = fh.read()
    except OSError:
        return None
    for line in reversed(tail.split(b"\n")):
        try:
            return json.loads(line)
        except ValueError:
            continue
    return None


def total(snap: dict | None, name: str) -> int:
    if not snap:
        return 0
    return int(sum(p["value"] for p in snap["metrics"].get(name, [])))


def proc_status(pid: int) -> dict:
    out = {}
    with open(f"/proc/{pid}/status") as fh:
        for line in fh:
            key, _, value = line.partition(":")
            if key in ("VmRSS", "Threads"):
                out[key] = int(value.split()[0])
    return {"rss_mib": round(out["VmRSS"] / 1024, 1), "threads": out["Threads"]}


def file_sizes(folder: str) -> dict:
    sizes = {}
    for name in (METRICS_FILE, SPANS_FILE, EVENTS_FILE):
        try:
            sizes[name] = os.path.getsize(os.path.join(folder, name))
        except OSError:
            sizes[name] = 0
    return sizes


def scheduler_pid(group: int, timeout: float = 600) -> int:
    """The pid of the process of `group` that SGLang titled `sglang::scheduler...`
    (scheduler.py sets it with setproctitle), for a run without spectrace's files."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for name in os.listdir("/proc"):
            if not name.isdigit():
                continue
            try:
                with open(f"/proc/{name}/cmdline", "rb") as fh:
                    title = fh.read()
                if title.startswith(b"sglang::scheduler") and os.getpgid(int(name)) == group:
                    return int(name)
            except (OSError, ProcessLookupError):
                continue
        time.sleep(0.5)
    raise TimeoutError(f"no sglang::scheduler process in group {group} after {timeout} s")


def report(folder: str) -> dict:
    return stop_under_load.report(folder, timeout=900)


def slope_per_10min(points: list[tuple[float, float]]) -> float:
    """Least-squares slope of (seconds, MiB) in MiB per 10 minutes."""
    n = len(points)
    if n < 2:
        return 0.0
    mt = sum(t for t, _ in points) / n
    mv = sum(v for _, v in points) / n
    var = sum((t - mt) ** 2 for t, _ in points)
    return 600 * sum((t - mt) * (v - mv) for t, v in points) / var if var else 0.0


def rss_after_warmup(samples: list[dict], warmup_minutes: float) -> dict:
    warm = [s for s in samples if s["t_s"] >= 60 * warmup_minutes]
    rss = [s["rss_mib"] for s in warm] or [0]
    return {"first": rss[0], "last": rss[-1], "min": min(rss), "max": max(rss),
            "band_mib": round(max(rss) - min(rss), 1),
            "band_pct": round(100 * (max(rss) - min(rss)) / max(min(rss), 1e-9), 2),
            "slope_mib_per_10min": round(slope_per_10min([(s["t_s"], s["rss_mib"])
                                                          for s in warm]), 2)}


def summarize_off(args, result: dict, samples: list[dict], clients: Clients) -> int:
    """The comparison run: RSS and threads over time, no spectrace figures."""
    result.update(answers=clients.answers, n_client_errors=len(clients.errors),
                  client_errors=clients.errors[:10],
                  sglang={"verify": clients.verify, "accepted": clients.accepted},
                  rss_after_warmup=rss_after_warmup(samples, args.warmup_minutes),
                  threads=sorted({s["threads"] for s in samples}), samples=samples)
    print("minute | scheduler RSS MiB | threads | answers | load")
    print("--- | --- | --- | --- | ---")
    per_minute = max(1, int(60 / args.sample_s))
    for s in samples[::per_minute] + samples[-1:]:
        print(f"{s['t_s'] / 60:.1f} | {s['rss_mib']} | {s['threads']} | {s['answers']} | "
              f"{s['load']}")
    print(json.dumps({k: v for k, v in result.items() if k != "samples"}, indent=1))
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(result, fh, indent=1)
    return 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--minutes", type=float, default=20)
    ap.add_argument("--warmup-minutes", type=float, default=3)
    ap.add_argument("--clients", type=int, default=4)
    ap.add_argument("--sample-s", type=float, default=10)
    ap.add_argument("--metric-interval", default="0.2")
    ap.add_argument("--step-sample-ratio", default="1")
    ap.add_argument("--json", help="write every sample and the summary here")
    ap.add_argument("--spectrace", choices=("on", "off"), default="on",
                    help="off: the comparison run without spectrace (RSS and threads only)")
    args = ap.parse_args()
    from harness.server import start_server
    from harness.tiny_models import make_tiny_models

    work = tempfile.mkdtemp(prefix="spectrace-soak-")
    models = os.path.join(work, "tiny-partial")
    make_tiny_models(models, "partial")
    data = os.path.join(work, "spectrace-data")
    on = args.spectrace == "on"
    env = {"SPECTRACE_ENABLED": "1", "SPECTRACE_OUTPUT_DIR": data,
           "SPECTRACE_METRIC_INTERVAL": args.metric_interval,
           "SPECTRACE_STEP_SAMPLE_RATIO": args.step_sample_ratio} if on else {
           "SPECTRACE_ENABLED": "0"}
    server = start_server(models, os.path.join(work, "server.log"), env_extra=env)
    samples: list[dict] = []
    result: dict = {"settings": vars(args), "work": work, "bound_bytes": history.MAX_BYTES}
    clients = Clients(server, args.clients)
    try:
        clients.start()
        if on:
            folder = scheduler_folder(data)
            pid = int(json.load(open(os.path.join(folder, "resource.json")))
                      ["attributes"]["process.pid"])
        else:
            folder, pid = None, scheduler_pid(server.proc.pid)
        t0 = time.monotonic()
        end = t0 + 60 * args.minutes
        while time.monotonic() < end:
            snap = newest_snapshot(os.path.join(folder, METRICS_FILE)) if on else None
            s = {"t_s": round(time.monotonic() - t0, 1), **proc_status(pid),
                 "files": file_sizes(folder) if on else {},
                 "drafts": total(snap, signals.SPEC_DRAFTS.name),
                 "internal_errors": total(snap, signals.INTERNAL_ERRORS.name),
                 "dropped": total(snap, signals.TELEMETRY_DROPPED.name),
                 "answers": clients.answers, "load": round(os.getloadavg()[0], 2)}
            samples.append(s)
            if len(samples) % max(1, int(60 / args.sample_s)) == 1:
                print(json.dumps(s), file=sys.stderr, flush=True)
            time.sleep(args.sample_s)
        clients.stop()
        # the periodic export catches up with the last answers
        deadline = time.monotonic() + (600 if on else 0)
        snap = None
        while time.monotonic() < deadline:
            snap = newest_snapshot(os.path.join(folder, METRICS_FILE))
            if total(snap, signals.SPEC_DRAFTS.name) >= clients.verify:
                break
            time.sleep(1)
        result["periodic"] = {"drafts": total(snap, signals.SPEC_DRAFTS.name),
                              "accepted": total(snap, signals.SPEC_ACCEPTED_TOKENS.name)}
        result["final_rss"] = proc_status(pid)
        server.send(signal.SIGINT, group=True)
        server.wait_stopped(timeout=300)
    finally:
        clients.stop()
        server.stop()
    if not on:
        return summarize_off(args, result, samples, clients)
    proc = next(p for p in report(data)["processes"] if p["drafts"])
    result.update(
        answers=clients.answers, client_errors=clients.errors[:10],
        n_client_errors=len(clients.errors),
        sglang={"verify": clients.verify, "accepted": clients.accepted},
        report={"drafts": proc["drafts"], "accepted": proc["accepted_tokens"],
                "internal_errors": proc["internal_errors"],
                "telemetry_dropped": proc["telemetry_dropped"],
                "skipped_lines": proc["skipped_lines"],
                "metric_snapshots": proc["metric_snapshots"], "spans": proc["spans"]},
        final_files=file_sizes(folder))
    result["rss_after_warmup"] = rss_after_warmup(samples, args.warmup_minutes)
    result["threads"] = sorted({s["threads"] for s in samples})
    result["max_file_bytes"] = {k: max(s["files"][k] for s in samples)
                                for k in samples[0]["files"]} if samples else {}
    result["max_internal_errors"] = max((s["internal_errors"] for s in samples), default=0)
    result["exact"] = (proc["drafts"], proc["accepted_tokens"]) == (clients.verify,
                                                                    clients.accepted)
    result["samples"] = samples

    print("minute | scheduler RSS MiB | threads | metrics.jsonl | spans.jsonl | events.jsonl "
          "| request-steps | internal errors | load")
    print("--- | --- | --- | --- | --- | --- | --- | --- | ---")
    per_minute = max(1, int(60 / args.sample_s))
    for s in samples[::per_minute] + samples[-1:]:
        f = s["files"]
        print(f"{s['t_s'] / 60:.1f} | {s['rss_mib']} | {s['threads']} | "
              f"{f[METRICS_FILE] / MIB:.2f} MiB | {f[SPANS_FILE] / MIB:.2f} MiB | "
              f"{f[EVENTS_FILE]} B | {s['drafts']} | {s['internal_errors']} | {s['load']}")
    print()
    summary = {k: v for k, v in result.items() if k != "samples"}
    print(json.dumps(summary, indent=1))
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(result, fh, indent=1)
    ok = (result["exact"] and result["report"]["internal_errors"] == 0
          and all(v <= history.MAX_BYTES + (256 << 10)
                  for v in result["max_file_bytes"].values()))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
