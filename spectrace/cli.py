"""spectrace: what speculative decoding really does in SGLang and vLLM. `spectrace report`
summarises what the instrumented processes wrote (text, --json, --html, --watch);
`spectrace doctor` checks an EAGLE-3 draft checkpoint against the runtime that will serve
it, before it is deployed; `spectrace grafana` writes this version's dashboards and alert
rules.

Exit status 2 means unusable input, with a one-line message."""
from __future__ import annotations

import argparse
import json
import sys


def _report(args) -> int:
    from .report import ReportError, build_report, render_text
    if args.watch:
        from .report.watch import watch
        return watch(args.directory, args.interval)
    try:
        if args.prometheus:
            rep, base = _prometheus_reports(args)
        else:
            rep = build_report(args.directory)
            base = build_report(args.baseline) if args.baseline else None
    except ReportError as exc:
        print(f"spectrace report: {exc}", file=sys.stderr)
        return 2
    if base is not None:
        return _comparison(args, rep, base)
    if args.html:
        from .report.html import write_html
        try:
            size = write_html(rep, args.html)
        except OSError as exc:
            print(f"spectrace report: --html {args.html}: cannot write it "
                  f"({exc.strerror or exc})", file=sys.stderr)
            return 2
    print(json.dumps(rep.to_json(), indent=2) if args.json else render_text(rep))
    if args.html:
        print(f"\nwrote {args.html} ({size / 1024:.0f} KiB, self-contained: open it in any "
              f"browser, offline)", file=sys.stderr if args.json else sys.stdout)
    return 0


def _prometheus_reports(args):
    """`--prometheus URL`: the report on the processes a Prometheus server holds, and the
    baseline it is compared with: another selector over the same range
    (`--baseline-selector`: a canary against the fleet, draft A against draft B), the same
    range earlier (`--baseline-offset`: before and after an upgrade), or both."""
    import time
    from dataclasses import replace

    from .report.prometheus_api import PrometheusRange, duration_s, end_time
    from .report.summary import ReportError, prometheus_report
    now = time.time()
    try:
        since = duration_s(args.since)
        ago = (duration_s(args.baseline_offset, "--baseline-offset") if args.baseline_offset
               else 0.0)
        end = now if args.until is None else end_time(args.until, now)
    except ValueError as exc:
        raise ReportError(str(exc)) from None
    current = PrometheusRange(args.prometheus, args.selector or "", since, end=end,
                              timeout_s=args.timeout, until=args.until is not None)
    rep = prometheus_report(current)
    if args.baseline_selector is None and not ago:
        return rep, None
    base = replace(current, ago_s=ago, selector=current.selector
                   if args.baseline_selector is None else args.baseline_selector)
    return rep, prometheus_report(base)


def _comparison(args, rep, base) -> int:
    """`--baseline`: the current run against the baseline run (`report.compare`)."""
    from .report.compare import compare_reports
    from .report.compare_text import render_comparison_text
    c = compare_reports(rep, base)
    if args.html:
        from .report.html_compare import write_comparison_html
        try:
            size = write_comparison_html(c, rep, base, args.html)
        except OSError as exc:
            print(f"spectrace report: --html {args.html}: cannot write it "
                  f"({exc.strerror or exc})", file=sys.stderr)
            return 2
    if args.json:
        print(json.dumps({"comparison": c.to_json(), "current": rep.to_json(),
                          "baseline": base.to_json()}, indent=2))
    else:
        print(render_comparison_text(c))
    if args.html:
        print(f"\nwrote {args.html} ({size / 1024:.0f} KiB)",
              file=sys.stderr if args.json else sys.stdout)
    return 0


