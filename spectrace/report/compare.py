"""`spectrace report DIR --baseline BASEDIR`: the current run against a baseline run (or
draft B against draft A, served side by side): the run configuration that differs, the
figures of both side by side with intervals, and the change of acceptance split into the
traffic mix and the system by every declared breakdown (`rules.compare`, whose statistics
and floors docs/report.md states). `text`, `--json` and the HTML page read the
`RunComparison` built here."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .. import server_settings
from ..counting import counts_once
from ..families.breakdowns import BREAKDOWNS, BY_NAME
from ..rules import compare as cmp
from ..rules import verification
from ..rules.buckets import BucketFigures
from .records import Figures, Report

# the identity of a run, as the processes' resources record it: (key, words)
IDENTITY = (("runtime", "runtime"), ("runtime_version", "runtime version"),
            ("model", "target"), ("model_hash", "target hash"),
            ("draft_model", "draft"), ("draft_hash", "draft hash"),
            ("spec_algorithm", "speculative algorithm"), ("spec_worker", "speculative worker"),
            ("spectrace_version", "spectrace version"))
MIX = "mix"  # a config row's kind for a breakdown's traffic mix


@dataclass(frozen=True)
class ConfigRow:
    """One item of the run configuration in both runs (None: not recorded). `kind`:
    `identity`, `setting` or `mix` (a breakdown's shares of request-steps, by bucket)."""
    key: str
    label: str
    kind: str
    baseline: Any
    current: Any

    @property
    def differs(self) -> bool:
        if self.kind == MIX:  # a breakdown one run does not count is no change of mix
            return bool(self.baseline and self.current) and _mix_moved(self.baseline,
                                                                       self.current)
        if isinstance(self.baseline, str) and isinstance(self.current, str):
            return self.baseline.lower() != self.current.lower()  # EAGLE3 / eagle3
        return self.baseline != self.current

    @property
    def changed(self) -> bool:
        """An identity item or setting that differs: what was changed (a moved mix is the
        traffic)."""
        return self.differs and self.kind != MIX

    def to_json(self) -> dict:
        return {"key": self.key, "label": self.label, "kind": self.kind,
                "baseline": self.baseline, "current": self.current, "differs": self.differs}


def _mix_moved(a: dict, b: dict) -> bool:
    """A traffic mix moved when some bucket's share changed by 5 points or more."""
    return any(abs(a.get(k, 0) - b.get(k, 0)) >= 0.05 for k in set(a) | set(b))


def identity(report: Report) -> dict:
    """Each identity item over the readable processes: its value, or the list of the
    distinct values where processes differ."""
    out = {}
    for key, _ in IDENTITY:
        values = []
        for p in report.readable:
            v = getattr(p, key, None)
            if v is not None and v not in values:
                values.append(v)
        out[key] = values[0] if len(values) == 1 else (values or None)
    return out


def _breakdown(figures: Figures | None, name: str):
    """The run's figures of the breakdown `name`, None where it has none."""
    return next((b for b in figures.breakdowns if b.name == name), None) if figures else None


def mix(figures: Figures | None, name: str) -> dict:
    """A breakdown's shares of request-steps by bucket, in its order."""
    fig = _breakdown(figures, name)
    total = sum(r.drafts for r in fig.rows) if fig else 0
    return {r.bucket: round(r.drafts / total, 4) for r in fig.rows} if total else {}


def config_rows(current: Report, baseline: Report) -> tuple[ConfigRow, ...]:
    """The run configuration of both runs: identity, every recorded server setting, and
    every breakdown's traffic mix."""
    ci, bi = identity(current), identity(baseline)
    rows = [ConfigRow(k, label, "identity", bi[k], ci[k]) for k, label in IDENTITY]
    cs, bs = current.settings, baseline.settings
    rows += [ConfigRow(s.key, s.label, "setting", bs.get(s.key), cs.get(s.key))
             for s in server_settings.SETTINGS if s.key in cs or s.key in bs]
    cf, bf = _figures(current), _figures(baseline)
    rows += [ConfigRow(b.name, f"{b.name.replace('_', ' ')} mix", MIX, mix(bf, b.name),
                       mix(cf, b.name)) for b in BREAKDOWNS]
    return tuple(rows)


def _figures(report: Report) -> Figures | None:
    return report.combined.figures if report.combined else None


def whole(figures: Figures | None) -> BucketFigures:
    """A run's request-steps as one bucket (its accept-length histogram)."""
    if figures is None:
        return cmp.whole_run({})
    return cmp.whole_run(figures.accept_length_counts, len(figures.acceptance_per_position))


def _buckets(figures: Figures | None, name: str) -> tuple[BucketFigures, ...]:
    fig = _breakdown(figures, name)
    return tuple(fig.buckets) if fig else ()


@dataclass(frozen=True)
class RunFigures:
    """One run's headline figures with their own intervals, and its speed-up estimate."""
    directory: str
    drafts: float
    mean_acceptance_length: cmp.Estimate | None
    acceptance_per_position: tuple[cmp.Estimate, ...]
    speedup: dict | None

    def to_json(self) -> dict:
        return {"directory": self.directory, "drafts": self.drafts,
                "mean_acceptance_length": (self.mean_acceptance_length.to_json()
                                           if self.mean_acceptance_length else None),
                "acceptance_per_position": [e.to_json() for e in self.acceptance_per_position],
                "speedup": self.speedup}


def _speedup(figures: Figures | None) -> dict | None:
    """The advisor's estimated speed-up against no speculation and the measured step cost
    per batch-size bucket, where step costs were measured."""
    adv = figures.speculation if figures else None
    if adv is None:
        return None
    return {"speedup": adv.speedup, "lower": adv.speedup_lower, "upper": adv.speedup_upper,
            "verdict": adv.verdict, "step_seconds": {
                b.bucket: round(sum(m.mean for m in b.phases.values()), 6)
                for b in adv.buckets}}


def recorded_requests(report: Report) -> list[tuple[float, float]]:
    """(verify steps, accepted draft tokens) of the uniform sample of recorded requests of
    the processes that count once (their request spans), for the run's design effect."""
    out = []
    for p in report.readable:
        if p.request_sample is None or not counts_once(p.counted):
            continue
        out += [(r.verify_steps, r.accepted_tokens) for r in p.request_sample.sample]
    return out


def effect(report: Report) -> float:
    return cmp.design_effect(whole(_figures(report)), recorded_requests(report))


def run_figures(report: Report, effect: float) -> RunFigures:
    f = _figures(report)
    b = whole(f)
    return RunFigures(report.directory, b.drafts, cmp.level(b, effect) if b.drafts else None,
                      cmp.position_levels(b, effect), _speedup(f))


@dataclass(frozen=True)
class RunComparison:
    """Everything `spectrace report DIR --baseline BASEDIR` shows."""
    current: RunFigures
    baseline: RunFigures
    config: tuple[ConfigRow, ...]
    result: cmp.Comparison
    sentence: str
    # the comparison's floors, as its views word them (a split needs this share of the
    # current request-steps in compared buckets; a bucket this many request-steps)
    min_coverage: float = cmp.MIN_COVERAGE
    min_bucket_steps: int = cmp.MIN_BUCKET_STEPS

    @property
    def changed_config(self) -> tuple[ConfigRow, ...]:
        return tuple(r for r in self.config if r.changed)

    def to_json(self) -> dict:
        return {"sentence": self.sentence, "current": self.current.to_json(),
                "baseline": self.baseline.to_json(),
                "config": [r.to_json() for r in self.config],
                "config_differs": [r.key for r in self.changed_config],
                "mix_moved": [r.key for r in self.config if r.differs and r.kind == MIX],
                **self.result.to_json()}


def compare_reports(current: Report, baseline: Report) -> RunComparison:
    cf, bf = _figures(current), _figures(baseline)
    effects = (effect(current), effect(baseline))
    result = cmp.compare(whole(cf), whole(bf), {
        b.name: (_buckets(cf, b.name), _buckets(bf, b.name)) for b in BREAKDOWNS}, effects)
    config = config_rows(current, baseline)
    cur, base = run_figures(current, effects[0]), run_figures(baseline, effects[1])
    return RunComparison(cur, base, config, result, sentence(result, config, cur, base))


def _signed(v: float) -> str:
    return f"{v:+.2f}"


def _interval(e: cmp.Estimate) -> str:
    return f"95 % interval {_signed(e.low)} to {_signed(e.high)}"


def _moved(split: cmp.Split) -> str:
    """"more 1k-2k in context length: 20 % -> 80 % of request-steps"."""
    grew = split.grew
    if grew is None:
        return f"another mix of {split.breakdown.replace('_', ' ')}"
    title = BY_NAME[split.breakdown].title.split(" (")[0] if split.breakdown in BY_NAME \
        else split.breakdown
    return (f"more {grew.bucket} in {title}: {grew.baseline_share:.0%} -> "
            f"{grew.current_share:.0%} of request-steps")


def _system_words(result: cmp.Comparison) -> str:
    """Which buckets and positions fell (or rose) in the system part."""
    parts = []
    split = result.explained_by
    if split is not None:
        moved = [c for c in split.buckets if c.change and c.change.clears(cmp.MIN_LENGTH_CHANGE)]
        compared = [c for c in split.buckets if c.compared]
        if moved:
            every = "every" if len(moved) == len(compared) else f"{len(moved)} of {len(compared)}"
            parts.append(f"{every} {split.breakdown.replace('_', ' ')} bucket moved ("
                         + ", ".join(f"{c.bucket} {_signed(c.change.value)}" for c in moved)
                         + ")")
    fell = result.positions_fell()
    if fell:
        est = split.positions if split is not None else result.positions
        parts.append("positions that fell: " + ", ".join(
            f"[{p}] {_signed(est[p].value)} ({_signed(est[p].low)} to {_signed(est[p].high)})"
            for p in fell) + (f"; position [{fell[0]}] most" if len(fell) > 1 else ""))
    return "; ".join(parts)


def sentence(result: cmp.Comparison, config: tuple[ConfigRow, ...], current: RunFigures,
             baseline: RunFigures) -> str:
    """The comparison in one sentence (the first line of every view), and where the runs
    verify drafts differently, what that means (`rules.verification.comparison_note`)."""
    rows = {r.key: r for r in config}
    method = rows.get(verification.KEY)
    note = verification.comparison_note(method.baseline, method.current) if method else None
    said = _sentence(result, config, current, baseline)
    return f"{said}; {note}" if note else said


def _sentence(result: cmp.Comparison, config: tuple[ConfigRow, ...], current: RunFigures,
              baseline: RunFigures) -> str:
    if result.kind == cmp.TOO_FEW:
        return (f"too few request-steps to compare: current {result.current_drafts:.0f}, "
                f"baseline {result.baseline_drafts:.0f} (each run needs "
                f"{cmp.MIN_RUN_STEPS})")
    total = result.total
    direction = "fell" if total.value < 0 else "rose"
    means = ""
    if current.mean_acceptance_length and baseline.mean_acceptance_length:
        means = (f"mean accept length {baseline.mean_acceptance_length.value:.2f} -> "
                 f"{current.mean_acceptance_length.value:.2f}, ")
    head = f"acceptance {direction} {abs(total.value):.2f} ({means}{_interval(total)})"
    system, traffic = result.system, result.traffic
    # named in the sentence: what both runs recorded and differs (the table has the rest)
    changed = [r for r in config
               if r.changed and r.baseline is not None and r.current is not None]
    lead = "the runs differ in" if result.kind == cmp.NO_CHANGE else "after the change of"
    after = (f"; {lead} " + ", ".join(
        f"{r.label} {r.baseline} -> {r.current}" for r in changed)) if changed else ""
    if result.kind == cmp.NO_CHANGE:
        noise = f"mean accept length {_signed(total.value)} ({_interval(total)})"
        if result.explained_by is not None:
            noise += f", the system part {_signed(system.value)} ({_interval(system)})"
        return f"no change in acceptance: {noise}, within noise{after}"
    pieces = [head]
    if traffic is not None and result.kind in (cmp.TRAFFIC, cmp.BOTH):
        pieces.append(f"{_signed(traffic.value)} of it is the traffic "
                      f"({_moved(result.explained_by)})")
    if result.kind in (cmp.SYSTEM, cmp.BOTH):
        words = _system_words(result)
        pieces.append(f"{_signed(system.value)} the system ({_interval(system)}"
                      + (f"; {words}" if words else "") + ")")
    else:
        pieces.append(f"{_signed(system.value)} the system, within noise ({_interval(system)})")
    lead = "the system: " if result.kind == cmp.SYSTEM else \
        "the traffic: " if result.kind == cmp.TRAFFIC else "the traffic and the system: "
    return lead + pieces[0] + ": " + ", ".join(pieces[1:]) + after
