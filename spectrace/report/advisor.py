"""Is speculation paying off, at which batch sizes, and would another number of draft tokens
pay more? Pure functions over what spectrace measured: per-position acceptance and per-phase
step cost (`step_cost`), per batch-size bucket. docs/advisor.md states the model; in short:

- Tokens per request-step with K' draft tokens, K' <= K (the configured K): acceptance is a
  prefix property (position p is accepted only when every position before it was), so
  E[tokens] = L(K') = 1 + sum_{p < K'} accepted_p / drafted_p, exactly (bonus token included).
- A plain decode step at the bucket's mean batch B costs the target's forward at B tokens,
  from a line fitted to the measured forwards against their tokens (`cost_model`), scaled
  to the bucket's own measured forwards (forward_b x line(B) / line(tokens_b)), plus what
  a step does besides the forward and the draft (input preparation, sampling, bookkeeping:
  step - draft - draft_extend - target_forward, measured) and the time between steps. The
  speed-up L(K) * T_plain / T(K) is an estimate with a standard error. Where there is no fit
  (the forwards' tokens did not vary: one batch size and one K; or no forward measured, as
  on vLLM's V2 model runner before 0.28) the plain step is bounded by the verify phase instead and the
  speed-up is an upper bound, labelled so.
- Time per step with K' (chain drafting): T(K') = between + step(K) - (K - K') * c - the
  fitted forward's saving on K - K' fewer tokens per request (0 without a fit), c the
  draft cost of one position (the slope of the draft phase over K when several K were
  measured, else draft(K) over its draft forwards: K - 1 in SGLang, K in vLLM).

It cannot predict K' > K (no acceptance was measured there) nor tree drafting's smaller
trees (top-k > 1).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from .. import signals
from ..rules.speculation import (  # noqa: F401 (the floors, re-exported by their old name)
    JUDGED_SHARE, MIN_DRAFTS, MIN_GAIN, MIN_STEPS, SIGMAS, SMALL_GAIN,
)
from ..rules import nothing_accepted as no_acceptance
from .cost_model import ForwardFit, ForwardSums, fit
from .runtime_settings import by_batch_size, fixed_k

runtime_flags = fixed_k  # the flags of a fixed K (`runtime_settings`), by their old name


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
    """One batch-size bucket: what its steps cost, a plain step's estimated cost, the
    speed-up against no speculation with its standard error, and each K' <= K."""
    bucket: str
    num_steps: int                       # the K most of its measured steps ran with
    phases: dict[str, Mean]              # phase -> mean seconds at that K
    draft_per_position: float | None     # seconds
    speedup: float | None                # estimated, against no speculation
    speedup_stderr: float | None
    options: tuple[Option, ...]          # K' = 0 .. K
    best: int | None
    judged: bool                         # enough samples to judge (MIN_STEPS, MIN_DRAFTS)
    plain_seconds: float | None = None   # a plain decode step, between steps included
    bound: bool = True                   # the plain step (so the speed-up) is a bound only
    batch_size: float | None = None      # mean requests of the measured forwards

    @property
    def interval(self) -> tuple[float, float] | None:
        if self.speedup is None:
            return None
        se = SIGMAS * (self.speedup_stderr or 0.0)
        return self.speedup - se, self.speedup + se

    @property
    def verdict(self) -> str:
        return judge(self.interval, self.judged, self.bound)


@dataclass(frozen=True, slots=True)
class Advice:
    """All buckets together (weighted by measured steps), the best K' and its flags, the
    best K' of each bucket and the setting that serves them."""
    runtime: str | None
    topk: int | None
    configured_steps: int
    buckets: tuple[BucketAdvice, ...]
    speedup: float | None
    speedup_upper: float | None          # speedup + SIGMAS standard errors
    best: int | None
    gain: float | None                   # predicted tokens/s of best over current
    flags: str | None                    # the runtime flags of the best setting
    judged: bool
    verdict: str                         # slower | small_gain | pays | uncertain | unknown
    notes: tuple[str, ...]
    drafts: float = 0                    # request-steps the acceptance is measured on
    speedup_lower: float | None = None   # speedup - SIGMAS standard errors
    bound: bool = True                   # some bucket's estimate is a bound only
    fit: ForwardFit | None = None        # the target's forward against its tokens
    loses_from: str | None = None        # the bucket from which no K' beats plain decoding
    batch_flags: str | None = None       # the setting serving each bucket's best K'
    counted: bool = False                # the verdict is known from the counts alone

    @property
    def best_by_bucket(self) -> list[tuple[str, int]]:
        return [(b.bucket, b.best) for b in self.buckets if b.best is not None]

    def to_json(self) -> dict:
        return {
            "runtime": self.runtime, "topk": self.topk,
            "configured_num_steps": self.configured_steps,
            "estimated_speedup": self.speedup, "estimated_speedup_lower": self.speedup_lower,
            "estimated_speedup_upper": self.speedup_upper,
            "estimate": "bound" if self.bound else "fit",
            "verdict": self.verdict, "judged": self.judged,
            "known_from_counts": self.counted,
            "best_num_steps": self.best, "predicted_gain": self.gain, "flags": self.flags,
            "loses_from_batch_size": self.loses_from, "batch_size_flags": self.batch_flags,
            "forward_fit": self.fit.to_json() if self.fit else None,
            "notes": list(self.notes),
            "buckets": [_bucket_json(b) for b in self.buckets],
        }


