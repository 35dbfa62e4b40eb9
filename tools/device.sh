#!/usr/bin/env bash
# Runs on the GPU machine (the device tool): configure + build (sm_90a), the whole
# test suite including the gpu label, compute-sanitizer on the GPU tests, then the
# benchmarks. Logs and JSON go to $OUT. Needs .deps/ carried (tools/device_deps.sh).
#   usage: tools/device.sh [test|sanitize|bench|score]...   (default: test sanitize bench score)
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/flashindexer_out}
mkdir -p "$OUT"
steps=${*:-test sanitize bench score}
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,driver_version --format=csv | tee "$OUT/gpu.txt"
cmake -S . -B build/device -G Ninja -DCMAKE_BUILD_TYPE=Release -DFLASHINDEXER_CUDA=ON -DFLASHINDEXER_PTXAS_VERBOSE=ON \
  -DCMAKE_PREFIX_PATH="$PWD/.deps/usr" -DFLASHINDEXER_GTEST_SOURCE="$PWD/.deps/usr/src/googletest" \
  > "$OUT/configure.log" 2>&1 || { tail -30 "$OUT/configure.log"; exit 1; }
cmake --build build/device -j "$(nproc)" > "$OUT/build.log" 2>&1 || { grep -E "error" -A3 "$OUT/build.log" | head -40; exit 1; }
grep -E "registers|spill" "$OUT/build.log" | sort | uniq -c | head -20
rc=0
for step in $steps; do
  case $step in
    test)
      (cd build/device && ctest -j 8 --output-on-failure) > "$OUT/ctest.log" 2>&1 || rc=1
      grep -E "tests passed|Failed|\*\*\*" "$OUT/ctest.log" | head -30 ;;
    sanitize)
      : > "$OUT/sanitize.log"  # one file for both tools: $OUT returns at most 8 files
      small='GpuTopK.SanitizerSmallCases:GpuScorer.SanitizerSmallCases:GpuFused.SanitizerSmallCases'
      for tool in memcheck racecheck; do
        log=/tmp/sanitize_$tool.log
        # memcheck also takes the sampled start (2 x SMs CTAs: too slow for racecheck) and the
        # fp8 decode clusters (both tools take the merge's larger buffer, the cluster merge and
        # row pairs at H = 32, which move no registers); the mxfp4 ones
        # hang under memcheck in some runs unless built with -DFI_STAGED_SETMAXNREG=0
        # (docs/experiments.md, 2026-11-30): tools/device_prebuilt.sh.
        filter="$small:GpuFused.SanitizerDecodeClustersLargeMerge:GpuFused.SanitizerDecodeClustersMerge"
        filter="$filter:GpuFused.SanitizerDecodeClustersPairs"
        [ "$tool" = memcheck ] && filter="$filter:GpuFused.SanitizerSampledStart:GpuFused.SanitizerDecodeClustersFp8"
        timeout "${SANITIZE_TIMEOUT:-300}" compute-sanitizer --tool "$tool" --error-exitcode 9 \
          build/device/tests/flashindexer_tests --gtest_filter="$filter" > "$log" 2>&1 || rc=1
        { echo "== compute-sanitizer --tool $tool"; cat "$log"; } >> "$OUT/sanitize.log"
        echo "compute-sanitizer $tool: $(grep -E 'ERROR SUMMARY|PASSED|FAILED' "$log" | tail -2 | tr '\n' ' ')"
      done ;;
    bench)
      build/device/flashindexer bench-topk --json > "$OUT/bench_topk.jsonl" 2> "$OUT/bench_topk.err" || rc=1
      python3 bench/torch_topk_baseline.py >> "$OUT/bench_topk.jsonl" 2>> "$OUT/bench_topk.err" || rc=1
      python3 bench/summarize.py "$OUT/bench_topk.jsonl" | tee "$OUT/bench_topk.txt" ;;
    score)
      build/device/flashindexer bench --json ${SCORE_ARGS:-} > "$OUT/bench_score.jsonl" 2> "$OUT/bench_score.err" || rc=1
      PYTHONUNBUFFERED=1 python3 bench/torch_indexer_baseline.py >> "$OUT/bench_score.jsonl" 2>> "$OUT/bench_score.err" || rc=1
      tail -3 "$OUT/bench_score.err"
      python3 bench/summarize.py "$OUT/bench_score.jsonl" | tee "$OUT/bench_score.txt"
      python3 bench/plot_fused.py "$OUT/fused.png" "$OUT/bench_score.jsonl" || rc=1 ;;
  esac
done
exit $rc
