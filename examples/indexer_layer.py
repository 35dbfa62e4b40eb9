#!/usr/bin/env python3
"""A DeepSeek-V3.2 / V4-style indexer layer in PyTorch with random weights, on flashindexer.

hidden [T, hidden] -> q = rotate(W_q h) [T, H, 128], k = rotate(W_k h) [T, 128], w = W_w h * H^-1/2 * 128^-1/2;
k is quantized into a paged cache (fp8: e4m3 + fp32 scale per token; mxfp4: E2M1 + UE8M0 per 32),
q likewise (fp8: its scale folded into w); then the fused indexer returns, per query, the physical
cache slots of its top K causal positions. Prints the memory the logits path would have used.
  usage: examples/indexer_layer.py [--format mxfp4|fp8_e4m3] [--tokens 2048] [--device cpu|cuda] [--compile]"""
import argparse
import math

import torch

import flashindexer as fi
from flashindexer import quant
from flashindexer.integrations.sglang import FusedIndexer


class IndexerLayer(torch.nn.Module):
    def __init__(self, hidden=1024, heads=64, k=512, fmt="mxfp4", page=64, max_context=4096, device="cpu"):
        super().__init__()
        g = torch.Generator().manual_seed(0)
        self.heads, self.fmt, self.page = heads, fmt, page
        self.wq = torch.nn.Parameter(torch.randn(heads * 128, hidden, generator=g) / math.sqrt(hidden))
        self.wk = torch.nn.Parameter(torch.randn(128, hidden, generator=g) / math.sqrt(hidden))
        self.ww = torch.nn.Parameter(torch.randn(heads, hidden, generator=g) / math.sqrt(hidden))
        rot, _ = torch.linalg.qr(torch.randn(128, 128, generator=g))  # stands in for the Hadamard rotation
        self.register_buffer("rot", rot)
        self.to(device)
        self.indexer = FusedIndexer(format=fmt, num_heads=heads, k=k, max_context=max_context, device=device,
                                    page_size=page)

    def forward(self, h, kv_pool, page_table, slot_mapping, row_start, row_end):
        t = h.shape[0]
        q = (h @ self.wq.t()).view(t, self.heads, 128) @ self.rot
        key = (h @ self.wk.t()) @ self.rot
        w = (h @ self.ww.t()) * (self.heads ** -0.5 * 128 ** -0.5)
        pages, offs = slot_mapping // self.page, slot_mapping % self.page
        if self.fmt == "fp8_e4m3":  # write the new keys into their pages (values, then scales)
            kv, ks = quant.fp8_rows(key)
            vbytes = 128
            kv_pool[pages[:, None], offs[:, None] * vbytes + torch.arange(vbytes, device=h.device)] = kv.view(torch.uint8)
            sb = ks.contiguous().view(torch.uint8).view(t, 4)
            q8, qs = quant.fp8_rows(q)
            q_in, q_scale, w = q8, None, w * qs
        else:
            kp, sb, _ = quant.mxfp4(key)
            vbytes = 64
            kv_pool[pages[:, None], offs[:, None] * vbytes + torch.arange(vbytes, device=h.device)] = kp
            q_in, q_scale, _ = quant.mxfp4(q)
        base = self.page * vbytes
        kv_pool[pages[:, None], base + offs[:, None] * 4 + torch.arange(4, device=h.device)] = sb
        rows = torch.zeros(t, dtype=torch.int32, device=h.device)
        res = self.indexer.prefill(q_in, q_scale, w.float().contiguous(), kv_pool, page_table, rows, row_start, row_end)
        return res.slots, res.counts


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--format", default="mxfp4", choices=["mxfp4", "fp8_e4m3"])
    ap.add_argument("--tokens", type=int, default=2048)
    ap.add_argument("--k", type=int, default=512)
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--compile", action="store_true", help="torch.compile(fullgraph=True) the layer")
    a = ap.parse_args()
    page, tokens, dev = 64, a.tokens, torch.device(a.device)
    layer = IndexerLayer(k=a.k, fmt=a.format, page=page, max_context=tokens, device=dev)
    pages = -(-tokens // page)
    kv_pool = torch.zeros(pages, page * (132 if a.format == "fp8_e4m3" else 68), dtype=torch.uint8, device=dev)
    page_table = torch.randperm(pages, device=dev).int()[None, :]
    pos = torch.arange(tokens, device=dev)
    slot_mapping = page_table[0][pos // page].long() * page + pos % page
    row_end = (pos + 1).int()
    h = torch.randn(tokens, 1024, device=dev)
    fwd = torch.compile(layer, fullgraph=True) if a.compile else layer
    with torch.no_grad():
        slots, counts = fwd(h, kv_pool, page_table, slot_mapping, torch.zeros_like(row_end), row_end)
    logits_bytes = tokens * tokens * 4
    print(f"{a.format} indexer, {tokens} tokens, K={a.k}, {a.device}: path "
          f"{'fused' if layer.indexer.fused['prefill'] else 'logits + TopK'} ({layer.indexer.reason['prefill']})")
    print(f"  rows with K slots: {int((counts == a.k).sum())} of {tokens}; last row's first slots "
          f"{slots[-1, :4].tolist()}")
    print(f"  logits the dense path would hold: {logits_bytes / 2**20:.1f} MiB; fused: none")


if __name__ == "__main__":
    main()
