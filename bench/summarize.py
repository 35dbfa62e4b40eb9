#!/usr/bin/env python3
"""Summarizes bench JSON lines: TopK (ours vs torch.topk and the copy floor) and the
scorer (ours vs the FP8 tensor floor and the copy floor), per point."""
import json
import sys

# Score modes by their current names; results written before 2026-12-06 say "fp32" (now
# "exact") and "reduced" (now "production"), and lines without the field were exact.
OLD_MODE_NAMES = {"fp32": "exact", "reduced": "production"}


def mode(r):
    acc = r.get("accuracy", "exact")
    return OLD_MODE_NAMES.get(acc, acc)


def scorer(recs):
    floors = next((r for r in recs if r.get("op") == "floors"), None)
    if floors:
        print(f"floors: copy {floors['copy_gbps']:.0f} GB/s, FP8 GEMM {floors['fp8_gemm_tflops']:.0f} TFLOP/s,"
              f" {floors['gpu']}, git {floors['git']}")
    torch = {r["point"]: r for r in recs if r.get("impl") == "torch.naive" and r.get("op") == "dense_logits"}
    print(f"{'point':34} {'accuracy':10} {'ms':>9} {'TFLOP/s':>8} {'% tensor':>9} {'key GB/s':>9} {'% copy':>7}"
          f" {'torch ms':>9}")
    for r in recs:
        if r.get("op") != "dense_logits" or r.get("impl") != "flashindexer":
            continue
        t = torch.get(r["point"])
        print(f"{r['point']:34} {mode(r):10} {r['time_ms']:>9.4f} {r['tflops']:>8.0f}"
              f" {r['pct_tensor_floor']:>9.1f} {r['key_gbps']:>9.0f} {r['pct_copy_bw_keys']:>7.1f}"
              f" {t['time_ms'] if t else float('nan'):>9.2f}")


def fused(recs):
    dense = {(r["point"], r.get("accuracy"), r["k"]): r for r in recs if r.get("op") == "dense_then_topk"}
    rows = [r for r in recs if r.get("op") == "fused_topk"]
    if not rows:
        return
    print(f"{'point':34} {'K':>5} {'fused ms':>9} {'dense+topk':>10} {'speedup':>8} {'x tensor':>9}"
          f" {'x HBM':>7} {'fused MiB':>9} {'dense MiB':>9} {'same':>5}  plan")
    graphed = [r for r in rows if "graph_ms" in r]

    def dense_of(r):
        return dense.get((r["point"], r.get("accuracy"), r["k"]), {})

    def name_of(r):
        return r["point"] + (" " + mode(r) if mode(r) != "production" else "")

    for r in rows:
        d, name = dense_of(r), name_of(r)
        print(f"{name:34} {r['k']:>5} {r['time_ms']:>9.4f} {d.get('time_ms', float('nan')):>10.4f}"
              f" {r['speedup_vs_dense']:>8.2f} {r['x_tensor_floor']:>9.2f} {r['x_key_read_floor']:>7.2f}"
              f" {r['extra_bytes'] / 2**20:>9.1f} {d.get('extra_bytes', float('nan')) / 2**20:>9.1f}"
              f" {str(r['identical']):>5}  {plan_name(r.get('staged_plan'))}")
        if not r["identical"] and "difference" in r:
            print(f"  first difference: {r['difference']}")
    if graphed:
        print(f"{'graph-replayed (ms per call)':34} {'K':>5} {'fused ms':>9} {'dense+topk':>10} {'speedup':>8}"
              f" {'x HBM':>7}")
        for r in graphed:
            d, name = dense_of(r), name_of(r)
            hbm = r["graph_ms"] / r["key_read_floor_ms"] if r.get("key_read_floor_ms") else float("nan")
            print(f"{name:34} {r['k']:>5} {r['graph_ms']:>9.4f} {d.get('graph_ms', float('nan')):>10.4f}"
                  f" {r['graph_speedup_vs_dense']:>8.2f} {hbm:>7.2f}")


def plan_name(plan):
    """A decode-cluster plan as cluster x segments (p: rows in pairs); '' for records without one."""
    if plan is None:
        return ""
    if isinstance(plan, str):
        return plan
    return f"{plan['cluster']}x{plan['segments']}{'p' if plan.get('rows_per_cta', 1) > 1 else ''}"


