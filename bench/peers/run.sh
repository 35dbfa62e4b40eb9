#!/usr/bin/env bash
# Runs on the GPU machine: builds DeepGEMM (once, into /tmp/dg) from the carried peers bundle (.peers/, a copy of
# ../shared/peers made on the development machine) and runs bench/peers/deepgemm_indexer.py
# against our libflashindexer_c.so. Results: $OUT/peers.jsonl and $OUT/peers.txt.
#   usage: bench/peers/run.sh [build-dir with libflashindexer_c.so] [harness args...]
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 1
OUT=${OUT:-/tmp/flashindexer_out}
mkdir -p "$OUT"
lib_dir=${1:-build/release}
shift || true
[ -f "$lib_dir/libflashindexer_c.so" ] || { echo "$lib_dir/libflashindexer_c.so is missing" >&2; exit 1; }
start=$SECONDS
if ! ls /tmp/dg/dg/deep_gemm/_C*.so > /dev/null 2>&1; then  # built once per machine
  bash .peers/build_deepgemm.sh /tmp/dg > "$OUT/peers_build.log" 2>&1 || { tail -20 "$OUT/peers_build.log"; exit 1; }
  echo "DeepGEMM built in $((SECONDS - start)) s"
fi
export PYTHONPATH=/tmp/dg/dg PYTHONUNBUFFERED=1 FLASHINDEXER_LIB=$PWD/$lib_dir/libflashindexer_c.so
LD_PRELOAD=$(ls /usr/lib/x86_64-linux-gnu/libstdc++.so.6) python3 bench/peers/deepgemm_indexer.py "$@" \
  > "$OUT/peers.jsonl" 2> "$OUT/peers.err"
rc=$?
tail -5 "$OUT/peers.err"
python3 bench/peers/summarize.py "$OUT/peers.jsonl" | tee "$OUT/peers.txt"
exit $rc
