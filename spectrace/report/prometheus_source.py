"""The report's second source: a Prometheus server, or any store that answers its HTTP query
API (Thanos, Mimir, VictoriaMetrics), read into the same `Observed` per process as the
folder (`folder_source`), so the figures, the judgement and the verdict are the folder's.

A process is a scrape target (`job`, `instance`: one endpoint per rank) with a
`target_info` series from spectrace (its resource attributes, as labels). Its totals are
what each of its counters gained over the range: the last sample at the range's end
against the last one at its start (`last_over_time`, so a process that stopped within the
range, whose series Prometheus marks stale at once, still counts; one that started within
it counts from 0), and where the end is below the start the counter was reset (the process
restarted on that endpoint): then its value at the end, as PromQL's `increase` reads a
reset. No extrapolation: counts are whole, as the runtime counted them. Gauges (the draft's
expected widths and context, its top-k) are their last value.

What Prometheus does not hold is said, not guessed: the findings' counts by code and
severity arrive, their first event's words do not (the meaning declared with the code
stands in: the process's events or logs have the rest); sampled request spans (the
outlier rules, the lowest requests) and the drift windows need the folder or a trace
store.
"""
from __future__ import annotations

import json
import math
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from .. import names, server_settings, signals
from ..families.breakdowns import BREAKDOWNS
from ..families.findings import RUNTIME_SPECS
from .drift_windows import History
from .folder_source import Observed, ReportError
from .prometheus_api import INFO_SERIES, Client, PrometheusRange
from .snapshot import RequestSample, raw_totals
from .timeline import Timeline

SPECTRACE_SERIES = '__name__=~"spectrace_.+"'
# data-point attributes spectrace records as integers (labels arrive as text)
INTEGER_ATTRIBUTES = (names.ATTR_POSITION, names.ATTR_LENGTH, names.ATTR_WIDTH,
                      names.ATTR_NUM_STEPS)
# resource attributes spectrace records as numbers or booleans (json-encoded as labels)
TYPED_RESOURCE = (names.RES_PROCESS_PID, names.RES_TP_RANK, names.RES_DP_RANK,
                  names.RES_PP_RANK, names.RES_EXPECTED_ACCEPT_LENGTH)
SCRAPE_LABELS = ("job", "instance")
COUNTED_LABEL = names.RES_COUNTED.replace(".", "_")  # on target_info: once, or a copy


def _process_key(labels: dict) -> tuple[str, str]:
    return labels.get("job", ""), labels.get("instance", "")


def _series_key(labels: dict) -> tuple:
    return tuple(sorted((k, v) for k, v in labels.items() if k != "__name__"))


def _number(text) -> float | None:
    try:
        v = float(text)
    except (TypeError, ValueError):
        return None
    return v if math.isfinite(v) else None


def _edge(le: str) -> float | None:
    """A histogram bucket's upper edge (`le`: a number or `+Inf`)."""
    try:
        v = float(le)
    except (TypeError, ValueError):
        return None
    return None if math.isnan(v) or v == -math.inf else v


def _resource(labels: dict) -> dict[str, Any]:
    """`target_info`'s labels as the resource attributes they were (dots for the
    underscores the exporter wrote; numbers and booleans decoded where spectrace records
    them so)."""
    known = {a.replace(".", "_"): a for a in (
        names.RES_SERVICE_NAME, names.RES_PROCESS_PID, names.RES_HOST_NAME, names.RES_RUNTIME,
        names.RES_RUNTIME_VERSION, names.RES_SGLANG_VERSION, names.RES_SPECTRACE_VERSION,
        names.RES_TP_RANK, names.RES_DP_RANK, names.RES_PP_RANK, names.RES_ROLE,
        names.RES_COUNTED, names.RES_MODEL, names.RES_DRAFT_MODEL, names.RES_DRAFT_HASH,
        names.RES_MODEL_HASH, names.RES_SPEC_ALGORITHM, names.RES_SPEC_WORKER,
        names.RES_EXPECTED_ACCEPT_LENGTH, *(s.attribute for s in server_settings.SETTINGS))}
    out: dict[str, Any] = {}
    for label, value in labels.items():
        attr = known.get(label)
        if attr is None:
            continue
        if attr in TYPED_RESOURCE or attr.startswith(server_settings.PREFIX):
            try:
                decoded = json.loads(value)
            except ValueError:
                decoded = value
            value = decoded if isinstance(decoded, (bool, int, float, str)) else value
        out[attr] = value
    return out


