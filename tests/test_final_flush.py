"""A final snapshot when a process is told to stop (`spectrace.export.final_flush`), in real
child processes with spectrace's real telemetry (file exporter) and real signals: the
snapshot is written, then the signal goes where it went before (the default action,
Python's KeyboardInterrupt, a handler of the host's, or nowhere when ignored); outside the
main thread only the exit hook runs; a stuck exporter delays a stop by a bounded time.
The SGLang end-to-end version is tests/test_shutdown.py."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

CHILD = os.path.join(ROOT, "tests", "programs", "final_flush_child.py")


def default_signals() -> None:
    """A terminal job's dispositions, whatever pytest inherited (a background job of a
    script starts with SIGINT ignored)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)


def run_child(tmp_path, mode: str):
    out = tmp_path / "data"
    proc = subprocess.Popen([sys.executable, CHILD, mode, str(out)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=default_signals,
                            env={k: v for k, v in os.environ.items()
                                 if not k.startswith(("SPECTRACE_", "OTEL_"))})
    ready = json.loads(proc.stdout.readline())
    return proc, ready, out


def snapshots(out) -> list[dict]:
    (folder,) = os.listdir(out)
    with open(os.path.join(out, folder, "metrics.jsonl")) as fh:
        return [json.loads(line) for line in fh]


def drafts(snap: dict) -> int:
    return sum(p["value"] for p in snap["metrics"]["spectrace.spec.drafts"])


def test_sigterm_writes_the_final_snapshot_then_terminates_as_by_default(tmp_path):
    proc, ready, out = run_child(tmp_path, "default")
    t_sig = time.time()
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=30) == -signal.SIGTERM       # the default action, as before
    last = snapshots(out)[-1]
    assert last["time"] >= t_sig and drafts(last) == 3


def test_sigint_writes_the_final_snapshot_then_raises_keyboardinterrupt(tmp_path):
    proc, ready, out = run_child(tmp_path, "default")
    t_sig = time.time()
    proc.send_signal(signal.SIGINT)
    stdout, stderr = proc.communicate(timeout=30)
    assert "KeyboardInterrupt" in stdout                   # Python's own handler ran
    assert proc.returncode == -signal.SIGINT
    last = snapshots(out)[-1]
    assert last["time"] >= t_sig and drafts(last) == 3


def test_an_ignored_sigint_stays_ignored_and_still_writes(tmp_path):
    """A background job of a shell script ignores SIGINT; SGLang's launcher still SIGKILLs
    it on Ctrl-C, so the snapshot is written and the process carries on."""
    proc, ready, out = run_child(tmp_path, "sigint-ignored")
    t_sig = time.time()
    proc.send_signal(signal.SIGINT)
    flushed = json.loads(proc.stdout.readline())
    assert proc.poll() is None                             # still running
    print(f"\nfinal snapshot written in {flushed['flushed_in'] * 1000:.1f} ms")
    last = snapshots(out)[-1]
    assert last["time"] >= t_sig and drafts(last) == 3
    proc.kill()
    proc.wait()


def test_the_hosts_own_handler_runs_after_the_snapshot(tmp_path):
    proc, ready, out = run_child(tmp_path, "host-handler")
    t_sig = time.time()
    proc.send_signal(signal.SIGTERM)
    stdout, _ = proc.communicate(timeout=30)
    assert "host handler 15" in stdout and proc.returncode == 3
    last = snapshots(out)[-1]
    assert last["time"] >= t_sig and drafts(last) == 3


def test_outside_the_main_thread_only_the_exit_hook(tmp_path):
    proc, ready, out = run_child(tmp_path, "thread")
    assert ready["sigterm_default"]                       # no handler set from a thread
    assert proc.wait(timeout=30) == 0
    last = snapshots(out)[-1]
    assert last["time"] >= ready["ready"] and drafts(last) == 3


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_a_stuck_exporter_delays_the_stop_by_a_bounded_time(tmp_path, sig):
    """One exporter hangs for 30 s in its flush: the signal still goes on after the flush
    deadline (0.3 s); the file exporter's snapshot is written meanwhile."""
    proc, ready, out = run_child(tmp_path, "stuck-exporter")
    t0 = time.monotonic()
    proc.send_signal(sig)
    proc.communicate(timeout=60)
    took = time.monotonic() - t0
    print(f"\nstop with a stuck exporter took {took:.2f} s")
    assert proc.returncode == -sig and took < 5            # not the 30 s the exporter hangs
    assert drafts(snapshots(out)[-1]) == 3
