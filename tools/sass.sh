#!/usr/bin/env bash
# SASS of one kernel family without a GPU: compiles SOURCE for sm_90a to a cubin and dumps
# the functions whose name matches REGEX, then an opcode histogram and the memory and
# barrier instructions in order (are the loads batched? which fences?). cuobjdump comes
# from the CUDA toolkit when present, else from the Triton wheel (pip download, ~290 MB,
# cached in ~/.cache/flashindexer).
#   usage: tools/sass.sh SOURCE REGEX   e.g. tools/sass.sh src/cuda/sm90/kernels/topk_over_logits.cu grid_count
set -euo pipefail
cd "$(dirname "$0")/.."
src=$1 regex=$2
cache=${XDG_CACHE_HOME:-$HOME/.cache}/flashindexer
if ! command -v cuobjdump >/dev/null; then
  bin=$cache/triton/backends/nvidia/bin
  if [ ! -x "$bin/cuobjdump" ]; then
    mkdir -p "$cache"
    python3 -m pip download --no-deps -q triton -d "$cache/wheel"
    unzip -o -q "$cache"/wheel/triton-*.whl 'triton/backends/nvidia/bin/*' -d "$cache"
    chmod +x "$bin"/*
  fi
  export PATH=$bin:$PATH
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
nvcc -std=c++20 -gencode=arch=compute_90a,code=sm_90a -Iinclude -Isrc -O3 --expt-relaxed-constexpr \
  -cubin "$src" -o "$tmp/k.cubin"
cuobjdump -sass "$tmp/k.cubin" | awk -v re="$regex" '/Function :/{f = ($0 ~ re)} f' > "$tmp/k.sass"
grep "Function :" "$tmp/k.sass" || { echo "no function matches $regex"; exit 1; }
ops() { grep -oE '^\s+/\*[0-9a-f]{4,5}\*/\s+(@!?U?P[0-9T] )?[A-Z][A-Z0-9._]*' "$1" | awk '{print $NF}'; }
echo "== instructions: $(ops "$tmp/k.sass" | wc -l); most frequent opcodes"
ops "$tmp/k.sass" | sed 's/\..*//' | sort | uniq -c | sort -rn | head -15
echo "== memory, atomics, barriers and fences, in order"
grep -E 'LDG|STG|LD\.|ST\.|ATOM|RED|BAR|MEMBAR|LDL|STL' "$tmp/k.sass" | awk '{$1=$1; print}' | cut -c1-90
