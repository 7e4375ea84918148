"""PromQL for spectrace's derived figures, shared by dashboards, alert rules and docs.

Names are the ones that really arrive in Prometheus (`signals.*.prometheus_name`).
Resource attributes (tp_rank, service name, ...) arrive only on `target_info`, so series
are told apart by the scrape labels `job` and `instance` (one endpoint per rank; for vLLM
one for the EngineCore and one per worker).

Counting once: the series of a `counted_once` metric (request-steps, accepted tokens,
draft passes, agreement) carry `counted="once"` on the one rank per group that counts
them and `counted="copy"` on the tensor-parallel ranks that see the same request-steps.
Every selector of such a metric matches `counted!="copy"` (series of an older spectrace,
without the label, count as before) unless it asks for `copies=True`, the per-rank view.
"""
from __future__ import annotations

from .. import signals as S
from ..families.breakdowns import Breakdown

# The labels every scraped series carries (added by Prometheus, or by the Collector).
SCRAPE_LABELS = ("job", "instance")
# Matchers the dashboards apply to every series (filled by template variables).
DASHBOARD_FILTER = 'job=~"$job", instance=~"$instance"'


def matchers(*groups: str) -> str:
    """Label matchers joined (`job=~"$job"`, `namespace="prod"` -> one list), empty ones
    left out."""
    return ", ".join(g for g in groups if g)


def name(spec: S.MetricSpec) -> str:
    return spec.prometheus_name


ONCE = f'{S.ATTR_COUNTED}!="{S.COUNTED_COPY}"'


def sel(spec: S.MetricSpec, flt: str = "", extra: str = "", copies: bool = False) -> str:
    """A series selector: `name{flt, extra}` (braces only when there are matchers), with
    `ONCE` for a `counted_once` metric unless `copies` (the per-rank view)."""
    listed = matchers(flt, extra, ONCE if spec.counted_once and not copies else "")
    return f"{name(spec)}{{{listed}}}" if listed else name(spec)


def _sum(by: tuple[str, ...], inner: str) -> str:
    return f"sum by ({', '.join(by)}) ({inner})" if by else f"sum({inner})"


def srate(spec, window: str, by=(), flt="", extra="", fn="rate", copies=False) -> str:
    """`sum by (...) (rate(metric{...}[window]))`."""
    return _sum(tuple(by), f"{fn}({sel(spec, flt, extra, copies)}[{window}])")


def stotal(spec, by=(), flt="", extra="", copies=False) -> str:
    """`sum by (...) (metric{...})`: totals since process start. Used for counters whose
    series appear only at their first event (findings), where increase() would miss it."""
    return _sum(tuple(by), sel(spec, flt, extra, copies))


def acceptance_rate(window: str, by=(), flt="", copies=False) -> str:
    """Accepted draft tokens / proposed draft tokens (0..1)."""
    return (f"{srate(S.SPEC_ACCEPTED_TOKENS, window, by, flt, copies=copies)}"
            f" / {srate(S.SPEC_DRAFT_TOKENS, window, by, flt, copies=copies)}")


def mean_acceptance_length(window: str, by=(), flt="", copies=False) -> str:
    """Tokens emitted per verify step, bonus token included: 1.0 means no gain."""
    return (f"1 + {srate(S.SPEC_ACCEPTED_TOKENS, window, by, flt, copies=copies)}"
            f" / {srate(S.SPEC_DRAFTS, window, by, flt, copies=copies)}")


def _per_label_over_drafts(num: S.MetricSpec, den: S.MetricSpec, label: str, window: str,
                           by=(), flt="", extra="", fn="rate", copies=False) -> str:
    return (f"{srate(num, window, tuple(by) + (label,), flt, extra, fn, copies)}"
            f" / ignoring({label}) group_left"
            f" {srate(den, window, by, flt, fn=fn, copies=copies)}")


def per_position_acceptance(window: str, by=(), flt="", extra="", copies=False) -> str:
    """Share of request-steps whose draft token at `position` was accepted."""
    return _per_label_over_drafts(S.SPEC_ACCEPTED_PER_POSITION, S.SPEC_DRAFTS,
                                  S.ATTR_POSITION, window, by, flt, extra, copies=copies)


def agreement_per_position(window: str, by=(), flt="", copies=False) -> str:
    """Share of compared request-steps whose draft token at `position` equals the target's
    own prediction there (sampled every SPECTRACE_AGREEMENT_EVERY steps)."""
    return _per_label_over_drafts(S.SPEC_AGREEMENT_PER_POSITION, S.SPEC_AGREEMENT_DRAFTS,
                                  S.ATTR_POSITION, window, by, flt, copies=copies)


