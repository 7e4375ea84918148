"""What the file exporter wrote, summarised per process (the data behind every view of
`spectrace report`).

Reads `<DIR>/<process>/{resource.json,metrics.jsonl,events.jsonl}`; the last metrics line
holds the process's cumulative totals, the earlier ones its timeline (fewer of them for
older periods of a long run: `export.history`). Files of earlier spectrace releases (a
plain snapshot per line, uncompacted) read the same way. Torn, garbled or oversized
lines are skipped and counted (see `reader`). An unusable folder raises `ReportError`
(exit status 2).
"""
from __future__ import annotations

import os
from dataclasses import replace
from typing import Any

from .. import server_settings, signals
from ..counting import counts_once
from ..families.breakdowns import BREAKDOWNS
from ..file_layout import EVENTS_FILE, METRICS_FILE, RESOURCE_FILE, SPANS_FILE, is_process_dir
from .drift_windows import History, recent_window_s
from . import judgement
from .figures import figures_of
from .reference_source import from_environment, reference_of
from .reader import iter_jsonl
from .records import (
    CombinedSummary, PassCount, ProcessSummary, RawTotals, Report, UnreadableProcess,
)
from .snapshot import (
    MAX_POINTS, PHASE_FIELDS, SUMMED, PASSES_COUNTED_ONCE, RequestSample, finite_sum,
    raw_totals, read_events, read_resource, request_record,
)
from .timeline import Timeline, merge_points
from .verdict import of_report


class ReportError(Exception):
    """Unusable input for the report (exit status 2)."""


def summarize_process(path: str) -> ProcessSummary:
    """One process's summary. Garbled, torn or oversized lines are skipped (and counted
    in `skipped_lines`); the totals come from the last complete metrics snapshot, the
    timeline from every snapshot."""
    resource, started = read_resource(os.path.join(path, RESOURCE_FILE))
    stats: dict = {}
    metrics: dict = {}
    n_snapshots = 0
    timeline = Timeline()
    history = History()
    for snap in iter_jsonl(os.path.join(path, METRICS_FILE), stats):
        if isinstance(snap.get("metrics"), dict):
            metrics = snap["metrics"]
            n_snapshots += 1
            timeline.add(snap.get("time"), metrics)
            history.add(snap.get("time"), metrics)
        else:
            stats["skipped"] += 1
    findings = read_events(os.path.join(path, EVENTS_FILE), stats)
    n_spans = 0
    kept = RequestSample()
    for span in iter_jsonl(os.path.join(path, SPANS_FILE), stats):
        n_spans += 1
        r = request_record(span)
        if r is not None:
            kept.add(r)
    runtime = resource.get(signals.RES_RUNTIME) or (
        signals.RUNTIME_SGLANG if signals.RES_SGLANG_VERSION in resource else None)
    raw = replace(raw_totals(metrics), runtime=runtime)
    reference = reference_of(resource, len(raw.per_position))
    counted = resource.get(signals.RES_COUNTED)
    return ProcessSummary(
        process=os.path.basename(os.path.normpath(path)),
        pid=resource.get("process.pid"),
        role=resource.get(signals.RES_ROLE),
        tp_rank=resource.get(signals.RES_TP_RANK),
        dp_rank=resource.get(signals.RES_DP_RANK),
        pp_rank=resource.get(signals.RES_PP_RANK),
        counted=counted if counted in (signals.COUNTED_ONCE, signals.COUNTED_COPY)
        else signals.COUNTED_ONCE,
        model=resource.get(signals.RES_MODEL),
        draft_model=resource.get(signals.RES_DRAFT_MODEL),
        spec_algorithm=resource.get(signals.RES_SPEC_ALGORITHM),
        spec_worker=resource.get(signals.RES_SPEC_WORKER),
        runtime=runtime,
        runtime_version=resource.get(signals.RES_RUNTIME_VERSION,
                                     resource.get(signals.RES_SGLANG_VERSION)),
        sglang_version=resource.get(signals.RES_SGLANG_VERSION),
        spectrace_version=resource.get(signals.RES_SPECTRACE_VERSION),
        started=started,
        metric_snapshots=n_snapshots,
        skipped_lines=stats.get("skipped", 0) + stats.get("torn", 0),
        spans=n_spans,
        figures=figures_of(raw, findings, timeline.points, kept, [history], reference),
        raw=raw,
        points=tuple(timeline.points),
        settings=server_settings.from_resource(resource),
        request_sample=kept,
        drift_history=history,
        reference=reference,
        model_hash=resource.get(signals.RES_MODEL_HASH),
        draft_hash=resource.get(signals.RES_DRAFT_HASH),
    )


