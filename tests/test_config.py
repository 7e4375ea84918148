"""Every setting in `spectrace.config.SETTINGS` (each `SPECTRACE_*` variable, and
OTEL_SERVICE_NAME), plus the OTLP protocol variables: garbage values give a clear error that
names the variable and what is allowed. `instrument()` raises `ValueError`; auto mode
(`spectrace.autostart.start()`) logs that error and leaves the process uninstrumented.
"""
from __future__ import annotations

import logging
import os
import subprocess
import sys

import pytest

import spectrace
from spectrace import autostart, config
from spectrace.config import SETTINGS, ConfigError

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# setting -> (garbage values, words the error must contain about what is allowed)
GARBAGE = {
    "enabled": (["maybe", "2", "enable", "１"], "expected 1 or 0"),
    "exporters": (["bogus", "file,bogus", ",", "  ", "jaeger", "file;otlp"],
                  "file, otlp, prometheus, console"),
    "output_dir": (["", "   ", "a\x00b", "bad\nname"], "directory path"),
    "prometheus_host": (["", "no host", "http://x/", "a..b", "-bad-", "999", "host!"],
                        "host name or IP address"),
    "prometheus_port": (["", "abc", "0", "-1", "65536", "80.5", "1e3", "9" * 5000],
                        "TCP port number 1-65535"),
    "strict": (["strict", "yes please", "-1"], "expected 1 or 0"),
    "step_sample_ratio": (["", "abc", "-0.1", "1.5", "nan", "inf", "10%"], "0 to 1"),
    "request_sample_ratio": (["", "abc", "-0.1", "1.5", "nan", "inf", "10%"], "0 to 1"),
    "request_label": (["tenant", "x-smg-routing-key", "routing key", "lora_id"],
                      "expected a request field"),
    "request_label_cap": (["", "x", "0", "1001", "2.5"], "whole number from 1 to 1000"),
    "agreement_every": (["", "x", "-1", "1.5", "every"], "whole number >= 0"),
    "step_cost_every": (["", "x", "-1", "2.5", "often"], "whole number >= 0"),
    "finite_every": (["", "x", "-1", "2.5", "often"], "whole number >= 0"),
    "expected_accept_length": (["", "x", "0.5", "65", "nan", "fast"],
                               "mean accept length from 1 to 64"),
    "metric_interval_s": (["", "x", "0", "0.05", "5", "nan", "-inf"], "between 0.1 and 2"),
    "service_name": (["bad\x00name", "tab\tname", "\x1b[31mred"], "non-empty name"),
    "token_detail": (["detail", "2"], "expected 1 or 0"),
}


def env_garbage(name: str) -> str:
    """The first garbage value of `name` that an environment variable can hold (no NUL)."""
    return next(v for v in GARBAGE[name][0] if "\x00" not in v)


@pytest.fixture(autouse=True)
def _uninstrumented():
    yield
    spectrace.uninstrument()


def test_every_setting_has_garbage_cases():
    assert set(GARBAGE) == set(SETTINGS)


@pytest.mark.parametrize("name,raw", [(n, v) for n, (vals, _) in GARBAGE.items() for v in vals])
def test_from_env_rejects_garbage_naming_the_variable(name, raw):
    var = SETTINGS[name][0]
    with pytest.raises(ConfigError) as ei:
        config.from_env({var: raw})
    msg = str(ei.value)
    assert msg.startswith(var + "=")
    assert GARBAGE[name][1] in msg
    assert isinstance(ei.value, ValueError)
    assert len(msg) < 400  # a huge value is cut short in the message


@pytest.mark.parametrize("name", sorted(GARBAGE))
def test_instrument_raises_value_error_naming_the_setting(name, monkeypatch):
    var = SETTINGS[name][0]
    monkeypatch.setenv(var, env_garbage(name))
    with pytest.raises(ValueError, match=var):
        spectrace.instrument()
    assert not spectrace.is_instrumented()


@pytest.mark.parametrize("name", sorted(GARBAGE))
def test_instrument_keyword_garbage_names_keyword_and_variable(name):
    var = SETTINGS[name][0]
    with pytest.raises(ValueError) as ei:
        spectrace.instrument(**{name: GARBAGE[name][0][0]})
    assert f"{name} (or {var})" in str(ei.value)
    assert not spectrace.is_instrumented()


