"""Drift in a running server: acceptance in a recent window against the process's earlier
windows, and whether the traffic moved (the mix of a breakdown's buckets: context
length, sampling, request label) or the system did (acceptance fell within the buckets).

The rule, with a floor so that a few requests never raise it: both windows hold at least
FLOOR request-steps and MIN_REQUESTS finished requests (requests differ far more from
each other than steps of one request do, so a window of a few long requests is noisy
however many steps it holds: benchmarks/drift_false_alarms.py), and the recent window's
accepted draft tokens per request-step are at most RATIO of the earlier windows' and at
least DROP fewer. The alert rule
restates this part in PromQL (`grafana.promql.acceptance_drift`); the explanation by
breakdown is the report's:

- a breakdown explains the fall when its mix moved (at least MIN_SHIFT of the
  request-steps changed bucket, total variation) and, within the buckets both windows
  hold (BUCKET_FLOOR request-steps earlier), acceptance standardised to the recent mix
  did not fall by the rule (or the recent traffic sits mostly in buckets the earlier
  windows did not have, so there is nothing to compare it with);
- otherwise acceptance fell within every breakdown's buckets: the system changed.

Pure functions over numbers and small dicts: `spectrace report` feeds it each process's
totals at the window boundary and at the end (`report.drift_windows`).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Mapping

from .. import messages, names
from ..findings import INFO, WARNING, Alert, Finding, FindingSpec

FLOOR = 200         # request-steps in each window before acceptance is compared at all
MIN_REQUESTS = 100  # ... and finished requests in each window
RATIO = 0.8         # the recent gain at most this share of the earlier one ...
DROP = 0.3          # ... and at least this many accepted tokens per request-step fewer
BUCKET_FLOOR = 50   # earlier request-steps in a bucket before its acceptance is compared
MIN_SHIFT = 0.2     # share of request-steps that changed bucket: the mix moved
RECENT_S = 900      # the recent window: the last 15 minutes (the alert's) ...
EARLIER_S = 6 * 3600  # ... against up to 6 hours before it
SYSTEM = "system"
TRAFFIC = "traffic"

# docs/metrics.md's section on the rule (its floors, the alert, the false alarms measured)
DOC = (
    f"`spectrace report` compares each process's last {RECENT_S // 60} minutes (the "
    "later half of a shorter run, counted from its first request-step; "
    "`SPECTRACE_DRIFT_WINDOW=SECONDS` set for the report asks for another length, e.g. "
    "the time since a change) with up to "
    f"{EARLIER_S // 3600} hours before them (`spectrace/rules/drift.py`). "
    f"`{names.ACCEPTANCE_DRIFT}` is raised when both windows hold at least {FLOOR} "
    f"request-steps and {MIN_REQUESTS} finished requests (`spectrace.spec.requests`) "
    "and the recent window's accepted draft tokens per request-step are at most "
    f"{RATIO:g}x the earlier ones' and {DROP:g} fewer. It then compares within "
    "each breakdown's buckets: a breakdown whose mix moved (at least "
    f"{MIN_SHIFT:.0%} of the request-steps changed bucket) while acceptance within "
    f"the buckets both windows share (at least {BUCKET_FLOOR} earlier request-steps) "
    "held at the recent mix, or whose recent traffic sits in buckets the earlier "
    "windows lacked, explains the fall: the finding is `info` and names the breakdown, "
    "the bucket that grew and its shares (the traffic moved). Otherwise acceptance "
    "fell within the buckets: a `warning` (the system moved). The alert "
    "`SpectraceAcceptanceDrift` (warning, for 5 minutes) applies the same floors, "
    "ratio and drop to each counting process's last 15 minutes against the 6 hours "
    "before them (`offset 15m`); it cannot tell the traffic from the system, its "
    "description says to run the report. The overview's drift panel plots the same "
    "ratio where both windows pass the floors. vLLM counts finished requests only "
    "with `--per-request-spec-decode-metrics`, so without it the rule never fires there.",
    "False alarms, measured on steady runs (`python benchmarks/drift_false_alarms.py`, "
    "results in benchmarks/results/drift-false-alarms.json: two windows of the same "
    "simulated workload, requests of 16-256 steps, K 3 or 5, per-position acceptance "
    "0.3-0.85 with requests alike or spread as a Beta of concentration 30 or 5, 200 "
    "runs each): at the floors, at most 1.0 % of runs (K 5, mean 0.5, concentration "
    "5: code, chat and other languages mixed), 0.06 % averaged over the 24 workloads, "
    "none where requests are alike. The floor of finished requests is what keeps it "
    "there: with 20 requests a window the same runs alarm up to 18.5 % (a window of a "
    "few long requests is noisy however many request-steps it holds). A fall of "
    "per-position acceptance to 0.6x is found in every run from mean 0.5 up; at 0.3 "
    "the fall is under 0.3 tokens and not called drift.",
)

SPEC = FindingSpec(
    names.ACCEPTANCE_DRIFT, WARNING,
    "acceptance in the last window well below the process's earlier windows: a warning "
    "where it fell within the breakdowns' buckets (the system moved), info where a "
    "breakdown's mix moved and explains it (the traffic)",
    floor=f"{FLOOR} request-steps and {MIN_REQUESTS} finished requests in each window; the "
          f"recent window at most {RATIO:g}x the earlier one's accepted tokens per "
          f"request-step and {DROP:g} fewer",
    message=messages.ACCEPTANCE_DRIFT_SYSTEM,  # the traffic's: ACCEPTANCE_DRIFT_TRAFFIC
    alert=Alert(
        "SpectraceAcceptanceDrift", "Draft acceptance drifted down on {{ $labels.instance }}",
        f"Accepted draft tokens per request-step over the last {RECENT_S // 60} minutes are "
        "{{ $value | printf \"%.2f\" }} of the "
        f"{EARLIER_S // 3600} hours before them (at most {RATIO:g}x and {DROP:g} fewer, at "
        f"least {FLOOR} request-steps and {MIN_REQUESTS} finished requests in each window). "
        "The traffic may have moved (longer prompts, sampled requests, another domain) or "
        "the system (a restart with other settings, a cache filling up, a new draft): "
        "`spectrace report` on the process's files says which breakdown's mix moved, or "
        f"that acceptance fell within its buckets (finding {names.ACCEPTANCE_DRIFT}).",
        severity="warning", for_="5m", windowed=True),
    doc_title="Drift over time", doc=DOC)


@dataclass(frozen=True)
class Totals:
    """Cumulative request-steps, accepted draft tokens and finished requests, overall, and
    per breakdown: breakdown name -> bucket -> (request-steps, accepted draft tokens)."""
    drafts: float = 0.0
    accepted: float = 0.0
    breakdowns: Mapping[str, Mapping[str, tuple[float, float]]] = field(default_factory=dict)
    requests: float = 0.0

    def __sub__(self, other: "Totals") -> "Totals":
        out: dict = {}
        for name, buckets in self.breakdowns.items():
            was = other.breakdowns.get(name, {})
            out[name] = {b: (d - was.get(b, (0, 0))[0], a - was.get(b, (0, 0))[1])
                         for b, (d, a) in buckets.items()}
        return Totals(self.drafts - other.drafts, self.accepted - other.accepted, out,
                      self.requests - other.requests)

    def __add__(self, other: "Totals") -> "Totals":
        out: dict = {n: dict(b) for n, b in self.breakdowns.items()}
        for name, buckets in other.breakdowns.items():
            acc = out.setdefault(name, {})
            for b, (d, a) in buckets.items():
                d0, a0 = acc.get(b, (0, 0))
                acc[b] = (d0 + d, a0 + a)
        return Totals(self.drafts + other.drafts, self.accepted + other.accepted, out,
                      self.requests + other.requests)

    @property
    def gain(self) -> float:
        return self.accepted / self.drafts if self.drafts else 0.0


def by_bucket(counts: Mapping[tuple, float]) -> dict[str, tuple[float, float]]:
    """Request-steps by (bucket, accept length) -> bucket -> (request-steps, accepted)."""
    out: dict[str, tuple[float, float]] = {}
    for key, n in counts.items():
        if not (isinstance(key, tuple) and len(key) == 2 and isinstance(key[1], int)
                and key[1] >= 1 and n):
            continue
        d, a = out.get(str(key[0]), (0, 0))
        out[str(key[0])] = (d + n, a + (key[1] - 1) * n)
    return out


@dataclass(frozen=True)
class Explanation:
    """What one breakdown says about the fall: how much of the mix moved (`shift`), the
    bucket that grew most (`grew`, with its earlier and recent share), the share of recent
    request-steps in buckets the earlier windows lacked (`new_share`), and the standardised
    gains within shared buckets (`expected`: the earlier gains at the recent mix;
    `within`: the recent gains), None where too little is shared."""
    breakdown: str
    shift: float
    grew: str
    share_before: float
    share_now: float
    new_share: float
    expected: float | None
    within: float | None

    @property
    def within_fell(self) -> bool:
        return self.within is not None and falls(self.expected, self.within)

    @property
    def explains(self) -> bool:
        return self.shift >= MIN_SHIFT and not self.within_fell


def falls(before: float, now: float) -> bool:
    """The rule: at most RATIO of before and at least DROP fewer."""
    return now <= RATIO * before and before - now >= DROP


def explain(name: str, earlier: Mapping[str, tuple[float, float]],
            recent: Mapping[str, tuple[float, float]], unknown: str = "unknown"
            ) -> Explanation | None:
    """One breakdown's explanation, or None where it counted nothing it can bucket (only
    `unknown`, or nothing) in either window."""
    e = {b: v for b, v in earlier.items() if b != unknown and v[0] > 0}
    r = {b: v for b, v in recent.items() if b != unknown and v[0] > 0}
    ne, nr = sum(v[0] for v in e.values()), sum(v[0] for v in r.values())
    if not ne or not nr:
        return None
    shares = {b: (e.get(b, (0, 0))[0] / ne, r.get(b, (0, 0))[0] / nr) for b in {*e, *r}}
    shift = sum(abs(s1 - s0) for s0, s1 in shares.values()) / 2
    grew = max(sorted(shares), key=lambda b: shares[b][1] - shares[b][0])
    shared = {b: v for b, v in r.items() if e.get(b, (0, 0))[0] >= BUCKET_FLOOR}
    covered = sum(v[0] for v in shared.values())
    expected = within = None
    if covered >= nr / 2:
        expected = sum(d * e[b][1] / e[b][0] for b, (d, _) in shared.items()) / covered
        within = sum(a for _, a in shared.values()) / covered
    return Explanation(name, shift, grew, shares[grew][0], shares[grew][1],
                       (nr - covered) / nr, expected, within)


@dataclass(frozen=True)
class Drift:
    earlier: Totals
    recent: Totals
    cause: str                      # SYSTEM or TRAFFIC
    moved: Explanation | None       # the breakdown whose mix explains it (TRAFFIC)
    held: tuple[Explanation, ...]   # every breakdown's explanation, in the order given


def judge(earlier: Totals, recent: Totals, order: tuple[str, ...] = ()) -> Drift | None:
    """The drift, or None (also whenever a window is under the floor)."""
    if min(earlier.drafts, recent.drafts) < FLOOR or \
            min(earlier.requests, recent.requests) < MIN_REQUESTS:
        return None
    if not falls(earlier.gain, recent.gain):
        return None
    names_ = list(order) + sorted(set(recent.breakdowns) - set(order))
    found = [x for n in names_ if (x := explain(n, earlier.breakdowns.get(n, {}),
                                                recent.breakdowns.get(n, {}))) is not None]
    movers = [x for x in found if x.explains]
    moved = max(movers, key=lambda x: x.shift) if movers else None
    return Drift(earlier, recent, TRAFFIC if moved else SYSTEM, moved, tuple(found))


def finding(d: Drift, window_s: float, titles: Mapping[str, str] | None = None) -> Finding:
    """`acceptance.drift` in words: the windows' figures, and the breakdown that moved
    (traffic, info) or the breakdowns within which acceptance fell too (system, warning)."""
    titles = dict(titles or {})
    facts = dict(recent_length=f"{1 + d.recent.gain:.2f}",
                 earlier_length=f"{1 + d.earlier.gain:.2f}",
                 recent_drafts=int(d.recent.drafts), earlier_drafts=int(d.earlier.drafts),
                 window=_duration(window_s))
    details = {**facts, "recent_length": round(1 + d.recent.gain, 4),
               "earlier_length": round(1 + d.earlier.gain, 4), "window_s": round(window_s, 1),
               "cause": d.cause, "floor": FLOOR, "min_requests": MIN_REQUESTS,
               "recent_requests": int(d.recent.requests),
               "earlier_requests": int(d.earlier.requests),
               "breakdowns": {x.breakdown: _explanation_json(x) for x in d.held}}
    if d.moved is not None:
        m = d.moved
        facts.update(breakdown=titles.get(m.breakdown, m.breakdown), bucket=m.grew,
                     share_before=f"{m.share_before:.0%}", share_now=f"{m.share_now:.0%}",
                     within=messages.DRIFT_WITHIN_UNKNOWN if m.within is None else
                     messages.DRIFT_WITHIN_HELD.format(
                         expected=f"{1 + m.expected:.2f}", within=f"{1 + m.within:.2f}"))
        details["moved"] = m.breakdown
        return Finding(SPEC.code, INFO,
                       messages.ACCEPTANCE_DRIFT_TRAFFIC.render(**facts), details)
    fell = [x for x in d.held if x.within_fell]
    facts["within"] = (messages.DRIFT_FELL_WITHIN.format(breakdowns=", ".join(
        titles.get(x.breakdown, x.breakdown) for x in fell)) if fell
        else messages.DRIFT_NO_BREAKDOWN)
    details["moved"] = None
    return SPEC.found(details, **facts)


def _explanation_json(x: Explanation) -> dict:
    r = lambda v: None if v is None else round(v, 4)  # noqa: E731
    return {"shift": r(x.shift), "grew": x.grew, "share_before": r(x.share_before),
            "share_now": r(x.share_now), "new_share": r(x.new_share),
            "expected_length": None if x.expected is None else r(1 + x.expected),
            "within_length": None if x.within is None else r(1 + x.within),
            "explains": x.explains}


def _duration(s: float) -> str:
    return f"{s / 60:.0f} min" if s >= 120 else f"{s:.0f} s"
