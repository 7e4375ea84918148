"""The server settings that change acceptance (`spectrace.server_settings`): the reader
(a field a release lacks is left out, any other error is counted and never reaches the
server), the resource attributes they become, the report's header in every view
(text, `--json`, HTML, `--watch`), combined across processes without duplicates, and the
verdict's clue: named when acceptance is weak and a setting is a known cause, never when
acceptance is healthy. The values are read from the running servers in
tests/test_e2e_runtime_causes.py (SGLang 0.5.23, vLLM 0.32); the fields against every
release's sources in tests/test_wrap_points.py and tests/test_vllm_wrap_points.py.

The config objects here are plain namespaces standing in for a runtime's (the reader's
rules, not a runtime's fields, are under test; the fields are checked where named above).
"""
from __future__ import annotations

import json
from types import SimpleNamespace

from spectrace import server_settings, signals
from spectrace.export.resource import build_resource
from spectrace.config import from_env
from spectrace.file_layout import RESOURCE_FILE
from spectrace.report import build_report, render_text
from spectrace.report.html import render_html
from spectrace.report.verdict import EXPLAINS, HEALTHY, NOT_ENOUGH_DATA, UNDERPERFORMING
from spectrace.safety import INTERNAL_ERRORS

from test_verdict import write_run

FP8 = {"kv_cache_dtype": "fp8_e4m3", "draft_kv_cache_dtype": "fp8_e4m3",
       "quantization": "none", "prefix_caching": True, "tp_size": 2, "spec_method": "EAGLE3",
       "spec_num_steps": 3}
WEAK = {1: 300, 2: 150, 3: 40, 4: 10}      # mean 1.52 over 500: weak by far
HEALTHY_RUN = {4: 300, 3: 100, 2: 50, 1: 50}  # mean 3.30


def with_settings(tmp_path, lengths, settings, name="sglang-h-1", extra=None):
    """`test_verdict.write_run`'s folder, its resource.json holding `settings` as the
    exporter writes them (`spectrace.setting.<key>`)."""
    write_run(tmp_path, lengths, name=name)
    attrs = {"process.pid": 1, **server_settings.resource_attributes(settings), **(extra or {})}
    (tmp_path / name / RESOURCE_FILE).write_text(json.dumps({"attributes": attrs}))
    return build_report(str(tmp_path))


# -- the reader ------------------------------------------------------------------------
def test_a_field_the_release_lacks_is_left_out_and_the_next_way_is_tried():
    reads = {"kv_cache_dtype": (lambda c: c.cache.dtype,),
             "draft_kv_cache_dtype": (lambda c: c.spec.kv_dtype, lambda c: c.cache.dtype),
             "spec_adaptive": (lambda c: c.spec.dynamic,)}
    cfg = SimpleNamespace(cache=SimpleNamespace(dtype="fp8"), spec=SimpleNamespace())
    assert server_settings.read(reads, cfg, "settings:test") == {
        "kv_cache_dtype": "fp8", "draft_kv_cache_dtype": "fp8"}
    assert server_settings.read(reads, None, "settings:test") == {}


def test_an_error_while_reading_is_counted_and_never_raised():
    def boom(c):
        raise RuntimeError("a property that fails")
    before = INTERNAL_ERRORS.counts.get("settings:test", 0)
    got = server_settings.read({"tp_size": (boom, lambda c: 4), "pp_size": (lambda c: 1,)},
                               object(), "settings:test")
    assert got == {"pp_size": 1}  # the failing setting skipped, not guessed from a later way
    assert INTERNAL_ERRORS.counts["settings:test"] == before + 1


def test_values_become_plain_resource_attributes():
    class Mode:  # an enum-like value (vLLM's CUDAGraphMode.NONE)
        name = "NONE"
    attrs = server_settings.resource_attributes(
        {"cuda_graph": False, "cuda_graph_max_bs": 32, "grammar_backend": Mode(),
         "not_a_setting": 1, "kv_cache_dtype": None})
    assert attrs == {"spectrace.setting.cuda_graph": False,
                     "spectrace.setting.cuda_graph_max_bs": 32,
                     "spectrace.setting.grammar_backend": "NONE"}
    res = build_resource(from_env({}), {"settings": {"prefix_caching": False,
                                                            "tp_size": 2}}, "scheduler")
    assert res.attributes["spectrace.setting.prefix_caching"] is False
    assert res.attributes["spectrace.setting.tp_size"] == 2


# -- the header ------------------------------------------------------------------------
def test_every_view_shows_the_settings_in_its_header(tmp_path):
    from rich.console import Console
    from spectrace.report.watch import render
    rep = with_settings(tmp_path, HEALTHY_RUN, FP8)
    line = ("server settings: KV cache fp8_e4m3, draft KV cache fp8_e4m3, quantization none, "
            "prefix caching on, TP 2, speculative method EAGLE3, draft steps 3")
    assert render_text(rep).splitlines()[2] == line  # after the verdict and the folder
    out = rep.to_json()
    assert out["settings"] == FP8
    assert out["processes"][0]["settings"] == FP8
    page = render_html(rep)
    assert f"<p class=meta id=settings>{line}</p>" in page
    assert page.index(line) < page.index("<h2")
    console = Console(width=400, record=True)
    console.print(render(rep, 2.0))
    assert line in console.export_text().splitlines()[:4]