@pytest.mark.parametrize("name,value", [
    ("prometheus_port", True), ("prometheus_port", 80.5), ("output_dir", True),
    ("output_dir", 3.5j), ("exporters", [1, 2]), ("enabled", 2), ("step_sample_ratio", [0.5]),
    ("agreement_every", 1.5), ("metric_interval_s", True), ("service_name", b"bytes"),
])
def test_keyword_arguments_of_the_wrong_type(name, value):
    with pytest.raises(ValueError, match=name):
        config.from_env({}, **{name: value})


def test_unknown_keyword_is_rejected_with_the_known_ones():
    with pytest.raises(ValueError, match="unknown spectrace setting 'exporter'.*exporters"):
        spectrace.instrument(exporter="otlp")


@pytest.mark.parametrize("var", config.OTLP_PROTOCOL_VARS)
@pytest.mark.parametrize("raw", ["http/json", "udp", "grpcs", "http"])
def test_otlp_protocol_garbage_is_a_config_error_when_otlp_is_on(var, raw):
    env = {"SPECTRACE_EXPORTERS": "file,otlp", var: raw}
    with pytest.raises(ConfigError) as ei:
        config.from_env(env)
    assert str(ei.value).startswith(var + "=")
    assert "grpc and http/protobuf" in str(ei.value)


def test_otlp_protocol_is_ignored_without_the_otlp_exporter():
    cfg = config.from_env({"SPECTRACE_EXPORTERS": "file", "OTEL_EXPORTER_OTLP_PROTOCOL": "x"})
    assert cfg.exporters == ("file",)


@pytest.mark.parametrize("raw, protocol", [
    ("grpc", "grpc"), ("http/protobuf", "http/protobuf"), (" GRPC ", "grpc"), ("", "grpc")])
def test_otlp_protocol_valid_values(raw, protocol):
    """A valid protocol passes the check and is the one the exporters use (empty: grpc,
    as in OpenTelemetry), for traces and metrics alike."""
    env = {"SPECTRACE_EXPORTERS": "otlp", "OTEL_EXPORTER_OTLP_PROTOCOL": raw}
    assert config.from_env(env).exporters == ("otlp",)
    assert config.otlp_protocol("TRACES", env) == protocol
    assert config.otlp_protocol("METRICS", env) == protocol


def test_otlp_protocol_per_signal_wins():
    env = {"OTEL_EXPORTER_OTLP_PROTOCOL": "grpc",
           "OTEL_EXPORTER_OTLP_METRICS_PROTOCOL": "http/protobuf"}
    assert config.otlp_protocol("METRICS", env) == "http/protobuf"
    assert config.otlp_protocol("TRACES", env) == "grpc"


def test_valid_values_parse():
    cfg = config.from_env({
        "SPECTRACE_ENABLED": "on", "SPECTRACE_EXPORTERS": " File, otlp,file ",
        "SPECTRACE_OUTPUT_DIR": "/tmp/x", "SPECTRACE_PROMETHEUS_HOST": "::1",
        "SPECTRACE_PROMETHEUS_PORT": " 9100 ", "SPECTRACE_STRICT": "no",
        "SPECTRACE_STEP_SAMPLE_RATIO": "0.5", "SPECTRACE_AGREEMENT_EVERY": "0",
        "SPECTRACE_METRIC_INTERVAL": "0.1", "OTEL_SERVICE_NAME": " svc ",
        "SPECTRACE_TOKEN_DETAIL": "0"})
    assert cfg.exporters == ("file", "otlp")
    assert cfg.prometheus_port == 9100 and cfg.prometheus_host == "::1"
    assert cfg.service_name == "svc" and cfg.metric_interval_s == 0.1
    for host in ("localhost", "0.0.0.0", "my-host.example.com", "[::1]", "10.0.0.1"):
        assert config.from_env({"SPECTRACE_PROMETHEUS_HOST": host}).prometheus_host == host


def test_defaults_are_safe():
    cfg = config.from_env({})
    assert cfg.prometheus_host == "127.0.0.1"   # loopback unless told otherwise
    assert cfg.token_detail is False
    assert cfg.exporters == ("file",)


