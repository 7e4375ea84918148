"""SGLang's other speculative algorithms on its real 0.5.23 CPU server, spectrace on by
environment variables alone, checked against SGLang's own per-request meta_info.

- NGRAM (`NGRAMWorker`, no draft model: drafts come from an n-gram corpus of earlier
  tokens). SGLang's CPU kernels lack `sgl_kernel.speculative.reconstruct_indices_from_tree_mask`;
  `harness/sgl_kernel_standin/sgl_kernel/speculative.py` is a pure-torch stand-in for it
  (its contract as SGLang's own docstring states it), the one part here that is not
  SGLang's code (tests/test_sgl_kernel_standin.py checks it against that contract).
- STANDALONE (`StandaloneWorkerV2`, whose constructor skips EAGLEWorkerV2's) with a tiny
  2-layer Llama draft that proposes exactly what the `partial` target emits.

Two servers, one after the other (the module's `sglang_server` stops the first when the
second starts)."""
from __future__ import annotations

import os
import shutil

import pytest

from tests.e2e import findings_but_cost, settle, sglang_totals

pytestmark = pytest.mark.sglang

FAST = {"SPECTRACE_METRIC_INTERVAL": "0.5", "SPECTRACE_STEP_SAMPLE_RATIO": "1",
        "SPECTRACE_AGREEMENT_EVERY": "1"}
# Sent one after the other: the later prompts' continuations overlap the earlier ones',
# so NGRAM's corpus has matches to propose.
PROMPTS = [[3, 7, 11], [5, 9, 2], [4, 6, 8]]
NGRAM_DRAFT_TOKENS = 4  # 3 proposals per request-step
# NGRAM's first start also builds SGLang's n-gram corpus extension (C++, a few minutes on a
# loaded 2-core machine): a start bound, not a figure under test
START_TIMEOUT = 600


def proposed(responses) -> int:
    return sum(r["meta_info"]["spec_num_proposed_drafts"] for r in responses)


def per_position_from(hist: dict, positions: int) -> list[int]:
    """Request-steps that accepted at least p + 1 drafts, from SGLang's accept histogram."""
    return [sum(n for length, n in hist.items() if int(length) - 1 > p)
            for p in range(positions)]


@pytest.fixture(scope="module")
def ngram_run(tiny_models, sglang_server):
    run = sglang_server(tiny_models("partial"), env=FAST, algorithm="NGRAM", draft=None,
                        steps=None, draft_tokens=NGRAM_DRAFT_TOKENS, timeout=START_TIMEOUT)
    return run, [run.server.generate(p, 24) for p in PROMPTS]


def test_ngram_counts_equal_sglang_meta_info(ngram_run):
    run, responses = ngram_run
    verify, accepted, hist = sglang_totals(responses)
    assert accepted > 0  # the corpus proposed something right: the positions mean something
    proc = settle(run, verify)
    assert proc["drafts"] == verify
    assert proc["accepted_tokens"] == accepted
    assert proc["accept_length_counts"] == {k: v for k, v in hist.items()}
    assert proc["draft_tokens"] == proposed(responses) == 3 * verify
    assert proc["accepted_per_position"] == per_position_from(hist, NGRAM_DRAFT_TOKENS - 1)


def test_ngram_worker_identity_steps_and_spans(ngram_run):
    run, responses = ngram_run
    proc = settle(run, sglang_totals(responses)[0])
    assert (proc["spec_algorithm"], proc["spec_worker"]) == ("NGRAM", "NGRAMWorker")
    assert proc["steps"] >= max(r["meta_info"]["spec_verify_ct"] for r in responses)
    assert proc["spans"] > 0
    # no draft model, no fc: no width, bypass or aux finding can apply
    assert proc["hidden_state_passes"] == [] and findings_but_cost(proc) == []
    assert proc["internal_errors"] == 0


@pytest.fixture(scope="module")
def standalone_models(tiny_models, tmp_path_factory):
    """The `partial` target, and as its draft a 2-layer Llama with the same exact head
    (every layer adds zero), so every draft token is accepted."""
    from harness.tiny_models import make_llama_target
    src = tiny_models("partial")
    out = tmp_path_factory.mktemp("standalone") / "models"
    os.makedirs(out)
    shutil.copytree(os.path.join(src, "target"), out / "target")
    shutil.copytree(os.path.join(src, "target"), out / "draft")  # its tokenizer files
    make_llama_target(str(out / "draft"), "partial", layers=2)
    return str(out)


@pytest.fixture(scope="module")
def standalone_run(standalone_models, sglang_server, ngram_run):
    # (after the NGRAM tests: starting this server stops that one)
    run = sglang_server(standalone_models, env=FAST, algorithm="STANDALONE",
                        timeout=START_TIMEOUT)
    return run, [run.server.generate(p, 24) for p in PROMPTS[:2]]


def test_standalone_counts_equal_sglang_meta_info(standalone_run):
    run, responses = standalone_run
    verify, accepted, hist = sglang_totals(responses)
    proc = settle(run, verify)
    assert proc["drafts"] == verify
    assert proc["accepted_tokens"] == accepted
    assert proc["accept_length_counts"] == hist
    assert proc["accepted_per_position"] == per_position_from(hist, 3)
    assert proc["draft_tokens"] == 3 * verify
    assert hist.get("4", 0) >= verify - 2  # the exact draft: all three accepted (but at the end)


def test_standalone_identity_is_recorded(standalone_run, standalone_models):
    """StandaloneWorkerV2's own constructor is wrapped: algorithm, worker and models."""
    run, responses = standalone_run
    proc = settle(run, sglang_totals(responses)[0])
    assert (proc["spec_algorithm"], proc["spec_worker"]) == ("STANDALONE",
                                                             "StandaloneWorkerV2")
    assert proc["draft_model"] == os.path.join(standalone_models, "draft")
    assert proc["model"]


def test_standalone_agreement_steps_spans_and_no_eagle3_finding(standalone_run):
    run, responses = standalone_run
    proc = settle(run, sglang_totals(responses)[0])
    # EAGLEWorkerV2.verify's chain agreement (greedy: equals the acceptance)
    assert proc["agreement_drafts"] == proc["drafts"]
    assert proc["agreement_per_position"] == proc["acceptance_per_position"]
    assert proc["steps"] >= max(r["meta_info"]["spec_verify_ct"] for r in responses)
    assert proc["spans"] > 0
    assert findings_but_cost(proc) == [] and proc["hidden_state_passes"] == []  # a plain Llama draft
    assert proc["internal_errors"] == 0
