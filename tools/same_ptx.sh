#!/usr/bin/env bash
# Checks that a CUDA source compiles to the same PTX at REV and in the working tree: the
# same instructions in the same order, with anonymous-namespace hashes, virtual register
# numbers and branch labels normalized. A refactor or a default-off knob that claims to
# leave the tested kernels unchanged can prove it here, without a GPU.
#   usage: tools/same_ptx.sh REV [SOURCE]   (default SOURCE: src/cuda/sm90/dense_logits.cu)
set -euo pipefail
cd "$(dirname "$0")/.."
rev=$1 src=${2:-src/cuda/sm90/dense_logits.cu}
tmp=$(mktemp -d)
trap 'git worktree remove --force "$tmp/old" >/dev/null 2>&1 || true; rm -rf "$tmp"' EXIT
git worktree add -q "$tmp/old" "$rev"
flags=(-std=c++20 -gencode=arch=compute_90a,code=sm_90a -Iinclude -Isrc -O3 --expt-relaxed-constexpr -ptx)
(cd "$tmp/old" && nvcc "${flags[@]}" "$src" -o "$tmp/old.ptx")
nvcc "${flags[@]}" "$src" -o "$tmp/new.ptx"
strict() { sed -E 's/_GLOBAL__N__[0-9a-f]+_/_GLOBAL__N__/g; s/_INTERNAL_[0-9a-f]+_[0-9]+_([a-z_]+)_[0-9a-f]+/_INTERNAL_\1/g' "$1" | grep -v '^//'; }
norm() { strict "$1" | sed -E 's/%(r|rd|rs|p|f|fd)[0-9]+/%\1/g; s/\$L__BB[0-9_]+/L/g'; }
if diff -q <(strict "$tmp/old.ptx") <(strict "$tmp/new.ptx") >/dev/null; then
  echo "same PTX: $src at $rev and in the working tree"
elif diff -q <(norm "$tmp/old.ptx") <(norm "$tmp/new.ptx") >/dev/null; then
  echo "same PTX instruction sequence (virtual registers / labels renumbered): $src at $rev and in the working tree"
else
  echo "PTX differs: $src at $rev vs the working tree ($(diff <(norm "$tmp/old.ptx") <(norm "$tmp/new.ptx") | grep -c '^[<>]') lines)"
  exit 1
fi
