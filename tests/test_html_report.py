"""`spectrace report --html` in a real headless Chromium (Debian package `chromium`, driven
over its DevTools protocol by harness/chromium.py), on the files of two real SGLang 0.5.23
CPU-server runs (healthy and fc bypass), recorded (tests/recorders/record_html.py): a
rendering is asserted on recorded files, not on a live server: every chart drew (canvas present, with data, and
its colours in its region of a full-page screenshot), the numbers in the page equal those
of `spectrace report --json`, and the page makes no network request (none seen by the
browser's Network domain, no connection reaching the proxy Chromium is given, no CSP
violation; controls show each check would see one). Also: file data cannot run script or
add markup, charts follow a narrow window, the page prints. (The `*_cpu` kernels come from
the pure-torch stand-in in harness/.)"""
from __future__ import annotations

import io
import json
import math
import os
import socket
import subprocess
import sys
import threading
import time

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
from harness.chromium import Browser, find_chromium  # noqa: E402
from tests import recorded_runs  # noqa: E402
from tests.e2e import wait_for  # noqa: E402

CHROMIUM = find_chromium()
pytestmark = [pytest.mark.browser, pytest.mark.skipif(
    CHROMIUM is None and not os.environ.get("CI"),  # in CI a missing browser is a failure
    reason="Debian package 'chromium' not installed (scripts/test.sh installs it)")]

KINDS = ["positions", "lengths", "mal", "rate", "widths"]
SPECULATION_KINDS = ["tokens_k", "speedup"]  # where step costs gave a speed-up estimate


def speculates(view: dict) -> bool:
    adv = view.get("speculation")
    return bool(adv) and any(b["estimated_speedup"] is not None for b in adv["buckets"])
RGB = {"accept": (31, 119, 180), "agree": (255, 127, 14), "line": (29, 35, 48),
       "ok": (44, 160, 44), "bad": (214, 39, 40)}


class ProxyRecorder:
    """The proxy Chromium is told to use: records every connection, answers nothing."""

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.port = self.sock.getsockname()[1]
        self.connections: list[bytes] = []
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            conn.settimeout(2)
            try:
                self.connections.append(conn.recv(4096))
            except OSError:
                self.connections.append(b"")
            conn.close()


# Chromium's own calls home, made at start-up and retried, whatever the page: Debian's
# build checks a component for updates and calls its account service even with
# --disable-background-networking and --disable-component-update. Not the page's.
BROWSER_OWN = {"update.googleapis.com", "accounts.google.com"}


def proxy_host(request: bytes) -> str:
    """The host a proxied request is for: `CONNECT host:443` or `GET http://host/...`."""
    target = request.split(b"\r\n", 1)[0].split(b" ")[1:2]
    target = target[0].decode("latin-1") if target else ""
    return target.split("://", 1)[-1].split("/", 1)[0].rsplit(":", 1)[0]


def report_html(data_dir, html_path) -> dict:
    out = subprocess.run([sys.executable, "-m", "spectrace.cli", "report", str(data_dir),
                          "--json", "--html", str(html_path)], capture_output=True, text=True,
                         timeout=120, cwd=ROOT)
    assert out.returncode == 0, out.stderr
    assert "wrote" in out.stderr and os.path.getsize(html_path) > 0
    return json.loads(out.stdout)


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """Two real runs recorded (tests/recorders/record_html.py; tests/recorded/README.md):
    each answered its prompts across several export intervals and was stopped normally
    (SIGTERM to the group). Their report as JSON and HTML, made here."""
    out = {}
    for name in ("healthy", "bypass"):
        folder = recorded_runs.path("html", name)
        html = tmp_path_factory.mktemp("html") / f"{name}.html"
        out[name] = (report_html(folder, html), html)
        [proc] = [p for p in out[name][0]["processes"] if p["drafts"]]
        assert proc["drafts"] == recorded_runs.facts("html", name)["runtime"]["request_steps"]
        print(f"\n{name}: {html} is {os.path.getsize(html) / 1024:.1f} KiB")
    return out


@pytest.fixture(scope="module")
def proxy():
    return ProxyRecorder()


@pytest.fixture(scope="module")
def browser(proxy):
    with Browser(CHROMIUM, proxy_port=proxy.port) as b:
        yield b


def views_of(rep: dict) -> dict:
    """Page view id -> the JSON figures it shows (as html.render_html numbers them)."""
    procs = [p for p in rep["processes"] if "error" not in p]
    views = {f"p{i}": p for i, p in enumerate(procs)}
    if len(procs) > 1:
        views["all"] = rep["combined"]
    return views


