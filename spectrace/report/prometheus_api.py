"""How the report reaches a Prometheus server (or any store that answers its HTTP query
API): what to read (`PrometheusRange`: URL, selector, range), the durations and times the
options give, and the `Client` (credentials from the environment, never printed; a timeout;
every failure one line). `prometheus_source` turns the answers into processes.
"""
from __future__ import annotations

import base64
import datetime
import json
import os
import re
import ssl
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass

from .folder_source import ReportError

INFO_SERIES = "target_info"
TOKEN_VARIABLE = "SPECTRACE_PROMETHEUS_TOKEN"    # a bearer token, never printed
USER_VARIABLE = "SPECTRACE_PROMETHEUS_USER"      # basic auth: user ...
PASSWORD_VARIABLE = "SPECTRACE_PROMETHEUS_PASSWORD"  # ... and password, never printed
CA_VARIABLE = "SPECTRACE_PROMETHEUS_CA_FILE"     # a CA bundle for an https URL
_DURATION = re.compile(r"^(\d+(?:\.\d+)?)(s|m|h|d|w)$")
_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}


def duration_s(text: str, option: str = "--since") -> float:
    """'90s', '15m', '1h', '7d' as seconds; anything else is a `ValueError` naming the
    option and the text."""
    m = _DURATION.match(text.strip())
    if not m or float(m.group(1)) <= 0:
        raise ValueError(f"{option} {text!r}: expected a duration such as 30m, 1h or 7d")
    return float(m.group(1)) * _UNITS[m.group(2)]


def end_time(text: str, now: float) -> float:
    """`--until`: a Unix time, an RFC 3339 time with its zone (2026-12-07T10:00:00Z) or a
    duration before `now` (2h); anything else is a `ValueError` naming the option."""
    text = text.strip()
    try:
        return float(text)
    except ValueError:
        pass
    if _DURATION.match(text):
        return now - duration_s(text, "--until")
    try:
        when = datetime.datetime.fromisoformat(text)
    except ValueError:
        when = None
    if when is None or when.tzinfo is None:
        raise ValueError(f"--until {text!r}: expected a time with its zone such as "
                         f"2026-12-07T10:00:00Z, a Unix time, or a duration ago such as 2h")
    return when.timestamp()


@dataclass(frozen=True)
class PrometheusRange:
    """What to read: the server's `url`, a label `selector` matched against the processes'
    `target_info` (e.g. `service_name="prod", spectrace_draft_model=~".*v2"`; job and
    instance too), the range (`since_s` before `end`, which is now unless `until` says
    the operator chose it) and the HTTP timeout."""
    url: str
    selector: str = ""
    since_s: float = 3600.0
    end: float | None = None
    timeout_s: float = 30.0
    ago_s: float = 0.0  # the range ends this long before `end` (a baseline: `--baseline-offset`)
    until: bool = False  # `end` is the operator's (`--until`), not the time of the query

    @property
    def title(self) -> str:
        sel = f"{{{self.selector}}}" if self.selector else ""
        if self.until and self.end is not None:
            at = datetime.datetime.fromtimestamp(self.end - self.ago_s, datetime.timezone.utc)
            when = f"{_span(self.since_s)} ending {at.strftime('%Y-%m-%dT%H:%M:%SZ')}"
        elif self.ago_s:
            when = f"{_span(self.since_s)} ending {_span(self.ago_s)} ago"
        else:
            when = f"last {_span(self.since_s)}"
        return f"{self.url.rstrip('/')} {INFO_SERIES}{sel}, {when}"


def _span(seconds: float) -> str:
    for unit in ("w", "d", "h", "m"):
        if seconds >= _UNITS[unit] and seconds % _UNITS[unit] == 0:
            return f"{seconds / _UNITS[unit]:g}{unit}"
    return f"{seconds:g}s"


