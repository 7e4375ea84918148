"""`spectrace report DIR --baseline BASEDIR` on folders the real SGLang 0.5.23 CPU server
(EAGLE-3, v2 worker) wrote, with the tiny pairs of exactly known acceptance
(harness/tiny_models.py): `full` accepts all three draft tokens (4.0), `partial` one
(2.0), `context` one below 1024 tokens and none past it.

- `full`, then `partial` (another draft and target): the comparison is the system's, names
  the change of the draft's hash and the positions that fell ([1] and [2], each -1.0);
- `full` twice with the same traffic: no change;
- the `context` pair, the same server settings and draft, traffic moved from mostly short
  prompts (18 short, 4 long) to mostly long ones (8 short, 16 long): the fall is the
  traffic's (within each context bucket nothing moved), not the system's.
Five servers, one at a time (each a minute or so on two cores).
"""
from __future__ import annotations

import json
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor

import pytest

from harness.tiny_models import walk
from tests.e2e import settle, sglang_totals

pytestmark = pytest.mark.sglang

FAST = {"SPECTRACE_METRIC_INTERVAL": "0.5"}
PROMPTS = [[3, 7, 11], [5, 9, 2], [4, 6, 8], [10, 1, 3], [2, 4, 6]]
NEW_TOKENS = 96  # full: 24 request-steps a request, partial: 48
SHORT, LONG, CONTEXT_NEW = 100, 1100, 30  # context pair: prompt lengths, new tokens
# every request recorded (its span), so each run's design effect is measured
CONTEXT_ENV = {**FAST, "SPECTRACE_REQUEST_SAMPLE_RATIO": "1"}


def _generate(run, prompts, new_tokens):
    with ThreadPoolExecutor(4) as pool:
        return list(pool.map(lambda p: run.server.generate(p, new_tokens, timeout=600), prompts))


def _compare(current, baseline) -> dict:
    out = subprocess.run([sys.executable, "-m", "spectrace.cli", "report", str(current),
                          "--baseline", str(baseline), "--json"],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)["comparison"]


def _text(current, baseline) -> str:
    out = subprocess.run([sys.executable, "-m", "spectrace.cli", "report", str(current),
                          "--baseline", str(baseline)], capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stderr
    return out.stdout


def _served(run, prompts, new_tokens) -> dict:
    responses = _generate(run, prompts, new_tokens)
    return settle(run, sglang_totals(responses)[0])


@pytest.fixture(scope="module")
def runs(tiny_models, sglang_server):
    """name -> ServerRun whose folder holds that run's telemetry alone, started on first
    use: `full`, `full2` (the same again), `partial`; `short`, `long` (the context pair,
    mostly short prompts, then mostly long ones)."""
    out: dict = {}
    plan = {"full": ("full", None), "full2": ("full", None), "partial": ("partial", None),
            "short": ("context", (18, 4)), "long": ("context", (8, 16))}

    def get(name: str):
        if name not in out:
            mode, mix = plan[name]
            if mix is None:
                run = sglang_server(tiny_models(mode), env=FAST)
                settle(run, sglang_totals(_generate(run, PROMPTS * 2, NEW_TOKENS))[0])
            else:
                run = sglang_server(tiny_models(mode), env=CONTEXT_ENV, timeout=600,
                                    extra_args=["--max-total-tokens", "8192"])
                responses = _generate(run, [walk(SHORT)] * mix[0], CONTEXT_NEW) + _generate(
                    run, [walk(LONG)] * mix[1], CONTEXT_NEW)
                settle(run, sglang_totals(responses)[0], requests=len(responses))
            out[name] = run
        return out[name]
    return get


def test_a_degraded_draft_is_the_system_with_its_hash_and_positions(runs):
    full, partial = runs("full"), runs("partial")
    c = _compare(partial.data_dir, full.data_dir)
    assert c["kind"] == "system"
    assert c["mean_acceptance_length_change"]["value"] == -2.0
    assert c["positions_fell"] == [1, 2]
    per_pos = c["acceptance_per_position_change"]
    assert [round(p["value"], 6) for p in per_pos] == [0.0, -1.0, -1.0]
    assert all(p["high"] < 0 for p in per_pos[1:])  # intervals exclude 0
    config = {r["key"]: r for r in c["config"]}
    draft = config["draft_hash"]
    assert draft["differs"] and draft["baseline"].startswith("sha256:")
    assert draft["current"].startswith("sha256:") and draft["current"] != draft["baseline"]
    assert "draft_hash" in c["config_differs"]
    assert not any(config[k]["differs"] for k in ("runtime", "runtime_version",
                                                  "spec_algorithm"))
    sentence = c["sentence"]
    assert sentence.startswith("the system: acceptance fell 2.00 (mean accept length 4.00 -> 2.00")
    assert f"draft hash {draft['baseline']} -> {draft['current']}" in sentence
    assert "[1] -1.00" in sentence and "[2] -1.00" in sentence


def test_two_identical_runs_report_no_change(runs):
    a, b = runs("full"), runs("full2")
    assert a.scheduler()["drafts"] == b.scheduler()["drafts"] >= 200
    c = _compare(b.data_dir, a.data_dir)
    assert c["kind"] == "no_change", c["sentence"]
    assert c["sentence"].startswith("no change in acceptance")
    assert c["config_differs"] == []  # the same draft, target and settings: the same hashes
    # the same prompts: the same context, sampling and label mixes; the batch-size mix is
    # the scheduler's timing (4 requests at a time, finishing a step apart or together)
    assert set(c["mix_moved"]) <= {"batch_size"}, c["mix_moved"]
    assert c["positions_fell"] == []


def test_traffic_moved_to_long_prompts_is_the_traffic_not_the_system(runs):
    short, long_ = runs("short"), runs("long")
    c = _compare(long_.data_dir, short.data_dir)
    assert c["kind"] == "traffic", c["sentence"]
    assert c["explained_by"] == "context"
    total = c["mean_acceptance_length_change"]
    assert total["value"] < -0.3 and total["high"] < 0
    # each request is all short or all long: its request-steps are alike, the whole's
    # interval is widened by the measured design effect (22 and 24 requests recorded)
    assert min(c["design_effects"].values()) > 5
    assert c["system"]["value"] == 0.0
    assert c["traffic"]["value"] == pytest.approx(c["mean_acceptance_length_change"]["value"])
    split = next(s for s in c["splits"] if s["breakdown"] == "context")
    buckets = {b["bucket"]: b for b in split["buckets"]}
    assert set(buckets) == {"<512", "1k-2k"}
    assert buckets["1k-2k"]["current_share"] > buckets["1k-2k"]["baseline_share"]
    assert not any(b["fell"] for b in buckets.values())
    rows = {r["key"]: r for r in c["config"]}
    assert rows["context"]["differs"]  # the mix moved; the draft, target, settings did not
    assert "context" in c["mix_moved"] and c["config_differs"] == []
    assert not [r for r in c["config"] if r["kind"] != "mix" and r["differs"]]
    assert c["sentence"].startswith("the traffic: acceptance fell")
    assert "more 1k-2k in context length" in c["sentence"]
    assert "the system, within noise" in c["sentence"]
    text = _text(long_.data_dir, short.data_dir)
    assert text.splitlines()[0] == c["sentence"]
    assert "by context (explains the change)" in text
