"""The OpenTelemetry resource of one instrumented process: who it is (service, pid, host,
ranks, served model and draft) and what it runs (runtime and versions, from
`spectrace.runtimes`)."""
from __future__ import annotations

import os
import socket

from opentelemetry.sdk.resources import Resource

from .. import server_settings, signals
from ..version import __version__
from ..config import Config
from ..runtimes import runtime_version


def process_runtime(identity: dict) -> str:
    """The runtime whose hooks run in this process (the adapters note it; SGLang's
    predate that, hence the default)."""
    return str(identity.get("runtime") or signals.RUNTIME_SGLANG)


def service_name(cfg: Config, identity: dict) -> str:
    """`OTEL_SERVICE_NAME` when set, else the runtime's name (`sglang`, `vllm`)."""
    return cfg.service_name or process_runtime(identity)


def build_resource(cfg: Config, identity: dict, role: str) -> Resource:
    runtime = process_runtime(identity)
    attrs = {
        signals.RES_SERVICE_NAME: service_name(cfg, identity),
        signals.RES_PROCESS_PID: os.getpid(),
        signals.RES_HOST_NAME: socket.gethostname(),
        signals.RES_SPECTRACE_VERSION: __version__,
        signals.RES_RUNTIME: runtime,
        signals.RES_RUNTIME_VERSION: runtime_version(runtime),
        signals.RES_ROLE: role,
        signals.RES_COUNTED: str(identity.get("counted") or signals.COUNTED_ONCE),
    }
    if runtime == signals.RUNTIME_SGLANG:  # the attribute existing queries select on
        attrs[signals.RES_SGLANG_VERSION] = attrs[signals.RES_RUNTIME_VERSION]
    for key, attr in (("tp_rank", signals.RES_TP_RANK), ("dp_rank", signals.RES_DP_RANK),
                      ("pp_rank", signals.RES_PP_RANK)):
        if identity.get(key) is not None:
            attrs[attr] = int(identity[key])
    for key, attr in (("model", signals.RES_MODEL), ("draft_model", signals.RES_DRAFT_MODEL),
                      ("model_hash", signals.RES_MODEL_HASH),
                      ("draft_hash", signals.RES_DRAFT_HASH),
                      ("spec_algorithm", signals.RES_SPEC_ALGORITHM),
                      ("spec_worker", signals.RES_SPEC_WORKER)):
        if identity.get(key):
            attrs[attr] = str(identity[key])
    if cfg.expected_accept_length is not None:  # the operator's reference (rules.reference)
        attrs[signals.RES_EXPECTED_ACCEPT_LENGTH] = float(cfg.expected_accept_length)
    # the server settings that change acceptance (spectrace.server_settings)
    attrs.update(server_settings.resource_attributes(identity.get("settings") or {}))
    # OTEL_RESOURCE_ATTRIBUTES / OTEL_SERVICE_NAME are merged by Resource.create.
    return Resource.create(attrs)
