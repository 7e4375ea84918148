"""Is speculation paying off, and would another number of draft tokens pay more? Pure
functions over what spectrace measured: per-position acceptance and per-phase step cost
(`step_cost`), per batch-size bucket. docs/advisor.md states the model; in short:

- Tokens per request-step with K' draft tokens, K' <= K (the configured K): acceptance is a
  prefix property (position p is accepted only when every position before it was), so a
  request-step that accepted c drafts would have accepted min(c, K') of K', and
  E[tokens] = L(K') = 1 + sum_{p < K'} accepted_p / drafted_p, exactly (bonus token included).
- Time per step with K' (chain drafting): T(K') = between + step(K) - (K - K') * c, where c is
  the draft cost of one position (the slope of the draft phase over K when several K were
  measured, else draft(K) over its draft forwards: K - 1 in SGLang, K in vLLM) and the verify and draft-extend phases are taken as they are
  at K (a verify of fewer tokens costs at most as much: an upper bound on T(K')).
- No speculation (K' = 0): one token per T_plain = between + verify(K): a plain decode step
  costs at most a verify step of K + 1 tokens at the same batch size (the same forward with
  fewer tokens), so the estimated speed-up L(K) * T_plain / T(K) is an upper bound.

It cannot predict K' > K (no acceptance was measured there), tree drafting (top-k > 1:
the tree SGLang builds with fewer steps or draft tokens keeps other nodes), nor verify time
falling with fewer tokens (it is held at its K value).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from . import signals

MIN_STEPS = 30      # measured steps of a bucket before it is judged
MIN_DRAFTS = 100    # request-steps verified before acceptance is judged
MIN_GAIN = 1.03     # a setting is recommended only when it beats the current one by this
SMALL_GAIN = 1.10   # speculation "gains little" when the upper bound is under this


@dataclass(frozen=True, slots=True)
class Mean:
    """A measured mean and its standard error (None with a single sample)."""
    mean: float
    stderr: float | None
    samples: int


def mean_of(seconds: float, squares: float, samples: int) -> Mean | None:
    if samples <= 0:
        return None
    m = seconds / samples
    if samples < 2:
        return Mean(m, None, samples)
    var = max(squares / samples - m * m, 0.0) * samples / (samples - 1)
    return Mean(m, math.sqrt(var / samples), samples)


@dataclass(frozen=True, slots=True)
class Option:
    """One number of draft tokens K' (0: no speculation) as the model predicts it."""
    num_steps: int
    tokens_per_step: float    # per request, bonus included
    step_seconds: float       # between + step
    tokens_per_second: float  # per request
    relative: float           # tokens_per_second / that of the current K


@dataclass(frozen=True, slots=True)
class BucketAdvice:
    """One batch-size bucket: what its steps cost, the speed-up against no speculation, and
    each K' <= K."""
    bucket: str
    num_steps: int                       # the K most of its measured steps ran with
    phases: dict[str, Mean]              # phase -> mean seconds at that K
    draft_per_position: float | None     # seconds
    speedup: float | None                # estimated, against no speculation (upper bound)
    speedup_stderr: float | None
    options: tuple[Option, ...]          # K' = 0 .. K
    best: int | None
    judged: bool                         # enough samples to judge (MIN_STEPS, MIN_DRAFTS)


@dataclass(frozen=True, slots=True)
class Advice:
    """All buckets together (weighted by measured steps), the best K' and its flags."""
    runtime: str | None
    topk: int | None
    configured_steps: int
    buckets: tuple[BucketAdvice, ...]
    speedup: float | None
    speedup_upper: float | None          # speedup + 2 standard errors
    best: int | None
    gain: float | None                   # predicted tokens/s of best over current
    flags: str | None                    # the runtime flags of the best setting
    judged: bool
    verdict: str                         # "slower" | "small_gain" | "pays" | "unknown"
    notes: tuple[str, ...]
    drafts: float = 0                    # request-steps the acceptance is measured on

    def to_json(self) -> dict:
        return {
            "runtime": self.runtime, "topk": self.topk,
            "configured_num_steps": self.configured_steps,
            "estimated_speedup": self.speedup, "estimated_speedup_upper": self.speedup_upper,
            "verdict": self.verdict, "judged": self.judged,
            "best_num_steps": self.best, "predicted_gain": self.gain, "flags": self.flags,
            "notes": list(self.notes),
            "findings": [{"code": c, "severity": sev, "message": msg}
                         for c, sev, msg in findings(self)],
            "buckets": [{
                "batch_size_bucket": b.bucket, "num_steps": b.num_steps,
                "phase_seconds": {k: v.mean for k, v in b.phases.items()},
                "phase_samples": {k: v.samples for k, v in b.phases.items()},
                "draft_seconds_per_position": b.draft_per_position,
                "estimated_speedup": b.speedup, "estimated_speedup_stderr": b.speedup_stderr,
                "best_num_steps": b.best, "judged": b.judged,
                "options": [{"num_steps": o.num_steps, "tokens_per_step": o.tokens_per_step,
                             "step_seconds": o.step_seconds,
                             "tokens_per_second": o.tokens_per_second,
                             "relative": o.relative} for o in b.options],
            } for b in self.buckets],
        }


