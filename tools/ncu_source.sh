#!/usr/bin/env bash
# On the GPU machine: where one kernel's warps stall, per SASS instruction. Nsight Compute
# samples the warps of the first kernel matching KERNEL (a regex) in one bench point
# (SourceCounters: stall reasons per instruction) and exports its source page as CSV to
# $OUT/ncu_source_<NAME>.csv (read it with tools/ncu_source_top.py on the development machine).
# BASE=mangled matches KERNEL against mangled names (template arguments).
#   usage: [BIN=build/x/flashindexer] [SUB=bench] [NAME=point] [BASE=function|mangled] tools/ncu_source.sh KERNEL POINT [bench args...]
set -uo pipefail
cd "$(dirname "$0")/.."
kernel=$1 point=$2
shift 2
bin=${BIN:-build/release/flashindexer}
sub=${SUB:-bench}
name=${NAME:-$point}
out=${OUT:-/tmp/flashindexer_out}
mkdir -p "$out"
rep=/tmp/ncu_source_$name
ncu --clock-control none --kernel-name-base "${BASE:-function}" --kernel-name "regex:$kernel" --launch-count 1 --section SourceCounters \
  --section WarpStateStats --import-source no -f -o "$rep" "$bin" "$sub" --only "$point" --iters 1 "$@" \
  > "$out/ncu_source_$name.log" 2>&1
ncu --import "$rep.ncu-rep" --page source --csv --print-source sass > "$out/ncu_source_$name.csv" \
  2>> "$out/ncu_source_$name.log"
echo "ncu_source $name: $(wc -l < "$out/ncu_source_$name.csv") lines, $(tail -n 1 "$out/ncu_source_$name.log")"
