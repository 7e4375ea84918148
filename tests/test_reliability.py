"""Faults spectrace must survive without breaking the SGLang server it watches, each with
the real code path: failing hooks, dead or stuck OTLP collectors, a taken Prometheus port,
an unwritable or full output folder, a SIGKILLed scheduler, SGLang releases lacking a wrap
point, and several instrumented processes writing at once. (docs/reliability.md)"""
from __future__ import annotations

import json
import logging
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
import types
import urllib.request

import pytest
import wrapt

from spectrace import config as config_mod
from spectrace import process, signals
from spectrace.export.bounded import SPAN_QUEUE_SIZE, BoundedSpanProcessor
from spectrace.export.files import JsonlWriter
from spectrace.export.providers import setup
from spectrace.file_layout import EVENTS_FILE, METRICS_FILE, process_dir
from spectrace.findings import Finding
from spectrace.patching import Patcher
from spectrace.recorder import Recorder
from spectrace.safety import DROPPED, INTERNAL_ERRORS, guarded_wrapper

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
from harness.server import STANDIN, cpu_env, free_port  # noqa: E402
from tests.e2e import settle  # noqa: E402


def cfg(**kw) -> config_mod.Config:
    kw.setdefault("metric_interval_s", 0.1)
    kw.setdefault("step_sample_ratio", 1.0)
    return config_mod.from_env({}, **kw)


def flush_metrics(tel) -> None:
    for p in tel.owned:
        if hasattr(p, "force_flush"):
            p.force_flush()


def last_metrics(directory: str) -> dict:
    with open(os.path.join(directory, METRICS_FILE)) as fh:
        return json.loads(fh.read().splitlines()[-1])["metrics"]


def fc_finding(i: int = 0) -> Finding:
    return Finding(signals.FC_BYPASS, "error", f"fc bypass {i}", {"i": i})


def spectrace_errors(caplog, needle: str) -> list[str]:
    return [r.getMessage() for r in caplog.records
            if r.name == "spectrace" and r.levelno >= logging.ERROR and needle in r.getMessage()]


@pytest.fixture(autouse=True)
def _fresh_process_state():
    """Counts start at zero in every test (`process.reset()`), so tests read them as they
    are instead of measuring differences."""
    process.reset()


@pytest.fixture
def telemetry():
    made = []

    def make(c, ranks=None):
        tel = setup(c, ranks or {}, "scheduler")
        made.append(tel)
        return tel
    yield make
    for tel in made:
        tel.shutdown()


# -- a spectrace hook raises ------------------------------------------------------------
def test_raising_hook_runs_the_call_once_and_counts(caplog):
    calls = []

    def target(a, b, *, c=0):
        calls.append((a, b, c))
        return {"sum": a + b + c}

    def boom(*_a):
        raise KeyError("spectrace bug")

    def boom_cleanup(_ctx):
        raise RuntimeError("cleanup bug")

    wrapped = wrapt.FunctionWrapper(target, guarded_wrapper(
        "test.boom", before=lambda *a: "ctx", after=boom, cleanup=boom_cleanup))
    with caplog.at_level(logging.ERROR, logger="spectrace"):
        results = [wrapped(1, 2, c=i) for i in range(3)]
    assert calls == [(1, 2, 0), (1, 2, 1), (1, 2, 2)]       # once each, own arguments
    assert results == [{"sum": 3}, {"sum": 4}, {"sum": 5}]   # own results
    assert INTERNAL_ERRORS.counts == {"test.boom": 6}        # after + cleanup, 3 calls
    assert len(spectrace_errors(caplog, "test.boom")) == 1    # logged once per hook

    wrapped2 = wrapt.FunctionWrapper(target, guarded_wrapper("test.boom2", before=boom))
    assert wrapped2(5, 5) == {"sum": 10} and calls[-1] == (5, 5, 0)


def test_raising_hook_lets_the_calls_own_exception_through():
    def target(x):
        raise ValueError(f"sglang says {x}")

    def boom(*_a):
        raise KeyError("spectrace bug")

    wrapped = wrapt.FunctionWrapper(target, guarded_wrapper("test.own_exc", before=boom))
    with pytest.raises(ValueError, match="sglang says 7"):
        wrapped(7)


