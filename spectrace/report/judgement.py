"""The report's judgement: every rule `spectrace report` runs over one view's totals, in one
list (`RULES`), each with the declarations of the findings it raises (`FindingSpec`: code,
severity, floor, alert, words) and yielding `Finding`s of the one finding type. The figures
are numbers; the verdict and the views read what the rules found, never the rules, so a
new report finding is its rule module (its declaration and judge) and one line here, and
a second source of totals (not only the folder) is judged by the same rules. The
findings' table in docs/metrics.md is written from `RULES`. `findings_of` is what a view
lists: the findings its processes' events named, then the rules'.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, NamedTuple

from ..families.breakdowns import BREAKDOWNS
from ..findings import Finding, FindingSpec
from ..rules import (drift, nothing_accepted, outliers, reference, replicas, speculation,
                     verification)
from .breakdown_figures import breakdown_findings
from .drift_windows import drift_findings
from .records import BreakdownFigures, Figures, FindingSummary, RawTotals


class Member(NamedTuple):
    """One counting process of a view of several (the processes together, a deployment):
    its name, its deployment (`summary.group_of`: service and draft) and its own totals,
    for the rules that compare a view's processes with each other."""
    process: str
    deployment: tuple
    raw: RawTotals


@dataclass(frozen=True)
class Evidence:
    """What the rules read for one view: its raw totals, its breakdowns' figures, the
    recorded requests kept (`snapshot.RequestSample`, or None), the totals over time of
    each counting process (`drift_windows.History`), the draft's reference
    (`rules.reference.Reference`, or None), the advisor's view of its step costs
    (`advisor.Advice`, or None), its counting processes (`Member`s; none for one
    process's own view) and its server settings (`server_settings`: key -> value, a
    list where its processes differ)."""
    raw: RawTotals
    breakdowns: dict[str, BreakdownFigures]
    requests: Any = None
    histories: tuple = ()
    reference: Any = None
    advice: Any = None
    members: tuple[Member, ...] = ()
    settings: Any = None

    @classmethod
    def of(cls, raw: RawTotals, figures: Figures, requests=None, histories: tuple = (),
           reference=None, members: tuple[Member, ...] = (), settings=None) -> "Evidence":
        """The evidence of one view: its totals and the figures made from them."""
        return cls(raw, {b.name: b for b in figures.breakdowns}, requests, tuple(histories),
                   reference, figures.speculation, tuple(members), dict(settings or {}))


def request_rates(records, positions: int) -> list[outliers.RequestRate]:
    """Each recorded request's acceptance rate (its drafts: the span's count, else steps x
    K); requests without one are left out."""
    out = []
    for r in records:
        rate = outliers.rate_of(r.accepted_tokens, r.draft_tokens or r.verify_steps * positions)
        if rate is not None:
            out.append(outliers.RequestRate(r.request_id, r.verify_steps, rate))
    return out


def _breakdowns(e: Evidence) -> list[Finding]:
    return breakdown_findings(e.breakdowns, e.raw.draft_context)


def _outliers(e: Evidence) -> list[Finding]:
    """The requests far outside the rest, judged against the uniform sample, named from
    everything kept."""
    if e.requests is None:
        return []
    k = len(e.raw.per_position)
    return outliers.findings(outliers.judge(
        request_rates(e.requests.records(), k), outliers.step_sigma(e.raw.lengths), k,
        reference=request_rates(e.requests.sample, k)))


def _drift(e: Evidence) -> list[Finding]:
    return drift_findings(list(e.histories))


def _reference(e: Evidence) -> list[Finding]:
    found = reference.judge(e.reference, e.raw.lengths)
    return [found] if found else []


def _speculation(e: Evidence) -> list[Finding]:
    return speculation.findings(e.advice) if e.advice is not None else []


def event_findings(raw: RawTotals, findings: dict[str, dict]
                   ) -> tuple[FindingSummary, ...]:
    """The findings events named (`snapshot.read_events`' entries), with the metric count of each
    code a metric counted, by code."""
    counts: dict[str, Any] = {}
    entries = dict(findings)
    for code, n in raw.finding_counts.items():
        if not n and str(code) not in entries:
            continue  # every code's series starts at 0: only raised findings are listed
        entries.setdefault(str(code), {"code": str(code), "severity": None, "message": None,
                                       "details": None, "events": 0, "times": []})
        counts[str(code)] = n
    return tuple(FindingSummary(
        code=f["code"], severity=f["severity"], message=f["message"], details=f["details"],
        events=f["events"], times=tuple(f["times"]), count=counts.get(code),
        first_time=min(f["times"]) if f["times"] else None)
        for code, f in sorted(entries.items(), key=lambda item: item[1]["code"]))


@dataclass(frozen=True)
class ReportRule:
    """One rule of the report: the findings it may raise, and how it judges a view."""
    specs: tuple[FindingSpec, ...]
    judge: Callable[[Evidence], list[Finding]]


# in the order the report lists their findings (and the verdict names them, after events)
RULES: tuple[ReportRule, ...] = (
    ReportRule((nothing_accepted.SPEC,), lambda e: [f for f in (nothing_accepted.judge(
        e.raw.drafts, e.raw.draft_tokens, e.raw.accepted_tokens),) if f]),
    ReportRule(tuple(b.spec for b in BREAKDOWNS if b.spec is not None), _breakdowns),
    ReportRule((outliers.LOW, outliers.IMPLAUSIBLE), _outliers),
    ReportRule((drift.SPEC,), _drift),
    ReportRule((reference.SPEC,), _reference),
    ReportRule((speculation.SLOWER, speculation.GAINS_LITTLE, speculation.FEWER_STEPS),
               _speculation),
    ReportRule((replicas.SPEC,), lambda e: replicas.judge(
        replicas.Replica(m.process, m.deployment, m.raw.drafts, m.raw.accepted_tokens)
        for m in e.members)),
    ReportRule((verification.SPEC,), lambda e: [f for f in (
        verification.judge(e.settings or {}),) if f]),
)
SPECS: dict[str, FindingSpec] = {s.code: s for r in RULES for s in r.specs}


def judge(evidence: Evidence) -> list[Finding]:
    """Every rule's findings for one view, in `RULES` order. A rule that raises a code
    it did not declare is a bug in it: `ValueError`."""
    out = []
    for rule in RULES:
        declared = {s.code for s in rule.specs}
        for f in rule.judge(evidence):
            if f.code not in declared:
                raise ValueError(f"report rule {rule.judge.__name__} raised {f.code!r}, "
                                 f"which it does not declare ({sorted(declared)})")
            out.append(f)
    return out


def findings_of(evidence: Evidence, events: dict[str, dict]) -> tuple[FindingSummary, ...]:
    """What one view lists: the findings its events named (`event_findings`), by code, then
    every rule's (`judge`), each counted once."""
    return (event_findings(evidence.raw, events)
            + tuple(map(FindingSummary.judged, judge(evidence))))
