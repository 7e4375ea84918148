"""Security guarantees (docs/reliability.md): the metrics endpoint binds 127.0.0.1 unless
told otherwise; no prompt text or token ids leave the process by default (checked on the
files of a real SGLang run); files and folders spectrace creates are owner-only; nothing
spectrace reads is unpickled or executed."""
from __future__ import annotations

import ast
import json
import os
import pickle
import subprocess
import sys

import pytest

from spectrace import config as config_mod
from spectrace import signals
from spectrace.file_layout import EVENTS_FILE, METRICS_FILE, RESOURCE_FILE, SPANS_FILE
from spectrace.recorder import Recorder
from spectrace.export.providers import setup

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
from harness.server import free_port  # noqa: E402
from tests.e2e import settle  # noqa: E402


def listening_addresses(port: int) -> set[str]:
    """Local addresses in LISTEN state on `port`, from /proc/net/tcp{,6}."""
    out = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            rows = open(table).read().splitlines()[1:]
        except OSError:
            continue
        for row in rows:
            local, state = row.split()[1], row.split()[3]
            addr, p = local.split(":")
            if int(p, 16) == port and state == "0A":
                out.add(addr)
    return out


def test_metrics_endpoint_binds_loopback_by_default(tmp_path):
    cfg = config_mod.from_env({}, output_dir=str(tmp_path), exporters=["prometheus"],
                              prometheus_port=free_port())
    assert cfg.prometheus_host == "127.0.0.1"
    tel = setup(cfg, {}, "scheduler")
    try:
        assert tel.prometheus_port == cfg.prometheus_port
        assert listening_addresses(tel.prometheus_port) == {"0100007F"}  # 127.0.0.1 only
    finally:
        tel.shutdown()


def test_all_interfaces_only_when_told(tmp_path):
    cfg = config_mod.from_env({"SPECTRACE_PROMETHEUS_HOST": "0.0.0.0"}, output_dir=str(tmp_path),
                              exporters=["prometheus"], prometheus_port=free_port())
    tel = setup(cfg, {}, "scheduler")
    try:
        assert listening_addresses(tel.prometheus_port) == {"00000000"}
    finally:
        tel.shutdown()


def test_files_and_folders_are_owner_only(tmp_path):
    old = os.umask(0o022)
    try:
        out = tmp_path / "a" / "b" / "data"          # parents created by spectrace too
        cfg = config_mod.from_env({}, output_dir=str(out), metric_interval_s=0.1,
                                  step_sample_ratio=1.0)
        tel = setup(cfg, {}, "scheduler")
        rec = Recorder(cfg, tel)
        rec.finding(__import__("spectrace.findings", fromlist=["Finding"]).Finding(
            signals.FC_BYPASS, "error", "m", {}))
        for p in tel.owned:
            getattr(p, "force_flush", lambda: None)()
        tel.shutdown()
    finally:
        os.umask(old)
    for d in (tmp_path / "a", tmp_path / "a" / "b", out, tel.directory):
        assert os.stat(d).st_mode & 0o777 == 0o700, d
    names = sorted(os.listdir(tel.directory))
    assert names == sorted([RESOURCE_FILE, METRICS_FILE, SPANS_FILE, EVENTS_FILE])
    for name in names:
        assert os.stat(os.path.join(tel.directory, name)).st_mode & 0o777 == 0o600, name


def test_service_name_cannot_escape_the_output_folder(tmp_path):
    cfg = config_mod.from_env({"OTEL_SERVICE_NAME": "../../escape"}, output_dir=str(tmp_path))
    tel = setup(cfg, {}, "scheduler")
    tel.shutdown()
    assert os.path.dirname(tel.directory) == str(tmp_path)
    assert os.listdir(tmp_path) == [os.path.basename(tel.directory)]


# -- nothing read is unpickled or executed ------------------------------------------------
DANGEROUS = {"pickle", "cPickle", "dill", "marshal", "shelve", "joblib"}
DANGEROUS_CALLS = {"eval", "exec", "load", "loads", "compile", "__import__"}


def _restricted_torch_load(call: ast.Call) -> bool:
    """`torch.load(..., weights_only=True)`: PyTorch's restricted unpickler, which builds
    tensors and plain containers only (the doctor reads pickled `.bin` weights so)."""
    return any(k.arg == "weights_only" and isinstance(k.value, ast.Constant)
               and k.value.value is True for k in call.keywords)


