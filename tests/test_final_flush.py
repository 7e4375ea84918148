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
import textwrap
import time

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

CHILD = textwrap.dedent("""
    import json, os, signal, sys, threading, time
    sys.path.insert(0, {root!r})
    from spectrace import config
    from spectrace.export import final_flush
    from spectrace.process import STATE, recorder
    MODE = {mode!r}
    STATE.config = config.from_env({{}}, output_dir={out!r}, metric_interval_s=2)
    if MODE == "sigint-ignored":
        signal.signal(signal.SIGINT, signal.SIG_IGN)
    if MODE == "host-handler":
        def host(signum, frame):
            print("host handler", signum, flush=True)
            sys.exit(3)
        signal.signal(signal.SIGTERM, host)

    class Stuck:
        def force_flush(self, timeout_millis=0):
            time.sleep(30)

    def start():
        rec = recorder()
        rec.acceptance.prepare(3)
        rec.acceptance.add([1, 2, 0], 3)   # 3 request-steps, 3 accepted tokens
        if MODE == "stuck-exporter":
            final_flush.install([Stuck()] + STATE.telemetry.flush_targets())

    if MODE == "thread":
        t = threading.Thread(target=start)
        t.start()
        t.join()
    else:
        start()
    try:
        print(json.dumps({{"ready": time.time(), "sigterm_default":
                           signal.getsignal(signal.SIGTERM) == signal.SIG_DFL}}), flush=True)
        if MODE == "thread":
            sys.exit(0)
        while final_flush._STATE.last_flush_s is None:
            time.sleep(0.01)
        print(json.dumps({{"flushed_in": final_flush._STATE.last_flush_s}}), flush=True)
        while True:
            time.sleep(0.01)
    except KeyboardInterrupt:
        print("KeyboardInterrupt", flush=True)
        raise
""")


def default_signals() -> None:
    """A terminal job's dispositions, whatever pytest inherited (a background job of a
    script starts with SIGINT ignored)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)


def run_child(tmp_path, mode: str):
    out = tmp_path / "data"
    proc = subprocess.Popen([sys.executable, "-c", CHILD.format(root=ROOT, mode=mode,
                                                                out=str(out))],
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
