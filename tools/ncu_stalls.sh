#!/usr/bin/env bash
# On the GPU machine: why the warps of one kernel wait. Nsight Compute on the first kernel
# matching KERNEL (a regex) of one bench point: the average stall reasons per issued
# instruction, the issue rate, each pipe's share of its peak and the shared-memory pipe's load,
# sorted, to stdout. BASE=mangled matches KERNEL against mangled names (template arguments).
#   usage: [BIN=build/x/flashindexer] [SUB=bench-topk] [BASE=function|mangled] tools/ncu_stalls.sh KERNEL POINT
set -uo pipefail
cd "$(dirname "$0")/.."
kernel=$1 point=$2
bin=${BIN:-build/release/flashindexer}
sub=${SUB:-bench-topk}
ncu --clock-control none --kernel-name-base "${BASE:-function}" --kernel-name "regex:$kernel" --launch-count 1 --metrics \
  "regex:smsp__average_warps_issue_stalled_.*_per_issue_active\.ratio,regex:sm__inst_executed_pipe_[a-z_]+\.avg\.pct_of_peak_sustained_active,regex:sm__pipe_[a-z_]+_cycles_active\.avg\.pct_of_peak_sustained_active,regex:l1tex__data_(bank_reads|bank_writes|pipe_lsu_wavefronts_mem_shared)\.avg\.pct_of_peak_sustained_elapsed,smsp__issue_active.avg.pct_of_peak_sustained_active,smsp__inst_executed.sum,sm__warps_active.avg.per_cycle_active,gpu__time_duration.sum" \
  "$bin" "$sub" --only "$point" --iters 1 2>&1 |
  awk '/^ +(smsp|sm|gpu|l1tex)__/ {v = $NF; gsub(",", "", v); print v, $1}' | sort -k1 -g -r |
  awk '$1 > 0.01' | sed 's/smsp__average_warps_issue_stalled_//; s/_per_issue_active.ratio/ (stall, warps per issue)/'