def _metric_specs() -> dict[str, tuple[signals.MetricSpec, str]]:
    """Prometheus name -> (the metric, which part: '' or a histogram's `bucket`/`count`/`sum`)."""
    out = {}
    for spec in signals.ALL_METRICS:
        base = spec.prometheus_name
        if spec.kind == names.HISTOGRAM:
            for part in ("bucket", "count", "sum"):
                out[f"{base}_{part}"] = (spec, part)
        else:
            out[base] = (spec, "")
    return out


def _attributes(labels: dict) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in labels.items():
        if k in ("__name__", "le", "otel_scope_name", "otel_scope_version") or k in SCRAPE_LABELS:
            continue
        if k in INTEGER_ATTRIBUTES:
            n = _number(v)
            out[k] = int(n) if n is not None and n == int(n) else v
        else:
            out[k] = v
    return out


def _gained(end: dict, start: dict) -> dict:
    """Each counter series' gain over the range: end - start, or end where the counter was
    reset (end below start), 0 where it had no sample at the end."""
    out = {}
    for key, (labels, v_end) in end.items():
        v_start = start.get(key, (None, 0.0))[1]
        out[key] = (labels, v_end - v_start if v_end >= v_start else v_end)
    return out


def _snapshot(series: list[tuple[dict, float]], specs: dict) -> dict:
    """A process's series as the folder's metrics snapshot (`snapshot.raw_totals` reads it):
    metric name -> [{"attributes": ..., "value": ...}], a histogram's buckets folded back
    into one point per attribute set."""
    metrics: dict[str, list] = {}
    histograms: dict[tuple, dict] = {}
    for labels, value in series:
        spec, part = specs[labels["__name__"]]
        attrs = _attributes(labels)
        if not part:
            metrics.setdefault(spec.name, []).append({"attributes": attrs, "value": value})
            continue
        h = histograms.setdefault((spec.name, _series_key(attrs)),
                                  {"attributes": attrs, "count": 0, "sum": 0.0, "le": {}})
        if part == "bucket":
            h["le"][labels.get("le", "")] = value
        else:
            h[part] = value
    for (name, _), h in histograms.items():
        edges = sorted((_edge(le), n) for le, n in h["le"].items() if _edge(le) is not None)
        cumulative = [n for _, n in edges]
        bounds = [le for le, _ in edges if math.isfinite(le)]
        if len(cumulative) != len(bounds) + 1:
            continue  # no +Inf bucket: not a whole histogram
        buckets = [c - p for c, p in zip(cumulative, [0.0] + cumulative[:-1])]
        metrics.setdefault(name, []).append({"attributes": h["attributes"], "value": {
            "count": h["count"], "sum": h["sum"], "bounds": bounds, "buckets": buckets}})
    return metrics


def _events(metrics: dict) -> dict[str, dict]:
    """The findings counted, as the folder's event entries: code, severity (the label),
    and in place of the first event's words the meaning declared with the code."""
    what = {s.code: s.what for s in RUNTIME_SPECS}
    out: dict[str, dict] = {}
    for p in metrics.get(signals.FINDINGS.name, []):
        code, sev = p["attributes"].get(names.ATTR_CODE), p["attributes"].get(
            names.ATTR_SEVERITY)
        if not isinstance(code, str) or not p["value"]:
            continue
        out.setdefault(code, {"code": code, "severity": sev, "message": what.get(code),
                              "details": None, "events": 0, "times": []})
    return out


