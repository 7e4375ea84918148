"""Shared fixtures: tiny models (made by the project's generator) and real SGLang CPU
servers. The servers run SGLang 0.5.23's real code; the `*_cpu` kernels come from the
pure-torch stand-in in harness/sgl_kernel_standin (the one non-SGLang piece)."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from harness.server import start_server  # noqa: E402
from harness.tiny_models import make_tiny_models  # noqa: E402


@pytest.fixture(scope="session")
def models_root(tmp_path_factory):
    return tmp_path_factory.mktemp("tiny-models")


@pytest.fixture(scope="session")
def tiny_models(models_root):
    """tiny_models(mode, layout=None, pair="llama") -> folder with target/ and draft/
    (cached; see harness/tiny_models.py for the pairs and modes)."""
    made: dict = {}

    def get(mode: str, layout: str | None = None, pair: str = "llama") -> str:
        layout = layout or ("layers" if pair == "dsv3-mla" else "midlayer")
        key = (mode, layout, pair)
        if key not in made:
            name = f"{mode}-{layout}" if pair == "llama" else f"{pair}-{mode}-{layout}"
            out = os.path.join(models_root, name)
            make_tiny_models(out, mode, layout, pair)
            made[key] = out
        return made[key]
    return get


def run_report(directory: str) -> dict:
    """`spectrace report --json DIR`, run as a user would."""
    out = subprocess.run([sys.executable, "-m", "spectrace.cli", "report", str(directory),
                          "--json"], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


class ServerRun:
    """A started server plus where its telemetry goes; keeps the log if a test fails."""

    def __init__(self, server, data_dir, log_path):
        self.server = server
        self.data_dir = data_dir
        self.log_path = log_path

    def report(self) -> dict:
        return run_report(self.data_dir)

    def scheduler(self) -> dict:
        procs = [p for p in self.report()["processes"] if p["drafts"] or p["hidden_state_passes"]]
        assert len(procs) == 1, f"expected one scheduler process, got {procs}"
        return procs[0]


@pytest.fixture(scope="module")
def sglang_server(tmp_path_factory, request):
    """sglang_server(models_dir, env=None, **start_kwargs) -> ServerRun. At most one server
    of a test module runs at a time (two cores): starting one stops the one before, whose
    files stay readable; so a module orders its tests by server. The last one stops at
    teardown."""
    runs = []

    def start(models: str, env: dict | None = None, **kwargs) -> ServerRun:
        for run in runs:
            run.server.stop()
        d = tmp_path_factory.mktemp("run")
        data, log = d / "spectrace-data", d / "server.log"
        env_extra = {"SPECTRACE_ENABLED": "1", "SPECTRACE_OUTPUT_DIR": str(data)}
        env_extra.update(env or {})
        server = start_server(models, str(log), env_extra=env_extra, **kwargs)
        run = ServerRun(server, data, log)
        runs.append(run)
        return run

    yield start
    for run in runs:
        run.server.stop()
        print(f"server log kept at {run.log_path}")
