"""Two runs compared (`spectrace.rules.compare`, `spectrace.report.compare`,
`spectrace report DIR --baseline BASEDIR`): the statistics on hand-built bucket counts
(direct standardisation, intervals, floors, the design effect), and the command on the
folders real SGLang runs wrote (tests/recorded/advisor: `full` and `partial` at 3 draft
steps), with copies whose resource says another runtime and settings for the diff."""
from __future__ import annotations

import dataclasses
import json
import os
import shutil

import pytest

from spectrace import model_hash
from spectrace.cli import main
from spectrace.report import build_report
from spectrace.report.compare import MIX, ConfigRow, compare_reports
from spectrace.report.compare_text import render_comparison_text
from spectrace.rules import compare as cmp
from spectrace.rules.buckets import bucket_figures

HERE = os.path.dirname(os.path.abspath(__file__))
FULL = os.path.join(HERE, "recorded", "advisor", "full-k3")
PARTIAL = os.path.join(HERE, "recorded", "advisor", "partial-k3")
ORDER = {"<512": 0, "1k-2k": 1}


def _run(buckets: dict) -> tuple:
    """buckets: name -> {accept length: request-steps}: (the run as one bucket, its buckets)."""
    counts = {(b, k): n for b, hist in buckets.items() for k, n in hist.items()}
    whole: dict = {}
    for (_, k), n in counts.items():
        whole[k] = whole.get(k, 0) + n
    return cmp.whole_run(whole, 3), bucket_figures(counts, 3, ORDER)


def _compare(cur, base, effects=(1.0, 1.0)):
    (cw, cb), (bw, bb) = _run(cur), _run(base)
    return cmp.compare(cw, bw, {"context": (cb, bb)}, effects)


# short prompts accept 1 or 3 (mean 3.0), long ones 1 or 2 (mean 1.5)
SHORT = {2: 300, 4: 300}
LONG = {1: 150, 2: 150}


def test_moments_come_from_the_tail_counts():
    whole, _ = _run({"<512": {1: 10, 2: 20, 4: 10}})
    n, mean, var = cmp.moments(whole)
    lengths = [1] * 10 + [2] * 20 + [4] * 10
    mu = sum(lengths) / 40
    assert (n, mean) == (40, mu)
    assert var == pytest.approx(sum((x - mu) ** 2 for x in lengths) / 40)


def test_identical_runs_report_no_change():
    c = _compare({"<512": SHORT, "1k-2k": LONG}, {"<512": SHORT, "1k-2k": LONG})
    assert c.kind == cmp.NO_CHANGE
    assert c.total.value == 0 and c.total.low < 0 < c.total.high
    assert c.positions_fell() == ()


def test_a_mix_moved_to_long_prompts_is_the_traffic():
    base = {"<512": SHORT, "1k-2k": {1: 60, 2: 60}}          # 83 % short
    cur = {"<512": {2: 100, 4: 100}, "1k-2k": {1: 300, 2: 300}}  # 25 % short
    c = _compare(cur, base)
    assert c.kind == cmp.TRAFFIC
    assert c.explained_by.breakdown == "context"
    assert c.system.value == pytest.approx(0.0)
    assert c.traffic.value == pytest.approx(c.total.value)
    assert c.total.value < -0.5
    # direct standardisation: the baseline's bucket means at the current shares
    assert c.explained_by.standardised_baseline == pytest.approx(0.25 * 3.0 + 0.75 * 1.5)
    assert c.explained_by.grew.bucket == "1k-2k"


def test_every_bucket_falling_is_the_system_with_its_positions():
    base = {"<512": SHORT, "1k-2k": LONG}
    cur = {"<512": {2: 450, 4: 150}, "1k-2k": {1: 225, 2: 75}}  # the same mix, each lower
    c = _compare(cur, base)
    assert c.kind == cmp.SYSTEM
    s = c.explained_by
    assert all(b.change.value < 0 and b.change.high < 0 for b in s.buckets)
    assert c.system.value == pytest.approx(c.total.value)
    assert c.traffic.value == pytest.approx(0.0)
    fell = c.positions_fell()
    assert fell and all(s.positions[p].high < 0 for p in fell)
    assert fell[0] == min(range(3), key=lambda p: s.positions[p].value)


