"""`spectrace report` as text: the verdict (one sentence), then one block per process (and all of them together when there
are several), in words and numbers. `watch` shows the same lines, refreshed; `html` the
same figures; all of them worded by `format`."""
from __future__ import annotations

from typing import TYPE_CHECKING

from .. import signals
from .runtime_settings import describe
from .format import (
    COPY_LINE, algorithm_text, combined_title, count_text, expected_widths_text, finding_count,
    finding_severity, group_title, process_title, ratio_text, settings_lines,
)
from .records import CombinedSummary, ProcessSummary, Report, UnreadableProcess
from .verdict import verdict_of

if TYPE_CHECKING:  # the type only: the views read the advice, never run it
    from .advisor import Advice


def figure_lines(view: ProcessSummary | CombinedSummary) -> list[str]:
    """The figures of one process, or of all together (`summary.combine`)."""
    lines = []
    p = view.figures
    proc = view if isinstance(view, ProcessSummary) else None
    combined = proc is None
    if proc and proc.counted == signals.COUNTED_COPY:
        lines.append(COPY_LINE)
    if proc and proc.model:
        lines.append(f"  model {proc.model}, draft {proc.draft_model}")
    if proc and (proc.spec_algorithm or proc.spec_worker):
        lines.append(f"  {algorithm_text(proc)}")
    if p.drafts:
        lines.append(f"  speculative steps {count_text(p.steps)}, request-steps verified "
                     f"{count_text(p.drafts)}, draft tokens {count_text(p.draft_tokens)}, "
                     f"accepted {count_text(p.accepted_tokens)}")
        if p.no_draft_steps:
            lines.append(f"  steps with no draft (adaptive K = 0) {count_text(p.no_draft_steps)}"
                         f" request-steps, kept out of acceptance")
        lines.append(f"  mean acceptance length {ratio_text(p.mean_acceptance_length)} "
                     f"(1.00 = no speed-up), acceptance rate {ratio_text(p.acceptance_rate)}")
        lines.append("  acceptance per position: " + "  ".join(
            f"[{i}] {v:.2f}" for i, v in enumerate(p.acceptance_per_position)))
        lines.append("  accept-length distribution: " + "  ".join(
            f"{k}: {count_text(v)}" for k, v in p.accept_length_counts.items()))
        for b in p.breakdowns:
            lines.extend(breakdown_lines(b, p))
        lines.extend(request_lines(p))
    elif proc and proc.runtime == "vllm" and proc.role == "worker":
        lines.append("  accept counts: see the engine_core process (vLLM counts them in "
                     "its scheduler)")
    else:
        lines.append("  no verified speculative steps recorded")
    if p.speculation is not None:
        lines.extend(speculation_lines(p.speculation))
    if p.agreement_per_position:
        lines.append("  draft/target agreement per position: " + "  ".join(
            f"[{i}] {v:.2f}" for i, v in enumerate(p.agreement_per_position))
            + f"  (from {count_text(p.agreement_drafts)} sampled request-steps)")
    if p.hidden_state_passes:
        lines.append("  draft hidden-state widths: " + ", ".join(
            f"{x.pass_kind} {x.width} wide x{count_text(x.count)}"
            for x in p.hidden_state_passes) + "; expected "
            + expected_widths_text(p.expected_widths))
    lines.append(f"  fc bypass events: {count_text(p.fc_bypass)}, width mismatches: "
                 f"{count_text(p.width_mismatch)}, spectrace internal errors"
                 f"{' (all processes)' if combined else ''}: {count_text(p.internal_errors)}")
    if view.findings:
        lines.append("  findings (raised in each process, summed):" if combined
                     else "  findings:")
        for f in view.findings:
            lines.append(f"  - {f.code} ({finding_severity(f)}, x{count_text(finding_count(f))}): "
                         f"{f.message or ''}")
    else:
        lines.append("  findings: none")
    if p.telemetry_dropped:
        lines.append(f"  telemetry items dropped (queue full, export failed or file "
                     f"sink off): {count_text(p.telemetry_dropped)}")
    if proc and proc.skipped_lines:
        lines.append(f"  skipped {count_text(proc.skipped_lines)} unreadable line(s) (torn by a "
                     f"kill, or not written by spectrace)")
    return lines


