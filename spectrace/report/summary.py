"""What the file exporter wrote, summarised per process (the data behind every view of
`spectrace report`).

Reads `<DIR>/<process>/{resource.json,metrics.jsonl,events.jsonl}`; the last metrics line
holds the process's cumulative totals. Torn, garbled or oversized lines are skipped and
counted (see `reader`). An unusable folder raises `ReportError` (exit status 2).
"""
from __future__ import annotations

import json
import math
import os
from typing import Any

from .. import signals
from ..file_layout import EVENTS_FILE, METRICS_FILE, RESOURCE_FILE, SPANS_FILE, is_process_dir
from .reader import iter_jsonl


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


def _by_attr(metrics: dict, spec: signals.MetricSpec, attr: str) -> dict:
    out: dict = {}
    for p in _points(metrics, spec):
        key = _key(p["attributes"].get(attr))
        if key is not None:
            out[key] = out.get(key, 0) + p["value"]
    return out


def _read_resource(path: str) -> dict:
    try:
        with open(path, "rb") as fh:
            data = fh.read(MAX_RESOURCE_BYTES + 1)
    except OSError:
        return {}
    if len(data) > MAX_RESOURCE_BYTES:
        return {}
    try:
        loaded = json.loads(data)
    except (ValueError, RecursionError):
        return {}
    attrs = loaded.get("attributes") if isinstance(loaded, dict) else None
    if not isinstance(attrs, dict):
        return {}
    return {k: v for k, v in attrs.items() if isinstance(v, (str, int, float))
            and not isinstance(v, bool)}


def summarize_process(path: str) -> dict[str, Any]:
    """One process's summary. Garbled, torn or oversized lines are skipped (and counted
    in `skipped_lines`); the totals come from the last complete metrics snapshot."""
    resource = _read_resource(os.path.join(path, RESOURCE_FILE))
    stats: dict = {}
    metrics: dict = {}
    n_snapshots = 0
    for snap in iter_jsonl(os.path.join(path, METRICS_FILE), stats):
        if isinstance(snap.get("metrics"), dict):
            metrics = snap["metrics"]
            n_snapshots += 1
        else:
            stats["skipped"] += 1
    findings: dict[str, dict] = {}
    for e in iter_jsonl(os.path.join(path, EVENTS_FILE), stats):
        code = e.get("code")
        if not isinstance(code, str):
            stats["skipped"] += 1
            continue
        details = e.get("details")
        f = findings.setdefault(code, {"code": code, "severity": _str(e.get("severity"), 40),
                                       "message": _str(e.get("message")),
                                       "details": details if isinstance(details, dict) else None,
                                       "events": 0})
        f["events"] += 1
    n_spans = sum(1 for _ in iter_jsonl(os.path.join(path, SPANS_FILE), stats))

    drafts = _total(metrics, signals.SPEC_DRAFTS)
    accepted = _total(metrics, signals.SPEC_ACCEPTED_TOKENS)
    draft_tokens = _total(metrics, signals.SPEC_DRAFT_TOKENS)
    per_pos = _by_attr(metrics, signals.SPEC_ACCEPTED_PER_POSITION, signals.ATTR_POSITION)
    agr_drafts = _total(metrics, signals.SPEC_AGREEMENT_DRAFTS)
    agr_pos = _by_attr(metrics, signals.SPEC_AGREEMENT_PER_POSITION, signals.ATTR_POSITION)
    lengths = _by_attr(metrics, signals.SPEC_ACCEPT_LENGTH, signals.ATTR_LENGTH)
    passes = [{"pass_kind": _key(p["attributes"].get(signals.ATTR_PASS_KIND)),
               "width": _key(p["attributes"].get(signals.ATTR_WIDTH)), "count": p["value"]}
              for p in _points(metrics, signals.EAGLE3_PASSES) if p["attributes"]]
    finding_counts = _by_attr(metrics, signals.FINDINGS, signals.ATTR_CODE)
    for code, n in finding_counts.items():
        if not n and str(code) not in findings:
            continue  # every code's series starts at 0: only raised findings are listed
        findings.setdefault(str(code), {"code": str(code), "severity": None, "message": None,
                                        "details": None, "events": 0})["count"] = n
    pos_keys = sorted(per_pos, key=_sort_key)
    agr_keys = sorted(agr_pos, key=_sort_key)
    return {
        "process": os.path.basename(os.path.normpath(path)),
        "pid": resource.get("process.pid"),
        "role": resource.get(signals.RES_ROLE),
        "tp_rank": resource.get(signals.RES_TP_RANK),
        "model": resource.get(signals.RES_MODEL),
        "draft_model": resource.get(signals.RES_DRAFT_MODEL),
        "runtime": resource.get(signals.RES_RUNTIME) or (
            signals.RUNTIME_SGLANG if signals.RES_SGLANG_VERSION in resource else None),
        "runtime_version": resource.get(signals.RES_RUNTIME_VERSION,
                                        resource.get(signals.RES_SGLANG_VERSION)),
        "sglang_version": resource.get(signals.RES_SGLANG_VERSION),
        "metric_snapshots": n_snapshots,
        "skipped_lines": stats.get("skipped", 0) + stats.get("torn", 0),
        "spans": n_spans,
        "steps": _total(metrics, signals.SPEC_STEPS),
        "drafts": drafts,
        "draft_tokens": draft_tokens,
        "accepted_tokens": accepted,
        "mean_acceptance_length": (1 + accepted / drafts) if drafts else None,
        "acceptance_rate": (accepted / draft_tokens) if draft_tokens else None,
        "accepted_per_position": [per_pos[k] for k in pos_keys],
        "acceptance_per_position": [per_pos[k] / drafts for k in pos_keys] if drafts else [],
        "agreement_drafts": agr_drafts,
        "agreement_per_position": ([agr_pos[k] / agr_drafts for k in agr_keys]
                                   if agr_drafts else []),
        "accept_length_counts": {str(k): lengths[k] for k in sorted(lengths, key=_sort_key)
                                 if lengths[k]},  # lengths seen (series start at 0)
        "hidden_state_passes": passes,
        "expected_widths": {str(k): v for k, v in _by_attr(
            metrics, signals.EAGLE3_EXPECTED_WIDTH, "kind").items()},
        "fc_bypass": _total(metrics, signals.EAGLE3_FC_BYPASS),
        "width_mismatch": _total(metrics, signals.EAGLE3_WIDTH_MISMATCH),
        "internal_errors": _total(metrics, signals.INTERNAL_ERRORS),
        "telemetry_dropped": _total(metrics, signals.TELEMETRY_DROPPED),
        "findings": sorted(findings.values(), key=lambda f: f["code"]),
    }


def build_report(directory: str) -> dict[str, Any]:
    """Summaries of every process folder under `directory` (or of `directory` itself when
    it is one process's folder). An unusable `directory` raises `ReportError` with a
    one-line message; a process folder that cannot be read is listed with its error."""
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
    procs = []
    for path in paths:
        try:
            procs.append(summarize_process(path))
        except (OSError, RecursionError, MemoryError) as exc:
            procs.append({"process": os.path.basename(os.path.normpath(path)),
                          "error": f"{type(exc).__name__}: {exc}"})
    return {"directory": directory, "processes": procs}
