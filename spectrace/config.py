"""spectrace's settings, from keyword arguments or `SPECTRACE_*` environment variables.

One place parses and validates them, so `instrument()` and auto-instrumentation agree.
A bad value raises `ConfigError` (a `ValueError`) naming the variable and what is allowed.
`to_env()` writes the resolved settings back as variables: that is how the options given
to `instrument()` in a launching process reach SGLang's spawned scheduler processes.

Each setting is declared once, as a field of `Config`: its default, its variable, its
`Kind` (which parses the variable's text, checks a keyword argument's Python type, writes
the value back as text and words the error) and its description. `SETTINGS` is read off
those fields. A table of our own rather than pydantic-settings: this module loads in
every process of the runtime (the `.pth` start-up hook), where importing pydantic costs
about 0.1 s, and neither pydantic nor pydantic-settings is a requirement of spectrace (the
runtimes ship pydantic, not pydantic-settings; `spectrace report` and `doctor` need
neither); the errors also keep one wording, naming the keyword and its variable.
"""
from __future__ import annotations

import ipaddress
import os
import re
from dataclasses import dataclass, field, fields
from typing import Any, Callable, Mapping, NamedTuple

from .rules.requests import REQUEST_LABELS

EXPORTERS = ("file", "otlp", "prometheus", "console")
_TRUE = ("1", "true", "yes", "on")
_FALSE = ("0", "false", "no", "off", "")


class ConfigError(ValueError):
    """A setting has a value spectrace cannot use; the message names the setting."""


def _show(value, limit: int = 80) -> str:
    """The value as it appears in an error message: repr, cut short if it is long."""
    r = repr(value)
    return r if len(r) <= limit else r[:limit] + f"... ({len(r)} chars)"


# -- kinds of setting ------------------------------------------------------------------------
class Kind:
    """How one kind of setting is read and written. `parse(var, raw)` turns a variable's
    text into the value (or raises `ConfigError` naming `var`); `from_python(label, value)`
    does the same for a keyword argument, whose Python type must fit too (`True` is not a
    port, a ratio or a folder); `to_text(value)` is the text that reproduces it."""

    python_types: tuple[type, ...] = (str, int, float)
    python_expected = "a string"

    def parse(self, var: str, raw: str) -> Any:
        raise NotImplementedError

    def from_python(self, label: str, value: Any) -> Any:
        if isinstance(value, bool) or not isinstance(value, self.python_types):
            raise ConfigError(f"{label}={_show(value)}: expected {self.python_expected}")
        return self.parse(label, str(value))

    def to_text(self, value: Any) -> str:
        return str(value)


class Flag(Kind):
    """On or off: 1/0, true/false, yes/no, on/off (empty: off)."""

    def parse(self, var: str, raw: str) -> bool:
        v = raw.strip().lower()
        if v in _TRUE:
            return True
        if v in _FALSE:
            return False
        raise ConfigError(f"{var}={_show(raw)}: expected 1 or 0 (also true/false, yes/no, "
                          "on/off)")

    def from_python(self, label: str, value: Any) -> bool:
        if isinstance(value, bool):
            return value
        if isinstance(value, int) and value in (0, 1):
            return bool(value)
        if not isinstance(value, str):
            raise ConfigError(f"{label}={_show(value)}: expected True or False")
        return self.parse(label, value)

    def to_text(self, value: bool) -> str:
        return "1" if value else "0"


class Names(Kind):
    """A comma list of names from `allowed`, deduplicated in order (a list as keyword)."""

    def __init__(self, allowed: tuple[str, ...]) -> None:
        self.allowed = allowed

    def parse(self, var: str, raw: str) -> tuple[str, ...]:
        names = tuple(p.strip().lower() for p in raw.split(",") if p.strip())
        allowed = ", ".join(self.allowed)
        if not names:
            raise ConfigError(f"{var}={_show(raw)}: expected a comma list of {allowed}")
        bad = [n for n in names if n not in self.allowed]
        if bad:
            raise ConfigError(f"{var}={_show(raw)}: unknown exporter {bad[0]!r}; allowed: "
                              f"{allowed}")
        return tuple(dict.fromkeys(names))

    def from_python(self, label: str, value: Any) -> tuple[str, ...]:
        if isinstance(value, (list, tuple, set, frozenset)) and all(
                isinstance(v, str) for v in value):
            value = ",".join(value)
        elif not isinstance(value, str):
            raise ConfigError(f"{label}={_show(value)}: expected a list of names from "
                              f"{', '.join(self.allowed)}")
        return self.parse(label, value)

    def to_text(self, value: tuple[str, ...]) -> str:
        return ",".join(value)


