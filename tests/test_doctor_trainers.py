"""`spectrace doctor` on what the trainers' own code writes: speculators 0.9.0, SpecForge
0.2.0 and NVIDIA Model Optimizer 0.47.0 write tiny EAGLE-3 drafts for a tiny Llama target
in the trainers' environment (`SPECTRACE_TRAINERS_PYTHON`, scripts/setup-env-trainers.sh;
harness/trainer_drafts.py), and the doctor, here, judges them for SGLang and vLLM: the
three settings the trainers write that change what a runtime runs (speculators' default
sliding window, Model Optimizer's exported YaRN scaling, the null id list of
`speculators convert`) get their findings with the right severity, and healthy output no
error."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from spectrace.doctor import check_checkpoint
from tests.e2e import findings_but_cost, runtime_codes, settle

pytestmark = pytest.mark.trainers
ROOT = Path(__file__).resolve().parents[1]
SG, VL = "sglang==0.5.23", "vllm==0.33.0"


@pytest.fixture(scope="module")
def drafts(trainer_drafts) -> dict[str, Path]:
    return trainer_drafts


def found(report) -> dict[str, str]:
    return {f.code: f.severity for f in report.findings}


def errors(report) -> set[str]:
    return {f.code for f in report.errors}


def test_the_trainers_write_what_the_checks_are_about(drafts):
    spec = json.loads((drafts["speculators"] / "config.json").read_text())
    layer = spec["transformer_layer_config"]
    assert layer["sliding_window"] == 2048 and layer["layer_types"] == ["sliding_attention"]
    conv = json.loads((drafts["specforge-converted"] / "config.json").read_text())
    assert conv["eagle_aux_hidden_state_layer_ids"] is None
    for n in ("modelopt-1", "modelopt-2"):
        mo = json.loads((drafts[n] / "config.json").read_text())
        assert mo["rope_scaling"] == {"rope_type": "yarn", "factor": 32.0,
                                      "original_max_position_embeddings": 2048}


def test_speculators_window_on_each_runtime(drafts):
    d, t = drafts["speculators"], drafts["target"]
    sg = check_checkpoint(d, t, SG, context_length=32768)
    w = [f for f in sg.findings if f.code == "config.setting_ignored"
         and f.details.get("setting") == "sliding_window"]
    assert w and w[0].severity == "warning"
    assert "--speculative-draft-window-size 2048" in w[0].message
    # at the target's own 1024 tokens the window makes no difference
    assert found(check_checkpoint(d, t, SG))["config.setting_ignored"] == "info"
    vl = check_checkpoint(d, t, VL, context_length=32768)
    assert "config.setting_ignored" not in found(vl) and not errors(vl)


def test_converted_specforge_draft_names_vllms_default(drafts):
    r = check_checkpoint(drafts["specforge-converted"], drafts["target"], VL)
    f = [f for f in r.findings if f.code == "aux.layer_ids_default"]
    assert f and f[0].severity == "warning" and f[0].details["default_ids"] == [2, 4, 5]


@pytest.mark.parametrize("name", ["modelopt-1", "modelopt-2"])
@pytest.mark.parametrize("runtime", [SG, VL])
def test_modelopt_yarn(drafts, name, runtime):
    d, t = drafts[name], drafts["target"]
    assert found(check_checkpoint(d, t, runtime))["positions.rope_changed"] == "info"
    far = check_checkpoint(d, t, runtime, context_length=131072)
    assert found(far)["positions.rope_changed"] == "warning"
    assert found(far)["positions.beyond_draft"] == "warning"   # 1024 positions


# each trainer's output on the runtime it is written for (speculators' default
# norm_before_residual=True has no SGLang equivalent, SpecForge's SGLang-convention ids
# need --fix for vLLM: both errors the doctor raises by design, tests/test_doctor_formats.py;
# Model Optimizer's ids on vLLM and its 2-layer hidden_norm are issue 23's other part)
HEALTHY = [("speculators", VL), ("specforge", SG), ("modelopt-1", SG)]


@pytest.mark.parametrize("name,runtime", HEALTHY)
def test_healthy_output_has_no_error(drafts, name, runtime):
    r = check_checkpoint(drafts[name], drafts["target"], runtime)
    assert not errors(r), [(f.code, f.message) for f in r.errors]


def doctor_fix(draft: Path, target: Path, out: Path) -> dict:
    """`spectrace doctor DRAFT --target T --runtime SGLang --fix OUT --json`, as a user runs
    it: the report (with its `fix` part) once it has exited 0."""
    import os
    import subprocess
    import sys
    r = subprocess.run([sys.executable, "-m", "spectrace.doctor.cli", str(draft), "--target",
                        str(target), "--runtime", SG, "--fix", str(out), "--json"],
                       capture_output=True, text=True, timeout=300,
                       env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert r.returncode == 0, r.stdout + r.stderr
    return json.loads(r.stdout)


def served(sglang_server, tmp_path: Path, target: Path, draft: Path, prompts,
           tokens: int) -> dict:
    """The real SGLang CPU server on `target` and `draft`, sent `prompts`: spectrace's
    summary of its scheduler once it has counted every verify step SGLang reported."""
    import os
    models = tmp_path / f"models-{draft.name}"
    models.mkdir()
    os.symlink(target, models / "target")
    os.symlink(draft, models / "draft")
    run = sglang_server(str(models), env={"SPECTRACE_METRIC_INTERVAL": "0.5"})
    answers = [run.server.generate(p, tokens)["meta_info"] for p in prompts]
    verify = sum(a.get("spec_verify_ct", 0) for a in answers)
    proc = settle(run, verify)  # once the totals are exported
    assert verify > 0 and proc["drafts"] == verify
    return proc


@pytest.mark.sglang
def test_fix_copy_of_model_optimizer_two_layer_export_is_served(drafts, sglang_server,
                                                                  tmp_path):
    """Model Optimizer's own 2-layer export for SGLang: its second layer's trained norm sits
    under `input_layernorm`, which SGLang's second eagle layer never reads (it normalises
    with `hidden_norm`, started at ones). `--fix` renames that one tensor, copies every
    other byte for byte; the real SGLang 0.5.23 CPU server loads the original with that norm
    unloaded (spectrace's own load finding) and serves the copy with every
    draft weight loaded and no finding (random trained weights: no acceptance is claimed)."""
    from harness import checkpoint_formats as cf
    draft, out = drafts["modelopt-2"], tmp_path / "fixed"
    rep = doctor_fix(draft, drafts["target"], out)
    assert {f["code"] for f in rep["findings"] if f["severity"] == "error"} == {
        "weights.missing_params"}
    assert rep["fix"]["renames"] == {"layers.1.input_layernorm.weight":
                                     "layers.1.hidden_norm.weight"}
    assert not [f for f in rep["fix"]["check"]["findings"]
                if f["severity"] in ("error", "warning")]
    before, after = cf.tensor_bytes(draft), cf.tensor_bytes(out)
    for key, data in before.items():
        assert after[rep["fix"]["renames"].get(key, key)] == data, key
    def serve(d: Path) -> dict:
        return served(sglang_server, tmp_path, drafts["target"], d,
                      ([3, 7, 11], [5, 9, 2]), 16)

    # the export as Model Optimizer wrote it: SGLang's own load leaves that norm at ones
    assert runtime_codes(serve(draft)) == {"weights.missing_params"}
    fixed = serve(out)
    assert findings_but_cost(fixed) == [], fixed["findings"]


def _plant(d: Path, fault: str) -> int | None:
    """Plant `fault` in the trainer-written draft at `d`; the serving context to check at."""
    cfg = json.loads((d / "config.json").read_text())
    ids_holder = cfg.get("eagle_config", cfg)
    if fault == "absolute_d2t":
        import torch
        from safetensors.torch import load_file, save_file
        (f,) = sorted(d.glob("*.safetensors"))
        sd = load_file(f)
        (key,) = [k for k in sd if k.endswith("d2t")]
        sd[key] = sd[key] + torch.arange(sd[key].numel(), dtype=sd[key].dtype)  # offsets -> ids
        save_file(sd, f, metadata={"format": "pt"})
    elif fault == "capture_off":
        ids_holder["use_aux_hidden_state"] = False
    elif fault == "two_aux_ids":  # fc was trained on three
        ids_holder["eagle_aux_hidden_state_layer_ids"] = [1, 3]
    (d / "config.json").write_text(json.dumps(cfg))
    return 4 * cfg.get("max_position_embeddings", 1024) if fault == "long_context" else None


PLANTED = {"absolute_d2t": ("vocab.d2t_absolute", "error"),
           "capture_off": ("aux.capture_disabled", "error"),
           "two_aux_ids": ("aux.count_mismatch", "error"),
           "long_context": ("positions.beyond_draft", "warning")}


# speculators' format has no capture switch to turn off
CASES = [(n, f) for n in ("specforge", "modelopt-1", "speculators") for f in sorted(PLANTED)
         if (n, f) != ("speculators", "capture_off")]


@pytest.mark.parametrize(("name", "fault"), CASES)
def test_faults_planted_in_trainer_output_get_their_codes(drafts, tmp_path, name, fault):
    """What users get wrong, planted in what the trainers' own code wrote: `d2t` as absolute
    ids, aux capture switched off, an id missing from the list fc was trained on, a serving
    context four times the draft's positions; each gets its code on both runtimes, and
    the same draft unplanted does not."""
    import shutil
    d = tmp_path / name
    shutil.copytree(drafts[name], d)
    context = _plant(d, fault)
    code, severity = PLANTED[fault]
    for runtime in (SG, VL):
        before = check_checkpoint(drafts[name], drafts["target"], runtime,
                                  context_length=context and context // 4)
        assert code not in found(before), (runtime, found(before))
        r = check_checkpoint(d, drafts["target"], runtime, context_length=context)
        assert found(r).get(code) == severity, (runtime, found(r))


@pytest.mark.sglang
def test_fix_copy_of_a_faulty_specforge_draft_is_served(drafts, sglang_server, tmp_path):
    """SpecForge's own export with two faults planted (`d2t` as absolute ids, aux capture
    switched off), `--fix` for SGLang, both served by the real SGLang CPU server: the
    faulty one raises spectrace's run-time findings, the copy none."""
    import shutil

    bad, out = tmp_path / "specforge-bad", tmp_path / "specforge-fixed"
    shutil.copytree(drafts["specforge"], bad)
    _plant(bad, "absolute_d2t")
    _plant(bad, "capture_off")
    rep = doctor_fix(bad, drafts["target"], out)
    assert {f["code"] for f in rep["findings"] if f["severity"] == "error"} == {
        "vocab.d2t_absolute", "aux.capture_disabled"}
    assert not [f for f in rep["fix"]["check"]["findings"] if f["severity"] == "error"]
    prompts = ([3, 7, 11, 2], [5, 9, 2, 40], [17, 1, 8, 8])

    def serve(d: Path) -> dict:
        return served(sglang_server, tmp_path, drafts["target"], d, prompts, 24)

    # as planted: SGLang's target captures nothing and the draft skips its fc, which
    # spectrace sees at run time; the copy: every weight loaded, no finding (random trained
    # weights accept nothing here, so acceptance itself is not compared)
    bad_proc = serve(bad)
    assert {"aux.capture_disabled", "eagle3.fc_bypass"} <= {
        f["code"] for f in bad_proc["findings"]}, bad_proc["findings"]
    fixed_proc = serve(out)
    assert runtime_codes(fixed_proc) == set(), fixed_proc["findings"]
