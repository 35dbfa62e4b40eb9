#!/usr/bin/env python3
"""Scores the fused decode clusters' plan model (src/cuda/heuristics.h, cheapest_fused_staged_plan)
against `flashindexer bench --plan-sweep` results: for each swept point, the plan the model picks,
its time over the point's fastest plan, and the sum of those excesses. A grid search over the
model's constants (--search) is how 2026-12-04 refitted them (docs/experiments.md).

The cost below mirrors heuristics.h for plans by position (the cluster merge) on the H200's cluster
capacities (66 / 30 / 15 clusters of 2 / 4 / 8 at once); keep the two in step.

  usage: tools/staged_plan_fit.py [--search] bench/results/*plan_sweep*.jsonl
"""
import argparse
import collections
import itertools
import json
import re

CAPACITY = {2: 66, 4: 30, 8: 15}
# heuristics.h Since 2026-12-04 (the 2026-11-30 run's values in comments).
MODEL = dict(finish=2048,         # kFusedStagedFinishCost
             cluster=1024,        # kFusedStagedClusterCost (0)
             pair=512,            # kFusedStagedPairCost (0)
             merge_fixed=1536,    # kFusedStagedClusterMergeCost (1,024)
             merge_keys=36)       # kFusedStagedClusterMergeKeys (64)


def load(paths):
    points = collections.defaultdict(lambda: {"plans": {}})
    for path in paths:
        for line in open(path):
            j = json.loads(line)
            if j.get("op") != "fused_staged_plan":
                continue
            p = points[j["point"]]
            b, n, c = re.match(r".+_decode_b(\d+)_n(\d+)_c(\d+)", j["point"]).groups()
            p.update(rows=int(b) * int(n), k=j["k"])
            key = (j["cluster"], j["segments"], j["rows_per_cta"])
            t = min(j["time_ms"], p["plans"].get(key, (float("inf"), 0))[0])  # a point swept twice: its best
            p["plans"][key] = (t, j["chunk"])
    return points


def cost(p, plan, m):
    cluster, segments, rows_per_cta = plan
    chunk = p["plans"][plan][1]
    waves = -(-(p["rows"] // rows_per_cta) * segments // CAPACITY[cluster])
    finishes = 1 if rows_per_cta == 2 and cluster == 2 else rows_per_cta
    per_wave = (chunk * (1 + rows_per_cta) / 2 + finishes * m["finish"] + (m["cluster"] if cluster > 2 else 0) +
                (m["pair"] if rows_per_cta > 1 else 0))
    merge = 0 if segments <= 1 else m["merge_fixed"] + segments * p["k"] / m["merge_keys"]
    return waves * per_wave + merge


def excess(points, m):
    out = {}
    for name, p in points.items():
        pick = min(p["plans"], key=lambda q: cost(p, q, m))
        out[name] = (pick, p["plans"][pick][0] / min(t for t, _ in p["plans"].values()) - 1)
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--search", action="store_true", help="grid-search the constants")
    ap.add_argument("files", nargs="+")
    args = ap.parse_args()
    points = load(args.files)
    ex = excess(points, MODEL)
    for name in sorted(ex):
        plan, e = ex[name]
        print("%-34s %dx%d%s  %5.1f%% over the fastest" % (name, plan[0], plan[1], "p" if plan[2] == 2 else "", 100 * e))
    print("%d points, excess summed %.3f, worst %.1f%%" %
          (len(ex), sum(e for _, e in ex.values()), 100 * max(e for _, e in ex.values())))
    if args.search:
        grid = dict(finish=[1024, 2048], cluster=[0, 512, 1024, 1536], pair=[0, 512, 1024],
                    merge_fixed=[512, 1024, 1536], merge_keys=[16, 32, 36, 48, 64])
        best = min((sum(e for _, e in excess(points, m).values()), m)
                   for m in (dict(zip(grid, v)) for v in itertools.product(*grid.values())))
        print("search: excess summed %.3f at %s" % best)


if __name__ == "__main__":
    main()
