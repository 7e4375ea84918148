"""Headless Chromium (the Debian package `chromium`), driven over its DevTools protocol
through a pipe (`--remote-debugging-pipe`: no debugging port, no client library).

Used by the HTML-report tests and `scripts/screenshot_report.py`. Every run gets a fresh
profile and the flags that keep Chromium from calling home; `proxy_port` sends any
network connection it would make to a local port (the tests record them there).
"""
from __future__ import annotations

import base64
import fcntl
import json
import os
import shutil
import subprocess
import tempfile
import threading
import time

FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--disable-extensions", "--mute-audio", "--hide-scrollbars",
         # fewer of the browser's own calls home (network time, pings, ...); Debian's
         # build still checks a component for updates and calls its account service
         "--disable-default-apps", "--disable-domain-reliability", "--no-pings",
         "--disable-client-side-phishing-detection", "--disable-breakpad",
         "--metrics-recording-only", "--password-store=basic", "--use-mock-keychain",
         "--disable-features=NetworkTimeServiceQuerying,OptimizationHints,MediaRouter,"
         "Translate,AutofillServerCommunication,SigninInterception,PushMessaging",
         "--remote-debugging-pipe"]


def find_chromium() -> str | None:
    for name in ("chromium", "chromium-browser", "google-chrome"):
        path = shutil.which(name)
        if path:
            return path
    return None


class DevToolsError(RuntimeError):
    pass


class Browser:
    """One Chromium process; `page()` opens a tab. Use as a context manager."""

    def __init__(self, executable: str | None = None, proxy_port: int | None = None) -> None:
        exe = executable or find_chromium()
        if exe is None:
            raise FileNotFoundError("no chromium on PATH (Debian: apt-get install chromium)")
        self.profile = tempfile.mkdtemp(prefix="spectrace-chromium-")
        to_chrome_r, self._to_chrome = os.pipe()
        self._from_chrome, from_chrome_w = os.pipe()

        def pipes_on_3_and_4() -> None:  # in the child, before exec
            a = fcntl.fcntl(to_chrome_r, fcntl.F_DUPFD, 10)
            b = fcntl.fcntl(from_chrome_w, fcntl.F_DUPFD, 10)
            os.dup2(a, 3)
            os.dup2(b, 4)

        args = [exe, *FLAGS, f"--user-data-dir={self.profile}"]
        if proxy_port is not None:
            args += [f"--proxy-server=127.0.0.1:{proxy_port}", "--proxy-bypass-list=<-loopback>"]
        self.proc = subprocess.Popen(args + ["about:blank"], stdin=subprocess.DEVNULL,
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                     close_fds=False, preexec_fn=pipes_on_3_and_4)
        os.close(to_chrome_r)
        os.close(from_chrome_w)
        self._next_id = 0
        self._replies: dict[int, dict] = {}
        self.events: list[dict] = []
        self._cond = threading.Condition()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        buf = b""
        while True:
            try:
                chunk = os.read(self._from_chrome, 1 << 16)
            except OSError:
                chunk = b""
            if not chunk:
                with self._cond:
                    self._closed = True
                    self._cond.notify_all()
                return
            buf += chunk
            while b"\0" in buf:
                raw, buf = buf.split(b"\0", 1)
                msg = json.loads(raw)
                with self._cond:
                    if "id" in msg:
                        self._replies[msg["id"]] = msg
                    else:
                        self.events.append(msg)
                    self._cond.notify_all()

    _closed = False

    def send(self, method: str, params: dict | None = None, session: str | None = None,
             timeout: float = 60) -> dict:
        with self._cond:
            self._next_id += 1
            mid = self._next_id
        msg = {"id": mid, "method": method, "params": params or {}}
        if session:
            msg["sessionId"] = session
        os.write(self._to_chrome, json.dumps(msg).encode() + b"\0")
        deadline = time.monotonic() + timeout
        with self._cond:
            while mid not in self._replies:
                left = deadline - time.monotonic()
                if left <= 0 or self._closed:
                    raise DevToolsError(f"{method}: no answer from Chromium")
                self._cond.wait(left)
            reply = self._replies.pop(mid)
        if "error" in reply:
            raise DevToolsError(f"{method}: {reply['error']}")
        return reply.get("result", {})

    def wait_event(self, method: str, session: str | None = None, after: int = 0,
                   timeout: float = 60) -> dict:
        deadline = time.monotonic() + timeout
        with self._cond:
            while True:
                for e in self.events[after:]:
                    if e.get("method") == method and (session is None
                                                      or e.get("sessionId") == session):
                        return e
                left = deadline - time.monotonic()
                if left <= 0 or self._closed:
                    raise DevToolsError(f"no {method} event from Chromium")
                self._cond.wait(left)

    def page(self, width: int = 1280, height: int = 900) -> "Page":
        target = self.send("Target.createTarget", {"url": "about:blank"})["targetId"]
        session = self.send("Target.attachToTarget", {"targetId": target,
                                                      "flatten": True})["sessionId"]
        page = Page(self, session)
        for domain in ("Page", "Network", "Runtime", "Log"):
            self.send(f"{domain}.enable", session=session)
        # lifecycle events too: `networkIdle`, which `Page.wait_network_idle` waits for
        self.send("Page.setLifecycleEventsEnabled", {"enabled": True}, session=session)
        page.viewport(width, height)
        return page

    def close(self) -> None:
        try:
            self.send("Browser.close", timeout=5)
        except (DevToolsError, OSError):
            pass
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        for fd in (self._to_chrome, self._from_chrome):
            try:
                os.close(fd)
            except OSError:
                pass
        shutil.rmtree(self.profile, ignore_errors=True)

    def __enter__(self) -> "Browser":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


