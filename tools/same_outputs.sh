#!/usr/bin/env bash
# On the GPU machine: do two builds give the same bits? Runs each CLI on the same synthetic
# problems (every preset, both accuracy modes, prefill and decode, three generators) with
# `run --verify full --out F --logits` (the fused results and the dense logits, safetensors;
# each run also checks fused == dense + TopK on every row) and compares
# the files byte for byte. For changes meant to keep every score: a refactor, or an epilogue
# rewritten in exact arithmetic. Prints one line per problem that differs and a summary line;
# exits 1 if any differs or fails.
#   usage: [GENERATORS="gaussian wide_range specials"] tools/same_outputs.sh CLI_A CLI_B
set -uo pipefail
[ $# -eq 2 ] || { echo "usage: $0 CLI_A CLI_B" >&2; exit 2; }
a=$1 b=$2
dir=$(mktemp -d)
same=0 differ=0 failed=0
for preset in v32 glm5 v4-flash v4-pro; do
  for acc in production exact; do
    for shape in "--rows 64 --context 8192" "--batch 4 --next-n 2 --context 8192"; do
      for gen in ${GENERATORS:-gaussian wide_range specials}; do
        read -r -a shape_args <<< "$shape"
        args=(run --preset "$preset" --accuracy "$acc" "${shape_args[@]}" --generator "$gen" --verify full --logits)
        name="$preset $acc ${shape// /_} $gen"
        if ! "$a" "${args[@]}" --out "$dir/a.st" > /dev/null 2>&1 || ! "$b" "${args[@]}" --out "$dir/b.st" > /dev/null 2>&1; then
          echo "failed: $name"
          failed=$((failed + 1))
        elif cmp -s "$dir/a.st" "$dir/b.st"; then
          same=$((same + 1))
        else
          echo "differs: $name"
          differ=$((differ + 1))
        fi
      done
    done
  done
done
rm -rf "$dir"
echo "same_outputs: $same same, $differ differ, $failed failed"
[ $differ -eq 0 ] && [ $failed -eq 0 ]