def test_no_unpickling_or_eval_in_spectrace_sources():
    """Static check of every spectrace module: no pickle-family import, no eval/exec, no
    yaml.load / numpy.load, and torch.load only with weights_only=True (the doctor reads
    safetensors, JSON and, through PyTorch's restricted loader, `.bin` state dicts)."""
    bad = []
    for dirpath, _d, files in os.walk(os.path.join(ROOT, "spectrace")):
        for f in files:
            if not f.endswith(".py"):
                continue
            path = os.path.join(dirpath, f)
            tree = ast.parse(open(path).read(), path)
            for node in ast.walk(tree):
                if isinstance(node, (ast.Import, ast.ImportFrom)):
                    mods = [a.name for a in node.names] + [getattr(node, "module", None) or ""]
                    if any(m.split(".")[0] in DANGEROUS for m in mods):
                        bad.append(f"{path}:{node.lineno} imports {mods}")
                elif isinstance(node, ast.Call):
                    fn = node.func
                    if isinstance(fn, ast.Name) and fn.id in ("eval", "exec"):
                        bad.append(f"{path}:{node.lineno} calls {fn.id}")
                    if isinstance(fn, ast.Attribute) and fn.attr in ("load", "loads") and \
                            isinstance(fn.value, ast.Name) and fn.value.id in (
                                "torch", "yaml", "np", "numpy", "pickle") and not (
                                fn.value.id == "torch" and _restricted_torch_load(node)):
                        bad.append(f"{path}:{node.lineno} calls {fn.value.id}.{fn.attr}")
    assert not bad, bad


def test_report_never_unpickles_what_it_reads(tmp_path):
    marker = tmp_path / "pwned"

    class Payload:
        def __reduce__(self):
            return (os.system, (f"touch {marker}",))

    d = tmp_path / "data" / "sglang-h-1"
    d.mkdir(parents=True)
    blob = pickle.dumps(Payload())
    for name in (METRICS_FILE, EVENTS_FILE, SPANS_FILE, RESOURCE_FILE):
        (d / name).write_bytes(blob + b"\n" + blob)
    out = subprocess.run([sys.executable, "-m", "spectrace.cli", "report", str(tmp_path / "data"),
                          "--json"], capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert out.returncode == 0, out.stderr
    assert not marker.exists()
    assert json.loads(out.stdout)["processes"][0]["drafts"] == 0


# -- no prompt text or token ids in the telemetry of a real run -----------------------------
CANARY = "zebra quartz canary"


def _scalar(v) -> bool:
    return isinstance(v, (str, int, float, bool)) or v is None


@pytest.mark.sglang
def test_real_run_telemetry_holds_no_prompt_text_or_token_ids(tiny_models, sglang_server):
    run = sglang_server(tiny_models("partial"), env={
        "SPECTRACE_METRIC_INTERVAL": "0.5", "SPECTRACE_STEP_SAMPLE_RATIO": "1",
        "SPECTRACE_AGREEMENT_EVERY": "1"})
    body = json.dumps({"text": CANARY, "sampling_params": {"max_new_tokens": 16,
                                                           "temperature": 0}}).encode()
    import urllib.request
    req = urllib.request.Request(run.server.url + "/generate", data=body,
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=120) as r:
        answer = json.loads(r.read())
    ids = run.server.generate([271, 313, 377, 419], 16)
    verify = answer["meta_info"]["spec_verify_ct"] + ids["meta_info"]["spec_verify_ct"]
    settle(run, verify)  # once the totals are exported
    files = [os.path.join(dp, f) for dp, _d, fs in os.walk(run.data_dir) for f in fs]
    assert any(f.endswith(SPANS_FILE) for f in files)
    blob = b"".join(open(f, "rb").read() for f in files)
    assert CANARY.encode() not in blob
    out_text = answer["text"].strip()
    if len(out_text) >= 8:
        assert out_text.encode() not in blob
    metric_attrs = {a for m in signals.ALL_METRICS for a in m.attributes} | {"kind"}
    n_spans = 0
    for f in files:
        if f.endswith(SPANS_FILE):
            for line in open(f):
                span = json.loads(line)
                n_spans += 1
                for k, v in span["attributes"].items():
                    assert k.startswith("spectrace."), k
                    assert _scalar(v), (k, v)        # counts and shapes, never id lists
                for ev in span["events"]:
                    assert all(_scalar(v) for v in ev["attributes"].values()), ev
        elif f.endswith(METRICS_FILE):
            for line in open(f):
                for name, points in json.loads(line)["metrics"].items():
                    for p in points:
                        assert set(p["attributes"]) <= metric_attrs, (name, p)
                        assert all(_scalar(v) for v in p["attributes"].values())
    assert n_spans > 0