class Number(Kind):
    """A whole number (`whole`) or a real one in `[low, high]` (`high` None: no upper
    bound; NaN is never in range); `expected` words what is allowed."""

    def __init__(self, whole: bool, low: float, high: float | None, expected: str) -> None:
        self.convert = int if whole else float
        self.low, self.high, self.expected = low, high, expected
        self.python_types = (int, str) if whole else (int, float, str)
        self.python_expected = "a whole number" if whole else "a number"

    def parse(self, var: str, raw: str) -> float:
        try:
            n = self.convert(raw.strip())
        except ValueError:
            raise ConfigError(f"{var}={_show(raw)}: expected {self.expected}") from None
        if not (self.low <= n and (self.high is None or n <= self.high)):
            raise ConfigError(f"{var}={_show(raw)}: expected {self.expected}")
        return n


class Text(Kind):
    """Free text that `check(var, raw) -> value` accepts (raising `ConfigError`)."""

    def __init__(self, check: Callable[[str, str], str]) -> None:
        self.parse = check


class Directory(Text):
    """A folder path (`os.PathLike` too as keyword)."""

    def from_python(self, label: str, value: Any) -> str:
        return super().from_python(label, os.fspath(value) if isinstance(value, os.PathLike)
                                   else value)


def _printable(raw: str) -> bool:
    return all(c.isprintable() for c in raw)


def _check_dir(var: str, raw: str) -> str:
    if not raw.strip() or not _printable(raw):
        raise ConfigError(f"{var}={_show(raw)}: expected a directory path (non-empty, no control "
                          "characters)")
    return raw


_HOST_LABEL = re.compile(r"^(?!-)[A-Za-z0-9-]{1,63}(?<!-)$")


def _check_host(var: str, raw: str) -> str:
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


def _check_name(var: str, raw: str) -> str:
    if not raw.strip() or not _printable(raw):
        raise ConfigError(f"{var}={_show(raw)}: expected a non-empty name without control "
                          "characters")
    return raw.strip()


def _check_request_label(var: str, raw: str) -> str | None:
    name = raw.strip().lower()
    if not name:
        return None  # empty: no label
    if name not in REQUEST_LABELS:
        raise ConfigError(f"{var}={_show(raw)}: expected a request field, one of "
                          f"{', '.join(REQUEST_LABELS)} (or empty for none)")
    return name


FLAG = Flag()


class Setting(NamedTuple):
    """One setting: its environment variable, its kind, what it does (docs and errors)."""

    var: str
    kind: Kind
    doc: str


def _setting(var: str, kind: Kind, default: Any, doc: str):
    """A `Config` field declared with its variable, kind and description."""
    return field(default=default, metadata={"setting": Setting(var, kind, doc)})


@dataclass(frozen=True)
class Config:
    enabled: bool = _setting("SPECTRACE_ENABLED", FLAG, True,
                             "1 turns instrumentation on in every process")
    exporters: tuple[str, ...] = _setting("SPECTRACE_EXPORTERS", Names(EXPORTERS), ("file",),
                                          "comma list of file, otlp, prometheus, console")
    output_dir: str = _setting("SPECTRACE_OUTPUT_DIR", Directory(_check_dir),
                               "./spectrace-data", "where the file exporter writes")
    prometheus_host: str = _setting("SPECTRACE_PROMETHEUS_HOST", Text(_check_host),
                                    "127.0.0.1", "address the Prometheus endpoint binds")
    prometheus_port: int = _setting(
        "SPECTRACE_PROMETHEUS_PORT", Number(True, 1, 65535, "a TCP port number 1-65535"), 9464,
        "base port; each worker process listens on base + its rank")
    strict: bool = _setting("SPECTRACE_STRICT", FLAG, False, "raise at the first fc bypass")
    step_sample_ratio: float = _setting(
        "SPECTRACE_STEP_SAMPLE_RATIO", Number(False, 0.0, 1.0, "a number from 0 to 1"), 0.01,
        "fraction of decode steps recorded as spans")
    request_sample_ratio: float = _setting(
        "SPECTRACE_REQUEST_SAMPLE_RATIO", Number(False, 0.0, 1.0, "a number from 0 to 1"), 0.1,
        "fraction of finished requests recorded as a span with the runtime's request id")
    request_label: str | None = _setting(
        "SPECTRACE_REQUEST_LABEL", Text(_check_request_label), None,
        "label the finished-request distribution by this request field: routing_key, "
        "extra_key, priority (SGLang), priority, lora (vLLM); unset: no label")
    request_label_cap: int = _setting(
        "SPECTRACE_REQUEST_LABEL_CAP", Number(True, 1, 1000, "a whole number from 1 to 1000"),
        32, "distinct SPECTRACE_REQUEST_LABEL values kept; later ones count as `other`")
    agreement_every: int = _setting(
        "SPECTRACE_AGREEMENT_EVERY", Number(True, 0, None, "a whole number >= 0 (0 switches "
                                            "it off, N compares every Nth step)"), 16,
        "compare draft and target tokens every Nth step; 0 = off")
    step_cost_every: int = _setting(
        "SPECTRACE_STEP_COST_EVERY", Number(True, 0, None, "a whole number >= 0 (0 switches "
                                            "it off, N measures every Nth step)"), 4,
        "measure the cost of every Nth decode step per phase (wall time on the CPU, CUDA "
        "events on a GPU); 0 = off")
    finite_every: int = _setting(
        "SPECTRACE_FINITE_EVERY", Number(True, 0, None, "a whole number >= 0 (0 switches "
                                         "it off, N checks every Nth draft pass)"), 64,
        "check the draft's hidden states (vLLM: and logits) for inf/nan on the device every "
        "Nth draft pass; 0 = off")
    expected_accept_length: float | None = _setting(
        "SPECTRACE_EXPECTED_ACCEPT_LENGTH", Number(False, 1.0, 64.0, "a mean accept length "
                                                   "from 1 to 64 (bonus token included)"),
        None, "the mean accept length this draft should reach (e.g. its evaluation's); "
        "`spectrace report` raises acceptance.below_reference well below it; unset: none")
    metric_interval_s: float = _setting(
        "SPECTRACE_METRIC_INTERVAL", Number(False, 0.1, 2.0, "seconds between 0.1 and 2 (a "
                                            "SIGKILLed scheduler loses at most one interval)"),
        2.0, "seconds between metric exports")
    # None: the runtime's name (sglang, vllm)
    service_name: str | None = _setting("OTEL_SERVICE_NAME", Text(_check_name), None,
                                        "service.name resource attribute")
    # reserved: nothing emits token ids yet (docs/reliability.md)
    token_detail: bool = _setting("SPECTRACE_TOKEN_DETAIL", FLAG, False,
                                  "reserved opt-in for token-level detail; no telemetry "
                                  "carries token ids in this release, whatever its value")


