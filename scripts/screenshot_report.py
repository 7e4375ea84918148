"""The README's picture of `spectrace report --html`: a report page rendered by headless
Chromium (harness/chromium.py), cropped to its header and the first process's charts,
saved as a small palette PNG.

Run after ./scripts/demo.sh (whose fc-bypass run it shows by default):

    .venv/bin/python scripts/screenshot_report.py [REPORT.html] [--out docs/report-html.png]
"""
from __future__ import annotations

import argparse
import io
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from harness.chromium import Browser  # noqa: E402

DEFAULT_HTML = os.path.join(ROOT, "demo-output", "fc-bypass", "report.html")
DEFAULT_OUT = os.path.join(ROOT, "docs", "report-html.png")
MAX_BYTES = 150 * 1024


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("html", nargs="?", default=DEFAULT_HTML)
    p.add_argument("--out", default=DEFAULT_OUT)
    p.add_argument("--width", type=int, default=1000, help="window width in CSS pixels")
    a = p.parse_args()
    if not os.path.isfile(a.html):
        print(f"screenshot_report: {a.html}: no such file (run ./scripts/demo.sh first, or "
              f"give a page written by `spectrace report DIR --html FILE`)", file=sys.stderr)
        return 2
    from PIL import Image
    with Browser() as browser:
        page = browser.page(width=a.width, height=900)
        page.open("file://" + os.path.abspath(a.html))
        bottom = page.evaluate("document.querySelector('section.view .grid')"
                               ".getBoundingClientRect().bottom + scrollY + 12")
        shot = Image.open(io.BytesIO(page.screenshot()))
    img = shot.crop((0, 0, shot.width, min(shot.height, int(bottom))))
    small = img.convert("RGB").quantize(colors=64, method=Image.Quantize.MEDIANCUT, dither=0)
    small.save(a.out, optimize=True)
    size = os.path.getsize(a.out)
    print(f"wrote {a.out} ({img.width}x{img.height}, {size / 1024:.0f} KiB)")
    if size > MAX_BYTES:
        print(f"screenshot_report: {a.out} is over {MAX_BYTES // 1024} KiB; try a smaller "
              f"--width", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
