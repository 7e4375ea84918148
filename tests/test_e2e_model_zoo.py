"""The deployments people run, end to end on SGLang 0.5.23's real CPU server: the Kimi-K2.5
shape (a DeepSeek-V3 target, MLA + MoE with a dense first layer, and SGLang's MLA EAGLE-3
draft `Eagle3DeepseekV2ForCausalLM`), a Qwen3 target with the Llama EAGLE-3 draft, and a
DeepSeek-V3 MTP (NextN) draft through the same eagle worker. Tiny models with exactly
known acceptance (harness/tiny_models.py); SGLang's own `meta_info` is the reference.
Stand-ins: the kernel ops (harness/sgl_kernel_standin) and a no-op
`torch.cuda.synchronize` without a driver (harness/cpu_patches).
"""
from __future__ import annotations

import pytest
import torch

from tests.e2e import (
    after_traffic, codes, findings_but_cost, plant, runtime_codes, settle, sglang_totals, wait_for,
)

pytestmark = pytest.mark.sglang

FAST = {"SPECTRACE_METRIC_INTERVAL": "0.5", "SPECTRACE_STEP_SAMPLE_RATIO": "1",
        "SPECTRACE_AGREEMENT_EVERY": "1"}
PROMPTS = [[3, 7, 11], [5, 9, 2]]
HEALTHY_WIDTHS = {("target_fed", 384), ("draft_decode", 128)}


def serve(sglang_server, models: str, **kwargs):
    run = sglang_server(models, env=FAST, **kwargs)
    responses = [run.server.generate(p, 20) for p in PROMPTS]
    verify, accepted, hist = sglang_totals(responses)
    return run, responses, settle(run, verify), (verify, accepted, hist)


def assert_exact(proc, totals, per_position, mean_length):
    verify, accepted, hist = totals
    assert proc["drafts"] == verify and proc["accepted_tokens"] == accepted
    assert proc["accepted_per_position"] == per_position(verify)
    assert proc["mean_acceptance_length"] == mean_length
    assert proc["accept_length_counts"] == hist
    assert proc["internal_errors"] == 0


def assert_bypass_named(proc, responses, healthy_responses):
    """Same text as the healthy draft, acceptance about 1.0, the cause named."""
    assert [r["output_ids"] for r in responses] == [r["output_ids"]
                                                    for r in healthy_responses]
    assert all(r["meta_info"]["spec_accept_length"] < 1.2 for r in responses)
    widths = {(p["pass_kind"], p["width"]): p["count"] for p in proc["hidden_state_passes"]}
    assert proc["fc_bypass"] == widths[("target_fed", 128)] > 0
    found = codes(proc)
    assert found["eagle3.fc_bypass"]["severity"] == "error"
    assert found["aux.capture_disabled"]["severity"] == "error"
    assert runtime_codes(proc) == {"eagle3.fc_bypass", "aux.capture_disabled"}


# -- Kimi-K2.5 shape: DeepSeek-V3 target + MLA EAGLE-3 draft ---------------------------------
@pytest.fixture(scope="module")
def mla_healthy(tiny_models, sglang_server):
    return serve(sglang_server, tiny_models("partial", pair="dsv3-mla"))


def test_mla_pair_exact_acceptance_and_no_findings(mla_healthy):
    run, responses, proc, totals = mla_healthy
    assert_exact(proc, totals, lambda v: [v, 0, 0], 2.0)
    assert proc["agreement_per_position"] == [1.0, 0.0, 0.0]
    assert {(p["pass_kind"], p["width"]) for p in proc["hidden_state_passes"]} == \
        HEALTHY_WIDTHS
    assert proc["expected_widths"] == {"fc_in": 384, "draft_hidden": 128,
                                       "target_hidden": 128, "num_aux": 3}
    assert findings_but_cost(proc) == []  # capture on the DeepSeek rule's [0, 1, 2]: healthy


def test_mla_pair_bypass_is_named(mla_healthy, tiny_models, sglang_server):
    _, healthy, _, _ = mla_healthy
    run, responses, _, _ = serve(sglang_server, tiny_models("bypass", pair="dsv3-mla"))
    assert_bypass_named(after_traffic(run), responses, healthy)