def runtime_flags(runtime: str | None, num_steps: int) -> str:
    """The exact flags that serve `num_steps` chain draft tokens (0: no speculation)."""
    if runtime == signals.RUNTIME_VLLM:
        if num_steps == 0:
            return "serve without --speculative-config"
        return (f"--speculative-config '{{..., \"num_speculative_tokens\": {num_steps}}}' "
                f"(num_speculative_tokens={num_steps}, other keys unchanged)")
    if num_steps == 0:
        return "serve without --speculative-algorithm (no speculation)"
    return (f"--speculative-num-steps {num_steps} --speculative-eagle-topk 1 "
            f"--speculative-num-draft-tokens {num_steps + 1}")


def acceptance_probabilities(accepted: list, drafted: list, drafts: float) -> list[float]:
    """P(position p accepted | drafted), per position; `drafted` may be shorter (an older
    spectrace): `drafts` stands in for it."""
    out = []
    for p, a in enumerate(accepted):
        d = drafted[p] if p < len(drafted) and drafted[p] else drafts
        out.append(a / d if d else 0.0)
    return out


def tokens_per_step(probs: list[float], k: int) -> float:
    return 1.0 + sum(probs[:k])


def _length_rse(length_counts: dict, drafts: float) -> float:
    """Relative standard error of the mean accept length."""
    n = sum(length_counts.values())
    if n < 2:
        return 0.0
    m = sum(int(k) * v for k, v in length_counts.items()) / n
    var = sum(v * (int(k) - m) ** 2 for k, v in length_counts.items()) / (n - 1)
    return math.sqrt(var / n) / m if m else 0.0


def draft_forwards(runtime: str | None, k: int) -> int:
    """Draft forwards in the draft phase of a K-step chain: SGLang runs K - 1 (its first
    draft token comes from the draft-extend of the step before; with 1 step it only
    samples), vLLM's EAGLE proposer K."""
    return k - 1 if runtime != signals.RUNTIME_VLLM else k


def _bucket(bucket: str, costs: dict, probs: list[float], drafts: float, len_rse: float,
            runtime: str | None = None) -> BucketAdvice | None:
    """`costs`: (phase, K) -> Mean, for this bucket."""
    ks = sorted({k for (ph, k) in costs if ph == signals.PHASE_STEP})
    if not ks:
        return None
    k = max(ks, key=lambda x: costs[(signals.PHASE_STEP, x)].samples)
    phases = {ph: m for (ph, kk), m in costs.items() if kk == k}
    step, verify = phases.get(signals.PHASE_STEP), phases.get(signals.PHASE_VERIFY)
    between = phases.get(signals.PHASE_BETWEEN)
    draft = phases.get(signals.PHASE_DRAFT)
    b = between.mean if between else 0.0
    # draft cost of one position: the slope over the K measured, else draft(K) / K
    pts = [(kk, costs[(signals.PHASE_DRAFT, kk)].mean) for kk in ks
           if (signals.PHASE_DRAFT, kk) in costs and costs[(signals.PHASE_DRAFT, kk)].samples
           >= MIN_STEPS]
    per_pos = None
    if len(pts) >= 2:
        mk = sum(x for x, _ in pts) / len(pts)
        my = sum(y for _, y in pts) / len(pts)
        sxx = sum((x - mk) ** 2 for x, _ in pts)
        per_pos = max(sum((x - mk) * (y - my) for x, y in pts) / sxx, 0.0) if sxx else None
    if per_pos is None and draft is not None and k > 0:
        forwards = draft_forwards(runtime, k)
        per_pos = draft.mean / forwards if forwards > 0 else 0.0
    options: list[Option] = []
    speedup = se = None
    if step is not None and verify is not None and per_pos is not None and k > 0:
        t_k = b + step.mean
        plain = b + verify.mean
        rate_k = tokens_per_step(probs, k) / t_k
        for kp in range(0, k + 1):
            if kp == 0:
                length, t = 1.0, plain
            else:
                length, t = tokens_per_step(probs, kp), t_k - (k - kp) * per_pos
            t = max(t, 1e-12)
            options.append(Option(kp, length, t, length / t, (length / t) / rate_k))
        speedup = tokens_per_step(probs, k) * plain / t_k
        rse = [len_rse]
        for m, total in ((step, t_k), (verify, plain)):
            if m.stderr is not None:
                rse.append(m.stderr / total)
        se = speedup * math.sqrt(sum(r * r for r in rse))
    best = max(options, key=lambda o: o.tokens_per_second).num_steps if options else None
    judged = (step is not None and step.samples >= MIN_STEPS and drafts >= MIN_DRAFTS)
    return BucketAdvice(bucket, k, phases, per_pos, speedup, se, tuple(options), best, judged)


