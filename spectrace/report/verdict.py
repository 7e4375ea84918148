"""The report's first sentence: is the deployment healthy, broken, underperforming or
slower than plain decoding, and where. `text`, `html` and `watch` lead with it; `--json` carries it as `verdict`.

The verdict is built from typed clues (`Clue`), so that every breakdown of the report can
add its own "where" clause: `finding_clues` (the findings: their cause and fix) and
`position_clues` (where along the draft chain acceptance is lost) are made here; other
record types add theirs by passing more clues to `judge` (for example a per-context-length
or per-sampling breakdown: `Clue(UNDERPERFORMING, "in contexts of 8k tokens and more
(1.08 against 2.30 below 2k)", source="context_length")`). Each clue has passed its own
statistical floor before it is made; the verdict only orders and words them.

The rules, each with a floor, because a false alarm is as bad as a miss:

- broken: any finding of severity `error` (one is enough: each has its own evidence rule,
  e.g. a single non-finite check, a single fc-bypassed pass). The first one (earliest)
  gives the cause and the fix.
- underperforming: at least `MIN_REQUEST_STEPS` request-steps verified, and the mean
  acceptance length is below the dashboards' weak band (`signals.ACCEPT_LENGTH_AMBER_BELOW`,
  2.0; with one draft step, whose best is 2.0, below 1.5), with its upper 3-standard-error
  bound below that line too (so a run at 1.98 +- 0.1 is not called weak); or a warning
  finding, or another breakdown's clue of kind UNDERPERFORMING. The "where" clauses: the
  condition most associated with the shortfall (`condition_clues`: of the breakdowns
  whose rule cleared its floor, the one whose worse bucket costs the mean the most, with
  both buckets' accept lengths and request-steps), the first draft position at which
  acceptance is lost (`position_clues`), then the other conditions and the others'.
  Sampling's condition only explains (sampled requests accept less by construction):
  named, like a server setting, only when the mean itself is weak.
  A server setting that is a known cause of lower acceptance (`server_settings.causes`:
  an fp8 KV cache, a quantized target, async scheduling with n-gram) is an EXPLAINS clue:
  named after the others only when the mean acceptance length itself is weak, never a
  verdict of its own (a setting is no evidence that acceptance is low).
- slower: no reason to call acceptance underperforming (the mean is not weak, no condition,
  no warning about acceptance), but the advisor's cost finding `speculation.slower` fired
  (`rules.speculation.COST_CODES`): speculation costs more than it saves at the measured
  batch sizes and K, in its own words, with the acceptance figures as what is not weak.
  Where acceptance is also underperforming, that verdict leads and the cost clause follows.
- not enough data: fewer than `MIN_REQUEST_STEPS` request-steps and no finding.
- healthy: otherwise.

After any of these, what the figures mean where a finding says so (`meaning_notes`): under
lossy verification (`rules.verification`), "Acceptance under lossy verification (FLy ...)
is not comparable with standard verification's."
"""
from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any, Iterable

from .. import server_settings, signals
from ..rules.speculation import COST_CODES
from .breakdown_figures import conditions
from .format import count_text
from .records import CombinedSummary, Figures, FindingSummary, ProcessSummary, Report

HEALTHY = "healthy"
BROKEN = "broken"
UNDERPERFORMING = "underperforming"
SLOWER = "slower"  # acceptance is not the problem; what speculation costs is (issue 49)
EXPLAINS = "explains"  # a clue named only when acceptance is weak (a server setting)
NOT_ENOUGH_DATA = "not_enough_data"

MIN_REQUEST_STEPS = 100     # request-steps before acceptance is judged at all
MIN_POSITION_TRIALS = 50    # request-steps that reached a position before it is judged
POSITION_LOST_BELOW = 0.5   # conditional acceptance at a position, called lost below it
SIGMAS = 3.0                # standard errors a figure must be below its line by


