"""Counting each request-step once across ranks (fast: no server).

Which process counts (`spectrace.counting`), how an SGLang worker or a vLLM worker finds
its place (its ranks as SGLang's parallel state or its server arguments give them; plain
objects with the same fields, and once SGLang's real `ParallelContext`), the `counted`
attribute on the Recorder's series, and
`spectrace report`'s totals over a tensor-parallel copy and data-parallel groups. The real
multi-rank runs are in tests/test_prometheus_e2e.py (tensor parallelism 2, both runtimes).
"""
from __future__ import annotations

import json
import sys
import types
from types import SimpleNamespace

import pytest

from spectrace import signals as S
from spectrace.adapters import sglang_identity
from spectrace.counting import COPY, ONCE, Placement, counts_once, scope


# -- the rule --------------------------------------------------------------------------------
@pytest.mark.parametrize("place, expected", [
    (Placement(), ONCE),                                   # nothing known: a single process
    (Placement(0), ONCE), (Placement(1), COPY), (Placement(7), COPY),
    (Placement(0, 1, 2), ONCE),                            # the last stage verifies
    (Placement(0, 0, 2), COPY),                            # an earlier stage does not
    (Placement(1, 1, 2), COPY),
    (Placement(0, 3, None), ONCE),                         # stages unknown: rank decides
])
def test_rank_zero_of_the_last_stage_counts_once(place, expected):
    assert scope(place) == expected


def test_files_without_a_scope_count_once():
    assert counts_once(ONCE) and counts_once(None) and not counts_once(COPY)


# -- SGLang: from the server arguments (any release) ---------------------------------------------
def args(**kw):
    base = {"speculative_draft_model_path": "/d", "tp_size": 1, "pp_size": 1, "dp_size": 1}
    return SimpleNamespace(**{**base, **kw})


def sglang_scopes(n: int, **kw) -> list[str]:
    """The scope of each of `n` tensor-parallel ranks, through the constructor arguments
    of SGLang 0.5.12's v1 worker (`server_args`, `tp_rank`, ...)."""
    return [scope(sglang_identity.placement_from_args(
        {"server_args": args(tp_size=n, **kw), "tp_rank": r, "pp_rank": kw.get("pp_rank", 0)}))
        for r in range(n)]


def test_sglang_tensor_parallel_counts_on_rank_0_only():
    assert sglang_scopes(1) == [ONCE]
    assert sglang_scopes(8) == [ONCE] + [COPY] * 7


def test_sglang_dp_attention_counts_once_per_attention_group():
    # --attn-dp-size 4 with tp 8 (0.5.2x): attention groups of 2 ranks, each serves its own
    # requests: ranks 0, 2, 4, 6 count
    assert sglang_scopes(8, attn_dp_size=4, attn_cp_size=1) == [ONCE, COPY] * 4
    # the older spelling, --dp-size 4 --enable-dp-attention
    assert sglang_scopes(8, dp_size=4, enable_dp_attention=True) == [ONCE, COPY] * 4
    # --dp-size 2 without DP attention: separate replicas, each with tp ranks 0..n-1 (the
    # replica's dp_rank tells them apart): rank 0 of each counts
    assert sglang_scopes(4, dp_size=2, enable_dp_attention=False) == [ONCE, COPY, COPY, COPY]
    # full DP attention: every rank its own group
    assert sglang_scopes(4, attn_dp_size=4) == [ONCE] * 4


def test_sglang_attention_context_parallel_ranks_are_copies():
    # tp 4 = attn_tp 2 x attn_cp 2: the CP rank 1 half sees the same requests
    assert sglang_scopes(4, attn_dp_size=1, attn_cp_size=2) == [ONCE, COPY, COPY, COPY]


def test_sglang_pipeline_only_the_last_stage_counts():
    assert sglang_scopes(2, pp_size=2, pp_rank=0) == [COPY, COPY]
    assert sglang_scopes(2, pp_size=2, pp_rank=1) == [ONCE, COPY]


def test_sglang_v2_worker_ranks_come_from_its_target_worker():
    """0.5.23's EAGLEWorkerV2(server_args, gpu_id, nccl_port, target_worker): the ranks
    are the target worker's."""
    target = SimpleNamespace(tp_rank=1, pp_rank=0, dp_rank=None)
    named = {"server_args": args(tp_size=2), "gpu_id": 0, "nccl_port": 1,
             "target_worker": target}
    assert sglang_identity.placement_from_args(named) == Placement(1, 0, 1)


