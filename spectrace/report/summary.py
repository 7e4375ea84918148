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

import json
import math
import os
from dataclasses import replace
from typing import Any

from .. import advisor, signals
from ..counting import counts_once
from ..rules import requests as req_rule
from ..rules.widths import ExpectedWidths, check_width, expected_width
from ..families.breakdowns import BREAKDOWNS
from ..file_layout import EVENTS_FILE, METRICS_FILE, RESOURCE_FILE, SPANS_FILE, is_process_dir
from .breakdown_figures import breakdown_figures, breakdown_findings
from .reader import iter_jsonl
from .records import (
    CombinedSummary, Figures, FindingSummary, HiddenStatePass, LabelFigures, PassCount,
    ProcessSummary, RawTotals, Report, RequestFigures, RequestRecord, TimelineFigures,
    TimelinePoint, UnreadableProcess,
)
from .verdict import of_report


class ReportError(Exception):
    """Unusable input for the report (exit status 2)."""


MAX_RESOURCE_BYTES = 1 << 20  # resource.json is a few hundred bytes; more is not ours


def _num(v) -> float | int | None:
    """A finite number, or None (bools, strings, nested values and nan do not count)."""
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return None
    if isinstance(v, float) and not math.isfinite(v):
        return None
    return v


def _key(v):
    """A usable attribute value (str or number), or None."""
    if isinstance(v, str):
        return v
    n = _num(v)
    return n


def _sort_key(k):
    """Numbers (and numeric strings) first in numeric order, then other strings."""
    if isinstance(k, str):
        try:
            return (0, int(k), "")
        except ValueError:
            return (1, 0, k)
    return (0, k, "")


def _str(v, limit: int = 2000) -> str | None:
    return v[:limit] if isinstance(v, str) else None


def _points(metrics: dict, spec: signals.MetricSpec) -> list[dict]:
    """The data points of one metric; malformed ones are left out."""
    raw = metrics.get(spec.name)
    if not isinstance(raw, list):
        return []
    out = []
    for p in raw:
        if not isinstance(p, dict) or _num(p.get("value")) is None:
            continue
        attrs = p.get("attributes")
        out.append({"attributes": attrs if isinstance(attrs, dict) else {},
                    "value": p["value"]})
    return out


def _total(metrics: dict, spec: signals.MetricSpec) -> float:
    return sum(p["value"] for p in _points(metrics, spec))


def _by_attr(metrics: dict, spec: signals.MetricSpec, attr) -> dict:
    """Values summed by one attribute, or by a tuple of attributes (keys: tuples)."""
    out: dict = {}
    for p in _points(metrics, spec):
        if isinstance(attr, tuple):
            key = tuple(_key(p["attributes"].get(a)) for a in attr)
            key = None if None in key else key
        else:
            key = _key(p["attributes"].get(attr))
        if key is not None:
            out[key] = out.get(key, 0) + p["value"]
    return out


def _read_resource(path: str) -> tuple[dict, float | None]:
    """The resource attributes (scalars only) and the time the process started."""
    try:
        with open(path, "rb") as fh:
            data = fh.read(MAX_RESOURCE_BYTES + 1)
    except OSError:
        return {}, None
    if len(data) > MAX_RESOURCE_BYTES:
        return {}, None
    try:
        loaded = json.loads(data)
    except (ValueError, RecursionError):
        return {}, None
    if not isinstance(loaded, dict):
        return {}, None
    attrs = loaded.get("attributes")
    if not isinstance(attrs, dict):
        return {}, _num(loaded.get("started"))
    return ({k: v for k, v in attrs.items() if isinstance(v, (str, int, float))
             and not isinstance(v, bool)}, _num(loaded.get("started")))


MAX_POINTS = 500  # timeline points kept per process (between this and twice this)


class Timeline:
    """The cumulative totals of each snapshot with a time, thinned as it grows (every other
    point dropped, the newest kept) so that a long, uncompacted file of an older spectrace
    still fits in memory. Counters are cumulative: a dropped point only coarsens the
    intervals around it."""

    def __init__(self, max_points: int = MAX_POINTS) -> None:
        self.max_points = max_points
        self.points: list[TimelinePoint] = []

    def add(self, t, metrics: dict) -> None:
        t = _num(t)
        if t is None:
            return
        self.append(TimelinePoint(t, _total(metrics, signals.SPEC_DRAFTS),
                                  _total(metrics, signals.SPEC_ACCEPTED_TOKENS),
                                  _total(metrics, signals.SPEC_DRAFT_TOKENS)))

    def append(self, point: TimelinePoint) -> None:
        """Add a point, thinning when full."""
        self.points.append(point)
        if len(self.points) >= 2 * self.max_points:
            last = self.points[-1]
            self.points = self.points[:-1:2] + [last]


