#!/usr/bin/env python3
"""A naive PyTorch lightning indexer: the baseline for `flashindexer bench` (dense logits).

Same points and names as the bench's default points (v32 fp8 and v4-pro mxfp4 shapes; keys
as the bf16 product of dequantized values and scales, which is how a framework without an
FP4 / paged FP8 kernel runs the indexer), same JSON-lines schema. Per point it times
    scores:  bf16 q @ k^T per row chunk, relu, * w, sum over heads -> fp32 [rows, context]
    topk:    the scores above, then torch.topk(k)
on random inputs generated on the GPU (timing only; correctness lives in the C++ tests).
Run on the same GPU in the same device call as the bench (tools/device.sh score does).
"""
import json
import os
import sys

import torch

from torch_timing import median_ms

H, D = 64, 128
# (name, rows_or_batch, decode, context, k)
POINTS = [
    ("v32_prefill_8192_c65536", 8192, False, 65536, 2048),
    ("v32_decode_b64_n1_c65536", 64, True, 65536, 2048),
    ("v4-pro_prefill_8192_c65536", 8192, False, 65536, 1024),
    ("v4-pro_decode_b64_n1_c65536", 64, True, 65536, 1024),
]
ROW_CHUNK = 256  # prefill rows per matmul: [256, H, context] bf16 = 2 GiB at 65,536


def prefill_scores(q, k, w, ends, out):
    """q [rows, H, D] bf16, k [context, D] bf16, w [rows, H] fp32 -> out [rows, context] fp32."""
    context = k.shape[0]
    pos = torch.arange(context, device=q.device)
    for r0 in range(0, q.shape[0], ROW_CHUNK):
        r1 = min(r0 + ROW_CHUNK, q.shape[0])
        s = torch.einsum("rhd,sd->rhs", q[r0:r1], k).relu_()                  # [chunk, H, context] bf16
        s = torch.einsum("rhs,rh->rs", s.float(), w[r0:r1])                     # [chunk, context] fp32
        out[r0:r1] = s.masked_fill_(pos[None, :] >= ends[r0:r1, None], float("-inf"))
    return out


def decode_scores(q, k, w, out):
    """q [B, H, D] bf16, k [B, context, D] bf16, w [B, H] fp32 -> out [B, context] fp32."""
    s = torch.bmm(q, k.transpose(1, 2)).relu_()                                  # [B, H, context] bf16
    out.copy_(torch.einsum("bhs,bh->bs", s.float(), w))
    return out


def main():
    only = sys.argv[1] if len(sys.argv) > 1 else None
    dev = "cuda"
    torch.manual_seed(7)
    base = {"gpu": torch.cuda.get_device_name(), "git": os.environ.get("FLASHINDEXER_GIT", "unknown"),
            "impl": "torch.naive"}
    for name, n, decode, context, k in POINTS:
        if only and name != only:
            continue
        if decode:
            q = torch.randn(n, H, D, device=dev).to(torch.bfloat16)
            keys = torch.randn(n, context, D, device=dev).to(torch.bfloat16)
            w = torch.randn(n, H, device=dev)
            out = torch.empty(n, context, device=dev)
            score = lambda: decode_scores(q, keys, w, out)
            rows = n
        else:
            q = torch.randn(n, H, D, device=dev).to(torch.bfloat16)
            keys = torch.randn(context, D, device=dev).to(torch.bfloat16)
            w = torch.randn(n, H, device=dev)
            ends = context - n + 1 + torch.arange(n, device=dev)                 # causal rows
            out = torch.empty(n, context, device=dev)
            score = lambda: prefill_scores(q, keys, w, ends, out)
            rows = n
        torch.cuda.reset_peak_memory_stats()
        t_score = median_ms(score, 2, 10)
        t_all = median_ms(lambda: torch.topk(score(), k, dim=1), 2, 10)
        peak = torch.cuda.max_memory_allocated()
        for op, t in (("dense_logits", t_score), ("dense_logits+topk", t_all)):
            rec = dict(base, op=op, point=name, rows=rows, context=context, k=k, time_ms=t,
                       peak_bytes=peak, command="python3 bench/torch_indexer_baseline.py " + name)
            print(json.dumps(rec), flush=True)
        del q, keys, w, out
        torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