def breakdown_lines(b, p) -> list[str]:
    """Acceptance by one breakdown (`families.breakdowns`), one line per bucket seen; under
    context length, what the draft's config says about its context."""
    if not b.rows:
        return []
    lines = [f"  acceptance by {b.title}:"]
    for c in b.rows:
        lines.append(f"    {c.bucket:>9}: mean accept length "
                     f"{ratio_text(c.mean_acceptance_length)}, per position "
                     + " ".join(f"[{i}] {v:.2f}" for i, v in enumerate(c.acceptance_per_position))
                     + f"  ({count_text(c.drafts)} request-steps)")
    if b.name == "context" and p.draft_context:
        lines.append("    the draft's config: " + ", ".join(
            f"{k} {v:g}" if isinstance(v, (int, float)) else f"{k} {v}"
            for k, v in p.draft_context.items()))
    return lines


def request_lines(p) -> list[str]:
    """Finished requests by mean accept length; the recorded ones lowest first."""
    r = p.requests
    if r is None:
        return []
    lines = [f"  finished requests {count_text(r.finished)}, by mean accept length: "
             + "  ".join(f"{k}: {count_text(v)}" for k, v in r.by_mean_acceptance_length.items())]
    if r.by_acceptance_rate:
        lines.append("    by acceptance rate (accepted / proposed draft tokens): " + "  ".join(
            f"{k}: {count_text(v)}" for k, v in r.by_acceptance_rate.items()))
    if r.lowest:
        lines.append(f"    lowest of {count_text(r.recorded)} recorded (request id: mean accept "
                     "length over verify steps): " + ", ".join(
                         f"{x.request_id}: {x.mean_acceptance_length:.2f}/{count_text(x.verify_steps)}"
                         for x in r.lowest[:5]))
    if r.by_label:
        lines.append(f"    by request label {r.label_key or '?'} (SPECTRACE_REQUEST_LABEL):")
        for x in r.by_label:
            lines.append(f"      {x.value}: {count_text(x.finished)} requests; " + "  ".join(
                f"{k}: {count_text(n)}" for k, n in x.by_mean_acceptance_length.items()))
    if r.label_overflow:
        lines.append(f"    {count_text(r.label_overflow)} requests had a label value past "
                     "SPECTRACE_REQUEST_LABEL_CAP distinct values and count as `other` (info)")
    return lines


def render_text(report: Report) -> str:
    """The verdict first (`verdict`), then the figures of each process."""
    lines = [verdict_of(report).sentence, f"spectrace report: {report.directory}"]
    lines.extend(settings_lines(report))
    if not report.processes:
        lines.append("  no instrumented process has written here yet")
    for p in report.processes:
        lines.append("")
        if isinstance(p, UnreadableProcess):
            lines.append(f"process {p.process}: unreadable ({p.error})")
            continue
        lines.append(process_title(p))
        lines.extend(figure_lines(p))
    for g in report.groups:  # each deployment's together, in a fleet of several
        lines.append("")
        lines.append(group_title(g))
        lines.append(f"  {g.verdict.sentence}")
        lines.extend(figure_lines(g))
    combined = report.combined
    if combined and len(combined.processes) > 1:
        lines.append("")
        lines.append(combined_title(combined))
        lines.extend(figure_lines(combined))
    return "\n".join(lines)


VERDICTS = {"slower": "speculation is SLOWER than plain decoding",
            "small_gain": "speculation gains little",
            "pays": "speculation pays",
            "uncertain": "not judged: the interval spans 1.0",
            "unknown": "too few measured steps to judge yet"}