@pytest.mark.sglang
def test_failing_load_bookkeeping_leaves_the_runtimes_load_alone():
    """The load observer's bookkeeping runs inside the runtime's own weight load: when it
    fails (here an unhashable shard id), every loader still runs once with its own
    arguments and result, and the failure is counted."""
    import torch
    from spectrace.adapters.load_observer import LoadObserver
    calls = []
    param = torch.nn.Parameter(torch.zeros(2))
    param.weight_loader = lambda p, w, shard: calls.append((p, w, shard)) or "loaded"
    obs = LoadObserver(torch.nn.ParameterList([param]), types.ModuleType("m"), hook="test.load")
    tensor, shard = torch.ones(2), ["q"]  # a list: the observer cannot keep it in a set
    for _, w in obs.iterate([("w", tensor)]):
        assert param.weight_loader(param, w, shard) == "loaded"
    obs.restore()
    assert calls == [(param, tensor, shard)]
    assert INTERNAL_ERRORS.counts == {"test.load": 1}


@pytest.mark.sglang
def test_load_observer_that_fails_to_install_puts_every_loader_back():
    import torch
    param = torch.nn.Parameter(torch.zeros(2))
    original = param.weight_loader = lambda p, w: None

    class ReadOnly:  # a module whose default_weight_loader cannot be swapped
        default_weight_loader = property(lambda self: original)
    from spectrace.adapters.load_observer import LoadObserver
    with pytest.raises(AttributeError):
        LoadObserver(torch.nn.ParameterList([param]), ReadOnly())
    assert param.weight_loader is original


def test_internal_errors_are_exported(tmp_path, telemetry):
    tel = telemetry(cfg(output_dir=str(tmp_path)))
    Recorder(tel_cfg := cfg(output_dir=str(tmp_path)), tel)
    assert tel_cfg.exporters == ("file",)
    INTERNAL_ERRORS.record("test.exported", RuntimeError("x"))
    flush_metrics(tel)
    points = last_metrics(tel.directory)[signals.INTERNAL_ERRORS.name]
    assert any(p["attributes"].get(signals.ATTR_HOOK) == "test.exported" and p["value"] >= 1
               for p in points)


SGLANG_HOOK_SCRIPT = os.path.join(ROOT, "tests", "programs", "sglang_hook_raises.py")


@pytest.mark.sglang
def test_raising_adapter_hook_on_real_sglang_llamamodel_forward():
    """spectrace's real `eagle3.forward` hook, installed by the real adapter on SGLang's real
    `LlamaModel.forward`, raises (stand-in model instance without `config`, labelled in the
    script): SGLang's forward still runs once per call and returns its own result."""
    out = subprocess.run([sys.executable, SGLANG_HOOK_SCRIPT], capture_output=True,
                         text=True, timeout=300, cwd=ROOT, env=cpu_env(
                             {"PYTHONPATH": os.pathsep.join((ROOT, STANDIN))}))
    assert out.returncode == 0, out.stderr[-3000:]
    r = json.loads(out.stdout.strip().splitlines()[-1])
    assert r["shapes"] == [[0, 8], [0, 8], [0, 8]]
    assert r["fc_calls"] == 3          # two wrapped calls + the reference call: once each
    assert r["errors"] == 3            # the hook failed on each wrapped call
    assert r["logged"] == 1            # logged once
    assert r["own_exc"] == "RuntimeError"
    assert r["restored"]


# -- OTLP endpoint down / refusing / slow ------------------------------------------------
class SilentServer:
    """Accepts TCP connections and never answers (a hung collector)."""

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(64)
        self.port = self.sock.getsockname()[1]
        self.conns: list = []
        self.stop = False
        threading.Thread(target=self._run, daemon=True).start()

    def _run(self) -> None:
        self.sock.settimeout(0.2)
        while not self.stop:
            try:
                self.conns.append(self.sock.accept()[0])
            except OSError:
                pass

    def close(self) -> None:
        self.stop = True
        for c in self.conns:
            c.close()
        self.sock.close()


@pytest.mark.slow
@pytest.mark.parametrize("mode,protocol", [("silent", "grpc"), ("silent", "http/protobuf"),
                                           ("refused", "grpc")])
