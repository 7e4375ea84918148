#!/usr/bin/env bash
# Set up the environment (first run: a few minutes) and run the fc-bypass demo on the CPU.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup-env.sh
exec .venv/bin/python examples/demo_fc_bypass.py "$@"
