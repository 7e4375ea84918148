"""How long does `spectrace report --prometheus` take on a fleet, and each dashboard panel's
query? A simulated fleet, backfilled into a real Prometheus TSDB with `promtool tsdb
create-blocks-from openmetrics`, then queried as an operator would (issue 45).

    python benchmarks/prometheus_fleet.py [--processes 1000] [--tp 8] [--hours 24] [--step 60]

Each process exports the series a real SGLang CPU process exported (the last snapshot of
tests/recorded/compare/full: every metric, attribute set and histogram as recorded), its
counters growing linearly over the range from 0 to ten times the recorded totals, with its
own `target_info` (five deployments, rank 0 of each `--tp` group counted once, the others
copies). Prints the series and samples written, the backfill's time, the fleet report's
wall time and peak memory (`spectrace report --prometheus URL --json` in a child process)
over the last hour and over the whole history, each overview panel's query time and each
alert rule's evaluation (its expression as an instant query) at the end of the range
(p50, p95, max), and Prometheus's own peak memory.
"""
from __future__ import annotations

import argparse
import glob
import resource
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
from spectrace.grafana import alerts, overview  # noqa: E402
from spectrace.report.reader import read_jsonl  # noqa: E402

RECORDED = os.path.join(ROOT, "tests", "recorded", "compare", "full")
DEPLOYMENTS = 5
# `spectrace report --prometheus URL --since S --json`, then its own peak RSS (KiB) on stderr
REPORT_AND_RSS = (
    "import resource, sys\n"
    "from spectrace.cli import main\n"
    "rc = main(['report', '--prometheus', sys.argv[1], '--since', sys.argv[2], '--until',"
    " sys.argv[3], '--json', '--timeout', '600'])\n"
    "print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, file=sys.stderr)\n"
    "sys.exit(rc)\n")


def recorded_series() -> list[tuple[str, dict, float]]:
    """(Prometheus name, labels, value) of every series one real process exported."""
    [path] = glob.glob(os.path.join(RECORDED, "*", "metrics.jsonl"))
    last = read_jsonl(path)[-1]
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


REFERENCE = 3.0  # the reference mean accept length every simulated process exports


