#!/usr/bin/env bash
# Runs on the GPU machine (the device tool) after tools/device_prebuilt.sh has unpacked the
# binaries: the Python package's pytest suite with CUDA tensors against the carried
# build/release/libflashindexer_c.so (pytest from the carried .whl/ wheels), then, unless
# PEERS=0, bench/peers/run.sh (DeepGEMM beside us; needs .peers/ carried) with PEERS_ARGS.
# bench/python_overhead.py measures the eager Python-call overhead. Logs: $OUT/pytest.txt,
# $OUT/overhead.jsonl, $OUT/peers.jsonl, $OUT/peers.txt.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
OUT=${OUT:-/tmp/flashindexer_out}
mkdir -p "$OUT"
lib_dir=${LIB_DIR:-build/release}
rc=0
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
  > /dev/null 2>&1 || echo "pytest wheels did not install"
if [ -d .peers ] && ! ls /tmp/dg/dg/deep_gemm/_C*.so > /dev/null 2>&1; then  # DeepGEMM for test_deepgemm.py
  bash .peers/build_deepgemm.sh /tmp/dg > "$OUT/peers_build.log" 2>&1 || echo "DeepGEMM did not build"
fi
PYTHONPATH=/tmp/site:/tmp/dg/dg FLASHINDEXER_LIB=$PWD/$lib_dir/libflashindexer_c.so FLASHINDEXER_TEST_CUDA=1 \
  LD_PRELOAD=$(ls /usr/lib/x86_64-linux-gnu/libstdc++.so.6) timeout "${PYTEST_TIMEOUT:-300}" \
  python3 -m pytest -q -p no:cacheprovider tests/python > "$OUT/pytest.txt" 2>&1 || rc=1
grep -E "passed|failed|error" "$OUT/pytest.txt" | tail -3
grep -E "^(FAILED|ERROR)" "$OUT/pytest.txt" | head -10
PYTHONPATH=python FLASHINDEXER_LIB=$PWD/$lib_dir/libflashindexer_c.so timeout 120 python3 bench/python_overhead.py \
  > "$OUT/overhead.jsonl" 2>&1 || rc=1
cat "$OUT/overhead.jsonl"
if [ "${PEERS:-1}" != 0 ]; then
  # shellcheck disable=SC2086  # PEERS_ARGS: words for the harness
  timeout "${PEERS_TIMEOUT:-420}" bench/peers/run.sh "$lib_dir" ${PEERS_ARGS:-} || rc=1
fi
exit $rc
