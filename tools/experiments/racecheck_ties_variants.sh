#!/usr/bin/env bash
# racecheck of the four GpuFused/LockstepOneSplit ties cases (the only cases with reports at
# 469ead3, docs/perf.md session 23) on knob builds of one tree, build/variant_<name> for each
# name in VARIANTS, each case in its own process. Session 23 ran VARIANTS="phases red pwait":
#   phases = -DFI_CHECK_BARRIER_PHASES=1 (barrier 1 as bar.red.popc x 2 + bar.red.or, with
#            per-warp instance counters): no reports;
#   red, pwait = barrier 1 as one bar.red.or; the producer warpgroup kept to a final CTA
#            barrier (two knobs of that session's tree, removed after): reports as before.
#   tools/pack_prebuilt.sh build/variant_phases ...; device run with carry [".prebuilt"]:
#   VARIANTS="phases" tools/experiments/racecheck_ties_variants.sh
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 1
OUT=${OUT:-/tmp/flashindexer_out}
for pack in .prebuilt/*.tar.xz; do tar -xJf "$pack"; done
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
pids=() names=()
for v in ${VARIANTS:-phases}; do
  for c in mxfp4_ties_k512_position mxfp4_ties_k512_rank fp8_ties_k512_position fp8_ties_k512_rank; do
    timeout "${SANITIZE_TIMEOUT:-400}" compute-sanitizer --tool racecheck --error-exitcode 9 \
      "build/variant_$v/tests/flashindexer_tests" --gtest_filter="GpuFused/LockstepOneSplit.Sanitizer/$c" \
      > "/tmp/rc_${v}_$c.log" 2>&1 & pids+=($!) names+=("$v $c")
  done
done
for ((i = 0; i < ${#pids[@]}; i++)); do
  wait "${pids[$i]}"
  echo "${names[$i]} (exit $?): $(grep -hE 'RACECHECK SUMMARY|PASSED|FAILED' "/tmp/rc_${names[$i]// /_}.log" | tr '\n' ' ')" | tee -a "$OUT/ties_variants.txt"
done
(cd /tmp && tar -czf "$OUT/rc_ties_logs.tgz" rc_*.log)