@dataclass(frozen=True, slots=True)
class Clue:
    """One thing the verdict may say. `kind`: BROKEN, UNDERPERFORMING or EXPLAINS; `where`: a clause
    that completes "underperforming ..." (or, for BROKEN, the cause); `fix`: what to do;
    `source`: the record it came from (a finding code, `positions`, `context_length`...)."""
    kind: str
    where: str
    fix: str = ""
    source: str = ""

    def to_json(self) -> dict[str, Any]:
        return {"kind": self.kind, "where": self.where, "fix": self.fix,
                "source": self.source}


@dataclass(frozen=True, slots=True)
class Verdict:
    state: str         # HEALTHY | BROKEN | UNDERPERFORMING | SLOWER | NOT_ENOUGH_DATA
    sentence: str      # the report's first line
    clues: tuple[Clue, ...]

    def to_json(self) -> dict[str, Any]:
        return {"state": self.state, "sentence": self.sentence,
                "clues": [c.to_json() for c in self.clues]}


def _split_fix(message: str) -> tuple[str, str]:
    text, sep, fix = message.partition(" Fix: ")
    return text.strip(), fix.strip() if sep else ""


def _first_sentence(text: str) -> str:
    """Up to the first full stop that ends a sentence (". " or the end)."""
    head, sep, _ = text.partition(". ")
    return head.rstrip(".") if sep else text.rstrip(".")


def finding_clues(findings: Iterable[FindingSummary]) -> list[Clue]:
    """Error findings are BROKEN clues, warnings UNDERPERFORMING ones, earliest first."""
    out = []
    order = sorted(findings, key=lambda f: (f.first_time is None, f.first_time or 0))
    for f in order:
        kind = {"error": BROKEN, "warning": UNDERPERFORMING}.get(f.severity or "")
        if kind is None:
            continue
        text, fix = _split_fix(f.message or f.code)
        out.append(Clue(kind, f"{_first_sentence(text)} ({f.code})", fix, f.code))
    return out


def setting_clues(per_process) -> list[Clue]:
    """EXPLAINS clues from the server settings of each process (`server_settings.causes`),
    each clause once."""
    out, seen = [], set()
    for values in per_process:
        for key, clause, fix in server_settings.causes(values):
            if clause not in seen:
                seen.add(clause)
                out.append(Clue(EXPLAINS, clause, fix, f"setting:{key}"))
    return out


def condition_clues(figures: Figures, findings: Iterable[FindingSummary] = ()) -> list[Clue]:
    """The conditions the breakdowns' rules found (`breakdown_figures.conditions`: every
    declared breakdown with a rule, past its floor), largest effect first, each with its
    evidence: the two buckets' mean accept lengths and request-steps, and what the worse
    one costs the mean (`judge` words the first "most associated with", the others "also
    with"). A warning finding's condition is an UNDERPERFORMING clue; an info
    one's (sampling: sampled requests accept less by construction) an EXPLAINS clue, named
    only when the mean itself is weak."""
    out = []
    for c in conditions(figures.breakdowns):
        b, better, worse = c.breakdown, c.better, c.worse
        facts = dict(better=better.bucket, worse=worse.bucket,
                     better_length=f"{better.mean_acceptance_length:.2f}",
                     worse_length=f"{worse.mean_acceptance_length:.2f}",
                     better_drafts=int(better.drafts), worse_drafts=int(worse.drafts))
        warning = b.severity == "warning"
        kind = UNDERPERFORMING if warning else EXPLAINS
        fix = b.message.fix.format(**facts) if b.message is not None else ""
        if b.judge is not None and b.finding:  # its own words (context: the draft's length)
            fix = next((_split_fix(f.message or "")[1] for f in findings
                        if f.code == b.finding), fix)
        out.append(Clue(kind, (
            f"{b.title.split(' (')[0]}: mean accept length "
            f"{facts['worse_length']} at {worse.bucket} ({count_text(worse.drafts)} "
            f"request-steps) against {facts['better_length']} at {better.bucket} "
            f"({count_text(better.drafts)}), {c.effect:.2f} accepted tokens per request-step "
            f"lost to it ({b.finding})"), fix, b.finding))
    return out


def _max_length(figures: Figures) -> int:
    return len(figures.acceptance_per_position) + 1


