#!/usr/bin/env python3
"""Writes docs/perf.md from the newest results in bench/results/ (the table of today's
numbers; what was tried on the way is docs/experiments.md).
  usage: tools/perf_doc.py [--check]   (--check: exit 1 if docs/perf.md differs from what it would write)

Sources, newest by file name (they start with the date, DATE-2 for a later batch of a date):
  *_peers_deepgemm_*.jsonl   bench/peers/deepgemm_indexer.py (DeepGEMM beside us, one process);
                             each point from the newest file of the newest date that has it
  *_bench_*.jsonl            flashindexer bench --json (ours against the floors, both modes); the same
  *_ab_*.jsonl               every one of the newest date: variants timed side by side in one call
  *_python_overhead_*.jsonl  bench/python_overhead.py
"""
import contextlib
import glob
import io
import json
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "bench", "peers"))
import summarize as peers  # noqa: E402


def chronological(pattern):
    """Result files matching pattern, oldest first. Names start with the date of their run;
    a later batch of the same date adds a sequence number (2026-12-07-2_...), so that the
    name order is the order of the runs."""
    files = glob.glob(os.path.join(ROOT, "bench", "results", pattern))
    files.sort(key=lambda f: (os.path.basename(f).split("_")[0], f))
    return [os.path.relpath(f, ROOT) for f in files]


def newest(pattern):
    files = chronological(pattern)
    return files[-1] if files else None


def newest_per_point(pattern, points_of):
    """The files of the newest date matching pattern, newest first, each with the points
    (points_of(records)) that no newer file of that date measured."""
    files = chronological(pattern)
    if not files:
        return []
    date = os.path.basename(files[-1])[:10]
    shown, out = set(), []
    for path in reversed([f for f in files if os.path.basename(f)[:10] == date]):
        recs = records(path)
        mine = points_of(recs) - shown
        if mine:
            out.append((path, recs, mine))
            shown |= mine
    return out


def records(path):
    return [json.loads(line) for line in open(os.path.join(ROOT, path)) if line.strip().startswith("{")]


def peers_points(recs):
    return {r["point"] for r in recs if r.get("op") == "logits" and r.get("impl") == "deepgemm"}


def peers_section(path, recs, points):
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        peers.print_markdown([r for r in recs if r.get("op") == "floors" or r.get("point") in points], [path])
    return out.getvalue()


def mode(r):
    return {"fp32": "exact", "reduced": "production"}.get(r.get("accuracy", "exact"), r.get("accuracy", "exact"))


def bench_keys(recs):
    return {(r["point"], mode(r)) for r in recs
            if r.get("impl") == "flashindexer" and r.get("op") == "fused_topk" and "point" in r}


def bench_section(path, recs, keys):
    fl = next((r for r in recs if r.get("op") == "floors"), {})
    head = (f"{fl.get('gpu', '?')}, git {fl.get('git', '?')}; from `{path}`. FP8 GEMM "
            f"{fl.get('fp8_gemm_tflops', 0):.0f} TFLOP/s, copy {fl.get('copy_gbps', 0):.0f} GB/s in the same run. "
            "Times in ms; floor = max(FP8 tensor floor, key-read floor); decode also per call of a CUDA graph "
            "(graph column).\n\n")
    rows = ["| point | mode | K | dense logits | % tensor floor | dense + TopK | fused | fused / floor | "
            "speedup vs dense + TopK | graph: dense + TopK / fused | fused == dense + TopK |",
            "|---|---|---|---|---|---|---|---|---|---|---|"]
    by = {}
    for r in recs:
        if r.get("impl") == "flashindexer" and r.get("op") in ("dense_logits", "dense_then_topk", "fused_topk"):
            by[(r["point"], mode(r), r["op"])] = r
    for (pt, m, op), fused in sorted(by.items()):
        if op != "fused_topk" or (pt, m) not in keys:
            continue
        dense, pair = by.get((pt, m, "dense_logits")), by.get((pt, m, "dense_then_topk"))
        floor = max(fused.get("tensor_floor_ms", 0), fused.get("key_read_floor_ms", 0))
        d = f"{dense['time_ms']:.4f} | {dense['pct_tensor_floor']:.0f}%" if dense else "- | -"
        p = f"{pair['time_ms']:.4f}" if pair else "-"
        sp = f"{pair['time_ms'] / fused['time_ms']:.2f}x" if pair else "-"
        g = (f"{pair['graph_ms']:.4f} / {fused['graph_ms']:.4f}" if pair and "graph_ms" in pair and "graph_ms" in fused
             else "-")
        rows.append(f"| {pt} | {m} | {fused.get('k', '-')} | {d} | {p} | {fused['time_ms']:.4f} | "
                    f"{fused['time_ms'] / floor:.2f} | {sp} | {g} | {'yes' if fused.get('identical') else 'NO'} |")
    return head + "\n".join(rows) + "\n"


def prefix_order(prefix):
    """A results prefix DATE or DATE-N as (DATE, N): 2026-12-07 before 2026-12-07-2 before 2026-12-07-10."""
    date, _, n = prefix[:10], prefix[10:11], prefix[11:]
    return (date, int(n) if n.isdigit() else 0)


