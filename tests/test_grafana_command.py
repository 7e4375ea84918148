"""`spectrace grafana`: it writes the repository's grafana/ files by default, applies a
deployment's label matchers to every query and rule and its datasource to the dashboard
and the provisioning, refuses bad options naming them, and `--check` names each panel and
rule that differs after a planted edit. The YAML it writes (without a YAML library) reads
back as the data it was made from, and promtool accepts its rules with matchers.

Grafana's own schema: tests/test_grafana_schema.py; from an installed wheel:
tests/test_wheel.py."""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from spectrace.grafana import alerts, files, overview, yamltext
from spectrace.grafana.files import DASHBOARD, DATASOURCE, RULES

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
GRAFANA = os.path.join(ROOT, "grafana")
PROMTOOL = shutil.which("promtool")
SELECTORS = ['namespace="prod"', 'job=~"sglang-.*"']
SELECTOR = re.compile(r"\b([a-zA-Z_:][\w:]*)\{([^}]*)\}")


def grafana(*args, cwd=ROOT):
    return subprocess.run([sys.executable, "-m", "spectrace.cli", "grafana", *map(str, args)],
                          capture_output=True, text=True, timeout=60, cwd=cwd)


def read_all(folder) -> dict[str, str]:
    out = {}
    for path in files.files():
        with open(os.path.join(folder, path), encoding="utf-8") as fh:
            out[path] = fh.read()
    return out


def test_out_writes_the_repository_files(tmp_path):
    out = grafana("--out", tmp_path / "g")
    assert out.returncode == 0, out.stderr
    assert read_all(tmp_path / "g") == read_all(GRAFANA)
    assert sorted(files.files()) == sorted(
        os.path.relpath(os.path.join(d, f), tmp_path / "g").replace(os.sep, "/")
        for d, _, fs in os.walk(tmp_path / "g") for f in fs)
    assert "rule_files" in out.stdout and "/api/dashboards/db" in out.stdout


def _queries(texts: dict[str, str]) -> list[tuple[str, str]]:
    """(where, PromQL) of every panel target, template variable and alert rule."""
    d = json.loads(texts[DASHBOARD])
    out = [(p["title"], t["expr"]) for p in d["panels"] for t in p["targets"]]
    out += [(v["name"], v["query"]["query"]) for v in d["templating"]["list"]
            if v["type"] == "query"]
    out += [(r["alert"], r["expr"]) for r in yaml.safe_load(texts[RULES])["groups"][0]["rules"]]
    return out


def test_selectors_reach_every_series_of_every_query_and_rule():
    plain = _queries(files.files())
    texts = files.files(files.Options(selectors=tuple(SELECTORS)))
    narrowed = _queries(texts)
    assert [w for w, _ in narrowed] == [w for w, _ in plain] and len(narrowed) > 30
    seen = 0
    for where, expr in narrowed:
        selectors = SELECTOR.findall(re.sub(r'"(?:\\.|[^"\\])*"', lambda m: m.group(0)
                                            .replace("{", "(").replace("}", ")"), expr))
        assert selectors, where
        for metric, body in selectors:
            assert all(s in body for s in SELECTORS), (where, metric, body)
            seen += 1
    # a metric written bare (no braces) in the plain files gets braces too (labels in
    # by/on/group_left clauses, such as spectrace_draft_model, are not metrics)
    bare = re.compile(r"\bspectrace_\w+(?![\w{])")
    clause = re.compile(r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)")
    variables = {v["name"] for v in json.loads(texts[DASHBOARD])["templating"]["list"]}
    assert not [w for w, e in narrowed if w not in variables
                and bare.search(clause.sub("", re.sub(r"\{[^}]*\}", "{}", e)))]
    assert seen > 60


def test_options_give_back_their_arguments():
    opts = files.Options(selectors=tuple(SELECTORS), datasource="P", scrape_interval="1m")
    assert opts.arguments() == ["--selector", SELECTORS[0], "--selector", SELECTORS[1],
                                "--datasource", "P", "--scrape-interval", "1m"]
    assert files.Options().arguments() == []


