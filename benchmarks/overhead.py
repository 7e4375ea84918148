"""How much spectrace costs SGLang's and vLLM's speculative decode loops. See
docs/performance.md.

    python benchmarks/overhead.py [--quick] [--json OUT] [--skip-e2e] [--skip-hot]
    nice -n -10 python benchmarks/overhead.py --e2e-only --pairs 10 --restart-every 2 --server-nice -10  # every hot-path change

1. Hot path: spectrace's real hooks (installed by its own adapters' `install` onto
   stand-ins of SGLang 0.5.23's classes, see `tests/kit/stand_ins.py`), default `Config()`, one
   speculative step at batch 1, 32 and 256, timed step by step, interleaved with the same
   step uninstrumented. Also the metric collection (observable callbacks folding the
   pending accept-count lists, and the file export), amortized per step, reported apart.
   vLLM: the hooks of its EngineCore and worker (on stand-ins of vLLM 0.32's classes),
   one engine step at batch 1 and 256, same method.
2. Naive baseline in the same run: one OTel `Histogram.record` + one `Counter.add` per
   request per step.
3. End to end: real SGLang 0.5.23 CPU servers with the tiny `partial` models, spectrace
   off, on (SPECTRACE_ENABLED=1, defaults) and off again (the off/off control, same run),
   in rounds of one run each in rotating order, all three started afresh every
   `--restart-every` rounds; output tok/s; the median on/off and control/off ratios with
   their quartiles and range, and each epoch's.
"""
from __future__ import annotations

import argparse
import gc
import json
import os
import platform
import signal
import statistics
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, ROOT)

from tests.kit import stand_ins as hb  # noqa: E402

from tests.kit import process_state

BATCHES = (1, 32, 256)
VLLM_BATCHES = (1, 256)
TARGETS = {"hook_median_us_b256": 15.0, "b256_over_b1": 1.5, "naive_over_spectrace_b256": 20.0,
           "e2e_ratio": 0.98}


def load() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


def ns_to_us(x: float) -> float:
    return x / 1000.0


# -- timing ---------------------------------------------------------------------------------
def time_steps(fn, n: int) -> list[int]:
    pc = time.perf_counter_ns
    out = [0] * n
    for k in range(n):
        t0 = pc()
        fn()
        out[k] = pc() - t0
    return out


def interleaved(variants: dict, rounds: int, per_round: int, warm: int = 50,
                per_round_override: dict | None = None) -> dict:
    """Run the variants round-robin (so load drifts hit all of them alike); per variant
    all step times and the median of each round."""
    res = {k: {"all": [], "round_medians": []} for k in variants}
    for fn in variants.values():
        for _ in range(warm):
            fn()
    for r in range(rounds):
        names = list(variants) if r % 2 == 0 else list(reversed(variants))
        for name in names:
            n = (per_round_override or {}).get(name, per_round)
            t = time_steps(variants[name], n)
            res[name]["all"].extend(t)
            res[name]["round_medians"].append(statistics.median(t))
    return res


def summary(times: list[int]) -> dict:
    s = sorted(times)
    return {"n": len(s), "median_us": ns_to_us(statistics.median(s)),
            "mean_us": ns_to_us(statistics.fmean(s)), "p99_us": ns_to_us(s[int(0.99 * (len(s) - 1))])}


def added(res: dict, name: str, base: str = "uninstrumented") -> dict:
    """Cost of `name` over the uninstrumented step: median over rounds of the difference of
    the round medians, and difference of the means."""
    diffs = [a - b for a, b in zip(res[name]["round_medians"], res[base]["round_medians"])]
    return {"median_us": ns_to_us(statistics.median(diffs)),
            "mean_us": ns_to_us(statistics.fmean(res[name]["all"])
                                - statistics.fmean(res[base]["all"]))}


