"""Steps with no draft (SGLang's adaptive speculation at K = 0, issue 48) are counted as
such and kept out of acceptance, per position, the breakdowns and each request's figures:
on SGLang 0.5.23's CPU server with an adaptive config (`test_live_...`), and through its
own result-processing code with the worker's K changed under it (below).

SGLang 0.5.23's own code: its result processor's `_resolve_spec_v2_tokens` resolves real
`GenerationBatchResult`s for real `Req`s (counting each step, K = 0 ones included, in the
request's `spec_verify_ct` and under 0 in its histogram) and calls the worker's real
`EAGLEWorkerV2.on_verify_complete_cpu`; its `_prepare_kv_cache_release` releases them;
spectrace's hooks are applied to those classes as `instrument()` applies them. Stand-ins:
the worker object's state (no model is loaded: its K, top-k, no adaptive controller), the
scheduler's metrics reporter (a no-op) and the batch (a namespace with the fields the
resolve reads). The worker holds K = 3 while the K = 0 steps resolve, as with overlap
scheduling, where the next batch's K is set before this one resolves.
"""
from __future__ import annotations

import dataclasses
import json
import os
import types

import pytest

from spectrace import signals
from tests.kit import process_state

pytestmark = pytest.mark.sglang


@pytest.fixture
def sglang_v2_hooked():
    """SGLang's result processor and v2 worker classes with spectrace's hooks, removed after."""
    from sglang.srt.managers.scheduler_components import batch_result_processor as brp
    from sglang.srt.speculative import eagle_worker_v2 as ew

    from spectrace.adapters import sglang_v2
    from spectrace.patching import Patcher
    patcher = Patcher()
    patcher.apply(brp, sglang_v2.RESULT_PROCESSOR)
    patcher.apply(ew, sglang_v2.WORKER_POINTS)
    assert not patcher.missing, patcher.missing
    try:
        yield brp, ew
    finally:
        patcher.restore_all()


def _result(width: int, accept_lens: list[int]):
    import torch
    from sglang.srt.managers.utils import GenerationBatchResult
    return GenerationBatchResult(next_token_ids=torch.arange(len(accept_lens) * width),
                                 accept_lens=torch.tensor(accept_lens),
                                 speculative_num_draft_tokens=width)


def test_k0_steps_are_no_draft_steps_not_rejected_drafts(sglang_v2_hooked, tmp_path):
    import torch
    from sglang.srt.managers.schedule_batch import Req
    from sglang.srt.sampling.sampling_params import SamplingParams
    brp, ew = sglang_v2_hooked
    worker = object.__new__(ew.EAGLEWorkerV2)
    worker.adaptive_controller, worker.topk, worker.speculative_num_steps = None, 1, 3
    cls = brp.SchedulerBatchResultProcessor
    processor = cls(**{**{f.name: None for f in dataclasses.fields(cls)}, "model_worker": worker,
                       "metrics_reporter": types.SimpleNamespace(
                           snapshot_spec_decode_metrics=lambda batch, result: None)})
    reqs = [Req(f"r{i}", "", [1, 2, 3], SamplingParams(temperature=0)) for i in range(2)]
    batch = types.SimpleNamespace(reqs=reqs, has_grammar=False,
                                  seq_lens_cpu=torch.tensor([10, 20]))
    with process_state.own_recorder(str(tmp_path)) as rec:
        processor._resolve_spec_v2_tokens(_result(4, [3, 1]), batch)  # K = 3: 2 and 0 correct
        processor._resolve_spec_v2_tokens(_result(1, [1, 1]), batch)  # K = 0, twice
        processor._resolve_spec_v2_tokens(_result(1, [1, 1]), batch)
        # SGLang counts every step, the K = 0 ones as 0 correct drafts
        assert [r.spec_verify_ct for r in reqs] == [3, 3]
        assert [r.spec_correct_drafts_histogram for r in reqs] == [[2, 0, 1], [3]]
        for r in reqs:
            processor._prepare_kv_cache_release(r)
        finished = list(rec.requests.totals._pending)
        assert [(f.verify_steps, f.accepted_tokens, f.correct_histogram) for f in finished] \
            == [(1, 2, [0, 0, 1]), (1, 0, [1])]
        t = rec.acceptance.folded()
        assert (t.drafts, t.draft_tokens, t.accepted, t.no_draft) == (2, 6, 2, 4)
        assert t.length_counts == {3: 1, 1: 1} and t.per_position[:3] == [1, 1, 0]
        for name, counts in t.by.items():  # every breakdown: the K = 3 step's 2 only
            assert sum(counts.lengths.values()) == 2, (name, counts.lengths)
        rec.requests.folded()
        assert sum(rec.requests.totals.by_mean_length.values()) == 2
    [path] = [os.path.join(d, "metrics.jsonl") for d, _, files in os.walk(tmp_path)
              if "metrics.jsonl" in files]
    with open(path) as fh:
        last = json.loads(fh.read().splitlines()[-1])["metrics"]
    assert [p["value"] for p in last[signals.SPEC_NO_DRAFT_STEPS.name]] == [4]
    assert [p["value"] for p in last[signals.SPEC_DRAFTS.name]] == [2]
    # the report on the folder those steps wrote: counted apart, kept out of acceptance
    from spectrace.report import build_report, render_text
    report = build_report(str(tmp_path))
    [proc] = report.readable
    assert (proc.figures.drafts, proc.figures.no_draft_steps) == (2, 4)
    assert proc.figures.mean_acceptance_length == 2.0  # (2 + 0) / 2 + 1
    assert proc.figures.to_json()["no_draft_steps"] == 4
    assert "steps with no draft (adaptive K = 0) 4 request-steps, kept out of acceptance" \
        in render_text(report)