def timeline_figures(points: list[TimelinePoint]) -> TimelineFigures:
    """Times, cumulative totals, and per interval (from the point before): the mean
    acceptance length and acceptance rate (None where nothing was verified, or where a
    total went down or time back)."""
    mal: list = [None] * len(points)
    rate: list = [None] * len(points)
    for i in range(1, len(points)):
        (t0, d0, a0, k0), (t1, d1, a1, k1) = points[i - 1], points[i]
        dd, da, dk = d1 - d0, a1 - a0, k1 - k0
        if t1 >= t0 and dd > 0 and 0 <= da:
            mal[i] = 1 + da / dd
        if t1 >= t0 and dk > 0 and 0 <= da <= dk:
            rate[i] = da / dk
    return TimelineFigures(
        time=tuple(p.time for p in points), drafts=tuple(p.drafts for p in points),
        accepted_tokens=tuple(p.accepted_tokens for p in points),
        draft_tokens=tuple(p.draft_tokens for p in points),
        mean_acceptance_length=tuple(mal), acceptance_rate=tuple(rate))


def _finite_sum(values) -> float:
    total = sum(values)
    return total if math.isfinite(total) else 0


def _read_events(path: str, stats: dict) -> dict[str, dict]:
    """Each finding code's working entry (`_finding_summaries` makes them records)."""
    findings: dict[str, dict] = {}
    for e in iter_jsonl(path, stats):
        code = e.get("code")
        if not isinstance(code, str):
            stats["skipped"] += 1
            continue
        details = e.get("details")
        f = findings.setdefault(code, {"code": code, "severity": _str(e.get("severity"), 40),
                                       "message": _str(e.get("message")),
                                       "details": details if isinstance(details, dict) else None,
                                       "events": 0, "times": []})
        f["events"] += 1
        t = _num(e.get("time"))
        if t is not None and len(f["times"]) < MAX_POINTS:
            f["times"].append(t)
    return findings


# The `RawTotals` figures: field -> (metric, the attribute it is kept by, or None for
# one number). `combine` adds a `counted_once` metric's figures over the processes that
# count once only (`spectrace.counting`), the others over every process.
SUMMED = {
    "steps": (signals.SPEC_STEPS, None),
    "drafts": (signals.SPEC_DRAFTS, None),
    "draft_tokens": (signals.SPEC_DRAFT_TOKENS, None),
    "accepted_tokens": (signals.SPEC_ACCEPTED_TOKENS, None),
    "per_position": (signals.SPEC_ACCEPTED_PER_POSITION, signals.ATTR_POSITION),
    "agreement_drafts": (signals.SPEC_AGREEMENT_DRAFTS, None),
    "agreement_positions": (signals.SPEC_AGREEMENT_PER_POSITION, signals.ATTR_POSITION),
    "lengths": (signals.SPEC_ACCEPT_LENGTH, signals.ATTR_LENGTH),
    "finding_counts": (signals.FINDINGS, signals.ATTR_CODE),
    "fc_bypass": (signals.EAGLE3_FC_BYPASS, None),
    "width_mismatch": (signals.EAGLE3_WIDTH_MISMATCH, None),
    "internal_errors": (signals.INTERNAL_ERRORS, None),
    "telemetry_dropped": (signals.TELEMETRY_DROPPED, None),
    "requests": (signals.SPEC_REQUESTS, signals.ATTR_REQUEST_LENGTH),
    "requests_by_label": (signals.SPEC_REQUESTS,
                          (signals.ATTR_REQUEST_LABEL, signals.ATTR_REQUEST_LENGTH)),
    "request_label_overflow": (signals.SPEC_REQUEST_LABEL_OVERFLOW,
                               signals.ATTR_REQUEST_LABEL_KEY),
}
LOWEST_REQUESTS = 10  # recorded requests listed, lowest mean accept length first
PASSES_COUNTED_ONCE = signals.EAGLE3_PASSES.counted_once


