"""Step cost (spectrace.families.step_cost) and the draft-token advisor
(spectrace.report.advisor): the bucket arithmetic, the wall clock through the Recorder's hot-path methods, the exact
tokens-per-step from per-position counts, the recommendation, its flags and its floor.
Real Recorder, real report code; the step costs fed to `advise` are numbers a test states."""
from __future__ import annotations

import types

import pytest

from tests.kit import stand_ins as hb

from tests.kit import process_state
from spectrace import signals
from spectrace.report import advisor
from spectrace.rules import speculation
from spectrace.families import step_cost
from spectrace.report.text import speculation_lines


def test_buckets_are_powers_of_two_and_bounded():
    assert [step_cost.bucket_of(n) for n in (0, 1, 2, 3, 4, 7, 8, 255, 256)] == \
        [0, 0, 1, 1, 2, 2, 3, 7, 8]
    assert step_cost.BUCKETS[:4] == ("1", "2-3", "4-7", "8-15")
    assert step_cost.bucket_of(10 ** 9) == step_cost.MAX_BUCKET
    assert step_cost.BUCKETS[-1] == f"{1 << step_cost.MAX_BUCKET}+"
    assert step_cost.slot(step_cost.FORWARD, step_cost.MAX_BUCKET, 99) == step_cost.SLOTS - 1


def begin(rec, worker, batch_size: int):
    """What a step hook does at a step's start: measure it when it is due."""
    return rec.cost.start(worker, batch_size, False) if rec.cost.due() else None


def test_wall_clock_measures_each_phase_under_the_step_k(tmp_path):
    """A measured step through the Recorder's hot-path methods: the phases land under the
    K the worker had when each started (SGLang's adaptive speculation changes it inside
    the step), the between-steps interval under the step before it; every Nth step only."""
    worker = types.SimpleNamespace(speculative_num_steps=3)
    with process_state.own_recorder(str(tmp_path), step_cost_every=2) as rec:
        cost = begin(rec, worker, 5)
        assert rec.inflight.cost is cost and cost.bucket == 2
        t = cost.clock.start()
        cost.clock.stop(t, step_cost.slot(step_cost.VERIFY, cost.bucket, 3))
        rec.cost.end(cost)
        assert rec.inflight.cost is None and rec.inflight.last_end is not None
        assert begin(rec, worker, 5) is None  # every 2nd step
        rec.cost.step_starts(True)
        worker.speculative_num_steps = 1
        cost = begin(rec, worker, 1)
        rec.cost.end(cost)
        got = {(k.phase, k.bucket, k.num_steps): n for k, _, _, n, *_ in rec.cost.rows()}
        assert got == {("step", "4-7", 3): 1, ("verify", "4-7", 3): 1,
                       ("between_steps", "4-7", 3): 1, ("step", "1", 1): 1}
        assert all(s >= 0 for _, s, _, _, *_ in rec.cost.rows())
        points = {(o.attributes[signals.ATTR_PHASE], o.attributes[signals.ATTR_NUM_STEPS]):
                  o.value for o in rec.cost._observe(3)}
        assert points[("step", 1)] == 1 and points[("verify", 3)] == 1


def _v2_boundaries(rec, worker, end: bool = True):
    """A measured SGLang v2 step through the Recorder's hot-path methods: the draft ends
    where verify starts, verify where it returns, the draft-extend with the step."""
    cost = begin(rec, worker, 1)
    rec.cost.boundary(step_cost.DRAFT)
    rec.cost.boundary(step_cost.VERIFY)
    if end:
        rec.cost.end(cost)
    return cost


def _by_phase(observations) -> dict:
    return {o.attributes[signals.ATTR_PHASE]: o.value for o in observations}


PARTS = ("draft", "verify", "draft_extend")


