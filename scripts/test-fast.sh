#!/usr/bin/env bash
# The fast test tier (README "Tests"): every test that needs only `spectrace[test]`, no torch,
# SGLang or vLLM, no network, no server; under a minute. Builds .venv-fast (spectrace and its
# test extra alone, about a minute the first time; pip's output in .logs/setup-fast.log),
# then runs `pytest -m fast`.
#
#   scripts/test-fast.sh [PYTEST ARGS...]
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/steps.sh
PY=${PYTHON:-python3}
VENV=.venv-fast
steps_log setup-fast
echo "setting up $VENV (details: $STEPS_LOG)"
if [ -x "$VENV/bin/python" ]; then
  note "$VENV: already there"
else
  step "creating $VENV with $PY" "$PY" -m venv "$VENV"
fi
# (again only when pyproject.toml changed: the tests themselves run offline)
if [ "$VENV/.installed" -nt pyproject.toml ]; then
  note "spectrace[test]: already installed"
else
  step "installing spectrace (editable, [test])" \
    "$VENV/bin/pip" install --disable-pip-version-check -e ".[test]"
  touch "$VENV/.installed"
fi
echo "running pytest -m fast $*"
exec "$VENV/bin/python" -m pytest -m fast "$@"
