"""EAGLE-3 draft-model signals from a real SGLang 0.5.23 CPU server: the fc-bypass failure
(`use_aux_hidden_state: false`), strict mode, and faults planted in the draft checkpoint
that SGLang's real `load_weights` accepts without a word."""
from __future__ import annotations

import pytest
import torch

from harness.server import start_server
from tests.e2e import after_traffic, codes, plant, wait_for

pytestmark = pytest.mark.sglang
FAST = {"SPECTRACE_METRIC_INTERVAL": "0.5"}


@pytest.fixture(scope="module")
def bypass_run(tiny_models, sglang_server):
    run = sglang_server(tiny_models("bypass"), env=FAST)
    responses = [run.server.generate(p, 24) for p in ([3, 7, 11], [5, 9, 2])]
    return run, responses


def test_bypass_flags_target_fed_passes_only(bypass_run):
    run, responses = bypass_run
    proc = after_traffic(run)
    widths = {(p["pass_kind"], p["width"]): p["count"] for p in proc["hidden_state_passes"]}
    assert set(widths) == {("target_fed", 128), ("draft_decode", 128)}
    # every target-fed pass was a bypass; no draft-decode pass was flagged
    assert proc["fc_bypass"] == widths[("target_fed", 128)]
    assert proc["width_mismatch"] == 0
    found = codes(proc)
    assert found["eagle3.fc_bypass"]["severity"] == "error"
    assert "set_eagle3_layers_to_capture" in found["eagle3.fc_bypass"]["message"]
    assert "aux.capture_disabled" in found
    # SGLang itself reports a collapsed acceptance and nothing else
    assert proc["mean_acceptance_length"] < 1.2
    assert all(r["meta_info"]["spec_accept_length"] < 1.2 for r in responses)


def test_bypass_warns_once_per_process(bypass_run):
    run, _ = bypass_run
    assert after_traffic(run)["fc_bypass"] > 0
    log = open(run.log_path).read()
    assert log.count("spectrace [eagle3.fc_bypass]") == 1
    assert "eagle_config.use_aux_hidden_state" in log


def test_strict_mode_stops_at_first_bypass(tiny_models, tmp_path):
    """SPECTRACE_STRICT=1: the first target-fed bypass raises StrictModeError in the
    scheduler, with the explanation, and the server goes down (staging/CI use). SGLang
    runs a first extend pass while starting, so the server stops before it is ready."""
    log = tmp_path / "server.log"
    env = {"SPECTRACE_ENABLED": "1", "SPECTRACE_STRICT": "1",
           "SPECTRACE_OUTPUT_DIR": str(tmp_path / "data")}
    with pytest.raises(RuntimeError, match="SGLang server exited"):
        server = start_server(tiny_models("bypass"), str(log), env_extra=env)
        try:  # pragma: no cover - reached only if SGLang stops running a start-up pass
            server.generate([3, 7, 11], 8, timeout=60)
        finally:
            server.stop()
    text = log.read_text()
    assert text.count("StrictModeError: spectrace strict mode (SPECTRACE_STRICT=1) stopped "
                      "at the first fc bypass") == 1
    assert "use_aux_hidden_state" in text and "set_eagle3_layers_to_capture" in text


def test_planted_weight_faults_are_named(tiny_models, sglang_server, tmp_path):
    def edit(sd):
        sd["midlayer.self_attn.q_proj.lora_A"] = torch.zeros(2, 2, dtype=torch.bfloat16)
        del sd["norm.weight"]
        sd["d2t"] = torch.full((256,), 400, dtype=torch.int64)  # i + 400 >= 512 for i >= 112
    models = plant(tiny_models("partial"), str(tmp_path / "m"), edit)
    run = sglang_server(models, env=FAST)
    found = wait_for(lambda: len(c := codes(run.report()["processes"][0])) >= 3 and c)
    assert found["weights.unused_keys"]["details"]["keys"] == ["midlayer.self_attn.q_proj.lora_A"]
    assert found["weights.missing_params"]["details"]["params"] == ["model.norm.weight"]
    assert "vocab.d2t_out_of_range" in found
    assert "vocab.d2t_absolute" not in found


@pytest.mark.parametrize("fault,code", [("absolute", "vocab.d2t_absolute"),
                                        ("missing", "vocab.d2t_missing")])
def test_planted_vocab_map_faults(tiny_models, sglang_server, tmp_path, fault, code):
    def edit(sd):
        if fault == "absolute":
            sd["d2t"] = torch.arange(256, dtype=torch.int64)  # absolute ids, not offsets
        else:
            del sd["d2t"]
    models = plant(tiny_models("partial"), str(tmp_path / "m"), edit)
    run = sglang_server(models, env=FAST)
    found = wait_for(lambda: codes(run.report()["processes"][0]) if run.report()["processes"]
                     else {})
    assert code in found, found
    assert not {c for c in found if c.startswith("weights.")}
    if fault == "absolute":  # draft id i read as target id 2i: about nothing accepted
        answer = run.server.generate([3, 7, 11], 24)
        assert answer["meta_info"]["spec_accept_length"] < 1.2, answer["meta_info"]