def test_datasource_options_reach_the_dashboard_and_the_provisioning():
    texts = files.files(files.Options(datasource="Prom main", datasource_uid="prom-1",
                                      prometheus_url="http://10.1.2.3:9090/prom",
                                      scrape_interval="15s",
                                      dashboards_path="/srv/grafana/spectrace"))
    [ds] = yaml.safe_load(texts[DATASOURCE])["datasources"]
    assert (ds["name"], ds["uid"], ds["url"], ds["jsonData"]["timeInterval"]) == (
        "Prom main", "prom-1", "http://10.1.2.3:9090/prom", "15s")
    [provider] = yaml.safe_load(texts[files.DASHBOARD_PROVIDER])["providers"]
    assert provider["options"]["path"] == "/srv/grafana/spectrace"
    [var] = [v for v in json.loads(texts[DASHBOARD])["templating"]["list"]
             if v["type"] == "datasource"]
    assert (var["current"]["text"], var["current"]["value"]) == ("Prom main", "prom-1")
    # the default: no datasource chosen, Grafana's default datasource is used
    [var] = [v for v in json.loads(files.files()[DASHBOARD])["templating"]["list"]
             if v["type"] == "datasource"]
    assert "current" not in var


@pytest.mark.parametrize("args, names", [
    (["--selector", "namespace=prod"], ['--selector', 'namespace="prod"']),
    (["--selector", 'namespace="prod"}'], ["--selector", "NAME=~"]),
    (["--datasource-uid", "has space"], ["--datasource-uid", "1-40"]),
    (["--prometheus-url", "prometheus:9090"], ["--prometheus-url", "http://"]),
    (["--scrape-interval", "15"], ["--scrape-interval", "15s"]),
    (["--dashboards-path", "dashboards"], ["--dashboards-path", "absolute"]),
])
def test_bad_options_exit_2_naming_them(tmp_path, args, names):
    out = grafana("--out", tmp_path / "g", *args)
    assert out.returncode == 2 and out.stdout == ""
    assert out.stderr.count("\n") == 1 and out.stderr.startswith("spectrace grafana: ")
    assert all(n in out.stderr for n in names), out.stderr
    assert not (tmp_path / "g").exists()


def test_check_passes_on_the_repository_and_on_what_out_wrote(tmp_path):
    out = grafana("--check", GRAFANA)
    assert out.returncode == 0 and "as spectrace" in out.stdout, out.stdout + out.stderr
    assert grafana("--out", tmp_path, "--selector", SELECTORS[0]).returncode == 0
    assert grafana("--check", tmp_path, "--selector", SELECTORS[0]).returncode == 0
    # the options are part of what is compared, and the rule file says which were used
    out = grafana("--check", tmp_path)
    assert out.returncode == 1 and "rule SpectraceFcBypass differs" in out.stdout
    assert out.stdout.startswith(f"note: {tmp_path} was written with `spectrace grafana --out "
                                 f"{tmp_path} --selector 'namespace=\"prod\"'`: give --check")
    assert "note:" not in grafana("--check", GRAFANA).stdout


def test_check_names_the_panels_and_rules_a_planted_edit_changed(tmp_path):
    assert grafana("--out", tmp_path).returncode == 0
    path = tmp_path / DASHBOARD
    d = json.loads(path.read_text())
    by_title = {p["title"]: p for p in d["panels"]}
    by_title["Acceptance rate"]["targets"][0]["expr"] += " * 2"
    by_title["Position-0 acceptance"]["fieldConfig"]["defaults"]["thresholds"]["steps"][1][
        "value"] = 0.3
    d["panels"].remove(by_title["Tokens per second"])
    d["panels"].append({**by_title["Dropped weights"], "title": "An old panel", "id": 99})
    d["refresh"] = "5s"
    path.write_text(json.dumps(d, indent=2))
    rules = (tmp_path / RULES).read_text()
    rules = rules.replace("> 0'\n        for: 0m\n        labels:\n          severity: critical\n"
                          "        annotations:\n          summary: 'EAGLE-3 draft skipped fc",
                          "> 5'\n        for: 0m\n        labels:\n          severity: critical\n"
                          "        annotations:\n          summary: 'EAGLE-3 draft skipped fc")
    head, internal = rules.split("      - alert: SpectraceInternalErrors\n")
    (tmp_path / RULES).write_text(head.replace("SpectraceDraftNonFinite", "SpectraceDraftNaN"))
    (tmp_path / DATASOURCE).write_text((tmp_path / DATASOURCE).read_text().replace("5s", "1m"))
    (tmp_path / files.DASHBOARD_PROVIDER).unlink()
    out = grafana("--check", tmp_path)
    assert out.returncode == 1, out.stdout + out.stderr
    assert out.stdout.splitlines()[:-1] == [
        f"{DASHBOARD}: dashboard settings differ: refresh",
        f"{DASHBOARD}: panel 'Acceptance rate' differs: targets",
        f"{DASHBOARD}: panel 'Position-0 acceptance' differs: fieldConfig",
        f"{DASHBOARD}: panel 'Tokens per second' is new in this version",
        f"{DASHBOARD}: panel 'An old panel' is not in this version",
        f"{RULES}: rule SpectraceFcBypass differs",
        f"{RULES}: rule SpectraceDraftNonFinite is new in this version",
        f"{RULES}: rule SpectraceInternalErrors is new in this version",
        f"{RULES}: rule SpectraceDraftNaN is not in this version",
        f"{files.DASHBOARD_PROVIDER}: missing",
        f"{DATASOURCE}: differs",
    ]
    assert out.stdout.splitlines()[-1].startswith("11 difference(s) from spectrace ")


