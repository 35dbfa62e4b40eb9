#!/usr/bin/env bash
# Checks that a CUDA source compiles to the same PTX at REV and in the working tree, kernel by
# kernel (order-independent): the same instructions in the same order, with anonymous-
# namespace hashes, virtual register numbers (and their declared counts) and branch labels
# normalized. A refactor or a default-off knob that claims to leave the tested kernels
# unchanged can prove it here, without a GPU. Prints one line per kernel (same / DIFF /
# only at REV / only in the tree); exits 1 unless every kernel is the same.
#   usage: [RENAME=sed-expression] tools/same_ptx.sh REV [SOURCE]
#   (default SOURCE: src/cuda/sm90/kernels/dense_logits.cu; RENAME maps a renamed kernel on both
#   sides, e.g. RENAME='s/topk_rows_kernelILi512EEEv/topk_rows_kernelE/g')
set -euo pipefail
cd "$(dirname "$0")/.."
rev=$1 src=${2:-src/cuda/sm90/kernels/dense_logits.cu}
tmp=$(mktemp -d)
trap 'git worktree remove --force "$tmp/old" >/dev/null 2>&1 || true; rm -rf "$tmp"' EXIT
git worktree add -q "$tmp/old" "$rev"
flags=(-std=c++20 -gencode=arch=compute_90a,code=sm_90a -Iinclude -Isrc -O3 --expt-relaxed-constexpr -ptx)
(cd "$tmp/old" && nvcc "${flags[@]}" "$src" -o "$tmp/old.ptx")
nvcc "${flags[@]}" "$src" -o "$tmp/new.ptx"
for side in old new; do sed -E "${RENAME:-}" "$tmp/$side.ptx" > "$tmp/$side.renamed.ptx"; done
python3 - "$tmp/old.renamed.ptx" "$tmp/new.renamed.ptx" "$rev" "$src" <<'PY'
import re, sys
def kernels(path):
    text = open(path).read()
    out = {}
    for m in re.finditer(r'^(?:\.visible )?\.entry (\S+)\(', text, re.M):
        body = text[m.start():text.index('\n}\n', m.start())]
        body = re.sub(r'_GLOBAL__N__[0-9a-f]+_', '_GLOBAL__N__', body)
        body = re.sub(r'_INTERNAL_[0-9a-f]+_[0-9]+_([a-z_]+)_[0-9a-f]+', r'_INTERNAL_\1', body)
        body = re.sub(r'%(r|rd|rs|p|f|fd)[0-9]+', r'%\1', body)
        body = re.sub(r'\$L__BB[0-9_]+', 'L', body)
        # the virtual registers' declared counts (.reg .b32 %r<N>) follow from the numbering
        body = re.sub(r'^\s*\.reg .*\n', '', body, flags=re.M)
        out[re.sub(r'_GLOBAL__N__[0-9a-f]+_', '', m.group(1))] = body
    return out
old, new = kernels(sys.argv[1]), kernels(sys.argv[2])
same = True
for name in sorted(set(old) | set(new)):
    state = ('same' if old[name] == new[name] else 'DIFF') if name in old and name in new else \
            ('only at ' + sys.argv[3] if name in old else 'only in the tree')
    same &= state == 'same'
    print(f'{state:18} {name}')
print(('same PTX' if same else 'PTX differs') + f': {sys.argv[4]} at {sys.argv[3]} and in the working tree')
sys.exit(0 if same else 1)
PY
