"""Run-time causes of low acceptance that are not wiring, on real CPU servers: the runtime
accepting by a synthetic rule (SGLang's `SGLANG_SIMULATE_ACC_LEN`, vLLM's
`rejection_sample_method: "synthetic"`) and a draft whose hidden states turn non-finite.

One server per runtime carries both faults: the `partial` pair with an inf planted in the
draft's fc weight (`e2e.plant`; a bfloat16 draft served in float16 overflows the same way,
but float16 does not run SGLang's CPU kernels here, so the inf is planted), started with
the synthetic switch on. Each finding is raised from what the runtime's own process uses
(SGLang's `spec_utils` constants, vLLM's resolved `SpeculativeConfig`) and from on-device
checks of the draft's outputs; the report leads with "broken". The healthy runs of
tests/test_e2e_acceptance.py and tests/test_vllm_e2e.py get neither (their findings are
empty, and the non-finite check always runs on a draft's first pass).
"""
from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tests.conftest import ROOT
from tests.e2e import codes, plant, settle, sglang_totals, wait_for

FAST = {"SPECTRACE_METRIC_INTERVAL": "0.5", "SPECTRACE_FINITE_EVERY": "4"}
PROMPTS = [[3, 7, 11], [5, 9, 2]]
SYNTHETIC = "acceptance.synthetic"
NON_FINITE = "draft.non_finite"


def _inf_in_fc(sd) -> None:
    sd["fc.weight"][0, 0] = float("inf")


@pytest.fixture(scope="module")
def nonfinite_models(tiny_models, tmp_path_factory):
    return plant(tiny_models("partial"), str(tmp_path_factory.mktemp("nf") / "nonfinite"),
                 _inf_in_fc)


@pytest.mark.sglang
def test_sglang_reads_its_simulate_switch_as_verify_does(tmp_path):
    """In a fresh SGLang interpreter with the variables set, spectrace reads the values
    SGLang's verify uses (`spec_utils` constants). Unset, the healthy server runs show
    no finding (tests/test_e2e_acceptance.py)."""
    code = ("from spectrace.adapters.sglang_worker import simulated_acceptance as s; "
            "print(repr(s()))")
    env = {**os.environ, "PYTHONPATH": ROOT, "SGLANG_SIMULATE_ACC_LEN": "2.5",
           "SGLANG_SIMULATE_ACC_METHOD": "multinomial"}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                         text=True, timeout=300)
    assert out.stdout.strip() == "(2.5, 'multinomial')", out.stderr[-2000:]


@pytest.mark.sglang
def test_sglang_simulated_acceptance_and_non_finite_draft(nonfinite_models, sglang_server):
    run = sglang_server(nonfinite_models, env={**FAST, "SGLANG_SIMULATE_ACC_LEN": "3",
                                                "SGLANG_SIMULATE_ACC_METHOD": "multinomial"},
                        timeout=600)
    responses = [run.server.generate(p, 24) for p in PROMPTS]
    verify, accepted, _ = sglang_totals(responses)
    def both_found():
        proc = settle(run, verify)
        return proc if {SYNTHETIC, NON_FINITE} <= set(codes(proc)) else None

    proc = wait_for(both_found) or settle(run, verify)
    found = codes(proc)
    assert SYNTHETIC in found and NON_FINITE in found, (found, run.log_path)
    synthetic = found[SYNTHETIC]
    assert synthetic["severity"] == "error"
    assert synthetic["message"].startswith("the acceptance figures are synthetic: SGLang ")
    assert "SGLANG_SIMULATE_ACC_LEN=3, SGLANG_SIMULATE_ACC_METHOD=multinomial" in \
        synthetic["message"]
    assert "Fix: unset SGLANG_SIMULATE_ACC_LEN" in synthetic["message"]
    assert synthetic["details"]["simulate_acc_len"] == 3.0
    nf = found[NON_FINITE]
    assert nf["severity"] == "error" and nf["details"]["dtype"] == "bfloat16"
    assert nf["details"]["where"] == ["hidden states"]
    assert nf["details"]["non_finite_checks"] >= 1
    assert "the draft runs in bfloat16" in nf["message"]
    # the fiction is consistent: spectrace shows what SGLang's meta_info shows
    assert proc["drafts"] == verify and proc["accepted_tokens"] == accepted
    assert proc["internal_errors"] == 0
    text = subprocess.run([sys.executable, "-m", "spectrace.cli", "report", str(run.data_dir)],
                          capture_output=True, text=True, timeout=60).stdout
    first = text.splitlines()[0]
    assert first.startswith("Verdict: broken: "), first
    assert ("acceptance figures are synthetic" in first or "non-finite" in first), first


@pytest.mark.vllm
def test_vllm_synthetic_acceptance_and_non_finite_draft(nonfinite_models, vllm_server):
    rates = [0.9, 0.6, 0.3]
    run = vllm_server(nonfinite_models, env=FAST, timeout=600, spec_extra={
        "rejection_sample_method": "synthetic", "synthetic_acceptance_rates": rates})
    for p in PROMPTS:
        run.server.complete(p, 24)
    def both_found():
        report = run.report()
        return report if (SYNTHETIC in codes(run.process("engine_core", report))
                          and NON_FINITE in codes(run.process("worker", report))) else None

    report = wait_for(both_found) or run.report()
    engine, worker = run.process("engine_core", report), run.process("worker", report)
    synthetic = codes(engine).get(SYNTHETIC)
    assert synthetic is not None, (codes(engine), run.log_path)
    assert ('vLLM accepts draft tokens by a synthetic rule (rejection_sample_method '
            '"synthetic", synthetic_acceptance_rates [0.9, 0.6, 0.3])') in synthetic["message"]
    assert synthetic["details"]["synthetic_acceptance_rates"] == rates
    nf = codes(worker).get(NON_FINITE)
    assert nf is not None, (codes(worker), run.log_path)
    assert nf["details"]["dtype"] == "float32"  # the harness serves with --dtype float32
    assert nf["details"]["where"] == ["hidden states", "logits"]
    assert engine["internal_errors"] == 0 and worker["internal_errors"] == 0
    assert report["verdict"]["state"] == "broken", report["verdict"]
