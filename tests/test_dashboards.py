"""Static checks of the generated Grafana dashboards, alert rules and docs/metrics.md.

Why: a dashboard query that names a metric spectrace does not export shows "No data"
instead of a broken deployment; these checks tie every name to `spectrace.signals`.
The end-to-end proof against a real Prometheus is tests/test_prometheus_e2e.py.
"""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys

import pytest
import yaml

from spectrace import signals as S

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
GRAFANA = os.path.join(ROOT, "grafana")
sys.path.insert(0, GRAFANA)
import build_dashboards  # noqa: E402
from spectrace.grafana import metrics_doc  # noqa: E402

DASHBOARD_DIR = os.path.join(GRAFANA, "dashboards")
RULES = os.path.join(GRAFANA, "alerts", "spectrace-rules.yml")
PROMTOOL = shutil.which("promtool")
RESOURCE_LABELS = {lbl for _, lbl, _ in metrics_doc.RESOURCE}
SCRAPE_LABELS = {"job", "instance"}


def _dashboards() -> dict[str, dict]:
    out = {}
    for f in sorted(os.listdir(DASHBOARD_DIR)):
        with open(os.path.join(DASHBOARD_DIR, f)) as fh:
            out[f] = json.load(fh)  # fails on invalid JSON
    return out


def _rules() -> list[dict]:
    with open(RULES) as fh:
        return [r for g in yaml.safe_load(fh)["groups"] for r in g["rules"]]


def _metric_names() -> dict[str, S.MetricSpec]:
    """Every name a metric may arrive under (histograms as _bucket/_sum/_count)."""
    out = {}
    for m in S.ALL_METRICS:
        names = [m.prometheus_name]
        if m.kind == "histogram":
            names += [m.prometheus_name + s for s in ("_bucket", "_sum", "_count")]
        out.update({n: m for n in names})
    return out


def all_exprs() -> list[tuple[str, str]]:
    """(where, PromQL) of every panel target, alert rule and docs figure."""
    out = [(f"{f}: {p['title']}", t["expr"]) for f, d in _dashboards().items()
           for p in d["panels"] for t in p["targets"]]
    out += [(f"rule {r['alert']}", r["expr"]) for r in _rules()]
    out += [(f"docs: {t}", e) for t, e, _ in metrics_doc.derived_queries()]
    out += [(f"variable {v['name']}", re.match(r"label_values\((.*),\s*\w+\)$",
                                                v["query"]["query"]).group(1))
            for d in _dashboards().values() for v in d["templating"]["list"]
            if v["type"] == "query"]
    return out


STRING = re.compile(r'"(?:\\.|[^"\\])*"')
SELECTOR = re.compile(r"\b([a-zA-Z_:][\w:]*)\s*\{([^}]*)\}")
CLAUSE = re.compile(r"\b(by|without|on|ignoring|group_left|group_right)\s*\(([^)]*)\)")


def referenced(expr: str) -> tuple[set[str], list[tuple[str, str]]]:
    """(metric names, (metric, label) pairs used in selectors and by/on clauses)."""
    labels = [(m, lbl.strip()) for m, body in SELECTOR.findall(STRING.sub('""', expr))
              for lbl in re.findall(r"(\w+)\s*(?:=~|!~|!=|=)", body)]
    labels += [("", lbl.strip()) for _, body in CLAUSE.findall(expr)
               for lbl in body.split(",") if lbl.strip()]
    bare = CLAUSE.sub(" ", re.sub(r"\[[^\]]*\]", "", re.sub(r"\{[^}]*\}", "",
                                                          STRING.sub('""', expr))))
    bare = re.sub(r"\b(group_left|group_right|bool|and|or|unless|offset)\b", " ", bare)
    names = set(re.findall(r"\b[a-zA-Z_:][\w:]*\b(?!\s*\()", bare))
    return names, labels


def test_referenced_is_not_blind():
    names, labels = referenced('sum by (job, position) (rate(x_total{code=~"a|b"}[5m])) '
                               '/ ignoring(position) group_left sum(y)')
    assert names == {"x_total", "y"}
    assert ("x_total", "code") in labels and ("", "position") in labels