def _bucket_json(b: BucketAdvice) -> dict:
    lo, hi = b.interval or (None, None)
    return {
        "batch_size_bucket": b.bucket, "num_steps": b.num_steps,
        "phase_seconds": {k: v.mean for k, v in b.phases.items()},
        "phase_samples": {k: v.samples for k, v in b.phases.items()},
        "draft_seconds_per_position": b.draft_per_position,
        "mean_batch_size": b.batch_size, "plain_step_seconds": b.plain_seconds,
        "estimate": "bound" if b.bound else "fit",
        "estimated_speedup": b.speedup, "estimated_speedup_stderr": b.speedup_stderr,
        "estimated_speedup_lower": lo, "estimated_speedup_upper": hi,
        "verdict": b.verdict, "best_num_steps": b.best, "judged": b.judged,
        "options": [{"num_steps": o.num_steps, "tokens_per_step": o.tokens_per_step,
                     "step_seconds": o.step_seconds, "tokens_per_second": o.tokens_per_second,
                     "relative": o.relative} for o in b.options],
    }


def judge(interval: tuple[float, float] | None, judged: bool, bound: bool) -> str:
    """The verdict of an estimate's interval (lower, upper): `slower` when even its upper end
    is below 1.0, `small_gain` below SMALL_GAIN, `pays` when its lower end is at least 1.0
    (never from a bound: a bound says how much at most), else `uncertain`; `unknown` before
    the floor of measured steps and request-steps."""
    if interval is None or not judged:
        return "unknown"
    lower, upper = interval
    if upper < 1.0:
        return "slower"
    if upper < SMALL_GAIN:
        return "small_gain"
    return "pays" if lower >= 1.0 and not bound else "uncertain"


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


def _per_position(costs: dict, ks: list[int], k: int, draft: Mean | None,
                  runtime: str | None) -> float | None:
    """The draft cost of one position: the slope of the draft phase over the K measured,
    else draft(K) over its draft forwards."""
    pts = [(kk, costs[(signals.PHASE_DRAFT, kk)].mean) for kk in ks
           if (signals.PHASE_DRAFT, kk) in costs
           and costs[(signals.PHASE_DRAFT, kk)].samples >= MIN_STEPS]
    if len(pts) >= 2:
        mk = sum(x for x, _ in pts) / len(pts)
        my = sum(y for _, y in pts) / len(pts)
        sxx = sum((x - mk) ** 2 for x, _ in pts)
        if sxx:
            return max(sum((x - mk) * (y - my) for x, y in pts) / sxx, 0.0)
    if draft is None or k <= 0:
        return None
    forwards = draft_forwards(runtime, k)
    return draft.mean / forwards if forwards > 0 else 0.0


def _se(*means: Mean | None) -> float:
    """The standard error of a sum of independent means."""
    return math.sqrt(sum((m.stderr or 0.0) ** 2 for m in means if m is not None))


