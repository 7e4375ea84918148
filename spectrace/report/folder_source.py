"""The report's source today: the folder the file exporter wrote (`<DIR>/<process>/`), read
into what every source yields per process (`Observed`: its resource, raw totals, timeline,
the findings its events named, the recorded requests kept, its totals over time). The
figures (`figures`), the judgement (`judgement`, `verdict`) and the views read `Observed`
through `summary`, never the files, so a second source (Prometheus) yields the same.

Reads `resource.json`, `metrics.jsonl`, `events.jsonl` and `spans.jsonl`; the last
metrics line holds the process's cumulative totals, the earlier ones its timeline (fewer
of them for older periods of a long run: `export.history`). Files of earlier spectrace
releases (a plain snapshot per line, uncompacted) read the same way. Torn, garbled or
oversized lines are skipped and counted (see `reader`). An unusable folder raises
`ReportError` (exit status 2).
"""
from __future__ import annotations

import os
from dataclasses import dataclass, replace
from typing import Any

from .. import signals
from ..file_layout import EVENTS_FILE, METRICS_FILE, RESOURCE_FILE, SPANS_FILE, is_process_dir
from .drift_windows import History
from .reader import iter_jsonl
from .records import Number, RawTotals, TimelinePoint
from .snapshot import RequestSample, raw_totals, read_events, read_resource, request_record
from .timeline import Timeline


class ReportError(Exception):
    """Unusable input for the report (exit status 2)."""


@dataclass(frozen=True)
class Observed:
    """What a source read of one process: who it is (`resource`, its OpenTelemetry resource
    attributes, and when it `started`), its cumulative totals (`raw`) and their `points`
    over time, the findings its events named (`events`: code -> first severity, message,
    details, event count and times; `snapshot.read_events`), the recorded requests kept
    (`snapshot.RequestSample`), its totals per snapshot by breakdown bucket (`history`, for
    drift), and how much was read (`snapshots`, `skipped_lines`, `spans`)."""
    process: str
    resource: dict[str, Any]
    started: Number | None
    raw: RawTotals
    points: tuple[TimelinePoint, ...]
    events: dict[str, dict]
    requests: RequestSample
    history: History
    snapshots: int = 0
    skipped_lines: int = 0
    spans: int = 0


def observe_folder(path: str) -> Observed:
    """One process folder read. Garbled, torn or oversized lines are skipped (and counted
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
    events = read_events(os.path.join(path, EVENTS_FILE), stats)
    n_spans = 0
    kept = RequestSample()
    for span in iter_jsonl(os.path.join(path, SPANS_FILE), stats):
        n_spans += 1
        r = request_record(span)
        if r is not None:
            kept.add(r)
    runtime = resource.get(signals.RES_RUNTIME) or (
        signals.RUNTIME_SGLANG if signals.RES_SGLANG_VERSION in resource else None)
    return Observed(
        process=os.path.basename(os.path.normpath(path)), resource=resource, started=started,
        raw=replace(raw_totals(metrics), runtime=runtime), points=tuple(timeline.points),
        events=events, requests=kept, history=history, snapshots=n_snapshots,
        skipped_lines=stats.get("skipped", 0) + stats.get("torn", 0), spans=n_spans)


def files_state(path: str) -> tuple:
    """Size and modification time of each file `observe_folder` reads (None where it
    cannot be stat'ed): when this is unchanged, so is what it reads."""
    out = []
    for name in (RESOURCE_FILE, METRICS_FILE, EVENTS_FILE, SPANS_FILE):
        try:
            st = os.stat(os.path.join(path, name))
        except OSError:
            out.append(None)
        else:
            out.append((st.st_size, st.st_mtime_ns))
    return tuple(out)


def process_folders(directory: str) -> list[str]:
    """The process folders under `directory` (or `directory` itself when it is one
    process's folder), in name order. An unusable `directory` raises `ReportError` with a
    one-line message."""
    if not os.path.exists(directory):
        raise ReportError(f"{directory}: no such folder (spectrace writes to "
                          f"SPECTRACE_OUTPUT_DIR, default ./spectrace-data)")
    if not os.path.isdir(directory):
        raise ReportError(f"{directory}: is a file, not a folder; give the folder spectrace "
                          f"writes to (SPECTRACE_OUTPUT_DIR, default ./spectrace-data)")
    if is_process_dir(directory):
        return [directory]
    try:
        names = sorted(os.listdir(directory))
    except OSError as exc:
        raise ReportError(f"{directory}: cannot read the folder "
                          f"({exc.strerror or exc})") from None
    paths = [os.path.join(directory, n) for n in names]
    return [p for p in paths if os.path.isdir(p) and is_process_dir(p)]
