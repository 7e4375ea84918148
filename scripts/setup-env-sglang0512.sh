#!/usr/bin/env bash
# Build the SGLang 0.5.12 environment for the v1 EAGLEWorker end-to-end test
# (tests/test_v1_sglang0512.py): torch 2.11 (0.5.12's pin), sglang 0.5.12 installed --no-deps
# (its declared dependencies pull several GB of CUDA-only packages), the run-time packages
# of harness/sglang0512/requirements.txt, and spectrace itself (editable, so its start-up
# hook reaches SGLang's spawned scheduler). About 5 GB and a few minutes.
#
#   scripts/setup-env-sglang0512.sh [VENV]     (default ~/.venvs/spectrace-sglang0512)
#   SPECTRACE_SGLANG0512_PYTHON=VENV/bin/python .venv/bin/python -m pytest tests/test_v1_sglang0512.py
# Idempotent: re-running reuses an existing VENV.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3.11}
VENV=${1:-$HOME/.venvs/spectrace-sglang0512}
if [ ! -x "$VENV/bin/python" ]; then
  mkdir -p "$(dirname "$VENV")"
  "$PY" -m venv "$VENV"
fi
pip_() { "$VENV/bin/pip" install --disable-pip-version-check -q "$@"; }
if ! "$VENV/bin/python" -c "import sglang, sys; sys.exit(sglang.__version__ != '0.5.12')" 2>/dev/null; then
  pip_ torch==2.11.0 torchvision==0.26.0
  pip_ --no-deps sglang==0.5.12
  pip_ -r harness/sglang0512/requirements.txt
fi
pip_ --no-deps -e .
echo "SGLang 0.5.12 environment ready: SPECTRACE_SGLANG0512_PYTHON=$VENV/bin/python"
