"""spectrace's settings, from keyword arguments or `SPECTRACE_*` environment variables.

One place parses and validates them, so `instrument()` and auto-instrumentation agree.
A bad value raises `ConfigError` (a `ValueError`) naming the variable and what is allowed.
`to_env()` writes the resolved settings back as variables: that is how the options given
to `instrument()` in a launching process reach SGLang's spawned scheduler processes.
"""
from __future__ import annotations

import ipaddress
import os
import re
from dataclasses import dataclass, fields
from typing import Mapping

EXPORTERS = ("file", "otlp", "prometheus", "console")
_TRUE = ("1", "true", "yes", "on")
_FALSE = ("0", "false", "no", "off", "")


class ConfigError(ValueError):
    """A setting has a value spectrace cannot use; the message names the setting."""


@dataclass(frozen=True)
class Config:
    enabled: bool = True
    exporters: tuple[str, ...] = ("file",)
    output_dir: str = "./spectrace-data"
    prometheus_host: str = "127.0.0.1"
    prometheus_port: int = 9464
    strict: bool = False
    step_sample_ratio: float = 0.01
    agreement_every: int = 16
    metric_interval_s: float = 2.0
    service_name: str | None = None  # None: the runtime's name (sglang, vllm)
    token_detail: bool = False  # reserved: nothing emits token ids yet (docs/reliability.md)


def _show(value, limit: int = 80) -> str:
    """The value as it appears in an error message: repr, cut short if it is long."""
    r = repr(value)
    return r if len(r) <= limit else r[:limit] + f"... ({len(r)} chars)"


# setting name -> (environment variable, parser, description for docs and errors)
def _parse_bool(var: str, raw: str) -> bool:
    v = raw.strip().lower()
    if v in _TRUE:
        return True
    if v in _FALSE:
        return False
    raise ConfigError(f"{var}={_show(raw)}: expected 1 or 0 (also true/false, yes/no, on/off)")


def _parse_exporters(var: str, raw: str) -> tuple[str, ...]:
    names = tuple(p.strip().lower() for p in raw.split(",") if p.strip())
    if not names:
        raise ConfigError(f"{var}={_show(raw)}: expected a comma list of {', '.join(EXPORTERS)}")
    bad = [n for n in names if n not in EXPORTERS]
    if bad:
        raise ConfigError(f"{var}={_show(raw)}: unknown exporter {bad[0]!r}; allowed: "
                          f"{', '.join(EXPORTERS)}")
    return tuple(dict.fromkeys(names))


def _printable(raw: str) -> bool:
    return all(c.isprintable() for c in raw)


def _parse_dir(var: str, raw: str) -> str:
    if not raw.strip() or not _printable(raw):
        raise ConfigError(f"{var}={_show(raw)}: expected a directory path (non-empty, no control "
                          "characters)")
    return raw


_HOST_LABEL = re.compile(r"^(?!-)[A-Za-z0-9-]{1,63}(?<!-)$")


def _parse_host(var: str, raw: str) -> str:
    h = raw.strip()
    allowed = ("expected a host name or IP address to bind, e.g. 127.0.0.1 (loopback, the "
               "default), ::1, or 0.0.0.0 to listen on every interface")
    if not h:
        raise ConfigError(f"{var}={_show(raw)}: {allowed}")
    try:
        ipaddress.ip_address(h[1:-1] if h.startswith("[") and h.endswith("]") else h)
        return h
    except ValueError:
        pass
    labels = h[:-1].split(".") if h.endswith(".") else h.split(".")
    if len(h) > 253 or not all(_HOST_LABEL.match(x) for x in labels) or \
            all(x.isdigit() for x in labels):
        raise ConfigError(f"{var}={_show(raw)}: {allowed}")
    return h


def _parse_port(var: str, raw: str) -> int:
    try:
        port = int(raw.strip())
    except ValueError:
        raise ConfigError(f"{var}={_show(raw)}: expected a TCP port number 1-65535") from None
    if not 1 <= port <= 65535:
        raise ConfigError(f"{var}={_show(raw)}: expected a TCP port number 1-65535")
    return port


def _parse_ratio(var: str, raw: str) -> float:
    try:
        r = float(raw.strip())
    except ValueError:
        raise ConfigError(f"{var}={_show(raw)}: expected a number from 0 to 1") from None
    if not 0.0 <= r <= 1.0:  # also rejects nan
        raise ConfigError(f"{var}={_show(raw)}: expected a number from 0 to 1")
    return r


def _parse_every(var: str, raw: str) -> int:
    try:
        n = int(raw.strip())
    except ValueError:
        raise ConfigError(f"{var}={_show(raw)}: expected a whole number >= 0 "
                          "(0 switches it off, N compares every Nth step)") from None
    if n < 0:
        raise ConfigError(f"{var}={_show(raw)}: expected a whole number >= 0")
    return n


def _parse_interval(var: str, raw: str) -> float:
    try:
        s = float(raw.strip())
    except ValueError:
        raise ConfigError(f"{var}={_show(raw)}: expected seconds between 0.1 and 2") from None
    if not 0.1 <= s <= 2.0:
        raise ConfigError(f"{var}={_show(raw)}: expected seconds between 0.1 and 2 (a SIGKILLed "
                          "scheduler loses at most one interval)")
    return s


def _parse_name(var: str, raw: str) -> str:
    if not raw.strip() or not _printable(raw):
        raise ConfigError(f"{var}={_show(raw)}: expected a non-empty name without control "
                          "characters")
    return raw.strip()