def weak_line(num_steps: int) -> float:
    """The mean acceptance length below which speculation is weak: the dashboards' amber
    line (2.0), or halfway to the best for one draft step (1.5)."""
    return min(signals.ACCEPT_LENGTH_AMBER_BELOW, 1 + 0.5 * max(num_steps, 1))


def length_bound(figures: Figures) -> float | None:
    """The mean acceptance length plus `SIGMAS` standard errors (from the accept-length
    distribution), None without one."""
    mean, n = figures.mean_acceptance_length, figures.drafts
    counts = {}
    for k, v in figures.accept_length_counts.items():
        try:
            counts[float(k)] = float(v)
        except (TypeError, ValueError):
            return None
    total = sum(counts.values())
    if mean is None or not n or not total:
        return None
    var = sum(v * (k - mean) ** 2 for k, v in counts.items()) / total
    return mean + SIGMAS * math.sqrt(var / total)


def position_clues(figures: Figures) -> list[Clue]:
    """Where along the chain acceptance is lost: the first position whose acceptance,
    among the request-steps that accepted every position before it, is below
    `POSITION_LOST_BELOW` by `SIGMAS` standard errors, judged only where at least
    `MIN_POSITION_TRIALS` request-steps reached it."""
    n = figures.drafts or 0
    accepted = list(figures.accepted_per_position)
    reached = n
    for p, a in enumerate(accepted):
        if reached < MIN_POSITION_TRIALS:
            break
        rate = a / reached
        se = math.sqrt(max(rate * (1 - rate), 1e-12) / reached)
        if rate + SIGMAS * se < POSITION_LOST_BELOW:
            who = ("of request-steps" if p == 0 else
                   f"of the request-steps that accepted positions 0-{p - 1}" if p > 1 else
                   "of the request-steps that accepted position 0")
            return [Clue(UNDERPERFORMING,
                         f"from draft position {p}: it is accepted in {rate:.0%} {who} "
                         f"({count_text(a)} of {count_text(reached)})", source="positions")]
        reached = a
    return []


def judge(view: ProcessSummary | CombinedSummary | None, clues: Iterable[Clue] = ()
          ) -> Verdict:
    """The verdict on one view (its figures and findings) plus the clues other breakdowns
    give, and what its acceptance means (`meaning_notes`) after it."""
    verdict = _judge(view, clues)
    notes = meaning_notes(view.findings) if view is not None else []
    if not notes:
        return verdict
    return replace(verdict, sentence=verdict.sentence + "".join(
        f" {n[0].upper()}{n[1:]}." for n in notes))


def meaning_notes(findings: Iterable[FindingSummary]) -> list[str]:
    """What the view's acceptance figures mean, where a finding says (its details'
    `verdict_note`: `rules.verification`'s lossy verification), each once."""
    out: list[str] = []
    for f in findings:
        note = (f.details or {}).get("verdict_note") if isinstance(f.details, dict) else None
        if isinstance(note, str) and note and note not in out:
            out.append(note)
    return out