def accept_length_share(window: str, by=(), flt="") -> str:
    """Share of request-steps by accept length (1 = only the bonus token)."""
    return _per_label_over_drafts(S.SPEC_ACCEPT_LENGTH, S.SPEC_DRAFTS, S.ATTR_LENGTH,
                                  window, by, flt, fn="increase")


def accept_length_share_by_sampling(window: str, by=(), flt="") -> str:
    """Share of a sampling bucket's request-steps (finished requests) by accept length."""
    by = tuple(by) + (S.ATTR_SAMPLING,)
    spec = S.SPEC_ACCEPT_LENGTH_BY_SAMPLING
    return (f"{srate(spec, window, by + (S.ATTR_LENGTH,), flt, fn='increase')}"
            f" / ignoring({S.ATTR_LENGTH}) group_left"
            f" {srate(spec, window, by, flt, fn='increase')}")


def requests_by_mean_accept_length(window: str, by=(), flt="") -> str:
    """Finished requests in each bucket of their own mean accept length."""
    return srate(S.SPEC_REQUESTS, window, tuple(by) + (S.ATTR_REQUEST_LENGTH,), flt,
                 fn="increase")


def requests_by_acceptance_rate(window: str, by=(), flt="") -> str:
    """Finished requests whose own acceptance rate is at most each bucket's edge (`le`:
    the histogram's cumulative buckets)."""
    spec = S.SPEC_REQUEST_ACCEPTANCE
    selector = sel(spec, flt).replace(name(spec), name(spec) + "_bucket", 1)
    return _sum(tuple(by) + ("le",), f"increase({selector}[{window}])")


def target_tokens_per_second(window: str, by=(), flt="", copies=False) -> str:
    """Tokens the target emits per second through speculative steps (accepted + bonus)."""
    return (f"{srate(S.SPEC_ACCEPTED_TOKENS, window, by, flt, copies=copies)}"
            f" + {srate(S.SPEC_DRAFTS, window, by, flt, copies=copies)}")


def dropped_weights(by=(), flt="") -> str:
    """Checkpoint keys the runtime dropped plus draft parameters nothing loaded (each
    process loads its own copy of the draft: a figure per process)."""
    return f"{stotal(S.EAGLE3_UNUSED_KEYS, by, flt)} + {stotal(S.EAGLE3_UNLOADED_PARAMS, by, flt)}"


def mean_acceptance_length_by(b: Breakdown, window: str, by=(), flt="", copies=False) -> str:
    """1 + accepted / request-steps in each bucket of the breakdown `b`."""
    by = tuple(by) + (b.attribute,)
    return (f"1 + {srate(b.accepted_tokens, window, by, flt, copies=copies)}"
            f" / {srate(b.accept_length, window, by, flt, copies=copies)}")



def phase_seconds(window: str, by=(), flt="", extra="") -> str:
    """Mean measured time of each step phase (s), by phase and batch-size bucket."""
    by = tuple(by) + (S.ATTR_PHASE, S.ATTR_BATCH_BUCKET)
    return (f"{srate(S.SPEC_PHASE_TIME, window, by, flt, extra)}"
            f" / {srate(S.SPEC_PHASE_SAMPLES, window, by, flt, extra)}")


def _on(by=()) -> str:
    """`on(...)` over `by`: `on()` (one series each side) when `by` is empty."""
    return f"on({', '.join(by)})"


def _labelled(spec, window: str, by=(), flt="", extra="", keep=(), fn="rate") -> str:
    """`srate` by `keep`; with `by` (`target_info` labels: deployment, draft) each process's
    rates labelled from its target_info (`with_resource`), then added up by `by` and
    `keep`."""
    if not by:
        return srate(spec, window, keep, flt, extra, fn)
    inner = srate(spec, window, SCRAPE_LABELS + tuple(keep), flt, extra, fn)
    return _sum(tuple(by) + tuple(keep), with_resource(inner, by, flt))


def _phase_mean(phase: str, window: str, flt: str, keep=(), by=()) -> str:
    """A phase's mean seconds over `window`, only where it was measured in the window (a
    series that did not grow there is left out, not 0 / 0, so `or` can stand in for it);
    by `keep`, and with `by` for each deployment and draft (`_labelled`)."""
    m = f'{S.ATTR_PHASE}="{phase}"'
    return (f"({_labelled(S.SPEC_PHASE_TIME, window, by, flt, m, keep)}"
            f" / ({_labelled(S.SPEC_PHASE_SAMPLES, window, by, flt, m, keep)} > 0))")


