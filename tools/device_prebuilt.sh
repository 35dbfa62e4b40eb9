#!/usr/bin/env bash
# Runs on the GPU machine (the device tool) with binaries built on the development machine:
# no build there, so a call takes ~30-60 s instead of 4-5 minutes. The two machines have the
# same nvcc (13.0) and binaries built here ran there (2026-11-29, e2137f6: the GPU TopK tests,
# compute-sanitizer and bench-topk). Build here, then carry the binaries (each ~15 MB; the
# carry limit is 64 MiB, so at most four):
#   cmake --build build/release --target flashindexer_cli flashindexer_tests
#   device run, carry ["build/release/flashindexer", "build/release/tests/flashindexer_tests"]
#   usage: [TESTS=gtest-filter|none] [SANITIZE=0] [TOPK_POINTS="..."] [POINTS="..."]
#          tools/device_prebuilt.sh [name=build/dir ...]     (default: release=build/release)
# Per variant: the tests (default filter 'Gpu*': the GPU label) when dir/tests/flashindexer_tests
# was carried, compute-sanitizer memcheck + racecheck on the small cases (first variant only),
# then bench-topk and bench points. Variants are knob builds of the same tree (name=dir, e.g.
# prefilter=build/variant_prefilter): same-run A/B timing. Results: $OUT/prebuilt.txt (summary)
# and $OUT/prebuilt.jsonl (bench lines tagged with "variant").
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
OUT=${OUT:-/tmp/flashindexer_out}
mkdir -p "$OUT"
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:/usr/local/cuda/lib:${LD_LIBRARY_PATH:-}
variants=("$@")
[ ${#variants[@]} -eq 0 ] && variants=("release=build/release")
filter=${TESTS:-'Gpu*'}
topk_points=${TOPK_POINTS-"decode_b1_256k decode_b64_64k"}
points=${POINTS-}
small='GpuTopK.SanitizerSmallCases:GpuScorer.SanitizerSmallCases:GpuFused.SanitizerSmallCases'
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,driver_version --format=csv,noheader | tee "$OUT/prebuilt.txt"
: > "$OUT/prebuilt.jsonl"
rc=0 first=1
for v in "${variants[@]}"; do
  name=${v%%=*} dir=${v#*=}
  cli=$dir/flashindexer tests=$dir/tests/flashindexer_tests
  [ -x "$cli" ] || { echo "$name: $cli was not carried" | tee -a "$OUT/prebuilt.txt"; rc=1; continue; }
  if [ "$filter" != none ] && [ -x "$tests" ]; then
    timeout 300 "$tests" --gtest_filter="$filter" > "/tmp/tests_$name.log" 2>&1 || rc=1
    echo "$name tests ($filter): $(grep -E '^\[  (PASSED|FAILED) \]' "/tmp/tests_$name.log" | tr '\n' ' ')" | tee -a "$OUT/prebuilt.txt"
    grep -E '^\[  FAILED  \] [A-Za-z]|Failure' "/tmp/tests_$name.log" | head -20 | tee -a "$OUT/prebuilt.txt"
    if [ "${SANITIZE:-1}" = 1 ] && [ $first = 1 ]; then
      for tool in memcheck racecheck; do
        compute-sanitizer --tool "$tool" --error-exitcode 9 "$tests" --gtest_filter="$small" > "/tmp/$tool.log" 2>&1 || rc=1
        echo "$name compute-sanitizer $tool: $(grep -E 'ERROR SUMMARY|PASSED|FAILED' "/tmp/$tool.log" | tail -2 | tr '\n' ' ')" |
          tee -a "$OUT/prebuilt.txt"
      done
    fi
  fi
  first=0
  : > "/tmp/bench_$name.jsonl"
  for pt in $topk_points; do
    timeout 60 "$cli" bench-topk --json --only "$pt" >> "/tmp/bench_$name.jsonl" 2>> "$OUT/prebuilt.err" || rc=1
  done
  for pt in $points; do
    timeout 100 "$cli" bench --json --only "$pt" >> "/tmp/bench_$name.jsonl" 2>> "$OUT/prebuilt.err" || rc=1
  done
  sed "s/^{/{\"variant\":\"$name\",/" "/tmp/bench_$name.jsonl" >> "$OUT/prebuilt.jsonl"
  { echo "== $name ($dir)"; python3 bench/summarize.py "/tmp/bench_$name.jsonl"; } | tee -a "$OUT/prebuilt.txt"
done
exit $rc