class Client:
    """Prometheus's HTTP query API, with the credentials the environment gives (never
    printed) and a timeout; every failure is a `ReportError` of one line."""

    def __init__(self, url: str, timeout_s: float = 30.0, env=os.environ) -> None:
        parts = urllib.parse.urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.netloc:
            raise ReportError(f"--prometheus {url!r}: expected an http:// or https:// URL")
        self.url = url.rstrip("/")
        self.timeout_s = timeout_s
        self.headers = {"Accept": "application/json"}
        if env.get(TOKEN_VARIABLE):
            self.headers["Authorization"] = f"Bearer {env[TOKEN_VARIABLE]}"
        elif env.get(USER_VARIABLE):
            pair = f"{env[USER_VARIABLE]}:{env.get(PASSWORD_VARIABLE, '')}".encode()
            self.headers["Authorization"] = "Basic " + base64.b64encode(pair).decode()
        self.context = None
        if env.get(CA_VARIABLE):
            try:
                self.context = ssl.create_default_context(cafile=env[CA_VARIABLE])
            except (OSError, ssl.SSLError) as exc:
                raise ReportError(f"{CA_VARIABLE}={env[CA_VARIABLE]}: cannot read it as a "
                                  f"CA bundle ({exc})") from None

    def query(self, promql: str, at: float, kind: str = "vector") -> list[dict]:
        """An instant query's result: a vector ([{"metric": {...}, "value": [t, "v"]}, ...])
        or, for a range selector, a matrix ("values": every sample in the range)."""
        return self._post("/api/v1/query", {"query": promql, "time": f"{at:.3f}"}, kind)

    def _post(self, path: str, params: dict, kind: str) -> list[dict]:
        body = urllib.parse.urlencode(params).encode()
        req = urllib.request.Request(f"{self.url}{path}", data=body,
                                     headers=self.headers, method="POST")
        try:
            with urllib.request.urlopen(req, timeout=self.timeout_s,
                                        context=self.context) as resp:
                raw = resp.read()
        except urllib.error.HTTPError as exc:
            raise ReportError(self._http_error(exc)) from None
        except (urllib.error.URLError, OSError, ValueError) as exc:
            why = getattr(exc, "reason", exc)
            raise ReportError(f"--prometheus {self.url}: cannot reach it ({why})") from None
        answer = self._json(raw)
        if answer.get("status") != "success" or not isinstance(answer.get("data"), dict):
            raise ReportError(f"--prometheus {self.url}: the query failed "
                              f"({answer.get('error') or 'no data in the answer'})")
        data = answer["data"]
        if data.get("resultType") != kind or not isinstance(data.get("result"), list):
            raise ReportError(f"--prometheus {self.url}: expected a {kind} from the query "
                              f"API, got {data.get('resultType')!r}")
        return data["result"]

    def query_range(self, promql: str, start: float, end: float, step: float) -> list[dict]:
        """A range query's matrix: [{"metric": {...}, "values": [[t, "v"], ...]}, ...]."""
        return self._post("/api/v1/query_range", {
            "query": promql, "start": f"{start:.3f}", "end": f"{end:.3f}",
            "step": f"{step:.3f}"}, "matrix")

    def _http_error(self, exc: urllib.error.HTTPError) -> str:
        if exc.code in (401, 403):
            return (f"--prometheus {self.url}: refused ({exc.code}); set {TOKEN_VARIABLE} "
                    f"(a bearer token) or {USER_VARIABLE} and {PASSWORD_VARIABLE}")
        try:
            said = json.loads(exc.read()).get("error")
        except (ValueError, OSError, AttributeError):
            said = None
        return f"--prometheus {self.url}: HTTP {exc.code}" + (f" ({said})" if said else
                                                              " (is it Prometheus's API?)")

    def _json(self, raw: bytes) -> dict:
        try:
            answer = json.loads(raw)
        except ValueError:
            answer = None
        if not isinstance(answer, dict) or "status" not in answer:
            raise ReportError(f"--prometheus {self.url}: the answer is not Prometheus's query "
                              f"API (give the server's base URL, e.g. http://host:9090)")
        return answer
