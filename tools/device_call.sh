#!/usr/bin/env bash
# On the GPU machine: one device call that validates a build and times it beside a baseline and
# beside DeepGEMM, with binaries built here (tools/pack_prebuilt.sh, carry ".prebuilt" and
# ".peers"). In order, so that a call cut short by its time limit still returns the first parts:
#   1. DeepGEMM's build (bench/peers/run.sh builds it once) in the background;
#   2. tools/same_outputs.sh BASE FINAL beside the GPU label and the sanitizers on FINAL
#      (tools/device_prebuilt.sh; neither is timed);
#   3. bench/peers/run.sh on FINAL at PEER_POINTS (DeepGEMM logits, + our TopK, ours), same process;
#   4. flashindexer bench at POINTS for every variant, side by side (tools/device_prebuilt.sh).
# Results: $OUT/same.txt, $OUT/label/, $OUT/peers/, $OUT/bench/ (prebuilt.txt, prebuilt.jsonl).
#   usage: [POINTS=v32_prefill_8192_c65536] [PEER_POINTS=$POINTS] [PEER_ACCURACY=production]
#          tools/device_call.sh base=build/base final=build/release [name=build/dir ...]
# (base and final first, in that order; FINAL needs its tests binary and libflashindexer_c.so.)
# The steps are those of the one call in `bench/results/2026-12-07-3_runs_4aabd35_h100.txt`;
# this script, which puts them together, had not run on a device as of 2026-12-07.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
OUT=${OUT:-/tmp/flashindexer_out}
if [ $# -lt 2 ] || [ "${1%%=*}" != base ] || [ "${2%%=*}" != final ]; then
  echo "usage: $0 base=DIR final=DIR [name=DIR ...]" >&2
  exit 2
fi
base=${1#*=} final=${2#*=}
points=${POINTS-v32_prefill_8192_c65536}
peer_points=${PEER_POINTS-$points}
mkdir -p "$OUT/label" "$OUT/bench" "$OUT/peers"
t0=$SECONDS
for pack in .prebuilt/*.tar.xz; do [ -f "$pack" ] && tar -xJf "$pack"; done
rc=0
dg=""
if [ -n "$peer_points" ] && [ -d .peers ]; then
  (bash .peers/build_deepgemm.sh /tmp/dg > "$OUT/peers/peers_build.log" 2>&1) & dg=$!
fi
(tools/same_outputs.sh "$base/flashindexer" "$final/flashindexer" > "$OUT/same.txt" 2>&1) & same=$!
OUT=$OUT/label TESTS='Gpu*' SANITIZE=1 TOPK_POINTS="" POINTS="" tools/device_prebuilt.sh "final=$final" > /dev/null 2>&1 || rc=1
wait "$same" || rc=1
echo "label and same_outputs done at $((SECONDS - t0)) s"
tail -n 1 "$OUT/same.txt"
cat "$OUT/label/prebuilt.txt"
if [ -n "$dg" ]; then
  wait "$dg" || { rc=1; tail -5 "$OUT/peers/peers_build.log"; }
  for pt in $peer_points; do
    OUT=$OUT/peers/$pt bash bench/peers/run.sh "$final" --points "$pt" --accuracy "${PEER_ACCURACY:-production}" \
      --quality-rows 8 2>&1 | tail -n 4 || rc=1
  done
  echo "peers done at $((SECONDS - t0)) s"
fi
if [ -n "$points" ]; then
  OUT=$OUT/bench TESTS=none SANITIZE=0 TOPK_POINTS="" POINTS="$points" tools/device_prebuilt.sh "$@" > /dev/null 2>&1 || rc=1
  cat "$OUT/bench/prebuilt.txt"
fi
echo "done at $((SECONDS - t0)) s, rc $rc"
exit $rc