def test_the_totals_take_whole_measured_steps_only(tmp_path):
    """A step still in flight at a collection (its draft and verify phases already
    measured) counts in no phase until it ends; the between-steps interval before it (the
    step before's) counts at once. Folded as they came, a collection mid-step gave the
    draft and verify means one step more than the step's (seen on CI: draft + verify +
    draft-extend 1.6 % below the step)."""
    worker = types.SimpleNamespace(speculative_num_steps=3)
    with process_state.own_recorder(str(tmp_path), step_cost_every=1) as rec:
        _v2_boundaries(rec, worker)
        rec.cost.step_starts(True)
        cost = _v2_boundaries(rec, worker, end=False)  # in flight at the collection
        got = {k.phase: n for k, _, _, n, *_ in rec.cost.rows()}
        assert got == {"step": 1, "draft": 1, "verify": 1, "draft_extend": 1,
                       "between_steps": 1}
        rec.cost.end(cost)
        costs = {k.phase: (sec, n) for k, sec, _, n, *_ in rec.cost.rows()}
        assert {p: n for p, (_, n) in costs.items()} == {
            "step": 2, "draft": 2, "verify": 2, "draft_extend": 2, "between_steps": 1}
        assert sum(costs[p][0] for p in PARTS) == pytest.approx(costs["step"][0], rel=1e-9)


def test_one_collection_reads_one_snapshot_of_the_step_costs(tmp_path):
    """The seconds, squares and samples instruments of one collection read one snapshot,
    whichever the reader calls first: a step that ends between their callbacks counts in
    none of the three, then in all three at the next collection. Folded per instrument,
    the samples ran a step ahead of the seconds (every mean too low by a step's share)."""
    worker = types.SimpleNamespace(speculative_num_steps=3)
    with process_state.own_recorder(str(tmp_path), step_cost_every=1) as rec:
        _v2_boundaries(rec, worker)
        for first, then in ((1, (3, 2)), (3, (1, 2)), (2, (3, 1))):
            reads = {first: _by_phase(rec.cost._observe(first))}
            before = {k.phase: n for k, _, _, n, *_ in rec.cost.rows()}["step"]
            _v2_boundaries(rec, worker)  # the decode loop goes on during the collection
            reads.update({f: _by_phase(rec.cost._observe(f)) for f in then})
            samples, seconds, squares = reads[3], reads[1], reads[2]
            assert set(samples.values()) == {before}, (first, samples)
            parts = sum(seconds[p] / samples[p] for p in PARTS)
            assert parts == pytest.approx(seconds["step"] / samples["step"], rel=1e-9)
            assert all(squares[p] <= seconds[p] ** 2 + 1e-18 for p in seconds)
        assert set(_by_phase(rec.cost._observe(3)).values()) == {4}  # the next collection