FORWARD = f'{S.ATTR_PHASE}="{S.PHASE_FORWARD}"'
# the forwards inside verify only: a bucket's own, which the fitted line is scaled to (the
# plain forwards outside the steps, K = 0, are points of the line: `step_cost.PLAIN_FORWARD_TOKENS`)
IN_STEPS = f'{S.ATTR_NUM_STEPS}!="0"'
VERIFY_FORWARD = f'{FORWARD}, {IN_STEPS}'
MIN_TOKEN_SPREAD = 1  # cost_model.MIN_TOKEN_SPREAD: the tokens' sd a fit needs


def forward_fit(window: str, flt="", by=()) -> tuple[str, str, str]:
    """(slope, intercept, ok): the least-squares line of the target's forward seconds
    against its tokens over every measured forward (`cost_model.fit`), as single-series
    vectors (with `by`: one series for each deployment and draft, each fitted over its own
    processes' forwards); `ok` is empty unless the tokens' standard deviation is at least
    MIN_TOKEN_SPREAD (no fit: one batch size and one K). Neither part below 0: a slope
    below 0 is 0, and where the intercept would be below 0 the line goes through the
    origin (slope: sum xy / sum xx), as `cost_model.fit`."""
    def r(spec, extra=FORWARD):
        return _labelled(spec, window, by, flt, extra)
    n, x, y = r(S.SPEC_PHASE_SAMPLES), r(S.SPEC_PHASE_TOKENS), r(S.SPEC_PHASE_TIME)
    xx, xy = r(S.SPEC_PHASE_TOKENS_SQUARES), r(S.SPEC_PHASE_TIME_TOKENS)
    on = _on(by)
    free = f"clamp_min(({n} * {xy} - {x} * {y}) / ({n} * {xx} - {x} * {x}), 0)"
    raw = f"(({y} - {free} * {x}) / {n})"
    slope = f"(({free} and {on} ({raw} >= 0)) or {on} ({xy} / {xx}))"
    intercept = f"clamp_min({raw}, 0)"
    ok = f"({xx} / {n} - ({x} / {n}) ^ 2 >= {MIN_TOKEN_SPREAD ** 2})"
    return slope, intercept, ok


def _times(vector: str, per: str, by=()) -> str:
    """`vector` (labelled by batch-size bucket) times `per`, a single-series vector
    (`scalar()`), or with `by` one series for each deployment and draft (matched on
    `by`)."""
    if not by:
        return f"scalar({per}) * {vector}"
    return f"{vector} * {_on(by)} group_left() {per}"


def plain_step_seconds(window: str, flt="", by=()) -> str:
    """A plain decode step's estimated seconds by batch-size bucket (docs/advisor.md): the
    fitted forward at the bucket's mean batch (scaled to the bucket's own forwards), plus
    the step's work beyond its forward and draft, plus the time between steps; without a
    fit, the bound (verify + between). With `by`: for each deployment and draft, from its
    own processes' step costs and fit."""
    keep = (S.ATTR_BATCH_BUCKET,)
    step = _phase_mean(S.PHASE_STEP, window, flt, keep, by)
    zero = f"({step} * 0)"

    def mean(phase):
        return f"({_phase_mean(phase, window, flt, keep, by)} or {zero})"
    slope, intercept, ok = forward_fit(window, flt, by)

    def per_forward(spec):
        return (f"({_labelled(spec, window, by, flt, VERIFY_FORWARD, keep)}"
                f" / ({_labelled(S.SPEC_PHASE_SAMPLES, window, by, flt, VERIFY_FORWARD, keep)}"
                f" > 0))")
    forward = per_forward(S.SPEC_PHASE_TIME)

    def line(x):
        if not by:
            return f"(scalar({intercept}) + {_times(x, slope)})"
        return f"({_times(x, slope, by)} + {_on(by)} group_left() {intercept})"
    # the line at the batch, scaled to the bucket's own forwards (`advisor._plain`)
    plain_forward = (f"({forward} * {line(per_forward(S.SPEC_PHASE_REQUESTS))}"
                     f" / {line(per_forward(S.SPEC_PHASE_TOKENS))})")
    rest = (f"clamp_min({step} - {forward} - {mean(S.PHASE_DRAFT)}"
            f" - {mean(S.PHASE_DRAFT_EXTEND)}, 0)")
    fitted = f"({mean(S.PHASE_BETWEEN)} + {plain_forward} + {rest})"
    bound = (f"({mean(S.PHASE_BETWEEN)} +"
             f" {_phase_mean(S.PHASE_VERIFY, window, flt, keep, by)})")
    return f"(({fitted} and {_on(by)} {ok}) or {bound})"


