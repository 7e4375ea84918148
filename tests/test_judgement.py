"""The report's judgement (`spectrace/report/judgement.py`): every rule declares the
findings it raises, and the declarations hold what the alert rules and docs/metrics.md
say."""
from __future__ import annotations

import os

import pytest

from spectrace.findings import ERROR, Finding
from spectrace.grafana import alerts
from spectrace.report import judgement
from spectrace.rules import drift

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_each_code_is_declared_once_with_its_words():
    codes = [s.code for r in judgement.RULES for s in r.specs]
    assert len(codes) == len(set(codes)) == len(judgement.SPECS)
    for s in judgement.SPECS.values():
        assert s.what and s.floor and s.message is not None and s.message.code == s.code


def test_every_declared_alert_is_an_alert_rule():
    names = {r["alert"] for g in alerts.rules()["groups"] for r in g["rules"]}
    declared = {s.alert for s in judgement.SPECS.values() if s.alert}
    assert declared and declared <= names, declared - names


def test_metrics_doc_lists_every_declared_finding():
    with open(os.path.join(ROOT, "docs", "metrics.md"), encoding="utf-8") as fh:
        doc = fh.read()
    for s in judgement.SPECS.values():
        assert f"| `{s.code}` | {s.severity} | " in doc, s.code


def test_a_rule_raising_an_undeclared_code_is_a_bug(monkeypatch):
    rogue = judgement.ReportRule(
        (drift.SPEC,), lambda e: [Finding("made.up", ERROR, "x")])
    monkeypatch.setattr(judgement, "RULES", (rogue,))
    with pytest.raises(ValueError, match="made.up"):
        judgement.judge(None)