COUNTED = " (known from the counts: no draft token accepted)"
BOUND_VERDICT = "at most this: an upper bound cannot say that speculation pays"


def speedup_text(speedup: float, interval: tuple[float, float] | None, bound: bool) -> str:
    """'1.15x (0.95x - 1.35x)', or '1.15x (upper bound)' for a bound."""
    if bound or interval is None:
        return f"{speedup:.2f}x (upper bound)"
    return f"{speedup:.2f}x ({interval[0]:.2f}x - {interval[1]:.2f}x)"


def best_text(k: int | None) -> str:
    return "-" if k is None else "off" if k == 0 else str(k)


def speculation_lines(adv: Advice) -> list[str]:
    """Step cost per phase and bucket, the estimated speed-up per bucket and over all, the
    forward's fit, the draft-token advisor (`spectrace.report.advisor`; docs/advisor.md)."""
    lines = []
    if adv.speedup is not None:
        words = BOUND_VERDICT if adv.bound and adv.verdict == "uncertain" else \
            VERDICTS[adv.verdict] + (COUNTED if adv.counted else "")
        lines.append(f"  estimated speed-up vs no speculation "
                     f"{speedup_text(adv.speedup, (adv.speedup_lower, adv.speedup_upper), adv.bound)}"
                     f": {words}")
    else:
        lines.append(f"  step cost measured; speed-up not estimated: {VERDICTS['unknown']}")
    if adv.fit is not None:
        f = adv.fit
        lines.append(f"  target forward: {f.intercept * 1e3:.2f} ms + {f.slope * 1e3:.3f} ms per "
                     f"token (spread {f.residual_sd * 1e3:.2f} ms; {count_text(f.n)} forwards, "
                     f"{f.x_min:.1f} - {f.x_max:.1f} tokens on average by bucket)")
    for b in adv.buckets:
        phases = "  ".join(f"{ph} {m.mean * 1e3:.2f}" for ph, m in b.phases.items())
        n = b.phases[signals.PHASE_STEP].samples if signals.PHASE_STEP in b.phases else 0
        size = f", mean batch {b.batch_size:.1f}" if b.batch_size else ""
        lines.append(f"  batch {b.bucket}, K={b.num_steps}, {count_text(n)} measured steps{size}: "
                     f"ms per phase: {phases}")
        if b.speedup is not None:
            lines.append(f"    speed-up {speedup_text(b.speedup, b.interval, b.bound)}, "
                         f"{b.verdict}; plain step {b.plain_seconds * 1e3:.2f} ms; best K' "
                         f"{best_text(b.best)}")
        if b.options:
            lines.append("    K'  tokens/step  ms/step  tokens/s/request  vs now")
            for o in b.options:
                mark = " <- best" if o.num_steps == b.best else (
                    " (now)" if o.num_steps == b.num_steps else "")
                label = "off" if o.num_steps == 0 else str(o.num_steps)
                lines.append(f"    {label:>3} {o.tokens_per_step:12.2f} {o.step_seconds * 1e3:8.2f} "
                             f"{o.tokens_per_second:16.1f} {o.relative:7.2f}x{mark}")
    if adv.best is not None and adv.flags:
        if adv.best != adv.configured_steps:
            lines.append(f"  advisor: {adv.best} draft steps (predicted {adv.gain:.2f}x the "
                         f"tokens/s of {adv.configured_steps}): {adv.flags}")
        else:
            lines.append(f"  advisor: keep {adv.configured_steps} draft steps (no setting "
                         f"up to it is predicted to do better)")
    if adv.batch_flags or adv.loses_from:
        lines.append(f"  advisor by batch size: {describe(adv.best_by_bucket)}"
                     + (f"; speculation loses from batch {adv.loses_from}" if adv.loses_from
                        else "") + (f": {adv.batch_flags}" if adv.batch_flags else ""))
    for note in adv.notes:
        lines.append(f"  note: {note}")
    return lines
