#!/usr/bin/env bash
# On the GPU machine, after tools/device.sh built build/device: Nsight Compute on the first
# kernel matching KERNEL (a regex: fused_topk, dense_logits, ...) of one bench point, with
# warp-state sampling per SASS instruction. Writes $OUT/ncu_<kernel>_<point>.txt: the sections,
# then the SASS instructions with the most stall samples, then every instruction in address
# order with its share of stall samples and of executed instructions.
#   usage: [BIN=build/x/flashindexer] [TAG=name] [SUB=bench-topk] [ARGS=--full] tools/profile_kernel.sh [KERNEL] [POINT]
#   (default fused_topk v4-flash_prefill_8192_c65536, the binary of build/device)
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/flashindexer_out}
kernel=${1:-fused_topk}
point=${2:-v4-flash_prefill_8192_c65536}
bin=${BIN:-build/device/flashindexer}
sub=${SUB:-bench}  # the CLI subcommand that runs POINT
read -ra args <<< "${ARGS:-}"  # its extra options (--full: the points of the sweeps)
name=${kernel//[^A-Za-z0-9_]/}_$point${TAG:+_$TAG}
rep=/tmp/ncu_$name
ncu --clock-control none --kernel-name "regex:$kernel" --launch-count 1 \
  --section SpeedOfLight --section ComputeWorkloadAnalysis --section MemoryWorkloadAnalysis \
  --section MemoryWorkloadAnalysis_Tables --section Occupancy --section WarpStateStats --section SchedulerStats \
  --section SourceCounters \
  --export "$rep" --force-overwrite \
  "$bin" "$sub" "${args[@]}" --only "$point" --iters 1 > "$OUT/ncu_$name.txt" 2>&1
ncu --import "$rep.ncu-rep" --page details >> "$OUT/ncu_$name.txt" 2>&1
# Pipe use of the same launch (a second, metrics-only pass; a metric this ncu lacks only
# costs this block).
ncu --clock-control none --kernel-name "regex:$kernel" --launch-count 1 --metrics \
  sm__pipe_tensor_op_gmma_cycles_active.avg.pct_of_peak_sustained_active,sm__inst_executed_pipe_lsu.avg.pct_of_peak_sustained_active,l1tex__data_pipe_lsu_wavefronts_mem_shared.avg.pct_of_peak_sustained_elapsed,smsp__issue_active.avg.pct_of_peak_sustained_active,sm__cycles_elapsed.avg.per_second \
  "$bin" "$sub" "${args[@]}" --only "$point" --iters 1 2>&1 | grep -E "^\s+(sm|smsp|l1tex)__" >> "$OUT/ncu_$name.txt"
# The tensor-pipe metric above read "n/a" on the H200 (2026-11-29): list what this ncu has.
{ echo "== ncu --query-metrics: tensor / gmma"; ncu --query-metrics 2>/dev/null | grep -iE "gmma|tensor_op" | head -40; } \
  >> "$OUT/ncu_$name.txt"
ncu --import "$rep.ncu-rep" --page source --csv --print-source sass > "$rep.csv" 2>/dev/null
python3 - "$rep.csv" > "$rep.sass.txt" <<'PY'
import csv, sys
rows = list(csv.reader(open(sys.argv[1])))
hdr_i = next(i for i, r in enumerate(rows) if any("Source" == c for c in r))
hdr, data = rows[hdr_i], rows[hdr_i + 1:]
col = {c: i for i, c in enumerate(hdr)}
samp = next(c for c in hdr if c.startswith("Warp Stall Sampling (All"))
execd = col.get("Instructions Executed")
def num(x):
    try: return float(x.replace(",", ""))
    except ValueError: return 0.0
data = [r for r in data if len(r) == len(hdr)]
total = sum(num(r[col[samp]]) for r in data)
total_exec = sum(num(r[execd]) for r in data) if execd is not None else 0
print("total samples", total, "warp instructions executed", total_exec)
def line(r):
    e = f"{num(r[execd]) / max(total_exec, 1) * 100:6.2f}%" if execd is not None else ""
    return f"{num(r[col[samp]]) / max(total, 1) * 100:6.2f}% stall  {e} exec  {r[col['Address']]}  {r[col['Source']]}"
print("== the 60 instructions with the most stall samples")
for r in sorted(data, key=lambda r: -num(r[col[samp]]))[:60]:
    print(line(r))
print("== stall samples and executed instructions per 4 KiB of SASS (regions above 0.4%)")
base = int(data[0][col['Address']], 16) if data else 0
regions = {}
for r in data:
    reg = regions.setdefault((int(r[col['Address']], 16) - base) // 4096, [0.0, 0.0, r[col['Source']]])
    reg[0] += num(r[col[samp]])
    reg[1] += num(r[execd]) if execd is not None else 0.0
for b, (s, e, first) in regions.items():
    s, e = s / max(total, 1) * 100, e / max(total_exec, 1) * 100
    if s > 0.4 or e > 0.4:
        print(f"+{b * 4096:6x} {s:6.2f}% stall {e:6.2f}% exec  first: {first[:60]}")
print("== every instruction, in address order (stall samples, share of executed instructions)")
for r in data:
    print(line(r))
PY
cat "$rep.sass.txt" >> "$OUT/ncu_$name.txt"  # one file: $OUT returns at most 8
grep -E "Duration|Compute \(SM\)|Issue Slots Busy|Warp Cycles Per Issued|No Eligible|Stall" "$OUT/ncu_$name.txt" | head -30
head -45 "$rep.sass.txt" | cut -c1-160
