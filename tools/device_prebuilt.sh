#!/usr/bin/env bash
# Runs on the GPU machine (the device tool) with binaries built on the development machine:
# no build there, so a call takes ~30-60 s instead of 4-5 minutes. The two machines have the
# same nvcc (13.0) and binaries built here ran there (2026-11-29, e2137f6: the GPU TopK tests,
# compute-sanitizer and bench-topk). Build here, pack, and carry ".prebuilt" (each ~15 MB
# binary is ~4.3 MB packed, so a dozen fit under the 64 MiB carry limit):
#   cmake --build build/release --target flashindexer_cli flashindexer_tests
#   tools/pack_prebuilt.sh build/release build/variant_x      # -> .prebuilt/bins.tar.xz
#   device run, carry [".prebuilt"]
#   usage: [TESTS=gtest-filter|none] [TESTS_<name>=filter|none] [SHARDS=4] [SANITIZE=0]
#          [SANITIZE_<name>=0|1] [SANITIZE_RUNS_<name>="tool:filter ..."] [SANITIZE_TIMEOUT=300] [TOPK_POINTS="..."] [TOPK_POINTS_<name>="..."]
#          [POINTS="..."] [POINTS_<name>="..."] [BENCH_ARGS=--full] [BENCH_ARGS_<name>="..."] [TORCH=1]
#          [TEST_TIMEOUT=400] (seconds per gtest shard; the logs come back as $OUT/tests_<name>.tgz)
#          tools/device_prebuilt.sh [name=build/dir ...]     (default: release=build/release)
# Per variant: the tests (filter TESTS_<name>, else TESTS, else 'Gpu*': the GPU label) when
# dir/tests/flashindexer_tests was carried, in SHARDS gtest shards run side by side on the GPU;
# compute-sanitizer (racecheck on the small cases, memcheck on them and on the decode clusters),
# side by side with the tests, each run within SANITIZE_TIMEOUT s (default 300; a variant
# whose test filter is none runs no sanitizer either: give it a small filter instead); then
# bench-topk and bench points. TORCH=1 first times torch.topk on the TopK points
# (bench/torch_topk_baseline.py, same GPU and call) and puts it beside every variant's lines.
# Variants are knob builds of the same tree (name=dir, e.g. prefilter=build/variant_prefilter):
# same-run A/B timing. Results: $OUT/prebuilt.txt (summary) and $OUT/prebuilt.jsonl (bench
# lines tagged with "variant").
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
OUT=${OUT:-/tmp/flashindexer_out}
mkdir -p "$OUT"
for pack in .prebuilt/*.tar.xz; do [ -f "$pack" ] && tar -xJf "$pack"; done
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:/usr/local/cuda/lib:${LD_LIBRARY_PATH:-}
variants=("$@")
[ ${#variants[@]} -eq 0 ] && variants=("release=build/release")
filter=${TESTS:-'Gpu*'}
topk_points=${TOPK_POINTS-"decode_b1_256k decode_b64_64k"}
points=${POINTS-}
small='GpuTopK.SanitizerSmallCases:GpuScorer.SanitizerSmallCases:GpuFused.SanitizerSmallCases'
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,driver_version --format=csv,noheader | tee "$OUT/prebuilt.txt"
: > "$OUT/prebuilt.jsonl"
shards=${SHARDS:-4}
rc=0
: > /tmp/torch.jsonl
if [ "${TORCH:-0}" = 1 ]; then
  for pt in $topk_points; do
    LD_PRELOAD=$(ls /usr/lib/x86_64-linux-gnu/libstdc++.so.6 2>/dev/null) timeout 120 \
      python3 bench/torch_topk_baseline.py "$pt" >> /tmp/torch.jsonl 2>> "$OUT/prebuilt.err" || rc=1
  done
  cat /tmp/torch.jsonl >> "$OUT/prebuilt.jsonl"
fi
for v in "${variants[@]}"; do
  name=${v%%=*} dir=${v#*=}
  cli=$dir/flashindexer tests=$dir/tests/flashindexer_tests
  [ -x "$cli" ] || { echo "$name: $cli was not carried" | tee -a "$OUT/prebuilt.txt"; rc=1; continue; }
  vfilter_var="TESTS_$name"
  vfilter=${!vfilter_var:-$filter}
  sanitize_var="SANITIZE_$name"
  sanitize=${!sanitize_var:-${SANITIZE:-1}}
  # The tests binary loads libflashindexer_c.so from its build dir: carry it (pack_prebuilt.sh does).
  if [ "$vfilter" != none ] && [ -x "$tests" ] && missing=$(ldd "$tests" 2>/dev/null | grep "not found"); then
    echo "$name: $tests cannot load: $missing" | tee -a "$OUT/prebuilt.txt"
    rc=1
    vfilter=none
  fi
  if [ "$vfilter" != none ] && [ -x "$tests" ]; then
    san_pids=() runs=()
    if [ "$sanitize" = 1 ]; then
      # Runs side by side with the tests (none of them is timed), each bounded: racecheck
      # and memcheck on the small cases, and memcheck on each decode-cluster case. The mxfp4
      # cluster cases hang under memcheck in some runs unless the variant is built with
      # -DFI_STAGED_SETMAXNREG=0 (2026-11-30): sanitize that variant (SANITIZE_<name>=1).
      runs=("racecheck:$small" "memcheck:$small" "racecheck:GpuFused.SanitizerDecodeClustersLargeMerge"
            "racecheck:GpuFused.SanitizerDecodeClustersMerge" "racecheck:GpuFused.SanitizerDecodeClustersPairs")
      # (Pairs runs at H = 32, whose pairs move no registers: at H = 64 racecheck did not finish
      # in 150-420 s, likely the setmaxnreg; a -DFI_STAGED_SETMAXNREG=0 build checks H = 64.)
      for c in EveryPosition GuessAndFallback Segments Fp8 LargeMerge Merge Pairs; do runs+=("memcheck:GpuFused.SanitizerDecodeClusters$c"); done
      runs+=("memcheck:GpuFaults.SanitizerCorruptedMetadata")  # corrupted device metadata: nothing read out of bounds
      # The one-split lockstep finish (prefill's): memcheck on every case, racecheck on all but
      # the four ties cases, where racecheck reports hazards that barrier-instance counting and
      # schedule fuzzing do not bear out (docs/experiments.md, 2026-12-01): run those on their own.
      runs+=("memcheck:GpuFused/LockstepOneSplit.*"
             "racecheck:GpuFused/LockstepOneSplit.Sanitizer/*gaussian*:GpuFused/LockstepOneSplit.Sanitizer/*ascending*")
      # SANITIZE_RUNS_<name>="tool:filter ...": this variant's own list instead (e.g. racecheck
      # of GpuFused.SanitizerDecodeClustersPairsH64 on a -DFI_STAGED_SETMAXNREG=0 build).
      runs_var="SANITIZE_RUNS_$name"
      [ -n "${!runs_var-}" ] && read -r -a runs <<< "${!runs_var}"  # words, not globbed
      san_start=$SECONDS
      for ((i = 0; i < ${#runs[@]}; i++)); do
        tool=${runs[$i]%%:*} tfilter=${runs[$i]#*:}
        timeout "${SANITIZE_TIMEOUT:-300}" compute-sanitizer --tool "$tool" --error-exitcode 9 "$tests" \
          --gtest_filter="$tfilter" > "/tmp/sanitize_${name}_$i.log" 2>&1 & san_pids+=($!)
      done
    fi
    start=$SECONDS pids=()
    for ((i = 0; i < shards; i++)); do
      GTEST_TOTAL_SHARDS=$shards GTEST_SHARD_INDEX=$i timeout "${TEST_TIMEOUT:-400}" "$tests" --gtest_filter="$vfilter" \
        > "/tmp/tests_${name}_$i.log" 2>&1 & pids+=($!)
    done
    for p in "${pids[@]}"; do wait "$p" || rc=1; done
    cat /tmp/tests_"${name}"_*.log > "/tmp/tests_$name.log"
    npass=$(grep -hE '^\[  PASSED  \]' "/tmp/tests_$name.log" | awk '{s += $4} END {print s + 0}')
    nfail=$(grep -cE '^\[  FAILED  \] [A-Za-z]' "/tmp/tests_$name.log")
    echo "$name tests ($vfilter, $shards shards, $((SECONDS - start)) s): $npass passed, $nfail failed" | tee -a "$OUT/prebuilt.txt"
    grep -E '^\[  FAILED  \] [A-Za-z]|Failure' "/tmp/tests_$name.log" | head -20 | tee -a "$OUT/prebuilt.txt"
    # A shard stopped by its timeout prints no summary: name the test it was running.
    for ((i = 0; i < shards; i++)); do
      grep -q '^\[==========\]' "/tmp/tests_${name}_$i.log" && [ "$(grep -c '^\[==========\]' "/tmp/tests_${name}_$i.log")" -ge 2 ] ||
        echo "$name shard $i did not finish; last test started: $(grep '^\[ RUN      \]' "/tmp/tests_${name}_$i.log" | tail -1)" |
        tee -a "$OUT/prebuilt.txt"
    done
    tar -czf "$OUT/tests_$name.tgz" -C /tmp $(cd /tmp && ls tests_"${name}"_*.log)
    for ((i = 0; i < ${#san_pids[@]}; i++)); do
      wait "${san_pids[$i]}"
      status=$?
      [ $status -eq 0 ] || rc=1
      echo "$name compute-sanitizer ${runs[$i]} (exit $status, $((SECONDS - san_start)) s):" \
        "$(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY|PASSED|FAILED' "/tmp/sanitize_${name}_$i.log" | tail -2 | tr '\n' ' ')" |
        tee -a "$OUT/prebuilt.txt"
      # A finding (not a timeout): its first reports, and the whole log under $OUT.
      if [ $status -ne 0 ] && [ $status -ne 124 ]; then
        grep -E '^========= +(Error|Invalid|Misaligned|Program hit|Race|and |at |by )' "/tmp/sanitize_${name}_$i.log" | head -8 | tee -a "$OUT/prebuilt.txt"
        cp "/tmp/sanitize_${name}_$i.log" "$OUT/"
      fi
    done
  fi
  : > "/tmp/bench_$name.jsonl"
  topk_var="TOPK_POINTS_$name"
  for pt in ${!topk_var-$topk_points}; do
    timeout 60 "$cli" bench-topk --json --only "$pt" >> "/tmp/bench_$name.jsonl" 2>> "$OUT/prebuilt.err" ||
      { rc=1; echo "$name bench-topk $pt failed: $(tail -n 1 "$OUT/prebuilt.err")" | tee -a "$OUT/prebuilt.txt"; }
  done
  points_var="POINTS_$name" args_var="BENCH_ARGS_$name"
  for pt in ${!points_var-$points}; do
    # shellcheck disable=SC2086  # BENCH_ARGS: extra words, e.g. --full for the decode sweep's points
    timeout 100 "$cli" bench --json ${!args_var-${BENCH_ARGS:-}} --only "$pt" >> "/tmp/bench_$name.jsonl" 2>> "$OUT/prebuilt.err" ||
      { rc=1; echo "$name bench $pt failed: $(tail -n 1 "$OUT/prebuilt.err")" | tee -a "$OUT/prebuilt.txt"; }
  done
  sed "s/^{/{\"variant\":\"$name\",/" "/tmp/bench_$name.jsonl" >> "$OUT/prebuilt.jsonl"
  cat /tmp/torch.jsonl >> "/tmp/bench_$name.jsonl"
  { echo "== $name ($dir)"; python3 bench/summarize.py "/tmp/bench_$name.jsonl"; } | tee -a "$OUT/prebuilt.txt"
done
exit $rc
