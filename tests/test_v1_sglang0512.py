"""The v1 `EAGLEWorker` adapter end to end, on a *patched* SGLang 0.5.12 CPU server (the
last release with v1; `harness/sglang0512/shim` replaces attention, the spec kernels and
`sgl_kernel` with pure-torch stand-ins; the worker's control flow is SGLang's).

Needs a separate 5 GB environment (torch 2.11 + sglang 0.5.12 + spectrace), so it runs only
when SPECTRACE_SGLANG0512_PYTHON names that environment's python. Acceptance is exactly
known: the `partial` tiny models accept exactly one draft token per verify.
"""
from __future__ import annotations

import glob
import json
import os
import time

import pytest

from conftest import report_json
from tests.e2e import findings_but_cost, wait_for

PYTHON = os.environ.get("SPECTRACE_SGLANG0512_PYTHON")
if not PYTHON:
    pytest.skip("needs an SGLang 0.5.12 environment: build it with "
                "`scripts/setup-env-sglang0512.sh VENV`, then run with "
                "SPECTRACE_SGLANG0512_PYTHON=VENV/bin/python", allow_module_level=True)

pytestmark = pytest.mark.sglang

ENV = {"SGLANG_ENABLE_SPEC_V2": "0",  # v1 EAGLEWorker (0.5.12 defaults to v2)
       "SPECTRACE_ENABLED": "1", "SPECTRACE_METRIC_INTERVAL": "0.5",
       "SPECTRACE_STEP_SAMPLE_RATIO": "1"}
PROMPTS = [[3, 7, 11], [5, 9, 2], [4, 6, 8], [10, 1, 3]]


@pytest.fixture(scope="module")
def v1_run(tiny_models, tmp_path_factory):
    from harness.sglang0512.server import start_server
    d = tmp_path_factory.mktemp("v1-0512")
    data = d / "spectrace-data"
    server = start_server(PYTHON, tiny_models("partial"), str(d / "server.log"),
                          env_extra={**ENV, "SPECTRACE_OUTPUT_DIR": str(data)})
    try:
        sequential = [server.generate(p, 16, timeout=300) for p in PROMPTS[:2]]
        concurrent = server.generate_together(PROMPTS, 16, timeout=300)
        yield server, data, sequential + concurrent
    finally:
        server.stop()
        print(f"server log kept at {d / 'server.log'}")


def scheduler(data, drafts: int, timeout: float = 120) -> dict:
    """The scheduler's report entry once its exported totals reach `drafts`."""
    deadline = time.time() + timeout
    while True:
        procs = [p for p in report_json(data)["processes"] if p["drafts"]]
        if (len(procs) == 1 and procs[0]["drafts"] >= drafts) or time.time() > deadline:
            assert len(procs) == 1, procs
            return procs[0]
        time.sleep(0.5)


def sglang_totals(responses) -> tuple[int, int]:
    return (sum(r["meta_info"]["spec_verify_ct"] for r in responses),
            sum(r["meta_info"]["spec_num_correct_drafts"] for r in responses))


def steps_by_worker(data) -> dict:
    """`spectrace.spec.steps` by its `worker` attribute, from the last metrics snapshot."""
    out: dict = {}
    for path in glob.glob(os.path.join(data, "*", "metrics.jsonl")):
        with open(path) as fh:
            lines = [ln for ln in fh if ln.strip()]
        for point in json.loads(lines[-1])["metrics"].get("spectrace.spec.steps", []):
            w = point["attributes"]["worker"]
            out[w] = out.get(w, 0) + point["value"]
    return out


def test_v1_worker_ran_and_was_instrumented(v1_run):
    server, data, responses = v1_run
    assert "constructing EAGLEWorker (" in server.log()  # SGLang chose v1, not v2
    proc = scheduler(data, sglang_totals(responses)[0])
    assert proc["sglang_version"] == "0.5.12" and proc["tp_rank"] == 0
    assert proc["pid"] != server.proc.pid  # written by the spawned scheduler
    by_worker = steps_by_worker(data)
    assert set(by_worker) == {"EAGLEWorker"} and by_worker["EAGLEWorker"] > 0
    assert proc["steps"] == by_worker["EAGLEWorker"]
    assert proc["spans"] > 0
    assert proc["internal_errors"] == 0


def test_v1_acceptance_matches_sglang_meta_info(v1_run):
    server, data, responses = v1_run
    verify, accepted = sglang_totals(responses)
    proc = scheduler(data, verify)
    assert verify > 0
    assert proc["drafts"] == verify
    assert accepted == verify  # SGLang: one draft token accepted per verify
    # v1's CPU list is cut at each request's finish: its last step may count 0 there
    n_requests = len(responses)
    acc = proc["accepted_tokens"]
    assert verify - n_requests <= acc <= verify
    assert proc["accepted_per_position"] == [acc, 0, 0]
    assert proc["accept_length_counts"] == {k: v for k, v in
                                            {"1": verify - acc, "2": acc}.items() if v}
    assert proc["draft_tokens"] == 3 * verify
    assert proc["steps"] < verify  # the concurrent requests shared verify steps
    assert proc["agreement_drafts"] == 0  # v1 exposes no per-position target predictions


