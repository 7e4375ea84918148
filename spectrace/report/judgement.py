"""The report's judgement: every rule `spectrace report` runs over one view's totals, in one
list (`RULES`), each yielding `Finding`s of the one finding type. The figures are numbers;
the verdict and the views read what the rules found, never the rules themselves, so a new
report finding is one rule added here and its declaration, and a second source of totals
(not only the folder) is judged by the same rules.

The rules, each past its own floor (docs/metrics.md):
- the breakdowns' gaps (`rules.buckets` through `breakdown_figures.breakdown_findings`);
- requests far outside the rest (`rules.outliers`);
- a fall over time (`rules.drift`, through `drift_windows`);
- a run well below its draft's reference (`rules.reference`);
- is speculation paying off (the advisor, `spectrace.advisor.findings`).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from .. import advisor
from ..findings import Finding
from ..rules import outliers
from ..rules.reference import judge as below_reference
from .breakdown_figures import breakdown_findings
from .drift_windows import drift_findings
from .records import BreakdownFigures, RawTotals


@dataclass(frozen=True)
class Evidence:
    """What the rules read for one view: its raw totals, its breakdowns' figures, the
    recorded requests kept (`snapshot.RequestSample`, or None), the totals over time of
    each counting process (`drift_windows.History`), the draft's reference
    (`rules.reference.Reference`, or None) and the advisor's view of its step costs
    (`advisor.Advice`, or None)."""
    raw: RawTotals
    breakdowns: dict[str, BreakdownFigures]
    requests: Any = None
    histories: tuple = ()
    reference: Any = None
    advice: Any = None


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
    found = below_reference(e.reference, e.raw.lengths)
    return [found] if found else []


def _speculation(e: Evidence) -> list[Finding]:
    return advisor.findings(e.advice) if e.advice is not None else []


# in the order the report lists them (and the verdict names them, after the events)
RULES: tuple[Callable[[Evidence], list[Finding]], ...] = (
    _breakdowns, _outliers, _drift, _reference, _speculation)


def judge(evidence: Evidence) -> list[Finding]:
    """Every rule's findings for one view, in `RULES` order."""
    return [f for rule in RULES for f in rule(evidence)]