# setting name -> Setting(environment variable, kind, description)
SETTINGS: dict[str, Setting] = {f.name: f.metadata["setting"] for f in fields(Config)}

# OTLP protocol variables (read by `spectrace.export.otlp` through `otlp_protocol`), checked
# here when `otlp` is exported, so a bad one fails `instrument()` / auto-instrumentation up
# front like any other setting.
OTLP_PROTOCOLS = ("grpc", "http/protobuf")
OTLP_PROTOCOL_VAR = "OTEL_EXPORTER_OTLP_PROTOCOL"
OTLP_PROTOCOL_VARS = (OTLP_PROTOCOL_VAR, "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL",
                      "OTEL_EXPORTER_OTLP_METRICS_PROTOCOL")


def _protocol_in(env: Mapping[str, str], var: str) -> str | None:
    """The protocol `var` names (None: unset or empty, as in OpenTelemetry); `ConfigError`
    for one spectrace's exporters cannot speak."""
    raw = env.get(var)
    if raw is None or not raw.strip():
        return None
    proto = raw.strip().lower()
    if proto not in OTLP_PROTOCOLS:
        raise ConfigError(f"{var}={_show(raw)}: spectrace's OTLP exporter supports "
                          f"{' and '.join(OTLP_PROTOCOLS)}")
    return proto


def otlp_protocol(signal: str, env: Mapping[str, str] | None = None) -> str:
    """The protocol of the OTLP exporter for `signal` (`TRACES`, `METRICS`): its own
    variable, else `OTEL_EXPORTER_OTLP_PROTOCOL`, else grpc."""
    env = os.environ if env is None else env
    return (_protocol_in(env, f"OTEL_EXPORTER_OTLP_{signal}_PROTOCOL")
            or _protocol_in(env, OTLP_PROTOCOL_VAR) or OTLP_PROTOCOLS[0])


def check_otlp_env(env: Mapping[str, str]) -> None:
    """Raise `ConfigError` for an OTLP protocol spectrace's exporters cannot speak."""
    for var in OTLP_PROTOCOL_VARS:
        _protocol_in(env, var)


def from_env(environ: Mapping[str, str] | None = None, **overrides) -> Config:
    """Settings from `overrides` (keyword arguments win) then the environment, then defaults."""
    env = os.environ if environ is None else environ
    unknown = set(overrides) - set(SETTINGS)
    if unknown:
        raise ConfigError(f"unknown spectrace setting {sorted(unknown)[0]!r}; known: "
                          f"{', '.join(SETTINGS)}")
    values = {}
    for name, (var, kind, _doc) in SETTINGS.items():
        if overrides.get(name) is not None:
            # keyword arguments go through the same parser, named by the keyword
            values[name] = kind.from_python(f"{name} (or {var})", overrides[name])
        elif var in env:
            raw = env[var]
            if var.startswith("OTEL_") and not raw.strip():
                continue  # OpenTelemetry convention: an empty variable is unset
            values[name] = kind.parse(var, raw)
    cfg = Config(**values)
    if "otlp" in cfg.exporters:
        check_otlp_env(env)
    return cfg


def to_env(cfg: Config) -> dict[str, str]:
    """The variables that reproduce `cfg` in a child process (unset ones left out: each
    process resolves them itself)."""
    return {var: kind.to_text(getattr(cfg, name))
            for name, (var, kind, _doc) in SETTINGS.items() if getattr(cfg, name) is not None}
