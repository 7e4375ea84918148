"""How long does `spectrace report --prometheus` take on a fleet, and each dashboard panel's
query? A simulated fleet, backfilled into a real Prometheus TSDB with `promtool tsdb
create-blocks-from openmetrics`, then queried as an operator would (issue 45).

    python benchmarks/prometheus_fleet.py [--processes 1000] [--tp 8] [--hours 2] [--step 60]

Each process exports the series a real SGLang CPU process exported (the last snapshot of
tests/recorded/compare/full: every metric, attribute set and histogram as recorded), its
counters growing linearly over the range from 0 to ten times the recorded totals, with its
own `target_info` (five deployments, rank 0 of each `--tp` group counted once, the others
copies). Prints the series and samples written, the backfill's time, the fleet report's
wall time and peak memory (`spectrace report --prometheus URL --json` in a child process)
and each overview panel's query time at the end of the range (p50, p95, max).
"""
from __future__ import annotations

import argparse
import glob
import json
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.parse
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from spectrace import signals as S  # noqa: E402
from spectrace.grafana import overview  # noqa: E402

RECORDED = os.path.join(ROOT, "tests", "recorded", "compare", "full")
DEPLOYMENTS = 5
# `spectrace report --prometheus URL --since S --json`, then its own peak RSS (KiB) on stderr
REPORT_AND_RSS = (
    "import resource, sys\n"
    "from spectrace.cli import main\n"
    "rc = main(['report', '--prometheus', sys.argv[1], '--since', sys.argv[2], '--json',"
    " '--timeout', '600'])\n"
    "print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, file=sys.stderr)\n"
    "sys.exit(rc)\n")


def recorded_series() -> list[tuple[str, dict, float]]:
    """(Prometheus name, labels, value) of every series one real process exported."""
    [path] = glob.glob(os.path.join(RECORDED, "*", "metrics.jsonl"))
    last = None
    with open(path) as fh:
        for line in fh:
            try:
                last = json.loads(line)
            except ValueError:
                continue
    by_name = {s.name: s for s in S.ALL_METRICS}
    out = []
    for name, points in last["metrics"].items():
        spec = by_name.get(name)
        if spec is None:
            continue
        for p in points:
            labels = {k: str(v) for k, v in (p.get("attributes") or {}).items()}
            v = p["value"]
            if isinstance(v, dict):  # a histogram: cumulative buckets, count, sum
                base, total = spec.prometheus_name, 0
                for le, n in zip(v["bounds"] + ["+Inf"], v["buckets"]):
                    total += n
                    out.append((f"{base}_bucket", {**labels, "le": str(le)}, total))
                out += [(f"{base}_count", labels, v["count"]), (f"{base}_sum", labels, v["sum"])]
            else:
                out.append((spec.prometheus_name, labels, v))
    return out