def test_processes_of_one_server_are_combined_without_duplicates(tmp_path):
    """vLLM's EngineCore and worker record the same settings: one line, each once; two
    servers that differ in one folder show both values."""
    engine = {**FP8, "spec_method": "eagle3"}
    with_settings(tmp_path, HEALTHY_RUN, engine, name="vllm-h-1")
    rep = with_settings(tmp_path, HEALTHY_RUN, engine, name="vllm-h-2")
    assert rep.to_json()["settings"] == engine
    assert render_text(rep).count("server settings:") == 1
    rep = with_settings(tmp_path, HEALTHY_RUN, {**engine, "tp_size": 4}, name="vllm-h-3")
    assert rep.to_json()["settings"]["tp_size"] == [2, 4]
    assert "TP 2/4," in render_text(rep)


def test_files_without_settings_have_no_header_line(tmp_path):
    rep = write_run(tmp_path, HEALTHY_RUN)
    assert rep.to_json()["settings"] == {}
    assert "server settings" not in render_text(rep)


# -- the verdict's clue ----------------------------------------------------------------
def test_weak_acceptance_names_the_fp8_kv_cache(tmp_path):
    rep = with_settings(tmp_path, WEAK, FP8)
    v = rep.verdict
    assert v.state == UNDERPERFORMING
    assert v.sentence.startswith("Verdict: underperforming: mean acceptance length 1.52 over "
                                 "500 request-steps"), v.sentence
    assert "the target's KV cache is fp8_e4m3, a known cause of lower acceptance" in v.sentence
    assert "drafts are trained on bf16 states" in v.sentence
    assert "--kv-cache-dtype auto" in v.sentence  # its fix
    kinds = {c.source: c.kind for c in v.clues}
    assert kinds["setting:kv_cache_dtype"] == EXPLAINS
    # the draft's KV cache is the target's: named once, not twice
    assert "setting:draft_kv_cache_dtype" not in kinds
    assert render_text(rep).splitlines()[0] == v.sentence


def test_weak_acceptance_names_a_quantized_target_and_async_ngram(tmp_path):
    rep = with_settings(tmp_path, WEAK, {"quantization": "fp8", "spec_method": "eagle3"})
    assert "the target is quantized (fp8)" in rep.verdict.sentence
    rep = with_settings(tmp_path / "q", WEAK, {"quantization": "none", "draft_quantization": "fp8",
                                               "spec_method": "eagle3"})
    assert "known cause" not in rep.verdict.sentence  # a quantized draft: no field evidence
    rep = with_settings(tmp_path / "b", WEAK, {"async_scheduling": True, "spec_method": "ngram",
                                               "kv_cache_dtype": "fp8"})
    s = rep.verdict.sentence
    assert "n-gram speculation runs with async scheduling" in s and "vllm#37150" in s
    assert "KV cache" not in s  # n-gram has no draft states: the KV cache is no clue there


def test_healthy_acceptance_names_no_setting(tmp_path):
    """A false alarm is a defect: an fp8 KV cache, a quantized target and async n-gram
    are no evidence of low acceptance when acceptance is fine."""
    bad = {**FP8, "quantization": "fp8", "draft_quantization": "awq", "async_scheduling": True}
    for i, settings in enumerate((bad, {**bad, "spec_method": "ngram"})):
        rep = with_settings(tmp_path / str(i), HEALTHY_RUN, settings)
        assert rep.verdict.state == HEALTHY, rep.verdict
        assert rep.verdict.clues == ()
        assert "known cause" not in render_text(rep)


def test_too_few_or_borderline_steps_name_no_setting(tmp_path):
    rep = with_settings(tmp_path, {1: 30, 2: 10}, FP8)
    assert rep.verdict.state == NOT_ENOUGH_DATA and rep.verdict.clues == ()
    # just below the line, within its noise: not weak, so no clue either
    rep = with_settings(tmp_path / "b", {1: 52, 2: 0, 3: 48}, FP8)
    assert rep.verdict.state == HEALTHY and "known cause" not in rep.verdict.sentence


def test_weak_acceptance_with_settings_that_are_no_known_cause_names_none(tmp_path):
    rep = with_settings(tmp_path, WEAK, {"kv_cache_dtype": "auto", "quantization": "none",
                                         "async_scheduling": True, "spec_method": "EAGLE3",
                                         "prefix_caching": False})
    v = rep.verdict
    assert v.state == UNDERPERFORMING
    assert all(c.kind != EXPLAINS for c in v.clues) and "known cause" not in v.sentence


def test_every_setting_has_a_label_and_a_resource_attribute():
    keys = [s.key for s in server_settings.SETTINGS]
    assert len(keys) == len(set(keys))
    for s in server_settings.SETTINGS:
        assert s.label and s.attribute == "spectrace.setting." + s.key
        assert (s.cause is None) == (not s.fix), s.key  # a clue always says what to do
    assert signals  # the signals module still imports with the settings declared
