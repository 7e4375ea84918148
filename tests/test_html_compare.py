"""`spectrace report DIR --baseline BASEDIR --html FILE` in a real headless Chromium
(harness/chromium.py), on the folders real SGLang 0.5.23 CPU runs wrote
(tests/recorded/advisor: `partial` against `full`): every overlay chart and every view
drew, both runs' colours show in each overlay, the page leads with the comparison's
sentence, the figures in its cells equal `--json`'s, and it makes no network request
(the page's CSP forbids every one; no violation is reported)."""
from __future__ import annotations

import io
import json
import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
from harness.chromium import Browser, find_chromium  # noqa: E402
from tests.test_html_report import RGB, charts, colour_pixels  # noqa: E402

CHROMIUM = find_chromium()
pytestmark = [pytest.mark.browser, pytest.mark.skipif(
    CHROMIUM is None and not os.environ.get("CI"),
    reason="Debian package 'chromium' not installed (scripts/test.sh installs it)")]

RECORDED = os.path.join(ROOT, "tests", "recorded", "advisor")
OVERLAYS = {"cmp-positions", "cmp-context", "cmp-sampling", "cmp-batch_size", "cmp-time"}


@pytest.fixture(scope="module")
def compared(tmp_path_factory):
    html = tmp_path_factory.mktemp("cmp") / "compare.html"
    args = [sys.executable, "-m", "spectrace.cli", "report",
            os.path.join(RECORDED, "partial-k3"), "--baseline",
            os.path.join(RECORDED, "full-k3")]
    out = subprocess.run(args + ["--json", "--html", str(html)], capture_output=True,
                         text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)["comparison"], html


def test_every_overlay_and_view_drew_with_both_runs(compared, tmp_path):
    from PIL import Image
    c, html = compared
    with Browser(CHROMIUM) as browser:
        page = browser.page()
        page.send("Log.enable")
        page.open(html.as_uri())
        found = charts(page)
        assert {x["view"] for x in found} == OVERLAYS | {"cur", "base"}
        assert page.evaluate("document.body.dataset.chartsDrawn") == str(len(found))
        img = Image.open(io.BytesIO(page.screenshot()))
        img.save(tmp_path / "compare.png")
        for x in found:
            assert x["canvases"] >= 1 and x["error"] is None and int(x["points"]) > 0, x
            if x["view"] in OVERLAYS:  # the baseline's colour and the current run's
                box = (int(x["x"]), int(x["y"]), int(x["x"] + x["w"]), int(x["y"] + x["h"]))
                for colour in ("agree", "accept"):
                    assert colour_pixels(img, box, RGB[colour]) >= 8, (x["view"], colour)
        sentence = page.evaluate("document.getElementById('comparison').textContent")
        assert sentence == c["sentence"]
        assert page.evaluate("document.getElementById('comparison').dataset.kind") == "system"
        cells = page.evaluate("""Object.fromEntries(Array.from(document.querySelectorAll(
            '#view-compare td[data-key^="mean_acceptance_length"]')).map(
            d => [d.dataset.key, d.textContent]))""")
        change = c["mean_acceptance_length_change"]
        assert cells["mean_acceptance_length.2"] == (
            f"{change['value']:.3f} [{change['low']:.3f}, {change['high']:.3f}]")
        base = c["baseline"]["mean_acceptance_length"]
        assert cells["mean_acceptance_length.0"].startswith(f"{base['value']:.3f}")
        differs = page.evaluate("""Array.from(document.querySelectorAll(
            'tr[data-differs="1"] th')).map(t => t.textContent)""")
        assert set(differs) == {"target", "draft"}
        violations = [e for e in page.events("Log.entryAdded")
                      if "Content Security Policy" in json.dumps(e)]
        assert violations == []
    print(f"\nscreenshot: {tmp_path / 'compare.png'}")
