#!/usr/bin/env python3
"""Plots the fused operator against dense logits + TopK from `flashindexer bench --json`
lines: time and extra device memory against the context, one line per path and shape
(preset, prefill rows or decode batch). Usage: plot_fused.py OUT.png BENCH.jsonl..."""
import json
import sys
from collections import defaultdict

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

PATHS = {"fused_topk": ("fused", "-"), "dense_then_topk": ("dense + TopK", "--")}


def load(paths):
    series = defaultdict(list)  # (op, shape) -> [(context, ms, MiB)]
    meta = {}
    for path in paths:
        for line in open(path):
            if not line.startswith("{"):
                continue
            r = json.loads(line)
            if r.get("op") == "floors":
                meta = r
            if r.get("op") not in PATHS:
                continue
            kind = f"decode B{r['rows'] // max(r['next_n'], 1)}" if r["next_n"] else f"prefill {r['rows']}"
            shape = f"{r['preset']} {kind} K={r['k']}"
            series[(r["op"], shape)].append((r["context"], r["time_ms"], r["extra_bytes"] / 2**20))
    return series, meta


def main(out, paths):
    series, meta = load(paths)
    if not series:
        sys.exit("no fused_topk / dense_then_topk lines in " + ", ".join(paths))
    shapes = sorted({shape for _, shape in series})
    fig, (ax_t, ax_m) = plt.subplots(1, 2, figsize=(16, 5))
    for i, shape in enumerate(shapes):
        color = f"C{i % 10}"
        for op, (label, style) in PATHS.items():
            pts = sorted(series.get((op, shape), []))
            if not pts:
                continue
            ctx = [p[0] for p in pts]
            ax_t.plot(ctx, [p[1] for p in pts], style, marker="o", color=color, label=f"{shape}: {label}")
            ax_m.plot(ctx, [max(p[2], 1e-3) for p in pts], style, marker="o", color=color)
    for ax, ylabel in ((ax_t, "time per call (ms)"), (ax_m, "extra device memory (MiB)")):
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel("context (C4 positions)")
        ax.set_ylabel(ylabel)
        ax.grid(True, which="both", alpha=0.3)
    ax_m.set_title("0 (no workspace) is drawn at 1e-3 MiB", fontsize=8)
    fig.legend(fontsize=7, loc="center right")
    title = "flashindexer: fused indexer TopK vs dense logits + TopK"
    if meta:
        title += f" ({meta.get('gpu', '')}, git {meta.get('git', '')})"
    fig.suptitle(title)
    fig.tight_layout(rect=(0, 0, 0.8, 1))
    fig.savefig(out, dpi=120)
    print(f"wrote {out}: {len(shapes)} shapes")


if __name__ == "__main__":
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    main(sys.argv[1], sys.argv[2:])
