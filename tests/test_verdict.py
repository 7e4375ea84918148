"""The verdict the report leads with (`spectrace.report.verdict`), on report records
written as spectrace's file exporter writes them: healthy, broken (a finding: its cause
and fix), underperforming (where: the draft position acceptance is lost at), and the
floors that keep small or borderline samples from raising anything. Real runs: the
healthy one in tests/test_e2e_acceptance.py, the broken one in tests/test_html_report.py
(recorded) and tests/test_e2e_runtime_causes.py."""
from __future__ import annotations

import json

from spectrace import signals
from spectrace.report import build_report, render_text
from spectrace.report.html import render_html
from spectrace.report.records import FindingSummary
from spectrace.report.verdict import (
    BROKEN, EXPLAINS, HEALTHY, MIN_REQUEST_STEPS, NOT_ENOUGH_DATA, SLOWER, UNDERPERFORMING, Clue,
    judge,
    of_report)
from spectrace.file_layout import EVENTS_FILE, METRICS_FILE, RESOURCE_FILE
from spectrace.families.breakdowns import BATCH_SIZE as BATCH
from spectrace.families.breakdowns import REQUEST_LABEL as LABEL
from spectrace.families.breakdowns import SAMPLING
from spectrace.families.breakdowns import GRAMMAR, PREFIX_CACHE as PREFIX

STEPS = 3


def write_run(tmp_path, lengths: dict[int, int], events=(), name="sglang-h-1", by=None):
    """A process folder whose accept-length distribution is `lengths` (length -> request-
    steps; length = accepted + 1), with the per-position counts it implies (a chain);
    `by`: breakdown -> {bucket: {length: request-steps}}, its `accept_length_by_` counts."""
    drafts = sum(lengths.values())
    accepted = sum((k - 1) * v for k, v in lengths.items())
    per_pos = [sum(v for k, v in lengths.items() if k - 1 > p) for p in range(STEPS)]
    m = {signals.SPEC_DRAFTS.name: [{"attributes": {}, "value": drafts}],
         signals.SPEC_ACCEPTED_TOKENS.name: [{"attributes": {}, "value": accepted}],
         signals.SPEC_DRAFT_TOKENS.name: [{"attributes": {}, "value": drafts * STEPS}],
         signals.SPEC_ACCEPTED_PER_POSITION.name: [
             {"attributes": {"position": p}, "value": v} for p, v in enumerate(per_pos)],
         signals.SPEC_ACCEPT_LENGTH.name: [
             {"attributes": {"length": k}, "value": v} for k, v in lengths.items()]}
    for b, buckets in (by or {}).items():
        m[b.accept_length.name] = [
            {"attributes": {b.attribute: bucket, "length": k}, "value": v}
            for bucket, ls in buckets.items() for k, v in ls.items()]
    d = tmp_path / name
    d.mkdir(parents=True, exist_ok=True)
    (d / RESOURCE_FILE).write_text(json.dumps({"attributes": {"process.pid": 1}}))
    (d / METRICS_FILE).write_text(json.dumps({"time": 1.0, "metrics": m}) + "\n")
    (d / EVENTS_FILE).write_text("".join(json.dumps(e) + "\n" for e in events))
    return build_report(str(tmp_path))


BYPASS = {"time": 2.0, "code": signals.FC_BYPASS, "severity": "error",
          "message": "fc bypass: a target-fed draft pass received hidden states 128 wide. "
                     "More words. Fix: check use_aux_hidden_state."}
SYNTHETIC = {"time": 1.0, "code": signals.ACCEPTANCE_SYNTHETIC, "severity": "error",
             "message": "the acceptance figures are synthetic: SGLang accepts by a rule. "
                        "Fix: unset SGLANG_SIMULATE_ACC_LEN."}


def test_healthy(tmp_path):
    rep = write_run(tmp_path, {4: 300, 3: 100, 2: 50, 1: 50})
    v = of_report(rep)
    assert v.state == HEALTHY, v
    assert v.sentence == ("Verdict: healthy: mean acceptance length 3.30 over 500 "
                          "request-steps (of at most 4.00), no finding.")


