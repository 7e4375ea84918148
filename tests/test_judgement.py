"""The report's judgement (`spectrace/report/judgement.py`): every rule declares the
findings it raises, the declarations hold what the alert rules and docs/metrics.md say,
and a finding declared there reaches every view. `acceptance.nothing_accepted` is the
finding added this way (its rule module and one line in `RULES`); its floor is tested at
the edge. The folders are written by the tests' own helper (tests/test_verdict.py): the
rule reads totals, which a written folder fixes exactly."""
from __future__ import annotations

import os

import pytest

from spectrace.findings import ERROR, Finding
from spectrace.grafana import alerts
from spectrace.report import judgement, render_text
from spectrace.report.html import render_html
from spectrace.rules import nothing_accepted
from tests.test_verdict import BYPASS, write_run

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
NOTHING = nothing_accepted.CODE


def test_each_code_is_declared_once_with_its_words():
    codes = [s.code for r in judgement.RULES for s in r.specs]
    assert len(codes) == len(set(codes)) == len(judgement.SPECS)
    for s in judgement.SPECS.values():
        assert s.what and s.floor and s.message is not None and s.message.code == s.code


def test_every_declared_alert_is_an_alert_rule():
    from spectrace.families.findings import RUNTIME_SPECS
    names = {r["alert"] for g in alerts.rules()["groups"] for r in g["rules"]}
    for specs in (judgement.SPECS.values(), RUNTIME_SPECS):
        declared = {s.alert.name for s in specs if s.alert}
        assert declared and declared <= names, declared - names


def test_alert_rules_are_written_from_their_declarations():
    """Every declared alert (run-time findings, the report's, the breakdowns' gaps) is the
    rule of that name, word for word, with its severity and duration; a counted alert
    counts metrics that exist, and one shared by several codes matches exactly those."""
    from spectrace import signals
    from spectrace.families.breakdowns import BREAKDOWNS
    from spectrace.families.findings import RUNTIME_SPECS
    rules = {r["alert"]: r for g in alerts.rules()["groups"] for r in g["rules"]}
    specs = [*RUNTIME_SPECS, *judgement.SPECS.values(), *(b.spec for b in BREAKDOWNS if b.spec)]
    declared = {s.alert.name: s.alert for s in specs if s.alert}
    assert len(declared) >= 12
    for name, a in declared.items():
        r = rules[name]
        assert r["annotations"] == {"summary": a.summary, "description": a.description}, name
        assert (r["labels"]["severity"], r["for"]) == (a.severity, a.for_), name
        for metric in a.counts:
            assert signals.METRICS_BY_NAME[metric].prometheus_name in r["expr"], name
    vocab = [s.code for s in RUNTIME_SPECS
             if s.alert and s.alert.name == "SpectraceVocabularyMapError"]
    assert len(vocab) == 4
    expr = rules["SpectraceVocabularyMapError"]["expr"]
    assert all(code.replace(".", "\\\\.") in expr for code in vocab), expr


def test_an_alert_declared_with_a_new_finding_becomes_a_rule(monkeypatch):
    """The must-show of declaring once: a new run-time finding with an `Alert` and nothing
    else is a rule on the first finding of its code, worded as declared."""
    from spectrace.families import findings as runtime_findings
    from spectrace.findings import Alert, FindingSpec
    new = FindingSpec("draft.example", ERROR, "an example", alert=Alert(
        "SpectraceExample", "Example on {{ $labels.instance }}", "{{ $value }} examples."))
    monkeypatch.setattr(runtime_findings, "RUNTIME_SPECS", (*runtime_findings.RUNTIME_SPECS, new))
    monkeypatch.setattr(alerts, "RUNTIME_SPECS", runtime_findings.RUNTIME_SPECS)
    [rule] = [r for r in alerts.rules()["groups"][0]["rules"] if r["alert"] == "SpectraceExample"]
    assert rule["expr"] == ('(sum by (job, instance) (spectrace_findings_total'
                            '{code="draft.example"})) > 0'), rule["expr"]
    assert rule["labels"] == {"severity": "critical"} and rule["for"] == "0m"
    assert rule["annotations"]["summary"] == "Example on {{ $labels.instance }}"


def test_a_windowed_run_time_alert_is_refused_not_written_as_a_count(monkeypatch):
    """A run-time alert that compares windows has no generic query: building the rules
    says so, naming it, instead of writing it as a first-count rule."""
    from spectrace.findings import Alert, FindingSpec
    odd = FindingSpec("draft.example", ERROR, "an example", alert=Alert(
        "SpectraceWindowed", "s", "d", windowed=True))
    monkeypatch.setattr(alerts, "RUNTIME_SPECS", (*alerts.RUNTIME_SPECS, odd))
    with pytest.raises(ValueError, match="SpectraceWindowed.*windowed"):
        alerts.rules()


def test_an_alert_severity_is_one_prometheus_routes():
    from spectrace.findings import Alert
    with pytest.raises(ValueError, match="Alert.severity.*'error'.*SpectraceX"):
        Alert("SpectraceX", "s", "d", severity="error")


def test_runtime_findings_are_declared_once_and_documented():
    """Each run-time code once, with its words; docs/metrics.md's table lists them."""
    from spectrace.families.findings import RUNTIME_SPECS
    codes = [s.code for s in RUNTIME_SPECS]
    assert len(codes) == len(set(codes)) == 13
    with open(os.path.join(ROOT, "docs", "metrics.md"), encoding="utf-8") as fh:
        doc = fh.read()
    for s in RUNTIME_SPECS:
        assert s.what and s.floor and s.message is not None and s.message.code == s.code
        assert f"| `{s.code}` | {s.severity} | " in doc, s.code


