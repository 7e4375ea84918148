"""What acceptance means under the verification in use (`rules.verification`, issue 48): a
lossy method (vLLM's FLy, SGLang's accept thresholds below 1) is a finding and named in
the verdict of every view; a comparison between runs that verify differently says so.
On the recorded advisor run (tests/recorded/advisor/full-k3), its resource given the
setting as the exporter writes it; SGLang's value read by the real reader from the
ServerArgs SGLang 0.5.23 resolved; vLLM's `fly` from the VllmConfig vLLM 0.33's own
config classes resolve (its released sources on the 0.32 CPU build's dependencies); every
vLLM release's methods from its sources.
"""
from __future__ import annotations

import html
import json
import os
import re
import shutil
import subprocess

import pytest

from spectrace import server_settings
from spectrace.cli import main
from spectrace.report import build_report, render_text
from spectrace.report.compare import compare_reports
from spectrace.report.html import render_html
from spectrace.rules import verification

HERE = os.path.dirname(os.path.abspath(__file__))
FULL = os.path.join(HERE, "recorded", "advisor", "full-k3")
NOTE = ("Acceptance under lossy verification (FLy (rejection_sample_method \"fly\")) is not "
        "comparable with standard verification's.")


def _run_with(tmp_path, name, settings: dict):
    """The recorded run, its process's resource holding `settings`
    (`spectrace.setting.<key>`, as `server_settings.resource_attributes` writes them)."""
    dst = tmp_path / name
    shutil.copytree(FULL, dst)
    [proc] = [d for d in dst.iterdir() if d.is_dir()]
    path = proc / "resource.json"
    doc = json.loads(path.read_text())
    doc["attributes"].update(server_settings.resource_attributes(settings))
    path.write_text(json.dumps(doc))
    return dst