def _plain(phases: dict, forward: ForwardSums | None, model: ForwardFit | None,
           b: float) -> tuple[float, float, bool, float] | None:
    """(a plain decode step's seconds, its standard error, whether it is a bound, the
    forward's saving per fewer draft token per request) in one bucket."""
    get = phases.get
    step, verify, fwd = get(signals.PHASE_STEP), get(signals.PHASE_VERIFY), get(
        signals.PHASE_FORWARD)
    if step is None or verify is None:
        return None
    if model is None or fwd is None or forward is None or not forward.n:
        return b + verify.mean, _se(verify, get(signals.PHASE_BETWEEN)), True, 0.0
    draft, extend = get(signals.PHASE_DRAFT), get(signals.PHASE_DRAFT_EXTEND)
    rest = max(step.mean - fwd.mean - (draft.mean if draft else 0.0)
               - (extend.mean if extend else 0.0), 0.0)
    batch = forward.mean_requests
    # the line's shape, anchored at this bucket's own forwards (measured with its steps):
    # a load that differs between the times two batch sizes ran scales both alike
    at_tokens = model.at(forward.mean_tokens)[0]
    scale = fwd.mean / at_tokens if at_tokens > 0 else 1.0
    f_plain, f_se = (scale * v for v in model.at(batch))
    saving = scale * model.slope * batch  # the forward of one fewer token per request
    # the rest is a difference of means that move together (their covariance is not kept):
    # taken at its value, as small beside the forward
    se = math.sqrt(f_se ** 2 + (fwd.stderr or 0.0) ** 2 * (f_plain / fwd.mean) ** 2
                   + _se(get(signals.PHASE_BETWEEN)) ** 2) if fwd.mean > 0 else f_se
    return b + f_plain + rest, se, False, saving


def _bucket(bucket: str, costs: dict, forwards: dict, model: ForwardFit | None,
            probs: list[float], drafts: float, len_rse: float,
            runtime: str | None = None) -> BucketAdvice | None:
    """`costs`: (phase, K) -> Mean, for this bucket; `forwards`: (bucket, K) -> the sums of
    the measured target forwards."""
    ks = sorted({k for (ph, k) in costs if ph == signals.PHASE_STEP})
    if not ks:
        return None
    k = max(ks, key=lambda x: costs[(signals.PHASE_STEP, x)].samples)
    phases = {ph: m for (ph, kk), m in costs.items() if kk == k}
    forward = forwards.get((bucket, k))
    step, between = phases.get(signals.PHASE_STEP), phases.get(signals.PHASE_BETWEEN)
    b = between.mean if between else 0.0
    per_pos = _per_position(costs, ks, k, phases.get(signals.PHASE_DRAFT), runtime)
    plain = _plain(phases, forward, model, b) if k > 0 else None
    options: list[Option] = []
    speedup = se = plain_s = None
    bound = True
    if plain is not None and per_pos is not None:
        plain_s, plain_se, bound, saving = plain
        t_k = b + step.mean
        rate_k = tokens_per_step(probs, k) / t_k
        for kp in range(0, k + 1):
            if kp == 0:
                length, t = 1.0, plain_s
            else:
                length = tokens_per_step(probs, kp)
                t = t_k - (k - kp) * (per_pos + saving)
            t = max(t, 1e-12)
            options.append(Option(kp, length, t, length / t, (length / t) / rate_k))
        speedup = tokens_per_step(probs, k) * plain_s / t_k
        rse = [len_rse, plain_se / plain_s if plain_s > 0 else 0.0, _se(step, between) / t_k]
        se = abs(speedup) * math.sqrt(sum(r * r for r in rse))
    best = max(options, key=lambda o: o.tokens_per_second).num_steps if options else None
    judged = step is not None and step.samples >= MIN_STEPS and drafts >= MIN_DRAFTS
    return BucketAdvice(bucket, k, phases, per_pos, speedup, se, tuple(options), best, judged,
                        plain_s, bound, forward.mean_requests if forward else None)


def _forward_sums(phase_costs: dict) -> dict[tuple[str, int], ForwardSums]:
    """(bucket, K) -> the sums of its measured target forwards."""
    out = {}
    for (phase, bucket, k), v in phase_costs.items():
        if phase == signals.PHASE_FORWARD and len(v) >= 7 and v[2]:
            out[(str(bucket), int(k))] = ForwardSums(v[2], v[0], v[1], *v[3:7])
    return out


def _by_bucket(phase_costs: dict) -> dict[str, dict]:
    by_bucket: dict[str, dict] = {}
    for (phase, bucket, k), v in phase_costs.items():
        m = mean_of(v[0], v[1], int(v[2]))
        try:
            k = int(k)
        except (TypeError, ValueError):
            continue
        if m is not None:
            by_bucket.setdefault(str(bucket), {})[(phase, k)] = m
    return by_bucket


def _loses_from(buckets: list[BucketAdvice]) -> str | None:
    """The smallest bucket from which every larger measured one is best served without
    speculation (None when the largest is not)."""
    out = None
    for b in reversed(buckets):
        if b.best != 0:
            break
        out = b.bucket
    return out