def test_exact_partial_pair_is_healthy_not_underperforming(tmp_path):
    """The `partial` pair accepts exactly position 0: length 2.0, on the weak line, not
    below it; its positions 1-2 are never accepted, but the mean is what speculation gains."""
    assert of_report(write_run(tmp_path, {2: 500})).state == HEALTHY


def test_broken_names_the_earliest_error_finding_and_its_fix(tmp_path):
    """The events' findings first, earliest first; then the one the report judges from the
    totals (no draft accepted in 500 request-steps: a fact, but not a cause)."""
    rep = write_run(tmp_path, {1: 500}, events=[BYPASS, SYNTHETIC])
    v = of_report(rep)
    assert v.state == BROKEN
    assert v.sentence == (
        "Verdict: broken: the acceptance figures are synthetic: SGLang accepts by a rule "
        "(acceptance.synthetic; 2 more error findings below). Fix: unset "
        "SGLANG_SIMULATE_ACC_LEN.")
    assert [c.source for c in v.clues] == [signals.ACCEPTANCE_SYNTHETIC, signals.FC_BYPASS,
                                           "acceptance.nothing_accepted"]


def test_a_finding_is_broken_whatever_the_sample_size(tmp_path):
    assert of_report(write_run(tmp_path, {1: 3}, events=[BYPASS])).state == BROKEN


def test_low_acceptance_names_the_position_it_is_lost_at(tmp_path):
    rep = write_run(tmp_path, {1: 300, 2: 150, 3: 40, 4: 10})
    v = of_report(rep)
    assert v.state == UNDERPERFORMING
    assert v.sentence == (
        "Verdict: underperforming: mean acceptance length 1.52 over 500 request-steps (2.0 "
        "or more expected with 3 draft steps), from draft position 0: it is accepted in 40% "
        "of request-steps (200 of 500).")


def test_later_position_lost(tmp_path):
    """Position 0 at 70 %, position 1 accepted in 14 % of those that reached it."""
    v = of_report(write_run(tmp_path, {1: 300, 2: 600, 3: 80, 4: 20}))
    assert v.state == UNDERPERFORMING
    assert "from draft position 1: it is accepted in 14% of the request-steps that " \
           "accepted position 0 (100 of 700)" in v.sentence


def test_floor_few_request_steps_say_not_enough_data(tmp_path):
    v = of_report(write_run(tmp_path, {1: MIN_REQUEST_STEPS - 1}))
    assert v.state == NOT_ENOUGH_DATA
    assert v.sentence.startswith(f"Verdict: not enough data yet: {MIN_REQUEST_STEPS - 1} "
                                 "request-steps verified")


def test_floor_a_mean_just_below_the_line_within_its_noise_is_not_underperforming(tmp_path):
    """Mean 1.95 from a spread distribution over 120 request-steps: its 3-sigma bound is
    above 2.0, so it is not called weak; the same mean over 20000 request-steps is."""
    spread = {1: 56, 2: 30, 3: 18, 4: 16}
    rep = write_run(tmp_path, spread)
    assert 1.9 < rep.combined.figures.mean_acceptance_length < 2.0
    assert of_report(rep).state == HEALTHY
    big = write_run(tmp_path / "big", {k: v * 200 for k, v in spread.items()})
    assert of_report(big).state == UNDERPERFORMING


def test_clues_from_other_breakdowns_plug_in(tmp_path):
    """Another record type (e.g. acceptance by context length) adds its where clause."""
    rep = write_run(tmp_path, {4: 300, 3: 100, 2: 50, 1: 50})
    long_ctx = Clue(UNDERPERFORMING, "in contexts of 8k tokens and more (1.08 against 2.30 "
                    "below 2k)", "serve a draft trained for long contexts",
                    source="context_length")
    v = of_report(rep, [long_ctx])
    assert v.state == UNDERPERFORMING and v.clues == (long_ctx,)
    assert v.sentence == ("Verdict: underperforming: mean acceptance length 3.30 over 500 "
                          "request-steps, in contexts of 8k tokens and more (1.08 against 2.30 below 2k). "
                          "Fix: serve a draft trained for long contexts.")
    assert judge(rep.combined, [Clue(BROKEN, "x (y)", "z")]).state == BROKEN


