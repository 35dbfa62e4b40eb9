#!/usr/bin/env python3
"""Reads tools/ncu_source.sh's CSV (Nsight Compute's source page, SASS): where the warps of
one kernel were sampled, per instruction and per region.

Prints the total samples, the top instructions by samples (with their largest stall
reasons), and, with --around REGEX, the samples of the instructions within --window lines
of every instruction matching REGEX (e.g. the deferred vote's SYNCS.ARRIVE), so a region's
share of the kernel's time can be read off. Samples are proportional to warp-time.
  usage: tools/ncu_source_top.py FILE.csv [--top 25] [--around REGEX] [--window 12]
"""
import argparse
import csv
import re


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("csv")
    ap.add_argument("--top", type=int, default=25)
    ap.add_argument("--around")
    ap.add_argument("--window", type=int, default=12)
    a = ap.parse_args()
    rows = list(csv.reader(open(a.csv)))
    head = next(i for i, r in enumerate(rows) if r and r[0] == "Address")
    h = rows[head]
    body = [r for r in rows[head + 1:] if len(r) == len(h)]
    col = {name: i for i, name in enumerate(h)}
    samples = col["Warp Stall Sampling (All Samples)"]
    stalls = [(name, i) for name, i in col.items() if name.startswith("stall_") and "(Not Issued)" not in name]

    def n(r, i):
        try:
            return float(r[i] or 0)
        except ValueError:
            return 0.0

    total = sum(n(r, samples) for r in body)
    print(f"{len(body)} instructions, {total:.0f} samples")

    def line(k, r):
        s = n(r, samples)
        top = sorted(((n(r, i), name[6:]) for name, i in stalls), reverse=True)[:3]
        why = ", ".join(f"{name} {v / s:.0%}" for v, name in top if v > 0) if s else ""
        return f"{k:6d} {s:8.0f} {100 * s / total:5.2f}%  {r[col['Source']].strip()[:60]:60s} {why}"

    print(f"\ntop {a.top} instructions (line, samples, share, SASS, largest stall reasons):")
    for k, r in sorted(enumerate(body), key=lambda kr: -n(kr[1], samples))[: a.top]:
        print(line(k, r))
    by_op = {}
    for r in body:
        op = r[col["Source"]].split()[0]
        if op.startswith("@"):
            op = r[col["Source"]].split()[1]
        op = op.split(".")[0]
        by_op[op] = by_op.get(op, 0.0) + n(r, samples)
    print("\nsamples by opcode:", ", ".join(f"{op} {100 * v / total:.1f}%" for op, v in
                                           sorted(by_op.items(), key=lambda kv: -kv[1])[:16]))
    if a.around:
        hits = [k for k, r in enumerate(body) if re.search(a.around, r[col["Source"]])]
        seen = set()
        for k in hits:
            lo, hi = max(0, k - a.window), min(len(body), k + a.window + 1)
            region = [j for j in range(lo, hi) if j not in seen]
            seen.update(region)
            s = sum(n(body[j], samples) for j in region)
            print(f"\naround line {k} ({body[k][col['Source']].strip()[:50]}): {s:.0f} samples, {100 * s / total:.2f}%")
            for j in region:
                if n(body[j], samples) > 0.002 * total or j == k:
                    print(line(j, body[j]))


if __name__ == "__main__":
    main()
