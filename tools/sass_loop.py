#!/usr/bin/env python3
"""Instructions per iteration of a kernel's WGMMA loop, from its SASS (no GPU needed).

Finds the innermost loop (backward branch) around the first GMMA instruction and walks its
path with every conditional forward branch not taken and every unconditional one followed,
so rare paths guarded by a branch (negative key scales, window edges) are skipped and the
count is that of an ordinary tile. Prints the count and an opcode histogram.
  usage: cuobjdump -sass K.cubin | awk '/Function :/{f = ($0 ~ /REGEX/)} f' > k.sass
         tools/sass_loop.py k.sass
"""
import collections
import re
import sys


def main():
    ins = []
    for line in open(sys.argv[1]):
        m = re.match(r"\s*/\*([0-9a-f]{4,5})\*/\s+(.*?);", line)
        if m:
            ins.append((int(m.group(1), 16), m.group(2).strip()))
    gmma = [a for a, t in ins if "GMMA" in t]
    if not gmma:
        sys.exit("no GMMA instruction")
    loop = None
    for a, t in ins:
        m = re.search(r"BRA (?:\S+ )?0x([0-9a-f]+)", t)
        if m and int(m.group(1), 16) <= gmma[0] <= a and (loop is None or a - int(m.group(1), 16) < loop[1] - loop[0]):
            loop = (int(m.group(1), 16), a)
    if loop is None:
        sys.exit("no loop around the first GMMA")
    index = {a: i for i, (a, _) in enumerate(ins)}
    path, pc, seen = [], loop[0], set()
    while pc not in seen:
        seen.add(pc)
        i = index[pc]
        t = ins[i][1]
        if t != "NOP" and not t.startswith("@!PT"):  # padding the scheduler skips
            path.append(t)
        if pc == loop[1]:
            break
        m = re.match(r"BRA (?:\S+ )?0x([0-9a-f]+)", t)  # unconditional: follow it
        pc = int(m.group(1), 16) if m else ins[i + 1][0]
    ops = collections.Counter(re.sub(r"^@!?U?P\w+ ", "", t).split()[0].split(".")[0] for t in path)
    print(f"loop {loop[0]:#x}..{loop[1]:#x}: {len(path)} instructions per iteration")
    print(" ".join(f"{op}:{n}" for op, n in ops.most_common()))


if __name__ == "__main__":
    main()
