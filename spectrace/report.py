"""`spectrace report [DIR] [--json]`: what the file exporter wrote, per process, in words.

Reads `<DIR>/<process>/{resource.json,metrics.jsonl,events.jsonl}`; the last metrics line
holds the process's cumulative totals. Torn or garbled lines are skipped.
"""
from __future__ import annotations

import json
import os
from typing import Any

from . import signals
from .file_export import EVENTS_FILE, METRICS_FILE, RESOURCE_FILE, SPANS_FILE, read_jsonl


class ReportError(Exception):
    """Unusable input for the report (exit status 2)."""


def _points(metrics: dict, spec: signals.MetricSpec) -> list[dict]:
    return metrics.get(spec.name, [])


def _total(metrics: dict, spec: signals.MetricSpec) -> float:
    return sum(p["value"] for p in _points(metrics, spec) if isinstance(p.get("value"), (int, float)))


def _by_attr(metrics: dict, spec: signals.MetricSpec, attr: str) -> dict:
    out: dict = {}
    for p in _points(metrics, spec):
        key = (p.get("attributes") or {}).get(attr)
        if key is not None and isinstance(p.get("value"), (int, float)):
            out[key] = out.get(key, 0) + p["value"]
    return out


def summarize_process(path: str) -> dict[str, Any]:
    resource = {}
    try:
        with open(os.path.join(path, RESOURCE_FILE), encoding="utf-8") as fh:
            loaded = json.load(fh)
        if isinstance(loaded, dict):
            resource = loaded.get("attributes", {}) or {}
    except (OSError, ValueError):
        pass
    snapshots = read_jsonl(os.path.join(path, METRICS_FILE))
    metrics = snapshots[-1].get("metrics", {}) if snapshots else {}
    if not isinstance(metrics, dict):
        metrics = {}
    events = read_jsonl(os.path.join(path, EVENTS_FILE))
    spans = read_jsonl(os.path.join(path, SPANS_FILE))

    drafts = _total(metrics, signals.SPEC_DRAFTS)
    accepted = _total(metrics, signals.SPEC_ACCEPTED_TOKENS)
    draft_tokens = _total(metrics, signals.SPEC_DRAFT_TOKENS)
    per_pos = _by_attr(metrics, signals.SPEC_ACCEPTED_PER_POSITION, signals.ATTR_POSITION)
    agr_drafts = _total(metrics, signals.SPEC_AGREEMENT_DRAFTS)
    agr_pos = _by_attr(metrics, signals.SPEC_AGREEMENT_PER_POSITION, signals.ATTR_POSITION)
    lengths = _by_attr(metrics, signals.SPEC_ACCEPT_LENGTH, signals.ATTR_LENGTH)
    passes = [{"pass_kind": p["attributes"].get(signals.ATTR_PASS_KIND),
               "width": p["attributes"].get(signals.ATTR_WIDTH), "count": p["value"]}
              for p in _points(metrics, signals.EAGLE3_PASSES) if p.get("attributes")]
    findings: dict[str, dict] = {}
    for e in events:
        code = e.get("code")
        if not isinstance(code, str):
            continue
        f = findings.setdefault(code, {"code": code, "severity": e.get("severity"),
                                       "message": e.get("message"), "details": e.get("details"),
                                       "events": 0})
        f["events"] += 1
    finding_counts = _by_attr(metrics, signals.FINDINGS, signals.ATTR_CODE)
    for code, n in finding_counts.items():
        findings.setdefault(code, {"code": code, "severity": None, "message": None,
                                   "details": None, "events": 0})["count"] = n
    return {
        "process": os.path.basename(path),
        "pid": resource.get("process.pid"),
        "role": resource.get(signals.RES_ROLE),
        "tp_rank": resource.get(signals.RES_TP_RANK),
        "sglang_version": resource.get(signals.RES_SGLANG_VERSION),
        "metric_snapshots": len(snapshots),
        "spans": len(spans),
        "steps": _total(metrics, signals.SPEC_STEPS),
        "drafts": drafts,
        "draft_tokens": draft_tokens,
        "accepted_tokens": accepted,
        "mean_acceptance_length": (1 + accepted / drafts) if drafts else None,
        "acceptance_rate": (accepted / draft_tokens) if draft_tokens else None,
        "accepted_per_position": [per_pos[k] for k in sorted(per_pos)],
        "acceptance_per_position": [per_pos[k] / drafts for k in sorted(per_pos)] if drafts else [],
        "agreement_drafts": agr_drafts,
        "agreement_per_position": ([agr_pos[k] / agr_drafts for k in sorted(agr_pos)]
                                   if agr_drafts else []),
        "accept_length_counts": {str(k): lengths[k] for k in sorted(lengths, key=int)},
        "hidden_state_passes": passes,
        "expected_widths": {p["attributes"].get("kind"): p["value"]
                            for p in _points(metrics, signals.EAGLE3_EXPECTED_WIDTH)
                            if p.get("attributes")},
        "fc_bypass": _total(metrics, signals.EAGLE3_FC_BYPASS),
        "width_mismatch": _total(metrics, signals.EAGLE3_WIDTH_MISMATCH),
        "internal_errors": _total(metrics, signals.INTERNAL_ERRORS),
        "findings": sorted(findings.values(), key=lambda f: f["code"]),
    }