def test_live_adaptive_config_run_counts_no_k0_step_as_a_rejected_draft(tiny_models,
                                                                       sglang_server, tmp_path):
    """SGLang's CPU server with `--speculative-adaptive-config`: K = 3 for a batch of one, 0
    for two or more. One request alone, then three together (K = 0 while two or more
    run). SGLang's meta_info counts every step in `spec_verify_ct`; spectrace counts the
    K = 3 ones as request-steps and the others apart, so acceptance, the batch-size
    breakdown and the requests hold the K = 3 steps only."""
    from tests.e2e import after_traffic, settle
    table = tmp_path / "k.json"
    table.write_text(json.dumps({"1": {"candidate_steps": [3]}, "2": {"candidate_steps": [0]}}))
    run = sglang_server(tiny_models("partial"), env={"SPECTRACE_METRIC_INTERVAL": "0.5"},
                        timeout=900, extra_args=["--speculative-adaptive",
                                                 "--speculative-adaptive-config", str(table)])
    alone = run.server.generate([3, 7, 11], 24)
    # one batch request, so the three share steps (three threads sent at once ran one
    # after the other beside a CPU-bound process: no K = 0 step at all)
    together = run.server.generate_together([[5 + i, 9, 2] for i in range(3)], 24)
    meta = [r["meta_info"] for r in [alone] + together]
    steps = sum(m["spec_verify_ct"] for m in meta)
    accepted = sum(m["spec_num_correct_drafts"] for m in meta)
    settle(run, alone["meta_info"]["spec_verify_ct"])
    proc = after_traffic(run)
    drafts, idle = proc["drafts"], proc["no_draft_steps"]
    assert idle > 0 and drafts + idle == steps, (drafts, idle, meta)
    assert proc["accepted_tokens"] == accepted and proc["draft_tokens"] == 3 * drafts
    # SGLang's K = 0 steps are its steps with more than one request: none of them is here
    assert {r["batch_size"]: r["drafts"] for r in proc["by_batch_size"]} == {"1": drafts}
    for name in ("by_context", "by_cuda_graph"):
        assert sum(r["drafts"] for r in proc[name]) == drafts, name
    # each request's own figures hold its K = 3 steps only (a request with none is not
    # counted): together, every request-step, and no K = 0 one
    assert sum(r["drafts"] for r in proc["by_sampling"]) == drafts
    assert 1 <= proc["requests"]["finished"] <= len(meta)
    assert proc["settings"]["spec_adaptive_config"] == str(table)


@pytest.mark.sources
@pytest.mark.parametrize("version", ["0.5.16", "0.5.23"])
def test_the_step_width_the_hook_reads_is_the_verify_s_own(version):
    """What `sglang_v2` reads a step's K from, in each release with K = 0 steps: the result
    its verify returns carries the tokens it verified per request
    (`speculative_num_draft_tokens=num_draft_tokens`), and the K = 0 step verifies one
    (`_build_trivial_verify_input`: `draft_token_num=1`), which the result processor still
    counts in `spec_verify_ct`."""
    import ast

    import wheel_sources as ws
    common = ws.source("sglang", version, "sglang/srt/speculative/eagle_worker_common.py")
    calls = [n for n in ast.walk(ast.parse(common)) if isinstance(n, ast.Call)
             and ast.unparse(n.func) == "GenerationBatchResult"]
    assert any(ast.unparse(k.value) == "num_draft_tokens" for c in calls for k in c.keywords
               if k.arg == "speculative_num_draft_tokens"), version
    worker = ws.get_class("sglang", version, "sglang/srt/speculative/eagle_worker_v2.py",
                          "EAGLEWorkerV2")
    [trivial] = [f for f in worker.body if getattr(f, "name", "") == "_build_trivial_verify_input"]
    assert "draft_token_num=1" in ast.unparse(trivial)
    processor = ws.source("sglang", version,
                          "sglang/srt/managers/scheduler_components/batch_result_processor.py")
    assert "req.spec_verify_ct += 1" in processor