def test_a_change_below_the_floor_or_within_noise_is_not_reported():
    small = _compare({"<512": {2: 310, 4: 290}}, {"<512": SHORT})  # 0.07 lower
    assert abs(small.total.value) < cmp.MIN_LENGTH_CHANGE and small.kind == cmp.NO_CHANGE
    noisy = _compare({"<512": {2: 340, 4: 260}}, {"<512": SHORT}, effects=(100, 100))
    assert abs(noisy.total.value) >= cmp.MIN_LENGTH_CHANGE
    assert noisy.total.low < 0 < noisy.total.high and noisy.kind == cmp.NO_CHANGE
    few = _compare({"<512": {2: 50, 4: 50}}, {"<512": SHORT})
    assert few.kind == cmp.TOO_FEW and few.total is None


def test_buckets_below_their_floor_are_not_compared_and_a_thin_split_explains_nothing():
    base = {"<512": SHORT, "1k-2k": {1: 20, 2: 20}}
    cur = {"<512": {2: 100, 4: 100}, "1k-2k": {1: 300, 2: 300}}
    c = _compare(cur, base)
    s = c.splits[0]
    assert [b.compared for b in s.buckets] == [True, False]
    assert s.coverage == pytest.approx(0.25) and not s.usable
    assert c.explained_by is None and c.system is c.total  # nothing to split it by


def test_the_design_effect_of_alike_request_steps():
    whole, _ = _run({"<512": SHORT})
    assert cmp.design_effect(whole, []) == cmp.DEFAULT_DESIGN_EFFECT
    assert cmp.design_effect(whole, [], finished=6) == 100  # 600 steps over 6 requests
    assert cmp.design_effect(whole, [(50, 100)] * 3) == 50  # mean steps of the recorded
    # 30 requests each all 1s or all 3s accepted: far wider than 600 independent steps
    apart = [(20, 0)] * 15 + [(20, 60)] * 15
    assert cmp.design_effect(whole, apart) > 15
    alike = [(20, 20)] * 30  # every request at the run's mean: no widening
    assert cmp.design_effect(whole, alike) == 1.0
    exact, _ = _run({"<512": {2: 600}})  # no spread at all (the tiny pairs)
    assert cmp.design_effect(exact, []) == 1.0


def test_recorded_partial_against_full_is_the_system_at_positions_1_and_2():
    c = compare_reports(build_report(PARTIAL), build_report(FULL))
    r = c.result
    assert r.kind == cmp.SYSTEM
    assert r.total.value == -2.0
    assert r.positions_fell() == (1, 2)
    assert c.sentence.startswith("the system: acceptance fell 2.00")
    differs = {row.key for row in c.changed_config}
    assert differs == {"model", "draft_model"}  # no hashes in these (older) folders
    text = render_comparison_text(c)
    assert text.splitlines()[0] == c.sentence
    assert "by context (explains the change)" in text


def test_a_moved_mix_is_listed_apart_from_the_configuration():
    """Two runs of one configuration see different batch-size mixes (the scheduler's timing
    decides them): `config_differs` names what the operator changed, `mix_moved` the
    traffic."""
    c = compare_reports(build_report(PARTIAL), build_report(FULL))
    moved = ConfigRow("batch_size", "batch size mix", MIX, {"1": 0.9, "2": 0.1},
                      {"1": 0.6, "2": 0.4})
    still = ConfigRow("sampling", "sampling mix", MIX, {"greedy": 1.0}, {"greedy": 1.0})
    doc = dataclasses.replace(c, config=c.config + (moved, still)).to_json()
    assert doc["config_differs"] == ["model", "draft_model"]
    assert "batch_size" in doc["mix_moved"] and "sampling" not in doc["mix_moved"]
    rows = {r["key"]: r for r in doc["config"]}
    assert rows["batch_size"]["differs"] and not rows["sampling"]["differs"]