def speedup_by_batch(window: str, flt="", by=()) -> str:
    """Estimated speed-up against no speculation by batch-size bucket: mean accept length
    x plain step / (step + between steps) (`spectrace.report.advisor`; a bound without a
    fit). With `by` (`target_info` labels): for each deployment and draft, its processes'
    counts and step costs added up (tensor-parallel copies left out of the counts)."""
    keep = (S.ATTR_BATCH_BUCKET,)
    step = _phase_mean(S.PHASE_STEP, window, flt, keep, by)
    between = f"({_phase_mean(S.PHASE_BETWEEN, window, flt, keep, by)} or ({step} * 0))"
    if not by:
        length = mean_acceptance_length(window, (), flt)
    else:
        length = f"({mean_acceptance_length_side_by_side(window, by, flt)})"
    return (f"{_times(plain_step_seconds(window, flt, by), length, by)}"
            f" / ({step} + {between})")


def estimated_speedup(window: str, flt="", by=()) -> str:
    """Estimated speed-up against no speculation over every bucket, each weighted by its
    measured steps (`speedup_by_batch`); with `by`, one for each deployment and draft."""
    samples = _labelled(S.SPEC_PHASE_SAMPLES, window, by, flt,
                        f'{S.ATTR_PHASE}="{S.PHASE_STEP}"', (S.ATTR_BATCH_BUCKET,))
    return (f"{_sum(tuple(by), f'{speedup_by_batch(window, flt, by)} * {samples}')}"
            f" / {_sum(tuple(by), samples)}")


def speedup_floor(window: str, flt="", by=()) -> str:
    """Empty unless the window holds the advisor's floor: MIN_STEPS measured steps and
    MIN_DRAFTS request-steps (`spectrace.report.advisor`); with `by`, for each deployment
    and draft (its processes' added up)."""
    from ..rules import speculation as floor
    steps = _labelled(S.SPEC_PHASE_SAMPLES, window, by, flt,
                      f'{S.ATTR_PHASE}="{S.PHASE_STEP}"', fn="increase")
    drafts = _labelled(S.SPEC_DRAFTS, window, by, flt, fn="increase")
    return (f"(({steps} >= {floor.MIN_STEPS}) and {_on(by)}"
            f" ({drafts} >= {floor.MIN_DRAFTS}))")


def bucket_request_steps(b: Breakdown, window: str, by=(), flt="", copies=False) -> str:
    """Request-steps in each bucket of the breakdown `b` over `window` (increase)."""
    return srate(b.accept_length, window, tuple(by) + (b.attribute,), flt, fn="increase",
                 copies=copies)


def accepted_per_request_step_by(b: Breakdown, window: str, by=(), flt="", copies=False) -> str:
    """Accepted draft tokens per request-step (the mean accept length less the bonus
    token) in each bucket of the breakdown `b` over `window`."""
    tokens = srate(b.accepted_tokens, window, tuple(by) + (b.attribute,), flt, fn="increase",
                   copies=copies)
    return f"{tokens} / {bucket_request_steps(b, window, by, flt, copies)}"


def bucket_order(b: Breakdown) -> str:
    """One constant series per bucket of the breakdown `b`, valued its place in the
    breakdown's order (0 = the first); `unknown` has none. PromQL orders values, not label
    values: this is the order of the buckets."""
    return " or ".join(f'label_replace(vector({i}), "{b.attribute}", "{x}", "", "")'
                       for i, x in enumerate(b.buckets))