@pytest.mark.torch
def test_sglang_v2_phases_are_told_apart_by_verifys_boundaries(tmp_path):
    """SGLang v2's draft worker is not wrapped: the draft phase runs from the step's start
    until verify starts, draft-extend from verify's end to the step's end, so the three
    are the step; the step's K is read when verify starts (adaptive speculation sets it
    inside the step, before drafting); a sampled step still gets its draft, verify and
    draft-extend spans, as children of the step span and inside it."""
    import json
    import os
    from spectrace.file_layout import SPANS_FILE
    with process_state.own_recorder(str(tmp_path), step_cost_every=1, step_sample_ratio=1.0,
                         agreement_every=0, finite_every=0, request_sample_ratio=0) as rec:
        step = hb.V2Step(5, "spectrace")
        try:
            for _ in range(3):
                step()
            step.worker.speculative_num_steps = 2
            step()
        finally:
            step.close()
        assert rec.inflight.cost is None and rec.inflight.tail is None
        rows = {(r.key.phase, r.key.bucket, r.key.num_steps): r for r in rec.cost.rows()}
        costs = {key: (r.seconds, r.samples) for key, r in rows.items()}
        phases = ("step", "draft", "verify", "draft_extend", "target_forward")
        assert {key: n for key, (_, n) in costs.items()} == {
            **{(p, "4-7", 3): 3 for p in phases}, **{(p, "4-7", 2): 1 for p in phases},
            ("between_steps", "4-7", 3): 3}
        for k in (2, 3):
            parts = sum(costs[(p, "4-7", k)][0] for p in ("draft", "verify", "draft_extend"))
            assert parts == pytest.approx(costs[("step", "4-7", k)][0], rel=1e-9)
            # the target's forward: inside verify, with its tokens (5 requests x 4 rows)
            fwd = rows[("target_forward", "4-7", k)]
            assert 0 < fwd.seconds <= costs[("verify", "4-7", k)][0]
            assert (fwd.tokens, fwd.tokens_squares, fwd.requests) == (
                20 * fwd.samples, 400 * fwd.samples, 5 * fwd.samples)
            assert fwd.time_tokens == pytest.approx(20 * fwd.seconds)
        assert all(r.tokens == 0 for r in rows.values() if r.key.phase != "target_forward")
        for p in rec.tel.owned:
            p.force_flush()
        with open(os.path.join(rec.tel.directory, SPANS_FILE)) as fh:
            spans = [json.loads(line) for line in fh]
    steps = [s for s in spans if s["name"] == signals.SPAN_STEP]
    assert len(steps) == 4
    for parent in steps:
        kids = {s["name"]: s for s in spans if s["parent_id"] == parent["span_id"]}
        assert set(kids) == {signals.SPAN_DRAFT, signals.SPAN_VERIFY, signals.SPAN_DRAFT_EXTEND}
        draft, verify, extend = (kids[n] for n in (signals.SPAN_DRAFT, signals.SPAN_VERIFY,
                                                   signals.SPAN_DRAFT_EXTEND))
        assert parent["start_ns"] == draft["start_ns"] <= draft["end_ns"]
        assert draft["end_ns"] <= verify["start_ns"] <= verify["end_ns"]
        assert verify["end_ns"] <= extend["start_ns"] <= extend["end_ns"]
        assert extend["end_ns"] <= parent["end_ns"]


def _costs(bucket="1", k=3, step=10e-3, draft=3e-3, verify=4e-3, extend=2e-3, between=2e-3,
           n=100):
    out = {}
    for phase, t in (("step", step), ("draft", draft), ("verify", verify),
                     ("draft_extend", extend), ("between_steps", between)):
        out[(phase, bucket, k)] = (t * n, t * t * n * 1.0001, n)
    return out


def test_partial_acceptance_recommends_one_step_with_sglang_flags():
    adv = advisor.advise(_costs(), [1000, 0, 0], [1000] * 3, 1000, {2: 1000},
                         runtime="sglang", topk=1)
    b = adv.buckets[0]
    assert [o.tokens_per_step for o in b.options] == [1.0, 2.0, 2.0, 2.0]
    # T(K') = between + step - (K - K') * draft / (K - 1): SGLang's draft phase runs K - 1
    # draft forwards
    assert [round(o.step_seconds * 1e3, 6) for o in b.options] == [6.0, 9.0, 10.5, 12.0]
    assert adv.best == 1 and adv.gain == pytest.approx(12 / 9)
    assert adv.flags == ("--speculative-num-steps 1 --speculative-eagle-topk 1 "
                         "--speculative-num-draft-tokens 2")
    assert adv.speedup == pytest.approx(2 * 6 / 12) and adv.verdict == "small_gain"
    codes = [f.code for f in speculation.findings(adv)]
    assert codes == [signals.SPEC_SMALL_GAIN, signals.SPEC_FEWER_STEPS]
    text = "\n".join(speculation_lines(adv))
    assert "<- best" in text and "--speculative-num-steps 1" in text


def test_full_acceptance_keeps_the_configured_steps():
    """Without forwards of different sizes there is no fit: the speed-up is a bound (verify
    stands in for a plain step), which can say "slower" but never "pays"."""
    adv = advisor.advise(_costs(), [1000] * 3, [1000] * 3, 1000, {4: 1000}, runtime="sglang")
    assert [o.tokens_per_step for o in adv.buckets[0].options] == [1.0, 2.0, 3.0, 4.0]
    assert adv.best == 3 and adv.gain == 1.0
    assert adv.bound and adv.verdict == "uncertain" and adv.speedup > 1.1
    assert any("upper bound" in n for n in adv.notes)
    assert adv.to_json()["estimate"] == "bound"
    assert not [f for f in speculation.findings(adv) if f.code == signals.SPEC_FEWER_STEPS]