def test_dashboards_are_valid_with_unique_ids_and_queries():
    dashboards = _dashboards()
    assert "spectrace-overview.json" in dashboards
    for f, d in dashboards.items():
        ids = [p["id"] for p in d["panels"]]
        assert len(ids) == len(set(ids)), f"{f}: duplicate panel ids {ids}"
        for p in d["panels"]:
            assert p["targets"], f"{f}: panel {p['title']!r} has no query"
            assert all(t.get("expr", "").strip() for t in p["targets"]), p["title"]
            refs = [t["refId"] for t in p["targets"]]
            assert len(refs) == len(set(refs)), p["title"]


def test_datasource_is_a_variable():
    for f, d in _dashboards().items():
        ds_vars = [v for v in d["templating"]["list"] if v["type"] == "datasource"]
        assert [v["query"] for v in ds_vars] == ["prometheus"], f
        ref = "${%s}" % ds_vars[0]["name"]
        for p in d["panels"]:
            assert p["datasource"]["uid"] == ref, p["title"]
            assert all(t["datasource"]["uid"] == ref for t in p["targets"]), p["title"]
        for v in d["templating"]["list"]:
            if v["type"] == "query":
                assert v["datasource"]["uid"] == ref, v["name"]


def test_filter_variables_exist_and_every_panel_uses_them():
    for f, d in _dashboards().items():
        names = {v["name"] for v in d["templating"]["list"]}
        assert {"datasource", "job", "instance", "tp_rank", "model"} <= names, f
        for p in d["panels"]:
            for t in p["targets"]:
                for metric in referenced(t["expr"])[0]:
                    assert re.search(metric + r'\{[^}]*job=~"\$job", instance=~"\$instance"',
                                     t["expr"]), (p["title"], metric)


def test_every_referenced_metric_and_label_exists_in_signals():
    known = _metric_names()
    attrs = {a for m in S.ALL_METRICS for a in m.attributes}
    attrs |= {"le"} if any(m.kind == S.HISTOGRAM for m in S.ALL_METRICS) else set()
    for where, expr in all_exprs():
        names, labels = referenced(expr)
        assert names, f"{where}: no metric in {expr}"
        unknown = names - set(known) - {"target_info"}
        assert not unknown, f"{where}: not exported by spectrace: {unknown}"
        for metric, label in labels:
            if metric == "target_info":
                allowed = RESOURCE_LABELS | SCRAPE_LABELS
            elif metric:
                allowed = set(known[metric].attributes) | SCRAPE_LABELS | (
                    {"le"} if known[metric].kind == S.HISTOGRAM else set())  # its buckets
            else:
                allowed = attrs | SCRAPE_LABELS | RESOURCE_LABELS
            assert label in allowed, f"{where}: label {label!r} on {metric or 'clause'}"


def test_acceptance_thresholds_follow_the_healthy_ranges():
    panels = {p["title"]: p for p in _dashboards()["spectrace-overview.json"]["panels"]}
    for title in ("Mean acceptance length", "Mean acceptance length over time"):
        steps = panels[title]["fieldConfig"]["defaults"]["thresholds"]["steps"]
        assert [(s["color"], s["value"]) for s in steps] == [
            ("red", None), ("orange", 1.2), ("green", 2.0)], title
    steps = panels["Position-0 acceptance"]["fieldConfig"]["defaults"]["thresholds"]["steps"]
    assert [(s["color"], s["value"]) for s in steps] == [("red", None), ("green", 0.2)]
    assert 'position="0"' in panels["Position-0 acceptance"]["targets"][0]["expr"]


def test_alert_rules_cover_the_issue():
    rules = {r["alert"]: r for r in _rules()}
    assert {"SpectraceAcceptanceCollapse", "SpectraceFcBypass", "SpectraceDroppedWeights",
            "SpectraceVocabularyMapError"} <= set(rules)
    for r in rules.values():
        assert r["labels"]["severity"] in ("critical", "warning"), r["alert"]
        assert r["annotations"]["summary"] and r["annotations"]["description"], r["alert"]
        # `<=`: the long-context rule's "at most RATIO", as its detector has it
        assert re.match(r"^\(.*\) (<|>|<=) [0-9.]+$", r["expr"], re.S), r["alert"]
    assert S.FC_BYPASS not in rules["SpectraceVocabularyMapError"]["expr"]
    assert "SpectraceLongContextAcceptance" in rules