def charts(page) -> list[dict]:
    return page.evaluate("""Array.from(document.querySelectorAll('[data-chart]')).map(d => {
        const c = d.querySelector('canvas'), r = (c || d).getBoundingClientRect();
        return {view: d.dataset.view, kind: d.dataset.chart, points: d.dataset.points || null,
                error: d.dataset.error || null, canvases: d.querySelectorAll('canvas').length,
                x: r.left + scrollX, y: r.top + scrollY, w: r.width, h: r.height};
    })""")


def colour_pixels(img, box, rgb, tol=14) -> int:
    region = img.crop(box).convert("RGB")
    return sum(n for n, (r, g, b) in region.getcolors(1 << 20)
               if abs(r - rgb[0]) <= tol and abs(g - rgb[1]) <= tol and abs(b - rgb[2]) <= tol)


def expected_colours(kind: str, v: dict) -> list[str]:
    """Colours that must show in a chart's region, given its figures."""
    if kind == "positions":
        return (["accept"] if any(x > 0.05 for x in v["acceptance_per_position"]) else []) + \
               (["agree"] if any(x > 0.05 for x in v["agreement_per_position"]) else [])
    if kind in ("lengths", "rate"):
        return ["accept"]
    if kind == "mal":
        return ["line"] + (["bad"] if any(f["code"] == "eagle3.fc_bypass"
                                          for f in v["findings"]) else [])
    if kind in ("tokens_k", "speedup"):  # the first bucket's line; the bars
        return ["accept"]
    return (["ok"] if any(not p["finding"] for p in v["hidden_state_passes"]) else []) + \
           (["bad"] if any(p["finding"] for p in v["hidden_state_passes"]) else [])


@pytest.mark.parametrize("name", ["healthy", "bypass"])
def test_every_chart_drew(runs, browser, name, tmp_path):
    from PIL import Image
    rep, html = runs[name]
    page = browser.page()
    page.open(html.as_uri())
    found = charts(page)
    views = views_of(rep)
    assert sorted((c["view"], c["kind"]) for c in found) == sorted(  # every chart, every view
        (v, k) for v in views for k in KINDS + (SPECULATION_KINDS if speculates(views[v]) else []))
    assert page.evaluate("document.body.dataset.chartsDrawn") == str(len(found))
    img = Image.open(io.BytesIO(page.screenshot()))
    img.save(tmp_path / f"{name}.png")
    for c in found:
        assert c["canvases"] >= 1 and c["error"] is None and int(c["points"]) > 0, c
        box = (int(c["x"]), int(c["y"]), int(c["x"] + c["w"]), int(c["y"] + c["h"]))
        gray = img.crop(box).convert("L")
        inked = sum(n for n, level in gray.getcolors(256) if level < 235)
        assert inked > 500, f"{c['view']}/{c['kind']}: blank ({inked} inked pixels)"
        for colour in expected_colours(c["kind"], views[c["view"]]):
            n = colour_pixels(img, box, RGB[colour])
            assert n >= 8, f"{c['view']}/{c['kind']}: no {colour} pixels drawn"
        if c["kind"] == "mal" and name == "healthy":             # no finding marker
            assert colour_pixels(img, box, RGB["bad"]) < 8
    print(f"\nscreenshot: {tmp_path / f'{name}.png'}")


def _at(obj, path: str):
    """The JSON value at a cell's dotted key; a dict key may itself hold dots (a bucket
    such as `2.00-2.25`), so parts are joined until the key is found."""
    parts = path.split(".")
    while parts:
        if isinstance(obj, list):
            obj = obj[int(parts.pop(0))]
            continue
        n = next(n for n in range(1, len(parts) + 1) if ".".join(parts[:n]) in obj)
        obj, parts = obj[".".join(parts[:n])], parts[n:]
    return obj


def _shown(value) -> str:
    """How the page writes a JSON figure: counts whole, ratios with 2 decimals."""
    if isinstance(value, float) and not float(value).is_integer():
        return f"{value:.2f}"
    return str(int(value))