def observe_prometheus(r: PrometheusRange, client: Client | None = None) -> list[Observed]:
    """Every process the selector matches, as it stood over the range."""
    client = client or Client(r.url, r.timeout_s)
    end = (r.end if r.end is not None else time.time()) - r.ago_s
    start = end - r.since_s
    window = f"{r.since_s:.0f}s"
    sel = f", {r.selector}" if r.selector else ""
    info = client.query(f'last_over_time({INFO_SERIES}{{spectrace_version!=""{sel}}}'
                        f'[{window}])', end)
    if not info:
        raise ReportError(
            f"--prometheus {client.url}: no spectrace process"
            + (f" matches {{{r.selector}}}" if r.selector else "")
            + f" in the {r.title.split(', ', 1)[1]} (a process is its {INFO_SERIES} series, "
            "with spectrace_version; the selector matches its labels)")
    processes = _latest_identity(client, info, window, end)
    specs = _metric_specs()

    def read(at: float) -> dict:
        out = {}
        for s in client.query(f"last_over_time({{{SPECTRACE_SERIES}}}[{window}])", at):
            labels = s["metric"]
            v = _number(s.get("value", [None, None])[1])
            if (v is not None and _process_key(labels) in processes
                    and labels.get("__name__") in specs):
                out[_series_key(labels) + (("__name__", labels["__name__"]),)] = (labels, v)
        return out
    # the reads are independent: Prometheus answers one while this process decodes another
    with ThreadPoolExecutor(max_workers=4) as pool:
        ends, starts = pool.submit(read, end), pool.submit(read, start)
        reset = _reset(client, specs, window, end, processes, pool)
        at_end, at_start = ends.result(), starts.result()
    gained = _gained({k: v for k, v in at_end.items() if _counts(v[0], specs)},
                     at_start)
    for key in reset & gained.keys():
        labels = gained[key][0]
        gained[key] = (labels, _gain_over_samples(client, labels, window, end,
                                                  at_start.get(key, (None, 0.0))[1]))
    by_process: dict[tuple, list] = {key: [] for key in processes}
    for key, (labels, v) in at_end.items():
        value = gained[key][1] if key in gained else v
        by_process[_process_key(labels)].append((labels, value))
    over_time = _over_time(client, processes, specs, start, end, at_start)
    out = []
    for key in sorted(processes):
        resource = _resource(processes[key])
        metrics = _snapshot(by_process[key], specs)
        runtime = resource.get(names.RES_RUNTIME)
        raw = raw_totals(metrics)
        timeline, history = over_time.get(key, (Timeline(), History()))
        out.append(Observed(
            process=f"{key[1]} ({key[0]})" if key[0] else key[1], resource=resource,
            started=None, raw=_with_runtime(raw, runtime), points=tuple(timeline.points),
            events=_events(metrics), requests=RequestSample(), history=history,
            snapshots=len(timeline.points)))
    return out


def _latest_identity(client: Client, info: list[dict], window: str, end: float) -> dict:
    """Each process's `target_info` labels. A process restarted on its endpoint with
    another identity within the range (a new draft, other settings) has two series: the
    one sampled last is its identity (its counts include both runs: `--baseline-offset`
    compares the ranges before and after). Only those endpoints are read again, sample by
    sample; the rest take the one series they have."""
    by_key: dict[tuple, list[dict]] = {}
    for s in info:
        by_key.setdefault(_process_key(s["metric"]), []).append(s["metric"])
    out = {}
    for key, found in by_key.items():
        if len(found) > 1:
            job, instance = key
            matched = {_series_key(m) for m in found}  # the ones the selector chose
            samples = [s for s in client.query(
                f'{INFO_SERIES}{{job="{_quoted(job)}", instance="{_quoted(instance)}"}}'
                f'[{window}]', end, "matrix") if _series_key(s["metric"]) in matched]
            last = max(samples, key=lambda s: float(s["values"][-1][0]), default=None)
            found = [last["metric"]] if last else found
        out[key] = found[-1]
    return out


# what the timeline and the drift windows read of each snapshot (`timeline.Timeline`,
# `drift_windows.History`): the request-steps, tokens, finished requests and every
# breakdown's accept lengths
OVER_TIME = (signals.SPEC_DRAFTS, signals.SPEC_ACCEPTED_TOKENS, signals.SPEC_DRAFT_TOKENS,
             signals.SPEC_REQUESTS, *(b.accept_length for b in BREAKDOWNS))
POINTS = 240  # snapshots read over the range (a 15 s step over an hour) ...
SNAPSHOTS = 6000  # ... fewer where the counting processes would hold more than this in all
MIN_POINTS = 48   # (a fleet: 125 counting processes, 48 points, a 75 s step over an hour)