def test_long_context_rule_tests_agree_with_the_detector():
    """The promtool cases of SpectraceLongContextAcceptance fire exactly where
    `spectrace report`'s detector (rules.context) raises acceptance.long_context on
    the same hour's counts: the rule is the detector's, not a look-alike."""
    from spectrace.rules import context as C
    with open(os.path.join(GRAFANA, "alerts", "spectrace-rules.test.yml")) as fh:
        tests = yaml.safe_load(fh)["tests"]
    [case] = [t for t in tests if any(a["alertname"] == "SpectraceLongContextAcceptance"
                                      and a["exp_alerts"] for a in t["alert_rule_test"])]
    steps, tokens = S.SPEC_ACCEPT_LENGTH_BY_CONTEXT, S.SPEC_ACCEPTED_TOKENS_BY_CONTEXT
    by: dict[str, dict] = {}  # instance -> (bucket, accept length) -> request-steps an hour
    accepted: dict[tuple[str, str], float] = {}  # (instance, bucket) -> tokens an hour
    for x in case["input_series"]:
        name, body = x["series"].split("{", 1)
        labels = dict(re.findall(r'(\w+)="([^"]*)"', body))
        per_minute = float(x["values"].split("+", 1)[1].split("x", 1)[0])
        if labels.get(S.ATTR_COUNTED) == S.COUNTED_COPY:
            continue  # the report counts a copy's request-steps never
        if name == steps.prometheus_name:
            key = (labels[S.ATTR_CONTEXT], int(labels[S.ATTR_LENGTH]))
            by.setdefault(labels["instance"], {})[key] = 60 * per_minute
        else:
            assert name == tokens.prometheus_name, name
            accepted[labels["instance"], labels[S.ATTR_CONTEXT]] = 60 * per_minute
    raised = {}
    for instance, counts in by.items():
        buckets = C.bucket_figures(counts)
        # the rule's tokens series hold what the accept lengths make
        assert {b.bucket: b.accepted_tokens for b in buckets} == {
            b: v for (i, b), v in accepted.items() if i == instance}
        f = C.long_context_finding(buckets)
        if f is not None:
            raised[instance] = (f.details["long"],
                                (f.details["long_length"] - 1) / (f.details["short_length"] - 1))
    [last] = [a for a in case["alert_rule_test"] if a["eval_time"] == "70m"]
    fired = {a["exp_labels"]["instance"]: a["exp_labels"]["context"] for a in last["exp_alerts"]}
    assert fired == {i: long for i, (long, _) in raised.items()}
    assert len(fired) == 2 and len(by) == 6  # under the floor, a small drop, too little a
    # fall and adjacent buckets do not fire (copies: the report skips them, as the rule)
    for a in last["exp_alerts"]:  # the rule's value: the detector's ratio of the two
        ratio = raised[a["exp_labels"]["instance"]][1]
        assert f" are {ratio:.2f} of the first bucket" in a["exp_annotations"]["description"]


def test_prefix_cache_rule_tests_agree_with_the_report():
    """The promtool cases of the prefix-cache alert fire exactly where `spectrace report`'s
    rule (`breakdown_gap` of the prefix-cache breakdown) finds a gap on the same hour's
    counts, on the same bucket, with the same ratio."""
    from spectrace.families.breakdowns import PREFIX_CACHE as B
    from spectrace.report.breakdown_figures import breakdown_gap
    from spectrace.rules.buckets import bucket_figures
    with open(os.path.join(GRAFANA, "alerts", "spectrace-rules.test.yml")) as fh:
        tests = yaml.safe_load(fh)["tests"]
    [case] = [t for t in tests if any(a["alertname"] == B.alert and a["exp_alerts"]
                                      for a in t["alert_rule_test"])]
    by: dict[str, dict] = {}  # instance -> (bucket, accept length) -> request-steps an hour
    for x in case["input_series"]:
        name, body = x["series"].split("{", 1)
        labels = dict(re.findall(r'(\w+)="([^"]*)"', body))
        if name == B.accept_length.prometheus_name:
            per_minute = float(x["values"].split("+", 1)[1].split("x", 1)[0])
            key = (labels[B.attribute], int(labels[S.ATTR_LENGTH]))
            by.setdefault(labels["instance"], {})[key] = 60 * per_minute
    found = {i: breakdown_gap(B, bucket_figures(c, 0, B.order)) for i, c in by.items()}
    raised = {i: g for i, g in found.items() if g is not None}
    [last] = [a for a in case["alert_rule_test"] if a["eval_time"] == "70m"]
    fired = {a["exp_labels"]["instance"]: a for a in last["exp_alerts"]}
    assert {i: a["exp_labels"][B.attribute] for i, a in fired.items()} == {
        i: g.worse.bucket for i, g in raised.items()}
    assert len(fired) == 2 and len(by) == 5  # under the floor, hits accepting more, 0.6x
    for i, a in fired.items():
        ratio = raised[i].worse.gain / raised[i].better.gain
        assert f" are {ratio:.2f} of the first bucket" in a["exp_annotations"]["description"]


