#!/usr/bin/env python3
"""Compares the machine code (SASS) of two builds kernel by kernel, without a GPU.

A and B are static libraries (libflashindexer.a) or object files. For every CUDA object
member present in both (or the members named by --member), each kernel function's SASS
instructions are compared (addresses and anonymous-namespace path hashes stripped, so two
checkouts' builds compare). One line per kernel: same / DIFF, instructions A -> B,
the span from the first to the last WGMMA of the function (instructions between them: the
gaps that 2026-12-01 found costing 3-10%, docs/experiments.md) and its R2UR moves. Exits 1 if any
kernel differs, so a refactor or a default-off knob can prove that the tested kernels are
unchanged.

cuobjdump: $CUOBJDUMP, else on PATH, else /usr/local/cuda/bin; where the toolkit lacks it,
`pip download nvidia-cuda-cuobjdump==13.*` and unzip the wheel (nvidia/cu13/bin/cuobjdump).
  usage: tools/same_sass.py A B [--member fused_topk.cu.o ...] [--filter REGEX]
"""
import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile


def cuobjdump():
    for cand in (os.environ.get("CUOBJDUMP"), shutil.which("cuobjdump"), "/usr/local/cuda/bin/cuobjdump"):
        if cand and os.access(cand, os.X_OK):
            return cand
    sys.exit("cuobjdump not found: set CUOBJDUMP (see the header of this script)")


def objects(path, members, tmp):
    """{member name: object path} of a static library or a single object file."""
    if not path.endswith(".a"):
        return {os.path.basename(path): path}
    names = subprocess.run(["ar", "t", path], check=True, capture_output=True, text=True).stdout.split()
    names = [n for n in names if n.endswith(".cu.o") and (not members or n in members)]
    out = os.path.join(tmp, str(abs(hash(path))))
    os.makedirs(out, exist_ok=True)
    if names:
        subprocess.run(["ar", "x", os.path.abspath(path), *names], check=True, cwd=out)
    return {n: os.path.join(out, n) for n in names}


def kernels(tool, obj):
    """{function name: [instructions]} of one object's SASS."""
    text = subprocess.run([tool, "-sass", obj], check=True, capture_output=True, text=True).stdout
    out = {}
    for part in text.split("\n\t\tFunction : ")[1:]:
        # Anonymous-namespace tags hash the source path: strip them, so builds of two checkouts compare.
        name = re.sub(r"\d+_GLOBAL__N__[0-9a-f]+_\d+_\w+?_cu_[0-9a-f]{8}", "ANON", part.split("\n", 1)[0].strip())
        out[name] = [re.sub(r"^\s+/\*[0-9a-f]+\*/\s+", "", line).split(";")[0].strip()
                     for line in part.split("\n") if re.match(r"\s+/\*[0-9a-f]{4,}\*/", line)]
    return out


def chain(ops):
    """(instructions from the first to the last WGMMA, R2UR moves among them); (0, 0) without WGMMAs."""
    at = [i for i, op in enumerate(ops) if "GMMA" in op]
    if not at:
        return 0, 0
    return at[-1] - at[0], sum("R2UR" in op for op in ops[at[0]:at[-1]])


def short(name):
    """A mangled kernel name as name<template arguments>, roughly (the names carry no digits)."""
    m = re.search(r"\d+([A-Za-z_]+_kernel)I(.*?)EEEv", name)
    if not m:
        return name[:100]
    args = re.sub(r"LNS_\d+(\w+?)E(\d)", r"\1=\2", m.group(2).replace("ELNS_", ",LNS_"))
    args = args.replace("ELi", ",").replace("Li", "")
    return f"{m.group(1)}<{args}>"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("a")
    ap.add_argument("b")
    ap.add_argument("--member", action="append", default=[], help="archive member, e.g. fused_topk.cu.o")
    ap.add_argument("--filter", default="", help="only kernels whose name matches this regex")
    args = ap.parse_args()
    tool = cuobjdump()
    differ = 0
    with tempfile.TemporaryDirectory() as tmp:
        oa, ob = objects(args.a, args.member, tmp), objects(args.b, args.member, tmp)
        for member in sorted(set(oa) & set(ob)):
            ka, kb = kernels(tool, oa[member]), kernels(tool, ob[member])
            for name in sorted(set(ka) | set(kb)):
                if args.filter and not re.search(args.filter, name):
                    continue
                a, b = ka.get(name), kb.get(name)
                if a is None or b is None:
                    differ += 1
                    print(f"{member}: ONLY IN {'B' if a is None else 'A'} {short(name)}")
                    continue
                same = a == b
                differ += not same
                (sa, ra), (sb, rb) = chain(a), chain(b)
                print(f"{member}: {'same' if same else 'DIFF'} {short(name)}  instructions {len(a)} -> {len(b)}"
                      f"  wgmma span {sa} -> {sb}  r2ur {ra} -> {rb}")
        for member in sorted(set(oa) ^ set(ob)):
            differ += 1
            print(f"{member}: only in {'A' if member in oa else 'B'}")
    print(f"{differ} kernel(s) differ" if differ else "same SASS")
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
