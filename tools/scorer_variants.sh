#!/usr/bin/env bash
# Runs on the GPU machine (the device tool): builds the scorer once per experiment-knob
# variant (docs/perf.md, "Leads"), checks each quickly against the oracle and times
# `flashindexer bench` for each. Everything that comes back is under $OUT:
# variants.txt (summary) and variants.jsonl (bench lines tagged with "variant").
#   usage: [POINTS="bench points"] [TOPK_POINTS="bench-topk points"] [TESTS=gtest-filter|none]
#          tools/scorer_variants.sh ["name[@PATCH]=NVCC FLAGS" ...]
#   (default: the perf.md leads of the scorer; the fused operator's knobs work the same way)
#   name@tools/experiments/x.patch=FLAGS builds a copy of the tree with that patch applied:
#   experiments too large for a knob stay out of the sources (tools/experiments/README.md).
# Needs .deps/ carried (tools/device_deps.sh). About 2 minutes for three variants (builds in
# parallel), 4 for five; the quick tests include 20 reruns, and a hang ends at its timeout.
# Variants that could change the sums (halves) get the full oracle suite and need the whole
# GPU label before they become the default.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/flashindexer_out}
LOGS=/tmp/scorer_variants
mkdir -p "$OUT" "$LOGS"
variants=("$@")
if [ ${#variants[@]} -eq 0 ]; then
  # The build as it is and the fused operator's phase profile (docs/design.md); ping-pong,
  # rounds, sleeps (d3fc81d) and halves (d26865b) were measured and removed.
  variants=("base="
            "profile=-DFI_FUSED_PROFILE=1")
fi
# Bench points per variant (each prints both accuracy modes); the worst prefill and decode.
points=${POINTS-"v32_prefill_8192_c65536 v4-pro_decode_b64_n1_c65536"}
# TOPK_POINTS: bench-topk points per variant too (e.g. "decode_b1_256k decode_b64_64k").
topk_points=${TOPK_POINTS:-}
# TESTS=none: timing only (no test binary built or run; for knobs that give wrong scores).
targets=flashindexer_tests
[ "${TESTS:-}" = none ] && targets=
jobs=$(( $(nproc) / ${#variants[@]} ))
[ "$jobs" -lt 2 ] && jobs=2
# Variant v -> name, flags, the build folder and the source tree (a patched copy for name@PATCH).
spec_of() {
  spec=${1%%=*} flags=${1#*=}; name=${spec%%@*} dir=build/variant_${spec%%@*} src=.
  if [ "$spec" != "$name" ]; then src=$LOGS/src_$name; fi
}
for v in "${variants[@]}"; do  # patched copies first, then the builds in parallel
  spec_of "$v"
  if [ "$src" != . ]; then
    rm -rf "$src" && mkdir -p "$src" && cp -r CMakeLists.txt include src tests bench tools "$src"/ &&
      patch -s -d "$src" -p1 < "${spec#*@}" || { echo "$name: patch ${spec#*@} failed"; exit 1; }
  fi
done
for v in "${variants[@]}"; do
  spec_of "$v"
  ( cmake -S "$src" -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=Release -DFLASHINDEXER_CUDA=ON -DCMAKE_CUDA_FLAGS="$flags" \
      -DCMAKE_PREFIX_PATH="$PWD/.deps/usr" -DFLASHINDEXER_GTEST_SOURCE="$PWD/.deps/usr/src/googletest" \
      > "$LOGS/configure_$name.log" 2>&1 &&
    cmake --build "$dir" -j "$jobs" --target flashindexer_cli $targets > "$LOGS/build_$name.log" 2>&1
  ) || echo "$name: build failed: $(grep -m3 error "$LOGS/build_$name.log")" &
done
wait
: > "$OUT/variants.jsonl"
for v in "${variants[@]}"; do
  spec_of "$v"
  [ -x "$dir/flashindexer" ] || continue
  filter=${TESTS:-'GpuScorer.SanitizerSmallCases:GpuScorer.ConstantCaseIsExact:GpuScorer.TwentyRerunsBitIdentical:GpuScorer.FailingRowsFailClosed'}
  # A variant that changes the arithmetic gets the oracle on every generator (structured fp8
  # rows are the stress case); its worst |err| / M lines are kept in the summary. Ping-pong
  # and sleeps change no bits.
  case $name in *halves) filter="$filter:GpuScorer.MatchesOracleOnEveryGenerator" ;; esac
  if [ -z "$targets" ]; then
    tests=skipped; : > "$LOGS/tests_$name.log"
  else
    timeout 200 "$dir/tests/flashindexer_tests" --gtest_filter="$filter" > "$LOGS/tests_$name.log" 2>&1 \
      && tests=passed || tests=FAILED
  fi
  : > "$LOGS/bench_$name.jsonl"
  for pt in $points; do
    timeout 100 "$dir/flashindexer" bench --json --only "$pt" >> "$LOGS/bench_$name.jsonl" 2>> "$LOGS/bench_$name.err"
  done
  for pt in $topk_points; do
    timeout 100 "$dir/flashindexer" bench-topk --json --only "$pt" >> "$LOGS/bench_$name.jsonl" 2>> "$LOGS/bench_$name.err"
  done
  sed "s/^{/{\"variant\":\"$name\",\"variant_flags\":\"$flags\",\"variant_tests\":\"$tests\",/" "$LOGS/bench_$name.jsonl" \
    >> "$OUT/variants.jsonl"
  { echo "== $name [$flags]: quick GPU tests $tests"; grep -E "worst|Failure|bad cells" "$LOGS/tests_$name.log" | head -12
    python3 bench/summarize.py "$LOGS/bench_$name.jsonl"; } | tee -a "$OUT/variants.txt"
done