def _interval(text: str) -> float:
    try:
        v = float(text)
    except ValueError:
        v = float("nan")
    if not 0.1 <= v <= 3600:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds from 0.1 to 3600")
    return v


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="spectrace", description=__doc__.split("\n\n")[0],
                                epilog=__doc__.split("\n\n")[1])
    sub = p.add_subparsers(dest="command", required=True)
    r = sub.add_parser("report", help="summarize what instrumented processes wrote",
                       description="Summarise what spectrace wrote in a server's processes: "
                       "a verdict (healthy, broken with its cause and fix, or "
                       "underperforming and where), then the figures of each process and "
                       "of all together.")
    r.add_argument("directory", nargs="?", default=None,
                   help="output folder (default: SPECTRACE_OUTPUT_DIR or ./spectrace-data)")
    r.add_argument("--json", action="store_true", help="machine-readable output")
    r.add_argument("--html", metavar="FILE",
                   help="also write the report with charts as one self-contained HTML file")
    r.add_argument("--baseline", metavar="BASEDIR",
                   help="compare with the run spectrace wrote in BASEDIR (or draft A's "
                        "folder against draft B's, served side by side): what changed in "
                        "the run configuration, acceptance side by side with intervals, and "
                        "how much of a change is the traffic mix and how much the system")
    r.add_argument("--prometheus", metavar="URL",
                   help="read the processes from a Prometheus server (or any store with its "
                        "query API) instead of a folder: each scrape target with spectrace's "
                        "target_info is a process, all of them together the fleet; "
                        "credentials from SPECTRACE_PROMETHEUS_TOKEN (bearer) or "
                        "SPECTRACE_PROMETHEUS_USER and _PASSWORD, a CA bundle from "
                        "SPECTRACE_PROMETHEUS_CA_FILE")
    r.add_argument("--selector", metavar="MATCHERS",
                   help="with --prometheus: label matchers on the processes' target_info, "
                        "e.g. 'service_name=\"prod\"' (deployment), "
                        "'spectrace_draft_model=~\".*v2\"' or 'instance=\"host:9464\"'")
    r.add_argument("--since", default="1h", metavar="DURATION",
                   help="with --prometheus: what the counters gained over the last DURATION "
                        "(30m, 1h, 7d; default 1h)")
    r.add_argument("--until", metavar="TIME",
                   help="with --prometheus: the range ends at TIME instead of now (an RFC 3339 "
                        "time such as 2026-12-07T10:00:00Z, a Unix time, or a duration ago "
                        "such as 2h): the hour before an incident")
    r.add_argument("--timeout", type=_interval, default=30.0, metavar="SECONDS",
                   help="with --prometheus: each query's timeout (default 30)")
    r.add_argument("--baseline-selector", metavar="MATCHERS",
                   help="with --prometheus: compare with the processes these matchers select "
                        "over the same range (a canary against the rest of the fleet, draft A "
                        "against draft B), as --baseline compares two folders")
    r.add_argument("--baseline-offset", metavar="DURATION",
                   help="with --prometheus: compare with the same range DURATION earlier "
                        "(1d: today against yesterday, before and after an upgrade)")
    r.add_argument("--watch", action="store_true",
                   help="a live view of a running server in the terminal (Ctrl-C ends it); "
                        "needs the 'cli' extra")
    r.add_argument("--interval", type=_interval, default=None, metavar="SECONDS",
                   help="--watch refresh period (default: SPECTRACE_METRIC_INTERVAL or 2)")
    r.set_defaults(func=_report)
    from .grafana import cli as grafana_cli
    g = sub.add_parser("grafana", help="write (or --check) the Grafana dashboard, the "
                       "Prometheus alert rules and Grafana provisioning files")
    grafana_cli.add_arguments(g)
    g.set_defaults(func=grafana_cli.run)
    try:
        from .doctor import cli as doctor_cli
        d = sub.add_parser("doctor", help="check an EAGLE-3 draft checkpoint before deploying",
                           description="Check an EAGLE-3 draft checkpoint against the loader "
                           "of the runtime (and version) that will serve it and against its "
                           "target: weights it would drop, widths, aux layers, vocabulary "
                           "map, positions, dtype, quantization, tokenizer. --fix writes a "
                           "corrected copy.")
        doctor_cli.add_arguments(d)
        d.set_defaults(func=doctor_cli.run)
    except ImportError:
        pass
    args = p.parse_args(argv)
    if args.command == "report":
        if args.prometheus and (args.watch or args.directory is not None):
            p.error("--prometheus reads the processes from Prometheus: give no folder and "
                    "no --watch")
        if args.directory is None:
            import os
            args.directory = os.environ.get("SPECTRACE_OUTPUT_DIR") or "./spectrace-data"
        if args.watch and (args.json or args.html or args.baseline):
            p.error("--watch shows a live view; it cannot be combined with --json, --html "
                    "or --baseline")
        if not args.prometheus and (args.selector or args.since != "1h" or args.until
                                    or args.baseline_selector or args.baseline_offset):
            p.error("--selector, --since, --until and --baseline-selector/--baseline-offset "
                    "choose what --prometheus reads; give --prometheus URL")
        if args.prometheus and args.baseline:
            p.error("--baseline BASEDIR compares two folders; with --prometheus use "
                    "--baseline-selector or --baseline-offset")
        if args.interval is not None and not args.watch:
            p.error("--interval sets how often --watch refreshes; give it with --watch")
    try:
        return args.func(args)
    except BrokenPipeError:
        return _reader_gone()


def _reader_gone() -> int:
    """The reader of our output left (`spectrace report | head`): what it read is what it
    asked for. Standard output goes to /dev/null so the exit's flush cannot fail again,
    and the status is a pipe's writer ended by SIGPIPE (128 + 13), as other tools exit."""
    import os
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)
    return 141


if __name__ == "__main__":
    sys.exit(main())