def profile(recs):
    rows = [r for r in recs if r.get("op") == "fused_topk" and "consume_cycles" in r.get("profile_per_cta", {})]
    staged = [r for r in recs if r.get("op") == "fused_topk" and "staged" in r.get("profile_per_cta", {})]
    if staged:
        print(f"{'fused decode clusters, cycles per CTA':38} {'score':>10} {'guess':>10} {'passes':>10} {'gather':>10}"
              f" {'finish':>10} (finish: CTA 0s only, averaged over all CTAs)")
        for r in staged:
            p = r["profile_per_cta"]["staged"]
            print(f"{r['point']:38} {p['score_cycles']:>10.0f} {p['guess_cycles']:>10.0f} {p['pass_cycles']:>10.0f}"
                  f" {p['gather_cycles']:>10.0f} {p['finish_cycles_over_all_ctas']:>10.0f}")
    merged = [r for r in recs if r.get("op") == "fused_topk" and "merge" in r.get("profile_per_cta", {})]
    if merged:
        names = ["check", "wait", "select", "reduce", "order", "write"]
        print(f"{'split merge, cycles per CTA':38}" + "".join(f" {n:>10}" for n in names))
        for r in merged:
            p = r["profile_per_cta"]["merge"]
            print(f"{r['point']:38}" + "".join(f" {p[n + '_cycles']:>10.0f}" for n in names))
    if not rows:
        return
    print(f"{'fused profile, cycles per CTA':34} {'consume':>10} {'votes':>10} {'guess':>8} {'vote wait':>9}"
          f" {'compact':>10} {'n comp':>7} {'keys/comp':>9} {'finish':>10} {'sort':>10}  guess held / repaired (rows)")
    nan = float("nan")
    for r in rows:
        p = r["profile_per_cta"]
        print(f"{r['point']:34} {p['consume_cycles']:>10.0f} {p['vote_cycles']:>10.0f}"
              f" {p.get('guess_cycles', nan):>8.0f} {p.get('vote_wait_cycles', nan):>9.0f} {p['compact_cycles']:>10.0f}"
              f" {p['compactions']:>7.1f} {p['keys_per_compaction']:>9.0f} {p['finish_cycles']:>10.0f}"
              f" {p.get('sort_cycles', nan):>10.0f}"
              f"  {p.get('guesses_held_rows', nan):.0f} / {p.get('repaired_rows', nan):.0f}")


def plans(recs):
    """--plan-sweep: every fused decode-cluster plan per point, fastest first; * = the model's pick,
    p = rows in pairs, ! = outputs not bit-identical to dense + TopK."""
    sweep = [r for r in recs if r.get("op") == "fused_staged_plan"]
    for point in dict.fromkeys(r["point"] for r in sweep):
        pts = sorted((r for r in sweep if r["point"] == point), key=lambda r: r["time_ms"])
        chosen = next((r for r in pts if r["chosen"]), None)
        pick = (f", the model's pick {100 * (chosen['time_ms'] / pts[0]['time_ms'] - 1):.1f}% off the fastest"
                if chosen else ", no pick among them")
        print(f"{point} (K {pts[0]['k']}, dense+topk {pts[0]['dense_then_topk_ms']:.4f} ms{pick}): plan ms, fastest first")
        print("  " + "  ".join(f"{'*' if r['chosen'] else ''}{plan_name(r)}:{r['time_ms']:.4f}"
                               f"{'' if r['identical'] else '!'}" for r in pts[:12]))
        for r in pts:
            if not r["identical"] and "difference" in r:
                print(f"  {plan_name(r)} first difference: {r['difference']}")


def main(path):
    recs = [json.loads(line) for line in open(path) if line.strip().startswith("{")]
    if any(r.get("op") in ("dense_logits", "fused_topk") for r in recs):
        scorer(recs)
        fused(recs)
        plans(recs)
        return profile(recs)
    floor = next((r for r in recs if r.get("op") == "copy_floor"), None)
    if floor:
        print(f"copy floor: {floor['gbps']:.0f} GB/s (read+write), {floor['gpu']}, git {floor['git']}")
    ours = {(r["point"], r["dist"]): r for r in recs if r.get("impl") == "flashindexer"}
    torch = {(r["point"], r["dist"]): r for r in recs if r.get("impl") == "torch.topk"}
    print(f"{'point':18} {'dist':10} {'K':>5} {'ours ms':>9} {'graph ms':>9} {'torch ms':>9} {'speedup':>8}"
          f" {'GB/s':>7} {'x floor':>8}")
    for key, r in ours.items():
        t = torch.get(key)
        tm = t["time_ms"] if t else float("nan")
        print(f"{key[0]:18} {key[1]:10} {r['k']:>5} {r['time_ms']:>9.4f} {r.get('graph_ms', float('nan')):>9.4f}"
              f" {tm:>9.4f} {tm / r['time_ms']:>8.2f} {r['gbps']:>7.0f} {r['time_ms'] / r['floor_ms']:>8.2f}")


if __name__ == "__main__":
    main(sys.argv[1])
