#!/usr/bin/env python3
"""The Python-call overhead of flashindexer.indexer_topk in eager decode, on a GPU: the host time
of one call (argument checks, ctypes structs, workspace query, enqueue) against the kernel time
of the same call replayed from a CUDA graph (where the host cost is zero). JSON lines.
  usage: python_overhead.py   (FLASHINDEXER_LIB or an installed package; PYTHONPATH=python)"""
import json
import os
import sys
import time

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
import flashindexer as fi  # noqa: E402
from flashindexer import quant  # noqa: E402


def main():
    dev = torch.device("cuda")
    for batch, ctx in ((1, 65536), (64, 65536)):
        pages_per = ctx // 64
        kv, ksc, _ = quant.mxfp4(torch.randn(batch * ctx, 128, device=dev))
        pool = quant.mxfp4_pool(kv, ksc)
        table = torch.randperm(batch * pages_per, device=dev).int().reshape(batch, pages_per)
        q, qs, _ = quant.mxfp4(torch.randn(batch, 64, 128, device=dev))
        w = torch.randn(batch, 64, device=dev) / 90.5
        lens = torch.full((batch,), ctx, dtype=torch.int32, device=dev)
        kw = dict(q_scale=qs, format="mxfp4", k=512, max_context=ctx, page_table=table, context_lens=lens)
        out = fi.IndexerTopK(*(torch.empty_like(t) for t in fi.indexer_topk(q, w, pool, **kw)))
        ws = torch.empty(64 << 20, dtype=torch.uint8, device=dev)
        call = lambda: fi.indexer_topk(q, w, pool, out=out, workspace=ws, **kw)  # noqa: E731
        for _ in range(20):
            call()
        torch.cuda.synchronize()
        n = 200
        t0 = time.perf_counter()
        for _ in range(n):
            call()
        host_us = (time.perf_counter() - t0) / n * 1e6  # enqueue time per call (the GPU runs behind)
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        for _ in range(n):
            call()
        torch.cuda.synchronize()
        eager_us = (time.perf_counter() - t0) / n * 1e6
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            for _ in range(20):
                call()
        g.replay()
        torch.cuda.synchronize()
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        for _ in range(10):
            g.replay()
        b.record()
        b.synchronize()
        graph_us = a.elapsed_time(b) * 1e3 / 200
        print(json.dumps({"op": "python_overhead", "gpu": torch.cuda.get_device_name(), "point":
                          f"v4-flash_decode_b{batch}_n1_c{ctx}", "host_us_per_call": host_us,
                          "eager_us_per_call": eager_us, "graph_us_per_call": graph_us,
                          "torch": torch.__version__}), flush=True)


if __name__ == "__main__":
    main()
