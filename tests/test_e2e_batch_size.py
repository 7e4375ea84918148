"""Acceptance by batch size on the real SGLang 0.5.23 CPU server (EAGLE-3, v2 worker) and on
vLLM's real CPU engine, against each runtime's own per-step counts.

SGLang: a wave of identical requests sent in one call, then one request alone, with
`--decode-log-interval 1`, so the scheduler logs every decode batch it processed with its
size ("Decode batch, #running-req: N"): the request-steps in each batch-size bucket must
equal the sum of those N. (The wave is not admitted all at once: SGLang prefills it in
parts, so its first and last steps run at smaller batches; the log says which.) The same
run checks acceptance by CUDA graph: the CPU server runs without CUDA graphs, so every
request-step is `eager`, as many as SGLang's own `spec_verify_ct`.

vLLM: the same traffic; vLLM's own `spec_decode_num_drafts` counter read before and after
each part, all of the lone request's request-steps at batch 1 and all of the wave's in
buckets of at most its size; the `partial` pair accepts exactly one draft token a step.
Started with `--cudagraph-metrics`, its CPU engine (no CUDA graphs) says each step ran
`NONE`: every request-step `eager`.
"""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import urllib.request

import pytest

from spectrace import signals
from spectrace.families import breakdowns, step_cost
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


DECODE_LOG = re.compile(r"Decode batch(?: \[\d+\])?, #running-req: (\d+),")


@pytest.mark.sglang
def test_sglang_batch_size_equals_its_own_per_step_batch_sizes(tiny_models, sglang_server):
    run = sglang_server(tiny_models("partial"), env=FAST,
                        extra_args=["--decode-log-interval", "1"])
    responses = _generate(run, [PROMPT] * WAVE) + _generate(run, [PROMPT])
    verify = sum(r["meta_info"]["spec_verify_ct"] for r in responses)
    proc = settle(run, verify)
    with open(run.log_path) as fh:
        sizes = [int(m.group(1)) for m in DECODE_LOG.finditer(fh.read())]
    expected: dict = {}
    for n in sizes:
        bucket = step_cost.BUCKETS[step_cost.bucket_of(n)]
        expected[bucket] = expected.get(bucket, 0) + n
    assert sum(sizes) == verify == proc["drafts"]  # every decode step logged, each verified
    assert {b: d for b, (d, _) in _by_batch(proc).items()} == expected
    assert {m for _, m in _by_batch(proc).values()} == {2.0}
    assert len(expected) >= 2 and "1" in expected  # at least two batch sizes, alone among them
    assert signals.LARGE_BATCH not in {f["code"] for f in proc["findings"]}
    assert [(r["cuda_graph"], r["drafts"], r["mean_acceptance_length"])
            for r in proc["by_cuda_graph"]] == [("eager", verify, 2.0)]
    text = subprocess.run([sys.executable, "-m", "spectrace.cli", "report", str(run.data_dir)],
                          capture_output=True, text=True, timeout=60).stdout
    assert "acceptance by batch size (requests verified in the step):" in text
    for bucket in expected:
        assert f"{bucket:>9}: mean accept length 2.00" in text
    assert f"acceptance by {breakdowns.CUDA_GRAPH.title}:" in text
    assert f"{'eager':>9}: mean accept length 2.00" in text


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
    """vLLM (V1 engine, the EngineCore counts): the lone request's request-steps are vLLM's
    own `spec_decode_num_drafts` counted while it ran, all at batch 1; the wave's are
    vLLM's count while it ran, each at a batch size of at most the wave's, most of them at
    the wave's own (its requests decode together once admitted)."""
    run = vllm_server(tiny_models("partial"), env=FAST, extra_args=["--cudagraph-metrics"])
    before = run.server.metrics().get(DRAFTS, 0)
    out = _complete(run.server, [PROMPT] * WAVE)
    assert len(out["choices"]) == WAVE
    wave = run.server.metrics()[DRAFTS] - before
    report = run.settle(before + wave)
    during_wave = _by_batch(run.process("engine_core", report))
    _complete(run.server, [PROMPT])
    alone = run.server.metrics()[DRAFTS] - before - wave
    report = run.settle(before + wave + alone)
    engine = run.process("engine_core", report)
    wave_bucket = step_cost.BUCKETS[step_cost.bucket_of(WAVE)]
    allowed = set(step_cost.BUCKETS[:step_cost.bucket_of(WAVE) + 1])
    assert wave > 0 and alone > 0 and set(during_wave) <= allowed
    assert sum(d for d, _ in during_wave.values()) == wave
    assert during_wave[wave_bucket][0] >= wave / 2
    after = _by_batch(engine)
    lone = {b: after[b][0] - during_wave.get(b, (0, 0))[0] for b in after}
    assert {b: d for b, d in lone.items() if d} == {"1": alone}  # vLLM's own count, at batch 1
    assert {m for _, m in after.values()} == {2.0} and engine["drafts"] == wave + alone
    assert [(r["cuda_graph"], r["drafts"], r["mean_acceptance_length"])
            for r in engine["by_cuda_graph"]] == [("eager", wave + alone, 2.0)]
    text = subprocess.run([sys.executable, "-m", "spectrace.cli", "report", str(run.data_dir)],
                          capture_output=True, text=True, timeout=60).stdout
    assert "acceptance by batch size (requests verified in the step):" in text
    assert f"{wave_bucket:>9}: mean accept length 2.00" in text
