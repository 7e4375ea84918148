"""spectrace's settings, from keyword arguments or `SPECTRACE_*` environment variables.

One place parses and validates them, so `instrument()` and auto-instrumentation agree.
A bad value raises `ConfigError` (a `ValueError`) naming the variable and what is allowed.
`to_env()` writes the resolved settings back as variables: that is how the options given
to `instrument()` in a launching process reach SGLang's spawned scheduler processes.
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field, fields
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
    service_name: str = "sglang"
    token_detail: bool = False
    extra: dict = field(default_factory=dict, compare=False, repr=False)


# setting name -> (environment variable, parser, description for docs and errors)
def _parse_bool(var: str, raw: str) -> bool:
    v = raw.strip().lower()
    if v in _TRUE:
        return True
    if v in _FALSE:
        return False
    raise ConfigError(f"{var}={raw!r}: expected 1 or 0 (also true/false, yes/no, on/off)")


def _parse_exporters(var: str, raw: str) -> tuple[str, ...]:
    names = tuple(p.strip().lower() for p in raw.split(",") if p.strip())
    if not names:
        raise ConfigError(f"{var}={raw!r}: expected a comma list of {', '.join(EXPORTERS)}")
    bad = [n for n in names if n not in EXPORTERS]
    if bad:
        raise ConfigError(f"{var}={raw!r}: unknown exporter {bad[0]!r}; allowed: "
                          f"{', '.join(EXPORTERS)}")
    return tuple(dict.fromkeys(names))


def _parse_dir(var: str, raw: str) -> str:
    if not raw.strip() or "\x00" in raw:
        raise ConfigError(f"{var}={raw!r}: expected a directory path")
    return raw


def _parse_host(var: str, raw: str) -> str:
    h = raw.strip()
    if not h or any(c.isspace() for c in h) or "/" in h:
        raise ConfigError(f"{var}={raw!r}: expected a host name or IP address to bind, "
                          "e.g. 127.0.0.1")
    return h


def _parse_port(var: str, raw: str) -> int:
    try:
        port = int(raw.strip())
    except ValueError:
        raise ConfigError(f"{var}={raw!r}: expected a TCP port number 1-65535") from None
    if not 1 <= port <= 65535:
        raise ConfigError(f"{var}={raw!r}: expected a TCP port number 1-65535")
    return port


def _parse_ratio(var: str, raw: str) -> float:
    try:
        r = float(raw.strip())
    except ValueError:
        raise ConfigError(f"{var}={raw!r}: expected a number from 0 to 1") from None
    if not 0.0 <= r <= 1.0:  # also rejects nan
        raise ConfigError(f"{var}={raw!r}: expected a number from 0 to 1")
    return r


def _parse_every(var: str, raw: str) -> int:
    try:
        n = int(raw.strip())
    except ValueError:
        raise ConfigError(f"{var}={raw!r}: expected a whole number >= 0 "
                          "(0 switches it off, N compares every Nth step)") from None
    if n < 0:
        raise ConfigError(f"{var}={raw!r}: expected a whole number >= 0")
    return n


def _parse_interval(var: str, raw: str) -> float:
    try:
        s = float(raw.strip())
    except ValueError:
        raise ConfigError(f"{var}={raw!r}: expected seconds between 0.1 and 2") from None
    if not 0.1 <= s <= 2.0:
        raise ConfigError(f"{var}={raw!r}: expected seconds between 0.1 and 2 (a SIGKILLed "
                          "scheduler loses at most one interval)")
    return s


def _parse_name(var: str, raw: str) -> str:
    if not raw.strip():
        raise ConfigError(f"{var}={raw!r}: expected a non-empty name")
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
                     "opt in to token ids in span attributes"),
}


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
            values[name] = parse(var, env[var])
    return Config(**values)


def _from_python(name: str, var: str, parse, value):
    """Keyword arguments go through the same parser as variables (named by the keyword)."""
    if isinstance(value, bool) and parse is _parse_bool:
        return value
    if isinstance(value, (list, tuple)) and parse is _parse_exporters:
        value = ",".join(str(v) for v in value)
    return parse(f"{name} (or {var})", str(value))


def to_env(cfg: Config) -> dict[str, str]:
    """The variables that reproduce `cfg` in a child process."""
    out = {}
    for f in fields(Config):
        if f.name not in SETTINGS:
            continue
        var = SETTINGS[f.name][0]
        v = getattr(cfg, f.name)
        if isinstance(v, bool):
            out[var] = "1" if v else "0"
        elif isinstance(v, tuple):
            out[var] = ",".join(v)
        else:
            out[var] = str(v)
    return out