def test_empty_otel_service_name_counts_as_unset():
    """Unset: each process names itself after its runtime (`sglang`, `vllm`)."""
    from spectrace.export.resource import service_name
    cfg = config.from_env({"OTEL_SERVICE_NAME": ""})
    assert cfg.service_name is None and "OTEL_SERVICE_NAME" not in config.to_env(cfg)
    assert service_name(cfg, {}) == "sglang"
    assert service_name(cfg, {"runtime": "vllm"}) == "vllm"
    assert service_name(config.from_env({"OTEL_SERVICE_NAME": "svc"}), {"runtime": "vllm"}) == "svc"


# -- auto mode ------------------------------------------------------------------------
@pytest.mark.parametrize("name", sorted(GARBAGE))
def test_autostart_logs_the_variable_and_stays_uninstrumented(name, monkeypatch, caplog):
    var = SETTINGS[name][0]
    monkeypatch.setenv("SPECTRACE_ENABLED", "1")
    monkeypatch.setenv(var, env_garbage(name))
    with caplog.at_level(logging.ERROR, logger="spectrace"):
        assert autostart.start() is False
    assert not spectrace.is_instrumented()
    errors = [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR]
    assert any(var in m and "auto-instrumentation is off" in m for m in errors), errors


def test_autostart_otlp_protocol_garbage_is_logged(monkeypatch, caplog):
    monkeypatch.setenv("SPECTRACE_ENABLED", "1")
    monkeypatch.setenv("SPECTRACE_EXPORTERS", "otlp")
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "http/json")
    with caplog.at_level(logging.ERROR, logger="spectrace"):
        assert autostart.start() is False
    assert "OTEL_EXPORTER_OTLP_PROTOCOL" in caplog.text


def _clean_env(**extra) -> dict:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("SPECTRACE_", "OTEL_"))}
    # the sgl_kernel CPU stand-in (harness/sgl_kernel_standin, the one non-SGLang piece)
    # lets SGLang's model modules import on a machine without GPU kernels
    from harness.server import STANDIN
    env["PYTHONPATH"] = os.pathsep.join((ROOT, STANDIN))
    env.update(extra)
    return env


def test_autostart_in_a_real_process_logs_and_runs_uninstrumented():
    """A fresh interpreter, as SGLang's spawned scheduler would be: the error names the
    variable, the process carries on (exit 0) and nothing is wrapped."""
    code = ("import spectrace.autostart as a, spectrace; a.start(); "
            "print('instrumented', spectrace.is_instrumented())")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=60, env=_clean_env(SPECTRACE_ENABLED="1",
                                                    SPECTRACE_EXPORTERS="bogus"))
    assert out.returncode == 0, out.stderr
    assert "instrumented False" in out.stdout
    assert "SPECTRACE_EXPORTERS" in out.stderr and "'bogus'" in out.stderr
    assert "file, otlp, prometheus, console" in out.stderr


@pytest.mark.sglang
@pytest.mark.parametrize("port,wrapped", [("http", False), ("9464", True)])
def test_autostart_with_sglang_import(tmp_path, port, wrapped):
    """The real door: SGLang's draft-model module imported in auto mode. With a bad setting
    the error is logged and LlamaModel.forward stays SGLang's own function; the good value
    (control) gets it wrapped."""
    code = ("import spectrace.autostart as a; a.on_interpreter_start(); "
            "import sglang.srt.models.llama_eagle3 as m; "
            "from spectrace.patching import is_installed; "
            "print('wrapped', is_installed(m.LlamaModel.__dict__['forward']))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=300, cwd=tmp_path, env=_clean_env(
                             SPECTRACE_ENABLED="1", SPECTRACE_PROMETHEUS_PORT=port,
                             SGLANG_USE_CPU_ENGINE="1", TORCHDYNAMO_DISABLE="1"))
    assert out.returncode == 0, out.stderr[-3000:]
    assert f"wrapped {wrapped}" in out.stdout
    assert ("SPECTRACE_PROMETHEUS_PORT='http'" in out.stderr) is (not wrapped)
    assert not (tmp_path / "spectrace-data").exists()  # no worker ran: nothing written