def test_stuck_otlp_never_blocks_the_caller(mode, protocol, monkeypatch, telemetry):
    server = SilentServer() if mode == "silent" else None
    port = server.port if server else free_port()   # nothing listens on a fresh free port
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", f"http://127.0.0.1:{port}")
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_PROTOCOL", protocol)
    try:
        c = cfg(exporters=["otlp"])
        tel = telemetry(c)
        rec = Recorder(c, tel)
        proc = next(p for p in tel.span_processors if isinstance(p, BoundedSpanProcessor))
        n = SPAN_QUEUE_SIZE * 3
        worst = 0.0
        t0 = time.perf_counter()
        for i in range(n):
            s = time.perf_counter()
            tel.tracer.start_span(signals.SPAN_STEP).end()
            rec.steps.begin("w")
            worst = max(worst, time.perf_counter() - s)
        total = time.perf_counter() - t0
        # Blocked would mean waiting on the exporter's 5 s timeout (or forever); a loaded
        # 2-core machine can still pause one call for a GC or a GIL hand-off (0.35 s seen).
        assert total < 10.0 and worst < 2.0, (total, worst)
        assert proc.queue_length() <= SPAN_QUEUE_SIZE                     # bounded
        assert DROPPED.counts["spans"] >= n - SPAN_QUEUE_SIZE - 512  # counted
        s = time.perf_counter()
        for i in range(50):
            rec.finding(fc_finding(i))
        assert time.perf_counter() - s < 1.0
        deadline = time.time() + 120                    # the metric reader's export fails
        while not DROPPED.counts.get("metrics") and time.time() < deadline:
            time.sleep(0.2)
        assert DROPPED.counts.get("metrics", 0) > 0
        s = time.perf_counter()
        tel.shutdown()
        assert time.perf_counter() - s < 20               # uninstrument is bounded too
    finally:
        if server:
            server.close()


# -- Prometheus port taken --------------------------------------------------------------
def test_prometheus_port_taken_is_logged_and_the_rest_works(tmp_path, caplog, telemetry):
    blocker = socket.socket()
    blocker.bind(("127.0.0.1", 0))
    blocker.listen(1)
    port = blocker.getsockname()[1]
    try:
        c = cfg(output_dir=str(tmp_path), exporters=["file", "prometheus"], prometheus_port=port)
        with caplog.at_level(logging.ERROR, logger="spectrace"):
            tel = telemetry(c)
        assert tel.prometheus_port is None
        assert spectrace_errors(caplog, f"cannot listen on 127.0.0.1:{port}")
        rec = Recorder(c, tel)
        rec.finding(fc_finding())
        flush_metrics(tel)
        assert last_metrics(tel.directory)[signals.EAGLE3_FC_BYPASS.name][0]["value"] == 1
        with open(os.path.join(tel.directory, EVENTS_FILE)) as fh:
            assert json.loads(fh.readline())["code"] == signals.FC_BYPASS
    finally:
        blocker.close()


def scrape(port: int) -> str:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as r:
        return r.read().decode()


def fc_bypass_scraped(port: int) -> float:
    m = re.search(r"^spectrace_eagle3_fc_bypass_total(?:\{[^}]*\})? (\S+)$", scrape(port),
                  re.M)
    return float(m.group(1)) if m else -1.0