SETTINGS = {
    "enabled": ("SPECTRACE_ENABLED", _parse_bool, "1 turns instrumentation on in every process"),
    "exporters": ("SPECTRACE_EXPORTERS", _parse_exporters,
                  "comma list of file, otlp, prometheus, console"),
    "output_dir": ("SPECTRACE_OUTPUT_DIR", _parse_dir, "where the file exporter writes"),
    "prometheus_host": ("SPECTRACE_PROMETHEUS_HOST", _parse_host,
                        "address the Prometheus endpoint binds"),
    "prometheus_port": ("SPECTRACE_PROMETHEUS_PORT", _parse_port,
                        "base port; each worker process listens on base + its rank"),
    "strict": ("SPECTRACE_STRICT", _parse_bool, "raise at the first fc bypass"),
    "step_sample_ratio": ("SPECTRACE_STEP_SAMPLE_RATIO", _parse_ratio,
                          "fraction of decode steps recorded as spans"),
    "agreement_every": ("SPECTRACE_AGREEMENT_EVERY", _parse_every,
                        "compare draft and target tokens every Nth step; 0 = off"),
    "metric_interval_s": ("SPECTRACE_METRIC_INTERVAL", _parse_interval,
                          "seconds between metric exports"),
    "service_name": ("OTEL_SERVICE_NAME", _parse_name, "service.name resource attribute"),
    "token_detail": ("SPECTRACE_TOKEN_DETAIL", _parse_bool,
                     "reserved opt-in for token-level detail; no telemetry carries token ids "
                     "in this release, whatever its value"),
}

# OTLP protocol variables (read by spectrace.otlp), checked here when `otlp` is exported, so
# a bad one fails `instrument()` / auto-instrumentation up front like any other setting.
OTLP_PROTOCOLS = ("grpc", "http/protobuf")
OTLP_PROTOCOL_VARS = ("OTEL_EXPORTER_OTLP_PROTOCOL", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL",
                      "OTEL_EXPORTER_OTLP_METRICS_PROTOCOL")


def check_otlp_env(env: Mapping[str, str]) -> None:
    """Raise `ConfigError` for an OTLP protocol spectrace's exporters cannot speak (an
    empty value counts as unset, as in OpenTelemetry)."""
    for var in OTLP_PROTOCOL_VARS:
        raw = env.get(var)
        if raw is None or not raw.strip():
            continue
        if raw.strip().lower() not in OTLP_PROTOCOLS:
            raise ConfigError(f"{var}={_show(raw)}: spectrace's OTLP exporter supports "
                              f"{' and '.join(OTLP_PROTOCOLS)}")


def from_env(environ: Mapping[str, str] | None = None, **overrides) -> Config:
    """Settings from `overrides` (keyword arguments win) then the environment, then defaults."""
    env = os.environ if environ is None else environ
    unknown = set(overrides) - set(SETTINGS)
    if unknown:
        raise ConfigError(f"unknown spectrace setting {sorted(unknown)[0]!r}; known: "
                          f"{', '.join(SETTINGS)}")
    values = {}
    for name, (var, parse, _doc) in SETTINGS.items():
        if name in overrides and overrides[name] is not None:
            values[name] = _from_python(name, var, parse, overrides[name])
        elif var in env:
            raw = env[var]
            if var.startswith("OTEL_") and not raw.strip():
                continue  # OpenTelemetry convention: an empty variable is unset
            values[name] = parse(var, raw)
    cfg = Config(**values)
    if "otlp" in cfg.exporters:
        check_otlp_env(env)
    return cfg


def _from_python(name: str, var: str, parse, value):
    """Keyword arguments go through the same parser as variables (named by the keyword).
    The Python type must fit too: `True` is not a port, a ratio or a folder."""
    label = f"{name} (or {var})"
    if parse is _parse_bool:
        if isinstance(value, bool):
            return value
        if isinstance(value, int) and value in (0, 1):
            return bool(value)
        if not isinstance(value, str):
            raise ConfigError(f"{label}={_show(value)}: expected True or False")
    elif parse is _parse_exporters:
        if isinstance(value, (list, tuple, set, frozenset)) and all(
                isinstance(v, str) for v in value):
            value = ",".join(value)
        elif not isinstance(value, str):
            raise ConfigError(f"{label}={_show(value)}: expected a list of names from "
                              f"{', '.join(EXPORTERS)}")
    elif parse in (_parse_port, _parse_every):
        if isinstance(value, bool) or not isinstance(value, (int, str)):
            raise ConfigError(f"{label}={_show(value)}: expected a whole number")
    elif parse in (_parse_ratio, _parse_interval):
        if isinstance(value, bool) or not isinstance(value, (int, float, str)):
            raise ConfigError(f"{label}={_show(value)}: expected a number")
    elif parse is _parse_dir and isinstance(value, os.PathLike):
        value = os.fspath(value)
    if not isinstance(value, (str, int, float)) or isinstance(value, bool):
        raise ConfigError(f"{label}={_show(value)}: expected a string")
    return parse(label, str(value))


def to_env(cfg: Config) -> dict[str, str]:
    """The variables that reproduce `cfg` in a child process."""
    out = {}
    for f in fields(Config):
        if f.name not in SETTINGS:
            continue
        var = SETTINGS[f.name][0]
        v = getattr(cfg, f.name)
        if v is None:
            continue  # unset: each process resolves it itself
        if isinstance(v, bool):
            out[var] = "1" if v else "0"
        elif isinstance(v, tuple):
            out[var] = ",".join(v)
        else:
            out[var] = str(v)
    return out
