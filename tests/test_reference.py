"""`acceptance.below_reference` (rules.reference, report.reference_source): the rule's floor,
margin and standard errors; the sources in order (the report's setting, the server's
recorded setting, speculators' val_metrics.json next to the draft) and the source named
in the finding; a bad setting is refused with its variable named; and the file as
speculators' own trainer code writes it (trainers tier)."""
from __future__ import annotations

import json
import subprocess

import pytest

from spectrace import names, signals
from spectrace.cli import main as cli_main
from spectrace.file_layout import METRICS_FILE, RESOURCE_FILE
from spectrace.report import build_report
from spectrace.report.summary import ReportError
from spectrace.rules import reference


def test_rule_floor_margin_and_errors(monkeypatch):
    ref = reference.from_setting(3.0, "test")
    two = {"2": 300}  # every request-step accept length 2: no spread
    f = reference.judge(ref, two)
    assert f.code == names.BELOW_REFERENCE and f.details["length"] == 2.0
    assert "SPECTRACE_EXPECTED_ACCEPT_LENGTH=3 (test)" in f.message and "67%" in f.message
    assert reference.judge(ref, {"2": reference.FLOOR - 1}) is None   # under the floor
    assert reference.judge(reference.from_setting(2.3, "t"), two) is None  # 87 %: within margin
    assert reference.judge(None, two) is None
    # 4.5 on average, half at 1 and half at 8 over 200 request-steps: a standard error of
    # 0.25, so without the margin a reference of 5.0 is within 3 of them, 5.3 is not
    monkeypatch.setattr(reference, "MARGIN", 0.0)
    wide = {"1": 100, "8": 100}
    assert reference.judge(reference.from_setting(5.0, "t"), wide) is None
    assert reference.judge(reference.from_setting(5.3, "t"), wide) is not None


def test_speculators_figures_truncated_to_served_steps():
    m = {"full_acc_0_epoch": 0.8, "full_acc_1_epoch": 0.6, "full_acc_2_epoch": 0.4,
         "full_acc_3_epoch": 0.3, "loss_epoch": 1.2}
    assert reference.from_speculators(m, 3, "x").accept_length == pytest.approx(2.8)
    assert reference.from_speculators(m, 5, "x") is None        # a step it did not validate
    assert reference.from_speculators({"full_acc_0_epoch": "0.8"}, 1, "x") is None
    assert reference.from_speculators({"full_acc_0_epoch": 1.5}, 1, "x") is None


def _process(tmp_path, resource: dict, lengths: dict) -> str:
    d = tmp_path / "sglang-host-1"
    d.mkdir(parents=True)
    drafts = sum(lengths.values())
    acc = sum((int(k) - 1) * v for k, v in lengths.items())
    m = {signals.SPEC_DRAFTS.name: [{"attributes": {}, "value": drafts}],
         signals.SPEC_ACCEPTED_TOKENS.name: [{"attributes": {}, "value": acc}],
         signals.SPEC_ACCEPT_LENGTH.name: [{"attributes": {signals.ATTR_LENGTH: k}, "value": v}
                                           for k, v in lengths.items()],
         signals.SPEC_ACCEPTED_PER_POSITION.name: [
             {"attributes": {signals.ATTR_POSITION: p}, "value": 0} for p in range(3)]}
    (d / METRICS_FILE).write_text(json.dumps({"time": 1.0, "metrics": m}) + "\n")
    (d / RESOURCE_FILE).write_text(json.dumps({"attributes": resource, "started": 0}))
    return str(tmp_path)


def _below(report) -> list[dict]:
    return [f for f in report.to_json()["combined"]["findings"]
            if f["code"] == names.BELOW_REFERENCE]


def test_sources_in_order(tmp_path, monkeypatch):
    draft = tmp_path / "draft"
    draft.mkdir()
    (draft / "val_metrics.json").write_text(json.dumps(
        {f"full_acc_{i}_epoch": a for i, a in enumerate((0.9, 0.8, 0.7))}))
    run = _process(tmp_path / "run", {signals.RES_DRAFT_MODEL: str(draft)}, {"2": 400})
    monkeypatch.delenv(reference.SETTING, raising=False)
    (f,) = _below(build_report(run))  # the trainer's: 1 + 2.4 = 3.4
    assert f["details"]["reference"] == 3.4 and f["details"]["reference_kind"] == "trainer"
    assert "speculators' validation" in f["message"] and str(draft) in f["message"]
    # the report's own setting wins, and a reference the run meets raises nothing
    monkeypatch.setenv(reference.SETTING, "2.1")
    assert _below(build_report(run)) == []
    monkeypatch.setenv(reference.SETTING, "2.5")
    (f,) = _below(build_report(run))
    assert "SPECTRACE_EXPECTED_ACCEPT_LENGTH=2.5 (set for spectrace report)" in f["message"]


def test_servers_recorded_setting(tmp_path, monkeypatch):
    monkeypatch.delenv(reference.SETTING, raising=False)
    run = _process(tmp_path, {signals.RES_EXPECTED_ACCEPT_LENGTH: 3.0}, {"2": 400})
    (f,) = _below(build_report(run))
    assert "SPECTRACE_EXPECTED_ACCEPT_LENGTH=3 (the server's setting)" in f["message"]
    assert f["severity"] == "warning"


def test_bad_setting_is_refused_with_its_name(tmp_path, monkeypatch, capsys):
    run = _process(tmp_path, {}, {"2": 400})
    monkeypatch.setenv(reference.SETTING, "fast")
    with pytest.raises(ReportError, match="SPECTRACE_EXPECTED_ACCEPT_LENGTH='?fast'?: "
                                          "expected a mean accept length"):
        build_report(run)
    assert cli_main(["report", run]) == 2


@pytest.mark.trainers
def test_speculators_own_val_metrics_file(tmp_path, monkeypatch):
    """speculators' validation code on real tensors (three draft steps, the second step
    wrong on half the positions), its normalisation and its checkpointer's writer: the
    file lands in the epoch folder, and the reference is 1 + the sum of full_acc."""
    from tests.conftest import trainers_python_or_skip
    program = f"""
import torch
from speculators.models.metrics import compute_accuracy_single_step
from speculators.train.checkpointer import SingleGPUCheckpointer
from speculators.train.utils import normalize_counted_metrics
target = torch.arange(8).view(1, 8)
prev = torch.ones(1, 8, dtype=torch.bool)
metrics = {{}}
for step, pred in enumerate((target, torch.where(target % 2 == 0, target, -1), target)):
    fc, ft, cc, ct = compute_accuracy_single_step(pred, target, None, prev)
    metrics[f"full_acc_{{step}}_sum"], metrics[f"full_acc_{{step}}_total"] = fc.item(), ft.item()
metrics = {{f"{{k}}_epoch": v for k, v in normalize_counted_metrics(metrics).items()}}
SingleGPUCheckpointer({str(tmp_path / 'ckpt')!r}).save_val_metrics(0, metrics)
"""
    subprocess.run([trainers_python_or_skip(), "-c", program], check=True, timeout=300)
    draft = tmp_path / "ckpt" / "0"
    metrics = json.loads((draft / "val_metrics.json").read_text())
    assert metrics == {"full_acc_0_epoch": 1.0, "full_acc_1_epoch": 0.5,
                       "full_acc_2_epoch": 0.5}
    run = _process(tmp_path / "run", {signals.RES_DRAFT_MODEL: str(draft)}, {"1": 400})
    monkeypatch.delenv(reference.SETTING, raising=False)
    (f,) = _below(build_report(run))
    assert f["details"]["reference"] == 3.0 and f["details"]["length"] == 1.0
