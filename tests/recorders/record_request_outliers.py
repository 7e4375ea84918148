"""Recorder of the `request_outliers` scenario (tests/test_request_outliers_recorded.py
reads it): the `context` tiny pair (harness/tiny_models.py) on the real CPU servers,
SGLang 0.5.23's v2 worker, then vLLM's V1 engine with `--per-request-spec-decode-metrics
summary`. The pair accepts exactly one draft token of three per verify for a short walk,
none for a walk through ids past 1024 (`walk(n, 1500)`: a request the draft never gets
right, as on garbled output), and all three on `loop(n)` (both models repeat one token: a
generation loop). Every request is recorded (`SPECTRACE_REQUEST_SAMPLE_RATIO=1`).

Per runtime, two runs are kept: `RUNTIME-uniform` (24 short walks) and `RUNTIME-outliers`
(the same server after one garbled and one looping request more), each with the runtime's
own per-request figures (SGLang's `meta_info`, vLLM's per-request metrics) and ids beside
it. Run by `scripts/record.sh request_outliers`.
"""
from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import pytest

from harness.tiny_models import loop, walk
from tests import recorded_runs
from tests.e2e import generate, settle, sglang_totals

# 1 token from the prefill, then accepted + 1 a step: 81 ends every request on a whole step
# (a walk: 40 steps of 2, the garbled one 80 of 1, the loop 20 of 4), none cut short
N_UNIFORM, NEW_TOKENS = 24, 81
ENV = {"SPECTRACE_METRIC_INTERVAL": "0.5", "SPECTRACE_REQUEST_SAMPLE_RATIO": "1"}


def _generate(run, prompts):
    def post(ids):
        return generate(run.server.url, {"input_ids": ids, "sampling_params": {
            "max_new_tokens": NEW_TOKENS, "temperature": 0}})
    with ThreadPoolExecutor(4) as pool:
        return list(pool.map(post, prompts))


def _keep_checked(run, name: str, runtime: dict, scheduler) -> None:
    folder = recorded_runs.keep(run.data_dir, "request_outliers", name, runtime=runtime)
    copy = scheduler(recorded_runs.report(folder))
    assert copy["drafts"] == runtime["request_steps"]  # the copy holds every step
    assert copy["requests"]["recorded"] == runtime["requests"]


@pytest.mark.sglang
def test_record_sglang(tiny_models, sglang_server):
    run = sglang_server(tiny_models("context"), env=ENV, timeout=600,
                        extra_args=["--max-total-tokens", "8192"])
    uniform = _generate(run, [walk(100)] * N_UNIFORM)
    steps = sglang_totals(uniform)[0]
    assert settle(run, steps, requests=N_UNIFORM)["drafts"] == steps
    _keep_checked(run, "sglang-uniform", {
        "requests": N_UNIFORM, "request_steps": steps,
        "rates": sorted(r["meta_info"]["spec_accept_rate"] for r in uniform)}, run.scheduler)
    garbled, looping = _generate(run, [walk(50, 1500), loop(20)])
    everything = uniform + [garbled, looping]
    steps = sglang_totals(everything)[0]
    assert settle(run, steps, requests=len(everything))["drafts"] == steps
    _keep_checked(run, "sglang-outliers", {
        "requests": len(everything), "request_steps": steps,
        "rates": sorted(r["meta_info"]["spec_accept_rate"] for r in uniform),
        "garbled": {"id": garbled["meta_info"]["id"],
                    "rate": garbled["meta_info"]["spec_accept_rate"]},
        "looping": {"id": looping["meta_info"]["id"],
                    "rate": looping["meta_info"]["spec_accept_rate"]}}, run.scheduler)


def _complete(run, prompts):
    with ThreadPoolExecutor(4) as pool:
        return list(pool.map(lambda p: run.server.complete(p, NEW_TOKENS, timeout=600),
                             prompts))


def _own(response) -> dict:
    m = response["metrics"]["speculative_decoding"]
    return {"id": response["id"], "steps": m["num_spec_steps"],
            "rate": m["num_accepted_draft_tokens"] / m["num_draft_tokens"]}


@pytest.mark.vllm
def test_record_vllm(tiny_models, vllm_server, tmp_path_factory):
    from tests.e2e import plant
    from tests.test_vllm_e2e_context import _without_vocab_map
    models = plant(tiny_models("context"), str(tmp_path_factory.mktemp("pair") / "context"),
                   _without_vocab_map)
    run = vllm_server(models, env=ENV, timeout=600, extra_args=[
        "--per-request-spec-decode-metrics", "summary", "--max-model-len", "2048",
        "--max-num-batched-tokens", "2048"])
    engine = lambda report: run.process("engine_core", report)  # noqa: E731
    uniform = [_own(r) for r in _complete(run, [walk(100)] * N_UNIFORM)]
    steps = sum(m["steps"] for m in uniform)
    assert engine(run.settle(steps, requests=N_UNIFORM))["drafts"] == steps
    _keep_checked(run, "vllm-uniform", {
        "requests": N_UNIFORM, "request_steps": steps,
        "rates": sorted(m["rate"] for m in uniform)}, engine)
    garbled, looping = (_own(r) for r in _complete(run, [walk(50, 1500), loop(20)]))
    steps += garbled["steps"] + looping["steps"]
    assert engine(run.settle(steps, requests=N_UNIFORM + 2))["drafts"] == steps
    _keep_checked(run, "vllm-outliers", {
        "requests": N_UNIFORM + 2, "request_steps": steps,
        "rates": sorted(m["rate"] for m in uniform),
        "garbled": garbled, "looping": looping}, engine)