def _over_time(client: Client, processes: dict, specs: dict, start: float, end: float,
               at_start: dict) -> dict[tuple, tuple[Timeline, History]]:
    """Each counting process's timeline and drift history over the range, from one range
    query: at each step, what each of its counters had gained since the range's start
    (resets read as above), as the snapshots a folder holds. A tensor-parallel copy
    (`counted` copy) has none: its request-steps are its rank 0's, which the combined view
    and the drift rule read (of a fleet at TP=8, seven processes in eight)."""
    counting = sum(p.get(COUNTED_LABEL) != names.COUNTED_COPY for p in processes.values())
    points = max(MIN_POINTS, min(POINTS, SNAPSHOTS // max(counting, 1)))
    step = max((end - start) / points, 1.0)
    first = end - step * math.floor((end - start) / step)  # the last step falls on `end`
    wanted = "|".join(sorted({s.prometheus_name for s in OVER_TIME}))
    gains: dict[tuple, list[tuple[dict, list]]] = {}
    not_copies = f'{names.ATTR_COUNTED}!="{names.COUNTED_COPY}"'  # left out by Prometheus
    for series in client.query_range(f'{{__name__=~"{wanted}", {not_copies}}}', first, end,
                                     step):
        labels = series.get("metric", {})
        pkey = _process_key(labels)
        if (pkey not in processes or labels.get("__name__") not in specs
                or processes[pkey].get(COUNTED_LABEL) == names.COUNTED_COPY):
            continue
        key = _series_key(labels) + (("__name__", labels["__name__"]),)
        prev, gain, path = at_start.get(key, (None, 0.0))[1], 0.0, []
        for t, text in series.get("values", []):
            v = _number(text)
            if v is None:
                continue
            gain += v - prev if v >= prev else v
            prev = v
            path.append((float(t), gain))
        gains.setdefault(pkey, []).append((labels, path))
    out = {}
    for pkey, series in gains.items():
        timeline, history = Timeline(), History()
        read = [0] * len(series)  # each series' steps passed so far
        now = [0.0] * len(series)  # each series' gain at its last step passed (0 before)
        for t in sorted({t for _, path in series for t, _ in path}):
            for i, (_, path) in enumerate(series):
                while read[i] < len(path) and path[read[i]][0] <= t:
                    now[i] = path[read[i]][1]
                    read[i] += 1
            snapshot = _snapshot([(labels, now[i]) for i, (labels, _) in enumerate(series)],
                                 specs)
            timeline.add(t, snapshot)
            history.add(t, snapshot)
        out[pkey] = (timeline, history)
    return out


def _reset(client: Client, specs: dict, window: str, end: float, processes: dict,
           pool) -> set:
    """The counting series that were reset within the range (`resets()`, one query per
    metric, `pool`'s threads at once: a function drops the metric's name, so series of
    several would collide)."""
    counters = [n for n, (spec, _) in specs.items() if spec.kind != names.GAUGE]
    answers = pool.map(lambda n: client.query(f"resets({n}[{window}]) > 0", end), counters)
    out = set()
    for prom_name, answer in zip(counters, answers):
        for s in answer:
            labels = {**s["metric"], "__name__": prom_name}
            if _process_key(labels) in processes:
                out.add(_series_key(labels) + (("__name__", prom_name),))
    return out


def _gain_over_samples(client: Client, labels: dict, window: str, end: float,
                       before: float) -> float:
    """What a reset counter gained over the range, from its samples: each rise, and after
    a reset the value it restarted to (as `increase` reads a reset, without extrapolating)."""
    matchers = ", ".join(f'{k}="{_quoted(v)}"' for k, v in sorted(labels.items())
                         if k != "__name__")
    gain, prev = 0.0, before
    for series in client.query(f"{labels['__name__']}{{{matchers}}}[{window}]", end,
                               kind="matrix"):
        for _, text in series.get("values", []):
            v = _number(text)
            if v is None:
                continue
            gain += v - prev if v >= prev else v
            prev = v
    return gain


def _quoted(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _counts(labels: dict, specs: dict) -> bool:
    """A counter's series (or a histogram's parts, which count too)."""
    spec, part = specs[labels["__name__"]]
    return spec.kind != names.GAUGE or bool(part)


def _with_runtime(raw, runtime):
    from dataclasses import replace
    return replace(raw, runtime=runtime)
