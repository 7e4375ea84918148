"""Recorder of the `prefix_cache_gap` scenario (tests/test_prefix_cache_gap_recorded.py
reads it). Acceptance by prefix-cache hits, planted, on a real SGLang 0.5.23 CPU server (EAGLE-3,
v2 worker, radix cache on). The `context` tiny pair (harness/tiny_models.py) proposes
right only for token ids below CONTEXT_RIGHT_BELOW (1024): a request walking ids from
below it accepts one draft token per verify (2.0), one walking ids from 2000 none (1.0).
Uncached requests walk distinct low starts (no two share a first token, so none hits the
cache); the cached ones repeat one prompt (after one request that fills the cache), so
SGLang serves all of it but the last token from the radix cache.

Two phases, each on a server of its own (a fresh cache): one request that fills the cache,
then 32 uncached and 32 cached requests evenly interleaved, 32 (RUNNING) at a time. Every
request verifies about 200 steps (a right one makes 400 tokens at 2.0, a wrong one 200 at
1.0), so the two kinds run side by side and drain together. First a uniform phase, on
traffic the draft gets right alike, both buckets past the rule's floor (5000
request-steps each): no finding. Then the repeated prompt walks the ids the draft gets
wrong: `acceptance.prefix_cache_gap` fires, each bucket's figures equal SGLang's own
meta_info of its requests (bucketed by its `cached_tokens` over `prompt_tokens`), the
verdict leads with the condition, and no other breakdown's rule fires. (An earlier version
ran the wrong ones twice as long as the right ones, and both phases on one server, where
the batch sizes each phase ran at, which timing sets, decided which kind a batch-size
bucket held; in one CI run `acceptance.large_batch` fired on that: the batch-size rule
compares different requests' steps, docs/report.md.)

What this plants is the confounding the rule's docstring warns of (repeated prompts of
another kind), not a stale KV: no runtime here reads stale KV on a hit. It proves the
path from SGLang's cache hits to the finding and the verdict; the rule cannot tell the two
apart, which is why its message says to rerun with prefix caching off. One server at a
time, at niceness -10 as root (as tests/recorders/record_request_label.py).

Two runs are kept, `uniform` and `planted`, each with SGLang's own figures by bucket
(`meta_info`, bucketed by its `cached_tokens` over `prompt_tokens`) beside it. Run by
`scripts/record.sh prefix_cache_gap`.
"""
from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor

import pytest

from harness.tiny_models import CONTEXT_RIGHT_BELOW, walk
from spectrace.rules.requests import prefix_cache_bucket
from tests import recorded_runs
from tests.e2e import generate, settle, sglang_totals

FAST = {"SPECTRACE_METRIC_INTERVAL": "0.5", "SPECTRACE_REQUEST_SAMPLE_RATIO": "1"}
PRIORITY = {"nice": -10} if os.geteuid() == 0 else {}
RUNNING = 32  # requests at a time (8 took 882 s: the floors need ~13,000 request-steps)
PROMPT = 100  # sequences up to 500 tokens: all in the `<512` bucket
# new tokens: a right request verifies about half of them (2.0), a wrong one all (1.0):
# ~200 request-steps each
NEW_RIGHT, NEW_WRONG = 400, 200
WRONG_FROM = 2000  # ids the draft never gets right (>= CONTEXT_RIGHT_BELOW)
# (uncached, cached) requests of a phase, two waves of RUNNING, each bucket past the
# floor of 5000 request-steps
UNIFORM = PLANTED = (32, 32)
UNIFORM_STARTS, PLANTED_STARTS = 1, 41  # distinct first tokens: no uncached one is a hit
assert sum(UNIFORM) == sum(PLANTED) == 2 * RUNNING
assert WRONG_FROM >= CONTEXT_RIGHT_BELOW and WRONG_FROM + PROMPT + NEW_WRONG < 3000
assert UNIFORM_STARTS + UNIFORM[0] <= PLANTED_STARTS
assert PLANTED_STARTS + PLANTED[0] + PROMPT + NEW_RIGHT < CONTEXT_RIGHT_BELOW
assert PROMPT + NEW_RIGHT < 512


def _post(run, input_ids, new_tokens):
    return generate(run.server.url, {"input_ids": input_ids, "sampling_params": {
        "max_new_tokens": new_tokens, "temperature": 0, "ignore_eos": True}}, timeout=900)


def _interleaved(a: list, b: list) -> list:
    """`a` and `b` merged evenly (each at its own pace), so every stretch holds both in
    their proportion: the batches that drain at the end too."""
    return [x for _, x in sorted([((i + 0.5) / len(a), x) for i, x in enumerate(a)] +
                                 [((i + 0.5) / len(b), x) for i, x in enumerate(b)],
                                 key=lambda t: t[0])]


def _run(run, repeated, repeated_tokens, counts, first_start):
    """A phase: one request of `repeated` (it fills the cache), then `counts` (uncached
    right walks from `first_start`, repeats of `repeated`) interleaved, RUNNING at a time."""
    first = _post(run, repeated, repeated_tokens)
    uncached, cached = counts
    jobs = _interleaved([(walk(PROMPT, s), NEW_RIGHT)
                         for s in range(first_start, first_start + uncached)],
                        [(repeated, repeated_tokens)] * cached)
    with ThreadPoolExecutor(RUNNING) as pool:
        return [first] + list(pool.map(lambda job: _post(run, *job), jobs))


def _expected(responses) -> dict:
    """bucket -> (request-steps, accepted tokens), from SGLang's own meta_info."""
    out: dict = {}
    for r in responses:
        m = r["meta_info"]
        b = prefix_cache_bucket(m["cached_tokens"], m["prompt_tokens"])
        d, a = out.get(b, (0, 0))
        out[b] = (d + m["spec_verify_ct"], a + m["spec_num_correct_drafts"])
    return out


def _server(tiny_models, sglang_server):
    return sglang_server(tiny_models("context"), env=FAST, timeout=600,
                         extra_args=["--max-total-tokens", str(RUNNING * 640),
                                     "--max-running-requests", str(RUNNING)], **PRIORITY)


@pytest.mark.sglang
@pytest.mark.parametrize("phase", ["uniform", "planted"])
def test_record(phase, tiny_models, sglang_server):
    run = _server(tiny_models, sglang_server)
    if phase == "uniform":
        responses = _run(run, walk(PROMPT), NEW_RIGHT, UNIFORM, UNIFORM_STARTS)
    else:
        responses = _run(run, walk(PROMPT, WRONG_FROM), NEW_WRONG, PLANTED, PLANTED_STARTS)
    drafts = sglang_totals(responses)[0]
    assert settle(run, drafts, requests=len(responses))["drafts"] == drafts
    recorded_runs.keep(run.data_dir, "prefix_cache_gap", phase, runtime={
        "requests": len(responses), "request_steps": drafts,
        "by_bucket": {b: list(v) for b, v in _expected(responses).items()}})
