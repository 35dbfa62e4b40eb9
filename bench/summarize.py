#!/usr/bin/env python3
"""Summarizes bench JSON lines: ours vs torch.topk and vs the copy floor, per point."""
import json
import sys


def main(path):
    recs = [json.loads(line) for line in open(path) if line.strip().startswith("{")]
    floor = next((r for r in recs if r.get("op") == "copy_floor"), None)
    if floor:
        print(f"copy floor: {floor['gbps']:.0f} GB/s (read+write), {floor['gpu']}, git {floor['git']}")
    ours = {(r["point"], r["dist"]): r for r in recs if r.get("impl") == "flashindexer"}
    torch = {(r["point"], r["dist"]): r for r in recs if r.get("impl") == "torch.topk"}
    print(f"{'point':18} {'dist':10} {'K':>5} {'ours ms':>9} {'torch ms':>9} {'speedup':>8} {'GB/s':>7} {'x floor':>8}")
    for key, r in ours.items():
        t = torch.get(key)
        tm = t["time_ms"] if t else float("nan")
        print(f"{key[0]:18} {key[1]:10} {r['k']:>5} {r['time_ms']:>9.4f} {tm:>9.4f} {tm / r['time_ms']:>8.2f}"
              f" {r['gbps']:>7.0f} {r['time_ms'] / r['floor_ms']:>8.2f}")


if __name__ == "__main__":
    main(sys.argv[1])
