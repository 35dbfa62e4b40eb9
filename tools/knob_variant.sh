#!/usr/bin/env bash
# Builds a knob variant of the release build here, for tools/device_prebuilt.sh: one or more
# sources recompiled with extra flags (e.g. -DFI_FUSED_PROFILE=1) and relinked into copies of
# the release CLI, C ABI and tests, in build/v_NAME. One source's compile (~4 min for fused_topk.cu
# on two cores) instead of a whole build tree; run several side by side.
#   usage: [REL=build/release] [TREE=DIR] tools/knob_variant.sh NAME "FLAGS" ["SOURCE ..." (default src/cuda/sm90/kernels/fused_topk.cu)]
#   then:  tools/pack_prebuilt.sh build/release build/v_NAME ...
#   REL: the build to vary (a copy of an older build, say); TREE: compile the sources (and their
#   headers) of another checkout, e.g. a `git worktree` of the commit REL was built from.
set -euo pipefail
cd "$(dirname "$0")/.."
[ $# -ge 2 ] || { echo "usage: $0 NAME \"FLAGS\" [\"SOURCE ...\"]" >&2; exit 2; }
name=$1 flags=$2 sources=${3:-src/cuda/sm90/kernels/fused_topk.cu}
rel=${REL:-build/release} out=$PWD/build/v_$name tree=${TREE:-}
[ -f "$rel/libflashindexer.a" ] || { echo "$rel is not built" >&2; exit 1; }
mkdir -p "$out/tests"
objs=()
for src in $sources; do
  obj=$(basename "$src").o
  compile=$(ninja -C "$rel" -t commands flashindexer | grep -E -- "-c $PWD/$src( |$)" | head -1)
  [ -n "$compile" ] || { echo "no compile command for $src in $rel" >&2; exit 1; }
  # Drop the dependency-file flags and write the object into the variant's folder.
  compile=$(sed -E "s# -MD -MT [^ ]+ -MF [^ ]+##; s# -o [^ ]+\.o# -o $out/$obj#" <<< "$compile")
  [ -n "$tree" ] && compile=$(sed -E "s#$PWD/(src|include)#$tree/\1#g" <<< "$compile")
  (cd "$rel" && eval "$compile $flags")
  objs+=("$out/$obj")
done
cp "$rel/libflashindexer.a" "$out/libflashindexer.a"
ar r "$out/libflashindexer.a" "${objs[@]}" 2>/dev/null
link() {  # target, output path relative to the release dir
  local cmd
  cmd=$(ninja -C "$rel" -t commands "$1" | tail -1)
  cmd=$(sed -E "s# libflashindexer\.a # $out/libflashindexer.a #; s# -o $2 # -o $out/$2 #; s#-rpath,[^ ]*#-rpath,$out#" <<< "$cmd")
  (cd "$rel" && eval "$cmd")
}
link flashindexer_c libflashindexer_c.so  # the C ABI: the variant's tests and bench/peers load it
link flashindexer_cli flashindexer
link flashindexer_tests tests/flashindexer_tests
echo "built $out ($sources with $flags)"