def combine(procs: list[ProcessSummary]) -> CombinedSummary:
    """All processes together. Request-steps and draft passes (`counted_once` metrics) are
    added over the processes that count them once: a tensor-parallel copy sees the same
    ones as its group's rank 0 and is left out, while data-parallel groups (different
    requests) add up. Findings, internal errors and dropped telemetry belong to each
    process and are added over all of them. The timeline is the sum of the counting
    processes' latest totals at every time any of them wrote."""
    once = [p for p in procs if counts_once(p.counted)]
    sums: dict[str, Any] = {k: (0 if attr is None else {}) for k, (_, attr) in SUMMED.items()}
    by_breakdown: dict[str, dict] = {b.name: {} for b in BREAKDOWNS}
    expected_widths: dict = {}
    passes: dict = {}
    findings: dict[str, dict] = {}
    phase_costs: dict = {}
    drafted: dict = {}
    request_rates: dict = {}
    kept = RequestSample()
    topk = runtime = None
    for p in procs:
        r, counting = p.raw, counts_once(p.counted)
        if counting:
            if p.request_sample is not None:
                kept.extend(p.request_sample)
            for key, v in (r.request_rates or {}).items():  # counted_once, a histogram
                request_rates[key] = finite_sum((request_rates.get(key, 0), v))
            for key, v in r.phase_costs.items():
                acc = phase_costs.setdefault(key, [0] * len(PHASE_FIELDS))
                for i, x in enumerate(v):
                    acc[i] = finite_sum((acc[i], x))
            for key, v in r.drafted_per_position.items():
                drafted[key] = finite_sum((drafted.get(key, 0), v))
            for name, counts in r.breakdowns.items():  # counted_once, like every breakdown
                acc = by_breakdown.setdefault(name, {})
                for key, v in counts.items():
                    acc[key] = finite_sum((acc.get(key, 0), v))
            topk = r.topk if topk is None else topk
            runtime = r.runtime if runtime is None else runtime
        for k, (spec, attr) in SUMMED.items():
            if spec.counted_once and not counting:
                continue
            if attr is None:
                sums[k] = finite_sum((sums[k], getattr(r, k)))
                continue
            for key, v in getattr(r, k).items():
                sums[k][key] = finite_sum((sums[k].get(key, 0), v))
        for x in r.passes if counting or not PASSES_COUNTED_ONCE else ():
            key = (x.pass_kind, x.width)
            passes[key] = finite_sum((passes.get(key, 0), x.count))
        for k, v in r.expected_widths.items():
            expected_widths.setdefault(k, v)
        for f in p.figures.findings:
            if f.code in judgement.SPECS:
                continue  # judged again from the combined totals
            c = findings.setdefault(f.code, {
                "code": f.code, "severity": f.severity, "message": f.message,
                "details": f.details, "events": 0, "times": []})
            c["events"] += f.events
            c["times"] = sorted(c["times"] + list(f.times))[:MAX_POINTS]
    draft_context: dict = {}
    for p in procs:
        for k, v in (p.raw.draft_context or {}).items():
            draft_context.setdefault(k, v)
    raw = RawTotals(**sums, passes=tuple(PassCount(k, w, n) for (k, w), n in passes.items()),
                    breakdowns=by_breakdown,
                    expected_widths=expected_widths, draft_context=draft_context,
                    phase_costs=phase_costs,
                    drafted_per_position=drafted, topk=topk, runtime=runtime,
                    request_rates=request_rates)
    return CombinedSummary(
        processes=tuple(p.process for p in procs),
        counted_once=tuple(p.process for p in once),
        copies=tuple(p.process for p in procs if not counts_once(p.counted)),
        figures=figures_of(raw, findings, merge_points([list(p.points) for p in once]),
                           kept, [p.drift_history for p in once if p.drift_history],
                           next((p.reference for p in once if p.reference), None)))


def read_process(path: str) -> ProcessSummary | UnreadableProcess:
    """`summarize_process`, or the folder's name and the error when it cannot be read."""
    try:
        return summarize_process(path)
    except (OSError, RecursionError, MemoryError) as exc:
        return UnreadableProcess(os.path.basename(os.path.normpath(path)),
                                 f"{type(exc).__name__}: {exc}")


def files_state(path: str) -> tuple:
    """Size and modification time of each file `summarize_process` reads (None where it
    cannot be stat'ed): when this is unchanged, so is the summary."""
    out = []
    for name in (RESOURCE_FILE, METRICS_FILE, EVENTS_FILE, SPANS_FILE):
        try:
            st = os.stat(os.path.join(path, name))
        except OSError:
            out.append(None)
        else:
            out.append((st.st_size, st.st_mtime_ns))
    return tuple(out)


def build_report(directory: str, read=read_process) -> Report:
    """Summaries of every process folder under `directory` (or of `directory` itself when
    it is one process's folder), each from `read(path)`. An unusable `directory` raises
    `ReportError` with a one-line message; a process folder that cannot be read is listed
    with its error."""
    if not os.path.exists(directory):
        raise ReportError(f"{directory}: no such folder (spectrace writes to "
                          f"SPECTRACE_OUTPUT_DIR, default ./spectrace-data)")
    if not os.path.isdir(directory):
        raise ReportError(f"{directory}: is a file, not a folder; give the folder spectrace "
                          f"writes to (SPECTRACE_OUTPUT_DIR, default ./spectrace-data)")
    try:
        from_environment()
        recent_window_s()
    except ValueError as exc:
        raise ReportError(str(exc)) from None
    if is_process_dir(directory):
        paths = [directory]
    else:
        try:
            names = sorted(os.listdir(directory))
        except OSError as exc:
            raise ReportError(f"{directory}: cannot read the folder "
                              f"({exc.strerror or exc})") from None
        paths = [os.path.join(directory, n) for n in names]
        paths = [p for p in paths if os.path.isdir(p) and is_process_dir(p)]
    procs = tuple(read(path) for path in paths)
    readable = [p for p in procs if isinstance(p, ProcessSummary)]
    report = Report(directory, procs, combine(readable) if readable else None)
    return replace(report, verdict=of_report(report))
