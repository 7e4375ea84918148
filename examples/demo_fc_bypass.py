"""The failure spectrace exists for, on this machine's CPU with real SGLang 0.5.23.

Two tiny EAGLE-3 deployments, the same weights: one healthy, one whose draft config says
`"use_aux_hidden_state": false`. SGLang serves both without an error and with the same
output text, but the second's acceptance length falls from 2.0 to about 1.0: every draft
token rejected, no speed-up. spectrace, switched on by environment variables alone, names
the cause, in words (`spectrace report`) and in pictures (`--html`, one page per run).
(The `*_cpu` kernels come from the pure-torch stand-in in harness/.)

Run: python examples/demo_fc_bypass.py [--out DIR]
"""
from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from harness.server import start_server  # noqa: E402
from harness.tiny_models import make_tiny_models  # noqa: E402

PROMPTS = [[3, 7, 11], [5, 9, 2], [4, 6, 8], [10, 1, 3], [2, 8, 6]]
# 5 prompts x 48 new tokens: about 120 request-steps verified at 2 tokens a step, past the
# 100 the report's verdict needs before it judges acceptance (report/verdict.py)
NEW_TOKENS = 48


def run(name: str, mode: str, out: str) -> str:
    """One deployment: serve the prompts, stop the server, report; the HTML report's path."""
    models = os.path.join(out, "models", mode)
    make_tiny_models(models, mode)
    data = os.path.join(out, name, "spectrace-data")
    log = os.path.join(out, name, "server.log")
    html = os.path.join(out, name, "report.html")
    os.makedirs(os.path.dirname(log), exist_ok=True)
    print(f"\n=== {name}: starting SGLang (EAGLE-3, {mode} draft) with SPECTRACE_ENABLED=1 ===")
    server = start_server(models, log, env_extra={
        "SPECTRACE_ENABLED": "1", "SPECTRACE_OUTPUT_DIR": data,
        "SPECTRACE_METRIC_INTERVAL": "0.5"})
    try:
        for ids in PROMPTS:
            r = server.generate(ids, NEW_TOKENS)
            print(f"  prompt {ids} -> {r['text'][:40]!r}... SGLang spec_accept_length "
                  f"{r['meta_info']['spec_accept_length']:.2f}")
            time.sleep(1)  # a few export intervals apart: points on the report's time axis
        # a normal stop, as Ctrl-C in a terminal: each process writes its final snapshot
        server.send(signal.SIGINT)
        server.wait_stopped()
    finally:
        server.stop()
    print(f"\n--- spectrace report {data} --html {html} ---")
    subprocess.run([sys.executable, "-m", "spectrace.cli", "report", data, "--html", html],
                   check=True)
    return html


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", default=os.path.join(ROOT, "demo-output"))
    a = p.parse_args()
    pages = [run("healthy", "partial", a.out), run("fc-bypass", "bypass", a.out)]
    print("\nSame weights, same output text, no error from SGLang; spectrace names the cause "
          "above (eagle3.fc_bypass, aux.capture_disabled).")
    print("\nThe same as pictures, one self-contained page per run (opens offline):")
    for page in pages:
        print(f"  {page}")


if __name__ == "__main__":
    main()