def gap_acceptance(b: Breakdown, window: str, by=(), flt="") -> str:
    """The rule of an ordered breakdown `b` (`rules.buckets.gap`, `b.rule`) over
    `window`: of the buckets with at least `floor` request-steps, the first and the last
    in order, at least `min_apart` apart; the last one's accepted tokens per request-step
    divided by the first one's, kept only where they are at least `drop` fewer (compare it
    with `<= ratio`). One series per `by` group, labelled with the last bucket."""
    rule = b.rule
    group = ", ".join(by)
    attr = b.attribute
    gain = f"({accepted_per_request_step_by(b, window, by, flt)})"
    if not rule.ordered:
        return _best_worst_gap(b, gain, window, by, flt)
    # each bucket with at least `floor` request-steps, valued its place in order
    place = (f"(({bucket_request_steps(b, window, by, flt)}) >= {rule.floor}) * 0"
             f" + on({attr}) group_left() ({bucket_order(b)})")
    last = f"({gain} and topk by ({group}) (1, {place}))"
    first = f"max by ({group}) ({gain} and bottomk by ({group}) (1, {place}))"
    return (f"{last} / on({group}) group_left() {first}"
            f" and on({group}) ({first} - max by ({group}) {last} >= {rule.drop})"
            f" and on({group}) (max by ({group}) ({place}) - min by ({group}) ({place})"
            f" >= {rule.min_apart})")


def _best_worst_gap(b: Breakdown, gain: str, window: str, by, flt) -> str:
    """The rule of an unordered breakdown (a request label): of the buckets with at least
    `floor` request-steps, the worst one's accepted tokens per request-step divided by the
    best one's, kept only where they are at least `drop` fewer. One series per `by` group,
    labelled with the worst bucket."""
    rule, group = b.rule, ", ".join(by)
    ok = f"({gain} and ({bucket_request_steps(b, window, by, flt)}) >= {rule.floor})"
    worst = f"bottomk by ({group}) (1, {ok})"
    best = f"max by ({group}) ({ok})"
    return (f"{worst} / on({group}) group_left() {best}"
            f" and on({group}) ({best} - max by ({group}) ({worst}) >= {rule.drop})")


def window_gain(window: str, by=(), flt="", offset: str = "", labelled: bool = False
                ) -> tuple[str, str, str]:
    """(accepted draft tokens per request-step, request-steps, finished requests) over
    `window`, ending `offset` ago; `labelled`: `by` are `target_info` labels, each
    process's counts labelled from it before they are added up (`with_resource`)."""
    off = f" offset {offset}" if offset else ""

    def total(spec) -> str:
        gained = f"increase({sel(spec, flt)}[{window}]{off})"
        if labelled:
            gained = with_resource(_sum(SCRAPE_LABELS, gained), by, flt)
        return _sum(tuple(by), gained)
    drafts, tokens, requests = (total(spec) for spec in (S.SPEC_DRAFTS, S.SPEC_ACCEPTED_TOKENS,
                                                         S.SPEC_REQUESTS))
    return f"({tokens} / {drafts})", drafts, requests


def drift_ratio(recent: str, earlier: str, by=(), flt="", labelled: bool = False) -> str:
    """Accepted tokens per request-step over the last `recent` divided by those over the
    `earlier` before it, where both windows hold at least the drift rule's floor of
    request-steps and finished requests (`rules.drift.FLOOR`, `MIN_REQUESTS`); the
    dashboard's drift panels (per process; `labelled`: by deployment and draft, each
    process's counts added up before the ratio)."""
    from ..rules import drift
    group = ", ".join(by)
    now, now_drafts, now_requests = window_gain(recent, by, flt, labelled=labelled)
    before, before_drafts, before_requests = window_gain(earlier, by, flt, offset=recent,
                                                         labelled=labelled)
    return (f"{now} / {before}"
            f" and on({group}) ({now_drafts} >= {drift.FLOOR})"
            f" and on({group}) ({before_drafts} >= {drift.FLOOR})"
            f" and on({group}) ({now_requests} >= {drift.MIN_REQUESTS})"
            f" and on({group}) ({before_requests} >= {drift.MIN_REQUESTS})")


def acceptance_drift(recent: str, earlier: str, by=(), flt="") -> str:
    """The drift rule of `spectrace report` (`rules.drift`, without its explanation by
    breakdown): `drift_ratio`, kept only where the recent window's accepted tokens per
    request-step are at least the rule's drop fewer (compare it with `<= ratio`)."""
    from ..rules import drift
    group = ", ".join(by)
    now = window_gain(recent, by, flt)[0]
    before = window_gain(earlier, by, flt, offset=recent)[0]
    return (f"{drift_ratio(recent, earlier, by, flt)}"
            f" and on({group}) ({before} - {now} >= {drift.DROP})")




# -- A/B: deployments and drafts side by side (resource labels joined from target_info) ----
def resource_label(attr: str) -> str:
    """The label a resource attribute arrives under on `target_info` (dots -> `_`)."""
    return attr.replace(".", "_")


