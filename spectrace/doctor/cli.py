"""`spectrace doctor DRAFT_DIR --target TARGET [--sglang-version V] [--json]`.

Exit status: 0 no errors (warnings allowed), 1 errors found, 2 unusable input (one line
on stderr, no traceback).
"""
from __future__ import annotations

import argparse
import json
import sys

from ..findings import ERROR, WARNING
from . import UnusableInput, check_checkpoint
from .check import DoctorReport

EXIT_OK, EXIT_FINDINGS, EXIT_UNUSABLE = 0, 1, 2


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("draft_dir", metavar="DRAFT_DIR",
                        help="EAGLE-3 draft directory (config.json + *.safetensors)")
    parser.add_argument("--target", required=True, metavar="TARGET",
                        help="target model directory with config.json, or a config.json path")
    parser.add_argument("--sglang-version", default=None, metavar="VERSION",
                        help="check against this SGLang version's loader (default: the "
                             "installed sglang, else the newest known layout)")
    parser.add_argument("--json", action="store_true", help="print the report as JSON")


def run(args: argparse.Namespace) -> int:
    try:
        report = check_checkpoint(args.draft_dir, args.target, args.sglang_version)
    except UnusableInput as e:
        print(f"spectrace doctor: {' '.join(str(e).splitlines())}", file=sys.stderr)
        return EXIT_UNUSABLE
    if args.json:
        print(json.dumps(report.to_dict(), indent=2))
    else:
        print(format_text(report))
    return report.exit_status


def format_text(report: DoctorReport) -> str:
    lay = report.layout
    lines = [f"spectrace doctor: {report.draft['path']} against {report.target['config']}",
             f"  SGLang {report.sglang_version} ({report.sglang_version_source}), "
             f"`{lay.name}` layout" + (f"; note: {lay.assumed}" if lay.assumed else "")]
    for f in report.findings:
        lines.append(f"{f.severity.upper():7} {f.code}: {f.message}")
    n_err = sum(f.severity == ERROR for f in report.findings)
    n_warn = sum(f.severity == WARNING for f in report.findings)
    lines.append("no problems found" if not report.findings else
                 f"{n_err} error(s), {n_warn} warning(s), "
                 f"{len(report.findings) - n_err - n_warn} note(s)")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="spectrace doctor", description=__doc__.splitlines()[0])
    add_arguments(parser)
    return run(parser.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