def write_openmetrics(path: str, processes: int, tp: int, hours: float, step: int,
                      t0: float) -> tuple[int, int]:
    """The fleet's series as OpenMetrics; returns (series, samples)."""
    base = recorded_series()
    steps = int(hours * 3600 // step) + 1
    families: dict[str, list[str]] = {}
    n_series = 0
    for i in range(processes):
        rank = i % tp
        proc = {"job": "spectrace", "instance": f"host{i // tp}:{9464 + rank}"}
        info = {**proc, "service_name": f"deploy-{(i // tp) % DEPLOYMENTS}",
                "spectrace_version": "0.0.0", "spectrace_runtime": "sglang",
                "spectrace_process_role": "scheduler", "spectrace_tp_rank": str(rank),
                "spectrace_counted": "once" if rank == 0 else "copy",
                "spectrace_draft_model": f"/models/draft-{(i // tp) % DEPLOYMENTS}"}
        series = [("target_info", info, None)] + [
            (n, {**proc, **({**lab, S.ATTR_COUNTED: "once" if rank == 0 else "copy"}
                            if S.ATTR_COUNTED in lab else lab)}, v) for n, lab, v in base]
        for name, labels, v in series:
            n_series += 1
            text = ",".join(f'{k}="{val}"' for k, val in labels.items())
            lines = families.setdefault(name, [])
            for j in range(steps):
                value = 1 if v is None else round(10 * v * j / (steps - 1), 6)
                lines.append(f"{name}{{{text}}} {value} {t0 + j * step:.3f}")
    with open(path, "w") as fh:
        for name, lines in families.items():
            counter = name.endswith("_total")
            family = name[:-len("_total")] if counter else name
            kind = "counter" if counter else "gauge"
            fh.write(f"# TYPE {family} {kind}\n")
            fh.write("\n".join(lines) + "\n")
        fh.write("# EOF\n")
    return n_series, n_series * steps


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def query_seconds(url: str, expr: str, at: float) -> float:
    body = urllib.parse.urlencode({"query": expr, "time": f"{at:.3f}"}).encode()
    t = time.perf_counter()
    with urllib.request.urlopen(f"{url}/api/v1/query", data=body, timeout=120) as resp:
        answer = json.loads(resp.read())
    took = time.perf_counter() - t
    if answer.get("status") != "success":
        raise RuntimeError(f"{expr}: {answer.get('error')}")
    return took


def panel_exprs(hours: float) -> list[str]:
    out = []
    for panel in overview.panels():
        for target in panel.get("targets", []):
            expr = (target["expr"].replace("$__rate_interval", "5m")
                    .replace("$__range", f"{int(hours * 3600)}s")
                    .replace('"$job"', '".*"').replace('"$instance"', '".*"'))
            out.append(expr)
    return out


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--processes", type=int, default=1000)
    p.add_argument("--tp", type=int, default=8)
    p.add_argument("--hours", type=float, default=2.0)
    p.add_argument("--step", type=int, default=60, help="seconds between samples")
    a = p.parse_args()
    prometheus, promtool = shutil.which("prometheus"), shutil.which("promtool")
    if not prometheus or not promtool:
        print("needs prometheus and promtool (apt-get install prometheus)", file=sys.stderr)
        return 2
    work = tempfile.mkdtemp(prefix="fleet-")
    proc = None
    try:
        t_end = float(int(time.time()) - 600)
        t0 = t_end - a.hours * 3600
        t = time.perf_counter()
        n_series, n_samples = write_openmetrics(os.path.join(work, "fleet.om"), a.processes,
                                                a.tp, a.hours, a.step, t0)
        wrote = time.perf_counter() - t
        t = time.perf_counter()
        subprocess.run([promtool, "tsdb", "create-blocks-from", "openmetrics",
                        os.path.join(work, "fleet.om"), os.path.join(work, "tsdb")],
                       check=True, capture_output=True)
        backfill = time.perf_counter() - t
        os.remove(os.path.join(work, "fleet.om"))
        with open(os.path.join(work, "prometheus.yml"), "w") as fh:
            fh.write("global: {}\n")
        port = free_port()
        proc = subprocess.Popen([prometheus, f"--config.file={work}/prometheus.yml",
                                 f"--storage.tsdb.path={work}/tsdb",
                                 f"--web.listen-address=127.0.0.1:{port}", "--log.level=warn"],
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                start_new_session=True)
        url = f"http://127.0.0.1:{port}"
        deadline = time.time() + 300
        while time.time() < deadline:
            try:
                with urllib.request.urlopen(f"{url}/-/ready", timeout=5) as r:
                    if r.status == 200:
                        break
            except OSError:
                time.sleep(0.5)
        since = f"{int(a.hours * 3600 + 600 + 60)}s"
        t = time.perf_counter()
        said = subprocess.run([sys.executable, "-c", REPORT_AND_RSS, url, since],
                              capture_output=True, text=True, cwd=ROOT)
        report_s = time.perf_counter() - t
        if said.returncode != 0:
            print(said.stderr, file=sys.stderr)
            return 1
        rss_mib = int(said.stderr.strip().splitlines()[-1]) / 1024
        out = json.loads(said.stdout)
        times = sorted(query_seconds(url, e, t_end) for e in panel_exprs(a.hours))
        print(f"fleet: {a.processes} processes (TP={a.tp}, {DEPLOYMENTS} deployments), "
              f"{a.hours:g} h at {a.step} s: {n_series} series, {n_samples} samples "
              f"(written in {wrote:.0f} s, backfilled in {backfill:.0f} s)")
        print(f"spectrace report --prometheus: {report_s:.1f} s, peak RSS {rss_mib:.0f} MiB, "
              f"{len(out['processes'])} processes, "
              f"{len(out['groups'])} deployments, combined request-steps "
              f"{out['combined']['drafts']:.0f}")
        print(f"overview panel queries ({len(times)}): p50 {statistics.median(times):.3f} s, "
              f"p95 {times[int(0.95 * (len(times) - 1))]:.3f} s, max {times[-1]:.3f} s")
        return 0
    finally:
        if proc is not None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
