"""Acceptance by batch size on the real SGLang 0.5.23 CPU server (EAGLE-3, v2 worker) and on
vLLM's real CPU engine: one wave of identical requests sent together in one call (one
message to the scheduler, so they are prefilled together, decode together and finish
together: the `partial` pair accepts exactly one draft token a step), then one request
alone. Every request-step of the wave is at batch WAVE, every one of the lone request at
batch 1, so the batch-size figures must equal the runtime's own counts of those requests
(SGLang's per-request `spec_verify_ct`; vLLM's `spec_decode_num_drafts` counter, read
before and after each)."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import urllib.request

import pytest

from spectrace import signals
from spectrace.families import step_cost
from tests.e2e import settle

WAVE, NEW_TOKENS = 6, 30
PROMPT = [3, 7, 11]
FAST = {"SPECTRACE_METRIC_INTERVAL": "0.5"}


def _generate(run, prompts: list) -> list:
    """One /generate call with a batch of prompts: SGLang's tokenizer manager sends them to
    the scheduler together."""
    body = {"input_ids": prompts if len(prompts) > 1 else prompts[0],
            "sampling_params": {"max_new_tokens": NEW_TOKENS, "temperature": 0}}
    req = urllib.request.Request(run.server.url + "/generate", data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=600) as resp:
        out = json.loads(resp.read())
    return out if isinstance(out, list) else [out]


def _by_batch(proc: dict) -> dict:
    return {r["batch_size"]: (r["drafts"], r["mean_acceptance_length"])
            for r in proc["by_batch_size"]}


@pytest.mark.sglang
def test_sglang_batch_size_equals_its_own_per_request_counts(tiny_models, sglang_server):
    run = sglang_server(tiny_models("partial"), env=FAST)
    wave = _generate(run, [PROMPT] * WAVE)
    alone = _generate(run, [PROMPT])
    steps = [r["meta_info"]["spec_verify_ct"] for r in wave]
    assert len(set(steps)) == 1  # together from the first step to the last
    verify = sum(steps) + alone[0]["meta_info"]["spec_verify_ct"]
    proc = settle(run, verify)
    wave_bucket = step_cost.BUCKETS[step_cost.bucket_of(WAVE)]
    assert _by_batch(proc) == {wave_bucket: (sum(steps), 2.0),
                               "1": (alone[0]["meta_info"]["spec_verify_ct"], 2.0)}
    assert sum(d for d, _ in _by_batch(proc).values()) == proc["drafts"] == verify
    assert signals.LARGE_BATCH not in {f["code"] for f in proc["findings"]}
    text = subprocess.run([sys.executable, "-m", "spectrace.cli", "report", str(run.data_dir)],
                          capture_output=True, text=True, timeout=60).stdout
    assert f"{wave_bucket:>9}: mean accept length 2.00" in text


def _complete(server, prompts: list) -> dict:
    """One /v1/completions call with a batch of prompts: vLLM's server hands them to its
    engine together."""
    body = {"model": os.path.join(server.models, "target"),
            "prompt": prompts if len(prompts) > 1 else prompts[0],
            "max_tokens": NEW_TOKENS, "temperature": 0, "ignore_eos": True}
    req = urllib.request.Request(server.url + "/v1/completions", data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=600) as resp:
        return json.loads(resp.read())


DRAFTS = "vllm:spec_decode_num_drafts_total"


@pytest.mark.vllm
def test_vllm_batch_size_equals_its_own_step_counters(tiny_models, vllm_server):
    """vLLM (V1 engine, the EngineCore counts): the request-steps of the wave are vLLM's own
    `spec_decode_num_drafts` counted while it ran, all at batch WAVE; the lone request's
    at batch 1."""
    run = vllm_server(tiny_models("partial"), env=FAST)
    before = run.server.metrics().get(DRAFTS, 0)
    out = _complete(run.server, [PROMPT] * WAVE)
    assert len(out["choices"]) == WAVE
    wave = run.server.metrics()[DRAFTS] - before
    _complete(run.server, [PROMPT])
    alone = run.server.metrics()[DRAFTS] - before - wave
    report = run.settle(before + wave + alone)
    engine = run.process("engine_core", report)
    wave_bucket = step_cost.BUCKETS[step_cost.bucket_of(WAVE)]
    assert wave > 0 and alone > 0
    assert _by_batch(engine) == {wave_bucket: (wave, 2.0), "1": (alone, 2.0)}
    assert engine["drafts"] == wave + alone
    text = subprocess.run([sys.executable, "-m", "spectrace.cli", "report", str(run.data_dir)],
                          capture_output=True, text=True, timeout=60).stdout
    assert "acceptance by batch size (requests verified in the step):" in text
