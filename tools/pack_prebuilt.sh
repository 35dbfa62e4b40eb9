#!/usr/bin/env bash
# Packs binaries built here for tools/device_prebuilt.sh: the CLI and, where built, the tests
# binary of each build dir, into .prebuilt/bins.tar.xz (ignored by git). One xz stream with a
# 64 MiB dictionary (-9, one thread) stores what the builds share once: two full builds and
# two knob-variant CLIs pack to 25 MB (xz -6: 62 MB), under the device call's 64 MiB limit.
# Carry ".prebuilt"; device_prebuilt.sh unpacks it before it runs.
#   usage: [CLI_ONLY=1] tools/pack_prebuilt.sh build/release build/variant_x ...
#   (CLI_ONLY=1: leaves the tests binaries out, for timing-only calls)
set -euo pipefail
cd "$(dirname "$0")/.."
[ $# -gt 0 ] || { echo "usage: $0 build/dir ..." >&2; exit 2; }
files=()
for dir in "$@"; do
  [ -x "$dir/flashindexer" ] || { echo "$dir/flashindexer is not built" >&2; exit 1; }
  files+=("$dir/flashindexer")
  [ "${CLI_ONLY:-0}" != 1 ] && [ -x "$dir/tests/flashindexer_tests" ] && files+=("$dir/tests/flashindexer_tests")
  [ -f "$dir/libflashindexer_c.so" ] && files+=("$dir/libflashindexer_c.so")  # the C ABI (bench/peers)
done
mkdir -p .prebuilt
tar -cf - "${files[@]}" | xz -T1 -9 > .prebuilt/bins.tar.xz
ls -l .prebuilt/bins.tar.xz
printf '%s\n' "${files[@]}"
