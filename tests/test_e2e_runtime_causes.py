"""Run-time causes of low acceptance that are not wiring, on real CPU servers: the runtime
accepting by a synthetic rule (SGLang's `SGLANG_SIMULATE_ACC_LEN`, vLLM's
`rejection_sample_method: "synthetic"`) and a draft whose hidden states turn non-finite.

One SGLang server carries both faults: the `partial` pair with an inf planted in the
draft's fc weight (`e2e.plant`; a bfloat16 draft served in float16 overflows the same way,
but float16 does not run SGLang's CPU kernels here, so the inf is planted), started with
the synthetic switch on. vLLM's CPU sampler refuses synthetic acceptance, so its setting
is resolved by vLLM's own config classes without a server, and one vLLM server runs the
non-finite draft. Each finding is raised from what the runtime's own process uses
(SGLang's `spec_utils` constants, vLLM's resolved `SpeculativeConfig`) and from on-device
checks of the draft's outputs; the report leads with "broken". The healthy runs of
tests/test_e2e_acceptance.py and tests/test_vllm_e2e.py get neither (their findings are
empty, and the non-finite check always runs on a draft's first pass).

Both servers also show the server settings that change acceptance (`server_settings`),
read at start-up from the config objects their processes received: each is started with
prefix caching off (a setting off its default), and the report's header says so.
"""
from __future__ import annotations

import glob
import json
import os
import subprocess
import sys

import pytest

from harness.server import free_port
from tests.conftest import ROOT
from tests.e2e import codes, plant, settle, sglang_totals, wait_for
from tests.test_prometheus_e2e import PROMETHEUS, Prometheus

FAST = {"SPECTRACE_METRIC_INTERVAL": "0.5", "SPECTRACE_FINITE_EVERY": "4"}
PROMPTS = [[3, 7, 11], [5, 9, 2]]
SYNTHETIC = "acceptance.synthetic"
# every setting the CPU servers have, with the values the runs below start them with
SGLANG_SETTINGS = {
    "kv_cache_dtype": "auto", "draft_kv_cache_dtype": "auto", "quantization": "none",
    "draft_quantization": "none", "cuda_graph": False, "async_scheduling": False,
    "prefix_caching": False, "grammar_backend": "xgrammar", "disaggregation": "none",
    "attention_dp_size": 1, "tp_size": 1, "pp_size": 1, "ep_size": 1, "spec_method": "EAGLE3",
    "spec_num_steps": 3, "spec_topk": 1, "spec_num_draft_tokens": 4, "spec_adaptive": False,
    "spec_verification": "standard", "chat_template": "none"}  # the tiny target's tokenizer has no template
VLLM_SETTINGS = {
    "kv_cache_dtype": "auto", "draft_kv_cache_dtype": "auto", "quantization": "none",
    "draft_quantization": "none", "cuda_graph": False, "async_scheduling": False,
    "prefix_caching": False, "grammar_backend": "auto", "disaggregation": "none",
    "attention_dp_size": 1, "tp_size": 1, "pp_size": 1, "ep_size": 1, "spec_method": "eagle3",
    "spec_num_steps": 3, "spec_adaptive": False, "spec_verification": "standard",
    "chat_template": "none, unless --chat-template"}
NON_FINITE = "draft.non_finite"


def _inf_in_fc(sd) -> None:
    sd["fc.weight"][0, 0] = float("inf")


@pytest.fixture(scope="module")
def nonfinite_models(tiny_models, tmp_path_factory):
    return plant(tiny_models("partial"), str(tmp_path_factory.mktemp("nf") / "nonfinite"),
                 _inf_in_fc)


@pytest.mark.sglang
@pytest.mark.prometheus
def test_sglang_simulated_acceptance_and_non_finite_draft(nonfinite_models, sglang_server,
                                                          tmp_path):
    """Both findings, in the report (which leads with "broken") and as alerts firing on a
    real Prometheus scraping the scheduler's endpoint (grafana/alerts rules)."""
    assert PROMETHEUS or not os.environ.get("CI"), "needs Prometheus (scripts/test.sh)"
    port = free_port()
    run = sglang_server(nonfinite_models, env={
        **FAST, "SGLANG_SIMULATE_ACC_LEN": "3", "SGLANG_SIMULATE_ACC_METHOD": "multinomial",
        "SPECTRACE_EXPORTERS": "file,prometheus", "SPECTRACE_PROMETHEUS_PORT": str(port)},
        timeout=900, extra_args=["--disable-radix-cache"])
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
    # the server settings, read from the ServerArgs the scheduler received, as started
    # (the harness's command line, --disable-radix-cache) and as SGLang resolved them (no
    # overlap schedule for speculation on the CPU, its default grammar backend)
    assert proc["settings"] == SGLANG_SETTINGS, proc["settings"]
    resources = [json.load(open(p))["attributes"]
                 for p in glob.glob(os.path.join(run.data_dir, "*", "resource.json"))]
    assert resources and all(r["spectrace.setting.prefix_caching"] is False for r in resources)
    header = text.splitlines()[2]
    assert header.startswith("server settings: KV cache auto, draft KV cache auto, "), header
    assert "prefix caching off" in header and "speculative method EAGLE3" in header, header
    if PROMETHEUS is None:
        return  # outside CI without the Debian package: the report half still ran
    prom = Prometheus(str(tmp_path), [port])
    try:
        wanted = {"SpectraceSyntheticAcceptance", "SpectraceDraftNonFinite"}

        def firing():
            try:
                now = {a["labels"]["alertname"] for a in prom.alerts()
                       if a["state"] == "firing"}
            except ValueError:  # not JSON yet (Prometheus still starting its API)
                return None
            return now if wanted <= now else None

        firing = prom.wait(firing, 120, f"alerts {wanted} firing")
        assert "SpectraceFcBypass" not in firing, firing
    finally:
        prom.stop()


