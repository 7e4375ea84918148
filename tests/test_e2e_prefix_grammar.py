"""Acceptance by prefix-cache hits and by structured output on the real SGLang 0.5.23 CPU
server (EAGLE-3, v2 worker, radix cache on, its default grammar backend), then on vLLM's
V1 engine (prefix caching on, `--per-request-spec-decode-metrics summary`), against each
runtime's own per-request figures.

The requests run one after another so the cache's hits are known in advance: a prompt,
the same prompt again (served from the cache but its last token; vLLM recomputes the last
matching block of a hit for EAGLE), a prompt sharing about its first third (under half
served), and JSON-schema requests beside the plain ones. Each bucket's request-steps and
accepted tokens must equal the sums of the runtime's own per-request counts (SGLang's
`meta_info` spec_verify_ct / spec_num_correct_drafts, bucketed by its `cached_tokens`
over `prompt_tokens`; vLLM's `metrics.speculative_decoding`, by the response's
`usage.prompt_tokens_details.cached_tokens` with `--enable-prompt-tokens-details`).
One server at a time.
"""
from __future__ import annotations

import glob
import json
import os
import subprocess
import sys
import urllib.request

import pytest

from spectrace import signals as S
from spectrace.families.breakdowns import GRAMMAR, PREFIX_CACHE
from spectrace.file_layout import SPANS_FILE
from spectrace.rules.requests import prefix_cache_bucket
from tests.e2e import settle

ENV = {"SPECTRACE_METRIC_INTERVAL": "0.5", "SPECTRACE_REQUEST_SAMPLE_RATIO": "1"}
NEW_TOKENS = 21
A = [3 + i % 40 for i in range(200)]  # the repeated prompt
SHARED = A[:70] + [50 + i % 7 for i in range(130)]  # about a third of it shared
SCHEMA = {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}
# (prompt, JSON schema?) in order: none, >=50%, <50%, then the grammar beside plain ones
TRAFFIC = [(A, False), (A, False), (SHARED, False), ([9, 4, 6, 8], True), (A, True),
           ([9, 4, 6, 8], False)]


def _request_spans(run) -> dict:
    """request id -> (cached tokens, prompt tokens, grammar) from every process's spans."""
    out = {}
    for path in glob.glob(os.path.join(str(run.data_dir), "*", SPANS_FILE)):
        with open(path) as fh:
            for line in fh:
                a = json.loads(line).get("attributes", {})
                if S.SPAN_ATTR_REQUEST_ID in a:
                    out[a[S.SPAN_ATTR_REQUEST_ID]] = (
                        a.get(S.SPAN_ATTR_REQUEST_CACHED_TOKENS),
                        a.get(S.SPAN_ATTR_REQUEST_PROMPT_TOKENS), a.get(S.SPAN_ATTR_REQUEST_GRAMMAR))
    return out


def _rows(proc, b) -> dict:
    return {r[b.name]: (r["drafts"], r["accepted_tokens"]) for r in proc[f"by_{b.name}"]}


def _expected(items) -> dict:
    """bucket -> (request-steps, accepted tokens) summed over (bucket, steps, accepted)."""
    out: dict = {}
    for bucket, steps, accepted in items:
        d, a = out.get(bucket, (0, 0))
        out[bucket] = (d + steps, a + accepted)
    return out


# -- SGLang ---------------------------------------------------------------------------------
def _generate(run, ids, schema: bool) -> dict:
    params = {"max_new_tokens": NEW_TOKENS, "temperature": 0}
    if schema:
        params["json_schema"] = json.dumps(SCHEMA)
    req = urllib.request.Request(
        run.server.url + "/generate", data=json.dumps({"input_ids": ids,
                                                       "sampling_params": params}).encode(),
        headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=600) as resp:
        return json.loads(resp.read())