def test_check_of_no_folder_or_bad_json_is_said(tmp_path):
    out = grafana("--check", tmp_path / "nope")
    assert out.returncode == 2 and "not a folder" in out.stderr
    assert grafana("--out", tmp_path).returncode == 0
    (tmp_path / DASHBOARD).write_text("{not json")
    out = grafana("--check", tmp_path)
    assert out.returncode == 1 and f"{DASHBOARD}: not valid JSON" in out.stdout


def test_out_into_an_unwritable_place_exit_2(tmp_path):
    (tmp_path / "file").write_text("")
    out = grafana("--out", tmp_path / "file")
    assert out.returncode == 2 and out.stderr.count("\n") == 1 and "--out" in out.stderr


def test_layout_places_panels_in_rows_without_overlap():
    panels = overview.panels()
    cells = set()
    for p in panels:
        g = p["gridPos"]
        assert g["x"] + g["w"] <= overview.GRID_WIDTH, p["title"]
        mine = {(x, y) for x in range(g["x"], g["x"] + g["w"])
                for y in range(g["y"], g["y"] + g["h"])}
        assert not cells & mine, p["title"]
        cells |= mine
    assert [p["id"] for p in panels] == list(range(1, len(panels) + 1))
    rows = overview.rows()
    rows[1].append(rows[1][0])  # a third 12-wide panel: 36 columns
    with pytest.raises(ValueError, match="past the grid's 24"):
        overview.layout(rows)


# -- YAML without a YAML library ---------------------------------------------------------
def test_yaml_reads_back_as_the_data():
    for data in (alerts.rules(), alerts.rules(", ".join(SELECTORS)), alerts.rule_tests()):
        assert yaml.safe_load(yamltext.dump(data)) == data
    for path in (RULES, DATASOURCE, files.DASHBOARD_PROVIDER):
        assert yaml.safe_load(files.files()[path])  # comments and all


SCALARS = st.one_of(st.none(), st.booleans(), st.integers(), st.text(),
                    st.floats(allow_nan=False), st.sampled_from(
                        ["on", "No", "~", "5m", "1e3", "0x1f", "1:20", "a: b", "#x", "- x",
                         "http://h:9/p", "/a/b", "it's", 'say "x"', "a\nb", "\t", "2020-01-01",
                         "a:", "null", "", " lead", "trail "]))
DATA = st.recursive(SCALARS, lambda inner: st.one_of(
    st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=8), inner, max_size=4)),
    max_leaves=20)


@settings(max_examples=300, deadline=None)
@given(st.dictionaries(st.text(max_size=8), DATA, max_size=5))
def test_yaml_reads_back_any_data(data):
    assert yaml.safe_load(yamltext.dump(data)) == (data or None)


@pytest.mark.prometheus
@pytest.mark.skipif(PROMTOOL is None and not os.environ.get("CI"),
                    reason="apt-get install -y prometheus (promtool)")
def test_promtool_accepts_the_rules_with_selectors(tmp_path):
    assert grafana("--out", tmp_path, *sum((["--selector", s] for s in SELECTORS), [])
                   ).returncode == 0
    out = subprocess.run([PROMTOOL, "check", "rules", str(tmp_path / RULES)],
                         capture_output=True, text=True)
    n = len(alerts.rules()["groups"][0]["rules"])
    assert out.returncode == 0 and f"SUCCESS: {n} rules found" in out.stdout, \
        out.stdout + out.stderr
