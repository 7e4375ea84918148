"""The wording every view of `spectrace report` shares: how a count, a ratio, a process
and the combined view are written (`text`, `html` and `watch` all word them alike)."""
from __future__ import annotations

import math
from .. import server_settings, signals
from ..runtimes import RUNTIMES
from .records import CombinedSummary, FindingSummary, ProcessSummary, Report

# the dashboards' bands of mean acceptance length, worst first: (range, verdict)
HEALTH_BANDS = (
    (f"below {signals.ACCEPT_LENGTH_RED_BELOW}", "no speed-up"),
    (f"{signals.ACCEPT_LENGTH_RED_BELOW}-{signals.ACCEPT_LENGTH_AMBER_BELOW}", "weak"),
    (f"above {signals.ACCEPT_LENGTH_AMBER_BELOW}", "healthy"),
)


def ratio_text(x, digits=2) -> str:
    """A ratio as text, "-" when there is none."""
    return "-" if x is None else f"{x:.{digits}f}"


def count_text(x) -> str:
    """A count as text: whole when it is finite (sums of garbage may not be)."""
    return str(int(x)) if isinstance(x, (int, float)) and math.isfinite(x) else str(x)


def runtime_label(p: ProcessSummary) -> str:
    """"SGLang 0.5.23", "vLLM 0.32.0" (older files name SGLang's version only)."""
    runtime = RUNTIMES.get(p.runtime or "")
    return f"{runtime.label if runtime else p.runtime or 'runtime'} {p.runtime_version}"


def health_band(mean_acceptance_length) -> int:
    """Which of `HEALTH_BANDS` a mean acceptance length is in."""
    if mean_acceptance_length < signals.ACCEPT_LENGTH_RED_BELOW:
        return 0
    return 1 if mean_acceptance_length < signals.ACCEPT_LENGTH_AMBER_BELOW else 2


def process_identity(p: ProcessSummary, models: bool = False) -> str:
    """"pid 7, role scheduler, tp rank 0, SGLang 0.5.23" (no tp rank where there is none;
    "-" for what is unknown), with the model and the draft when `models`."""
    def v(x) -> str:
        return "-" if x is None else str(x)
    parts = [f"pid {v(p.pid)}", f"role {v(p.role)}"]
    for rank, word in ((p.tp_rank, "tp rank"), (p.dp_rank, "dp rank"), (p.pp_rank, "pp rank")):
        if rank is not None and (word == "tp rank" or rank):
            parts.append(f"{word} {rank}")
    if models:
        parts.append(f"model {v(p.model)}, draft {v(p.draft_model)}")
        if p.spec_algorithm or p.spec_worker:
            parts.append(algorithm_text(p))
    return ", ".join(parts + [runtime_label(p)])


def algorithm_text(p: ProcessSummary) -> str:
    """"algorithm NGRAM (NGRAMWorker)": the speculative algorithm and its worker class."""
    worker = f" ({p.spec_worker})" if p.spec_worker else ""
    return f"algorithm {p.spec_algorithm or '-'}{worker}"


def process_title(p: ProcessSummary) -> str:
    return f"process {p.process} ({process_identity(p)})"


def expected_widths_text(widths: dict) -> str:
    """"draft_hidden 64, fc_in 192, ...": the widths the draft expects, by kind."""
    return ", ".join(f"{k} {count_text(v)}" for k, v in sorted(widths.items()))


def finding_count(f: FindingSummary):
    """How many times a finding was raised: its metric count, else its events written."""
    return f.events if f.count is None else f.count


def finding_severity(f: FindingSummary) -> str:
    return f.severity or "see metrics"


def _plural(n: int, one: str, many: str) -> str:
    return f"{n} {one if n == 1 else many}"


def combined_title(c: CombinedSummary) -> str:
    """What the figures of all processes together are: which are counted once (and from
    how many processes), which are summed over every process."""
    n, k, copies = len(c.processes), len(c.counted_once), len(c.copies)
    left_out = (f"; {_plural(copies, 'copy', 'copies')} of a rank 0 left out" if copies
                else "")
    whole = f"all {n} processes together" if n != 1 else "its 1 process"
    return (f"{whole}: request-steps, draft passes and agreement "
            f"counted once (from {_plural(k, 'process', 'processes')}{left_out}); "
            f"findings and errors summed over processes")


GROUP_WORDS = {signals.RES_SERVICE_NAME: "deployment", signals.RES_DRAFT_MODEL: "draft"}


def group_title(c: CombinedSummary) -> str:
    """A deployment's processes together: what they share, then what is counted how."""
    what = ", ".join(f"{GROUP_WORDS.get(k, k)} {v}" for k, v in (c.group or {}).items())
    return f"{what or 'no deployment recorded'}: {combined_title(c)}"


COPY_LINE = ("  a copy: these request-steps and draft passes are its group's rank 0's "
             "(the same requests); shown per rank, left out of the totals")


def settings_lines(report: Report) -> list[str]:
    """The server settings that change acceptance, read at start-up (`server_settings`):
    one line for all processes together, none for files without them."""
    settings = report.settings
    return [f"server settings: {server_settings.text(settings)}"] if settings else []
