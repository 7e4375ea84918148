"""Acceptance by batch size on the real SGLang 0.5.23 CPU server (EAGLE-3, v2 worker) and on
vLLM's real CPU engine: one wave of identical requests sent together in one call (one
message to the scheduler, so they are prefilled together, decode together and finish
together: the `partial` pair accepts exactly one draft token a step), then one request
alone. Every request-step of the wave is at batch WAVE, every one of the lone request at
batch 1, so the batch-size figures must equal the runtime's own per-request counts of
those requests (SGLang's `spec_verify_ct`; vLLM's `num_spec_steps`)."""
from __future__ import annotations

import json
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
