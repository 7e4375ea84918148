"""The files `spectrace grafana` writes: the overview dashboard, the Prometheus alert rules
and Grafana's provisioning files, for a deployment's datasource and label matchers
(`Options`). With the default options they are the repository's `grafana/` files, which
docker-compose.yml mounts."""
from __future__ import annotations

import json
import re
import shlex
from dataclasses import dataclass, fields

from . import alerts, overview, yamltext
from . import promql as Q

DASHBOARD = "dashboards/spectrace-overview.json"
RULES = "alerts/spectrace-rules.yml"
DASHBOARD_PROVIDER = "provisioning/dashboards/spectrace.yml"
DATASOURCE = "provisioning/datasources/spectrace.yml"

# a PromQL label matcher: name, operator, double-quoted value
MATCHER = re.compile(r'\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*(=~|!~|!=|=)\s*("(?:[^"\\\n]|\\.)*")\s*')
DURATION = re.compile(r"([0-9]+(ms|s|m|h|d|w|y))+")
UID = re.compile(r"[a-zA-Z0-9_-]{1,40}")
WRITTEN_WITH = "Written with: "  # the rule file's record of the options (none: the defaults)


class OptionError(ValueError):
    """An option `spectrace grafana` cannot use; the message names it and what it takes."""


@dataclass(frozen=True)
class Options:
    """How a deployment differs from the repository's docker-compose stack."""
    selectors: tuple[str, ...] = ()  # label matchers every query and rule also applies
    datasource: str | None = None  # the Prometheus datasource's name ...
    datasource_uid: str | None = None  # ... and uid (the dashboard selects it at first)
    prometheus_url: str = "http://prometheus:9090"  # in the provisioned datasource
    scrape_interval: str = "5s"  # Prometheus' scrape interval, for $__rate_interval
    dashboards_path: str = "/var/lib/grafana/dashboards/spectrace"  # where Grafana reads

    def __post_init__(self) -> None:
        for m in self.selectors:
            if not MATCHER.fullmatch(m):
                name, _, value = m.partition("=")
                hint = (f' such as {name.strip()}="{value.strip()}"'
                        if name.strip().isidentifier() and value and '"' not in value else "")
                raise OptionError(f"--selector {m!r}: expected a PromQL label matcher{hint} "
                                  '(NAME="VALUE", NAME!="VALUE", NAME=~"REGEX" or '
                                  'NAME!~"REGEX")')
        for opt, value in (("--datasource", self.datasource),
                           ("--datasource-uid", self.datasource_uid)):
            if value is not None and (not value.strip() or not value.isprintable()):
                raise OptionError(f"{opt} {value!r}: expected a datasource name or uid")
        if self.datasource_uid is not None and not UID.fullmatch(self.datasource_uid):
            raise OptionError(f"--datasource-uid {self.datasource_uid!r}: a Grafana uid is "
                              "1-40 letters, digits, '-' or '_'")
        if not re.fullmatch(r"https?://[^\s/]+(/\S*)?", self.prometheus_url):
            raise OptionError(f"--prometheus-url {self.prometheus_url!r}: expected an "
                              "http:// or https:// URL, e.g. http://localhost:9090")
        if not DURATION.fullmatch(self.scrape_interval):
            raise OptionError(f"--scrape-interval {self.scrape_interval!r}: expected a "
                              "Prometheus duration such as 15s or 1m")
        if not self.dashboards_path.startswith("/") or not self.dashboards_path.isprintable():
            raise OptionError(f"--dashboards-path {self.dashboards_path!r}: expected the "
                              "absolute path where Grafana reads the dashboards")

    @property
    def matchers(self) -> str:
        return Q.matchers(*(m.strip() for m in self.selectors))

    def arguments(self) -> list[str]:
        """The `spectrace grafana` options that give these (defaults left out)."""
        out = [a for m in self.selectors for a in ("--selector", m)]
        for field in fields(self):
            value = getattr(self, field.name)
            if field.name != "selectors" and value != field.default:
                out += ["--" + field.name.replace("_", "-"), value]
        return out


def _header(*lines: str) -> str:
    return "".join(f"# {line}\n" if line else "#\n" for line in lines)


def _rules(opts: Options) -> str:
    args = opts.arguments()
    return _header("Prometheus alert rules for spectrace, written by `spectrace grafana`; do not "
                   "edit by hand", "(`spectrace grafana --check DIR` names the rules a newer "
                   "version changes).",
                   *([WRITTEN_WITH + shlex.join(args)] if args else [])
                   ) + yamltext.dump(alerts.rules(opts.matchers))


def _dashboard_provider(opts: Options) -> str:
    return _header(
        "Grafana dashboard provisioning, written by `spectrace grafana`: Grafana loads every",
        "dashboard JSON file in `path` (where the dashboards/ folder goes) into its folder",
        "\"spectrace\".") + yamltext.dump({
            "apiVersion": 1, "providers": [{
                "name": "spectrace", "folder": "spectrace", "type": "file",
                "disableDeletion": False, "allowUiUpdates": True,
                "updateIntervalSeconds": 30,
                "options": {"path": opts.dashboards_path, "foldersFromFilesStructure": False}}]})


def _datasource(opts: Options) -> str:
    return _header(
        "Grafana datasource provisioning, written by `spectrace grafana`: the Prometheus the",
        "dashboards read (leave this file out where Grafana has it already, and give its name",
        "to `spectrace grafana --datasource`). timeInterval is Prometheus' scrape interval",
        "($__rate_interval uses it).") + yamltext.dump({
            "apiVersion": 1, "datasources": [{
                "name": opts.datasource or "Prometheus",
                "uid": opts.datasource_uid or "spectrace-prometheus",
                "type": "prometheus", "access": "proxy", "url": opts.prometheus_url,
                "isDefault": True, "jsonData": {"timeInterval": opts.scrape_interval}}]})


def files(opts: Options = Options()) -> dict[str, str]:
    """Path under the output folder -> the text it holds."""
    name, uid = opts.datasource, opts.datasource_uid
    selected = (name or uid, uid or name) if name or uid else None
    return {
        DASHBOARD: json.dumps(overview.dashboard(opts.matchers, selected), indent=2) + "\n",
        RULES: _rules(opts),
        DASHBOARD_PROVIDER: _dashboard_provider(opts),
        DATASOURCE: _datasource(opts),
    }
