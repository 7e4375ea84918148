"""Run `spectrace report` over every recorded folder the tests keep (tests/recorded/) and
write what it says, in one canonical file: text, `--json`, `--html` (its markup, with the
inline scripts and styles reduced to a hash of each), one `--watch` screen, and each
recorded comparison (`--baseline`: text, `--json`, `--html`). Run it before and after a change to the report: the
two files must be identical except for what the change adds (issue 44: behaviour
unchanged), like scripts/doctor_snapshot.py for the doctor.

    python scripts/report_snapshot.py OUT_FILE

Paths are written as `<REC>`, wall-clock times as `<time>`.
"""
from __future__ import annotations

import contextlib
import hashlib
import io
import os
import re
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RECORDED = os.path.join(ROOT, "tests", "recorded")
# the comparisons the tests read (tests/test_compare_recorded.py): each against `full`
BASELINE = os.path.join("compare", "full")


def folders() -> list[str]:
    """Every recorded run: a folder under tests/recorded/SCENARIO/ holding process folders."""
    out = []
    for scenario in sorted(os.listdir(RECORDED)):
        sdir = os.path.join(RECORDED, scenario)
        if not os.path.isdir(sdir):
            continue
        for name in sorted(os.listdir(sdir)):
            if os.path.isdir(os.path.join(sdir, name)):
                out.append(os.path.join(scenario, name))
    return out


def run(argv: list[str]) -> str:
    """`spectrace ARGV`'s stdout, stderr and exit status, as one text."""
    from spectrace.cli import main
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            rc = main(argv)
        except SystemExit as exc:
            rc = exc.code
    return f"{out.getvalue()}[stderr]\n{err.getvalue()}[exit {rc}]\n"


def _hash_blocks(html: str) -> str:
    def block(m: re.Match) -> str:
        digest = hashlib.sha256(m.group(2).encode()).hexdigest()[:16]
        return f"{m.group(1)}<sha256 {digest}>{m.group(3)}"
    return re.sub(r"(<(?:script|style)\b[^>]*>)(.*?)(</(?:script|style)>)", block, html,
                  flags=re.S)


def html(folder: str, *more: str) -> str:
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "report.html")
        said = run(["report", folder, *more, "--html", path])
        page = open(path, encoding="utf-8").read() if os.path.exists(path) else "<none>"
    return said.replace(path, "<html>") + _hash_blocks(page) + "\n"


def watch(folder: str) -> str:
    from rich.console import Console
    from spectrace.report.watch import ProcessCache, render
    console = Console(record=True, width=140, file=io.StringIO(), color_system=None)
    console.print(render(ProcessCache().report(folder), 2.0))
    return console.export_text()


def normalise(text: str) -> str:
    text = text.replace(RECORDED, "<REC>")
    return re.sub(r"\b\d\d:\d\d:\d\d\b", "<time>", text)


def main() -> int:
    if len(sys.argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    parts = []
    for rel in folders():
        folder = os.path.join(RECORDED, rel)
        parts += [f"=== {rel}: text", run(["report", folder]),
                  f"=== {rel}: json", run(["report", folder, "--json"]),
                  f"=== {rel}: html", html(folder),
                  f"=== {rel}: watch", watch(folder)]
        if rel.startswith("compare" + os.sep) and rel != BASELINE:
            base = os.path.join(RECORDED, BASELINE)
            parts += [f"=== {rel} --baseline {BASELINE}: text",
                      run(["report", folder, "--baseline", base]),
                      f"=== {rel} --baseline {BASELINE}: json",
                      run(["report", folder, "--baseline", base, "--json"]),
                      f"=== {rel} --baseline {BASELINE}: html",
                      html(folder, "--baseline", base)]
    with open(sys.argv[1], "w", encoding="utf-8") as f:
        f.write(normalise("\n".join(parts)))
    print(f"wrote {sys.argv[1]}: {len(folders())} recorded folders")
    return 0


if __name__ == "__main__":
    sys.exit(main())
