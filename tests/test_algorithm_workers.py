"""SGLang's real worker class of every speculative algorithm of the installed SGLang
(0.5.23), and a plugin registered through its own `SpeculativeAlgorithm.register`, built
without weights and driven through spectrace's wrapped methods
(tests/programs/algorithm_workers.py says what stands in for what cannot run here):

- counts: whichever `on_verify_complete_cpu` the class has (EAGLEWorkerV2's,
  BaseSpecWorker's default, NGRAMWorker's own) reaches the Recorder, with the class's
  number of draft positions;
- constructors that skip EAGLEWorkerV2's record the algorithm and the worker class;
- each `forward_batch_generation` of its own counts decode steps and skips prefill;
- FROZEN_KV_MTP: its token agreement runs every Nth step as configured (before its step
  was wrapped, the step counter never moved and the agreement ran on every step);
- token agreement every Nth step on multi-layer EAGLE's own verify and on DFlash's real
  `_accept_block` (the block as a chain);
- the step span's `spectrace.worker` names the worker's own class (STANDALONE and
  FROZEN_KV_MTP are counted as EAGLEWorkerV2 steps);
- UNO: its module imports flashinfer (CUDA only), so the program imports it with a
  stand-in for the one name bound at import (`flashinfer.top_k`, never called); then as
  the others (counts, identity, steps), its real greedy accept (`_accept_and_pack`) read
  as the scheduler hands it over (every proposal accepted fills its last position), and
  its step's audit raising nothing on a target without aux capture, where the EAGLE
  worker with an EAGLE-3 draft finds `aux.capture_disabled`.

NGRAM and STANDALONE also run end to end (tests/test_e2e_algorithms.py).
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
SCRIPT = os.path.join(ROOT, "tests", "programs", "algorithm_workers.py")
# correct drafts per request the program hands over: [0, 3], [2, 1], [3, 3]
ACCEPTED, DRAFTS = 12, 6
PER_POSITION = [5, 4, 3]  # request-steps that accepted at least 1, 2, 3 drafts
LENGTHS = {"1": 1, "2": 1, "3": 1, "4": 3}


@pytest.fixture(scope="module")
def results(tmp_path_factory) -> dict:
    env = {k: v for k, v in cpu_env().items() if not k.startswith("SPECTRACE_")}
    env["PYTHONPATH"] = os.pathsep.join((ROOT, env["PYTHONPATH"]))
    out = subprocess.run([sys.executable, SCRIPT, str(tmp_path_factory.mktemp("aw"))],
                         capture_output=True, text=True, env=env, timeout=900, cwd=ROOT)
    assert out.returncode == 0, out.stderr[-4000:]
    line = next(x for x in out.stdout.splitlines() if x.startswith("RESULT "))
    return json.loads(line.removeprefix("RESULT "))


def test_every_table_installs_on_the_real_classes(results):
    assert results["missing"] == []
    assert results["internal_errors"] == {}
    # every worker module of 0.5.23 is built here (UNO's with the flashinfer stand-in)
    assert results["not_built"] == {}
    # the algorithm points are optional: each class's own methods were wrapped
    wrapped = {k: sorted(v) for k, v in results["wrapped"].items()}
    for worker in ("FrozenKVMTPWorkerV2", "DSparkWorkerV2", "UnoWorkerV2"):
        assert wrapped[worker] == ["__init__", "forward_batch_generation"]
    assert wrapped["StandaloneWorkerV2"] == ["__init__"]
    assert wrapped["NGRAMWorker"] == ["__init__", "forward_batch_generation",
                                      "on_verify_complete_cpu"]


def test_flashinfer_stand_in_only_for_unos_import_and_never_called(results):
    """flashinfer is CUDA only: UNO's modules bind exactly `top_k` of it at import time;
    the stand-in was needed (no flashinfer here), is held only there, was never called by
    anything the program drove, and is gone from `sys.modules` afterwards."""
    assert results["flashinfer_standin"] == {
        "used": True, "calls": [], "left_in_sys_modules": False,
        "bound_by": ["sglang.kernels.ops.speculative.uno_tree._flashinfer_top_k",
                     "sglang.srt.speculative.uno_utils._flashinfer_top_k"]}


@pytest.mark.parametrize("worker", ["EAGLEWorkerV2", "StandaloneWorkerV2",
                                    "FrozenKVMTPWorkerV2", "MultiLayerEagleWorkerV2",
                                    "DFlashWorkerV2", "DSparkWorkerV2", "UnoWorkerV2",
                                    "NGRAMWorker", "PluginWorker"])
def test_counts_reach_the_recorder_for_every_algorithm(results, worker):
    got = results["counts"][worker]
    assert (got["drafts"], got["accepted"]) == (DRAFTS, ACCEPTED)
    assert got["lengths"] == LENGTHS
    # DFlash drafts a block of speculative_num_draft_tokens (8 here): 7 positions
    positions = 7 if worker == "DFlashWorkerV2" else 3
    assert got["per_position"] == (PER_POSITION + [0] * positions)[:positions]
    assert got["draft_tokens"] == DRAFTS * positions


def test_a_plugin_algorithm_is_sglangs_own_registration(results):
    assert results["plugin_registered"] == "CustomSpecAlgo"


@pytest.mark.parametrize("worker,algorithm", [
    ("StandaloneWorkerV2", "STANDALONE"), ("FrozenKVMTPWorkerV2", "FROZEN_KV_MTP"),
    ("MultiLayerEagleWorkerV2", "EAGLE"), ("DFlashWorkerV2", "DFLASH"),
    ("DSparkWorkerV2", "DSPARK"), ("UnoWorkerV2", "UNO"), ("NGRAMWorker", "NGRAM")])
def test_constructors_record_the_worker_identity(results, worker, algorithm):
    assert results["identity"][worker] == {"spec_algorithm": algorithm, "spec_worker": worker,
                                           "draft_model": "/drafts/d", "model": "target-m"}


@pytest.mark.parametrize("worker", ["MultiLayerEagleWorkerV2", "DFlashWorkerV2",
                                    "DSparkWorkerV2", "UnoWorkerV2", "NGRAMWorker"])
def test_own_steps_count_decode_not_prefill(results, worker):
    """One prefill and two decode batches: two steps, under the worker's class; the
    sampled span is ended although the original failed on the stub batch."""
    assert results["steps"][worker] == {"steps": {worker: 2}, "span_left_open": False}


def test_frozen_kv_mtp_agreement_runs_every_nth_step(results):
    """SPECTRACE_AGREEMENT_EVERY=4 over 12 decode steps: 3 comparisons (steps 4, 8, 12),
    each of 2 requests agreeing on the first position only."""
    assert results["frozen"] == {"comparisons": 3, "agreement_per_position": [6, 0, 0],
                                 "steps": {"EAGLEWorkerV2": 12}}
    assert results["frozen_every_1"]["comparisons"] == 5


def test_frozen_kv_mtp_without_its_step_hook_compared_every_step(results):
    """The bug this fixes: with only EAGLEWorkerV2's table, no step was counted and the
    agreement ran on all 12 steps."""
    assert results["frozen_without_its_table"] == {
        "comparisons": 12, "agreement_per_position": [24, 0, 0], "steps": {}}


def test_step_span_names_the_real_worker_class(results):
    """StandaloneWorkerV2 (EAGLEWorkerV2's inherited step) and FrozenKVMTPWorkerV2 (its own
    step, EAGLEWorkerV2's step hook) are counted as EAGLEWorkerV2 steps, so that verify's
    agreement sampling sees them, but their step spans name their own class."""
    got = results["span_worker"]
    assert got["EAGLEWorkerV2"] == {"spans": ["EAGLEWorkerV2"],
                                    "steps": {"EAGLEWorkerV2": 1}}
    assert got["StandaloneWorkerV2"] == {"spans": ["StandaloneWorkerV2"],
                                         "steps": {"EAGLEWorkerV2": 1}}
    assert got["FrozenKVMTPWorkerV2"] == ["FrozenKVMTPWorkerV2"] * 12  # 12 steps, all sampled


def test_multi_layer_eagle_agreement_every_nth_step(results):
    """Its own verify (SGLang's run_eagle_verify, stood in as for FROZEN_KV_MTP), sampled
    by its own step count: 3 comparisons in 12 steps at every 4."""
    assert results["multi_layer"] == {"comparisons": 3, "agreement_per_position": [6, 0, 0],
                                      "steps": {"MultiLayerEagleWorkerV2": 12}}


@pytest.mark.parametrize("run,steps", [("dflash", 12), ("dflash_logits_only", 8)])
def test_dflash_agreement_on_its_real_accept(results, run, steps):
    """DFlashWorkerV2._accept_block (SGLang's real greedy accept) with the target's
    predictions passed in, or only its logits (argmax on the device, as SGLang does):
    every 4th step compared; the agreement counts every position (1, 0, 1) where SGLang
    accepts the leading run (1 draft)."""
    got = results[run]
    assert got["comparisons"] == steps // 4
    assert got["agreement_per_position"] == [2 * steps // 4, 0, 2 * steps // 4]
    assert got["sglang_accept_lens"] == [1, 1]
    assert got["steps"] == {"DFlashWorkerV2": steps}


def test_uno_counts_from_its_real_accept(results):
    """UNO's greedy accept (`UnoWorkerV2._accept_and_pack`, F = 4: the seed and 3
    proposals) accepts 3 and 1; SGLang's accept lengths count the seed and the correction
    (+ 2), which the scheduler takes off before `on_verify_complete_cpu`. Every proposal
    accepted fills the last of `speculative_num_draft_tokens - 1` positions (linear UNO's
    `speculative_num_steps` is 1: the tree depth)."""
    assert results["uno_counts"] == {"sglang_accept_lens": [5, 3], "counts": [3, 1],
                                     "drafts": 2, "accepted": 4, "draft_tokens": 6,
                                     "per_position": [2, 1, 1]}


def test_uno_step_raises_no_eagle3_finding(results):
    """The step hook's audit on SGLang's real Llama target whose aux capture was never
    switched on: UNO has no draft model (its draft pass is the target's, with UNO's LoRA),
    so nothing; the EAGLE worker with an EAGLE-3 draft on the same target finds it."""
    assert results["audit"] == {"UnoWorkerV2": {},
                                "EAGLEWorkerV2": {"aux.capture_disabled": 1}}
