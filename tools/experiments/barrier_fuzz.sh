#!/usr/bin/env bash
# Session 23: schedule fuzzing of the lockstep kernel's barriers (-DFI_BARRIER_FUZZ=1: every
# consumer warp sleeps 0-2 us, pseudo-random, before and after each barrier-1 and warpgroup
# barrier arrival). The lockstep tests, REPEAT times, must stay bit-identical to dense + TopK.
#   tools/pack_prebuilt.sh build/variant_fuzz; device run with carry [".prebuilt"]:
#   REPEAT=10 tools/experiments/barrier_fuzz.sh
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 1
OUT=${OUT:-/tmp/flashindexer_out}
for pack in .prebuilt/*.tar.xz; do tar -xJf "$pack"; done
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
filter='GpuFused/LockstepOneSplit.*:GpuFused.DecodeRowsSplitAndMerged:GpuFused.Sampled*:GpuFused.MatchesDenseThenTopKOnEveryGenerator:GpuFused.KOrdersAndShapes'
start=$SECONDS
GTEST_REPEAT=${REPEAT:-10} timeout 500 build/variant_fuzz/tests/flashindexer_tests --gtest_filter="$filter" > /tmp/fuzz.log 2>&1
rc=$?
echo "fuzz ($filter) x ${REPEAT:-10}, exit $rc, $((SECONDS - start)) s: $(grep -c '^\[       OK \]' /tmp/fuzz.log) OK, $(grep -c '^\[  FAILED  \] [A-Za-z]' /tmp/fuzz.log) failed" | tee "$OUT/fuzz.txt"
grep -E '^\[  FAILED  \] [A-Za-z]|Failure' /tmp/fuzz.log | head -10 | tee -a "$OUT/fuzz.txt"
exit $rc
