#!/usr/bin/env bash
# Record scenarios on the real runtimes into tests/recorded/ (tests/recorded/README.md):
# each NAME runs tests/recorders/record_NAME.py, which starts the servers, serves the
# scenario's traffic, asserts the exported totals equal the runtime's own and copies each
# run's telemetry folder with those figures beside it. Record on a quiet machine (nothing
# else running): the recorded runs are what the statistical tests judge.
#
#   scripts/record.sh [NAME ...]      e.g. scripts/record.sh compare; no NAME: every one
set -euo pipefail
cd "$(dirname "$0")/.."
names=("$@")
if [ ${#names[@]} -eq 0 ]; then
  for f in tests/recorders/record_*.py; do names+=("$(basename "$f" .py | sed 's/^record_//')"); done
fi
export SPECTRACE_VLLM_PYTHON="${SPECTRACE_VLLM_PYTHON:-$PWD/.venv-vllm/bin/python}"
for name in "${names[@]}"; do
  echo "recording $name (load average now: $(cut -d' ' -f1 /proc/loadavg))"
  .venv/bin/python -m pytest -q -n 0 -p no:randomly "tests/recorders/record_$name.py"
done
