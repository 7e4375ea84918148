"""The doors into a process: the `spectrace-run` launcher, SGLang's plugin entry point,
the OpenTelemetry instrumentor entry point, and the installed start-up hook."""
from __future__ import annotations

import os
import subprocess
import sys
from importlib.metadata import entry_points

import pytest

import spectrace
from spectrace.launcher import build_env


def program(name: str) -> str:
    """A child-process script in tests/programs/."""
    return os.path.join(os.path.dirname(os.path.abspath(__file__)), "programs", name)


def _clean_env() -> dict:
    return {k: v for k, v in os.environ.items() if not k.startswith("SPECTRACE_")}


def test_launcher_turns_spectrace_on_in_the_child():
    exe = os.path.join(os.path.dirname(sys.executable), "spectrace-run")
    code = ("import os, spectrace; print(os.environ['SPECTRACE_ENABLED'], "
            "os.environ['SPECTRACE_EXPORTERS'], spectrace.is_instrumented())")
    out = subprocess.run([exe, "--exporters", "file,console", "--", sys.executable, "-c", code],
                         capture_output=True, text=True, env=_clean_env(), timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["1", "file,console", "True"]


def test_launcher_rejects_bad_option_naming_it():
    exe = os.path.join(os.path.dirname(sys.executable), "spectrace-run")
    out = subprocess.run([exe, "--exporters", "smoke-signals", "--", "true"],
                         capture_output=True, text=True, env=_clean_env(), timeout=60)
    assert out.returncode == 2
    assert "exporters" in out.stderr and "smoke-signals" in out.stderr


def test_build_env_keeps_unrelated_variables():
    env = build_env({"exporters": "prometheus"}, {"PATH": "/bin", "SPECTRACE_STRICT": "1"})
    assert env["PATH"] == "/bin" and env["SPECTRACE_STRICT"] == "1"
    assert env["SPECTRACE_EXPORTERS"] == "prometheus" and env["SPECTRACE_ENABLED"] == "1"


def _entry_point(group: str, name: str):
    [ep] = [e for e in entry_points(group=group) if e.name == name]
    return ep


def test_sglang_plugin_entry_point_instruments(monkeypatch):
    ep = _entry_point("sglang.srt.plugins", "spectrace")
    monkeypatch.setenv("SPECTRACE_ENABLED", "1")
    try:
        ep.load()()
        assert spectrace.is_instrumented()
    finally:
        spectrace.uninstrument()


def test_sglang_plugin_entry_point_respects_disabled(monkeypatch):
    monkeypatch.setenv("SPECTRACE_ENABLED", "0")
    _entry_point("sglang.srt.plugins", "spectrace").load()()
    assert not spectrace.is_instrumented()


def test_sglang_plugin_does_nothing_when_spectrace_enabled_is_unset(monkeypatch):
    """SGLang loads every installed plugin: being installed must not turn spectrace on."""
    monkeypatch.delenv("SPECTRACE_ENABLED", raising=False)
    _entry_point("sglang.srt.plugins", "spectrace").load()()
    assert not spectrace.is_instrumented()


@pytest.mark.sglang
def test_opentelemetry_instrumentor_entry_point():
    cls = _entry_point("opentelemetry_instrumentor", "spectrace").load()
    inst = cls()
    inst.instrument()
    try:
        assert spectrace.is_instrumented()
        assert os.environ["SPECTRACE_ENABLED"] == "1"  # reaches spawned processes
    finally:
        inst.uninstrument()
    assert not spectrace.is_instrumented()


@pytest.mark.parametrize("value,active", [("1", True), ("0", False), ("", False)])
def test_startup_hook_follows_spectrace_enabled(value, active):
    env = _clean_env()
    env["SPECTRACE_ENABLED"] = value
    out = subprocess.run([sys.executable, "-c", "import spectrace; print(spectrace.is_instrumented())"],
                         capture_output=True, text=True, env=env, timeout=60)
    assert out.stdout.strip() == str(active), out.stderr


def test_host_configured_providers_are_used(tmp_path):
    """A host that set global OpenTelemetry providers keeps them: spectrace's spans and
    metrics go there (in-memory readers stand in for the host's exporters)."""
    out = subprocess.run([sys.executable, program("host_providers.py"), str(tmp_path)],
                         capture_output=True, text=True, env=_clean_env(), timeout=60)
    assert out.returncode == 0, out.stderr
    import json
    res = json.loads(out.stdout.strip().splitlines()[-1])
    assert "spectrace.spec.accepted_tokens" in res["metrics"]
    assert "spectrace.eagle3.fc_bypass" in res["metrics"]
    assert res["spans"] == ["spectrace.finding"]


# -- the OpenTelemetry instrumentor, by the contrib convention -------------------------------
OTEL_INSTRUMENT_SCRIPT = program("otel_instrument_child.py")


@pytest.mark.sglang
def test_opentelemetry_instrument_command_uses_the_entry_point(tmp_path):
    """`opentelemetry-instrument python ...` with spectrace installed instruments SGLang's
    real classes through the `opentelemetry_instrumentor` entry point; either API's
    uninstrument() restores them."""
    from harness.server import cpu_env
    exe = os.path.join(os.path.dirname(sys.executable), "opentelemetry-instrument")
    env = cpu_env({k: v for k, v in _clean_env().items()})
    env = {k: v for k, v in env.items() if not k.startswith("SPECTRACE_")}
    env.update(SPECTRACE_OUTPUT_DIR=str(tmp_path), OTEL_TRACES_EXPORTER="none",
               OTEL_METRICS_EXPORTER="none", OTEL_LOGS_EXPORTER="none")
    out = subprocess.run([exe, sys.executable, OTEL_INSTRUMENT_SCRIPT],
                         capture_output=True, text=True, env=env, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    import json
    res = json.loads(out.stdout.strip().splitlines()[-1])
    assert res["active"] and all(res["auto"])
    assert not any(res["after_instrumentor_uninstrument"])
    assert all(res["reinstrumented"])
    assert not any(res["after_mixed"])
    assert not any(res["after_api_uninstrument"]) and not res["still_active"]


@pytest.mark.sglang
def test_instrumentor_declares_the_runtimes_it_instruments():
    import tomllib

    from spectrace import package
    from spectrace.otel_instrumentor import SpectraceInstrumentor
    deps = SpectraceInstrumentor().instrumentation_dependencies()
    from importlib.metadata import version
    assert f"sglang >= 0.5.5" in deps and version("sglang")  # SGLang is installed here
    with open(os.path.join(os.path.dirname(os.path.dirname(__file__)), "pyproject.toml"),
              "rb") as fh:
        extras = tomllib.load(fh)["project"]["optional-dependencies"]
    assert tuple(extras["instruments-any"]) == package._instruments_any
    assert tuple(extras["instruments"]) == package._instruments
    # the installed distribution carries them too (what opentelemetry-instrument reads)
    from importlib.metadata import distribution
    from opentelemetry.instrumentation.dependencies import get_dist_dependency_conflicts
    dist = distribution("spectrace")
    assert any("instruments-any" in r for r in dist.requires or [])
    assert get_dist_dependency_conflicts(dist) is None


PROVIDERS_SCRIPT = program("instrumentor_providers.py")


@pytest.mark.sglang
def test_instrumentor_uses_the_providers_it_is_given(tmp_path):
    out = subprocess.run([sys.executable, PROVIDERS_SCRIPT, str(tmp_path)],
                         capture_output=True, text=True,
                         env=_clean_env(), timeout=120)
    assert out.returncode == 0, out.stderr[-3000:]
    import json
    res = json.loads(out.stdout.strip().splitlines()[-1])
    assert res["accepted"] == [2]
    assert res["spans"] == ["spectrace.finding"]
    assert res["global_untouched"] == "ProxyTracerProvider"