def test_text_json_and_html_lead_with_the_verdict(tmp_path):
    rep = write_run(tmp_path, {1: 500}, events=[BYPASS])
    sentence = of_report(rep).sentence
    assert render_text(rep).splitlines()[0] == sentence
    assert rep.to_json()["verdict"]["sentence"] == sentence
    assert rep.to_json()["verdict"]["state"] == BROKEN
    page = render_html(rep)
    assert page.index(sentence) < page.index("<h2")  # before every view's figures
    assert f'data-state="broken">{sentence}</p>' in page


def test_watch_leads_with_the_verdict(tmp_path):
    from rich.console import Console
    from spectrace.report.watch import render
    rep = write_run(tmp_path, {1: 300, 2: 150, 3: 40, 4: 10})
    console = Console(width=400, record=True)
    console.print(render(rep, 2.0))
    first = console.export_text().splitlines()[0]
    assert first.startswith("Verdict: underperforming: mean acceptance length 1.52")


def test_speculation_slower_than_plain_decoding_is_its_own_verdict(tmp_path):
    """The advisor's warning (estimated speed-up below 1.0 past its floor) on a run with a
    fine acceptance length: the verdict says slower in its own words, with the advisor's
    fix, and the acceptance as what is not weak ("underperforming" stays for acceptance,
    issue 49); with a weak acceptance too, underperforming leads and the cost follows; its
    information (small gain, fewer steps faster) changes nothing."""
    import dataclasses

    from spectrace.report import advisor
    from spectrace.rules import speculation
    rep = write_run(tmp_path, {4: 300})
    view = rep.readable[0]
    assert judge(view).state == HEALTHY

    def costs(step, draft, verify, n=100):
        return {(phase, "1", STEPS): (t * n, t * t * n * 1.0001, n) for phase, t in (
            ("step", step), ("draft", draft), ("verify", verify), ("draft_extend", 2e-3),
            ("between_steps", 1e-3))}
    def judged(adv):  # the view with the advice and what the report's rules found in it
        found = tuple(map(FindingSummary.judged, speculation.findings(adv)))
        return dataclasses.replace(
            view, figures=dataclasses.replace(view.figures, speculation=adv),
            findings=view.findings + found)

    slow = advisor.advise(costs(90e-3, 60e-3, 4e-3), [300] * STEPS, [300] * STEPS, 300,
                          {4: 300}, runtime="sglang")
    assert slow.verdict == "slower"
    v = judge(judged(slow))
    assert v.state == SLOWER, v.sentence
    assert v.sentence.startswith(
        "Verdict: slower than plain decoding: speculation costs more than it saves at batch "
        f"size 1 and K={STEPS}, measured: estimated speed-up"), v.sentence
    assert ("(speculation.slower); acceptance is not weak as a whole (mean acceptance length "
            "4.00 over 300 request-steps). Fix: ") in v.sentence, v.sentence
    assert [c.source for c in v.clues] == [signals.SPEC_SLOWER]
    weak = write_run(tmp_path / "weak", {1: 150, 2: 150}).readable[0]  # weak, and slower
    weak = dataclasses.replace(weak, figures=dataclasses.replace(weak.figures,
                                                                  speculation=slow),
                               findings=weak.findings + judged(slow).findings[-len(
                                   speculation.findings(slow)):])
    v = judge(weak)
    assert v.state == UNDERPERFORMING and v.sentence.startswith(
        "Verdict: underperforming: mean acceptance length 1.50 over 300 request-steps"), \
        v.sentence
    assert v.clues[-1].source == signals.SPEC_SLOWER  # the cost after the acceptance
    fine = advisor.advise(costs(10e-3, 3e-3, 4e-3), [300] * STEPS, [300] * STEPS, 300,
                          {4: 300}, runtime="sglang")
    assert fine.verdict != "slower"
    assert {f.code for f in judged(fine).findings} <= {  # information only: still healthy
        signals.SPEC_SMALL_GAIN, signals.SPEC_FEWER_STEPS}
    assert judge(judged(fine)).state == HEALTHY


