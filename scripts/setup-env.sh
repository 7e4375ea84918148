#!/usr/bin/env bash
# Build the development environment in .venv: spectrace (editable, with test extras) plus the
# host stack the tests and the demo run on: torch (CPU run) and SGLang 0.5.23 installed
# --no-deps (its declared dependencies pull several GB of CUDA-only packages).
# Idempotent: re-running reuses an existing .venv. One line per step; pip's output goes to
# .logs/setup-env.log.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/steps.sh
PY=${PYTHON:-python3.11}
VENV=${SPECTRACE_VENV:-.venv}
steps_log setup-env
echo "setting up $VENV (details: $STEPS_LOG)"
pip_() { "$VENV/bin/pip" install --disable-pip-version-check "$@"; }
if [ -x "$VENV/bin/python" ]; then
  note "$VENV: already there"
else
  step "creating $VENV with $PY" "$PY" -m venv "$VENV"
fi
if "$VENV/bin/python" -c "import sglang" 2>/dev/null; then
  note "torch and SGLang 0.5.23: already installed"
else
  needs_disk 7 "torch 2.14.1 and SGLang 0.5.23 in $VENV (6.1 GB installed)"
  step "installing torch 2.14.1 (CPU)" pip_ torch==2.14.1 torchvision==0.29.1
  step "installing SGLang 0.5.23 (--no-deps)" pip_ --no-deps sglang==0.5.23
  step "installing what SGLang needs on the CPU" pip_ -r requirements/sglang-host.txt
fi
step "installing spectrace (editable, [all,test])" pip_ -e ".[all,test]"
echo "environment ready: $VENV"
