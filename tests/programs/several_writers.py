"""A process for tests/test_reliability.py, run four at once: spectrace's real file and
Prometheus exporters for one TP rank, plus appends to one file shared by all four.

    python tests/programs/several_writers.py OUTPUT_DIR RANK SHARED_FILE PROMETHEUS_BASE_PORT
"""
import json
import sys

from spectrace import config
from spectrace.export.files import JsonlWriter
from spectrace.export.providers import setup

out, rank, shared = sys.argv[1], int(sys.argv[2]), sys.argv[3]
cfg = config.from_env({}, output_dir=out, exporters=["file", "prometheus"],
                      prometheus_port=int(sys.argv[4]), metric_interval_s=0.1)
tel = setup(cfg, {"tp_rank": rank}, "scheduler")
w = JsonlWriter(shared)
for i in range(400):
    tel.events.write({"rank": rank, "i": i, "pad": "x" * (i * 97 % 70000)})
    w.write({"rank": rank, "i": i, "pad": "y" * (i * 131 % 90000)})
print(json.dumps({"dir": tel.directory, "port": tel.prometheus_port}))
tel.shutdown()