def test_generated_files_are_current():
    assert build_dashboards.stale() == [], "run: python grafana/build_dashboards.py"


def test_metrics_doc_lists_every_metric():
    with open(os.path.join(ROOT, "docs", "metrics.md")) as fh:
        doc = fh.read()
    for m in S.ALL_METRICS:
        assert f"`{m.name}` | `{m.prometheus_name}`" in doc, m.name
    assert "spectrace_spec_accepted_tokens_total" in doc


def test_metrics_doc_lists_every_span_and_span_attribute():
    from spectrace.grafana import metrics_doc
    names = {v for k, v in vars(S).items() if k.startswith("SPAN_") and isinstance(v, str)}
    assert names == {name for name, _doc in metrics_doc.SPANS + metrics_doc.SPAN_ATTRIBUTES}
    with open(os.path.join(ROOT, "docs", "metrics.md")) as fh:
        doc = fh.read()
    assert all(f"| `{name}` |" in doc for name in names)


def test_provisioning_and_compose_point_at_real_files():
    with open(os.path.join(GRAFANA, "docker-compose.yml")) as fh:
        compose = yaml.safe_load(fh)
    for svc in compose["services"].values():
        for vol in svc.get("volumes", []):
            src = vol.split(":")[0]
            if src.startswith("."):
                assert os.path.exists(os.path.join(GRAFANA, src)), vol
    grafana_mounts = dict(v.split(":")[:2] for v in compose["services"]["grafana"]["volumes"])
    with open(os.path.join(GRAFANA, "provisioning", "dashboards", "spectrace.yml")) as fh:
        provider = yaml.safe_load(fh)["providers"][0]
    assert grafana_mounts["./dashboards"] == provider["options"]["path"]
    with open(os.path.join(GRAFANA, "provisioning", "datasources", "spectrace.yml")) as fh:
        ds = yaml.safe_load(fh)["datasources"][0]
    assert ds["type"] == "prometheus" and ds["url"].startswith("http://prometheus:")
    with open(os.path.join(GRAFANA, "otel-collector.yaml")) as fh:
        col = yaml.safe_load(fh)
    assert col["service"]["pipelines"]["metrics"]["exporters"] == ["prometheus"]


@pytest.mark.prometheus
@pytest.mark.skipif(PROMTOOL is None and not os.environ.get("CI"), reason="apt-get install -y prometheus (promtool)")
def test_promtool_accepts_rules_and_config(tmp_path):
    out = subprocess.run([PROMTOOL, "check", "rules", RULES], capture_output=True, text=True)
    assert out.returncode == 0, out.stdout + out.stderr
    with open(os.path.join(GRAFANA, "prometheus.yml")) as fh:
        cfg = yaml.safe_load(fh)
    cfg["rule_files"] = [RULES]
    (tmp_path / "prometheus.yml").write_text(yaml.safe_dump(cfg))
    out = subprocess.run([PROMTOOL, "check", "config", str(tmp_path / "prometheus.yml")],
                         capture_output=True, text=True)
    assert out.returncode == 0, out.stdout + out.stderr


