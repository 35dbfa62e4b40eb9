#!/usr/bin/env bash
# Builds and runs the CPU test suite twice: release (which also compiles the CUDA
# sm_90a sources when nvcc is present) and AddressSanitizer + UBSan.
# GPU tests (label gpu) are excluded here; tools/device.sh runs them on an H200.
set -euo pipefail
cd "$(dirname "$0")/.."
tools/setup.sh
jobs=$(nproc)
for preset in release asan; do
  echo "== $preset =="
  cmake --preset "$preset" >/dev/null
  cmake --build --preset "$preset" -j "$jobs"
  ctest --preset "$preset" -j "$jobs"
done