def _raw_totals(metrics: dict) -> RawTotals:
    """What one snapshot holds, by figure: the sums that processes can be added up by."""
    return RawTotals(
        **{key: _total(metrics, spec) if attr is None else _by_attr(metrics, spec, attr)
           for key, (spec, attr) in SUMMED.items()},
        passes=tuple(PassCount(_key(p["attributes"].get(signals.ATTR_PASS_KIND)),
                               _key(p["attributes"].get(signals.ATTR_WIDTH)), p["value"])
                     for p in _points(metrics, signals.EAGLE3_PASSES)
                     if p["attributes"].get(signals.ATTR_PASS_KIND) is not None
                     or p["attributes"].get(signals.ATTR_WIDTH) is not None),
        breakdowns={b.name: _by_attr(metrics, b.accept_length, (b.attribute, signals.ATTR_LENGTH))
                    for b in BREAKDOWNS},
        expected_widths={str(k): v for k, v in _by_attr(
            metrics, signals.EAGLE3_EXPECTED_WIDTH, "kind").items()},
        draft_context={str(k): v for k, v in _by_attr(
            metrics, signals.EAGLE3_DRAFT_CONTEXT, signals.ATTR_KIND).items()},
        phase_costs=_phase_costs(metrics),
        drafted_per_position=_by_attr(metrics, signals.SPEC_DRAFTS_PER_POSITION,
                                      signals.ATTR_POSITION),
        topk=next(iter(_by_attr(metrics, signals.SPEC_TOPK, signals.ATTR_WORKER).values()),
                  None))


PHASE_FIELDS = (signals.SPEC_PHASE_TIME, signals.SPEC_PHASE_TIME_SQUARES,
                signals.SPEC_PHASE_SAMPLES)


def _phase_costs(metrics: dict) -> dict:
    """(phase, bucket, K) -> [seconds, squared seconds, samples]."""
    out: dict = {}
    for i, spec in enumerate(PHASE_FIELDS):
        for p in _points(metrics, spec):
            a = p["attributes"]
            key = (_key(a.get(signals.ATTR_PHASE)), _key(a.get(signals.ATTR_BATCH_BUCKET)),
                   _key(a.get(signals.ATTR_NUM_STEPS)))
            if None in key:
                continue
            out.setdefault(key, [0, 0, 0])[i] += p["value"]
    return out


def _speculation(raw: RawTotals):
    """The advisor's view of these totals (None without measured step costs)."""
    if not raw.phase_costs or not raw.drafts:
        return None
    keys = sorted(raw.per_position, key=_sort_key)
    return advisor.advise(
        {k: tuple(v) for k, v in raw.phase_costs.items()},
        [raw.per_position[k] for k in keys],
        [raw.drafted_per_position.get(k, 0) for k in keys], raw.drafts, raw.lengths,
        runtime=raw.runtime, topk=raw.topk)


def _judged_passes(passes: tuple[PassCount, ...], expected: dict
                   ) -> tuple[HiddenStatePass, ...]:
    """Each (pass kind, width) with the width expected for its kind and the finding code it
    raises (`rules.widths`), when the draft's expected widths are known."""
    try:
        exp = ExpectedWidths(*(int(expected[k]) for k in (
            "fc_in", "draft_hidden", "target_hidden", "num_aux")))
    except (KeyError, TypeError, ValueError, OverflowError):
        exp = None
    out = []
    for x in passes:
        kind, width = x.pass_kind, _num(x.width)
        expected_w = finding = None
        if exp is not None and width is not None and kind in (signals.PASS_TARGET_FED,
                                                              signals.PASS_DRAFT_DECODE):
            expected_w = expected_width(kind, exp)
            f = check_width(kind, int(width), exp)
            finding = f.code if f else None
        out.append(HiddenStatePass(x.pass_kind, x.width, x.count, expected_w, finding))
    return tuple(out)


def _finding_summaries(raw: RawTotals, findings: dict[str, dict]
                       ) -> tuple[FindingSummary, ...]:
    """The findings events named (`_read_events`' entries), with the metric count of each
    code a metric counted, by code."""
    counts: dict[str, Any] = {}
    entries = dict(findings)
    for code, n in raw.finding_counts.items():
        if not n and str(code) not in entries:
            continue  # every code's series starts at 0: only raised findings are listed
        entries.setdefault(str(code), {"code": str(code), "severity": None, "message": None,
                                       "details": None, "events": 0, "times": []})
        counts[str(code)] = n
    return tuple(FindingSummary(
        code=f["code"], severity=f["severity"], message=f["message"], details=f["details"],
        events=f["events"], times=tuple(f["times"]), count=counts.get(code),
        first_time=min(f["times"]) if f["times"] else None)
        for code, f in sorted(entries.items(), key=lambda item: item[1]["code"]))