def _copy_as(tmp_path, src, name, **attrs):
    dst = tmp_path / name
    shutil.copytree(src, dst)
    [proc] = [d for d in dst.iterdir() if d.is_dir()]
    path = proc / "resource.json"
    doc = json.loads(path.read_text())
    doc["attributes"].update(attrs)
    path.write_text(json.dumps(doc))
    return dst


def test_cross_runtime_diff_names_each_setting_that_differs(tmp_path, capsys):
    """The same figures under another runtime's resource (the comparison reads only the
    resource for the configuration): the diff names the runtime, its version and each
    setting that differs, and only those."""
    a = _copy_as(tmp_path, FULL, "sglang", **{
        "spectrace.setting.kv_cache_dtype": "auto", "spectrace.setting.cuda_graph": False,
        "spectrace.setting.spec_num_steps": 3,
        "spectrace.draft_hash": "sha256:aaaa"})
    b = _copy_as(tmp_path, FULL, "vllm", **{
        "spectrace.runtime": "vllm", "spectrace.runtime.version": "0.32.0",
        "spectrace.setting.kv_cache_dtype": "fp8", "spectrace.setting.cuda_graph": False,
        "spectrace.setting.spec_num_steps": 3, "spectrace.setting.async_scheduling": True,
        "spectrace.draft_hash": "sha256:aaaa"})
    assert main(["report", str(b), "--baseline", str(a), "--json"]) == 0
    c = json.loads(capsys.readouterr().out)["comparison"]
    assert set(c["config_differs"]) == {"runtime", "runtime_version", "kv_cache_dtype",
                                        "async_scheduling"}
    rows = {r["key"]: r for r in c["config"]}
    assert (rows["kv_cache_dtype"]["baseline"], rows["kv_cache_dtype"]["current"]) == (
        "auto", "fp8")
    assert rows["async_scheduling"]["baseline"] is None  # not recorded in the baseline
    assert c["kind"] == "no_change"
    assert "; the runs differ in runtime sglang -> vllm, runtime version 0.5.23 -> 0.32.0, " \
        "KV cache auto -> fp8" in c["sentence"]


def test_the_command_says_what_is_wrong_with_a_missing_baseline(tmp_path, capsys):
    assert main(["report", FULL, "--baseline", str(tmp_path / "nope")]) == 2
    assert "nope: no such folder" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["report", FULL, "--baseline", FULL, "--watch"])


def _safetensors(path, seed: int) -> None:
    """One float32 tensor of 512 x 512 in the safetensors layout (8-byte header length,
    JSON header, data), written by hand: the fast tier has no safetensors package."""
    import numpy
    data = numpy.random.default_rng(seed).random((512, 512), dtype="float32").tobytes()
    header = json.dumps({"w": {"dtype": "F32", "shape": [512, 512],
                               "data_offsets": [0, len(data)]}}).encode()
    with open(path, "wb") as f:
        f.write(len(header).to_bytes(8, "little") + header + data)


def test_the_content_hash_sees_new_weights_and_config_not_the_path(tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    for d in (a, b):
        d.mkdir()
        (d / "config.json").write_text('{"hidden_size": 8}')
        _safetensors(d / "model.safetensors", 1)
    assert model_hash.content_hash(str(a)) == model_hash.content_hash(str(b))
    assert model_hash.content_hash(str(a)).startswith("sha256:")
    _safetensors(b / "model.safetensors", 2)  # retrained: the same shapes, other values
    assert model_hash.content_hash(str(a)) != model_hash.content_hash(str(b))
    _safetensors(b / "model.safetensors", 1)
    (b / "config.json").write_text('{"hidden_size": 16}')
    assert model_hash.content_hash(str(a)) != model_hash.content_hash(str(b))
    assert model_hash.content_hash("org/a-hub-id") is None
    assert model_hash.hashes(str(a), None) == {"model_hash": model_hash.content_hash(str(a))}
