"""`spectrace report DIR --baseline BASEDIR` on the `compare` recording
(tests/recorders/record_compare.py: the real SGLang 0.5.23 CPU server, EAGLE-3 v2 worker,
with the tiny pairs of exactly known acceptance; tests/recorded/README.md says when and how
it was recorded). A recording, not a live run: two live runs of the same traffic are
batched differently by the scheduler's timing on a loaded machine, and the design effect
and interval of the context comparison move with it; the verdicts asserted here need the
runs as they were recorded. The live wiring (the exported totals equal SGLang's own) is
asserted when recording and again here, against the figures kept beside each folder.

- `full`, then `partial` (another draft and target): the comparison is the system's, names
  the change of the draft's hash and the positions that fell ([1] and [2], each -1.0);
- `full` twice with the same traffic: no change;
- the `context` pair, the same server settings and draft, traffic moved from mostly short
  prompts (18 short, 4 long) to mostly long ones (8 short, 16 long): the fall is the
  traffic's (within each context bucket nothing moved), not the system's;
- `full` on vLLM's CPU server against `full` on SGLang's: the same draft and target by
  their content hashes, the runtime, its version and each recorded setting that differs
  named, no change of acceptance.
"""
from __future__ import annotations

import pytest

from tests import recorded_runs
from tests.recorded_runs import facts, path

RUNS = ("full", "full2", "partial", "short", "long")


def _compare(current: str, baseline: str) -> dict:
    return recorded_runs.report(path("compare", current), "--baseline",
                                path("compare", baseline))["comparison"]


def _scheduler(run: str) -> dict:
    return recorded_runs.counting_process(recorded_runs.report(path("compare", run)))


@pytest.mark.parametrize("run", RUNS)
def test_each_recording_holds_the_runtimes_own_counts(run):
    own = facts("compare", run)["runtime"]
    proc = _scheduler(run)
    assert proc["drafts"] == own["request_steps"] > 0
    if run in ("short", "long"):  # every request recorded as a span
        assert proc["requests"]["finished"] == proc["requests"]["recorded"] == own["requests"]


def test_a_degraded_draft_is_the_system_with_its_hash_and_positions():
    c = _compare("partial", "full")
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


def test_two_identical_runs_report_no_change():
    assert facts("compare", "full")["runtime"]["request_steps"] == \
        facts("compare", "full2")["runtime"]["request_steps"] >= 200
    c = _compare("full2", "full")
    assert c["kind"] == "no_change", c["sentence"]
    assert c["sentence"].startswith("no change in acceptance")
    assert c["config_differs"] == []  # the same draft, target and settings: the same hashes
    # the same prompts: the same context, sampling and label mixes; the batch-size mix is
    # the scheduler's timing (4 requests at a time, finishing a step apart or together)
    assert set(c["mix_moved"]) <= {"batch_size"}, c["mix_moved"]
    assert c["positions_fell"] == []


def test_traffic_moved_to_long_prompts_is_the_traffic_not_the_system():
    c = _compare("long", "short")
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
    text = recorded_runs.text(path("compare", "long"), "--baseline", path("compare", "short"))
    assert text.splitlines()[0] == c["sentence"]
    assert "by context (explains the change)" in text


def test_vllm_against_sglang_names_the_runtime_and_settings_that_differ():
    own = facts("compare", "vllm-full")["runtime"]
    doc = recorded_runs.report(path("compare", "vllm-full"), "--baseline",
                               path("compare", "full"))
    [engine] = [p for p in doc["current"]["processes"] if p["role"] == "engine_core"]
    assert engine["drafts"] == own["request_steps"]  # vLLM's own counter
    c = doc["comparison"]
    rows = {r["key"]: r for r in c["config"]}
    assert (rows["runtime"]["baseline"], rows["runtime"]["current"]) == ("sglang", "vllm")
    assert rows["runtime_version"]["differs"]
    for key in ("draft_hash", "model_hash"):  # the same folders: the same content
        assert rows[key]["baseline"].startswith("sha256:")
        assert rows[key]["baseline"] == rows[key]["current"], key
    settings = {r["key"] for r in c["config"] if r["kind"] == "setting" and r["differs"]}
    cur, base = doc["current"]["settings"], doc["baseline"]["settings"]

    def same(a, b):  # EAGLE3 and eagle3 are one method
        return a.lower() == b.lower() if isinstance(a, str) and isinstance(b, str) else a == b
    assert settings == {k for k in set(cur) | set(base) if not same(cur.get(k), base.get(k))}
    assert settings  # the runtimes record (and resolve) some settings differently
    for key in settings:  # named in the sentence where both runs recorded the setting
        row = rows[key]
        named = f"{row['label']} {row['baseline']} -> {row['current']}" in c["sentence"]
        assert named == (row["baseline"] is not None and row["current"] is not None), key
    assert "runtime" in c["config_differs"]
    assert c["kind"] == "no_change", c["sentence"]
    assert c["current"]["mean_acceptance_length"]["value"] == 4.0
    assert c["baseline"]["mean_acceptance_length"]["value"] == 4.0
    assert "runtime sglang -> vllm" in c["sentence"]