def _request_figures(raw: RawTotals, records: list[RequestRecord]) -> RequestFigures | None:
    dist = {str(k): v for k, v in (raw.requests or {}).items() if v}
    if not dist and not records:
        return None
    order = req_rule.REQUEST_ORDER
    lowest = sorted(records, key=lambda r: (r.mean_acceptance_length, r.request_id))
    overflow = raw.request_label_overflow or {}
    return RequestFigures(
        finished=_finite_sum(dist.values()),
        by_mean_acceptance_length={k: dist[k] for k in sorted(
            dist, key=lambda b: (order.get(b, len(order)), b))},
        recorded=len(records), lowest=tuple(lowest[:LOWEST_REQUESTS]),
        label_key=", ".join(sorted(str(k) for k in overflow)) or None,
        by_label=_label_figures(raw.requests_by_label or {}),
        label_overflow=_finite_sum(overflow.values()))


def _label_figures(by_label: dict) -> tuple[LabelFigures, ...]:
    """Finished requests per label value, the most requests first, `other` last."""
    order = req_rule.REQUEST_ORDER
    values: dict[str, dict] = {}
    for (value, bucket), n in by_label.items():
        if n:
            values.setdefault(str(value), {})[str(bucket)] = n
    figures = [LabelFigures(v, _finite_sum(d.values()), {k: d[k] for k in sorted(
        d, key=lambda b: (order.get(b, len(order)), b))}) for v, d in values.items()]
    return tuple(sorted(figures, key=lambda x: (x.value == req_rule.LABEL_OVERFLOW,
                                                -x.finished, x.value)))


def request_record(span: dict) -> RequestRecord | None:
    """A finished request's record from its span line, or None (another span, or bad)."""
    if span.get("name") != signals.SPAN_REQUEST or not isinstance(span.get("attributes"), dict):
        return None
    a = span["attributes"]
    steps, accepted = _num(a.get(signals.SPAN_ATTR_REQUEST_STEPS)), _num(
        a.get(signals.SPAN_ATTR_REQUEST_ACCEPTED))
    rid = a.get(signals.SPAN_ATTR_REQUEST_ID)
    if not isinstance(rid, str) or not steps or steps <= 0 or accepted is None:
        return None
    return RequestRecord(rid[:200], steps, accepted, 1 + accepted / steps,
                         _str(a.get(signals.SPAN_ATTR_REQUEST_SAMPLING), 40))


def _figures(raw: RawTotals, findings: dict[str, dict], points: list[TimelinePoint],
             records: list[RequestRecord] = ()) -> Figures:
    """The figures every view shows, from raw totals (one process's, or their sum)."""
    breakdowns = breakdown_figures(raw.breakdowns, len(raw.per_position))
    drafts, accepted = raw.drafts, raw.accepted_tokens
    draft_tokens, agr_drafts = raw.draft_tokens, raw.agreement_drafts
    per_pos, agr_pos, lengths = raw.per_position, raw.agreement_positions, raw.lengths
    pos_keys = sorted(per_pos, key=_sort_key)
    agr_keys = sorted(agr_pos, key=_sort_key)
    return Figures(
        steps=raw.steps,
        drafts=drafts,
        draft_tokens=draft_tokens,
        accepted_tokens=accepted,
        mean_acceptance_length=(1 + accepted / drafts) if drafts else None,
        acceptance_rate=(accepted / draft_tokens) if draft_tokens else None,
        accepted_per_position=tuple(per_pos[k] for k in pos_keys),
        acceptance_per_position=tuple(per_pos[k] / drafts for k in pos_keys) if drafts else (),
        agreement_drafts=agr_drafts,
        agreed_per_position=tuple(agr_pos[k] for k in agr_keys),
        agreement_per_position=(tuple(agr_pos[k] / agr_drafts for k in agr_keys)
                                if agr_drafts else ()),
        accept_length_counts={str(k): lengths[k] for k in sorted(lengths, key=_sort_key)
                              if lengths[k]},  # lengths seen (series start at 0)
        hidden_state_passes=_judged_passes(raw.passes, raw.expected_widths),
        expected_widths=raw.expected_widths,
        fc_bypass=raw.fc_bypass,
        width_mismatch=raw.width_mismatch,
        internal_errors=raw.internal_errors,
        telemetry_dropped=raw.telemetry_dropped,
        findings=_finding_summaries(raw, findings) + tuple(
            FindingSummary(code=f.code, severity=f.severity, message=f.message,
                           details=f.details, events=0, times=(), count=1, first_time=None)
            for f in breakdown_findings(breakdowns, raw.draft_context)),
        timeline=timeline_figures(points),
        breakdowns=tuple(breakdowns.values()),
        draft_context=dict(raw.draft_context or {}),
        requests=_request_figures(raw, list(records)),
        speculation=_speculation(raw),
    )