def forward_line(x):
    """The forward cost of the synthetic deployment below: 2 ms + 0.5 ms per token."""
    return 2e-3 + 0.5e-3 * x


def _fitted(sizes: dict, k=3, draft=0.6e-3, extend=0.3e-3, rest=0.5e-3, between=0.2e-3,
            per_size=40, noise=2e-5):
    """Phase sums as step cost keeps them, for steps at the batch sizes `sizes` (bucket ->
    sizes, `per_size` steps each) whose target forward costs `forward_line` of its B x (K+1)
    tokens, give or take `noise`; verify is the forward plus `rest`."""
    out: dict = {}

    def add(key, t, tokens=0, requests=0):
        row = out.setdefault(key, [0.0, 0.0, 0, 0, 0, 0.0, 0])
        row[0] += t
        row[1] += t * t
        row[2] += 1
        if tokens:
            row[3] += tokens
            row[4] += tokens * tokens
            row[5] += t * tokens
            row[6] += requests
    for bucket, batch_sizes in sizes.items():
        for size in batch_sizes:
            for i in range(per_size):
                x = size * (k + 1)
                fwd = forward_line(x) + (noise if i % 2 else -noise)
                add(("target_forward", bucket, k), fwd, x, size)
                add(("verify", bucket, k), fwd + rest)
                add(("draft", bucket, k), draft)
                add(("draft_extend", bucket, k), extend)
                add(("step", bucket, k), draft + fwd + rest + extend)
                add(("between_steps", bucket, k), between)
    return {key: tuple(v) for key, v in out.items()}


# positions 0, 1, 2 accepted by 60 %, 50 %, 30 % of the request-steps: L = 1.6, 2.1, 2.4
PARTIAL = ([600, 500, 300], [1000] * 3, 1000, {1: 400, 2: 100, 3: 200, 4: 300})


def test_a_plain_step_is_the_fitted_forward_at_the_batch_plus_what_a_step_also_does():
    """The forwards of batches 1 and 8-15 give the line back; a plain step at a bucket's mean
    batch B is the line at B tokens plus the step's work beyond its forward and draft, plus
    the time between steps; the speed-up L(K) x plain / step is an estimate with an
    interval. Here the forward grows with its tokens (compute-bound): speculation pays at
    batch 1 (best 2 draft steps) and loses at 8-15, so the advice is per batch size, with
    each runtime's own setting, and the verdict is judged on the interval."""
    costs = _fitted({"1": [1], "8-15": [8, 12, 15]})
    adv = advisor.advise(costs, *PARTIAL, runtime="sglang", topk=1)
    assert not adv.bound and adv.fit is not None
    assert adv.fit.slope == pytest.approx(0.5e-3, rel=1e-3)
    assert adv.fit.intercept == pytest.approx(2e-3, rel=1e-2)
    small, large = adv.buckets
    assert small.batch_size == 1 and large.batch_size == pytest.approx(35 / 3)
    assert small.plain_seconds == pytest.approx(0.2e-3 + forward_line(1) + 0.5e-3, rel=1e-3)
    assert large.plain_seconds == pytest.approx(0.2e-3 + forward_line(35 / 3) + 0.5e-3,
                                                rel=1e-3)
    step_small = 0.2e-3 + 0.6e-3 + forward_line(4) + 0.5e-3 + 0.3e-3
    assert small.speedup == pytest.approx(2.4 * small.plain_seconds / step_small, rel=1e-3)
    lo, hi = small.interval
    assert lo < small.speedup < hi and hi - lo < 0.2 and small.verdict == "pays"
    assert large.interval[1] < 1.0 and large.verdict == "slower"
    # fewer draft tokens also verify fewer tokens: the forward's saving is in T(K')
    t1 = step_small - 2 * (0.6e-3 / 2 + 0.5e-3 * 1)
    assert small.options[1].step_seconds == pytest.approx(t1, rel=1e-3)
    assert (small.best, large.best) == (2, 0) and adv.loses_from == "8-15"
    assert adv.batch_flags == (
        'SGLang 0.5.16+: --speculative-adaptive --speculative-adaptive-config FILE '
        '--speculative-num-steps 2 --speculative-eagle-topk 1, FILE holding '
        '{"1": {"candidate_steps": [2]}, "8": {"candidate_steps": [0]}}')
    vllm = advisor.advise(costs, *PARTIAL, runtime="vllm", topk=1)  # K draft forwards
    assert vllm.batch_flags == (
        "vLLM 0.26+: --speculative-config '{..., \"num_speculative_tokens\": 3, "
        "\"num_speculative_tokens_per_batch_size\": [[1, 7, 3], [8, 15, 0]]}'")
    # over the mix (three times as many large steps) speculation loses: its warning
    # names the per-batch-size setting and the advisor's K
    assert adv.verdict == "slower" and adv.speedup_upper < 1.0
    first, *_ = speculation.findings(adv)
    code, severity, message = first.code, first.severity, first.message
    assert code == signals.SPEC_SLOWER and severity == "warning"
    assert f"{adv.speedup_lower:.2f}x - {adv.speedup_upper:.2f}x" in message
    assert "the advisor's K: 0" in message and "speculation off from batch 8-15" in message
    assert "--speculative-adaptive-config" in message
    text = "\n".join(speculation_lines(adv))
    assert "target forward: 2.00 ms + 0.500 ms per token" in text
    assert "speculation loses from batch 8-15" in text
    doc = adv.to_json()
    assert doc["estimate"] == "fit" and doc["loses_from_batch_size"] == "8-15"
    assert [b["verdict"] for b in doc["buckets"]] == ["pays", "slower"]
    assert doc["forward_fit"]["seconds_per_token"] == pytest.approx(0.5e-3, rel=1e-3)