# -- SGLang: from its own parallel state ----------------------------------------------------------
class Parallel:
    """SGLang 0.5.16+'s `ParallelContext`: fields read as attributes; an unset one raises."""

    def __init__(self, **fields) -> None:
        self._fields = fields

    def __getattr__(self, name):
        if name.startswith("_"):
            raise AttributeError(name)
        if name not in self._fields:
            raise RuntimeError(f"parallel name {name!r} has not been written")
        return self._fields[name]


def with_modules(monkeypatch, **modules) -> None:
    for name, attrs in modules.items():
        monkeypatch.setitem(sys.modules, name, types.SimpleNamespace(**attrs))


def test_sglang_parallel_state_comes_first(monkeypatch):
    par = Parallel(attn_tp_rank=0, attn_tp_size=2, attn_cp_rank=1, pp_rank=1, pp_size=2)
    with_modules(monkeypatch, **{"sglang.srt.runtime_context": {"get_parallel": lambda: par}})
    # the arguments say rank 0 of one stage; SGLang's state says CP rank 1: a copy
    place = sglang_identity.placement({"server_args": args(tp_size=4), "tp_rank": 0})
    assert place == Placement(2, 1, 2) and scope(place) == COPY


def test_sglang_parallel_state_without_cp_and_pp(monkeypatch):
    par = Parallel(attn_tp_rank=0, attn_tp_size=1)  # unset fields raise: read as unknown
    with_modules(monkeypatch, **{"sglang.srt.runtime_context": {"get_parallel": lambda: par}})
    assert sglang_identity.placement({}) == Placement(0, None, None)


def test_sglang_older_group_helpers(monkeypatch):
    """Before `get_parallel()` (0.5.12): `dp_attention.get_attention_*` and
    `get_pp_group()`."""
    monkeypatch.setitem(sys.modules, "sglang.srt.runtime_context", None)  # import fails
    with_modules(monkeypatch, **{
        "sglang.srt.layers.dp_attention": {
            "get_attention_tp_rank": lambda: 1, "get_attention_tp_size": lambda: 2,
            "get_attention_cp_rank": lambda: 0},
        "sglang.srt.distributed.parallel_state": {
            "get_pp_group": lambda: SimpleNamespace(rank_in_group=0, world_size=1)}})
    monkeypatch.setitem(sys.modules, "sglang.srt.layers",
                        types.SimpleNamespace(dp_attention=sys.modules[
                            "sglang.srt.layers.dp_attention"]))
    assert sglang_identity.placement({}) == Placement(1, 0, 1)


def test_sglang_without_any_parallel_state_reads_the_arguments(monkeypatch):
    monkeypatch.setitem(sys.modules, "sglang.srt.runtime_context", None)
    monkeypatch.setitem(sys.modules, "sglang.srt.layers", None)
    named = {"server_args": args(tp_size=2), "tp_rank": 1}
    assert scope(sglang_identity.placement(named)) == COPY


# -- vLLM -----------------------------------------------------------------------------------------
def test_vllm_worker_scopes(monkeypatch):
    """The EngineCore counts steps and accept counts once per engine; of its workers, tp
    rank 0 of the last pipeline stage (the one with the drafter) counts its passes."""
    from spectrace import process
    from spectrace.adapters import vllm_identity

    cfg = SimpleNamespace(parallel_config=SimpleNamespace(
        data_parallel_rank=0, tensor_parallel_size=2, pipeline_parallel_size=2),
        model_config=None, speculative_config=None)
    got = {}
    for tp in range(2):
        for pp in range(2):
            monkeypatch.setattr(process.STATE, "identity", {})
            monkeypatch.setattr(process.STATE, "recorder", None)
            monkeypatch.setattr(vllm_identity, "recorder", lambda role: None)
            monkeypatch.setattr(vllm_identity, "_worker_ranks",
                                lambda tp=tp, pp=pp: {"tp_rank": tp, "pp_rank": pp})
            vllm_identity.worker_recorder(cfg)
            got[tp, pp] = process.STATE.identity["counted"]
    assert got == {(0, 0): COPY, (1, 0): COPY, (0, 1): ONCE, (1, 1): COPY}
    monkeypatch.setattr(process.STATE, "identity", {})
    vllm_identity.engine_recorder(cfg)
    assert process.STATE.identity["counted"] == ONCE


# -- the Recorder's series ------------------------------------------------------------------------
def recorder_points(counted: str) -> dict:
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import InMemoryMetricReader

    from spectrace.config import Config
    from spectrace.export.providers import ProcessTelemetry
    from spectrace.recorder import Recorder

    reader = InMemoryMetricReader()
    provider = MeterProvider(metric_readers=[reader])
    tel = ProcessTelemetry(resource=None, meter=provider.get_meter("t"), tracer=None,
                           events=None, directory=None)
    rec = Recorder(Config(), tel, counted=counted)
    rec.acceptance.add([1, 0], 3)
    rec.draft.count((S.PASS_TARGET_FED, 384))
    out: dict = {}
    for rm in reader.get_metrics_data().resource_metrics:
        for sm in rm.scope_metrics:
            for m in sm.metrics:
                out[m.name] = [dict(p.attributes or {}) for p in m.data.data_points]
    provider.shutdown()
    return out


