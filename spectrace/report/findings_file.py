"""`read_findings(directory)`: the findings instrumented processes wrote, as `Finding`s, for
people who embed the runtime (`sglang.Engine(...)`, whose models live in a spawned
scheduler process, out of reach of `spectrace.check_pair`) and want to assert a healthy
deployment in their own CI:

    spectrace.instrument(output_dir=d)
    engine = sglang.Engine(...)
    engine.generate(...)                      # the pair audit runs at the first step
    assert [f for f in read_findings(d) if f.severity == "error"] == []
"""
from __future__ import annotations

from ..findings import SEVERITIES, Finding
from .summary import build_report


def read_findings(directory: str) -> list[Finding]:
    """One `Finding` per code and process, as first written (its details included);
    `ReportError` for an unusable folder."""
    out = []
    for proc in build_report(directory).readable:
        for f in proc.findings:
            severity = f.severity if f.severity in SEVERITIES else "error"
            out.append(Finding(f.code, severity, f.message or "",
                               dict(f.details or {}, process=proc.process)))
    return out