# -- part 1 and 2: hot path and naive ---------------------------------------------------------
def hot_path(quick: bool, out_dir: str) -> dict:
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import InMemoryMetricReader

    rec = process_state.ensure_recorder(os.path.join(out_dir, "spectrace-data"))  # Config() defaults
    cfg = rec.cfg
    naive_reader = InMemoryMetricReader()
    naive_meter = MeterProvider(metric_readers=[naive_reader]).get_meter("naive")
    naive = (naive_meter.create_histogram("naive.accept_length", unit="{token}"),
             naive_meter.create_counter("naive.accepted_tokens", unit="{token}"))
    rounds, per_round = (40, 100) if quick else (120, 200)
    out = {"config": {"step_sample_ratio": cfg.step_sample_ratio,
                      "agreement_every": cfg.agreement_every,
                      "step_cost_every": cfg.step_cost_every, "exporters": list(cfg.exporters),
                      "metric_interval_s": cfg.metric_interval_s},
           "shapes": {"target_hidden": hb.TARGET_HIDDEN, "draft_hidden": hb.DRAFT_HIDDEN,
                      "num_aux": hb.NUM_AUX, "steps": hb.STEPS, "topk": hb.TOPK,
                      "num_draft_tokens": hb.NUM_DRAFT_TOKENS,
                      "draft_forwards_per_step": hb.STEPS},
           "rounds": rounds, "steps_per_round": per_round, "v2": {}, "v1": {}}
    for bs in BATCHES:
        t = hb.make_tensors(bs)
        variants = {"uninstrumented": hb.V2Step(bs, None, t), "spectrace": hb.V2Step(bs, "spectrace", t),
                    "naive": hb.V2Step(bs, "naive", t, naive_instruments=naive)}
        # the naive variant costs ~ms per step at batch 256: fewer steps per round
        naive_n = max(20, min(per_round, (per_round * 8) // max(bs, 1)))
        before = load()
        res = interleaved(variants, rounds, per_round, per_round_override={"naive": naive_n})
        row = {name: summary(r["all"]) for name, r in res.items()}
        row["spectrace_added"] = added(res, "spectrace")
        row["naive_added"] = added(res, "naive")
        row["load_before"], row["load_after"] = before, load()
        out["v2"][bs] = row
        for v in variants.values():
            v.close()
        print(f"  v2 batch {bs}: spectrace +{row['spectrace_added']['median_us']:.2f} us "
              f"(median), naive +{row['naive_added']['median_us']:.1f} us; load {before}",
              file=sys.stderr)
    for bs in BATCHES:
        t = hb.make_tensors(bs)
        out["v1"][bs] = on_off(hb.V1Step(bs, None, t), hb.V1Step(bs, "spectrace", t),
                               max(4, rounds // 2), per_round)
    # SGLang's other algorithms' hooks against the EAGLE-3 worker's (out["v2"])
    out["algorithms"] = {}
    for worker in hb.ALGORITHM_STEPS:
        out["algorithms"][worker] = {}
        for bs in BATCHES:
            out["algorithms"][worker][bs] = row = on_off(
                hb.AlgorithmStep(bs, None, worker), hb.AlgorithmStep(bs, "spectrace", worker),
                max(4, rounds // 2), per_round)
            eagle3 = out["v2"][bs]["spectrace_added"]["median_us"]
            print(f"  {worker} batch {bs}: spectrace +{row['spectrace_added']['median_us']:.2f} "
                  f"us (median), EAGLE-3 worker +{eagle3:.2f} us; load {row['load_before']}",
                  file=sys.stderr)
    for log_stats, key, runner in ((True, "vllm", "v1"), (False, "vllm_no_stats", "v1"),
                                   (True, "vllm_mrv2", "mrv2")):
        out[key] = {}
        for bs in VLLM_BATCHES:
            inputs = hb.make_vllm_inputs(bs)
            out[key][bs] = row = on_off(
                hb.VllmStep(bs, None, inputs, log_stats=log_stats, runner=runner),
                hb.VllmStep(bs, "spectrace", inputs, log_stats=log_stats, runner=runner),
                rounds, per_round)
            print(f"  {key} batch {bs}: spectrace +{row['spectrace_added']['median_us']:.2f} "
                  f"us (median); load {row['load_before']}", file=sys.stderr)
    out["vllm_algorithms"] = vllm_algorithms(rounds, per_round)
    out["calibration"] = calibration()
    out["settings"] = settings_sweep(rec, quick)
    out["collection"] = collection_cost(quick, out_dir)
    out["internal_errors"] = dict(__import__("spectrace.safety", fromlist=["x"]).INTERNAL_ERRORS.counts)
    return out


def vllm_algorithms(rounds: int, per_round: int, bs: int = 256) -> dict:
    """vLLM's hooks per speculative method at batch `bs` (stats on): EAGLE-3, DFlash (the
    same width hook on its own draft class), n-gram (no draft hook: EngineCore and runner
    only; EAGLE-1 and MTP likewise). None may cost more than EAGLE-3."""
    inputs = hb.make_vllm_inputs(bs)
    out = {}
    for algorithm in hb.VLLM_ALGORITHMS:
        out[algorithm] = row = on_off(hb.VllmStep(bs, None, inputs, algorithm=algorithm),
                                      hb.VllmStep(bs, "spectrace", inputs, algorithm=algorithm),
                                      rounds, per_round)
        print(f"  vLLM {algorithm} batch {bs}: spectrace +"
              f"{row['spectrace_added']['median_us']:.2f} us (median); "
              f"load {row['load_before']}", file=sys.stderr)
    return out


def on_off(off, on, rounds: int, per_round: int) -> dict:
    """The same step uninstrumented and with spectrace, interleaved: summaries and what
    spectrace adds; the steps are closed afterwards."""
    before = load()
    res = interleaved({"uninstrumented": off, "spectrace": on}, rounds, per_round)
    row = {name: summary(r["all"]) for name, r in res.items()}
    row["spectrace_added"] = added(res, "spectrace")
    row["load_before"], row["load_after"] = before, load()
    off.close()
    on.close()
    return row


def calibration() -> dict:
    """How fast the machine is right now: a plain method call, and the same call through
    a bare wrapt wrapper (`return wrapped(*args, **kwargs)`), interleaved. A v2 step goes
    through 8 wrapped calls; the notes measured a bare wrapper at about 0.7 µs."""
    import wrapt

    class Plain:
        def f(self, batch, x=None):
            return batch

    class Wrapped(Plain):
        def f(self, batch, x=None):
            return batch

    wrapt.wrap_function_wrapper(Wrapped, "f", lambda w, i, a, k: w(*a, **k))
    p, w = Plain(), Wrapped()
    res = interleaved({"plain": lambda: p.f(1), "wrapt": lambda: w.f(1)}, 20, 500)
    return {"plain_call_us": ns_to_us(statistics.median(res["plain"]["all"])),
            "bare_wrapt_adds_us": added(res, "wrapt", base="plain")["median_us"]}


SWEEP = (("no spans, no agreement", 0.0, 0), ("defaults", 0.01, 16),
         ("agreement every step", 0.0, 1), ("every step a span", 1.0, 0))
# step cost (SPECTRACE_STEP_COST_EVERY) on top of the defaults: off, and every step measured
STEP_COST_SWEEP = (("defaults, step cost off", 0), ("defaults, step cost every step", 1))


def settings_sweep(rec, quick: bool) -> dict:
    """Added cost per step (median and mean) under other sampling settings: what a sampled
    step (4 spans) and an agreement comparison cost."""
    import dataclasses
    default = rec.cfg
    rounds, per_round = (20, 100) if quick else (60, 200)
    out = {}
    try:
        for bs in (1, 256):
            t = hb.make_tensors(bs)
            variants = {"uninstrumented": hb.V2Step(bs, None, t),
                        "spectrace": hb.V2Step(bs, "spectrace", t)}
            for label, ratio, every in SWEEP:
                rec.cfg = dataclasses.replace(default, step_sample_ratio=ratio,
                                              agreement_every=every)
                res = interleaved(variants, rounds, per_round)
                out.setdefault(label, {"step_sample_ratio": ratio, "agreement_every": every})
                out[label][bs] = added(res, "spectrace")
            for label, every in STEP_COST_SWEEP:
                rec.cfg = dataclasses.replace(default, step_cost_every=every)
                res = interleaved(variants, rounds, per_round)
                out.setdefault(label, {"step_sample_ratio": default.step_sample_ratio,
                                       "agreement_every": default.agreement_every,
                                       "step_cost_every": every})
                out[label][bs] = added(res, "spectrace")
            for v in variants.values():
                v.close()
    finally:
        rec.cfg = default
    return out


def collection_cost(quick: bool, out_dir: str) -> dict:
    """What the metric reader pays at each collection: every observable callback (the
    folding of the accept-count lists kept since the last one, and agreement counts), the
    file export of the snapshot. Measured on a Recorder with a manual reader so the
    collection is timed alone; amortized over the steps since the previous collection."""
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import InMemoryMetricReader
    from spectrace import process
    from spectrace.export.files import FileMetricExporter, JsonlWriter
    from spectrace.export.providers import ProcessTelemetry
    from spectrace.recorder import Recorder

    st = process.STATE
    live = st.recorder
    reader = InMemoryMetricReader()
    provider = MeterProvider(resource=live.tel.resource, metric_readers=[reader])
    tel = ProcessTelemetry(resource=live.tel.resource, meter=provider.get_meter("spectrace"),
                           tracer=live.tel.tracer, events=None, directory=None)
    exporter = FileMetricExporter(JsonlWriter(os.path.join(out_dir, "collection-metrics.jsonl")))
    rec = Recorder(live.cfg, tel)
    st.recorder = rec
    out = {}
    try:
        for bs in BATCHES:
            step = hb.V2Step(bs, "spectrace")
            for _ in range(20):
                step()
            exporter.export(reader.get_metrics_data())  # first collection creates storage
            rows = {}
            for per in (200, 2000):  # steps between collections (2 s at 10 ms or 1 ms a step)
                samples = []
                for _ in range(3 if quick else 7):
                    for _ in range(per):
                        step()
                    gc.collect()
                    t0 = time.perf_counter_ns()
                    exporter.export(reader.get_metrics_data())
                    samples.append(time.perf_counter_ns() - t0)
                m = statistics.median(samples)
                rows[per] = {"collect_us": ns_to_us(m), "per_step_us": ns_to_us(m / per)}
            step.close()
            out[bs] = rows
    finally:
        st.recorder = live
        provider.shutdown()
    return out


# -- part 3: end to end ------------------------------------------------------------------
def proc_cpu_s(pid: int) -> float:
    import psutil
    total = 0.0
    try:
        p = psutil.Process(pid)
        for q in [p] + p.children(recursive=True):
            try:
                c = q.cpu_times()
                total += c.user + c.system
            except psutil.Error:
                pass
    except psutil.Error:
        pass
    return total


# One intra-op thread per server: with torch's default (one per core) the OpenMP workers
# spin-wait for each other, and on a shared two-core machine a busy neighbour then changes
# a run's speed tenfold. Every server gets the same settings.
SERVER_ENV = {"OMP_NUM_THREADS": "1"}
# The three servers of an end-to-end run: spectrace off, on, and a second one off (the
# off/off control: the noise floor of the comparison, measured in the same run).
ARMS = ("off", "on", "control")
# The end-to-end request set: one run sends these 4 at a time (4 = max running requests).
E2E_PROMPTS = [[3, 7, 11], [5, 9, 2], [4, 6, 8], [10, 1, 3]]
E2E_MAX_NEW = 64


def scheduler_pid(server_pid: int) -> int | None:
    """The pid of the server's scheduler process (SGLang names it `sglang::scheduler`)."""
    import psutil
    try:
        for q in psutil.Process(server_pid).children(recursive=True):
            if "scheduler" in q.name():
                return q.pid
    except psutil.Error:
        pass
    return None


def main_thread_sched(pid: int | None) -> tuple[float, float, int]:
    """The scheduler's main thread (the decode loop): seconds on a CPU, seconds runnable
    but waiting for one (other jobs on the machine), voluntary context switches (it
    blocked: on the interpreter lock, a socket), from /proc/<pid>/schedstat and status."""
    if pid is None:
        return 0.0, 0.0, 0
    try:
        with open(f"/proc/{pid}/schedstat") as fh:
            run, wait, _ = fh.read().split()
        with open(f"/proc/{pid}/status") as fh:
            switches = next(int(line.split()[1]) for line in fh
                            if line.startswith("voluntary_ctxt_switches"))
    except (OSError, ValueError, StopIteration):
        return 0.0, 0.0, 0
    return int(run) / 1e9, int(wait) / 1e9, switches


def spread(values: list[float]) -> dict:
    """Median, quartiles and range of per-pair ratios."""
    s = sorted(values)
    q = statistics.quantiles(s, n=4, method="inclusive") if len(s) > 1 else [s[0]] * 3
    return {"median": statistics.median(s), "q1": q[0], "q3": q[2], "min": s[0], "max": s[-1],
            "n": len(s)}


def spread_text(sp: dict) -> str:
    return (f"{sp['median']:.3f} (quartiles {sp['q1']:.3f}-{sp['q3']:.3f}, range "
            f"{sp['min']:.3f}-{sp['max']:.3f}, {sp['n']} pairs)")


def end_to_end(pairs: int, out_dir: str, on_env: dict | None = None,
               server_nice: int | None = None, restart_every: int = 3) -> dict:
    """Three servers (spectrace off, on, and off again as the control), all up; each run
    freezes the other two. A round runs the request set once on each, in an order that
    rotates from round to round; on/off and control/off are that round's pairs. Every
    `restart_every` rounds all three are stopped and started afresh (an epoch), in a start
    order that rotates from epoch to epoch: a server instance alone moved throughput by
    up to 10 % in A/A runs (stop 29: control/off 1.113 over 12 rounds of two instances
    each), so rounds of one instance are not independent and only many instances average
    that out. `on_env`: extra settings for the "on" server (e.g.
    SPECTRACE_STEP_SAMPLE_RATIO=0, to find where a cost comes from). `server_nice`: every
    server's niceness and its session's (`harness.server.launch`), the same for all
    three."""
    from concurrent.futures import ThreadPoolExecutor

    from harness.server import start_server
    from harness.tiny_models import make_tiny_models

    models = os.path.join(out_dir, "tiny-partial")
    make_tiny_models(models, "partial")
    restart_every = max(1, restart_every)
    epochs = [min(restart_every, pairs - k) for k in range(0, pairs, restart_every)]
    max_new = E2E_MAX_NEW
    repeats = 2  # the request set is sent this many times per run (one after the other)
    prompts = E2E_PROMPTS
    data = os.path.join(out_dir, "e2e-spectrace-data")
    env = {"off": {**SERVER_ENV, "SPECTRACE_ENABLED": "0"},
           "on": {**SERVER_ENV, "SPECTRACE_ENABLED": "1", "SPECTRACE_OUTPUT_DIR": data,
                  **(on_env or {})},
           "control": {**SERVER_ENV, "SPECTRACE_ENABLED": "0"}}
    out = {"pairs": pairs, "requests_per_run": len(prompts) * repeats,
           "concurrency": len(prompts), "max_new_tokens": max_new,
           "server_env": dict(SERVER_ENV), "on_env": dict(on_env or {}),
           "server_nice": server_nice, "load_before": load(),
           "restart_every": restart_every, "epochs": len(epochs), "startup_s": []}
    rows = []
    loop_pids: dict = {}  # arm -> its scheduler's pid

    def run(servers: dict, name: str) -> dict:
        """One run of the request set on one server, the others frozen (SIGSTOP to their
        process groups): SGLang's CPU scheduler polls when idle and would take a core."""
        others = [servers[n] for n in servers if n != name]
        for o in others:
            os.killpg(o.proc.pid, signal.SIGSTOP)
        try:
            time.sleep(0.2)
            idle0 = sum(proc_cpu_s(o.proc.pid) for o in others)
            got = measure(servers[name], name)
            got["frozen_others_cpu_s"] = round(
                sum(proc_cpu_s(o.proc.pid) for o in others) - idle0, 3)
        finally:
            for o in others:
                os.killpg(o.proc.pid, signal.SIGCONT)
        return got

    def measure(s, name: str) -> dict:
        """The request set on server `s`, timed."""
        with ThreadPoolExecutor(len(prompts)) as pool:
            cpu0 = proc_cpu_s(s.proc.pid)
            run0, wait0, sw0 = main_thread_sched(loop_pids.get(name))
            t = time.perf_counter()
            resp = []
            for _ in range(repeats):
                resp += list(pool.map(lambda p: s.generate(p, max_new, timeout=300), prompts))
            wall = time.perf_counter() - t
            cpu1 = proc_cpu_s(s.proc.pid)
            run1, wait1, sw1 = main_thread_sched(loop_pids.get(name))
        toks = sum(r["meta_info"]["completion_tokens"] for r in resp)
        verify = sum(r["meta_info"].get("spec_verify_ct", 0) for r in resp)
        # the time the run would have taken with a CPU to itself: the wall time less the
        # time the decode loop was ready to run but other jobs had the CPUs
        uncontended = max(wall - (wait1 - wait0), 1e-9)
        return {"tokens": toks, "wall_s": wall, "tok_s": toks / wall, "verify_ct": verify,
                "uncontended_tok_s": toks / uncontended,
                "server_cpu_s": cpu1 - cpu0, "tok_per_cpu_s": toks / max(cpu1 - cpu0, 1e-9),
                "loop_on_cpu_s": round(run1 - run0, 3),
                "loop_runqueue_wait_s": round(wait1 - wait0, 3),
                "loop_voluntary_switches": sw1 - sw0}

    for epoch, n_pairs in enumerate(epochs):
        start_order = ARMS[epoch % 3:] + ARMS[:epoch % 3]
        if (epoch // 3) % 2:
            start_order = tuple(reversed(start_order))
        servers: dict = {}
        try:
            t0 = time.time()
            for name in start_order:
                servers[name] = start_server(
                    models, os.path.join(out_dir, f"server-{name}-{epoch}.log"),
                    env_extra=env[name], nice=server_nice)
                loop_pids[name] = scheduler_pid(servers[name].proc.pid)
            out["startup_s"].append(round(time.time() - t0, 1))
            for name in ARMS:  # warm-up (first requests allocate, fill caches)
                run(servers, name)
            for k in range(len(rows), len(rows) + n_pairs):
                order = ARMS[k % 3:] + ARMS[:k % 3]
                if (k // 3) % 2:
                    order = tuple(reversed(order))
                r = {name: run(servers, name) for name in order}
                r["ratio"] = r["on"]["tok_s"] / r["off"]["tok_s"]
                r["control_ratio"] = r["control"]["tok_s"] / r["off"]["tok_s"]
                r["cpu_ratio"] = r["on"]["tok_per_cpu_s"] / r["off"]["tok_per_cpu_s"]
                r["uncontended_ratio"] = (r["on"]["uncontended_tok_s"]
                                          / r["off"]["uncontended_tok_s"])
                r["uncontended_control_ratio"] = (r["control"]["uncontended_tok_s"]
                                                  / r["off"]["uncontended_tok_s"])
                r["order"] = "/".join(order)
                r["started"] = "/".join(start_order)
                r["epoch"] = epoch
                rows.append(r)
                print(f"  e2e pair {len(rows) - 1}: off {r['off']['tok_s']:.1f}, on "
                      f"{r['on']['tok_s']:.1f}, control {r['control']['tok_s']:.1f} tok/s; "
                      f"on/off {r['ratio']:.3f}, control/off {r['control_ratio']:.3f}; uncontended "
                      f"{r['uncontended_ratio']:.3f}, {r['uncontended_control_ratio']:.3f}; "
                      "decode loop wall/on CPU/waiting s, switches "
                      + " ".join(f"{n} {r[n]['wall_s']:.2f}/{r[n]['loop_on_cpu_s']:.2f}/"
                                 f"{r[n]['loop_runqueue_wait_s']:.2f} "
                                 f"{r[n]['loop_voluntary_switches']}" for n in ARMS) + "; "
                      f"load {load()}", file=sys.stderr)
        finally:
            for s in servers.values():
                try:
                    os.killpg(s.proc.pid, signal.SIGCONT)
                except ProcessLookupError:
                    pass
                s.stop()
    out["runs"] = rows
    out["ratio"] = spread([r["ratio"] for r in rows])
    # each epoch's median: the server instances' part of the spread
    by_epoch = [[r for r in rows if r["epoch"] == e] for e in range(len(epochs))]
    out["epoch_ratio"] = [statistics.median(r["ratio"] for r in g) for g in by_epoch if g]
    out["epoch_control_ratio"] = [statistics.median(r["control_ratio"] for r in g)
                                  for g in by_epoch if g]
    out["control_ratio"] = spread([r["control_ratio"] for r in rows])
    out["cpu_ratio"] = spread([r["cpu_ratio"] for r in rows])
    out["uncontended_ratio"] = spread([r["uncontended_ratio"] for r in rows])
    out["uncontended_control_ratio"] = spread([r["uncontended_control_ratio"] for r in rows])
    out["median_ratio"] = out["ratio"]["median"]
    out["median_tok_s"] = {n: statistics.median(r[n]["tok_s"] for r in rows) for n in ARMS}
    # the decode loop's CPU seconds for the same work (one request set), per server: what
    # spectrace adds to the loop itself, whatever the machine's speed did to the wall time
    out["median_loop_cpu_s"] = {n: statistics.median(r[n]["loop_on_cpu_s"] for r in rows)
                                for n in ARMS}
    out["approx_step_ms"] = 1000 * statistics.median(
        r["off"]["wall_s"] / max(1, r["off"]["verify_ct"] / len(prompts)) for r in rows)
    out["load_after"] = load()
    out["spectrace_wrote"] = sorted(os.listdir(data)) if os.path.isdir(data) else []
    return out


# -- report ------------------------------------------------------------------------------
def _added_table(title: str, rows: dict) -> list[str]:
    """Uninstrumented vs spectrace per batch size (the rows of one hot-path variant)."""
    lines = ["", title, "| batch | uninstrumented median µs | with spectrace median / mean µs "
             "| spectrace adds median / mean µs |", "|---|---|---|---|"]
    for bs, r in rows.items():
        lines.append(f"| {bs} | {r['uninstrumented']['median_us']:.2f} | "
                     f"{r['spectrace']['median_us']:.2f} / {r['spectrace']['mean_us']:.2f} | "
                     f"{r['spectrace_added']['median_us']:.2f} / "
                     f"{r['spectrace_added']['mean_us']:.2f} |")
    return lines


def table(res: dict) -> str:
    lines = []
    hot = res.get("hot")
    if hot:
        lines += ["Hot path, v2 worker, one speculative step (3 draft passes), default settings",
                  "| batch | uninstrumented median µs | with spectrace median / mean µs | "
                  "spectrace adds median / mean µs | ratio to uninstrumented (median) | "
                  "naive adds median µs | naive / spectrace |",
                  "|---|---|---|---|---|---|---|"]
        for bs in BATCHES:
            r = hot["v2"][bs]
            base, sp, add, nv = r["uninstrumented"], r["spectrace"], r["spectrace_added"], r["naive_added"]
            lines.append(f"| {bs} | {base['median_us']:.2f} | {sp['median_us']:.2f} / {sp['mean_us']:.2f} "
                         f"| {add['median_us']:.2f} / {add['mean_us']:.2f} | "
                         f"{sp['median_us'] / base['median_us']:.2f}x | {nv['median_us']:.1f} | "
                         f"{nv['median_us'] / max(add['median_us'], 1e-9):.0f}x |")
        cal = hot["calibration"]
        lines += ["", f"Machine speed in this run: a bare wrapt wrapper adds "
                  f"{cal['bare_wrapt_adds_us']:.2f} µs per call (timer included: a plain "
                  f"call measures {cal['plain_call_us']:.2f} µs); a v2 step makes 8 wrapped calls"]
        lines += _added_table("Hot path, v1 worker (SGLang <= 0.5.12), same step", hot["v1"])
        lines += _added_table(
            "Hot path, vLLM engine step (EngineCore.step, Scheduler.update_from_output + "
            "make_stats, GPUModelRunner.execute_model, sample_tokens, _sample, "
            "propose_draft_token_ids, Eagle3LlamaForCausalLM.combine_hidden_states; "
            "EngineCore and worker together), default settings, vLLM logging its stats "
            "(the server's default)", hot["vllm"])
        lines += _added_table("Hot path, same vLLM step, vLLM logging no stats (LLM's "
                              "default: spectrace snapshots the sampled lengths)",
                              hot["vllm_no_stats"])
        if "vllm_mrv2" in hot:
            lines += _added_table(
                "Hot path, vLLM engine step on the V2 model runner (MRV2: its "
                "GPUModelRunner.execute_model, sample_tokens, RejectionSampler.__call__, the "
                "speculator's propose), default settings, vLLM logging its stats",
                hot["vllm_mrv2"])
        lines += ["", "Sampling settings, v2 step: spectrace adds median / mean µs per step",
                  "| settings | step_sample_ratio | agreement_every | batch 1 | batch 256 |",
                  "|---|---|---|---|---|"]
        for label, r in hot["settings"].items():
            lines.append(f"| {label} | {r['step_sample_ratio']} | {r['agreement_every']} | "
                         f"{r[1]['median_us']:.2f} / {r[1]['mean_us']:.2f} | "
                         f"{r[256]['median_us']:.2f} / {r[256]['mean_us']:.2f} |")
        lines += ["", "Metric collection (off the decode loop, in the reader thread), amortized",
                  "| batch | collect+export, 200 steps since last: µs (µs/step) | "
                  "2000 steps: µs (µs/step) |", "|---|---|---|"]
        for bs in BATCHES:
            c = hot["collection"][bs]
            lines.append(f"| {bs} | {c[200]['collect_us']:.0f} ({c[200]['per_step_us']:.2f}) | "
                         f"{c[2000]['collect_us']:.0f} ({c[2000]['per_step_us']:.2f}) |")
    e2e = res.get("e2e")
    if e2e:
        extra = "".join(f", {k}={v}" for k, v in e2e["on_env"].items())
        lines += ["", f"End to end, real SGLang 0.5.23 CPU server, tiny partial models, "
                  f"{e2e['requests_per_run']} requests ({e2e['concurrency']} at a time) x "
                  f"{e2e['max_new_tokens']} tokens per run, {e2e['pairs']} rounds; servers: "
                  f"spectrace off, on (defaults{extra}), control (off); server niceness "
                  f"{e2e['server_nice']}",
                  "| round | started | order | off tok/s | on tok/s | control tok/s | on/off "
                  "| control/off | on/off per server CPU-second | frozen servers' CPU s |",
                  "|---|---|---|---|---|---|---|---|---|---|"]
        for k, r in enumerate(e2e["runs"]):
            frozen = sum(r[n]["frozen_others_cpu_s"] for n in ARMS)
            lines.append(f"| {k} | {r['started']} | {r['order']} | {r['off']['tok_s']:.1f} | "
                         f"{r['on']['tok_s']:.1f} | {r['control']['tok_s']:.1f} "
                         f"| {r['ratio']:.3f} | {r['control_ratio']:.3f} | {r['cpu_ratio']:.3f} "
                         f"| {frozen:.2f} |")
        m = e2e["median_tok_s"]
        lines.append(f"| median | | | {m['off']:.1f} | {m['on']:.1f} | {m['control']:.1f} "
                     f"| {e2e['ratio']['median']:.3f} | {e2e['control_ratio']['median']:.3f} "
                     f"| {e2e['cpu_ratio']['median']:.3f} | |")
        lines.append(f"\n(one decode step of the tiny CPU model: about {e2e['approx_step_ms']:.0f} ms; "
                     f"load {e2e['load_before']} before, {e2e['load_after']} after)")
        if e2e.get("epoch_ratio"):
            lines.append(f"\nper epoch ({e2e['epochs']} of {e2e['restart_every']} rounds, fresh "
                         f"servers each): on/off "
                         + ", ".join(f"{x:.3f}" for x in e2e["epoch_ratio"])
                         + "; control/off "
                         + ", ".join(f"{x:.3f}" for x in e2e["epoch_control_ratio"]))
        lines.append(f"\nEND TO END on/off: {spread_text(e2e['ratio'])}\n"
                     f"OFF/OFF CONTROL:  {spread_text(e2e['control_ratio'])}\n"
                     f"medians of each server's runs: tok/s on/off "
                     f"{m['on'] / m['off']:.3f}, control/off {m['control'] / m['off']:.3f}; "
                     f"decode loop CPU s per run off {e2e['median_loop_cpu_s']['off']:.3f}, "
                     f"on {e2e['median_loop_cpu_s']['on']:.3f}, control "
                     f"{e2e['median_loop_cpu_s']['control']:.3f}\n"
                     f"uncontended (wall less the decode loop's wait for a CPU): on/off "
                     f"{spread_text(e2e['uncontended_ratio'])}; control/off "
                     f"{spread_text(e2e['uncontended_control_ratio'])}")
    t = res.get("targets")
    if t:
        lines += ["", "Targets", "| target | measured | met |", "|---|---|---|"]
        for k, v in t.items():
            lines.append(f"| {k} | {v['measured']} | {'yes' if v['met'] else 'NO'} |")
    return "\n".join(lines)


def targets(res: dict) -> dict:
    t = {}
    hot = res.get("hot")
    if hot:
        a1 = hot["v2"][1]["spectrace_added"]["median_us"]
        a256 = hot["v2"][256]["spectrace_added"]["median_us"]
        n256 = hot["v2"][256]["naive_added"]["median_us"]
        t["spectrace adds <= 15 µs (median) per step at batch 256"] = {
            "measured": f"{a256:.2f} µs", "met": a256 <= TARGETS["hook_median_us_b256"]}
        ratio = a256 / a1 if a1 > 0 else float("inf")
        t["batch 256 <= 1.5x batch 1"] = {"measured": f"{ratio:.2f}x ({a256:.2f} / {a1:.2f} µs)",
                                           "met": ratio <= TARGETS["b256_over_b1"]}
        g = n256 / a256 if a256 > 0 else float("inf")
        t[">= 20x cheaper than naive at batch 256"] = {
            "measured": f"{g:.0f}x", "met": g >= TARGETS["naive_over_spectrace_b256"]}
    e2e = res.get("e2e")
    if e2e:
        t["end to end on/off >= 0.98 (median)"] = {
            "measured": spread_text(e2e["ratio"]),
            "met": e2e["ratio"]["median"] >= TARGETS["e2e_ratio"]}
    return t


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="fewer steps and pairs (< ~4 min)")
    ap.add_argument("--json", default="benchmarks/results/overhead.json", help="output JSON")
    ap.add_argument("--skip-e2e", action="store_true")
    ap.add_argument("--skip-hot", action="store_true")
    ap.add_argument("--e2e-only", action="store_true", help="end to end only (= --skip-hot)")
    ap.add_argument("--pairs", type=int, default=None,
                    help="end-to-end rounds (each: off, on and control once); default 10 "
                         "with --quick, else 30")
    ap.add_argument("--server-nice", type=int, default=None, metavar="N",
                    help="niceness of the servers and their sessions' autogroups (all "
                         "alike; N < 0 needs root), e.g. -10 on a shared machine")
    ap.add_argument("--restart-every", type=int, default=3, metavar="R",
                    help="end to end: start all three servers afresh every R rounds "
                         "(default 3), so that many server instances are averaged")
    ap.add_argument("--on-env", action="append", default=[], metavar="VAR=VALUE",
                    help="a setting for the 'on' server only (repeatable), e.g. "
                         "SPECTRACE_STEP_SAMPLE_RATIO=0: where does a cost come from")
    args = ap.parse_args(argv)
    pairs = args.pairs if args.pairs is not None else (10 if args.quick else 30)
    if pairs < 2:
        ap.error(f"--pairs {pairs}: expected at least 2")
    if args.restart_every < 1:
        ap.error(f"--restart-every {args.restart_every}: expected at least 1")
    on_env = {}
    for item in args.on_env:
        var, sep, value = item.partition("=")
        if not sep or not var.startswith("SPECTRACE_"):
            ap.error(f"--on-env {item!r}: expected SPECTRACE_<SETTING>=VALUE")
        on_env[var] = value
    if os.environ.get("SPECTRACE_ENABLED", "0") not in ("0", ""):
        print("unset SPECTRACE_ENABLED: the benchmark installs spectrace itself", file=sys.stderr)
        return 2
    import torch
    import sglang
    started = time.time()
    res = {"machine": {"python": platform.python_version(), "torch": torch.__version__,
                       "sglang": sglang.__version__, "cpus": os.cpu_count(),
                       "platform": platform.platform()},
           "quick": args.quick, "load_start": load()}
    problems = hb.check_signatures()
    res["signature_check"] = problems or "stand-ins match SGLang's parameter lists"
    problems = hb.check_signatures(vllm=True)
    res["signature_check_vllm"] = problems or "stand-ins match vLLM's parameter lists"
    with tempfile.TemporaryDirectory(prefix="spectrace-bench-") as tmp:
        if not (args.skip_hot or args.e2e_only):
            print("hot path ...", file=sys.stderr)
            res["hot"] = hot_path(args.quick, tmp)
            process_state.shutdown_recorder()
        if not args.skip_e2e:
            print("end to end (three SGLang CPU servers) ...", file=sys.stderr)
            res["e2e"] = end_to_end(pairs, tmp, on_env, args.server_nice, args.restart_every)
    res["targets"] = targets(res)
    res["load_end"] = load()
    res["runtime_s"] = round(time.time() - started, 1)
    text = table(res)
    print(text)
    print(f"\nload average (1/5/15 min) at start {res['load_start']}, at end {res['load_end']}; "
          f"{os.cpu_count()} CPUs; runtime {res['runtime_s']} s")
    if args.json:
        os.makedirs(os.path.dirname(os.path.abspath(args.json)), exist_ok=True)
        with open(args.json, "w") as fh:
            json.dump(res, fh, indent=1, default=str)
        print(f"JSON: {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