@pytest.mark.parametrize("counted", [ONCE, COPY])
def test_counted_once_series_carry_the_scope_and_the_others_do_not(counted):
    points = recorder_points(counted)
    for spec in S.ALL_METRICS:
        for attrs in points.get(spec.name, []):
            assert (attrs.get(S.ATTR_COUNTED) == counted) is spec.counted_once, (spec.name,
                                                                                attrs)
    assert points[S.SPEC_DRAFTS.name] == [{S.ATTR_COUNTED: counted}]
    assert {S.ATTR_COUNTED: counted, S.ATTR_PASS_KIND: S.PASS_TARGET_FED,
            S.ATTR_WIDTH: 384} in points[S.EAGLE3_PASSES.name]


def test_a_bad_scope_is_a_clear_error():
    with pytest.raises(ValueError, match="counted: expected 'once' or 'copy', got 'twice'"):
        recorder_points("twice")


# -- the report's totals ---------------------------------------------------------------------------
def write_process(root, name: str, counted: str | None, drafts: int, accepted: int,
                  passes: int, agreement: int, errors: int = 0, **resource) -> None:
    d = root / name
    d.mkdir()
    attrs = {"process.pid": len(name), S.RES_ROLE: "scheduler", **resource}
    if counted is not None:
        attrs[S.RES_COUNTED] = counted
    (d / "resource.json").write_text(json.dumps({"attributes": attrs, "started": 1.0}))
    scope_attr = {S.ATTR_COUNTED: counted} if counted else {}
    metrics = {
        S.SPEC_DRAFTS.name: [{"attributes": scope_attr, "value": drafts}],
        S.SPEC_DRAFT_TOKENS.name: [{"attributes": scope_attr, "value": 3 * drafts}],
        S.SPEC_ACCEPTED_TOKENS.name: [{"attributes": scope_attr, "value": accepted}],
        S.SPEC_AGREEMENT_DRAFTS.name: [{"attributes": scope_attr, "value": agreement}],
        S.EAGLE3_PASSES.name: [{"attributes": {**scope_attr, S.ATTR_PASS_KIND: "target_fed",
                                               S.ATTR_WIDTH: 384}, "value": passes}],
        S.INTERNAL_ERRORS.name: [{"attributes": {}, "value": errors}],
    }
    (d / "metrics.jsonl").write_text(json.dumps({"time": 2.0, "metrics": metrics}) + "\n")


def test_report_adds_each_data_parallel_group_once_and_leaves_copies_out(tmp_path):
    from spectrace.report.summary import build_report
    from spectrace.report.text import render_text

    # two DP groups of two TP ranks: group 0 saw 10 request-steps, group 1 saw 6
    write_process(tmp_path, "sglang-a", ONCE, 10, 10, 20, 4, tp_rank=0, dp_rank=0)
    write_process(tmp_path, "sglang-b", COPY, 10, 10, 20, 4, errors=1, tp_rank=1,
                  dp_rank=0)
    write_process(tmp_path, "sglang-c", ONCE, 6, 3, 12, 2, tp_rank=2, dp_rank=1)
    write_process(tmp_path, "sglang-d", COPY, 6, 3, 12, 2, tp_rank=3, dp_rank=1)
    rep = build_report(str(tmp_path))
    c = rep.combined.figures
    assert (c.drafts, c.accepted_tokens, c.draft_tokens) == (16, 13, 48)
    assert c.agreement_drafts == 6
    assert [x.count for x in c.hidden_state_passes] == [32]
    assert c.internal_errors == 1  # per process: the copy's own error is kept
    assert rep.combined.counted_once == ("sglang-a", "sglang-c")
    assert rep.combined.copies == ("sglang-b", "sglang-d")
    assert max(c.timeline.drafts) == c.timeline.drafts[-1] == 16
    # the per-rank view stays: each process with its own figures and its scope
    assert [(p.figures.drafts, p.counted) for p in rep.processes] == [
        (10, ONCE), (10, COPY), (6, ONCE), (6, COPY)]
    text = render_text(rep)
    assert ("all 4 processes together: request-steps, draft passes and agreement counted "
            "once (from 2 processes; 2 copies of a rank 0 left out); findings and errors "
            "summed over processes") in text
    assert text.count("a copy: these request-steps") == 2
    assert "request-steps verified 16, draft tokens 48, accepted 13" in text
    assert "spectrace internal errors (all processes): 1" in text


