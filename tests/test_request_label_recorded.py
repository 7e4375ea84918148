"""Acceptance by request label, planted, on the `request_label` recording
(tests/recorders/record_request_label.py: a real SGLang 0.5.23 CPU server, EAGLE-3 v2
worker, SPECTRACE_REQUEST_LABEL=routing_key, the `context` tiny pair;
tests/recorded/README.md says when and how). A uniform run, two labels on identical
traffic the draft gets right, both past the rule's floor: no finding at all. Then, on a
server of its own, a label (`wrong`) whose requests walk the ids the draft gets wrong,
evenly interleaved with as many right ones (`u1`): `acceptance.label_gap` fires and names
it against the right ones, each label's figures equal SGLang's own meta_info of its
requests (kept beside the recording), the verdict leads with the condition, and no other
breakdown's rule fires.

A recording, not a live run: the floors need about 10,000 request-steps a server (minutes
on two cores), and which requests a batch held is the scheduler's timing, which the
batch-size rule sees. The live wiring of the label (from the request's `routing_key`) is
asserted live by tests/test_e2e_context.py (two routing keys kept, a third counted as
other)."""
from __future__ import annotations

from spectrace import signals
from spectrace.families.breakdowns import REQUEST_LABEL
from tests import recorded_runs
from tests.e2e import codes, findings_but_cost
from tests.recorded_runs import facts, path


def _report(phase: str) -> dict:
    return recorded_runs.report(path("request_label", phase))


def _label_rows(proc) -> dict:
    return {r[REQUEST_LABEL.name]: r for r in proc[f"by_{REQUEST_LABEL.name}"]}


def _own(phase: str) -> dict:
    """label -> [request-steps, accepted tokens, accept histogram], SGLang's own."""
    return facts("request_label", phase)["runtime"]["by_label"]


def test_uniform_labels_past_the_floor_raise_nothing():
    proc = recorded_runs.counting_process(_report("uniform"))
    rows, own = _label_rows(proc), _own("uniform")
    assert set(rows) == set(own) == {"u1", "u2"}
    for key in ("u1", "u2"):
        verify, accepted, _ = own[key]
        assert accepted == verify  # the construction: one accepted draft token per verify
        assert (rows[key]["drafts"], rows[key]["accepted_tokens"]) == (verify, accepted)
        assert rows[key]["drafts"] >= REQUEST_LABEL.rule.floor  # judged, not under the floor
        assert rows[key]["mean_acceptance_length"] == 2.0
    assert findings_but_cost(proc) == []


def test_planted_label_gets_the_finding_naming_it():
    proc = recorded_runs.counting_process(_report("planted"))
    rows, own = _label_rows(proc), _own("planted")
    assert set(rows) == set(own) == {"u1", "wrong"}
    for key, (verify, accepted, _) in own.items():  # each label's figures are SGLang's own
        assert (rows[key]["drafts"], rows[key]["accepted_tokens"]) == (verify, accepted), key
    wrong_verify, wrong_accepted, hist = own["wrong"]
    assert wrong_accepted == 0 and hist == {"1": wrong_verify}  # SGLang agrees: none
    assert rows["wrong"]["drafts"] >= REQUEST_LABEL.rule.floor
    assert rows["u1"]["drafts"] >= REQUEST_LABEL.rule.floor
    f = codes(proc)[signals.LABEL_GAP]
    assert f["severity"] == "warning"
    assert f["details"]["worse"] == "wrong" and f["details"]["worse_length"] == 1.0
    assert (f["details"]["better"], f["details"]["better_length"]) == ("u1", 2.0)
    assert f["details"]["worse_drafts"] == wrong_verify
    assert "for label wrong" in f["message"]
    # no other breakdown's rule fires: one context bucket; the wrong label's requests run
    # beside as many right ones, about as many steps each, in batches of every size
    assert not {signals.LONG_CONTEXT, signals.LARGE_BATCH, signals.SAMPLING_GAP} & set(
        codes(proc))


def test_the_verdict_leads_with_the_label():
    verdict = _report("planted")["verdict"]
    assert verdict["state"] == "underperforming"
    assert verdict["clues"][0]["source"] == signals.LABEL_GAP
    wrong_verify = _own("planted")["wrong"][0]
    assert (f"most associated with request label: mean accept length 1.00 at wrong "
            f"({wrong_verify} request-steps) against 2.00 at ") in verdict["sentence"]