def test_one_batch_size_and_one_k_is_no_fit_and_says_so():
    """Every forward of the same size: nothing to fit, so the plain step is bounded by the
    verify phase (as before the fit), the estimate is labelled a bound in every output."""
    costs = _fitted({"1": [1]})
    adv = advisor.advise(costs, *PARTIAL, runtime="sglang", topk=1)
    assert adv.fit is None and adv.bound and adv.buckets[0].bound
    verify = 0.2e-3 + forward_line(4) + 0.5e-3
    assert adv.buckets[0].plain_seconds == pytest.approx(verify, rel=1e-3)
    assert any("no fit of the target's forward" in n and "varied too little" in n
               for n in adv.notes)
    assert "(upper bound)" in "\n".join(speculation_lines(adv))


def test_no_forward_measured_is_a_bound_that_says_why():
    """Several batch sizes but no `target_forward` (vLLM's V2 model runner times none): a
    bound, and the note names the missing forward, not tokens that did not vary."""
    costs = {key: v for key, v in _fitted({"1": [1], "4-7": [4]}).items()
             if key[0] != "target_forward"}
    adv = advisor.advise(costs, *PARTIAL, runtime="vllm", topk=1)
    assert adv.fit is None and adv.bound and all(b.bound for b in adv.buckets)
    [note] = [n for n in adv.notes if "no fit of the target's forward" in n]
    assert "no target forward was measured" in note and "varied too little" not in note


@pytest.mark.parametrize("interval,bound,verdict", [
    ((0.80, 0.97), False, "slower"), ((0.80, 0.97), True, "slower"),
    ((0.95, 1.05), False, "small_gain"), ((0.90, 1.30), False, "uncertain"),
    ((1.02, 1.30), False, "pays"), ((1.02, 1.30), True, "uncertain")])
def test_the_verdict_is_judged_on_the_interval(interval, bound, verdict):
    assert advisor.judge(interval, True, bound) == verdict
    assert advisor.judge(interval, False, bound) == "unknown"