def test_report_of_an_older_spectrace_adds_every_process(tmp_path):
    """Files without `spectrace.counted` (before it existed): every process counts, as
    then."""
    from spectrace.report.summary import build_report

    write_process(tmp_path, "sglang-a", None, 10, 10, 20, 4)
    write_process(tmp_path, "sglang-b", None, 10, 10, 20, 4)
    c = build_report(str(tmp_path)).combined
    assert c.figures.drafts == 20 and c.copies == ()


def test_html_and_watch_say_the_same(tmp_path):
    from rich.console import Console

    from spectrace.report.html import render_html
    from spectrace.report.summary import build_report
    from spectrace.report.watch import render

    write_process(tmp_path, "vllm-e", ONCE, 10, 10, 0, 0, **{S.RES_ROLE: "engine_core"})
    write_process(tmp_path, "vllm-w0", ONCE, 0, 0, 20, 4, tp_rank=0,
                  **{S.RES_ROLE: "worker"})
    write_process(tmp_path, "vllm-w1", COPY, 0, 0, 20, 4, tp_rank=1,
                  **{S.RES_ROLE: "worker"})
    rep = build_report(str(tmp_path))
    c = rep.combined.figures
    assert (c.drafts, c.agreement_drafts, c.hidden_state_passes[0].count) == (
        10, 4, 20)
    page = render_html(rep)
    assert "from 2 processes; 1 copy of a rank 0 left out" in page
    assert "<th>counted</th>" in page and "<td>copy</td>" in page
    console = Console(record=True, width=300)
    console.print(render(rep, 2))
    screen = console.export_text()
    assert "from 2 processes; 1 copy of a rank 0 left out" in screen
    assert "a copy: these request-steps" in screen


def test_sglang_pipeline_stages_take_their_own_ports(monkeypatch):
    """Prometheus ports above the base: SGLang's world rank, so the last stage's rank 0
    (the one that counts) does not collide with the first stage's."""
    for name in ("sglang.srt.runtime_context", "sglang.srt.distributed.parallel_state"):
        monkeypatch.setitem(sys.modules, name, None)  # no parallel state to fall back on
    offsets = [sglang_identity.port_offset({"server_args": args(tp_size=2, pp_size=2),
                                            "tp_rank": tp, "pp_rank": pp})
               for pp in range(2) for tp in range(2)]
    assert offsets == [0, 1, 2, 3]
    assert sglang_identity.port_offset({"server_args": args()}) is None


def test_sglang_data_parallel_replicas_take_their_own_ports(monkeypatch):
    """DP replicas without attention DP each number their tp ranks from 0, so the replica
    adds a whole world; with attention DP (either spelling) the tp ranks are already
    unique across replicas and the derived dp_rank adds nothing."""
    for name in ("sglang.srt.runtime_context", "sglang.srt.distributed.parallel_state"):
        monkeypatch.setitem(sys.modules, name, None)
    replicas = [sglang_identity.port_offset({
        "server_args": args(tp_size=2, pp_size=2, dp_size=2),
        "tp_rank": tp, "pp_rank": pp, "dp_rank": dp})
        for dp in range(2) for pp in range(2) for tp in range(2)]
    assert replicas == list(range(8))
    for spelling in ({"attn_dp_size": 2}, {"enable_dp_attention": True}):
        attention_dp = [sglang_identity.port_offset({
            "server_args": args(tp_size=4, dp_size=2, **spelling),
            "tp_rank": tp, "dp_rank": tp // 2}) for tp in range(4)]
        assert attention_dp == [0, 1, 2, 3], spelling


@pytest.mark.sglang
def test_sglang_real_parallel_context():
    """SGLang 0.5.23's own `ParallelContext` (no server: its ranks stated the way its
    launcher publishes them): unset, spectrace falls back; set, it reads the attention
    rank and the stage. Runs in a child interpreter so the state stays there."""
    import subprocess

    code = (
        "from sglang.srt.runtime_context import get_parallel\n"
        "from spectrace.adapters import sglang_identity as s\n"
        "print(s._placement_from_context())\n"
        "get_parallel().override_permanently(tp_rank=3, tp_size=4, attn_tp_rank=1,"
        " attn_tp_size=2, attn_dp_rank=1, attn_dp_size=2, attn_cp_rank=0, attn_cp_size=1,"
        " pp_rank=1, pp_size=2)\n"
        "print(s.placement({}))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    assert out.stdout.split("\n")[-3:] == [
        "None", "Placement(peer_rank=1, pp_rank=1, pp_size=2)", ""]