def test_fly_is_a_finding_and_named_in_every_views_verdict(tmp_path, capsys):
    run = _run_with(tmp_path, "fly", {"spec_method": "eagle3", "spec_verification": "fly"})
    report = build_report(str(run))
    assert report.verdict.sentence.endswith(NOTE), report.verdict.sentence
    [found] = [f for f in report.combined.findings if f.code == verification.CODE]
    assert found.severity == "info" and found.details["method"] == ["fly"]
    assert 'Fix: compare acceptance only with runs under the same verification; for the ' \
        'target\'s own output, serve with rejection_sample_method "standard"' in found.message
    text = render_text(report)
    assert NOTE in text.splitlines()[0] and "verification fly" in text  # verdict, header
    assert html.escape(NOTE) in render_html(report)
    assert main(["report", str(run), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["verdict"]["sentence"].endswith(NOTE)
    assert doc["settings"]["spec_verification"] == "fly"


@pytest.mark.parametrize("method", ["standard", "block", "rejection sampling", "strict",
                                    "probabilistic"])
def test_lossless_verification_is_no_finding_and_the_verdict_unchanged(tmp_path, method):
    plain = build_report(FULL)
    report = build_report(str(_run_with(tmp_path, "run", {"spec_verification": method})))
    assert verification.CODE not in {f.code for f in report.combined.findings}
    assert report.verdict.sentence == plain.verdict.sentence


def test_baseline_between_methods_says_what_the_change_means(tmp_path, capsys):
    standard = _run_with(tmp_path, "standard", {"spec_verification": "standard"})
    fly = _run_with(tmp_path, "fly", {"spec_verification": "fly"})
    block = _run_with(tmp_path, "block", {"spec_verification": "block"})
    assert main(["report", str(fly), "--baseline", str(standard), "--json"]) == 0
    c = json.loads(capsys.readouterr().out)["comparison"]
    assert c["config_differs"] == ["spec_verification"]
    rows = {r["key"]: r for r in c["config"]}
    assert (rows["spec_verification"]["baseline"], rows["spec_verification"]["current"]) == (
        "standard", "fly")
    assert c["sentence"].endswith(
        "; the runs differ in verification standard -> fly; acceptance under lossy "
        "verification (FLy (rejection_sample_method \"fly\")) is not comparable with standard "
        "verification's"), c["sentence"]
    lossless = compare_reports(build_report(str(block)), build_report(str(standard)))
    assert "the runs verify drafts differently (standard -> block): under sampling " \
        "acceptance depends on the method" in lossless.sentence
    same = compare_reports(build_report(str(fly)), build_report(str(fly)))
    assert "verif" not in same.sentence


def test_processes_that_differ_name_the_lossy_one():
    found = verification.judge({"spec_verification": ["standard", "fly"]})
    assert found is not None and found.details["method"] == ["fly"]
    assert verification.judge({"spec_verification": "synthetic"}) is None  # its own error
    assert verification.judge({}) is None


@pytest.mark.sglang
def test_sglang_accept_thresholds_below_one_read_and_named(tiny_models, tmp_path):
    """SGLang 0.5.23's ServerArgs with --speculative-accept-threshold-acc 0.5, resolved by
    SGLang and read by the real reader: the report names the relaxed verification."""
    from sglang.srt.server_args import prepare_server_args

    from harness.server import server_args
    from spectrace.adapters import sglang_settings
    args = prepare_server_args(server_args(tiny_models("partial"), 30000)
                               + ["--speculative-accept-threshold-acc", "0.5"])
    args.resolve_once()
    settings = sglang_settings.read(args)
    report = build_report(str(_run_with(tmp_path, "relaxed", settings)))
    assert report.verdict.sentence.endswith(
        "Acceptance under lossy verification (relaxed (accept threshold single 1, acc 0.5), "
        "for sampled requests on GPUs) is not comparable with standard verification's."), \
        report.verdict.sentence
    [found] = [f for f in report.combined.findings if f.code == verification.CODE]
    assert "--speculative-accept-threshold-single 1 --speculative-accept-threshold-acc 1" \
        in found.message


@pytest.mark.sources
def test_every_vllm_releases_methods_are_classified():
    """Each release's `RejectionSampleMethod` values are lossless, lossy or synthetic as
    `rules.verification` knows them (a new method fails here), and FLy (0.33) is lossy."""
    import wheel_sources as ws
    from test_vllm_wrap_points import VERSIONS, MRV2
    known = set(verification.LOSSLESS) | set(verification.LOSSY_VLLM) | {"synthetic"}
    seen = set()
    for version in sorted(set(VERSIONS) | set(MRV2)):
        text = ws.source("vllm", version, "vllm/config/speculative.py")
        literal = re.search(r"RejectionSampleMethod = Literal\[([^\]]*)\]", text)
        assert literal, version
        methods = set(re.findall(r'"([a-z_]+)"', literal.group(1)))
        assert methods <= known, (version, methods - known)
        seen |= methods
    assert "fly" in seen and verification.lossy("fly") and not verification.lossy("block")


@pytest.mark.vllm
@pytest.mark.sources
def test_vllm_033_fly_config_read_and_named(tiny_models, tmp_path):
    """vLLM 0.33's own EngineArgs resolve `rejection_sample_method: "fly"` (its window
    from K: min(6, K - 1)); spectrace's reader gives `fly`, and the report on a run with
    those settings names it in the verdict."""
    import release_sources as rs
    from harness.vllm_server import vllm_env
    from tests.conftest import ROOT, vllm_python_or_skip
    python = vllm_python_or_skip()
    tree = rs.python_tree("vllm", "0.33.0")
    env = vllm_env({"PYTHONPATH": os.pathsep.join((tree, ROOT)), "VLLM_TARGET_DEVICE": "cpu"})
    done = subprocess.run([python, os.path.join(ROOT, "tests", "programs", "vllm_fly_config.py"),
                           tiny_models("partial")], env=env, capture_output=True, text=True,
                          timeout=600)
    lines = [x for x in done.stdout.splitlines() if x.startswith("RESULT ")]
    assert lines, done.stderr[-3000:]
    got = json.loads(lines[-1][len("RESULT "):])
    assert got["vllm_file"].startswith(tree) and got["fly_window_size"] == 2
    assert got["settings"]["spec_verification"] == "fly"
    report = build_report(str(_run_with(tmp_path, "fly", got["settings"])))
    assert report.verdict.sentence.endswith(NOTE), report.verdict.sentence