def test_mla_draft_under_the_eagle_algorithm_names_the_cause(tiny_models, sglang_server):
    """An EAGLE-3 draft launched with --speculative-algorithm EAGLE (or its alias NEXTN):
    SGLang never switches the target's capture on, and says nothing."""
    run, responses, proc, _ = serve(sglang_server, tiny_models("partial", pair="dsv3-mla"),
                                    algorithm="EAGLE")
    assert all(r["meta_info"]["spec_accept_length"] < 1.2 for r in responses)
    found = codes(proc)
    assert "--speculative-algorithm EAGLE3" in found["aux.capture_disabled"]["message"]
    assert "eagle3.fc_bypass" in found


def test_mla_full_acceptance(tiny_models, sglang_server):
    run, responses, proc, totals = serve(sglang_server, tiny_models("full", pair="dsv3-mla"))
    assert_exact(proc, totals, lambda v: [v, v, v], 4.0)
    assert findings_but_cost(proc) == []


def test_mla_planted_load_faults_are_named(tiny_models, sglang_server, tmp_path):
    """The MLA draft's own load_weights (`layers.0.*` -> `midlayer.*`, q_a / kv_a fused):
    a decoder weight SGLang does not build, a missing half of a stacked parameter, and
    absolute ids in d2t."""
    def edit(sd):
        sd["layers.0.self_attn.q_norm.weight"] = torch.ones(16, dtype=torch.bfloat16)
        del sd["layers.0.mlp.up_proj.weight"]
        sd["d2t"] = torch.arange(256, dtype=torch.int64)
    models = plant(tiny_models("partial", pair="dsv3-mla"), str(tmp_path / "m"), edit)
    run = sglang_server(models, env=FAST)
    found = wait_for(lambda: len(c := codes(run.report()["processes"][0])) >= 3 and c)
    unused = found["weights.unused_keys"]
    assert unused["severity"] == "error"  # a weight of the draft network, not a leftover
    assert unused["details"]["keys"] == ["layers.0.self_attn.q_norm.weight"]
    assert found["weights.missing_params"]["details"]["params"] == [
        "model.midlayer.mlp.gate_up_proj.weight[up_proj]"]
    assert "vocab.d2t_absolute" in found


# -- Qwen3 target + Llama EAGLE-3 draft (SGLang adds 1 to every layer id) --------------------
@pytest.fixture(scope="module")
def qwen3_healthy(tiny_models, sglang_server):
    return serve(sglang_server, tiny_models("partial", pair="qwen3-llama"))


def test_qwen3_pair_exact_acceptance_and_no_findings(qwen3_healthy):
    run, responses, proc, totals = qwen3_healthy
    assert_exact(proc, totals, lambda v: [v, 0, 0], 2.0)
    assert {(p["pass_kind"], p["width"]) for p in proc["hidden_state_passes"]} == \
        HEALTHY_WIDTHS
    assert findings_but_cost(proc) == []


def test_qwen3_pair_bypass_is_named(qwen3_healthy, tiny_models, sglang_server):
    _, healthy, _, _ = qwen3_healthy
    run, responses, _, _ = serve(sglang_server, tiny_models("bypass", pair="qwen3-llama"))
    assert_bypass_named(after_traffic(run), responses, healthy)


# -- MTP / NextN through the same eagle worker -----------------------------------------------
def test_nextn_worker_signals_and_no_eagle3_findings(tiny_models, sglang_server):
    """DeepSeek-V3's own MTP layer as the draft (--speculative-algorithm NEXTN): the worker
    signals (acceptance per position, accept lengths, agreement, spans) are the same as for
    EAGLE-3; the draft takes the target's last hidden state by design, so no EAGLE-3 hook
    records a pass and no EAGLE-3 finding fires."""
    run, responses, proc, totals = serve(sglang_server, tiny_models("partial", pair="dsv3-nextn"),
                                         algorithm="NEXTN")
    assert_exact(proc, totals, lambda v: [v, v, v], 4.0)
    assert proc["agreement_per_position"] == [1.0, 1.0, 1.0]
    assert proc["spans"] > 0
    assert proc["hidden_state_passes"] == [] and proc["expected_widths"] == {}
    assert findings_but_cost(proc) == []