def test_tokens_per_step_is_exact_under_adaptive_steps():
    """Request-steps that drafted fewer positions do not dilute the later positions'
    acceptance: position p is judged over the request-steps that drafted it."""
    # 100 request-steps at K=1, 100 at K=3; position 1 accepted by 50 of the 100 at K=3
    probs = advisor.acceptance_probabilities([150, 50, 0], [200, 100, 100], 200)
    assert probs == [0.75, 0.5, 0.0]
    assert advisor.tokens_per_step(probs, 2) == 2.25


def test_speculation_slower_needs_its_floor_and_says_so():
    slow = _costs(step=30e-3, draft=20e-3, verify=4e-3, between=1e-3)
    few = advisor.advise(_costs(step=30e-3, draft=20e-3, n=5), [10, 0, 0], [10] * 3, 10,
                         {2: 10}, runtime="sglang")
    assert few.verdict == "unknown" and speculation.findings(few) == []
    adv = advisor.advise(slow, [500, 0, 0], [1000] * 3, 1000, {1: 500, 2: 500},
                         runtime="vllm")
    assert adv.verdict == "slower" and adv.speedup_upper < 1.0
    first, *_ = speculation.findings(adv)
    code, severity, message = first.code, first.severity, first.message
    assert code == signals.SPEC_SLOWER and severity == "warning"
    assert message.startswith(
        "speculation costs more than it saves at batch size 1 and K=3, measured: estimated "
        "speed-up"), message  # what it costs, not "acceptance is lower" (issue 49)
    assert "1000 request-steps" in message
    assert adv.best == 0 and adv.flags == "no speculation (without --speculative-config)"
    assert first.message.endswith(
        f"Fix: serve without --speculative-config (predicted {adv.gain:.2f}x the current "
        "tokens per second)."), first.message
    assert advisor.runtime_flags("vllm", 2).startswith(
        "--speculative-config '{..., \"num_speculative_tokens\": 2}'")


def test_short_prefill_forwards_are_points_of_the_cost_curve(tmp_path):
    """Issue 49: a target forward outside the speculative steps (a prefill chunk) is timed
    as a point of the forward's cost curve, under the target forward's phase at K = 0 and
    its requests' bucket, when it is short (at most PLAIN_FORWARD_TOKENS new tokens after
    at most as many in context); not while a measured step is in flight, not when step
    cost is off. Its interval is added with the next measured step (whole steps only)."""
    cap = step_cost.PLAIN_FORWARD_TOKENS
    worker = types.SimpleNamespace(speculative_num_steps=3)
    with process_state.own_recorder(str(tmp_path), step_cost_every=1) as rec:
        costs = rec.cost
        timed = [costs.start_plain_forward(t, c, r, False)
                 for t, c, r in ((20, 0, 1), (cap, cap, 2), (9, 3, 3))]
        assert all(timed)
        for ctx in timed:
            costs.stop_plain_forward(ctx)
        assert costs.start_plain_forward(cap + 1, 0, 1, False) is None  # a long chunk
        assert costs.start_plain_forward(10, cap + 1, 1, False) is None  # a long context
        assert costs.start_plain_forward(0, 0, 1, False) is None
        cost = begin(rec, worker, 1)
        assert costs.start_plain_forward(10, 0, 1, False) is None  # inside a step
        costs.end(cost)
        rows = {(k.phase, k.bucket, k.num_steps): (n, tok, req)
                for k, _, _, n, tok, _, _, req in costs.rows()}
        assert rows[("target_forward", "1", 0)] == (1, 20, 1)
        assert rows[("target_forward", "2-3", 0)] == (2, cap + 9, 5)
        assert rows[("step", "1", 3)][0] == 1
    with process_state.own_recorder(str(tmp_path / "off"), step_cost_every=0) as rec:
        assert rec.cost.start_plain_forward(20, 0, 1, False) is None