def test_v1_server_settings_read_from_0_5_12_server_args(v1_run):
    """The server settings on 0.5.12, where SGLang resolves its ServerArgs in place: the
    draft's KV cache is the target's (no field of its own), attention DP from `dp_size`
    with `enable_dp_attention`, no largest graph batch where graphs are off
    (--disable-cuda-graph), no overlap schedule for v1."""
    server, data, responses = v1_run
    proc = scheduler(data, sglang_totals(responses)[0])
    assert proc["settings"] == {
        "kv_cache_dtype": "auto", "draft_kv_cache_dtype": "auto", "quantization": "none",
        "draft_quantization": "none", "cuda_graph": False, "async_scheduling": False,
        "prefix_caching": True, "grammar_backend": "xgrammar", "disaggregation": "none",
        "attention_dp_size": 1, "tp_size": 1, "pp_size": 1, "ep_size": 1,
        "spec_method": "EAGLE3", "spec_num_steps": 3, "spec_topk": 1,
        "spec_num_draft_tokens": 4, "spec_adaptive": False,
        "spec_verification": "standard",  # no block verification, no accept threshold
        "chat_template": "none"}, proc["settings"]  # the tiny target's tokenizer has none


def test_v1_step_cost_times_the_target_forward_inside_verify(v1_run):
    """Step cost on v1 (every 4th step): each measured step's verify holds one target
    forward (`TpModelWorker.forward_batch_generation(..., is_verify=True)`), timed within
    it, for batch 1 and the concurrent requests alike."""
    server, data, responses = v1_run
    adv = scheduler(data, sglang_totals(responses)[0])["speculation"]
    assert adv is not None and adv["buckets"], adv
    for b in adv["buckets"]:
        n, ph = b["phase_samples"], b["phase_seconds"]
        assert n["target_forward"] == n["verify"] == n["step"] > 0, n
        assert 0 < ph["target_forward"] <= ph["verify"], ph


def _spans(data) -> list[dict]:
    spans = []
    for path in glob.glob(os.path.join(data, "*", "spans.jsonl")):
        with open(path) as fh:
            spans += [json.loads(ln) for ln in fh if ln.strip()]
    return spans


def test_v1_step_spans_nest_draft_verify_and_draft_extend(v1_run):
    server, data, responses = v1_run
    proc = scheduler(data, sglang_totals(responses)[0])
    # the last step's span reaches the file at the span export after the metric snapshot
    # that counted the step (a flake check under load read 23 spans of 24 steps at once)
    def step_spans():
        return [s for s in _spans(data) if s["name"] == "spectrace.spec.step"]
    wait_for(lambda: len(step_spans()) >= proc["steps"], 60)
    spans = _spans(data)
    steps = {s["span_id"]: s for s in spans if s["name"] == "spectrace.spec.step"}
    assert len(steps) == proc["steps"]  # sample ratio 1: every step has a span
    assert {s["attributes"]["spectrace.worker"] for s in steps.values()} == {"EAGLEWorker"}
    children: dict = {}
    for s in spans:
        if s["name"] != "spectrace.spec.step":
            assert s["parent_id"] in steps, s
            children[s["name"]] = children.get(s["name"], 0) + 1
    assert children["spectrace.spec.draft"] == children["spectrace.spec.verify"] == len(steps)
    # no draft-extend on a step after which every request in the batch had finished
    assert 0 < children["spectrace.spec.draft_extend"] <= len(steps)


def test_v1_draft_model_hooks_and_aux_audit(v1_run):
    server, data, responses = v1_run
    proc = scheduler(data, sglang_totals(responses)[0])
    widths = {(p["pass_kind"], p["width"]) for p in proc["hidden_state_passes"]}
    assert widths == {("target_fed", 384), ("draft_decode", 128)}
    assert proc["fc_bypass"] == 0 and findings_but_cost(proc) == []


INSTALL_CHECK = os.path.join(os.path.dirname(os.path.abspath(__file__)), "programs",
                             "sglang_v1_install.py")


def test_v1_install_wraps_every_method_and_reports_a_missing_one():
    """On the real 0.5.12 module, imported in its own environment."""
    import subprocess
    from harness.sglang0512.server import cpu_env
    out = subprocess.run([PYTHON, INSTALL_CHECK], env=cpu_env(), capture_output=True,
                         text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    got = json.loads(out.stdout.strip().splitlines()[-1])
    assert got["wrapped"] == ["__init__", "draft", "forward_batch_generation",
                              "forward_draft_extend_after_decode", "verify"]
    assert got["missing"] == []
    assert got["partial"] == ["__init__", "draft", "forward_batch_generation", "verify"]
    assert got["partial_missing"] == [
        "sglang.srt.speculative.eagle_worker.EAGLEWorker.forward_draft_extend_after_decode"]
