#!/usr/bin/env bash
# On the GPU machine, after tools/device.sh built build/device: Nsight Compute on the
# first TopK kernels of one bench point (the grid-wide select's too: grid_*).
#   usage: [BIN=build/x/flashindexer] tools/profile_topk.sh POINT [COUNT]
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/flashindexer_out}
point=${1:-prefill_196k}
count=${2:-1}
bin=${BIN:-build/device/flashindexer}
ncu --clock-control none --kernel-name "regex:topk|grid_" --launch-count "$count" \
  --section SpeedOfLight --section WarpStateStats --section SchedulerStats --section Occupancy \
  --section MemoryWorkloadAnalysis --section LaunchStats \
  "$bin" bench-topk --only "$point" --iters 1 > "$OUT/ncu_$point.txt" 2>&1
grep -E "topk_|grid_|Duration|Memory Throughput|DRAM Throughput|Compute \(SM\)|Achieved Occupancy|Theoretical Occupancy|Stall|Issued Warp|No Eligible|Registers Per|Block Limit|Warp Cycles Per Issued" "$OUT/ncu_$point.txt" | head -60