class Page:
    def __init__(self, browser: Browser, session: str) -> None:
        self.browser = browser
        self.session = session

    def send(self, method: str, params: dict | None = None) -> dict:
        return self.browser.send(method, params, self.session)

    def events(self, method: str) -> list[dict]:
        return [e for e in list(self.browser.events)
                if e.get("sessionId") == self.session and e.get("method") == method]

    def viewport(self, width: int, height: int) -> None:
        self.send("Emulation.setDeviceMetricsOverride", {
            "width": width, "height": height, "deviceScaleFactor": 1, "mobile": False})

    def open(self, url: str) -> None:
        """Navigate and wait for the load event."""
        mark = len(self.browser.events)
        self._opened_at = mark
        self.send("Page.navigate", {"url": url})
        self.browser.wait_event("Page.loadEventFired", self.session, after=mark)

    def wait_network_idle(self, timeout: float = 60) -> None:
        """Wait for Chromium's own `networkIdle` lifecycle event of the page opened last:
        no request in flight for 0.5 s after the load, so every request the page makes on
        its own (fonts, images, beacons, timers at load) has been seen by then."""
        after = getattr(self, "_opened_at", 0)
        deadline = time.monotonic() + timeout
        while not [e for e in self.browser.events[after:]
                   if e.get("sessionId") == self.session
                   and e.get("method") == "Page.lifecycleEvent"
                   and e["params"].get("name") == "networkIdle"]:
            left = deadline - time.monotonic()
            if left <= 0:
                raise DevToolsError("no networkIdle lifecycle event from Chromium")
            self.browser.wait_event("Page.lifecycleEvent", self.session,
                                    after=len(self.browser.events), timeout=left)

    def evaluate(self, expression: str):
        """The value of a JavaScript expression (returned by value, promises awaited)."""
        r = self.send("Runtime.evaluate", {"expression": expression, "returnByValue": True,
                                           "awaitPromise": True})
        if "exceptionDetails" in r:
            raise DevToolsError(f"page script failed: {r['exceptionDetails']}")
        return r["result"].get("value")

    def screenshot(self) -> bytes:
        """A PNG of the whole page (beyond the viewport), one pixel per CSS pixel."""
        size = self.send("Page.getLayoutMetrics")["cssContentSize"]
        shot = self.send("Page.captureScreenshot", {
            "format": "png", "captureBeyondViewport": True,
            "clip": {"x": 0, "y": 0, "width": size["width"], "height": size["height"],
                     "scale": 1}})
        return base64.b64decode(shot["data"])