# -- the condition most associated with the shortfall (the breakdowns' rules) ----------------
WEAK = {1: 6000, 2: 6000}  # mean 1.50 over 12,000 request-steps: weak with 3 draft steps


def test_underperforming_names_the_condition_with_the_largest_effect(tmp_path):
    """Two breakdowns' rules fire: the label's worse bucket holds half the request-steps
    and a gap of 1.0 (0.50 lost a request-step), the batch size's a third and 0.8 (0.27):
    the label leads, with both buckets' figures; the batch size follows, each named once."""
    rep = write_run(tmp_path, WEAK, by={
        LABEL: {"chat": {2: 6000}, "math": {1: 6000}},
        BATCH: {"1": {2: 2000}, "64-127": {1: 800, 2: 200}}})
    v = rep.verdict
    assert v.state == UNDERPERFORMING
    assert [c.source for c in v.clues][:1] == [signals.LABEL_GAP]
    assert v.sentence.startswith(
        "Verdict: underperforming: mean acceptance length 1.50 over 12000 request-steps (2.0 "
        "or more expected with 3 draft steps), most associated with request label: mean "
        "accept length 1.00 at math (6000 request-steps) against 2.00 at chat (6000), 0.50 "
        "accepted tokens per request-step lost to it (acceptance.label_gap); from draft "
        "position 1"), v.sentence
    batch = [c for c in v.clues if c.source == signals.LARGE_BATCH]
    assert len(batch) == 1 and batch[0].where.startswith(
        "also with batch size: mean accept length 1.20 at 64-127 (1000 "
        "request-steps) against 2.00 at 1 (2000), 0.27 accepted tokens"), batch
    assert v.sentence.count(signals.LARGE_BATCH) == 1
    assert "Fix: train or fine-tune the draft on that label's traffic" in v.sentence
    # the batch size's fall on more of the request-steps: it leads instead
    rep = write_run(tmp_path / "b", WEAK, by={
        LABEL: {"chat": {2: 6000}, "math": {1: 6000}},
        BATCH: {"1": {2: 1000}, "64-127": {1: 9000}}})
    assert [c.source for c in rep.verdict.clues][:1] == [signals.LARGE_BATCH]


def test_a_condition_under_its_floor_is_not_named(tmp_path):
    rep = write_run(tmp_path, WEAK, by={
        LABEL: {"chat": {2: 6000}, "math": {1: LABEL.rule.floor - 1}}})
    assert rep.verdict.state == UNDERPERFORMING
    assert "most associated" not in rep.verdict.sentence
    assert signals.LABEL_GAP not in {f.code for f in rep.combined.findings}


def test_a_label_gap_alone_makes_a_fine_mean_underperforming(tmp_path):
    """A warning: the label's requests accept half as much while the mean is fine."""
    rep = write_run(tmp_path, {3: 6000, 2: 6000}, by={
        LABEL: {"chat": {3: 6000}, "math": {2: 6000}}})  # 2.0 a request-step against 1.0
    v = rep.verdict
    assert v.state == UNDERPERFORMING and v.sentence.startswith(
        "Verdict: underperforming: mean acceptance length 2.50 over 12000 request-steps, "
        "most associated with request label: mean accept length 2.00 at math (6000 request-steps) against "
        "3.00 at chat (6000), 0.50 accepted tokens per request-step lost to it "
        "(acceptance.label_gap)."), v.sentence


