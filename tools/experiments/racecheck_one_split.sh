#!/usr/bin/env bash
# Session 23's device call on the one-split lockstep finish (docs/perf.md): racecheck on each
# GpuFused/LockstepOneSplit case in its own process, synccheck and memcheck on all of them, the
# GPU label, a -DFI_CHECK_BARRIER_PHASES=1 build (variant "phases") that counts consumer warps
# meeting at different barrier-1 instances (its lockstep tests, 20 repeats, and racecheck on two
# cases), and three bench points against base469 (the previous release binary).
#   tools/pack_prebuilt.sh build/release build/variant_phases build/base469; device run with
#   carry [".prebuilt"]: tools/experiments/racecheck_one_split.sh
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 1
OUT=${OUT:-/tmp/flashindexer_out}
small='GpuTopK.SanitizerSmallCases:GpuScorer.SanitizerSmallCases:GpuFused.SanitizerSmallCases'
all='GpuFused/LockstepOneSplit.*'
runs="synccheck:$all memcheck:$all racecheck:$small memcheck:$small"
for f in mxfp4 fp8; do
  for c in ties_k512 gaussian_k2048 ascending_k1024; do
    for o in position rank; do runs+=" racecheck:GpuFused/LockstepOneSplit.Sanitizer/${f}_${c}_$o"; done
  done
done
export SANITIZE_RUNS_release=$runs
export SANITIZE_RUNS_phases="racecheck:GpuFused/LockstepOneSplit.Sanitizer/mxfp4_ties_k512_position racecheck:GpuFused/LockstepOneSplit.Sanitizer/fp8_gaussian_k2048_position"
export SANITIZE_base469=0 TESTS_base469=none
export TESTS_release='Gpu*'
export TESTS_phases="$all:GpuFused.DecodeRowsSplitAndMerged:GpuFused.SampledGuessHoldsOrIsRepaired:GpuFused.SampledStartWithThirtyTwoHeads"
export SANITIZE_TIMEOUT=${SANITIZE_TIMEOUT:-400} TOPK_POINTS="" POINTS_phases=""
export POINTS=${POINTS:-"v32_prefill_8192_c65536 v4-flash_prefill_8192_c65536 v32_decode_b128_n2_c262144"}
export BENCH_ARGS=--full
tools/device_prebuilt.sh release=build/release phases=build/variant_phases base469=build/base469
rc=$?
GTEST_REPEAT=20 build/variant_phases/tests/flashindexer_tests --gtest_filter="$all" > /tmp/phases_repeat.log 2>&1 || rc=1
echo "phases, $all x 20: $(grep -c '^\[       OK \]' /tmp/phases_repeat.log) OK, $(grep -c '^\[  FAILED  \] [A-Za-z]' /tmp/phases_repeat.log) failed; $(grep -m3 'barrier-1' /tmp/phases_repeat.log | tr '\n' ' ')" | tee -a "$OUT/prebuilt.txt"
# Every sanitizer log, in one archive (the device tool returns at most 8 files).
(cd /tmp && tar -czf "$OUT/sanitize_logs.tgz" sanitize_*.log phases_repeat.log) && rm -f "$OUT"/sanitize_*.log
exit $rc