def advise(phase_costs: dict, accepted: list, drafted: list, drafts: float,
           length_counts: dict, runtime: str | None = None, topk: int | None = None
           ) -> Advice | None:
    """`phase_costs`: (phase, bucket, K) -> (seconds, squares, samples[, tokens, squared
    tokens, seconds x tokens, requests]), as the metrics hold them. None when no step
    cost was measured."""
    from ..families.step_cost import BUCKET_INDEX
    by_bucket = _by_bucket(phase_costs)
    if not by_bucket:
        return None
    forwards = _forward_sums(phase_costs)
    model = fit(list(forwards.values()))
    probs = acceptance_probabilities(list(accepted), list(drafted), drafts)
    len_rse = _length_rse(length_counts, drafts)
    notes = []
    tree = topk is not None and topk > 1
    if tree:
        notes.append(f"top-k {topk} (tree drafting): the accept length of a smaller tree is "
                     f"not known from these counts; only the speed-up is estimated")
    buckets = []
    for label in sorted(by_bucket, key=lambda x: BUCKET_INDEX.get(x, 99)):
        adv = _bucket(label, by_bucket[label], forwards, model, probs, drafts, len_rse, runtime)
        if adv is not None:
            buckets.append(adv)
    configured = max((b.num_steps for b in buckets), default=0)
    notes.append(f"settings above {configured} draft steps cannot be predicted (no "
                 f"acceptance measured there)")
    usable = [b for b in buckets if b.options]
    bound = any(b.bound for b in usable) or not usable
    if usable and bound:
        why = ("no target forward was measured: vLLM's V2 model runner before 0.28 has no "
               "forward-start mark to time it from"
               if not forwards else "too few forwards, or their tokens varied too little: "
               "one batch size and one K, say")
        notes.append(f"no fit of the target's forward against its tokens ({why}), so a plain "
                     f"step is bounded by the verify phase and the speed-up is an upper bound")
    weights = [b.phases[signals.PHASE_STEP].samples for b in usable]
    speedup = upper = lower = best = gain = flags = batch_flags = None
    if usable:
        w = sum(weights)
        speedup = sum(b.speedup * n for b, n in zip(usable, weights)) / w
        se = math.sqrt(sum((b.speedup_stderr or 0.0) ** 2 * n * n
                           for b, n in zip(usable, weights))) / w
        upper, lower = speedup + SIGMAS * se, speedup - SIGMAS * se
    # known from the counts alone (issue 49): no draft token accepted past the floor makes
    # every step one token for a target forward and the drafting, whatever the timings say
    counted = speedup is not None and no_acceptance.holds(drafts, sum(accepted))
    if counted:  # below 1.0 whatever the step costs: the timing's estimate is detail
        notes.append(f"no draft token accepted in {drafts:.0f} request-steps: each step makes "
                     f"one token for a target forward and the drafting, so speculation is "
                     f"slower than none whatever the step costs (the estimate "
                     f"{speedup:.2f}x is detail, capped at 1.00x)")
        speedup, upper, lower = min(speedup, 1.0), min(upper, 1.0), min(lower, 1.0)
    if usable and not tree:
        best, gain = _best_over_mix(usable, weights, 0 if counted else None)
        flags = fixed_k(runtime, best)
        batch_flags = by_batch_size(runtime, [(b.bucket, b.best) for b in usable])
    # judged once the buckets past the floor hold nearly every measured step: a few steps
    # in a passing bucket (requests arriving one by one) do not hold the verdict back
    judged = counted or bool(usable) and sum(n for b, n in zip(usable, weights) if b.judged) \
        >= JUDGED_SHARE * sum(weights)
    verdict = "slower" if counted else judge(
        None if speedup is None else (lower, upper), judged, bound)
    return Advice(runtime, topk, configured, tuple(buckets), speedup, upper, best, gain,
                  flags, judged, verdict, tuple(notes), drafts, lower, bound, model,
                  None if tree else _loses_from(usable), batch_flags, counted)


def _best_over_mix(usable: list[BucketAdvice], weights: list[int], known: int | None = None
                   ) -> tuple[int, float]:
    """The K' with the most tokens/s over the observed mix of steps (per request), and its
    gain over the current K (the current K and 1.0 unless it gains MIN_GAIN); `known`: the
    K' the counts decide (0 when no draft token is accepted), its predicted gain."""
    common = min(len(b.options) for b in usable)
    rates = []
    for kp in range(common):
        time_ = sum(b.options[kp].step_seconds * n for b, n in zip(usable, weights))
        toks = sum(b.options[kp].tokens_per_step * n for b, n in zip(usable, weights))
        rates.append(toks / time_)
    current = min(b.num_steps for b in usable)
    best = max(range(common), key=lambda kp: rates[kp]) if known is None else known
    gain = rates[best] / rates[min(current, common - 1)]
    return (current, 1.0) if gain < MIN_GAIN and known is None else (best, gain)