def test_sampling_only_explains_a_weak_mean(tmp_path):
    """Sampled requests accept less by construction: the sampling gap is an info finding,
    named (as what explains the mean) only when the mean is weak; a fine mean with the
    same gap is healthy."""
    sampled = {SAMPLING: {"greedy": {3: 6000}, "t>=1": {1: 6000}}}
    v = write_run(tmp_path, WEAK, by=sampled).verdict
    assert v.state == UNDERPERFORMING
    assert v.clues[0].kind == EXPLAINS and v.clues[0].source == signals.SAMPLING_GAP
    assert ("most associated with sampling: mean accept length 1.00 at t>=1 (6000 "
            "request-steps) against 3.00 at greedy (6000), 1.00 accepted tokens per "
            "request-step lost to it (acceptance.sampling_gap)") in v.sentence
    rep = write_run(tmp_path / "fine", {4: 300, 3: 100, 2: 50, 1: 50}, by=sampled)
    assert rep.verdict.state == HEALTHY, rep.verdict.sentence
    [f] = [f for f in rep.combined.findings if f.code == signals.SAMPLING_GAP]
    assert f.severity == "info"


def test_underperforming_names_the_prefix_cache_when_it_costs_the_most(tmp_path):
    """Cached requests accepting half as much (stale KV on prefix hits) over most of the
    request-steps lead the verdict, ahead of a label gap on fewer of them, with the fix
    (prefix caching off); the grammar gap, info, only follows as what explains."""
    rep = write_run(tmp_path, WEAK, by={
        PREFIX: {"none": {2: 5000}, "<50%": {2: 1000}, ">=50%": {1: 6000}},
        LABEL: {"chat": {2: 6000}, "math": {1: 1000, 2: 5000}},
        GRAMMAR: {"none": {2: 6000}, "json": {1: 6000}}})
    v = rep.verdict
    assert v.state == UNDERPERFORMING
    assert [c.source for c in v.clues][:1] == [signals.PREFIX_CACHE_GAP], v.clues
    assert ("most associated with prefix-cache hits: mean accept length 1.00 at >=50% "
            "(6000 request-steps) against 2.00 at none (5000), 0.50 accepted tokens per "
            "request-step lost to it (acceptance.prefix_cache_gap)") in v.sentence, v.sentence
    assert "Fix: rerun the same traffic with prefix caching off" in v.sentence
    [g] = [c for c in v.clues if c.source == signals.GRAMMAR_GAP]
    assert g.kind == EXPLAINS
    codes = {f.code: f.severity for f in rep.combined.findings}
    assert codes[signals.PREFIX_CACHE_GAP] == "warning" and codes[signals.GRAMMAR_GAP] == "info"


def test_equal_prefix_cache_buckets_are_quiet(tmp_path):
    """Hits accepting as well as uncached requests (a correct runtime): no finding, and a
    fine mean is healthy."""
    rep = write_run(tmp_path, {3: 6000, 2: 6000}, by={
        PREFIX: {"none": {3: 3000, 2: 3000}, ">=50%": {3: 3000, 2: 3000}}})
    assert rep.verdict.state == HEALTHY, rep.verdict.sentence
    assert signals.PREFIX_CACHE_GAP not in {f.code for f in rep.combined.findings}


def test_a_breakdown_declared_later_joins_without_code_changes(tmp_path, monkeypatch):
    """The verdict reads every declared breakdown's rule: one more (a KV-cache tier
    breakdown, say, declared only here) is named by its own declaration."""
    import dataclasses

    from spectrace.families import breakdowns as B
    from spectrace.report import breakdown_figures as BF
    tier = B.Breakdown(
        "kv_tier", "kv_tier", "KV-cache tier (where the request's KV was read from)",
        B.REQUEST, ("gpu", "host", "remote"), "test", "test",
        rule=B.GapRule(1000, 0.7, 0.3, ordered=True, min_apart=1), finding=signals.LABEL_GAP,
        message=B.messages.LABEL_GAP)
    monkeypatch.setattr(BF, "BREAKDOWNS", B.BREAKDOWNS + (tier,))
    view = write_run(tmp_path, WEAK).combined
    fig = view.figures
    rows = BF.breakdown_figures({"kv_tier": {("gpu", 2): 3000, ("remote", 1): 3000}}, 3)
    v = judge(dataclasses.replace(view, figures=dataclasses.replace(
        fig, breakdowns=fig.breakdowns + (rows["kv_tier"],))))
    assert "most associated with KV-cache tier: mean accept length 1.00 at remote" \
        in v.sentence, v.sentence
