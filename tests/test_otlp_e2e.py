"""Spans and metrics from a real SGLang CPU run reach real OTLP receivers, over gRPC and
over HTTP/protobuf, configured only by the standard OTEL_EXPORTER_OTLP_* variables.

Why: the OTLP path is how spectrace reaches a Collector; it must work from SGLang's
spawned scheduler process (not just the launcher), with the process's resource attached.
"""
from __future__ import annotations

import os
import time

import pytest

from harness.server import start_server
from spectrace import signals as S
from tests.otlp_receivers import GrpcReceiver, HttpReceiver

pytestmark = pytest.mark.sglang
PROMPT = [3, 7, 11]


class Result:
    def __init__(self, received, launcher_pid: int, log_path: str, paths=None) -> None:
        self.received = received
        self.launcher_pid = launcher_pid
        self.log_path = log_path
        self.paths = paths


@pytest.fixture(scope="module", params=["grpc", "http/protobuf"])
def otlp_run(request, tiny_models, tmp_path_factory) -> Result:
    """One SGLang server per protocol (started, queried and stopped here)."""
    protocol = request.param
    receiver = GrpcReceiver() if protocol == "grpc" else HttpReceiver()
    log = str(tmp_path_factory.mktemp("otlp") / "server.log")
    server = None
    try:
        server = start_server(tiny_models("partial"), log, env_extra={
            "SPECTRACE_ENABLED": "1", "SPECTRACE_EXPORTERS": "otlp",
            "SPECTRACE_STEP_SAMPLE_RATIO": "1", "SPECTRACE_METRIC_INTERVAL": "0.5",
            "OTEL_EXPORTER_OTLP_ENDPOINT": receiver.endpoint,
            "OTEL_EXPORTER_OTLP_PROTOCOL": protocol})
        for _ in range(2):
            server.generate(PROMPT, 16)
        got = receiver.received
        accepted = S.SPEC_ACCEPTED_TOKENS.name
        deadline = time.time() + 120  # returns once both arrived
        while time.time() < deadline:
            if (S.SPAN_STEP in got.span_names()
                    and any(v > 0 for _, v in got.metric_points(accepted))):
                break
            time.sleep(0.25)
        return Result(got, server.proc.pid, log, getattr(receiver, "paths", None))
    finally:
        if server is not None:
            server.stop()
        receiver.stop()


def test_step_spans_arrive(otlp_run):
    names = otlp_run.received.span_names()
    assert S.SPAN_STEP in names, f"spans received: {names} (log {otlp_run.log_path})"
    steps = [s for _, s in otlp_run.received.spans if s.name == S.SPAN_STEP]
    assert all(s.end_time_unix_nano >= s.start_time_unix_nano > 0 for s in steps)


def test_accepted_tokens_arrive(otlp_run):
    points = otlp_run.received.metric_points(S.SPEC_ACCEPTED_TOKENS.name)
    assert points and max(v for _, v in points) > 0, f"log {otlp_run.log_path}"
    # partial models: exactly one accepted draft token per request-step
    drafts = max(v for _, v in otlp_run.received.metric_points(S.SPEC_DRAFTS.name))
    assert max(v for _, v in points) == drafts


def test_resource_names_the_scheduler_process(otlp_run):
    """Telemetry comes from SGLang's spawned scheduler: not this process, not the launcher."""
    pids = {res.get("process.pid") for res, _ in otlp_run.received.spans}
    pids |= {res.get("process.pid") for res, _ in otlp_run.received.metrics}
    assert len(pids) == 1, pids
    pid = pids.pop()
    assert isinstance(pid, int) and pid not in (os.getpid(), otlp_run.launcher_pid)
    res = otlp_run.received.spans[0][0]
    assert res["service.name"] == "sglang" and res[S.RES_TP_RANK] == 0


def test_each_protocol_uses_its_own_transport(otlp_run):
    """HTTP posts to the standard paths; gRPC uses the services (no HTTP request at all)."""
    if otlp_run.paths is None:  # the gRPC run: the HTTP receiver was not started
        assert otlp_run.received.spans and otlp_run.received.metrics
    else:
        assert {"/v1/traces", "/v1/metrics"} <= set(otlp_run.paths)
