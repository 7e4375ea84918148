"""The optional request label (`SPECTRACE_REQUEST_LABEL`, `SPECTRACE_REQUEST_LABEL_CAP`):
off by default; when on, the finished-request distribution carries the named request
field's value, the first CAP distinct values as themselves and every later one as `other`,
counted (`spectrace.spec.request_label_overflow`) and reported as an info line, never an
error. The fast tests run the real Recorder with its file exporter and the real report;
the SGLang test feeds SGLang 0.5.23's own `Req` objects through the adapter's hook.

SGLang's custom metric labels (`--tokenizer-metrics-custom-labels-header`) cannot be
used: they stay in SGLang's tokenizer process (`GenerateReqInput.custom_labels`, not in
`TokenizedGenerateReqInput`), so the scheduler's `Req`, where spectrace reads a finished
request, never has them; the label is a field the `Req` carries (`routing_key`, ...).
"""
from __future__ import annotations

import json
import os

import pytest

from spectrace import config as config_mod
from spectrace import process as process_mod
from spectrace import signals as S
from spectrace.rules.requests import LABEL_OVERFLOW, LabelCap, label_text
from spectrace.export.providers import setup
from spectrace.file_layout import METRICS_FILE, SPANS_FILE
from spectrace.families.requests import FinishedRequest
from spectrace.recorder import Recorder
from spectrace.report import build_report, render_text
from spectrace.report.html import render_html


def cfg(**kw) -> config_mod.Config:
    kw.setdefault("metric_interval_s", 0.1)
    kw.setdefault("request_sample_ratio", 1.0)
    return config_mod.from_env({}, **kw)


@pytest.fixture
def recorder(tmp_path):
    """recorder(**settings) -> (Recorder, its folder); a real file exporter under tmp_path."""
    made = []

    def make(**kw):
        c = cfg(output_dir=str(tmp_path), **kw)
        tel = setup(c, {}, "scheduler")
        made.append(tel)
        return Recorder(c, tel), tel
    yield make
    for tel in made:
        tel.shutdown()


def flush(tel) -> dict:
    for p in tel.owned:
        if hasattr(p, "force_flush"):
            p.force_flush()
    with open(os.path.join(tel.directory, METRICS_FILE)) as fh:
        return json.loads(fh.read().splitlines()[-1])["metrics"]


def finished(i: int, label, steps: int = 10, accepted: int = 10) -> FinishedRequest:
    return FinishedRequest(f"req-{i}", steps, accepted, None, 0.0, None, label)


# -- the cap --------------------------------------------------------------------------------
def test_cap_passes_the_first_values_and_counts_the_rest_as_other():
    cap = LabelCap(2)
    assert [cap(v) for v in ("a", "b", "a", "c", "d", "b", "c")] == [
        "a", "b", "a", LABEL_OVERFLOW, LABEL_OVERFLOW, "b", LABEL_OVERFLOW]
    assert cap.overflow == 3 and cap.seen == {"a", "b"}


def test_label_text_is_bounded_and_names_a_missing_value():
    assert label_text(None) == label_text("") == "none"
    assert label_text(3) == "3"
    assert label_text("x" * 500) == "x" * 64


@pytest.mark.parametrize("bad", [0, -1, 2.5, True, "3"])
def test_a_bad_cap_is_a_clear_error(bad):
    with pytest.raises(ValueError, match="label cap: expected a whole number >= 1"):
        LabelCap(bad)


@pytest.mark.parametrize("var,raw,words", [
    ("SPECTRACE_REQUEST_LABEL", "tenant", "one of routing_key, extra_key, priority, lora"),
    ("SPECTRACE_REQUEST_LABEL", "x-smg-routing-key", "expected a request field"),
    ("SPECTRACE_REQUEST_LABEL_CAP", "0", "a whole number from 1 to 1000"),
    ("SPECTRACE_REQUEST_LABEL_CAP", "many", "a whole number from 1 to 1000"),
])
def test_bad_settings_name_the_variable(var, raw, words):
    with pytest.raises(config_mod.ConfigError) as ei:
        config_mod.from_env({var: raw})
    assert str(ei.value).startswith(f"{var}=") and words in str(ei.value)


def test_off_by_default_and_empty_is_off():
    assert config_mod.from_env({}).request_label is None
    assert config_mod.from_env({"SPECTRACE_REQUEST_LABEL": " "}).request_label is None
    c = config_mod.from_env({"SPECTRACE_REQUEST_LABEL": " Routing_Key "})
    assert (c.request_label, c.request_label_cap) == ("routing_key", 32)
    assert config_mod.to_env(c)["SPECTRACE_REQUEST_LABEL"] == "routing_key"  # to children


# -- the Recorder and the report ------------------------------------------------------------
def test_without_a_label_the_distribution_is_as_before(recorder):
    rec, tel = recorder()
    for i, label in enumerate(["a", "b"]):
        rec.requests.finished(finished(i, label))
    metrics = flush(tel)
    points = metrics[S.SPEC_REQUESTS.name]
    assert [p["attributes"].get(S.ATTR_REQUEST_LENGTH) for p in points] == ["2.00-2.25"]
    assert all(S.ATTR_REQUEST_LABEL not in p["attributes"] for p in points)
    assert S.SPEC_REQUEST_LABEL_OVERFLOW.name not in metrics
    proc = build_report(tel.directory).to_json()["processes"][0]["requests"]
    assert (proc["label_key"], proc["by_label"], proc["label_overflow"]) == (None, [], 0)
    assert "request label" not in render_text(build_report(tel.directory))


