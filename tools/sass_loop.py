#!/usr/bin/env python3
"""Instructions per iteration of a kernel's WGMMA loop, from its SASS (no GPU needed).

Finds the innermost loop (backward branch) around the first GMMA instruction and walks its
path with every conditional forward branch not taken and every unconditional one followed,
so rare paths guarded by a branch (negative key scales, window edges) are skipped and the
count is that of an ordinary tile. Prints the count and an opcode histogram.
  usage: cuobjdump -sass K.cubin | awk '/Function :/{f = ($0 ~ /REGEX/)} f' > k.sass
         tools/sass_loop.py k.sass
     or: tools/sass_loop.py --binary build/release/flashindexer [--against build/base/flashindexer]
                            [--filter REGEX]   (one line per kernel with a WGMMA loop; cuobjdump as
                                                tools/same_sass.py finds it)
"""
import argparse
import collections
import os
import re
import subprocess
import sys


def parse(lines):
    """[(address, instruction)] of SASS text lines."""
    ins = []
    for line in lines:
        m = re.match(r"\s*/\*([0-9a-f]{4,5})\*/\s+(.*?);", line)
        if m:
            ins.append((int(m.group(1), 16), m.group(2).strip()))
    return ins


def loop_path(ins):
    """((first, last) address of the loop, [instructions on its ordinary path]), or None."""
    gmma = [a for a, t in ins if "GMMA" in t]
    if not gmma:
        return None
    loop = None
    for a, t in ins:
        m = re.search(r"BRA (?:\S+ )?0x([0-9a-f]+)", t)
        if m and int(m.group(1), 16) <= gmma[0] <= a and (loop is None or a - int(m.group(1), 16) < loop[1] - loop[0]):
            loop = (int(m.group(1), 16), a)
    if loop is None:
        return None
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
    return loop, path


def binary_loops(path, pattern):
    """{short kernel name: instructions per iteration} of a binary's kernels matching pattern."""
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import same_sass  # noqa: E402  (cuobjdump lookup and kernel names)
    text = subprocess.run([same_sass.cuobjdump(), "-sass", path], check=True, capture_output=True, text=True).stdout
    out = {}
    for part in text.split("\n\t\tFunction : ")[1:]:
        name = same_sass.short(part.split("\n", 1)[0].strip())
        if re.search(pattern, name):
            lp = loop_path(parse(part.split("\n")))
            if lp:
                out[name] = len(lp[1])
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("sass", nargs="?", help="SASS text of one kernel")
    ap.add_argument("--binary", help="every kernel of this binary (or object) with a WGMMA loop")
    ap.add_argument("--against", help="a second binary: both counts side by side")
    ap.add_argument("--filter", default="", help="regex on the kernel names")
    args = ap.parse_args()
    if args.binary:
        a = binary_loops(args.binary, args.filter)
        b = binary_loops(args.against, args.filter) if args.against else {}
        for name in sorted(a):
            other = f" (against {b[name]})" if name in b else ""
            print(f"{a[name]:5d}{other}  {name}")
        return
    if not args.sass:
        ap.error("give a SASS file or --binary")
    lp = loop_path(parse(open(args.sass)))
    if lp is None:
        sys.exit("no loop around the first GMMA")
    loop, path = lp
    ops = collections.Counter(re.sub(r"^@!?U?P\w+ ", "", t).split()[0].split(".")[0] for t in path)
    print(f"loop {loop[0]:#x}..{loop[1]:#x}: {len(path)} instructions per iteration")
    print(" ".join(f"{op}:{n}" for op, n in ops.most_common()))


if __name__ == "__main__":
    main()