def test_the_page_leads_with_the_verdict(runs, browser):
    """The verdict is the first sentence under the title, in the state --json gives: the
    bypass run is broken (its root cause, capture off, and its fix); the healthy run's few request-steps
    (under the floor of 100) are not enough for a verdict, and no finding is raised."""
    from spectrace.report.verdict import MIN_REQUEST_STEPS
    states = {}
    for name, (rep, html) in runs.items():
        v = rep["verdict"]
        page = browser.page()
        page.open(html.as_uri())
        first = page.evaluate("document.querySelector('header .verdict').textContent")
        state = page.evaluate("document.querySelector('header .verdict').dataset.state")
        assert (first, state) == (v["sentence"], v["state"])
        states[name] = v
    broken = states["bypass"]
    # the earliest error is the root cause (capture off, seen at the audit), the fc bypass
    # it causes is the one more below
    assert broken["state"] == "broken", broken
    assert "(aux.capture_disabled; 1 more error finding below)" in broken["sentence"], broken
    assert "Fix: set eagle_config.use_aux_hidden_state to true" in broken["sentence"]
    healthy, rep = states["healthy"], runs["healthy"][0]
    assert rep["combined"]["drafts"] < MIN_REQUEST_STEPS
    assert healthy["state"] == "not_enough_data" and "no finding so far" in healthy["sentence"]


@pytest.mark.parametrize("name", ["healthy", "bypass"])
def test_numbers_in_the_page_equal_the_json(runs, browser, name):
    rep, html = runs[name]
    page = browser.page()
    page.open(html.as_uri())
    cells = page.evaluate("""Array.from(document.querySelectorAll('td[data-key]')).map(td => ({
        view: td.closest('section').dataset.view, key: td.dataset.key,
        value: td.dataset.value, text: td.textContent}))""")
    views = views_of(rep)
    checked = {}
    for cell in cells:
        want = _at(views[cell["view"]], cell["key"])
        if want is None:
            assert cell["value"] is None and cell["text"] == "-"
            continue
        assert math.isclose(float(cell["value"]), want, rel_tol=1e-12), cell
        parts = cell["key"].split(".")  # a ratio also inside a breakdown (by_context.0...)
        if any(p in ("mean_acceptance_length", "acceptance_rate") or p.endswith("per_position")
               for p in parts):
            assert cell["text"] == f"{want:.2f}", cell
        elif parts[-1].endswith(("_seconds", "seconds_per_token")):  # the advisor's, in ms
            assert cell["text"] == f"{want * 1e3:.2f} ms", cell
        elif parts[-1] == "tokens_per_second":
            assert cell["text"] == f"{want:.1f}", cell
        elif parts[0] == "speculation":  # the advisor's other figures: ratios and counts
            assert cell["text"] in (f"{want:.2f}", _shown(want)), cell
        else:
            assert cell["text"] == _shown(want), cell
        checked[cell["key"].split(".")[0]] = checked.get(cell["key"].split(".")[0], 0) + 1
    for key in ("drafts", "accepted_tokens", "draft_tokens", "mean_acceptance_length",
                "acceptance_rate", "acceptance_per_position", "agreement_per_position",
                "accept_length_counts", "hidden_state_passes", "fc_bypass"):
        assert checked.get(key), f"{key} is not shown in the page"
    if name == "bypass":
        assert checked.get("findings")
    # the charts' data: the same timeline (rounded for the page)
    data = page.evaluate("JSON.parse(document.getElementById('spectrace-data').textContent)")
    for v in data["views"]:
        tl = views[v["id"]]["timeline"]
        assert len(v["timeline"]["time"]) == len(tl["time"]) >= 3
        for got, want in zip(v["timeline"]["mal"], tl["mean_acceptance_length"]):
            assert (got is None and want is None) or math.isclose(got, want, abs_tol=1e-4)


def test_the_page_makes_no_network_request(runs, browser, proxy, tmp_path):
    for name, (_, html) in runs.items():
        page = browser.page()
        page.open(html.as_uri())
        page.wait_network_idle()  # anything late (fonts, images, beacons) has started by then
        urls = [e["params"]["request"]["url"] for e in page.events("Network.requestWillBeSent")]
        assert urls == [html.as_uri()], urls                  # the page itself, from disk
        logs = [e["params"]["entry"]["text"] for e in page.events("Log.entryAdded")]
        assert not [t for t in logs if "Content Security Policy" in t], logs
    assert [c for c in proxy.connections if proxy_host(c) not in BROWSER_OWN] == []
    # Controls: the same page with an image from the network. Its CSP blocks it, and says
    # so; without the CSP the browser asks the proxy for it: both checks would see one.
    page_text = runs["healthy"][1].read_text()
    probe = '<img src="http://spectrace-probe.invalid/x.png">'
    blocked = tmp_path / "blocked.html"
    blocked.write_text(page_text.replace("<header>", probe + "<header>", 1))
    page = browser.page()
    page.open(blocked.as_uri())
    page.wait_network_idle()  # the blocked image is reported while the page loads
    logs = [e["params"]["entry"]["text"] for e in page.events("Log.entryAdded")]
    assert any("Content Security Policy" in t and "spectrace-probe" in t for t in logs), logs
    no_csp = tmp_path / "no-csp.html"
    start = page_text.index('<meta http-equiv="Content-Security-Policy"')
    no_csp.write_text(page_text[:start] + page_text[page_text.index(">", start) + 1:]
                      .replace("<header>", probe + "<header>", 1))
    page = browser.page()
    page.open(no_csp.as_uri())
    deadline = time.time() + 60  # returns at the first connection
    while not proxy.connections and time.time() < deadline:
        time.sleep(0.1)
    assert "spectrace-probe.invalid" in [proxy_host(c) for c in proxy.connections]