# -- output folder not writable / disk full ----------------------------------------------
def _mount_tmpfs(path, options: str) -> bool:
    os.makedirs(path, exist_ok=True)
    if os.geteuid() != 0:
        return False
    return subprocess.run(["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(path)],
                          capture_output=True).returncode == 0


def _umount(path) -> None:
    subprocess.run(["umount", "-l", str(path)], capture_output=True)


@pytest.fixture
def readonly_dir(tmp_path):
    d = tmp_path / "ro"
    if _mount_tmpfs(d, "ro,size=1m"):
        yield d
        _umount(d)
    elif os.geteuid() != 0:
        d.chmod(0o500)
        yield d
        d.chmod(0o700)
    else:
        pytest.skip("root ignores permission bits and cannot mount a read-only tmpfs here")


def test_unwritable_output_dir_one_error_rest_works(readonly_dir, caplog, telemetry):
    c = cfg(output_dir=str(readonly_dir / "data"), exporters=["file", "prometheus"],
            prometheus_port=free_port())
    with caplog.at_level(logging.ERROR, logger="spectrace"):
        tel = telemetry(c)
        rec = Recorder(c, tel)
        for i in range(30):
            rec.finding(fc_finding(i))
    assert tel.directory is None and tel.events is None           # file export off
    errors = [r for r in caplog.records if r.levelno >= logging.ERROR]
    assert len(errors) == 1 and "SPECTRACE_OUTPUT_DIR" in errors[0].getMessage()
    assert fc_bypass_scraped(tel.prometheus_port) == 30


@pytest.fixture(params=["tmpfs", "dev-full"])
def full_disk(request, tmp_path):
    """(output_dir, fill) where fill() makes the disk full: a real 512 KiB tmpfs filled to
    the last byte, or (without mount rights) the process's files pre-linked to /dev/full."""
    out = tmp_path / "full"
    if request.param == "tmpfs":
        if not _mount_tmpfs(out, "size=512k"):
            pytest.skip("cannot mount a tmpfs (needs root)")

        def fill():
            with open(out / "filler", "wb", buffering=0) as fh:
                for size in (65536, 4096, 1):   # to the last byte
                    try:
                        while True:
                            fh.write(b"\0" * size)
                    except OSError:
                        pass
        yield str(out), fill
        _umount(out)
    else:
        def fill():
            d = process_dir(str(out), "sglang")
            for name in (EVENTS_FILE, METRICS_FILE, "spans.jsonl"):
                os.remove(os.path.join(d, name)) if os.path.exists(os.path.join(d, name)) \
                    else None
                os.symlink("/dev/full", os.path.join(d, name))
        yield str(out), fill


def test_disk_full_one_error_file_export_off_rest_works(full_disk, caplog, telemetry):
    out, fill = full_disk
    c = cfg(output_dir=out, exporters=["file", "prometheus"], prometheus_port=free_port(),
            metric_interval_s=2.0)
    tel = telemetry(c)
    rec = Recorder(c, tel)
    assert tel.directory is not None
    for w in (tel.events,):          # close so the next write reopens through the full disk
        w.close()
    fill()
    with caplog.at_level(logging.ERROR, logger="spectrace"):
        for i in range(10):
            rec.finding(fc_finding(i))
        flush_metrics(tel)
        for p in tel.span_processors:
            p.force_flush()
    errors = [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR]
    assert len(errors) == 1, errors                          # one clear error
    assert "No space left on device" in errors[0] and "file export is off" in errors[0]
    assert tel.sink.failed
    assert DROPPED.counts["events"] == 10                    # counted, not written
    assert fc_bypass_scraped(tel.prometheus_port) == 10


# -- SIGKILLed scheduler ------------------------------------------------------------------
FAST = {"SPECTRACE_METRIC_INTERVAL": "0.5", "SPECTRACE_STEP_SAMPLE_RATIO": "1"}


def complete_snapshots(path: str) -> list[dict]:
    """Parsed independently of spectrace: every newline-terminated JSON line."""
    with open(path, "rb") as fh:
        data = fh.read()
    return [json.loads(line) for line in data.split(b"\n")[:-1] if line.strip()]


@pytest.mark.sglang
def test_sigkilled_scheduler_leaves_readable_files(tiny_models, sglang_server):
    from conftest import run_report
    run = sglang_server(tiny_models("partial"), env=FAST)
    responses = [run.server.generate(p, 24) for p in ([3, 7, 11], [5, 9, 2])]
    verify = sum(r["meta_info"]["spec_verify_ct"] for r in responses)
    proc = settle(run, verify)  # once the totals are exported
    assert proc["drafts"] == verify
    # a long request in flight, then SIGKILL the scheduler mid-generation
    worker = threading.Thread(target=lambda: _ignore(run.server.generate, [4, 6, 8], 400, 60))
    worker.start()
    # in flight: its first steps exported (or, on a hang, after a bound only a hang reaches)
    deadline = time.time() + 120
    while run.scheduler()["drafts"] <= verify and time.time() < deadline:
        time.sleep(0.5)
    os.kill(int(proc["pid"]), signal.SIGKILL)
    run.server.stop()
    worker.join(timeout=90)
    folder = os.path.join(run.data_dir, proc["process"])
    metrics_path = os.path.join(folder, METRICS_FILE)
    with open(metrics_path, "ab") as fh:          # as if the kill had torn the last write
        fh.write(b'{"time": 1, "metrics": {"spectrace.spec.drafts": [{"attri')
    after = run_report(run.data_dir)             # exit 0 asserted inside
    killed = next(p for p in after["processes"] if p["process"] == proc["process"])
    last = complete_snapshots(metrics_path)[-1]["metrics"]
    total = sum(p["value"] for p in last[signals.SPEC_DRAFTS.name])
    accepted = sum(p["value"] for p in last[signals.SPEC_ACCEPTED_TOKENS.name])
    assert killed["drafts"] == total >= verify
    assert killed["accepted_tokens"] == accepted
    assert killed["skipped_lines"] >= 1
    assert killed["mean_acceptance_length"] == 2.0


def _ignore(fn, *args):
    try:
        fn(*args)
    except Exception:  # noqa: BLE001 - the server was killed under it
        pass


def test_torn_last_line_unit(tmp_path):
    from spectrace.report import summarize_process
    d = tmp_path / "p"
    d.mkdir()
    good = {"metrics": {signals.SPEC_DRAFTS.name: [{"attributes": {}, "value": 8}]}}
    (d / METRICS_FILE).write_text(json.dumps(good) + "\n" + json.dumps(good)[:20])
    assert summarize_process(str(d)).figures.drafts == 8


# -- SGLang missing / a release without a wrap point ---------------------------------------
def _run(code: str, **env) -> subprocess.CompletedProcess:
    e = cpu_env({"PYTHONPATH": os.pathsep.join((ROOT, STANDIN))})
    e = {k: v for k, v in e.items() if not k.startswith("SPECTRACE_")}
    e.update(env)
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=300, cwd=ROOT, env=e)