@pytest.mark.prometheus
@pytest.mark.skipif(PROMTOOL is None and not os.environ.get("CI"), reason="apt-get install -y prometheus (promtool)")
def test_promtool_rule_unit_tests():
    """Synthetic series: a broken deployment fires fc bypass, dropped weights, vocabulary
    map and acceptance collapse alerts; a healthy one fires none."""
    out = subprocess.run([PROMTOOL, "test", "rules", "spectrace-rules.test.yml"],
                         cwd=os.path.join(GRAFANA, "alerts"), capture_output=True, text=True)
    assert out.returncode == 0, out.stdout + out.stderr


def test_side_by_side_panels_group_by_deployment_and_draft_from_target_info():
    """The A/B panels label each process's counts with its deployment and draft from
    target_info (joined on job/instance, filtered as every panel), add them up by those
    labels, and count each request-step once; the Deployment and Draft variables narrow
    the instance list, so every panel follows the choice."""
    d = _dashboards()["spectrace-overview.json"]
    panels = {p["title"]: p for p in d["panels"]}
    join = ('* on (job, instance) group_left (service_name, spectrace_draft_model, '
            'spectrace_draft_hash) target_info{job=~"$job", instance=~"$instance"}')
    for title, by in (("Mean acceptance length by deployment and draft", ""),
                      ("Per-position acceptance by deployment and draft", ", position")):
        [t] = panels[title]["targets"]
        expr = t["expr"]
        groups = f"sum by (service_name, spectrace_draft_model, spectrace_draft_hash{by}) ("
        assert expr.count(join) == 2 and expr.count(groups) >= 1, expr
        assert expr.count("sum by (service_name, spectrace_draft_model, "
                          "spectrace_draft_hash) (") == (2 if not by else 1), expr
        assert expr.count(f"sum by (job, instance{by}) (rate(") >= 1, expr
        # every counted-once series without its copies
        assert expr.count('counted!="copy"') == 2, expr
        assert "{{spectrace_draft_model}}" in t["legendFormat"], t["legendFormat"]
    queries = {v["name"]: v["query"]["query"] for v in d["templating"]["list"]
               if v["type"] == "query"}
    assert queries["deployment"].endswith(", service_name)")
    assert queries["draft"].endswith(", spectrace_draft_model)")
    assert 'service_name=~"$deployment", spectrace_draft_model=~"$draft"' in queries["instance"]


def test_fleet_panels_judge_each_deployment_past_its_floors():
    """The fleet row's per-deployment speed-up and acceptance against the reference: each
    process's series labelled with its deployment and draft from target_info and added up
    by them (counted once), matched on those labels (no scalar(): one figure per
    deployment), kept only past the floors of the advisor and of the reference rule."""
    from spectrace.grafana import promql as Q
    from spectrace.rules import reference, speculation
    d = _dashboards()["spectrace-overview.json"]
    panels = {p["title"]: p for p in d["panels"]}
    on = "on(service_name, spectrace_draft_model)"
    join = ('* on (job, instance) group_left (service_name, spectrace_draft_model) '
            'target_info{job=~"$job", instance=~"$instance"}')
    [speedup] = panels["Estimated speed-up by deployment and draft"]["targets"]
    expr = speedup["expr"]
    assert "scalar(" not in expr and join in expr and f"{on} group_left()" in expr, expr
    assert expr.endswith(f"and {on} {Q.speedup_floor('$__range', Q.DASHBOARD_FILTER, Q.FLEET)}")
    assert f">= {speculation.MIN_STEPS})" in expr and f">= {speculation.MIN_DRAFTS}))" in expr
    [ratio] = panels["Acceptance against its reference by deployment and draft"]["targets"]
    expr = ratio["expr"]
    assert S.SPEC_REFERENCE_ACCEPT_LENGTH.prometheus_name in expr and join in expr, expr
    assert expr.endswith(f">= {reference.FLOOR})") and expr.count('counted!="copy"') == 3, expr
    steps = panels["Acceptance against its reference by deployment and draft"][
        "fieldConfig"]["defaults"]["thresholds"]["steps"]
    assert steps[1]["color"] == "green" and steps[1]["value"] > 1 - reference.MARGIN
    assert steps[1]["value"] == pytest.approx(1 - reference.MARGIN, abs=1e-12)  # red at it
    for t in (speedup, ratio):
        assert t["legendFormat"] == "{{service_name}} {{spectrace_draft_model}}"
