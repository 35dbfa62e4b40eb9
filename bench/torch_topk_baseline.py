#!/usr/bin/env python3
"""torch.topk over materialized fp32 logits: the baseline for `flashindexer bench-topk`.

Same points, same distributions (generated with torch, same laws), same JSON-lines
schema. Run on the same GPU in the same device call (tools/device.sh does).
"""
import json
import os
import sys

import torch

from torch_timing import median_ms

POINTS = [
    ("prefill_196k", 8192, 196608, 1024, True),
    ("prefill_64k", 8192, 65536, 2048, False),
    ("decode_b64_64k", 64, 65536, 2048, True),
    ("decode_b1_256k", 1, 262144, 2048, True),
    ("decode_b128_128k", 128, 131072, 2048, False),
    ("decode_b4_256k", 4, 262144, 2048, False),
    ("decode_b8_64k", 8, 65536, 2048, False),
    ("decode_b32_64k", 32, 65536, 2048, False),
]
DISTS = ["gaussian", "offset", "tiny", "plateau", "ascending"]


def make(dist, rows, width, gen):
    x = torch.randn(rows, width, device="cuda", generator=gen)
    if dist == "offset":
        x += 100.0
    elif dist == "tiny":
        x *= 1e-8
    elif dist == "plateau":
        keep = torch.rand(rows, width, device="cuda", generator=gen) < 0.25
        x = torch.where(keep, x.abs(), torch.zeros_like(x))
    elif dist == "ascending":
        x = torch.arange(width, device="cuda", dtype=torch.float32).expand(rows, width) + 0.25 * torch.rand(
            rows, width, device="cuda", generator=gen)
    return x.contiguous()


def main():
    only = sys.argv[1] if len(sys.argv) > 1 else None
    gen = torch.Generator(device="cuda")
    gen.manual_seed(42)
    base = {"gpu": torch.cuda.get_device_name(), "git": os.environ.get("FLASHINDEXER_GIT", "unknown"),
            "op": "topk_over_logits", "impl": "torch.topk"}
    for name, rows, width, k, all_dists in POINTS:
        if only and name != only:
            continue
        for dist in DISTS if all_dists else ["gaussian"]:
            x = make(dist, rows, width, gen)
            ms = median_ms(lambda: torch.topk(x, k, dim=-1), 3, 20)
            rec = dict(base, point=name, dist=dist, rows=rows, width=width, k=k, time_ms=ms,
                       gbps=rows * width * 4 / (ms * 1e6),
                       command=f"python3 bench/torch_topk_baseline.py {name}")
            print(json.dumps(rec), flush=True)
            del x
            torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
