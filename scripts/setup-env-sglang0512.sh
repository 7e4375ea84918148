#!/usr/bin/env bash
# Build the SGLang 0.5.12 environment for the v1 EAGLEWorker end-to-end test
# (tests/test_v1_sglang0512.py): torch 2.11 (0.5.12's pin), sglang 0.5.12 installed --no-deps
# (its declared dependencies pull several GB of CUDA-only packages), the run-time packages
# of harness/sglang0512/requirements.txt, and spectrace itself (editable, so its start-up
# hook reaches SGLang's spawned scheduler). About 5 GB and a few minutes.
#
#   scripts/setup-env-sglang0512.sh [VENV]     (default ~/.venvs/spectrace-sglang0512)
#   SPECTRACE_SGLANG0512_PYTHON=VENV/bin/python .venv/bin/python -m pytest tests/test_v1_sglang0512.py
# Idempotent: re-running reuses an existing VENV. One line per step; pip's output goes to
# .logs/setup-env-sglang0512.log.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/steps.sh
PY=${PYTHON:-python3.11}
VENV=${1:-$HOME/.venvs/spectrace-sglang0512}
steps_log setup-env-sglang0512
echo "setting up $VENV: SGLang 0.5.12 (details: $STEPS_LOG)"
pip_() { "$VENV/bin/pip" install --disable-pip-version-check "$@"; }
if [ -x "$VENV/bin/python" ]; then
  note "$VENV: already there"
else
  mkdir -p "$(dirname "$VENV")"
  step "creating $VENV with $PY" "$PY" -m venv "$VENV"
fi
if "$VENV/bin/python" -c "import sglang, sys; sys.exit(sglang.__version__ != '0.5.12')" 2>/dev/null; then
  note "torch 2.11 and SGLang 0.5.12: already installed"
else
  needs_disk 6 "torch 2.11 and SGLang 0.5.12 in $VENV (5.2 GB installed)"
  step "installing torch 2.11.0 (CPU)" pip_ torch==2.11.0 torchvision==0.26.0
  step "installing SGLang 0.5.12 (--no-deps)" pip_ --no-deps sglang==0.5.12
  step "installing what SGLang 0.5.12 needs on the CPU" pip_ -r harness/sglang0512/requirements.txt
fi
step "installing spectrace (editable, --no-deps)" pip_ --no-deps -e .
echo "SGLang 0.5.12 environment ready: SPECTRACE_SGLANG0512_PYTHON=$VENV/bin/python"
