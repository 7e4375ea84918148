"""A child process for tests/test_final_flush.py: spectrace's real telemetry (file exporter)
in a process that is then told to stop.

    python tests/programs/final_flush_child.py MODE OUTPUT_DIR

MODE: default | sigint-ignored | host-handler | stuck-exporter | thread. Prints one JSON line
when ready (and one when the first snapshot is written), then waits for a signal; at exit it
prints how many final collections the file exporter's worker made.
"""

import atexit
import json
import os
import signal
import sys
import threading
import time

sys.path.insert(
    0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
)

from spectrace import config  # noqa: E402
from spectrace.export import final_flush  # noqa: E402
from spectrace.process import STATE, recorder  # noqa: E402

MODE, OUT = sys.argv[1], sys.argv[2]


def collections():  # registered before spectrace's exit hook, so it runs after it
    file_worker = final_flush._STATE.workers[0]
    print(json.dumps({"final_collections": file_worker.collections}), flush=True)


atexit.register(collections)

STATE.config = config.from_env({}, output_dir=OUT, metric_interval_s=2)
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
    rec.acceptance.add([1, 2, 0], 3)  # 3 request-steps, 3 accepted tokens
    if MODE == "stuck-exporter":
        final_flush.install(
            [final_flush.FlushTarget(Stuck(), final_flush.NETWORK_WAIT_S)]
            + STATE.telemetry.flush_targets()
        )


if MODE == "thread":
    t = threading.Thread(target=start)
    t.start()
    t.join()
else:
    start()
try:
    print(
        json.dumps(
            {
                "ready": time.time(),
                "sigterm_default": signal.getsignal(signal.SIGTERM) == signal.SIG_DFL,
            }
        ),
        flush=True,
    )
    if MODE == "thread":
        sys.exit(0)
    while final_flush._STATE.last_flush_s is None:
        time.sleep(0.01)
    print(json.dumps({"flushed_in": final_flush._STATE.last_flush_s}), flush=True)
    while True:
        time.sleep(0.01)
except KeyboardInterrupt:
    print("KeyboardInterrupt", flush=True)
    raise