def summarize_process(path: str) -> ProcessSummary:
    """One process's summary. Garbled, torn or oversized lines are skipped (and counted
    in `skipped_lines`); the totals come from the last complete metrics snapshot, the
    timeline from every snapshot."""
    resource, started = _read_resource(os.path.join(path, RESOURCE_FILE))
    stats: dict = {}
    metrics: dict = {}
    n_snapshots = 0
    timeline = Timeline()
    for snap in iter_jsonl(os.path.join(path, METRICS_FILE), stats):
        if isinstance(snap.get("metrics"), dict):
            metrics = snap["metrics"]
            n_snapshots += 1
            timeline.add(snap.get("time"), metrics)
        else:
            stats["skipped"] += 1
    findings = _read_events(os.path.join(path, EVENTS_FILE), stats)
    n_spans = 0
    records: list[RequestRecord] = []
    for span in iter_jsonl(os.path.join(path, SPANS_FILE), stats):
        n_spans += 1
        r = request_record(span)
        if r is not None:
            records.append(r)
            if len(records) >= 2 * MAX_POINTS:  # keep the lowest ones, bounded
                records = sorted(records, key=lambda x: x.mean_acceptance_length)[:MAX_POINTS]
    runtime = resource.get(signals.RES_RUNTIME) or (
        signals.RUNTIME_SGLANG if signals.RES_SGLANG_VERSION in resource else None)
    raw = replace(_raw_totals(metrics), runtime=runtime)
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
        figures=_figures(raw, findings, timeline.points, records),
        raw=raw,
        points=tuple(timeline.points),
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
    topk = runtime = None
    for p in procs:
        r, counting = p.raw, counts_once(p.counted)
        if counting:
            for key, v in r.phase_costs.items():
                acc = phase_costs.setdefault(key, [0, 0, 0])
                for i in range(3):
                    acc[i] = _finite_sum((acc[i], v[i]))
            for key, v in r.drafted_per_position.items():
                drafted[key] = _finite_sum((drafted.get(key, 0), v))
            for name, counts in r.breakdowns.items():  # counted_once, like every breakdown
                acc = by_breakdown.setdefault(name, {})
                for key, v in counts.items():
                    acc[key] = _finite_sum((acc.get(key, 0), v))
            topk = r.topk if topk is None else topk
            runtime = r.runtime if runtime is None else runtime
        for k, (spec, attr) in SUMMED.items():
            if spec.counted_once and not counting:
                continue
            if attr is None:
                sums[k] = _finite_sum((sums[k], getattr(r, k)))
                continue
            for key, v in getattr(r, k).items():
                sums[k][key] = _finite_sum((sums[k].get(key, 0), v))
        for x in r.passes if counting or not PASSES_COUNTED_ONCE else ():
            key = (x.pass_kind, x.width)
            passes[key] = _finite_sum((passes.get(key, 0), x.count))
        for k, v in r.expected_widths.items():
            expected_widths.setdefault(k, v)
        for f in p.figures.findings:
            if f.code in signals.REPORT_FINDINGS:
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
                    drafted_per_position=drafted, topk=topk, runtime=runtime)
    return CombinedSummary(
        processes=tuple(p.process for p in procs),
        counted_once=tuple(p.process for p in once),
        copies=tuple(p.process for p in procs if not counts_once(p.counted)),
        figures=_figures(raw, findings, _merge_points([list(p.points) for p in once]),
                         [r for p in once if p.figures.requests
                          for r in p.figures.requests.lowest]))


def _merge_points(series: list[list[TimelinePoint]]) -> list[TimelinePoint]:
    """Sum of step functions: at each time any series has a point, every series' latest
    totals at or before it."""
    series = [s for s in series if s]
    if len(series) == 1:
        return list(series[0])
    events = sorted((pt.time, i, pt) for i, s in enumerate(series) for pt in s)
    latest: dict[int, TimelinePoint] = {}
    merged = Timeline()
    for t, i, pt in events:
        latest[i] = pt
        merged.append(TimelinePoint(t, *(_finite_sum(v[j] for v in latest.values())
                                         for j in (1, 2, 3))))
    return merged.points


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
