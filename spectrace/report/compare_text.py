"""`spectrace report DIR --baseline BASEDIR` as text: the comparison's sentence, the run
configuration that differs, the two runs side by side (mean accept length and each
position with intervals, speed-up), and every breakdown's buckets in both runs with the
split into traffic and system (`report.compare`)."""
from __future__ import annotations

from typing import TYPE_CHECKING

from .compare import MIX, RunComparison

if TYPE_CHECKING:  # the type only: the views read the comparison, never run its rule
    from ..rules.compare import Estimate


def _value(v) -> str:
    if v is None:
        return "not recorded"
    if isinstance(v, dict):
        return ", ".join(f"{k} {x:.0%}" for k, x in v.items()) or "none"
    if isinstance(v, list):
        return "/".join(str(x) for x in v)
    return "on" if v is True else "off" if v is False else str(v)


def _est(e: Estimate | None) -> str:
    return "-" if e is None else f"{e.value:.2f} [{e.low:.2f}, {e.high:.2f}]"


def _change(e: Estimate | None) -> str:
    return "-" if e is None else f"{e.value:+.2f} [{e.low:+.2f}, {e.high:+.2f}]"


def _speedup(s: dict | None) -> str:
    if not s or s.get("speedup") is None:
        return "not measured"
    return f"{s['speedup']:.2f}x ({s['verdict']})"


def render_comparison_text(c: RunComparison) -> str:
    lines = [c.sentence, "",
             f"current:  {c.current.directory} ({c.current.drafts:.0f} request-steps)",
             f"baseline: {c.baseline.directory} ({c.baseline.drafts:.0f} request-steps)", "",
             "run configuration (baseline -> current):"]
    for r in c.config:
        mark = "*" if r.differs else " "
        if r.kind == MIX and not r.baseline and not r.current:
            continue
        same = "" if r.differs else "  (same)"
        lines.append(f" {mark} {r.label}: {_value(r.baseline)} -> {_value(r.current)}{same}"
                     if r.differs else f" {mark} {r.label}: {_value(r.current)}{same}")
    res = c.result
    lines += ["", "side by side (95 % intervals)         baseline               current"
              "                change",
              f"  mean acceptance length   {_est(c.baseline.mean_acceptance_length):>22} "
              f"{_est(c.current.mean_acceptance_length):>22} {_change(res.total):>22}"]
    for p, change in enumerate(res.positions):
        b = c.baseline.acceptance_per_position
        cu = c.current.acceptance_per_position
        lines.append(f"  acceptance at [{p}]        {_est(b[p] if p < len(b) else None):>22} "
                     f"{_est(cu[p] if p < len(cu) else None):>22} {_change(change):>22}")
    lines.append(f"  estimated speed-up       {_speedup(c.baseline.speedup):>22} "
                 f"{_speedup(c.current.speedup):>22}")
    for s in res.splits:
        used = " (explains the change)" if s is res.explained_by else ""
        lines += ["", f"by {s.breakdown.replace('_', ' ')}{used}: compared buckets hold "
                  f"{s.coverage:.0%} of the current request-steps"
                  + ("" if s.usable else f" (a split needs {c.min_coverage:.0%})")]
        if s.system is not None:
            lines.append(f"  baseline standardised to the current mix: "
                         f"{s.standardised_baseline:.2f}; system {_change(s.system)}, "
                         f"traffic {_change(s.traffic)}")
        for x in s.buckets:
            bl = x.baseline.mean_acceptance_length if x.baseline else None
            cl = x.current.mean_acceptance_length if x.current else None
            lines.append(
                f"  {x.bucket:>10}: share {x.baseline_share:4.0%} -> {x.current_share:4.0%}, "
                f"mean {'-' if bl is None else f'{bl:.2f}'} -> "
                f"{'-' if cl is None else f'{cl:.2f}'}, change "
                + (_change(x.change) if x.change else
                   f"not compared (fewer than {c.min_bucket_steps} request-steps)"))
    return "\n".join(lines)
