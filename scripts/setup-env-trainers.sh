#!/usr/bin/env bash
# Build the trainers' environment for the doctor tests on the trainers' own output
# (tests/test_doctor_trainers.py): the three EAGLE-3 trainers from PyPI, speculators 0.9.0,
# SpecForge 0.2.0 and NVIDIA Model Optimizer 0.47.0, each installed --no-deps (SpecForge pins
# torch 2.11, transformers 5.8.1 and SGLang 0.5.14; speculators pulls torchvision and
# torchaudio; Model Optimizer ninja and nvidia-ml-py: none of them is needed to build a draft
# and export it on the CPU), over torch's CPU build and the few packages their draft classes
# and export functions import (requirements/trainers.txt). spectrace is not installed here:
# the tests run each trainer's code in this python and the doctor in the main .venv.
# About 1.5 GB and a few minutes (most of it torch; pip's cache is reused).
#
#   scripts/setup-env-trainers.sh [VENV]     (default .venv-trainers)
#   SPECTRACE_TRAINERS_PYTHON=VENV/bin/python .venv/bin/python -m pytest -m trainers
# Idempotent: re-running reuses an existing VENV. One line per step; pip's output goes to
# .logs/setup-env-trainers.log.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/steps.sh
PY=${PYTHON:-python3.11}
VENV=${1:-.venv-trainers}
TRAINERS="speculators==0.9.0 specforge==0.2.0 nvidia-modelopt==0.47.0"
steps_log setup-env-trainers
echo "setting up $VENV: $TRAINERS (details: $STEPS_LOG)"
pip_() { "$VENV/bin/pip" install --disable-pip-version-check "$@"; }
installed() {  # every trainer at its version
  "$VENV/bin/python" - "$TRAINERS" <<'PY' 2>/dev/null
import importlib.metadata as m, sys
sys.exit(any(m.version(n) != v for n, v in (p.split("==") for p in sys.argv[1].split())))
PY
}
if [ -x "$VENV/bin/python" ]; then
  note "$VENV: already there"
else
  mkdir -p "$(dirname "$VENV")"
  needs_disk 2 "CPU torch and the trainers in $VENV (1.7 GB installed)"
  step "creating $VENV with $PY" "$PY" -m venv "$VENV"
fi
# always (a no-op when they are there): a requirement added later reaches an existing VENV
step "installing torch (CPU) and what the trainers' draft code imports" \
  pip_ -r requirements/trainers.txt
if installed; then
  note "the trainers: already installed"
else
  # shellcheck disable=SC2086
  step "installing $TRAINERS (--no-deps)" pip_ --no-deps $TRAINERS
fi
step "importing the trainers' EAGLE-3 classes and export functions" "$VENV/bin/python" -c "
from speculators.models.eagle3 import Eagle3DraftModel
from speculators.convert.eagle.eagle3_converter import Eagle3Converter
from specforge.modeling.draft.llama3_eagle import LlamaForCausalLMEagle3
from specforge.export.to_sglang import export_to_sglang
from speculators.train.cli import create_transformer_layer_config
import modelopt.torch.speculative, modelopt.torch.export"
echo "trainers' environment ready: SPECTRACE_TRAINERS_PYTHON=$VENV/bin/python"