def _judge(view: ProcessSummary | CombinedSummary | None, clues: Iterable[Clue] = ()
           ) -> Verdict:
    if view is None:
        return Verdict(NOT_ENOUGH_DATA, "Verdict: no data yet: no instrumented process has "
                       "written here.", ())
    figures = view.figures
    conditions = condition_clues(figures, view.findings)
    named = {c.source for c in conditions}
    found = [c for c in finding_clues(view.findings) if c.source not in named]
    extra = list(clues)
    broken = [c for c in found + extra if c.kind == BROKEN]
    if broken:
        first = broken[0]
        more = len(broken) - 1
        where = first.where
        if more:
            note = f"{more} more error finding{'s' if more > 1 else ''} below"
            where = (where[:-1] + f"; {note})" if where.endswith(")") else f"{where} ({note})")
        fix = f" Fix: {first.fix.rstrip('.')}." if first.fix else ""
        return Verdict(BROKEN, f"Verdict: broken: {where}.{fix}", tuple(broken))
    n = figures.drafts or 0
    mean = figures.mean_acceptance_length
    steps = len(figures.acceptance_per_position)
    line = weak_line(steps)
    bound = length_bound(figures)
    weak = (n >= MIN_REQUEST_STEPS and mean is not None and bound is not None
            and mean < line and bound < line)
    # the condition with the largest effect leads; one that only explains (sampling)
    # counts only when the mean itself is weak
    eligible = [c for c in conditions if weak or c.kind == UNDERPERFORMING]
    conditions = [replace(c, where=("most associated with " if i == 0 else "also with ")
                          + c.where) for i, c in enumerate(eligible)]
    others = [c for c in found + extra if c.kind == UNDERPERFORMING]
    # the advisor's cost findings come last: acceptance, where it is weak, is the first cause
    cost = [c for c in others if c.source in COST_CODES]
    others = [c for c in others if c.source not in COST_CODES]
    if not (weak or others or conditions) and cost:
        return _slower(cost, mean, n)
    others += cost
    if weak or others or conditions:
        explains = [c for c in extra if c.kind == EXPLAINS] if weak else []
        where = (conditions[:1] + (position_clues(figures) if weak else []) + conditions[1:]
                 + others + explains)
        figures_text = (f"mean acceptance length {mean:.2f} over {count_text(n)} request-steps "
                        f"({line:.1f} or more expected with {steps} draft step"
                        f"{'s' if steps != 1 else ''})" if mean is not None and weak else
                        # not weak as a whole: the figures, and the clauses say what is wrong
                        # (a cost finding is not low acceptance)
                        f"mean acceptance length {mean:.2f} over {count_text(n)} request-steps"
                        if mean is not None else "no acceptance figures")
        clause, fix = _joined(where)
        return Verdict(UNDERPERFORMING,
                       f"Verdict: underperforming: {figures_text}"
                       + (f", {clause}" if clause else "") + f".{fix}", tuple(where))
    if n < MIN_REQUEST_STEPS:
        return Verdict(NOT_ENOUGH_DATA,
                       f"Verdict: not enough data yet: {count_text(n)} request-steps verified "
                       f"({MIN_REQUEST_STEPS} needed to judge acceptance), no finding so far.",
                       ())
    return Verdict(HEALTHY, f"Verdict: healthy: mean acceptance length {mean:.2f} over "
                   f"{count_text(n)} request-steps (of at most {_max_length(figures)}.00), "
                   f"no finding.", ())


def _slower(cost: list[Clue], mean: float | None, n: float) -> Verdict:
    """Speculation costs more than it saves while acceptance is not weak and no condition
    lowers it: the verdict says so in its own words ("underperforming" stays for
    acceptance), the acceptance figures after, as what is not the cause."""
    clause, fix = _joined(cost)
    accepts = (f"; acceptance is not weak as a whole (mean acceptance length {mean:.2f} over "
               f"{count_text(n)} request-steps)" if mean is not None else "")
    return Verdict(SLOWER, f"Verdict: slower than plain decoding: {clause}{accepts}.{fix}",
                   tuple(cost))


def _joined(clues: list[Clue]) -> tuple[str, str]:
    """The clues' clauses joined, and their fixes as the sentence's " Fix: ..." ("" for
    none)."""
    fixes = "; ".join(c.fix.rstrip(".") for c in clues if c.fix)
    return "; ".join(c.where for c in clues), f" Fix: {fixes}." if fixes else ""


def report_view(report: Report) -> ProcessSummary | CombinedSummary | None:
    """The view the verdict is on: all processes together (a vLLM deployment's accept
    counts are in its engine core, its draft findings in its worker), else the one."""
    if report.combined is not None:
        return report.combined
    readable = report.readable
    return readable[0] if readable else None


def of_report(report: Report, clues: Iterable[Clue] = ()) -> Verdict:
    """The verdict on the report's view, with the server settings' clues."""
    return of_view(report_view(report), report.readable, clues)


def of_view(view: ProcessSummary | CombinedSummary | None, procs, clues: Iterable[Clue] = ()
            ) -> Verdict:
    """The verdict on one view of these processes, with their server settings' clues."""
    settings = setting_clues(p.settings for p in procs)
    return judge(view, list(clues) + settings)


def verdict_of(report: Report) -> Verdict:
    """The verdict `build_report` judged (judged here for a report built another way)."""
    return report.verdict if report.verdict is not None else of_report(report)
