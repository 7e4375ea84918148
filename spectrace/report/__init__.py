"""`spectrace report [DIR] [--json]`: what instrumented processes wrote, per process.

`summary` turns a folder into per-process figures, `text` renders them; `reader` streams
the files without trusting them.
"""
from .findings import read_findings
from .summary import ReportError, build_report, summarize_process
from .text import render_text

__all__ = ["ReportError", "build_report", "read_findings", "render_text", "summarize_process"]
