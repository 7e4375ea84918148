"""`spectrace report` as text: the verdict (one sentence), then one block per process (and all of them together when there
are several), in words and numbers. `watch` shows the same lines, refreshed; `html` the
same figures; all of them worded by `format`."""
from __future__ import annotations

from .. import signals
from .format import (
    COPY_LINE, combined_title, count_text, expected_widths_text, finding_count,
    finding_severity, process_title, ratio_text,
)
from .records import CombinedSummary, ProcessSummary, Report, UnreadableProcess
from .verdict import of_report


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
    if p.drafts:
        lines.append(f"  speculative steps {count_text(p.steps)}, request-steps verified "
                     f"{count_text(p.drafts)}, draft tokens {count_text(p.draft_tokens)}, "
                     f"accepted {count_text(p.accepted_tokens)}")
        lines.append(f"  mean acceptance length {ratio_text(p.mean_acceptance_length)} "
                     f"(1.00 = no speed-up), acceptance rate {ratio_text(p.acceptance_rate)}")
        lines.append("  acceptance per position: " + "  ".join(
            f"[{i}] {v:.2f}" for i, v in enumerate(p.acceptance_per_position)))
        lines.append("  accept-length distribution: " + "  ".join(
            f"{k}: {count_text(v)}" for k, v in p.accept_length_counts.items()))
    elif proc and proc.runtime == "vllm" and proc.role == "worker":
        lines.append("  accept counts: see the engine_core process (vLLM counts them in "
                     "its scheduler)")
    else:
        lines.append("  no verified speculative steps recorded")
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
    if p.findings:
        lines.append("  findings (raised in each process, summed):" if combined
                     else "  findings:")
        for f in p.findings:
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


def render_text(report: Report) -> str:
    """The verdict first (`verdict`), then the figures of each process."""
    lines = [of_report(report).sentence, f"spectrace report: {report.directory}"]
    if not report.processes:
        lines.append("  no instrumented process has written here yet")
    for p in report.processes:
        lines.append("")
        if isinstance(p, UnreadableProcess):
            lines.append(f"process {p.process}: unreadable ({p.error})")
            continue
        lines.append(process_title(p))
        lines.extend(figure_lines(p))
    combined = report.combined
    if combined and len(combined.processes) > 1:
        lines.append("")
        lines.append(combined_title(combined))
        lines.extend(figure_lines(combined))
    return "\n".join(lines)
