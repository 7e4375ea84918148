"""Recorded runs (tests/recorded/README.md): what a recorder (tests/recorders/) keeps of a
live run, and how a test reads it back.

A scenario's folder `tests/recorded/SCENARIO/` holds, for each run of it, the telemetry
folder spectrace wrote (`RUN/`, its process folders as `SPECTRACE_OUTPUT_DIR` held them)
and `RUN.json`: the runtime's own figures for that run (its counts, request ids and rates,
from its responses), the settings the live test judged it with, and when, where and at
what load it was recorded. A test that reads a recording asserts the runtime's own figures
against the folder first, so a recording that lost or gained a step fails there."""
from __future__ import annotations

import json
import os
import platform
import shutil
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RECORDED = os.path.join(ROOT, "tests", "recorded")


def path(scenario: str, run: str) -> str:
    """The telemetry folder of `run` in `scenario`."""
    return os.path.join(RECORDED, scenario, run)


def facts(scenario: str, run: str) -> dict:
    """What the recorder kept beside the folder: `runtime` (the runtime's own figures) and
    `settings` (what the test judges the run with)."""
    with open(path(scenario, run) + ".json") as fh:
        return json.load(fh)


def keep(data_dir, scenario: str, run: str, runtime: dict,
         settings: dict | None = None) -> str:
    """Copy a live run's telemetry folder into the recording (replacing an older one) with
    the runtime's own figures; the copy's path. Call it once the run has settled (its
    figures are in), so that the copy holds every step."""
    dest = path(scenario, run)
    shutil.rmtree(dest, ignore_errors=True)
    os.makedirs(os.path.dirname(dest), exist_ok=True)
    shutil.copytree(str(data_dir), dest)
    record = {"runtime": runtime, "settings": settings or {},
              "recorded": {"date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
                           "load_average_1m": round(os.getloadavg()[0], 2),
                           "cpus": os.cpu_count(), "machine": platform.machine(),
                           "by": "scripts/record.sh " + scenario}}
    with open(dest + ".json", "w") as fh:
        json.dump(record, fh, indent=1, sort_keys=True)
        fh.write("\n")
    return dest


def report(folder: str, *args: str, env: dict | None = None) -> dict:
    """`spectrace report --json FOLDER ARGS`, run as a user would (with `env` added)."""
    out = subprocess.run([sys.executable, "-m", "spectrace.cli", "report", folder, "--json",
                          *args], capture_output=True, text=True, timeout=120,
                         env={**os.environ, **(env or {})})
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def counting_process(doc: dict) -> dict:
    """The one process of a report (`report()`'s answer) that verified request-steps: the
    SGLang scheduler or vLLM's EngineCore (a vLLM worker counts none)."""
    [proc] = [p for p in doc["processes"] if p["drafts"]]
    return proc


def text(folder: str, *args: str) -> str:
    """`spectrace report FOLDER ARGS` (text)."""
    out = subprocess.run([sys.executable, "-m", "spectrace.cli", "report", folder, *args],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    return out.stdout
