"""`spectrace report` as text: one block per process (and all of them together when there
are several), in words and numbers. `watch` shows the same lines, refreshed; `html` the
same figures, worded by the helpers here."""
from __future__ import annotations

import math
from typing import Any

from .. import signals
from ..runtimes import RUNTIMES

# the dashboards' bands of mean acceptance length, worst first: (range, verdict)
HEALTH_BANDS = (
    (f"below {signals.ACCEPT_LENGTH_RED_BELOW}", "no speed-up"),
    (f"{signals.ACCEPT_LENGTH_RED_BELOW}-{signals.ACCEPT_LENGTH_AMBER_BELOW}", "weak"),
    (f"above {signals.ACCEPT_LENGTH_AMBER_BELOW}", "healthy"),
)


def _fmt(x, digits=2) -> str:
    return "-" if x is None else f"{x:.{digits}f}"


def _int(x) -> str:
    """A count as text: whole when it is finite (sums of garbage may not be)."""
    return str(int(x)) if isinstance(x, (int, float)) and math.isfinite(x) else str(x)


def runtime_label(p: dict) -> str:
    """"SGLang 0.5.23", "vLLM 0.32.0" (older files name SGLang's version only)."""
    runtime = RUNTIMES.get(p.get("runtime") or "")
    return f"{runtime.label if runtime else p.get('runtime') or 'runtime'} {p.get('runtime_version')}"


def health_band(mean_acceptance_length) -> int:
    """Which of `HEALTH_BANDS` a mean acceptance length is in."""
    if mean_acceptance_length < signals.ACCEPT_LENGTH_RED_BELOW:
        return 0
    return 1 if mean_acceptance_length < signals.ACCEPT_LENGTH_AMBER_BELOW else 2


def process_identity(p: dict[str, Any], models: bool = False) -> str:
    """"pid 7, role scheduler, tp rank 0, SGLang 0.5.23" (no tp rank where there is none;
    "-" for what is unknown), with the model and the draft when `models`."""
    def v(x) -> str:
        return "-" if x is None else str(x)
    parts = [f"pid {v(p.get('pid'))}", f"role {v(p.get('role'))}"]
    for key, word in (("tp_rank", "tp rank"), ("dp_rank", "dp rank"), ("pp_rank", "pp rank")):
        if p.get(key) is not None and (key == "tp_rank" or p[key]):
            parts.append(f"{word} {p[key]}")
    if models:
        parts.append(f"model {v(p.get('model'))}, draft {v(p.get('draft_model'))}")
    return ", ".join(parts + [runtime_label(p)])


def process_title(p: dict[str, Any]) -> str:
    return f"process {p['process']} ({process_identity(p)})"


def expected_widths_text(widths: dict) -> str:
    """"draft_hidden 64, fc_in 192, ...": the widths the draft expects, by kind."""
    return ", ".join(f"{k} {_int(v)}" for k, v in sorted(widths.items()))


def finding_count(f: dict):
    """How many times a finding was raised: its metric count, else its events written."""
    return f.get("count", f["events"])


def finding_severity(f: dict) -> str:
    return f["severity"] or "see metrics"


def _plural(n: int, one: str, many: str) -> str:
    return f"{n} {one if n == 1 else many}"


def combined_title(c: dict[str, Any]) -> str:
    """What the figures of all processes together are: which are counted once (and from
    how many processes), which are summed over every process."""
    n, k, copies = len(c["processes"]), len(c["counted_once"]), len(c["copies"])
    left_out = (f"; {_plural(copies, 'copy', 'copies')} of a rank 0 left out" if copies
                else "")
    return (f"all {n} processes together: request-steps, draft passes and agreement "
            f"counted once (from {_plural(k, 'process', 'processes')}{left_out}); "
            f"findings and errors summed over processes")


COPY_LINE = ("  a copy: these request-steps and draft passes are its group's rank 0's "
             "(the same requests); shown per rank, left out of the totals")


def figure_lines(p: dict[str, Any]) -> list[str]:
    """The figures of one process, or of all together (`summary.combine`)."""
    lines = []
    combined = "counted_once" in p
    if p.get("counted") == signals.COUNTED_COPY:
        lines.append(COPY_LINE)
    if p.get("model"):
        lines.append(f"  model {p['model']}, draft {p.get('draft_model')}")
    if p["drafts"]:
        lines.append(f"  speculative steps {_int(p['steps'])}, request-steps verified "
                     f"{_int(p['drafts'])}, draft tokens {_int(p['draft_tokens'])}, "
                     f"accepted {_int(p['accepted_tokens'])}")
        lines.append(f"  mean acceptance length {_fmt(p['mean_acceptance_length'])} "
                     f"(1.00 = no speed-up), acceptance rate {_fmt(p['acceptance_rate'])}")
        lines.append("  acceptance per position: " + "  ".join(
            f"[{i}] {v:.2f}" for i, v in enumerate(p["acceptance_per_position"])))
        lines.append("  accept-length distribution: " + "  ".join(
            f"{k}: {_int(v)}" for k, v in p["accept_length_counts"].items()))
    elif p.get("runtime") == "vllm" and p.get("role") == "worker":
        lines.append("  accept counts: see the engine_core process (vLLM counts them in "
                     "its scheduler)")
    else:
        lines.append("  no verified speculative steps recorded")
    if p["agreement_per_position"]:
        lines.append("  draft/target agreement per position: " + "  ".join(
            f"[{i}] {v:.2f}" for i, v in enumerate(p["agreement_per_position"]))
            + f"  (from {_int(p['agreement_drafts'])} sampled request-steps)")
    if p["hidden_state_passes"]:
        lines.append("  draft hidden-state widths: " + ", ".join(
            f"{x['pass_kind']} {x['width']} wide x{_int(x['count'])}"
            for x in p["hidden_state_passes"]) + "; expected "
            + expected_widths_text(p["expected_widths"]))
    lines.append(f"  fc bypass events: {_int(p['fc_bypass'])}, width mismatches: "
                 f"{_int(p['width_mismatch'])}, spectrace internal errors"
                 f"{' (all processes)' if combined else ''}: {_int(p['internal_errors'])}")
    if p["findings"]:
        lines.append("  findings (raised in each process, summed):" if combined
                     else "  findings:")
        for f in p["findings"]:
            lines.append(f"  - {f['code']} ({finding_severity(f)}, x{_int(finding_count(f))}): "
                         f"{f['message'] or ''}")
    else:
        lines.append("  findings: none")
    if p.get("telemetry_dropped"):
        lines.append(f"  telemetry items dropped (queue full, export failed or file "
                     f"sink off): {_int(p['telemetry_dropped'])}")
    if p.get("skipped_lines"):
        lines.append(f"  skipped {_int(p['skipped_lines'])} unreadable line(s) (torn by a "
                     f"kill, or not written by spectrace)")
    return lines


def render_text(report: dict[str, Any]) -> str:
    lines = [f"spectrace report: {report['directory']}"]
    if not report["processes"]:
        lines.append("  no instrumented process has written here yet")
    for p in report["processes"]:
        lines.append("")
        if "error" in p:
            lines.append(f"process {p['process']}: unreadable ({p['error']})")
            continue
        lines.append(process_title(p))
        lines.extend(figure_lines(p))
    combined = report.get("combined")
    if combined and len(combined["processes"]) > 1:
        lines.append("")
        lines.append(combined_title(combined))
        lines.extend(figure_lines(combined))
    return "\n".join(lines)
