"""A process for tests/test_metrics_history.py: writes large metric snapshots through
spectrace's real `JsonlWriter` until it is killed, so that its compactions keep running.

    python tests/programs/metrics_writer.py METRICS_FILE
"""
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

from spectrace.export.files import JsonlWriter  # noqa: E402

w = JsonlWriter(sys.argv[1], "metrics", max_bytes=4 << 20)
pad = "p" * 200_000
k = 0
while True:
    w.write({"time": time.time(), "metrics": {"spectrace.spec.drafts":
             [{"attributes": {}, "value": k}], "pad": [{"attributes": {"x": pad},
             "value": 0}]}})
    k += 1
