#!/usr/bin/env bash
# The wheels benchmarks/gpu_check.py needs on a GPU machine that has PyTorch and no
# network: spectrace's own (built from this checkout) and its dependencies (OpenTelemetry
# API and SDK, wrapt, and theirs) for CPython 3.10 - 3.13 on Linux x86_64 and aarch64.
# Run it where PyPI can be reached; then, on the GPU machine, from the checkout:
#     python benchmarks/gpu_check.py --wheels OUT/wheels --require-cuda
#
# usage: benchmarks/gpu_bundle.sh [OUT]     (default: gpu_bundle, git-ignored; ~3 MB)
# PYTHON=... selects the interpreter whose pip does the work (default: python3).
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${1:-gpu_bundle}
PYTHON=${PYTHON:-python3}
mkdir -p "$OUT/wheels"
# spectrace itself (pip fetches the build backend, hatchling, into a throw-away env)
"$PYTHON" -m pip wheel --quiet --no-deps --wheel-dir "$OUT/wheels" .
for arch in x86_64 aarch64; do
  for py in 3.10 3.11 3.12 3.13; do
    "$PYTHON" -m pip download --quiet --only-binary=:all: --dest "$OUT/wheels" \
      --python-version "$py" --implementation cp \
      --platform "manylinux2014_$arch" --platform "manylinux_2_17_$arch" \
      --platform "manylinux_2_28_$arch" --platform "manylinux_2_5_$arch" \
      "opentelemetry-api>=1.27" "opentelemetry-sdk>=1.27" "wrapt>=1.14"
  done
done
ls -1 "$OUT/wheels"
du -sh "$OUT/wheels"
