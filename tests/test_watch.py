"""`spectrace report --watch` in a real terminal (tmux, Debian package) against a running
SGLang 0.5.23 CPU server: the screen shows the live figures, they change after more
requests, and Ctrl-C ends it with exit status 0 and the terminal back as it was. Without
the `cli` extra it names the extra (exit 2). (The `*_cpu` kernels come from the
pure-torch stand-in in harness/.)"""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time

import pytest

from conftest import run_report
from tests.e2e import settle

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TMUX = shutil.which("tmux")
needs_tmux = pytest.mark.skipif(
    TMUX is None and not os.environ.get("CI"),  # in CI a missing terminal is a failure
    reason="Debian package 'tmux' not installed (scripts/test.sh installs it)")

FAST = {"SPECTRACE_METRIC_INTERVAL": "0.5"}


class Terminal:
    """A tmux server of its own (no user configuration), one 150x50 window."""

    def __init__(self, command: str, tmp_path) -> None:
        self.socket = str(tmp_path / "tmux.sock")
        self.tmux("-f", "/dev/null", "new-session", "-d", "-x", "150", "-y", "50", command)

    def tmux(self, *args) -> str:
        return subprocess.run([TMUX, "-S", self.socket, *args], capture_output=True,
                              text=True, timeout=30, check=True).stdout

    def screen(self) -> str:
        return self.tmux("capture-pane", "-p")

    def wait_for(self, pattern: str, timeout: float = 60) -> re.Match:
        deadline = time.monotonic() + timeout
        while True:
            m = re.search(pattern, self.screen())
            if m or time.monotonic() > deadline:
                assert m, f"{pattern!r} never showed; the screen:\n{self.screen()}"
                return m
            time.sleep(0.2)

    def close(self) -> None:
        subprocess.run([TMUX, "-S", self.socket, "kill-server"], capture_output=True)


def settled_drafts(run, at_least: int) -> int:
    return settle(run, at_least)["drafts"]  # a condition wait: a loaded machine may be slow


@pytest.mark.tmux
@needs_tmux
@pytest.mark.sglang
def test_watch_shows_live_figures_that_update(tiny_models, sglang_server, tmp_path):
    run = sglang_server(tiny_models("partial"), env=FAST)
    first = run.server.generate([3, 7, 11], 24)["meta_info"]["spec_verify_ct"]
    assert settled_drafts(run, first) == first
    cmd = (f"cd {ROOT} && env PYTHONPATH={os.environ.get('PYTHONPATH', ROOT)} "
           f"{sys.executable} -m spectrace.cli report {run.data_dir} --watch --interval 0.5;"
           f" echo watch-exit=$?; sleep 600")
    term = Terminal(cmd, tmp_path)
    try:
        term.wait_for(rf"request-steps verified {first}\b")
        screen = term.screen()
        proc = run.scheduler()
        assert f"process {proc['process']}" in screen and "speculation: healthy" in screen
        assert "mean acceptance length 2.00" in screen and "accept-length distribution" in screen
        assert term.tmux("display", "-p", "#{alternate_on}").strip() == "1"
        # more requests: the screen follows
        more = sum(run.server.generate(p, 24)["meta_info"]["spec_verify_ct"]
                   for p in ([5, 9, 2], [4, 6, 8]))
        total = settled_drafts(run, first + more)
        assert total == first + more
        term.wait_for(rf"request-steps verified {total}\b")
        assert run_report(run.data_dir)["processes"][0]["drafts"] == total
        # Ctrl-C: exit status 0, the terminal as it was
        term.tmux("send-keys", "C-c")
        term.wait_for(r"watch-exit=0")
        assert term.tmux("display", "-p", "#{alternate_on}").strip() == "0"
        assert term.tmux("display", "-p", "#{cursor_flag}").strip() == "1"  # cursor shown
        assert "request-steps verified" not in term.screen()   # the live screen is gone
    finally:
        term.close()


def test_watch_without_rich_names_the_extra(tmp_path):
    (tmp_path / "data").mkdir()
    code = ("import sys; sys.modules['rich'] = None; from spectrace.cli import main; "
            f"sys.exit(main(['report', {str(tmp_path / 'data')!r}, '--watch']))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         cwd=ROOT, timeout=60)
    assert out.returncode == 2 and out.stdout == ""
    assert out.stderr.count("\n") == 1 and "pip install 'spectrace[cli]'" in out.stderr


def test_watch_on_a_missing_folder_is_unusable_input(tmp_path):
    out = subprocess.run([sys.executable, "-m", "spectrace.cli", "report",
                          str(tmp_path / "nope"), "--watch"], capture_output=True, text=True,
                         cwd=ROOT, timeout=60)
    assert out.returncode == 2 and out.stderr.count("\n") == 1
    assert "no such folder" in out.stderr


def test_a_refresh_rereads_only_the_processes_whose_files_changed(tmp_path, monkeypatch):
    from spectrace import signals
    from spectrace.file_layout import METRICS_FILE, SPANS_FILE
    from spectrace.report import build_report, summary
    from spectrace.report.watch import ProcessCache

    def snap(t, drafts):
        return json.dumps({"time": t, "metrics": {
            signals.SPEC_DRAFTS.name: [{"attributes": {}, "value": drafts}]}}) + "\n"

    one, two = tmp_path / "sglang-h-1", tmp_path / "sglang-h-2"
    for d in (one, two):
        d.mkdir()
        (d / METRICS_FILE).write_text(snap(1.0, 5))
    reads = []
    real = summary.summarize_process
    monkeypatch.setattr(summary, "summarize_process",
                        lambda path: reads.append(os.path.basename(path)) or real(path))
    cache = ProcessCache()

    def refresh():
        reads.clear()
        return cache.report(str(tmp_path))

    first = refresh()
    assert sorted(reads) == ["sglang-h-1", "sglang-h-2"]
    assert refresh() == first and reads == []            # nothing changed: nothing read
    with open(one / METRICS_FILE, "a") as fh:            # one process writes on
        fh.write(snap(2.0, 9))
    now = refresh()
    assert reads == ["sglang-h-1"]
    assert [p.figures.drafts for p in now.processes] == [9, 5]
    assert now.combined.figures.drafts == 14
    (two / SPANS_FILE).write_text("{}\n")                # any file it reads counts
    assert refresh().processes[1].spans == 1 and reads == ["sglang-h-2"]
    # same size, later modification time: read again
    (two / METRICS_FILE).write_text(snap(1.0, 6))
    st = os.stat(two / METRICS_FILE)
    os.utime(two / METRICS_FILE, ns=(st.st_atime_ns, st.st_mtime_ns + 10**9))
    now = refresh()
    assert reads == ["sglang-h-2"] and now.processes[1].figures.drafts == 6
    shutil.rmtree(one)                                   # a folder gone is gone
    now = refresh()
    assert reads == [] and [p.process for p in now.processes] == ["sglang-h-2"]
    assert now == build_report(str(tmp_path))            # the same report as without cache


def test_interval_without_watch_is_refused(tmp_path):
    out = subprocess.run([sys.executable, "-m", "spectrace.cli", "report", str(tmp_path),
                          "--interval", "1"], capture_output=True, text=True, cwd=ROOT,
                         timeout=60)
    assert out.returncode == 2 and out.stdout == ""
    assert "--interval sets how often --watch refreshes" in out.stderr
