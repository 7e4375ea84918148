"""Run at every interpreter start by `spectrace_autostart.pth` (site-packages).

It must cost nothing when spectrace is off: it reads one environment variable and, only
when `SPECTRACE_ENABLED` is set (to anything: a bad value is reported there), hands over
to `spectrace.autostart`. This is
how spectrace reaches SGLang's spawned scheduler and TP processes on every SGLang version.
"""
import os

if os.environ.get("SPECTRACE_ENABLED", "").strip():
    try:
        import spectrace.autostart

        spectrace.autostart.on_interpreter_start()
    except Exception:  # never break an interpreter start-up
        import sys

        print("spectrace: auto-instrumentation failed to start; the process runs "
              "uninstrumented", file=sys.stderr)