def build_report(directory: str) -> dict[str, Any]:
    if not os.path.isdir(directory):
        raise ReportError(f"{directory}: no such folder (spectrace writes to "
                          f"SPECTRACE_OUTPUT_DIR, default ./spectrace-data)")
    procs = []
    for name in sorted(os.listdir(directory)):
        path = os.path.join(directory, name)
        if os.path.isdir(path) and any(os.path.exists(os.path.join(path, f)) for f in
                                       (RESOURCE_FILE, METRICS_FILE, EVENTS_FILE)):
            procs.append(summarize_process(path))
    return {"directory": directory, "processes": procs}


def _fmt(x, digits=2) -> str:
    return "-" if x is None else f"{x:.{digits}f}"


def render_text(report: dict[str, Any]) -> str:
    lines = [f"spectrace report: {report['directory']}"]
    if not report["processes"]:
        lines.append("  no instrumented process has written here yet")
    for p in report["processes"]:
        lines.append("")
        lines.append(f"process {p['process']} (pid {p['pid']}, role {p['role']}, tp rank "
                     f"{p['tp_rank']}, SGLang {p['sglang_version']})")
        if p["drafts"]:
            lines.append(f"  speculative steps {int(p['steps'])}, request-steps verified "
                         f"{int(p['drafts'])}, draft tokens {int(p['draft_tokens'])}, "
                         f"accepted {int(p['accepted_tokens'])}")
            lines.append(f"  mean acceptance length {_fmt(p['mean_acceptance_length'])} "
                         f"(1.00 = no speed-up), acceptance rate {_fmt(p['acceptance_rate'])}")
            lines.append("  acceptance per position: " + "  ".join(
                f"[{i}] {v:.2f}" for i, v in enumerate(p["acceptance_per_position"])))
            if p["agreement_per_position"]:
                lines.append("  draft/target agreement per position: " + "  ".join(
                    f"[{i}] {v:.2f}" for i, v in enumerate(p["agreement_per_position"]))
                    + f"  (from {int(p['agreement_drafts'])} sampled request-steps)")
            lines.append("  accept-length distribution: " + "  ".join(
                f"{k}: {int(v)}" for k, v in p["accept_length_counts"].items()))
        else:
            lines.append("  no verified speculative steps recorded")
        if p["hidden_state_passes"]:
            lines.append("  draft hidden-state widths: " + ", ".join(
                f"{x['pass_kind']} {x['width']} wide x{int(x['count'])}"
                for x in p["hidden_state_passes"]) + "; expected " + ", ".join(
                f"{k} {int(v)}" for k, v in sorted(p["expected_widths"].items())))
        lines.append(f"  fc bypass events: {int(p['fc_bypass'])}, width mismatches: "
                     f"{int(p['width_mismatch'])}, spectrace internal errors: "
                     f"{int(p['internal_errors'])}")
        if p["findings"]:
            lines.append("  findings:")
            for f in p["findings"]:
                n = f.get("count", f["events"])
                lines.append(f"  - {f['code']} ({f['severity'] or 'see metrics'}, x{int(n)}): "
                             f"{f['message'] or ''}")
        else:
            lines.append("  findings: none")
    return "\n".join(lines)