def test_batch_one_gets_a_fit_from_the_prefill_forwards():
    """One batch size and one K (requests served one at a time): the verify forwards alone
    have one token count, so no fit and only an upper bound that cannot say "slower". The
    prefill forwards (K = 0) of other token counts give the line: an estimate with an
    interval, here slower: the verify forward of 4 tokens costs 5 ms, a plain one of 1
    token 2 ms on the line, so a plain step is 3 ms, not the bound's 6 (the issue's case:
    a bound of 1.09x, "gains little", where speculation is slower)."""
    costs = _costs(step=10e-3, draft=3e-3, verify=5e-3, extend=2e-3, between=1e-3, n=200)
    alone = advisor.advise(costs, [1000, 0, 0], [1000] * 3, 1000, {2: 1000}, runtime="sglang")
    assert alone.bound and alone.fit is None and alone.verdict == "small_gain"  # not slower
    assert alone.speedup == pytest.approx(2 * 6 / 11)

    def forwards(key, points):
        n = len(points)
        ys = [y for _, y in points]
        return {("target_forward", *key): (
            sum(ys), sum(y * y for y in ys), n, sum(x for x, _ in points),
            sum(x * x for x, _ in points), sum(x * y for x, y in points),
            n if key[1] else sum(1 for _ in points))}
    line = [(t, 1e-3 + 1e-3 * t) for t in (4,) * 200]  # verify: batch 1 x (K + 1)
    prefill = [(t, 1e-3 + 1e-3 * t) for t in (8, 16, 32, 64) * 10]
    costs.update(forwards(("1", 3), line))
    costs.update(forwards(("1", 0), prefill))
    adv = advisor.advise(costs, [1000, 0, 0], [1000] * 3, 1000, {2: 1000}, runtime="sglang")
    assert not adv.bound and adv.fit is not None
    assert adv.fit.slope == pytest.approx(1e-3) and adv.fit.intercept == pytest.approx(1e-3)
    [b] = adv.buckets
    assert b.num_steps == 3 and b.plain_seconds == pytest.approx(3e-3)
    assert adv.speedup == pytest.approx(2 * 3 / 11)
    assert adv.verdict == "slower" and adv.speedup_upper < 1.0, adv


def test_no_draft_accepted_is_slower_from_the_counts_whatever_the_timing():
    """Issue 49, the demo's broken run: no draft token accepted in the floor's request-steps
    means one token a step for a target forward and the drafting, so the advisor says
    slower from the counts, with steps under the timing's own floor (5 measured) and an
    estimate capped at 1.00x; one request-step fewer than the floor, and it waits."""
    few_steps = _costs(step=10e-3, draft=3e-3, verify=4e-3, n=5)
    adv = advisor.advise(few_steps, [0, 0, 0], [150] * 3, 150, {1: 150}, runtime="sglang")
    assert adv.counted and adv.judged and adv.verdict == "slower"
    assert adv.speedup_upper <= 1.0 and adv.best == 0
    [slower] = [f for f in speculation.findings(adv) if f.code == signals.SPEC_SLOWER]
    assert ("at batch size 1 and K=3, known from the counts: no draft token accepted in 150 "
            "request-steps, so each step makes one token") in slower.message, slower.message
    assert slower.message.endswith(
        "Fix: serve without --speculative-algorithm until the draft accepts tokens: with "
        "none accepted, plain decoding is faster whatever the step costs."), slower.message
    assert slower.details["known_from_counts"] is True
    assert adv.to_json()["known_from_counts"] is True
    assert "(known from the counts: no draft token accepted)" in "\n".join(
        speculation_lines(adv))
    under = advisor.advise(few_steps, [0, 0, 0], [99] * 3, 99, {1: 99}, runtime="sglang")
    assert not under.counted and under.verdict == "unknown"
    assert speculation.findings(under) == []
    one = advisor.advise(few_steps, [1, 0, 0], [150] * 3, 150, {1: 149, 2: 1},
                         runtime="sglang")  # one accepted: the timing's floor again
    assert not one.counted and one.verdict == "unknown"


def test_trees_get_a_speedup_but_no_recommendation():
    adv = advisor.advise(_costs(), [1000, 500, 0], [1000] * 3, 1000, {2: 500, 3: 500},
                         runtime="sglang", topk=4)
    assert adv.speedup is not None and adv.best is None and adv.flags is None
    assert any("tree" in n for n in adv.notes)
    assert any("above 3 draft steps cannot be predicted" in n for n in adv.notes)


