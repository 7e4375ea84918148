"""`spectrace report [DIR] [--json]`: what instrumented processes wrote, per process.

`summary` turns a folder into a `Report` of typed records (`records`: per process and all
together; `to_json()` is `--json`), `text` renders them, worded by `format`; `reader`
streams the files without trusting them.
"""
from .findings_file import read_findings
from .records import CombinedSummary, ProcessSummary, Report, UnreadableProcess
from .summary import ReportError, build_report, summarize_process
from .text import render_text

__all__ = ["CombinedSummary", "ProcessSummary", "Report", "ReportError", "UnreadableProcess",
           "build_report", "read_findings", "render_text", "summarize_process"]