DEPLOYMENT = resource_label(S.RES_SERVICE_NAME)  # OTEL_SERVICE_NAME, one per deployment
DRAFT = resource_label(S.RES_DRAFT_MODEL)        # the draft checkpoint path
DRAFT_HASH = resource_label(S.RES_DRAFT_HASH)    # its content hash (same path, other weights)
SIDE_BY_SIDE = (DEPLOYMENT, DRAFT, DRAFT_HASH)


def with_resource(inner: str, labels=SIDE_BY_SIDE, flt="") -> str:
    """`inner` (a vector by job and instance) with `labels` of its process's `target_info`
    joined in (target_info is 1: the values stay)."""
    info = f"target_info{{{flt}}}" if flt else "target_info"
    return (f"({inner} * on ({', '.join(SCRAPE_LABELS)}) group_left ({', '.join(labels)})"
            f" {info})")


def _side_by_side(spec: S.MetricSpec, window: str, labels, flt, extra_by=()) -> str:
    """rate(spec) summed per process, labelled from target_info, summed by `labels`."""
    return _labelled(spec, window, labels, flt, keep=extra_by)


def mean_acceptance_length_side_by_side(window: str, labels=SIDE_BY_SIDE, flt="") -> str:
    """1 + accepted / request-steps for each (deployment, draft, draft hash): each
    process's counts labelled from its `target_info`, then added up."""
    return (f"1 + {_side_by_side(S.SPEC_ACCEPTED_TOKENS, window, labels, flt)}"
            f" / {_side_by_side(S.SPEC_DRAFTS, window, labels, flt)}")


def per_position_acceptance_side_by_side(window: str, labels=SIDE_BY_SIDE, flt="") -> str:
    """Per-position acceptance for each (deployment, draft, draft hash)."""
    pos = (S.ATTR_POSITION,)
    return (f"{_side_by_side(S.SPEC_ACCEPTED_PER_POSITION, window, labels, flt, pos)}"
            f" / ignoring({S.ATTR_POSITION}) group_left"
            f" {_side_by_side(S.SPEC_DRAFTS, window, labels, flt)}")


# -- a fleet: the worst instances, and what each deployment raised ----------------------------
FLEET = (DEPLOYMENT, DRAFT)  # a fleet's rows: one per deployment and draft


def against_reference(window: str, by=FLEET, flt="") -> str:
    """The mean accept length over `window` divided by the operator's reference
    (SPECTRACE_EXPECTED_ACCEPT_LENGTH, the gauge `SPEC_REFERENCE_ACCEPT_LENGTH`) for each
    deployment and draft: its processes' counts added up (tensor-parallel copies left
    out), over the highest reference among them."""
    per_process = (f"max by ({', '.join(SCRAPE_LABELS)})"
                   f" ({sel(S.SPEC_REFERENCE_ACCEPT_LENGTH, flt)})")
    expected = f"max by ({', '.join(by)}) ({with_resource(per_process, by, flt)})"
    return f"({mean_acceptance_length_side_by_side(window, by, flt)}) / {_on(by)} {expected}"


def reference_ratio(window: str, by=FLEET, flt="") -> str:
    """`against_reference`, only where the window holds the reference rule's floor of
    request-steps (`rules.reference.FLOOR`): the rule's finding is raised at or below
    1 - `rules.reference.MARGIN` (and `SIGMAS` standard errors below)."""
    from ..rules import reference
    drafts = _labelled(S.SPEC_DRAFTS, window, by, flt, fn="increase")
    return (f"{against_reference(window, by, flt)}"
            f" and {_on(by)} ({drafts} >= {reference.FLOOR})")


def worst_instances(window: str, n: int = 10, flt="") -> str:
    """The `n` processes with the lowest mean acceptance length over `window`, each with its
    deployment and draft (from `target_info`): where a fleet's hundreds of lines hide one
    bad replica. Tensor-parallel copies are left out (they repeat their rank 0)."""
    inner = mean_acceptance_length(window, SCRAPE_LABELS, flt)
    return f"bottomk({n}, {with_resource(inner, (DEPLOYMENT, DRAFT), flt)})"


def findings_side_by_side(labels=(DEPLOYMENT, DRAFT), flt="") -> str:
    """Findings raised since process start, by deployment, draft, code and severity: each
    process's counts labelled from its `target_info`, then added up (every process raises
    its own)."""
    by = (S.ATTR_CODE, S.ATTR_SEVERITY)
    inner = stotal(S.FINDINGS, SCRAPE_LABELS + by, flt)
    return _sum(tuple(labels) + by, with_resource(inner, labels, flt))