HOSTILE = '</script><script>alert("x")</script><img src=x onerror=alert(1)>&amp;'


def test_file_data_cannot_run_script_or_add_markup(browser, tmp_path):
    """Strings from the files (model name, finding message, codes) that try to end the
    data element or add elements: shown as text, nothing runs."""
    from spectrace import signals
    d = tmp_path / "data" / "sglang-h-1"
    d.mkdir(parents=True)
    (d / "resource.json").write_text(json.dumps({"attributes": {
        "process.pid": 1, signals.RES_MODEL: HOSTILE, signals.RES_DRAFT_MODEL: HOSTILE}}))
    snap = {"time": 1.0, "metrics": {
        signals.SPEC_DRAFTS.name: [{"attributes": {}, "value": 4}],
        signals.SPEC_ACCEPTED_TOKENS.name: [{"attributes": {}, "value": 4}],
        signals.SPEC_DRAFT_TOKENS.name: [{"attributes": {}, "value": 12}],
        signals.SPEC_ACCEPT_LENGTH.name: [{"attributes": {"length": HOSTILE}, "value": 4}],
        signals.EAGLE3_PASSES.name: [{"attributes": {"pass_kind": HOSTILE, "width": 3},
                                      "value": 1}]}}
    (d / "metrics.jsonl").write_text(json.dumps(snap) + "\n" + json.dumps(
        {**snap, "time": 2.0}) + "\n")
    (d / "events.jsonl").write_text(json.dumps({"time": 1.5, "code": HOSTILE,
                                                "severity": "error", "message": HOSTILE}) + "\n")
    html = tmp_path / "hostile.html"
    report_html(tmp_path / "data", html)
    page = browser.page()
    page.open(html.as_uri())
    assert page.evaluate("document.querySelectorAll('img').length") == 0
    assert page.evaluate("document.querySelectorAll('script').length") == 3   # the page's own
    assert page.evaluate("document.body.textContent.includes(" + json.dumps(HOSTILE) + ")")
    assert not page.events("Page.javascriptDialogOpening")
    assert page.evaluate("document.body.dataset.chartsDrawn") is not None


def test_narrow_window_and_print(runs, browser):
    _, html = runs["bypass"]
    page = browser.page(width=1280)
    page.open(html.as_uri())
    wide = page.evaluate("Math.max(...Array.from(document.querySelectorAll('.chart canvas'))"
                         ".map(c => c.getBoundingClientRect().width))")
    page.viewport(380, 800)

    def canvas_widths() -> list:
        return page.evaluate("Array.from(document.querySelectorAll('.chart canvas'))"
                             ".map(c => c.getBoundingClientRect().width)")
    # the charts redraw on the resize: wait for it (or, on a hang, assert what is there)
    widths = wait_for(lambda: [w for w in [canvas_widths()] if w and max(w) <= 380]) \
        or [canvas_widths()]
    widths = widths[0]
    assert wide > 380 and widths and max(widths) <= 380     # redrawn to fit
    # the page's own width settles after the redraw (the layout that follows it): wait for
    # it too, with the same generous bound (fresh clone: 416 read right after the redraw)
    def scroll_width() -> int:
        return page.evaluate("document.documentElement.scrollWidth")
    scroll = wait_for(lambda: (w := scroll_width()) <= 400 and w) or scroll_width()
    # no sideways scroll; else name what reaches past 400 px (a fresh-clone rehearsal once
    # read 417 here, never reproduced in 30 tries beside a CPU-bound process)
    assert scroll <= 400, page.evaluate(
        "Array.from(document.querySelectorAll('body *')).map(e => [e.tagName, e.className,"
        " Math.round(e.getBoundingClientRect().right)]).filter(x => x[2] > 400).slice(0, 12)")
    pdf = page.send("Page.printToPDF", {"printBackground": True})["data"]
    assert len(pdf) > 10_000
