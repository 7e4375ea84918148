"""`spectrace report | head`: the reader leaves before the report is written. The command
ends quietly with a pipe writer's status (141), no traceback, on a folder real SGLang
runs wrote (tests/recorded/advisor)."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest

FULL = os.path.join(os.path.dirname(os.path.abspath(__file__)), "recorded", "advisor",
                    "full-k3")


@pytest.mark.parametrize("extra", [[], ["--json"]], ids=["text", "json"])
def test_a_reader_that_left_ends_the_report_quietly(extra):
    proc = subprocess.Popen([sys.executable, "-m", "spectrace.cli", "report", FULL, *extra],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        proc.stdout.close()  # the reader is gone before the first line
        err = proc.stderr.read().decode()
        assert proc.wait(timeout=120) == 141, err
        assert "Traceback" not in err and "BrokenPipe" not in err, err
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        proc.stderr.close()
