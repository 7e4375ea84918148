"""Draft-input checks for SGLang's DFlash and DSpark drafts, which read the target's aux
hidden states through `fc` as EAGLE-3 does, on SGLang's real classes
(tests/programs/block_draft_inputs.py: the real draft models with tiny CPU weights, the
real target families built without weights, SGLang's own capture switch, the real
`DFlashWorkerV2` / `DSparkWorkerV2` built without weights):

- the aux capture audit, at the worker's first step: healthy -> nothing; capture never
  switched on -> `aux.capture_disabled`; other ids than the draft's -> `aux.layer_ids_mismatch`;
  each algorithm's id convention (layer outputs, + 1 in every family with a rule; DSPARK's
  `dspark_target_layer_ids` before `dflash_config.target_layer_ids`; no ids but
  `num_target_layers`: SGLang's selection for the trained depth);
- every target family of the installed SGLang that implements
  `set_dflash_layers_to_capture` has a rule row, and each behaves as above;
- widths at `project_target_hidden`: healthy widths counted; any other width SGLang itself
  raises on at once, and spectrace adds no finding for it; with one target layer, capture
  off is silent in SGLang (the last hidden state is as wide) and the audit names it.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from harness.server import cpu_env

pytestmark = pytest.mark.sglang

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCRIPT = os.path.join(ROOT, "tests", "programs", "block_draft_inputs.py")
OFF, IDS = "aux.capture_disabled", "aux.layer_ids_mismatch"
# SGLang 0.5.23's own switch fails on this family (its text model lacks the method)
SWITCH_FAILS = {"qwen3_vl": "AttributeError: 'Qwen3LLMModel' object has no attribute "
                            "'set_dflash_layers_to_capture'"}
# wrappers whose text model keeps the capture state (and has the row)
HOLDERS = {"kimi_k25": "DeepseekV3ForCausalLM"}


@pytest.fixture(scope="module")
def results(tmp_path_factory) -> dict:
    env = {k: v for k, v in cpu_env().items() if not k.startswith("SPECTRACE_")}
    env["PYTHONPATH"] = os.pathsep.join((ROOT, env["PYTHONPATH"]))
    out = subprocess.run([sys.executable, SCRIPT, str(tmp_path_factory.mktemp("bd"))],
                         capture_output=True, text=True, env=env, timeout=900, cwd=ROOT)
    assert out.returncode == 0, out.stderr[-4000:]
    line = next(x for x in out.stdout.splitlines() if x.startswith("RESULT "))
    return json.loads(line.removeprefix("RESULT "))


def test_tables_install_and_nothing_fails_inside_spectrace(results):
    assert results["missing"] == []
    assert results["internal_errors"] == {}


@pytest.mark.parametrize("worker", ["DFlashWorkerV2", "DSparkWorkerV2",
                                    "DSparkWorkerV2 dspark_target_layer_ids"])
def test_the_workers_audit(results, worker):
    assert results["workers"][worker] == {"on": {}, "off": {OFF: 1}, "other": {IDS: 1}}


def test_dspark_reads_its_own_ids_first(results):
    assert results["dspark_own_ids_resolved"] == [2, 4]


def test_no_ids_but_the_trained_depth(results):
    """SGLang selects layers for the runtime target's 8 layers ([1, 5] + 1), whatever the
    draft says it was trained on: healthy when that is 8, a mismatch when it is 12."""
    assert results["depth_8"] == {"sglang_captures": [2, 6], "findings": {}}
    assert results["depth_12"] == {"sglang_captures": [2, 6], "findings": {IDS: 1}}


def test_every_family_with_the_method_has_a_rule_and_is_judged_right(results):
    from spectrace.rules.aux import SGLANG_BLOCK_DRAFT_TARGETS
    judged = {n: r for n, r in results["families"].items() if r.get("has_method")}
    assert len(judged) >= 15, judged  # 0.5.23: 15 of the harness's families
    for name, row in judged.items():
        if name in SWITCH_FAILS:
            assert SWITCH_FAILS[name] in row["error"]
            assert row["architecture"] not in SGLANG_BLOCK_DRAFT_TARGETS
            continue
        assert HOLDERS.get(name, row["architecture"]) in SGLANG_BLOCK_DRAFT_TARGETS, name
        assert (row["off"], row["on"], row["other"]) == ([OFF], [], [IDS]), name


def test_widths_healthy_counted_wrong_left_to_sglang(results):
    w = results["widths"]
    assert w["passes"] == {"target_fed:128": 3}
    assert "DFLASH target_hidden feature dim mismatch" in w["sglang_raised"]
    assert w["passes_after"] == w["passes"] and w["findings"] == {}  # no duplicate alarm
    assert w["expected"] == {"fc_in": 128, "draft_hidden": 64, "target_hidden": 64,
                             "num_aux": 2}


def test_one_layer_capture_off_is_silent_in_sglang_and_found(results):
    """The last hidden state (64 wide) goes through SGLang's projection without an error
    (and through spectrace's width hook without a finding: it is fc's width); the audit
    at the worker's first step names the cause."""
    assert results["one_layer"] == {
        "last_hidden_state": {"projected": [5, 64], "findings": {}}, "off": {OFF: 1}}


def test_check_pair_judges_block_drafts_in_their_convention(results):
    """`spectrace.check_pair`: the DSpark draft's own ids ([2, 4] + 1) are healthy, which the
    EAGLE-3 audit (or DFlash's dflash_config ids [1, 3]) would not say."""
    assert results["check_pair"] == {"DFlashDraftModel": {"on": [], "off": [OFF]},
                                     "Qwen3DSparkModel": {"on": [], "off": [OFF]}}
