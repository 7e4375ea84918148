"""`spectrace report DIR --watch`: a live terminal view of a running server.

Every export interval (`SPECTRACE_METRIC_INTERVAL`, 2 s by default, or `--interval`) it
reads the folder again (the processes whose files changed: `ProcessCache`) and shows, per
process (rank) and for all together, the figures of the text report
(`text.figure_lines`), with the mean acceptance length coloured by the dashboards'
healthy ranges. Built on `rich.live.Live` (the optional `cli` extra), in the
terminal's alternate screen: Ctrl-C ends it with exit status 0 and the terminal as it was.
"""
from __future__ import annotations

import sys
import time

from .format import (
    HEALTH_BANDS, combined_title, group_title, health_band, process_title, settings_lines,
)
from .records import ProcessSummary, Report, UnreadableProcess
from .folder_source import ReportError, files_state
from .summary import build_report, read_process
from .text import figure_lines
from .verdict import BROKEN, HEALTHY, SLOWER, UNDERPERFORMING, verdict_of

EXTRA_HINT = ("spectrace report --watch needs the 'cli' extra (the rich terminal library): "
              "pip install 'spectrace[cli]'")


class ProcessCache:
    """Each process folder's summary from the previous refresh, read again only when one
    of its files changed size or modification time: a refresh re-reads only the processes
    still writing, not every finished one (up to 8 MiB of metrics each)."""

    def __init__(self) -> None:
        self._entries: dict[str, tuple] = {}  # path: (files_state, summary)

    def report(self, directory: str) -> Report:
        """`build_report(directory)`, reusing unchanged summaries; folders gone are
        forgotten."""
        previous, self._entries = self._entries, {}

        def read(path: str) -> ProcessSummary | UnreadableProcess:
            state = files_state(path)  # before reading: a change while reading shows next time
            entry = previous.get(path)
            if entry is None or entry[0] != state:
                entry = (state, read_process(path))
            self._entries[path] = entry
            return entry[1]

        return build_report(directory, read)


BAND_STYLES = ("bold red", "bold yellow", "bold green")  # of `format.HEALTH_BANDS`


def health(mean_acceptance_length) -> tuple[str, str]:
    """Words and colour for a mean acceptance length, by the dashboards' bands."""
    if mean_acceptance_length is None:
        return "no verified steps yet", "dim"
    band = health_band(mean_acceptance_length)
    return HEALTH_BANDS[band][1], BAND_STYLES[band]


def render(report: Report, interval: float):
    """The screen for one report: a header, then one panel per process (and all together)."""
    from rich.console import Group
    from rich.panel import Panel
    from rich.text import Text

    header = Text.assemble(
        ("spectrace report --watch ", "bold"), (report.directory, "cyan"),
        f"   updated {time.strftime('%H:%M:%S')}, every {interval:g} s; Ctrl-C to stop")
    v = verdict_of(report)
    style = {HEALTHY: "bold green", BROKEN: "bold red", UNDERPERFORMING: "bold yellow",
             SLOWER: "bold yellow"}.get(v.state, "dim")
    parts = [Text(v.sentence, style=style), header] + [Text(x) for x in settings_lines(report)]
    if not report.processes:
        parts.append(Text("no instrumented process has written here yet", style="dim"))
    views = [(f"process {p.process}" if isinstance(p, UnreadableProcess) else process_title(p),
              p) for p in report.processes]
    views += [(group_title(g), g) for g in report.groups]
    combined = report.combined
    if combined and len(combined.processes) > 1:
        views.append((combined_title(combined), combined))
    for title, p in views:
        if isinstance(p, UnreadableProcess):
            parts.append(Panel(Text(f"unreadable ({p.error})", style="red"), title=title,
                               title_align="left"))
            continue
        words, style = health(p.figures.mean_acceptance_length)
        status = Text.assemble("  speculation: ", (words, style), (
            "  (mean acceptance length "
            + ", ".join(f"{band}: {verdict}" for band, verdict in HEALTH_BANDS[:2]) + ")",
            "dim"))
        own = ([Text(f"  {p.verdict.sentence}")]  # a deployment's own verdict
               if getattr(p, "verdict", None) is not None else [])
        body = Text("\n").join([status] + own + [Text(line) for line in figure_lines(p)])
        parts.append(Panel(body, title=title, title_align="left",
                           border_style="red" if p.findings else "blue"))
    return Group(*parts)


def watch(directory: str, interval: float | None = None) -> int:
    """Run the live view until Ctrl-C (exit 0); exit 2 for unusable input or without rich."""
    try:
        from rich.console import Console
        from rich.live import Live
    except ImportError:
        print(EXTRA_HINT, file=sys.stderr)
        return 2
    if interval is None:
        from .. import config
        try:
            interval = config.from_env().metric_interval_s
        except config.ConfigError as exc:
            print(f"spectrace report: {exc}", file=sys.stderr)
            return 2
    cache = ProcessCache()
    try:
        report = cache.report(directory)
    except ReportError as exc:
        print(f"spectrace report: {exc}", file=sys.stderr)
        return 2
    try:
        with Live(render(report, interval), console=Console(), screen=True,
                  auto_refresh=False, redirect_stdout=False, redirect_stderr=False) as live:
            while True:
                time.sleep(interval)
                try:
                    report = cache.report(directory)
                except ReportError as exc:  # the folder went away: say so, keep watching
                    report = Report(directory, (UnreadableProcess(directory, str(exc)),), None)
                live.update(render(report, interval), refresh=True)
    except KeyboardInterrupt:
        pass
    return 0