def ab_files():
    """Every same-call A/B file (*_ab_*.jsonl) of the newest prefix (DATE or DATE-N) among them."""
    files = sorted(glob.glob(os.path.join(ROOT, "bench", "results", "*_ab_*.jsonl")))
    if not files:
        return []
    newest = max((os.path.basename(f).split("_")[0] for f in files), key=prefix_order)
    return [os.path.relpath(f, ROOT) for f in files if os.path.basename(f).split("_")[0] == newest]


def ab_section(path):
    recs = records(path)
    by, order, notes = {}, [], {}
    for r in recs:
        if r.get("impl") != "flashindexer" or r.get("op") not in ("dense_logits", "dense_then_topk", "fused_topk"):
            continue
        key = (r.get("run", "-"), r["point"], mode(r), r.get("variant", "-"))
        if key not in by:
            order.append(key)
        by.setdefault(key, {})[r["op"]] = r
        if r.get("variant_note"):
            notes[r.get("variant", "-")] = (r.get("git", "?"), r["variant_note"])
    gpu = next((r.get("gpu") for r in recs if r.get("gpu")), "?")
    lines = [f"{gpu}; from `{path}` (ms; each run one device call, its variants side by side).\n",
             "| run | point | mode | variant | git | dense logits | dense + TopK | fused | fused == dense + TopK |",
             "|---|---|---|---|---|---|---|---|---|"]
    for key in order:
        ops = by[key]
        f = ops.get("fused_topk")
        if f is None:
            continue
        d, p = ops.get("dense_logits"), ops.get("dense_then_topk")
        lines.append(f"| {key[0]} | {key[1]} | {key[2]} | {key[3]} | {f.get('git', '?')} | "
                     f"{d['time_ms']:.3f} | " if d else f"| {key[0]} | {key[1]} | {key[2]} | {key[3]} | {f.get('git', '?')} | - | ")
        lines[-1] += (f"{p['time_ms']:.3f} | " if p else "- | ") + f"{f['time_ms']:.3f} | {'yes' if f.get('identical') else 'no'} |"
    if notes:
        lines.append("")
        lines += [f"- `{v}` ({g}): {n}" for v, (g, n) in sorted(notes.items())]
    return "\n".join(lines) + "\n"


def overhead_section(path):
    lines = [f"From `{path}`:\n", "| point | host us per eager call | GPU us per call (graph) | torch |", "|---|---|---|---|"]
    for r in records(path):
        lines.append(f"| {r['point']} | {r['host_us_per_call']:.0f} | {r['graph_us_per_call']:.0f} | {r.get('torch', '?')} |")
    return "\n".join(lines) + "\n"


def document():
    parts = ["# Performance\n",
             "Generated by `tools/perf_doc.py` from the newest files in `bench/results/`; do not edit by hand.\n"
             "Every ratio comes from one device call. What was tried on the way: `experiments.md`.\n"]
    p = newest_per_point("*_peers_deepgemm_*.jsonl", peers_points)
    if p:
        parts += ["## Beside DeepGEMM, same process\n",
                  "DeepGEMM's sm90 indexer logits (`fp8_fp4_mqa_logits`, `fp8_fp4_paged_mqa_logits`) followed by our "
                  "TopK over its logits, against our fused operator, on the same inputs in one Python process. "
                  "mxfp4 points: DeepGEMM gets fp8 copies of the dequantized keys and queries (what an engine on "
                  "Hopper must give it); ours reads the 68-byte cache. Recall@K against the exact fp64 TopK. "
                  "Each point from the newest run that measured it (one table per run, newest first).\n"]
        parts += [peers_section(*f) for f in p]
    b = newest_per_point("*_bench_*.jsonl", bench_keys)
    if b:
        parts += ["## Ours against the floors\n",
                  "Each point from the newest run that measured it (one table per run, newest first).\n"]
        parts += [bench_section(*f) for f in b]
    for a in ab_files():
        parts += [f"## Same-call A/B: `{os.path.basename(a)}`\n",
                  "Variants of one tree built here and timed in the same device call (timing-only builds give "
                  "wrong results: `fused == dense + TopK` says no there).\n", ab_section(a)]
    o = newest("*_python_overhead_*.jsonl")
    if o:
        parts += ["## Python-call overhead (eager decode)\n", overhead_section(o)]
    parts += ["## How to reproduce\n",
              "On the GPU machine, with the binaries built here (`tools/pack_prebuilt.sh build/release`, carry "
              "`.prebuilt`):\n\n"
              "    POINTS=\"...\" tools/device_prebuilt.sh            # GPU label, sanitizers, bench lines\n"
              "    build/release/flashindexer bench --json [--accuracy exact]   # the floors table\n"
              "    tools/device_python.sh                           # pytest on CUDA, overhead, DeepGEMM beside us\n\n"
              "Then copy the JSON lines into `bench/results/DATE_{bench,peers_deepgemm,python_overhead}_COMMIT_GPU.jsonl` "
              "(`DATE-2_...` for a later batch of the same date) and run `tools/perf_doc.py > docs/perf.md`.\n"]
    return "\n".join(parts)


def main(args):
    text = document()
    if "--check" in args:
        current = open(os.path.join(ROOT, "docs", "perf.md")).read()
        return 0 if current == text else 1
    sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
