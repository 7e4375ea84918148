#!/usr/bin/env bash
# Build the development environment in .venv: spectrace (editable, with test extras) plus the
# host stack the tests and the demo run on: torch (CPU run) and SGLang 0.5.23 installed
# --no-deps (its declared dependencies pull several GB of CUDA-only packages).
# Idempotent: re-running reuses an existing .venv.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3.11}
VENV=${SPECTRACE_VENV:-.venv}
if [ ! -x "$VENV/bin/python" ]; then
  "$PY" -m venv "$VENV"
fi
pip_() { "$VENV/bin/pip" install --disable-pip-version-check -q "$@"; }
if ! "$VENV/bin/python" -c "import sglang" 2>/dev/null; then
  pip_ torch==2.14.1 torchvision==0.29.1
  pip_ --no-deps sglang==0.5.23
  pip_ -r requirements/sglang-host.txt
fi
pip_ -e ".[all,test]"
echo "environment ready: $VENV"