def test_metrics_doc_lists_every_declared_finding():
    with open(os.path.join(ROOT, "docs", "metrics.md"), encoding="utf-8") as fh:
        doc = fh.read()
    for s in judgement.SPECS.values():
        assert f"| `{s.code}` | {s.severity} | " in doc, s.code
    row = next(line for line in doc.splitlines() if line.startswith(f"| `{NOTHING}` |"))
    assert f"{nothing_accepted.FLOOR} request-steps with draft tokens proposed" in row
    assert row.endswith("| - |")  # no alert of its own


def test_a_rule_raising_an_undeclared_code_is_a_bug(monkeypatch):
    rogue = judgement.ReportRule(
        (nothing_accepted.SPEC,), lambda e: [Finding("made.up", ERROR, "x")])
    monkeypatch.setattr(judgement, "RULES", (rogue,))
    with pytest.raises(ValueError, match="made.up"):
        judgement.judge(None)


@pytest.mark.parametrize("drafts, draft_tokens, accepted, fires", [
    (nothing_accepted.FLOOR - 1, 297, 0, False),   # under the floor: never
    (nothing_accepted.FLOOR, 300, 0, True),        # at it
    (5000, 15000, 1, False),                       # one token accepted: not "nothing"
    (5000, 0, 0, False),                           # nothing proposed (K = 0 steps)
])
def test_nothing_accepted_floor(drafts, draft_tokens, accepted, fires):
    found = nothing_accepted.judge(drafts, draft_tokens, accepted)
    assert (found is not None) == fires
    if fires:
        assert found.code == NOTHING and found.severity == ERROR
        assert found.details == {"drafts": drafts, "draft_tokens": draft_tokens,
                                 "floor": nothing_accepted.FLOOR}
        assert f"in {drafts} request-steps ({draft_tokens} draft tokens" in found.message


def test_nothing_accepted_in_every_view(tmp_path):
    """Text, JSON, HTML and the --watch screen all list it, and the verdict calls the run
    broken with its fix: no other finding names a cause here."""
    from rich.console import Console

    from spectrace.report.watch import render
    rep = write_run(tmp_path, {1: 240})
    assert rep.verdict.state == "broken"
    assert rep.verdict.sentence.startswith(
        "Verdict: broken: no draft token was accepted in 240 request-steps (720 draft tokens "
        f"proposed): each step costs a target forward and the drafting for the one token "
        f"the target makes alone, so speculation is slower than none ({NOTHING}). Fix: look "
        "for the cause among the other findings")
    view = rep.to_json()["processes"][0]
    [f] = [f for f in view["findings"] if f["code"] == NOTHING]
    assert f["severity"] == "error" and f["details"]["drafts"] == 240
    assert f"- {NOTHING} (error, x1): no draft token was accepted" in render_text(rep)
    html = render_html(rep)
    assert f"<td>{NOTHING}</td>" in html or f">{NOTHING}<" in html
    console = Console(width=400, record=True)
    console.print(render(rep, 2.0))
    assert f"- {NOTHING} (error, x1)" in console.export_text()


def test_an_event_finding_leads_the_verdict(tmp_path):
    """With a cause found by the instrumentation (an fc bypass), that cause leads the
    verdict and the count follows it."""
    rep = write_run(tmp_path, {1: 240}, events=[BYPASS])
    assert [c.source for c in rep.verdict.clues] == ["eagle3.fc_bypass", NOTHING]
    assert "1 more error finding below" in rep.verdict.sentence


def test_any_accepted_draft_keeps_it_quiet(tmp_path):
    """The same run with one request-step that accepted a token: weak, never this."""
    rep = write_run(tmp_path, {1: 239, 2: 1})
    assert NOTHING not in {f["code"] for f in rep.to_json()["processes"][0]["findings"]}
    assert rep.verdict.state == "underperforming"


def test_judged_findings_are_judged_again_for_all_processes(tmp_path):
    """Two processes, each under the floor, together past it: the combined view has it,
    the processes' own views do not (a finding the report judges is judged per view)."""
    write_run(tmp_path, {1: 60}, name="sglang-h-1")
    rep = write_run(tmp_path, {1: 60}, name="sglang-h-2")
    data = rep.to_json()
    assert all(NOTHING not in {f["code"] for f in p["findings"]} for p in data["processes"])
    assert NOTHING in {f["code"] for f in data["combined"]["findings"]}


def test_a_rules_doc_section_is_declared_with_it():
    """A finding's section of docs/metrics.md (`FindingSpec.doc_title`, `doc`) is written
    from its declaration, beside the rule (drift, the reference, replicas), in `RULES`
    order."""
    from spectrace.findings import FindingSpec
    from spectrace.grafana import metrics_doc, rules_doc
    page = metrics_doc.render()
    declared = [s for s in judgement.SPECS.values() if s.doc_title]
    assert [s.doc_title for s in declared] == ["Drift over time", "A reference",
                                               "One replica against its deployment"]
    for s in declared:
        assert f"## {s.doc_title}\n\n" + "\n\n".join(s.doc) + "\n" in page
    new = FindingSpec("acceptance.example", "info", "an example", doc_title="An example",
                      doc=("One.", "Two."))
    assert rules_doc.declared_sections([new]) == ["## An example", "", "One.", "", "Two.", ""]
