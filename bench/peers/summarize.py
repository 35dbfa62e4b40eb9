#!/usr/bin/env python3
"""Tables of bench/peers/deepgemm_indexer.py JSON lines: per point, DeepGEMM + our TopK against
our fused operator and dense + TopK in each score mode, with recall@K against fp64.
  usage: summarize.py [--markdown] results.jsonl [more.jsonl ...]   (--markdown: docs/perf.md tables)"""
import json
import sys


def main(args):
    markdown = "--markdown" in args
    paths = [a for a in args if a != "--markdown"]
    recs = [json.loads(line) for p in paths for line in open(p) if line.strip().startswith("{")]
    if markdown:
        return print_markdown(recs, paths)
    fl = next((r for r in recs if r.get("op") == "floors"), None)
    if fl:
        print(f"{fl['gpu']} ({fl['sms']} SMs), git {fl['git']}, {fl['date']}: FP8 GEMM {fl['fp8_gemm_tflops']:.0f} "
              f"TFLOP/s, copy {fl['copy_gbps']:.0f} GB/s")
    for r in recs:
        if "error" in r:
            print(f"{r['point']}: ERROR {r['error']}")
    points = [r["point"] for r in recs if r.get("op") == "logits" and r.get("impl") == "deepgemm"]
    hdr = (f"{'point':32} {'K':>5} {'DG logits':>9} {'DG+topk':>8} {'fused':>8} {'dense+topk':>10} {'fused x':>7}"
           f" {'x floor':>7} {'recall DG':>9} {'recall':>7} {'diff DG':>8} {'diff':>8} same")
    for acc in ("production", "exact"):
        rows = []
        for pt in points:
            by = {(r.get("impl"), r.get("op"), r.get("accuracy")): r for r in recs if r.get("point") == pt}
            dg, pair = by.get(("deepgemm", "logits", None)), by.get(("deepgemm+flashindexer_topk", "logits_then_topk", None))
            fu, de = by.get(("flashindexer", "fused_topk", acc)), by.get(("flashindexer", "dense_then_topk", acc))
            if not (dg and pair and fu and de):
                continue
            floor = max(fu["tensor_floor_ms"], fu["key_read_floor_ms"])
            rows.append(f"{pt:32} {fu['k']:>5} {dg['time_ms']:>9.4f} {pair['time_ms']:>8.4f} {fu['time_ms']:>8.4f}"
                        f" {de['time_ms']:>10.4f} {pair['time_ms'] / fu['time_ms']:>7.2f} {fu['time_ms'] / floor:>7.2f}"
                        f" {dg.get('recall_at_k', float('nan')):>9.4f} {fu.get('recall_at_k', float('nan')):>7.4f}"
                        f" {dg.get('calc_diff', float('nan')):>8.1e} {fu.get('calc_diff', float('nan')):>8.1e}"
                        f" {fu.get('identical_to_dense_topk')}")
        if rows:
            print(f"\n{acc} mode (times in ms; 'fused x' = DeepGEMM + our TopK over our fused; 'x floor' = fused"
                  f" over max(FP8 tensor, key read) floor)")
            print(hdr)
            print("\n".join(rows))


def print_markdown(recs, paths):
    fl = next((r for r in recs if r.get("op") == "floors"), {})
    print(f"{fl.get('gpu', '?')}, git {fl.get('git', '?')}, {fl.get('date', '?')}; from "
          f"{', '.join(f'`{p}`' for p in paths)}. FP8 GEMM {fl.get('fp8_gemm_tflops', 0):.0f} TFLOP/s, copy "
          f"{fl.get('copy_gbps', 0):.0f} GB/s in the same process. Times in ms (decode: per call of a CUDA graph).\n")
    print("| point | K | DeepGEMM logits | + our TopK | ours fused, production | speedup | x floor | ours fused,"
          " exact | recall@K DeepGEMM / production / exact |")
    print("|---|---|---|---|---|---|---|---|---|")
    points = [r["point"] for r in recs if r.get("op") == "logits" and r.get("impl") == "deepgemm"]
    for pt in points:
        by = {(r.get("impl"), r.get("op"), r.get("accuracy")): r for r in recs if r.get("point") == pt}
        dg, pair = by.get(("deepgemm", "logits", None)), by.get(("deepgemm+flashindexer_topk", "logits_then_topk", None))
        pr, ex = by.get(("flashindexer", "fused_topk", "production")), by.get(("flashindexer", "fused_topk", "exact"))
        if not (dg and pair and pr):
            continue
        floor = max(pr["tensor_floor_ms"], pr["key_read_floor_ms"])
        exact = f"{ex['time_ms']:.4f}" if ex else "-"
        rec = " / ".join(f"{r.get('recall_at_k', float('nan')):.4f}" if r else "-" for r in (dg, pr, ex))
        print(f"| {pt} | {pr['k']} | {dg['time_ms']:.4f} | {pair['time_ms']:.4f} | {pr['time_ms']:.4f} |"
              f" {pair['time_ms'] / pr['time_ms']:.2f}x | {pr['time_ms'] / floor:.2f} | {exact} | {rec} |")


if __name__ == "__main__":
    main(sys.argv[1:])
