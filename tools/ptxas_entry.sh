#!/usr/bin/env bash
# Without a GPU, in seconds: the ptxas report (registers, spills, and the C75xx notes that say
# why WGMMAs were serialised) of the kernels of one source file whose mangled name matches
# REGEX. nvcc makes the PTX once (~20 s), then ptxas compiles only the matching entries
# (`--entry`, ~2 s each) instead of every instantiation (minutes).
#   usage: tools/ptxas_entry.sh SOURCE REGEX [nvcc flags...]
#   e.g.   tools/ptxas_entry.sh src/cuda/sm90/kernels/dense_logits.cu 'CacheFormatE1ELi64ELi4ELNS_13ScoreAccuracyE0E' -DFI_SCORER_S8_HALVES=0
set -euo pipefail
cd "$(dirname "$0")/.."
src=$1 re=$2
shift 2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
nvcc -std=c++20 -DFLASHINDEXER_WITH_CUDA=1 -Iinclude -Isrc -O3 -DNDEBUG --expt-relaxed-constexpr \
  --generate-code=arch=compute_90a,code=compute_90a -ptx "$src" -o "$tmp/k.ptx" "$@"
entries=$(grep -o '\.entry [^(]*' "$tmp/k.ptx" | awk '{print $2}' | grep -E "$re" || true)
[ -n "$entries" ] || { echo "no entry matches $re"; exit 1; }
for e in $entries; do
  echo "== $e"
  ptxas -arch=sm_90a -O3 -v --entry "$e" "$tmp/k.ptx" -o "$tmp/k.cubin" 2>&1 |
    grep -E 'C75|spill|Used' | sed 's/ in \(the \)\?function .*//'
done