def test_sampled_request_spans_are_made_off_the_decode_loop_and_kept_at_a_stop(recorder):
    """A finished request costs the decode loop an append: its span is made later, by the
    collecting thread or, at a stop, by the final flush's span worker before it exports
    (here with no metric collection at all), and it keeps when the request finished."""
    from spectrace.export import final_flush
    rec, tel = recorder(metric_interval_s=2.0)
    rec.requests.finished(finished(1, None))
    assert len(rec.requests._spans) == 1  # kept, not made yet
    final_flush.install(tel.flush_targets(before_spans=rec.emit_request_spans))
    try:
        assert final_flush.flush()
    finally:
        final_flush.uninstall()
    assert not rec.requests._spans
    with open(os.path.join(tel.directory, SPANS_FILE)) as fh:
        spans = [json.loads(line) for line in fh]
    assert [(s["name"], s["attributes"][S.SPAN_ATTR_REQUEST_ID]) for s in spans] == [
        (S.SPAN_REQUEST, "req-1")]
    assert spans[0]["start_ns"] == spans[0]["end_ns"] > 0


def test_label_values_past_the_cap_are_other_counted_and_reported(recorder):
    rec, tel = recorder(request_label="routing_key", request_label_cap=2)
    assert flush(tel)[S.SPEC_REQUEST_LABEL_OVERFLOW.name] == [  # 0 from the start
        {"attributes": {S.ATTR_REQUEST_LABEL_KEY: "routing_key", S.ATTR_COUNTED: "once"},
         "value": 0}]
    rec.acceptance.add([1, 1], 3)  # the report lists requests with the step figures
    # a: 3 requests (one accepts nothing), b: 1, then c, d and one without a key: other
    for i, (label, accepted) in enumerate([("a", 10), ("a", 10), ("b", 10), ("c", 10),
                                           ("a", 0), (None, 10), ("d", 10)]):
        rec.requests.finished(finished(i, label, accepted=accepted))
    metrics = flush(tel)
    by = {(p["attributes"][S.ATTR_REQUEST_LABEL], p["attributes"][S.ATTR_REQUEST_LENGTH]):
          p["value"] for p in metrics[S.SPEC_REQUESTS.name]}
    assert by == {("a", "2.00-2.25"): 2, ("a", "1.00-1.25"): 1, ("b", "2.00-2.25"): 1,
                  ("other", "2.00-2.25"): 3}
    assert [p["value"] for p in metrics[S.SPEC_REQUEST_LABEL_OVERFLOW.name]] == [3]
    # the spans keep each request's own value (uncapped): a request leads to its label
    with open(os.path.join(tel.directory, SPANS_FILE)) as fh:
        spans = [json.loads(line) for line in fh]
    assert [s["attributes"][S.SPAN_ATTR_REQUEST_LABEL] for s in spans] == [
        "a", "a", "b", "c", "a", "none", "d"]

    report = build_report(tel.directory)
    req = report.to_json()["processes"][0]["requests"]
    assert req["finished"] == 7  # the distribution summed over the label, as before
    assert req["by_mean_acceptance_length"] == {"1.00-1.25": 1, "2.00-2.25": 6}
    assert req["label_key"] == "routing_key" and req["label_overflow"] == 3
    assert req["by_label"] == [
        {"value": "a", "finished": 3,
         "by_mean_acceptance_length": {"1.00-1.25": 1, "2.00-2.25": 2}},
        {"value": "b", "finished": 1, "by_mean_acceptance_length": {"2.00-2.25": 1}},
        {"value": "other", "finished": 3, "by_mean_acceptance_length": {"2.00-2.25": 3}}]
    assert report.to_json()["combined"]["requests"]["label_overflow"] == 3
    text = render_text(report)
    assert "    by request label routing_key (SPECTRACE_REQUEST_LABEL):" in text
    assert "      a: 3 requests; 1.00-1.25: 1  2.00-2.25: 2" in text
    assert ("3 requests had a label value past SPECTRACE_REQUEST_LABEL_CAP distinct values "
            "and count as `other` (info)") in text
    assert report.combined is None or not [  # info, not a finding: the verdict is unmoved
        f for f in report.combined.findings if "label" in f.code]
    page = render_html(report)
    assert 'data-key="requests.label_overflow"' in page
    assert 'data-key="requests.by_label.2.finished"' in page


# -- SGLang's own request objects -----------------------------------------------------------
@pytest.mark.sglang
def test_sglang_requests_routing_key_through_the_release_hook(recorder, monkeypatch):
    """SGLang 0.5.23's `Req`, with the routing key its HTTP layer sets (body field or the
    `x-smg-routing-key` header), and its own speculative counters, through the hook on
    `_prepare_kv_cache_release`."""
    from sglang.srt.managers.schedule_batch import Req
    from sglang.srt.sampling.sampling_params import SamplingParams

    from spectrace.adapters import sglang_v2
    rec, tel = recorder(request_label="routing_key", request_label_cap=1)
    monkeypatch.setattr(process_mod.STATE, "recorder", rec)
    for i, key in enumerate(["tenant-a", "tenant-b", "tenant-a"]):
        req = Req(f"rid-{i}", "", [1, 2, 3], SamplingParams(temperature=0), routing_key=key)
        req.spec_verify_ct, req.spec_num_correct_drafts = 4, 4
        req.spec_correct_drafts_histogram = [0, 4]
        sglang_v2._before_release(None, req)
    metrics = flush(tel)
    assert {p["attributes"][S.ATTR_REQUEST_LABEL]: p["value"]
            for p in metrics[S.SPEC_REQUESTS.name]} == {"tenant-a": 2, "other": 1}
    assert [p["value"] for p in metrics[S.SPEC_REQUEST_LABEL_OVERFLOW.name]] == [1]
