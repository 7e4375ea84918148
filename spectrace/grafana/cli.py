"""`spectrace grafana --out DIR | --check DIR [options]`: write this version's dashboard,
alert rules and Grafana provisioning files, or say what differs from them in DIR.

Exit status: 0 written / DIR matches, 1 DIR differs (--check), 2 unusable input (one line
on stderr).
"""
from __future__ import annotations

import argparse
import os
import shlex
import sys

from .. import __version__
from .check import differences, written_with
from .files import RULES, Options, OptionError, files

EXIT_OK, EXIT_DIFFERS, EXIT_UNUSABLE = 0, 1, 2


def add_arguments(parser: argparse.ArgumentParser) -> None:
    where = parser.add_mutually_exclusive_group(required=True)
    where.add_argument("--out", metavar="DIR",
                       help="write the files into DIR (created if missing; the files spectrace "
                            "writes there are replaced)")
    where.add_argument("--check", metavar="DIR",
                       help="compare DIR with what this version writes (give the options DIR "
                            "was written with): names each panel and rule that differs")
    parser.add_argument("--selector", action="append", default=[], metavar="MATCHER",
                        help='a label matcher every query and rule also applies, e.g. '
                             '\'namespace="prod"\' or \'job=~"sglang.*"\' (repeatable)')
    parser.add_argument("--datasource", metavar="NAME",
                        help="the Prometheus datasource's name: the dashboard selects it at "
                             "first, the provisioning file defines it (default: Prometheus)")
    parser.add_argument("--datasource-uid", metavar="UID",
                        help="its uid (default: spectrace-prometheus)")
    parser.add_argument("--prometheus-url", default=Options.prometheus_url, metavar="URL",
                        help="the provisioned datasource's URL (default: %(default)s, "
                             "the docker-compose stack's)")
    parser.add_argument("--scrape-interval", default=Options.scrape_interval,
                        metavar="DURATION",
                        help="Prometheus' scrape interval, for $__rate_interval "
                             "(default: %(default)s)")
    parser.add_argument("--dashboards-path", default=Options.dashboards_path, metavar="PATH",
                        help="where Grafana reads the dashboard files, in the provisioning "
                             "file (default: %(default)s)")


def _write(folder: str, texts: dict[str, str]) -> None:
    for path, text in texts.items():
        full = os.path.join(folder, path)
        os.makedirs(os.path.dirname(full), exist_ok=True)
        with open(full, "w", encoding="utf-8") as fh:
            fh.write(text)
        print(f"wrote {full}")


def run(args: argparse.Namespace) -> int:
    try:
        opts = Options(tuple(args.selector), args.datasource, args.datasource_uid,
                       args.prometheus_url, args.scrape_interval, args.dashboards_path)
    except OptionError as exc:
        print(f"spectrace grafana: {exc}", file=sys.stderr)
        return EXIT_UNUSABLE
    texts = files(opts)
    folder = args.out or args.check
    if args.check is not None:
        if not os.path.isdir(folder):
            print(f"spectrace grafana: --check {folder}: not a folder", file=sys.stderr)
            return EXIT_UNUSABLE
        recorded = written_with(folder)
        if recorded is not None and recorded != opts.arguments():
            print(f"note: {folder} was written with `spectrace grafana --out {folder}"
                  f"{''.join(' ' + shlex.quote(a) for a in recorded)}`: give --check the same "
                  "options to see only what this version changes")
        found = differences(folder, texts)
        for line in found:
            print(line)
        if found:
            print(f"{len(found)} difference(s) from spectrace {__version__}'s files; "
                  f"`spectrace grafana --out {folder}` with the same options writes them")
            return EXIT_DIFFERS
        print(f"{folder}: as spectrace {__version__} writes it")
        return EXIT_OK
    try:
        _write(folder, texts)
    except OSError as exc:
        print(f"spectrace grafana: --out {folder}: cannot write there "
              f"({exc.strerror or exc}: {exc.filename or folder})", file=sys.stderr)
        return EXIT_UNUSABLE
    print(f"Prometheus: list {os.path.abspath(os.path.join(folder, RULES))} under rule_files. "
          f"Grafana: copy {os.path.join(folder, 'provisioning')}/ into its provisioning folder "
          f"and the dashboards to {opts.dashboards_path}, or POST the dashboard to "
          "/api/dashboards/db (README, 'Quick start on a GPU server').")
    return EXIT_OK
