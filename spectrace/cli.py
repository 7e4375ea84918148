"""The `spectrace` command: `report` (what the file exporter wrote) and `doctor` (static
checks of a draft checkpoint). Exit status 2 means unusable input, with a one-line message."""
from __future__ import annotations

import argparse
import json
import sys


def _report(args) -> int:
    from .report import ReportError, build_report, render_text
    try:
        rep = build_report(args.directory)
    except ReportError as exc:
        print(f"spectrace report: {exc}", file=sys.stderr)
        return 2
    print(json.dumps(rep, indent=2) if args.json else render_text(rep))
    return 0


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="spectrace", description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="command", required=True)
    r = sub.add_parser("report", help="summarize what instrumented processes wrote")
    r.add_argument("directory", nargs="?", default=None,
                   help="output folder (default: SPECTRACE_OUTPUT_DIR or ./spectrace-data)")
    r.add_argument("--json", action="store_true", help="machine-readable output")
    r.set_defaults(func=_report)
    try:
        from .doctor import cli as doctor_cli
        d = sub.add_parser("doctor", help="check an EAGLE-3 draft checkpoint before deploying")
        doctor_cli.add_arguments(d)
        d.set_defaults(func=doctor_cli.run)
    except ImportError:
        pass
    args = p.parse_args(argv)
    if args.command == "report" and args.directory is None:
        import os
        args.directory = os.environ.get("SPECTRACE_OUTPUT_DIR") or "./spectrace-data"
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