def advise(phase_costs: dict, accepted: list, drafted: list, drafts: float,
           length_counts: dict, runtime: str | None = None, topk: int | None = None
           ) -> Advice | None:
    """`phase_costs`: (phase, bucket, K) -> (seconds, squares, samples), as the metrics
    hold them. None when no step cost was measured."""
    from .families.step_cost import BUCKET_INDEX
    by_bucket: dict[str, dict] = {}
    for (phase, bucket, k), (sec, sq, n) in phase_costs.items():
        m = mean_of(sec, sq, int(n))
        try:
            k = int(k)
        except (TypeError, ValueError):
            continue
        if m is not None:
            by_bucket.setdefault(str(bucket), {})[(phase, k)] = m
    if not by_bucket:
        return None
    probs = acceptance_probabilities(list(accepted), list(drafted), drafts)
    len_rse = _length_rse(length_counts, drafts)
    notes = []
    tree = topk is not None and topk > 1
    if tree:
        notes.append(f"top-k {topk} (tree drafting): the accept length of a smaller tree is "
                     f"not known from these counts; only the speed-up is estimated")
    buckets = []
    for label in sorted(by_bucket, key=lambda x: BUCKET_INDEX.get(x, 99)):
        adv = _bucket(label, by_bucket[label], probs, drafts, len_rse, runtime)
        if adv is not None:
            buckets.append(adv)
    configured = max((b.num_steps for b in buckets), default=0)
    notes.append(f"settings above {configured} draft steps cannot be predicted (no "
                 f"acceptance measured there); verify time is held at its measured value")
    usable = [b for b in buckets if b.options]
    weights = [b.phases[signals.PHASE_STEP].samples for b in usable]
    speedup = upper = best = gain = flags = None
    if usable:
        w = sum(weights)
        speedup = sum(b.speedup * n for b, n in zip(usable, weights)) / w
        se = math.sqrt(sum((b.speedup_stderr or 0.0) ** 2 * n * n
                           for b, n in zip(usable, weights))) / w
        upper = speedup + 2 * se
        if not tree:
            common = min(len(b.options) for b in usable)
            # tokens/s over the observed mix of steps, each K' (per request)
            rates = []
            for kp in range(common):
                time_ = sum(b.options[kp].step_seconds * n for b, n in zip(usable, weights))
                toks = sum(b.options[kp].tokens_per_step * n for b, n in zip(usable, weights))
                rates.append(toks / time_)
            current = min(b.num_steps for b in usable)
            best = max(range(common), key=lambda kp: rates[kp])
            gain = rates[best] / rates[min(current, common - 1)]
            if gain < MIN_GAIN:
                best, gain = current, 1.0
            flags = runtime_flags(runtime, best)
    judged = bool(usable) and all(b.judged for b in usable)
    if speedup is None or not judged:
        verdict = "unknown"
    elif upper < 1.0:
        verdict = "slower"
    elif upper < SMALL_GAIN:
        verdict = "small_gain"
    else:
        verdict = "pays"
    return Advice(runtime, topk, configured, tuple(buckets), speedup, upper, best, gain,
                  flags, judged, verdict, tuple(notes), drafts)


def findings(adv: Advice) -> list[tuple[str, str, str]]:
    """(code, severity, message) of what the advice says is wrong or could be better,
    worded by `messages`; nothing until the statistical floor is met."""
    from . import messages as m
    if not adv.judged or adv.speedup is None:
        return []
    out = []
    current = adv.configured_steps
    better = adv.best is not None and adv.best != current and adv.gain is not None
    advice = (m.ADVICE_BEST.format(flags=adv.flags, gain=f"{adv.gain:.2f}") if better
              else m.ADVICE_NONE.format(current=current))
    main = max((b for b in adv.buckets if b.options),
               key=lambda b: b.phases[signals.PHASE_STEP].samples)
    step = main.phases[signals.PHASE_STEP].mean + (
        main.phases[signals.PHASE_BETWEEN].mean if signals.PHASE_BETWEEN in main.phases else 0)
    plain = main.options[0].step_seconds
    facts = dict(speedup=f"{adv.speedup:.2f}", upper=f"{adv.speedup_upper:.2f}", advice=advice,
                 steps=sum(b.phases[signals.PHASE_STEP].samples for b in adv.buckets
                           if signals.PHASE_STEP in b.phases),
                 drafts=int(adv.drafts), step_ms=f"{step * 1e3:.2f}",
                 plain_ms=f"{plain * 1e3:.2f}",
                 tokens=f"{main.options[-1].tokens_per_step:.2f}")
    if adv.verdict == "slower":
        out.append((m.SPEC_SLOWER.code, signals.REPORT_FINDINGS[m.SPEC_SLOWER.code],
                    m.SPEC_SLOWER.render(**facts)))
    elif adv.verdict == "small_gain":
        out.append((m.SPEC_SMALL_GAIN.code, signals.REPORT_FINDINGS[m.SPEC_SMALL_GAIN.code],
                    m.SPEC_SMALL_GAIN.render(**facts)))
    if better and adv.best > 0:
        out.append((m.SPEC_FEWER_STEPS.code, signals.REPORT_FINDINGS[m.SPEC_FEWER_STEPS.code],
                    m.SPEC_FEWER_STEPS.render(best=adv.best, current=current,
                                              gain=f"{adv.gain:.2f}", flags=adv.flags)))
    return out
