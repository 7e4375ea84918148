"""Is speculation paying off: the floors and thresholds of the advisor's judgement
(`report.advisor`, docs/advisor.md; the alert rules restate them) and the findings of its
estimate, declared here with them. Pure functions over its `Advice`."""
from __future__ import annotations

from .. import messages as m
from .. import names, signals
from ..findings import INFO, WARNING, Alert, Finding, FindingSpec

MIN_STEPS = 30      # measured steps of a bucket before it is judged
MIN_DRAFTS = 100    # request-steps verified before acceptance is judged
MIN_GAIN = 1.03     # a setting is recommended only when it beats the current one by this
SMALL_GAIN = 1.10   # speculation "gains little" when the upper end is under this
SIGMAS = 2          # the interval: the estimate +- this many standard errors
JUDGED_SHARE = 0.9  # the share of measured steps in buckets past MIN_STEPS for a verdict

_FLOOR = (f"{MIN_STEPS} measured steps in the batch-size buckets that hold "
          f"{JUDGED_SHARE:.0%} of the measured steps, and {MIN_DRAFTS} request-steps")
SLOWER = FindingSpec(
    names.SPEC_SLOWER, WARNING,
    "the estimated speed-up against no speculation below 1.0 (its interval's upper end)",
    floor=_FLOOR, message=m.SPEC_SLOWER, alert=Alert(
        "SpectraceSpeculationSlower", "Speculative decoding is slower than plain decoding",
        "The estimated speed-up against no speculation over the last 30 minutes is "
        "{{ $value | printf \"%.2f\" }} (each batch-size bucket weighted by its measured "
        "steps; a plain step from the target's forward fitted against its tokens). Run "
        "`spectrace report` for the interval, the batch size from which speculation loses "
        "and the setting that serves each batch size its best number of draft tokens "
        "(finding speculation.slower). One figure for every series the rules match: narrow "
        "them to one deployment (`spectrace grafana --matchers`).",
        severity="warning", for_="30m", windowed=True))
GAINS_LITTLE = FindingSpec(
    names.SPEC_SMALL_GAIN, INFO,
    f"the estimated speed-up's upper end below {SMALL_GAIN:g}: speculation gains little",
    floor=_FLOOR, message=m.SPEC_SMALL_GAIN)
FEWER_STEPS = FindingSpec(
    names.SPEC_FEWER_STEPS, INFO,
    f"fewer draft steps are predicted to give at least {MIN_GAIN - 1:.0%} more tokens per "
    "second",
    floor=_FLOOR, message=m.SPEC_FEWER_STEPS)


# the advisor's findings: what speculation costs, not how much the target accepts (the verdict
# calls them "slower", never "underperforming", which stays for acceptance: report.verdict)
COST_CODES = frozenset({names.SPEC_SLOWER, names.SPEC_SMALL_GAIN, names.SPEC_FEWER_STEPS})


def speculation_off(runtime: str | None) -> str:
    """How a runtime is served without speculation, in words that follow "serve"."""
    if runtime == names.RUNTIME_VLLM:
        return "without --speculative-config"
    return "without --speculative-algorithm"


def batch_words(buckets) -> str:
    """'batch size 1', 'batch sizes 1 and 4-7': the measured buckets the estimate weighs."""
    labels = [b.bucket for b in buckets]
    if len(labels) == 1:
        return f"batch size {labels[0]}"
    return f"batch sizes {', '.join(labels[:-1])} and {labels[-1]}"


def _advice(adv, current: int, better: bool) -> str:
    if adv.counted:
        return m.ADVICE_OFF_COUNTED.format(without=speculation_off(adv.runtime))
    if adv.batch_flags:
        return m.ADVICE_BY_BATCH.format(flags=adv.batch_flags, loses=adv.loses_from or "-")
    if better and adv.best == 0:
        return m.ADVICE_OFF.format(without=speculation_off(adv.runtime),
                                   gain=f"{adv.gain:.2f}")
    if better:
        return m.ADVICE_BEST.format(flags=adv.flags, gain=f"{adv.gain:.2f}")
    return m.ADVICE_NONE.format(current=current)


def findings(adv) -> list[Finding]:
    """What the advice (`advisor.Advice`) says is wrong or could be better; nothing until
    its statistical floor is met."""
    if not adv.judged or adv.speedup is None:
        return []
    out = []
    current = adv.configured_steps
    better = adv.best is not None and adv.best != current and adv.gain is not None
    usable = [b for b in adv.buckets if b.options]
    main = max(usable, key=lambda b: b.phases[signals.PHASE_STEP].samples)
    step = main.phases[signals.PHASE_STEP].mean + (
        main.phases[signals.PHASE_BETWEEN].mean if signals.PHASE_BETWEEN in main.phases else 0)
    how = (m.KNOWN_FROM_COUNTS.format(drafts=f"{adv.drafts:.0f}") if adv.counted
           else "measured")
    facts = dict(speedup=f"{adv.speedup:.2f}", upper=f"{adv.speedup_upper:.2f}",
                 lower=f"{adv.speedup_lower:.2f}", advice=_advice(adv, current, better),
                 estimate=m.ESTIMATE_BOUND if adv.bound else m.ESTIMATE_FIT,
                 steps=sum(b.phases[signals.PHASE_STEP].samples for b in adv.buckets
                           if signals.PHASE_STEP in b.phases),
                 drafts=int(adv.drafts), step_ms=f"{step * 1e3:.2f}",
                 plain_ms=f"{main.options[0].step_seconds * 1e3:.2f}",
                 tokens=f"{main.options[-1].tokens_per_step:.2f}", k=current,
                 best=adv.best if adv.best is not None else current,
                 batch=batch_words(usable), how=how)
    spec = {"slower": SLOWER, "small_gain": GAINS_LITTLE}.get(adv.verdict)
    if spec is not None:
        out.append(spec.found({
            "estimated_speedup": adv.speedup, "estimated_speedup_lower": adv.speedup_lower,
            "estimated_speedup_upper": adv.speedup_upper,
            "estimate": "bound" if adv.bound else "fit", "known_from_counts": adv.counted,
            "measured_steps": facts["steps"], "num_steps": current}, **facts))
    if better and adv.best > 0:
        out.append(FEWER_STEPS.found({
            "best_num_steps": adv.best, "num_steps": current, "predicted_gain": adv.gain,
            "flags": adv.flags}, best=adv.best, current=current, gain=f"{adv.gain:.2f}",
            flags=adv.flags))
    return out
