#!/usr/bin/env bash
# Builds and runs the CPU test suite twice: release (which also compiles the CUDA
# sm_90a sources when nvcc is present) and AddressSanitizer + UBSan; fuzzes the problem-file
# reader for FUZZ_SECONDS (default 60; libFuzzer, clang, tests/fuzz/corpus seeds); then installs the
# Python package (CPU build) into build/pyenv, a virtualenv with torch made once per machine
# (torch from PyPI brings ~5 GB of CUDA libraries), and runs its pytest suite.
# GPU tests (label gpu) are excluded here; tools/device.sh runs them on an H200.
set -euo pipefail
cd "$(dirname "$0")/.."
tools/setup.sh
jobs=$(nproc)
for preset in release asan; do
  echo "== $preset =="
  cmake --preset "$preset" >/dev/null
  cmake --build --preset "$preset" -j "$jobs" 2>&1 | tee "build/$preset-build.log"
  # A default build is quiet: no compiler warnings, no ptxas reports (-DFLASHINDEXER_PTXAS_VERBOSE=ON prints them).
  if grep -iE "warning|ptxas info" "build/$preset-build.log"; then echo "the $preset build is not quiet" >&2; exit 1; fi
  ctest --preset "$preset" -j "$jobs"
done
echo "== docs =="
# docs/perf.md is what tools/perf_doc.py writes from bench/results/; the repository dates its
# history by day and commit (the word below is split so that this line passes its own check).
python3 tools/perf_doc.py --check || { echo "docs/perf.md differs from tools/perf_doc.py's output" >&2; exit 1; }
if git rev-parse --git-dir >/dev/null 2>&1 && git grep -qi "sess""ion"; then git grep -il "sess""ion" >&2; exit 1; fi
echo "== fuzz =="
cmake --preset fuzz >/dev/null
cmake --build --preset fuzz -j "$jobs"
rm -rf build/fuzz/corpus && mkdir -p build/fuzz/corpus
build/fuzz/fuzz_problem_file -max_total_time="${FUZZ_SECONDS:-60}" -rss_limit_mb=2048 -print_final_stats=1 \
  -artifact_prefix=build/fuzz/ build/fuzz/corpus tests/fuzz/corpus 2>&1 | tail -4
echo "== python =="
py=build/pyenv/bin/python
[ -x "$py" ] || python3 -m venv build/pyenv
"$py" -m pip install -q --disable-pip-version-check "torch>=2.4" pytest numpy
FLASHINDEXER_CUDA=OFF "$py" -m pip install -q --disable-pip-version-check .
(cd build && ./pyenv/bin/python -m pytest -q ../tests/python)