def write_openmetrics(path: str, processes: int, tp: int, hours: float, step: int,
                      t0: float) -> tuple[int, int]:
    """The fleet's series as OpenMetrics, written as they are made (a family's series
    together, as the format wants); returns (series, samples)."""
    by_name: dict[str, list[tuple[dict, float]]] = {}
    for name, labels, v in recorded_series():
        by_name.setdefault(name, []).append((labels, v))
    steps = int(hours * 3600 // step) + 1
    times = [f"{t0 + j * step:.3f}" for j in range(steps)]
    fractions = [10 * j / (steps - 1) for j in range(steps)]
    n_series = 0
    with open(path, "w") as fh:
        fh.write("# TYPE target_info gauge\n")
        for i in range(processes):
            fh.writelines(f"target_info{{{_text(_info(i, tp))}}} 1 {t}\n" for t in times)
            n_series += 1
        for name, series in by_name.items():
            counter = name.endswith("_total")
            fh.write(f"# TYPE {name[:-len('_total')] if counter else name} "
                     f"{'counter' if counter else 'gauge'}\n")
            for i in range(processes):
                proc = _process(i, tp)
                copy = "copy" if i % tp else "once"
                for labels, v in series:
                    if S.ATTR_COUNTED in labels:
                        labels = {**labels, S.ATTR_COUNTED: copy}
                    head = f"{name}{{{_text({**proc, **labels})}}} "
                    fh.writelines(f"{head}{round(v * f, 6)} {t}\n"
                                  for f, t in zip(fractions, times))
                    n_series += 1
        # the operator's reference (SPECTRACE_EXPECTED_ACCEPT_LENGTH), a constant gauge on
        # every process, as a fleet that sets it exports (the recorded run did not set it)
        name = S.SPEC_REFERENCE_ACCEPT_LENGTH.prometheus_name
        fh.write(f"# TYPE {name} gauge\n")
        for i in range(processes):
            head = f"{name}{{{_text(_process(i, tp))}}} "
            fh.writelines(f"{head}{REFERENCE} {t}\n" for t in times)
            n_series += 1
        fh.write("# EOF\n")
    return n_series, n_series * steps


def _process(i: int, tp: int) -> dict:
    return {"job": "spectrace", "instance": f"host{i // tp}:{9464 + i % tp}"}


def _info(i: int, tp: int) -> dict:
    rank, deployment = i % tp, (i // tp) % DEPLOYMENTS
    return {**_process(i, tp), "service_name": f"deploy-{deployment}",
            "spectrace_version": "0.0.0", "spectrace_runtime": "sglang",
            "spectrace_process_role": "scheduler", "spectrace_tp_rank": str(rank),
            "spectrace_counted": "once" if rank == 0 else "copy",
            "spectrace_draft_model": f"/models/draft-{deployment}"}


def _text(labels: dict) -> str:
    return ",".join(f'{k}="{v}"' for k, v in labels.items())


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


def panel_exprs(hours: float) -> list[tuple[str, str]]:
    """(panel title, its query) of every overview panel, over a range of `hours`."""
    out = []
    for panel in overview.panels():
        for target in panel.get("targets", []):
            expr = (target["expr"].replace("$__rate_interval", "5m")
                    .replace("$__range", f"{int(hours * 3600)}s")
                    .replace('"$job"', '".*"').replace('"$instance"', '".*"'))
            out.append((panel["title"], expr))
    return out


def rule_exprs() -> list[tuple[str, str]]:
    """(alert, its expression) of each bundled rule: what Prometheus evaluates every
    interval."""
    return [(r["alert"], r["expr"]) for g in alerts.rules()["groups"] for r in g["rules"]]


def cpu_seconds(pid: int) -> float:
    """User and system CPU time a process has used so far."""
    with open(f"/proc/{pid}/stat") as fh:
        fields = fh.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def children_cpu() -> float:
    """CPU time of this process's finished children (the report's)."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def peak_rss_mib(pid: int) -> float:
    with open(f"/proc/{pid}/status") as fh:
        return next(int(line.split()[1]) for line in fh if line.startswith("VmHWM")) / 1024


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--processes", type=int, default=1000)
    p.add_argument("--tp", type=int, default=8)
    p.add_argument("--hours", type=float, default=24.0)
    p.add_argument("--step", type=int, default=60, help="seconds between samples")
    p.add_argument("--keep", metavar="DIR",
                   help="backfill into DIR and keep it; a DIR that holds one already is "
                        "queried again without writing (the figures on a quieter machine)")
    a = p.parse_args()
    prometheus, promtool = shutil.which("prometheus"), shutil.which("promtool")
    if not prometheus or not promtool:
        print("needs prometheus and promtool (apt-get install prometheus)", file=sys.stderr)
        return 2
    work = a.keep or tempfile.mkdtemp(prefix="fleet-")
    made = os.path.join(work, "fleet.json")  # what a kept DIR holds
    proc = None
    try:
        if os.path.exists(made):
            with open(made) as fh:
                fleet = json.load(fh)
            print(f"querying the fleet kept in {work}: {fleet}")
        else:
            os.makedirs(work, exist_ok=True)
            t_end = float(int(time.time()) - 600)
            t = time.perf_counter()
            n_series, n_samples = write_openmetrics(
                os.path.join(work, "fleet.om"), a.processes, a.tp, a.hours, a.step,
                t_end - a.hours * 3600)
            wrote = time.perf_counter() - t
            t = time.perf_counter()
            subprocess.run([promtool, "tsdb", "create-blocks-from", "openmetrics",
                            os.path.join(work, "fleet.om"), os.path.join(work, "tsdb")],
                           check=True, capture_output=True)
            backfill = time.perf_counter() - t
            os.remove(os.path.join(work, "fleet.om"))
            fleet = dict(processes=a.processes, tp=a.tp, hours=a.hours, step=a.step,
                         t_end=t_end, series=n_series, samples=n_samples)
            with open(made, "w") as fh:
                json.dump(fleet, fh)
            print(f"fleet: {a.processes} processes (TP={a.tp}, {DEPLOYMENTS} deployments), "
                  f"{a.hours:g} h at {a.step} s: {n_series} series, {n_samples} samples "
                  f"(written in {wrote:.0f} s, backfilled in {backfill:.0f} s)", flush=True)
        t_end, hours = fleet["t_end"], fleet["hours"]
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
        # the last hour (an operator's usual range), and the whole history
        for since in ("1h", f"{int(hours * 3600 + 60)}s"):
            t, served, own = time.perf_counter(), cpu_seconds(proc.pid), children_cpu()
            said = subprocess.run([sys.executable, "-c", REPORT_AND_RSS, url, since,
                                   f"{t_end:.0f}"],
                                  capture_output=True, text=True, cwd=ROOT)
            report_s, served = time.perf_counter() - t, cpu_seconds(proc.pid) - served
            own = children_cpu() - own
            if said.returncode != 0:
                print(said.stderr, file=sys.stderr)
                return 1
            rss_mib = int(said.stderr.strip().splitlines()[-1]) / 1024
            out = json.loads(said.stdout)
            print(f"spectrace report --prometheus --since {since}: {report_s:.1f} s ({own:.1f} "
                  f"CPU-s its own, {served:.1f} Prometheus's), peak RSS "
                  f"{rss_mib:.0f} MiB, {len(out['processes'])} processes, "
                  f"{len(out['groups'])} deployments, combined request-steps "
                  f"{out['combined']['drafts']:.0f}", flush=True)
        for what, exprs in (("overview panel queries, the last hour", panel_exprs(1)),
                            (f"overview panel queries, {hours:g} h", panel_exprs(hours)),
                            ("alert rule evaluations", rule_exprs())):
            timed = sorted((query_seconds(url, e, t_end), title) for title, e in exprs)
            times = [t for t, _ in timed]
            print(f"{what} ({len(times)}): p50 {statistics.median(times):.3f} s, "
                  f"p95 {times[int(0.95 * (len(times) - 1))]:.3f} s, max {times[-1]:.3f} s "
                  f"({timed[-1][1]})")
            for took, title in timed:  # the fleet rows' panels, each
                if "by deployment" in title:
                    print(f"  {title}: {took:.3f} s")
        print(f"Prometheus peak RSS {peak_rss_mib(proc.pid):.0f} MiB")
        return 0
    finally:
        if proc is not None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        if not a.keep:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
