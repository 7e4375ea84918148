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
from ..families.breakdowns import CONTEXT, Breakdown

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


def mean_acceptance_length_by_context(window: str, by=(), flt="", copies=False) -> str:
    """1 + accepted / request-steps in each context-length bucket (`context`)."""
    return mean_acceptance_length_by(CONTEXT, window, by, flt, copies)


def phase_seconds(window: str, by=(), flt="", extra="") -> str:
    """Mean measured time of each step phase (s), by phase and batch-size bucket."""
    by = tuple(by) + (S.ATTR_PHASE, S.ATTR_BATCH_BUCKET)
    return (f"{srate(S.SPEC_PHASE_TIME, window, by, flt, extra)}"
            f" / {srate(S.SPEC_PHASE_SAMPLES, window, by, flt, extra)}")


def _phase_mean(phase: str, window: str, flt: str) -> str:
    m = f'{S.ATTR_PHASE}="{phase}"'
    return (f"({srate(S.SPEC_PHASE_TIME, window, (), flt, m)}"
            f" / {srate(S.SPEC_PHASE_SAMPLES, window, (), flt, m)})")


def estimated_speedup(window: str, flt="") -> str:
    """Estimated speed-up against no speculation (docs/advisor.md): mean accept length x
    (verify + between steps) / (step + between steps), over every bucket; an upper bound
    (a plain decode step costs at most a verify step)."""
    between = f"({_phase_mean(S.PHASE_BETWEEN, window, flt)} or vector(0))"
    return (f"({mean_acceptance_length(window, (), flt)}) * "
            f"({_phase_mean(S.PHASE_VERIFY, window, flt)} + {between}) / "
            f"({_phase_mean(S.PHASE_STEP, window, flt)} + {between})")


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
    # each bucket with at least `floor` request-steps, valued its place in order
    place = (f"(({bucket_request_steps(b, window, by, flt)}) >= {rule.floor}) * 0"
             f" + on({attr}) group_left() ({bucket_order(b)})")
    last = f"({gain} and topk by ({group}) (1, {place}))"
    first = f"max by ({group}) ({gain} and bottomk by ({group}) (1, {place}))"
    return (f"{last} / on({group}) group_left() {first}"
            f" and on({group}) ({first} - max by ({group}) {last} >= {rule.drop})"
            f" and on({group}) (max by ({group}) ({place}) - min by ({group}) ({place})"
            f" >= {rule.min_apart})")


def context_request_steps(window: str, by=(), flt="", copies=False) -> str:
    """Request-steps in each context-length bucket (`context`) over `window` (increase)."""
    return bucket_request_steps(CONTEXT, window, by, flt, copies)


def accepted_per_request_step_by_context(window: str, by=(), flt="", copies=False) -> str:
    """Accepted per request-step in each context-length bucket (`context`) over `window`."""
    return accepted_per_request_step_by(CONTEXT, window, by, flt, copies)


def long_context_acceptance(window: str, by=(), flt="") -> str:
    """The long-context rule of `spectrace report` (rules.context): `gap_acceptance` of
    the context-length breakdown."""
    return gap_acceptance(CONTEXT, window, by, flt)
