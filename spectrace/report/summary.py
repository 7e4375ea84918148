"""The report built: each process a source observed (`folder_source.Observed`; today the
folder the file exporter wrote) summarised into its figures (`figures`, numbers only) and
what the report's rules find in them (`judgement`), all processes combined, and the
verdict (`verdict`). The views (`text`, `html`, `watch`, `--json`) read the `Report`.
"""
from __future__ import annotations

import os
from dataclasses import replace
from typing import Any

from .. import server_settings, signals
from ..counting import counts_once
from ..families.breakdowns import BREAKDOWNS
from .drift_windows import recent_window_s
from . import judgement
from .figures import figures_of
from .folder_source import Observed, ReportError, observe_folder, process_folders
from .reference_source import from_environment, reference_of
from .records import CombinedSummary, PassCount, ProcessSummary, RawTotals, Report, UnreadableProcess
from .snapshot import MAX_POINTS, PHASE_FIELDS, SUMMED, PASSES_COUNTED_ONCE, RequestSample, finite_sum
from .timeline import merge_points
from .verdict import of_report, of_view


def summarize(seen: Observed) -> ProcessSummary:
    """One process's summary: who it is, its figures, and what the report's rules and its
    events found in them."""
    resource, raw = seen.resource, seen.raw
    reference = reference_of(resource, len(raw.per_position))
    counted = resource.get(signals.RES_COUNTED)
    figures = figures_of(raw, seen.points, seen.requests)
    settings = server_settings.from_resource(resource)
    return ProcessSummary(
        process=seen.process,
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
        runtime=raw.runtime,
        runtime_version=resource.get(signals.RES_RUNTIME_VERSION,
                                     resource.get(signals.RES_SGLANG_VERSION)),
        sglang_version=resource.get(signals.RES_SGLANG_VERSION),
        spectrace_version=resource.get(signals.RES_SPECTRACE_VERSION),
        started=seen.started,
        metric_snapshots=seen.snapshots,
        skipped_lines=seen.skipped_lines,
        spans=seen.spans,
        figures=figures,
        findings=judgement.findings_of(judgement.Evidence.of(
            raw, figures, seen.requests, (seen.history,), reference, settings=settings),
            seen.events),
        raw=raw,
        points=seen.points,
        settings=settings,
        request_sample=seen.requests,
        drift_history=seen.history,
        reference=reference,
        model_hash=resource.get(signals.RES_MODEL_HASH),
        draft_hash=resource.get(signals.RES_DRAFT_HASH),
        service_name=resource.get(signals.RES_SERVICE_NAME),
    )


def summarize_process(path: str) -> ProcessSummary:
    """One process folder's summary (`folder_source.observe_folder`, then `summarize`)."""
    return summarize(observe_folder(path))


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
        for f in p.findings:
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
    figures = figures_of(raw, merge_points([list(p.points) for p in once]), kept)
    evidence = judgement.Evidence.of(
        raw, figures, kept, tuple(p.drift_history for p in once if p.drift_history),
        next((p.reference for p in once if p.reference), None),
        tuple(judgement.Member(p.process, deployment_of(p), p.raw)
              for p in once), server_settings.combine(p.settings for p in procs))
    return CombinedSummary(
        processes=tuple(p.process for p in procs),
        counted_once=tuple(p.process for p in once),
        copies=tuple(p.process for p in procs if not counts_once(p.counted)),
        figures=figures, findings=judgement.findings_of(evidence, findings))


def read_process(path: str) -> ProcessSummary | UnreadableProcess:
    """`summarize_process`, or the folder's name and the error when it cannot be read."""
    try:
        return summarize_process(path)
    except (OSError, RecursionError, MemoryError) as exc:
        return UnreadableProcess(os.path.basename(os.path.normpath(path)),
                                 f"{type(exc).__name__}: {exc}")


def build_report(directory: str, read=read_process) -> Report:
    """Summaries of every process folder under `directory` (or of `directory` itself when
    it is one process's folder), each from `read(path)`. An unusable `directory` raises
    `ReportError` with a one-line message; a process folder that cannot be read is listed
    with its error."""
    paths = process_folders(directory)
    try:
        from_environment()
        recent_window_s()
    except ValueError as exc:
        raise ReportError(str(exc)) from None
    return report_of(directory, tuple(read(path) for path in paths))


# what tells a fleet's deployments apart: the service (OTEL_SERVICE_NAME) and the draft
GROUP_BY = (signals.RES_SERVICE_NAME, signals.RES_DRAFT_MODEL)


def group_of(p: ProcessSummary) -> dict:
    """The deployment a process belongs to (`GROUP_BY`: the attributes it has)."""
    values = {signals.RES_SERVICE_NAME: p.service_name, signals.RES_DRAFT_MODEL: p.draft_model}
    return {k: values[k] for k in GROUP_BY if values[k] is not None}


def deployment_of(p: ProcessSummary) -> tuple:
    """`group_of` as a key: its (attribute, value) pairs in order."""
    return tuple(sorted(group_of(p).items()))


def report_of(title: str, procs: tuple) -> Report:
    """The report on these processes (`title`: the folder, or the source and its range):
    all of them combined, each deployment's together where there are several (`GROUP_BY`),
    and the verdicts."""
    readable = [p for p in procs if isinstance(p, ProcessSummary)]
    report = Report(title, procs, combine(readable) if readable else None)
    keys: dict[tuple, list] = {}
    for p in readable:
        keys.setdefault(deployment_of(p), []).append(p)
    groups = []
    for key, members in sorted(keys.items()) if len(keys) > 1 else ():
        group = replace(combine(members), group=dict(key))
        groups.append(replace(group, verdict=of_view(group, members)))
    return replace(report, verdict=of_report(report), groups=tuple(groups))


def prometheus_report(r) -> Report:
    """The report on the processes a Prometheus server holds (`prometheus_source`: its
    `PrometheusRange`), judged as a folder's."""
    from .prometheus_source import observe_prometheus
    try:
        from_environment()
    except ValueError as exc:
        raise ReportError(str(exc)) from None
    return report_of(r.title, tuple(summarize(o) for o in observe_prometheus(r)))