@pytest.mark.vllm
def test_vllm_synthetic_config_read_from_its_own_classes(tiny_models, tmp_path):
    """vLLM's CPU sampler refuses synthetic acceptance ("not supported with CPU sampling"),
    so its real config classes resolve the setting (a length turned into rates) without a
    server, its real `RejectionSampler` is built from it (synthetic mode on), and
    spectrace's scheduler hook raises the finding from the same config; the standard
    method raises nothing."""
    from tests.conftest import vllm_python_or_skip
    python = vllm_python_or_skip()
    program = os.path.join(ROOT, "tests", "programs", "vllm_synthetic_config.py")
    env = {**os.environ, "PYTHONPATH": ROOT}

    out = str(tmp_path / "out")
    specs = [{"rejection_sample_method": "synthetic", "synthetic_acceptance_length": 2.5}, {}]
    done = subprocess.run([python, program, tiny_models("partial"), out, json.dumps(specs)],
                          env=env, capture_output=True, text=True, timeout=1200)
    lines = [x for x in done.stdout.splitlines() if x.startswith("RESULT ")]
    assert lines, done.stderr[-3000:]
    synthetic, standard = json.loads(lines[-1][len("RESULT "):])
    assert synthetic["vllm_synthetic_mode"] is True and synthetic["method"] == "synthetic"
    assert len(synthetic["rates"]) == 3  # vLLM resolved the length into per-position rates
    assert synthetic["new_findings"] == {SYNTHETIC: 1}
    found = [json.loads(x) for x in open(next(
        os.path.join(d, "events.jsonl") for d, _, files in os.walk(out)
        if "events.jsonl" in files))]
    msg = found[0]["message"]
    assert found[0]["code"] == SYNTHETIC and "synthetic_acceptance_rates [" in msg, msg
    assert found[0]["details"]["synthetic_acceptance_rates"] == synthetic["rates"]
    assert standard["vllm_synthetic_mode"] is False and standard["new_findings"] == {}


@pytest.mark.vllm
def test_vllm_non_finite_draft(nonfinite_models, vllm_server):
    """vLLM's CPU engine with the draft whose fc holds an inf: the hidden states its
    `compute_logits` reads are non-finite (float32: the harness serves with --dtype
    float32). The logits are not checked: they hold -inf by design (outside d2t)."""
    run = vllm_server(nonfinite_models, env=FAST, timeout=900,
                      extra_args=["--no-enable-prefix-caching"])
    for p in PROMPTS:
        run.server.complete(p, 24)

    def found():
        report = run.report()
        return report if NON_FINITE in codes(run.process("worker", report)) else None

    report = wait_for(found) or run.report()
    engine, worker = run.process("engine_core", report), run.process("worker", report)
    nf = codes(worker).get(NON_FINITE)
    assert nf is not None, (codes(worker), run.log_path)
    assert nf["details"]["dtype"] == "float32"
    assert nf["details"]["where"] == ["hidden states"]
    assert "the draft runs in float32" in nf["message"]
    assert SYNTHETIC not in codes(engine)
    assert engine["internal_errors"] == 0 and worker["internal_errors"] == 0
    assert report["verdict"]["state"] == "broken", report["verdict"]
    # the server settings, read from the VllmConfig each process received (--enforce-eager:
    # no CUDA graphs; --no-enable-prefix-caching), the same in both, shown once
    assert engine["settings"] == worker["settings"] == report["settings"] == VLLM_SETTINGS, \
        (engine["settings"], worker["settings"])
    text = subprocess.run([sys.executable, "-m", "spectrace.cli", "report", str(run.data_dir)],
                          capture_output=True, text=True, timeout=60).stdout
    header = text.splitlines()[2]
    assert header.startswith("server settings: KV cache auto, ") and text.count(
        "server settings:") == 1, text[:2000]
    assert "prefix caching off" in header and "speculative method eagle3" in header, header