def _sums(points):
    """cost_model.ForwardSums of (tokens, seconds) forwards."""
    from spectrace.report.cost_model import ForwardSums
    return ForwardSums(len(points), sum(y for _, y in points), sum(y * y for _, y in points),
                       sum(x for x, _ in points), sum(x * x for x, _ in points),
                       sum(x * y for x, y in points), len(points))


def test_the_forward_fit_keeps_both_parts_at_least_zero():
    """Least squares from the sums; noise that tips the slope below 0 gives the mean, an
    intercept below 0 the line through the origin; tokens that do not vary give no fit."""
    from spectrace.report.cost_model import fit
    line = fit([_sums([(x, 2e-3 + 1e-4 * x + (1e-5 if i % 2 else -1e-5))
                       for i, x in enumerate([4, 8, 16] * 20)])])
    assert (line.intercept, line.slope) == (pytest.approx(2e-3, rel=1e-2),
                                            pytest.approx(1e-4, rel=1e-2))
    mean, se = line.at(1)
    assert mean == pytest.approx(2.1e-3, rel=1e-2) and 0 < se < 1e-5
    assert line.at(100)[1] > se  # further from the data, wider
    falling = fit([_sums([(x, 5e-3 - 1e-5 * x) for x in [4, 8, 16] * 20])])
    assert falling.slope == 0 and falling.intercept == pytest.approx(5e-3 - 1e-5 * 28 / 3)
    steep = fit([_sums([(x, -1e-3 + 1e-3 * x) for x in [4, 8, 16] * 20])])
    assert steep.origin and steep.intercept == 0 and steep.slope > 0
    assert steep.at(0) == (0.0, 0.0)
    assert fit([_sums([(4, 5e-3)] * 100)]) is None       # one batch size, one K
    assert fit([_sums([(4, 5e-3), (8, 6e-3)] * 10)]) is None  # under MIN_FORWARDS


def test_a_few_steps_at_a_passing_batch_size_do_not_hold_the_verdict_back():
    """The verdict waits for buckets past the floor (30 measured steps) to hold 90 % of the
    steps: 5 steps at batch 2-3 beside 120 at 1 and 8-15 are judged; 40 are not."""
    few = _fitted({"1": [1], "2-3": [2], "8-15": [8, 12, 15]}, per_size=40)
    few = {k: v for k, v in few.items()}
    for key, v in list(few.items()):
        if key[1] == "2-3":  # 5 of its 40 steps
            few[key] = tuple(x * 5 / 40 for x in v)
    adv = advisor.advise(few, *PARTIAL, runtime="sglang", topk=1)
    assert [b.judged for b in adv.buckets] == [True, False, True]
    assert adv.judged and adv.verdict != "unknown"
    many = _fitted({"1": [1], "2-3": [2], "8-15": [8]}, per_size=40)
    many = {k: (tuple(x * 20 / 40 for x in v) if k[1] == "2-3" else v)
            for k, v in many.items()}
    adv = advisor.advise(many, *PARTIAL, runtime="sglang", topk=1)
    assert not adv.judged and adv.verdict == "unknown" and speculation.findings(adv) == []


@pytest.mark.torch
def test_steps_adaptive_speculation_runs_without_drafts_verify_no_request_step(tmp_path):
    """SGLang's adaptive speculation with `candidate_steps` [0] for a batch size (the
    advice's per-batch-size setting) runs those steps through the worker with K = 0: no
    draft token, so no request-step is counted (they would read as rejected drafts and
    pull the mean acceptance length to 1); their cost is filed under K = 0."""
    with process_state.own_recorder(str(tmp_path), step_cost_every=1) as rec:
        step = hb.V2Step(4, "spectrace")
        try:
            step()
            step.worker.speculative_num_steps = 0
            step()
            step()
        finally:
            step.close()
        assert rec.acceptance.folded().drafts == 4  # the first step's 4 requests only
        ks = {(r.key.phase, r.key.num_steps) for r in rec.cost.rows()}
        assert ("step", 0) in ks and ("step", 3) in ks