def test_sglang_missing_instrument_still_works():
    code = ("import sys; sys.modules['sglang'] = None\n"
            "import spectrace; cfg = spectrace.instrument(exporters=['file'])\n"
            "print('ok', spectrace.is_instrumented())\n"
            "try:\n    import sglang.srt.models.llama_eagle3\nexcept ImportError:\n"
            "    print('import error as usual')\n"
            "spectrace.uninstrument()")
    out = _run(code)
    assert out.returncode == 0, out.stderr
    assert "ok True" in out.stdout and "import error as usual" in out.stdout


@pytest.mark.sglang
def test_release_lacking_a_wrap_point_installs_the_rest():
    """SGLang's real module with `load_weights` removed, as in a release without it."""
    code = ("import logging; logging.basicConfig()\n"
            "import sglang.srt.models.llama_eagle3 as m\n"
            "del m.LlamaForCausalLMEagle3.load_weights\n"
            "import spectrace; spectrace.instrument()\n"
            "from spectrace.patching import is_installed\n"
            "print('forward', type(m.LlamaModel.__dict__['forward']).__name__,\n"
            "      is_installed(m.LlamaModel.__dict__['forward']))\n"
            "spectrace.uninstrument()\n"
            "print('restored', type(m.LlamaModel.__dict__['forward']).__name__,\n"
            "      is_installed(m.LlamaModel.__dict__['forward']))")
    out = _run(code)
    assert out.returncode == 0, out.stderr[-3000:]
    assert "forward function True" in out.stdout and "restored function False" in out.stdout
    assert ("has no sglang.srt.models.llama_eagle3.LlamaForCausalLMEagle3.load_weights; "
            "that hook is not installed, the others are") in out.stderr


def test_missing_classes_and_unwrappable_points_unit():
    from spectrace.adapters import sglang_eagle3
    p = Patcher()
    p.apply(types.ModuleType("sglang.srt.models.llama_eagle3"), sglang_eagle3.LLAMA_EAGLE3)
    assert p.missing == ["sglang.srt.models.llama_eagle3.LlamaModel",
                         "sglang.srt.models.llama_eagle3.LlamaForCausalLMEagle3"]
    assert p.wrap(int, "__add__", guarded_wrapper("x"), "builtins.int") is False
    assert "builtins.int.__add__" in p.missing and not p.patches


# -- several instrumented processes at once -------------------------------------------------
WRITER_SCRIPT = os.path.join(ROOT, "tests", "programs", "several_writers.py")


def test_several_processes_distinct_files_ports_and_whole_lines(tmp_path):
    base = free_port()
    while base > 65000:
        base = free_port()
    shared = tmp_path / "shared.jsonl"
    procs = []
    results = []
    try:
        for r in range(4):
            procs.append(subprocess.Popen(
                [sys.executable, WRITER_SCRIPT, str(tmp_path / "data"), str(r),
                 str(shared), str(base)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                text=True, cwd=ROOT, env={**os.environ, "PYTHONPATH": ROOT}))
        for p in procs:
            out, err = p.communicate(timeout=300)
            assert p.returncode == 0, err
            results.append(json.loads(out.strip().splitlines()[-1]))
    finally:
        for p in procs:  # none left running when one of them fails
            if p.poll() is None:
                p.kill()
            p.wait()
    assert len({r["dir"] for r in results}) == 4                      # distinct folders
    assert sorted(r["port"] for r in results) == [base + i for i in range(4)]  # base + rank
    for r in results:
        with open(os.path.join(r["dir"], EVENTS_FILE), "rb") as fh:
            rows = [json.loads(line) for line in fh]
        assert len(rows) == 400 and len({x["rank"] for x in rows}) == 1
    with open(shared, "rb") as fh:           # four processes appending to one file
        rows = [json.loads(line) for line in fh]
    assert len(rows) == 1600
    assert sorted((x["rank"], x["i"]) for x in rows) == [(r, i) for r in range(4)
                                                         for i in range(400)]


def test_threads_sharing_one_writer_write_whole_lines(tmp_path):
    w = JsonlWriter(str(tmp_path / "t.jsonl"))
    threads = [threading.Thread(target=lambda t=t: [w.write({"t": t, "i": i, "p": "z" * i})
                                                    for i in range(300)]) for t in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    w.close()
    with open(tmp_path / "t.jsonl") as fh:
        assert len([json.loads(line) for line in fh]) == 2400
