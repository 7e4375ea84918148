"""Per-request outliers on the real CPU servers (SGLang 0.5.23's v2 worker, then vLLM's
V1 engine with `--per-request-spec-decode-metrics summary`): the `context` tiny pair
(harness/tiny_models.py) accepts exactly one draft token of three per verify for a short
walk, none for a walk through ids past 1024 (`walk(n, 1500)`: a request the draft never
gets right, as on garbled output), and all three on `loop(n)` (both models repeat one
token: a generation loop). Every request is recorded (`SPECTRACE_REQUEST_SAMPLE_RATIO=1`).

First a uniform run (24 short walks): no outlier finding, and the per-request acceptance
histogram holds every request at 1/3. Then one garbled and one looping request: the
report names each by the runtime's own id (SGLang's meta_info id; vLLM's engine request
id, the response's id plus a suffix), and each request's rate equals the runtime's own
per-request counts. One server at a time.
"""
from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import pytest

from harness.tiny_models import loop, walk
from spectrace import signals
from tests.e2e import codes, generate, settle, sglang_totals

# 1 token from the prefill, then accepted + 1 a step: 81 ends every request on a whole step
# (a walk: 40 steps of 2, the garbled one 80 of 1, the loop 20 of 4), none cut short
N_UNIFORM, NEW_TOKENS = 24, 81
ENV = {"SPECTRACE_METRIC_INTERVAL": "0.5", "SPECTRACE_REQUEST_SAMPLE_RATIO": "1"}
OUTLIERS = (signals.REQUEST_LOW, signals.REQUEST_IMPLAUSIBLE)


def _rates(proc) -> dict:
    return proc["requests"]["by_acceptance_rate"]


def _assert_uniform(proc, n: int) -> None:
    assert not set(codes(proc)) & set(OUTLIERS), proc["findings"]
    assert _rates(proc) == {"0.3-0.4": n}  # 1/3 each, the histogram of every request


def _assert_named(proc, garbled_id: str, loop_id: str, n: int) -> None:
    found = codes(proc)
    assert found[signals.REQUEST_LOW]["details"]["request_ids"] == [garbled_id]
    assert found[signals.REQUEST_IMPLAUSIBLE]["details"]["request_ids"] == [loop_id]
    assert found[signals.REQUEST_LOW]["details"]["rates"] == [0.0]
    assert found[signals.REQUEST_IMPLAUSIBLE]["details"]["rates"] == [1.0]
    assert _rates(proc) == {"0-0.05": 1, "0.3-0.4": n, "0.99-1": 1}


# -- SGLang ---------------------------------------------------------------------------------
def _generate(run, prompts):
    def post(ids):
        return generate(run.server.url, {"input_ids": ids, "sampling_params": {
            "max_new_tokens": NEW_TOKENS, "temperature": 0}})
    with ThreadPoolExecutor(4) as pool:
        return list(pool.map(post, prompts))


@pytest.mark.sglang
def test_sglang_names_the_garbled_and_the_looping_request(tiny_models, sglang_server):
    run = sglang_server(tiny_models("context"), env=ENV, timeout=600,
                        extra_args=["--max-total-tokens", "8192"])
    uniform = _generate(run, [walk(100)] * N_UNIFORM)
    assert {r["meta_info"]["spec_accept_rate"] for r in uniform} == {1 / 3}  # SGLang's own
    _assert_uniform(settle(run, sglang_totals(uniform)[0], requests=N_UNIFORM), N_UNIFORM)
    garbled, looping = _generate(run, [walk(50, 1500), loop(20)])
    assert (garbled["meta_info"]["spec_accept_rate"],
            looping["meta_info"]["spec_accept_rate"]) == (0.0, 1.0)
    everything = uniform + [garbled, looping]
    proc = settle(run, sglang_totals(everything)[0], requests=len(everything))
    _assert_named(proc, garbled["meta_info"]["id"], looping["meta_info"]["id"], N_UNIFORM)


# -- vLLM -----------------------------------------------------------------------------------
def _complete(run, prompts):
    with ThreadPoolExecutor(4) as pool:
        return list(pool.map(lambda p: run.server.complete(p, NEW_TOKENS, timeout=600),
                             prompts))


def _engine_id(proc, response) -> str:
    """The engine request id spectrace recorded for this response (its id + a suffix)."""
    ids = [x["request_id"] for x in proc["requests"]["lowest"]] + [
        i for f in proc["findings"] for i in (f["details"] or {}).get("request_ids", [])]
    (mine,) = {i for i in ids if i.startswith(response["id"] + "-")}
    return mine


@pytest.mark.vllm
def test_vllm_names_the_garbled_and_the_looping_request(tiny_models, vllm_server,
                                                        tmp_path_factory):
    from tests.e2e import plant
    from tests.test_vllm_e2e_context import _without_vocab_map
    models = plant(tiny_models("context"), str(tmp_path_factory.mktemp("pair") / "context"),
                   _without_vocab_map)
    run = vllm_server(models, env=ENV, timeout=600, extra_args=[
        "--per-request-spec-decode-metrics", "summary", "--max-model-len", "2048",
        "--max-num-batched-tokens", "2048"])
    uniform = _complete(run, [walk(100)] * N_UNIFORM)
    own = [r["metrics"]["speculative_decoding"] for r in uniform]
    assert {m["num_accepted_draft_tokens"] / m["num_draft_tokens"] for m in own} == {1 / 3}
    report = run.settle(sum(m["num_spec_steps"] for m in own), requests=N_UNIFORM)
    _assert_uniform(run.process("engine_core", report), N_UNIFORM)
    garbled, looping = _complete(run, [walk(50, 1500), loop(20)])
    g, lp = (r["metrics"]["speculative_decoding"] for r in (garbled, looping))
    assert (g["num_accepted_draft_tokens"], lp["num_accepted_draft_tokens"]) == (
        0, lp["num_draft_tokens"])
    steps = sum(m["num_spec_steps"] for m in own + [g, lp])
    proc = run.process("engine_core", run.settle(steps, requests=N_UNIFORM + 2))
    _assert_named(proc, _engine_id(proc, garbled), _engine_id(proc, looping), N_UNIFORM)