@pytest.mark.sglang
def test_sglang_prefix_cache_and_grammar_equal_its_own_per_request_counts(
        tiny_models, sglang_server):
    run = sglang_server(tiny_models("partial"), env=ENV, timeout=600)
    out = [(_generate(run, ids, schema)["meta_info"], schema) for ids, schema in TRAFFIC]
    assert all(m["spec_verify_ct"] > 0 for m, _ in out), out
    proc = settle(run, sum(m["spec_verify_ct"] for m, _ in out), requests=len(out))
    assert proc["settings"]["prefix_caching"] is True
    assert proc["settings"]["grammar_backend"] == "xgrammar"

    by_cache = _expected((prefix_cache_bucket(m["cached_tokens"], m["prompt_tokens"]),
                          m["spec_verify_ct"], m["spec_num_correct_drafts"]) for m, _ in out)
    assert set(by_cache) == set(PREFIX_CACHE.buckets), [
        (m["cached_tokens"], m["prompt_tokens"]) for m, _ in out]  # every bucket was hit
    assert _rows(proc, PREFIX_CACHE) == by_cache
    by_grammar = _expected(("json" if schema else "none", m["spec_verify_ct"],
                            m["spec_num_correct_drafts"]) for m, schema in out)
    assert _rows(proc, GRAMMAR) == by_grammar
    # each request's span: SGLang's own cached and prompt tokens of that request
    assert _request_spans(run) == {m["id"]: (m["cached_tokens"], m["prompt_tokens"],
                                             "json" if schema else "none") for m, schema in out}
    print(_rows(proc, PREFIX_CACHE), _rows(proc, GRAMMAR))  # the figures, with -s
    assert proc["internal_errors"] == 0

    text = subprocess.run([sys.executable, "-m", "spectrace.cli", "report", str(run.data_dir)],
                          capture_output=True, text=True, timeout=60).stdout
    assert f"acceptance by {PREFIX_CACHE.title}:" in text
    assert f"acceptance by {GRAMMAR.title}:" in text and "json: mean accept length" in text


# -- vLLM -----------------------------------------------------------------------------------
def _complete(run, ids, schema: bool) -> dict:
    body = {"model": run.server.models + "/target", "prompt": ids, "max_tokens": NEW_TOKENS,
            "temperature": 0}
    if schema:  # the grammar ends the request: no ignore_eos
        body["structured_outputs"] = {"json": SCHEMA}
    else:
        body["ignore_eos"] = True
    req = urllib.request.Request(run.server.url + "/v1/completions",
                                 data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=600) as resp:
        return json.loads(resp.read())


@pytest.mark.vllm
@pytest.mark.parametrize("runner", ["v1", "mrv2"])
def test_vllm_prefix_cache_and_grammar_equal_its_own_per_request_counts(
        tiny_models, vllm_server, tmp_path_factory, runner):
    """vLLM V1 with 32-token blocks: for EAGLE vLLM recomputes the last block of a hit, so
    the repeat is served 160 of 200 tokens and the shared prompt 32. The same with the V2
    model runner (tests/test_vllm_mrv2_e2e.py: its Triton kernels interpreted on the CPU):
    the figures are the scheduler's, whichever runner ran the step. MRV2 gets the plain
    requests only: its grammar kernel (`v1/worker/gpu/structured_outputs.py`
    `_apply_grammar_bitmask_kernel`) fails under Triton's CPU interpreter ("mask has
    unsupported dtype") and takes the engine down, so its grammar bucket is `none` here."""
    models, env = tiny_models("partial"), ENV
    if runner == "mrv2":
        from tests.test_vllm_mrv2_e2e import mrv2_env, top_level_ids
        models = top_level_ids(models, str(tmp_path_factory.mktemp("mrv2") / "partial"))
        env = {**mrv2_env(), **ENV}
    run = vllm_server(models, env=env, timeout=600, extra_args=[
        "--per-request-spec-decode-metrics", "summary", "--enable-prompt-tokens-details",
        "--enable-prefix-caching", "--block-size", "32"])
    if runner == "mrv2":
        assert "Using V2 Model Runner" in run.server.log()
    out, served = [], {}
    for ids, schema in TRAFFIC if runner == "v1" else [t for t in TRAFFIC if not t[1]]:
        r = _complete(run, ids, schema)
        usage = r["usage"]
        cached = (usage.get("prompt_tokens_details") or {}).get("cached_tokens") or 0
        own = r["metrics"]["speculative_decoding"]
        out.append((prefix_cache_bucket(cached, usage["prompt_tokens"]),
                    own["num_spec_steps"], own["num_accepted_draft_tokens"], schema))
        served[r["id"]] = (cached, usage["prompt_tokens"], "json" if schema else "none")
    assert all(steps > 0 for _, steps, _, _ in out), out
    proc = run.process("engine_core", run.settle(sum(s for _, s, _, _ in out),
                                                 requests=len(out)))
    assert proc["settings"]["prefix_caching"] is True
    by_cache = _expected((b, s, a) for b, s, a, _ in out)
    assert set(by_cache) == set(PREFIX_CACHE.buckets), out  # every bucket was hit
    assert _rows(proc, PREFIX_CACHE) == by_cache
    assert _rows(proc, GRAMMAR) == _expected(("json" if g else "none", s, a)
                                             for _, s, a, g in out)
    print(runner, _rows(proc, PREFIX_CACHE), _rows(proc, GRAMMAR))  # the figures, with -s
    # each request's span (vLLM's engine id: the response's id and a suffix): vLLM's own
    # cached and prompt tokens of that response
    spans = _request_spans(run)
    assert len(spans) == len(served)
    assert {rid: spans[next(i for i in spans if i.startswith(rid + "-"))]
            for rid in served} == served
    assert proc["internal_errors"] == 0
