"""The fused indexer adapter for an SGLang-style DSA backend (plain PyTorch; SGLang is not imported).

An engine's indexer step is DeepGEMM logits + a TopK kernel + a page-table transform. Built once
per attention backend, `FusedIndexer` probes `supports` for the backend's shapes and freezes its
path before any CUDA-graph capture; each call then runs `indexer_topk` (no logits) and writes the
physical C4 slots, and optionally the request-local indices, into the caller's tensors. Where the
fused operator is unsupported, or FLASHINDEXER_FUSED=0, it runs our dense logits + TopK instead:
the same outputs bit for bit (docs/semantics.md), only slower and with the logits' memory.

    indexer = FusedIndexer(format="mxfp4", num_heads=64, k=512, max_context=262144, device="cuda")
    indexer.decode(q, q_scale, weights, kv_pool, page_table, seq_lens, out_slots=topk_slots)
"""
import os
from typing import Optional

import torch
from torch import Tensor

from .. import ops


class FusedIndexer:
    def __init__(self, *, format: str, num_heads: int, k: int, max_context: int, device, page_size: int = 64,
                 next_n: int = 1, accuracy: str = "production", order: str = "position"):
        self.format, self.num_heads, self.k, self.max_context = format, num_heads, k, max_context
        self.page_size, self.next_n, self.accuracy, self.order = page_size, next_n, accuracy, order
        self.device = torch.device(device)
        self.enabled = os.environ.get("FLASHINDEXER_FUSED", "1") != "0"
        # The path of each row form, decided once (a graph captured later replays the same one).
        self.fused, self.reason = {}, {}
        for form in ("decode", "prefill"):
            ok, why = self._probe(form) if self.enabled else (False, "disabled by FLASHINDEXER_FUSED=0")
            self.fused[form], self.reason[form] = ok, why

    def _probe(self, form):
        dev, h = self.device, self.num_heads
        mx = self.format == "mxfp4"
        q = torch.zeros(self.next_n if form == "decode" else 1, h, 64 if mx else 128, dtype=torch.uint8, device=dev)
        qs = torch.full((q.shape[0], h, 4), 127, dtype=torch.uint8, device=dev) if mx else None
        w = torch.zeros(q.shape[0], h, dtype=torch.float32, device=dev)
        pool = torch.zeros(1, self.page_size * (68 if mx else 132), dtype=torch.uint8, device=dev)
        table = torch.zeros(1, 1, dtype=torch.int32, device=dev)
        rows = (dict(context_lens=torch.ones(1, dtype=torch.int32, device=dev), next_n=self.next_n)
                if form == "decode" else
                dict(window_start=torch.zeros(1, dtype=torch.int32, device=dev),
                     window_end=torch.ones(1, dtype=torch.int32, device=dev)))
        return ops.supports(q, w, pool, format=self.format, k=self.k, max_context=self.max_context, q_scale=qs,
                            page_table=table, page_size=self.page_size, accuracy=self.accuracy, order=self.order,
                            **rows)

    def _run(self, form, q, q_scale, weights, kv_pool, page_table, out_slots, out_indices, rows):
        common = dict(format=self.format, q_scale=q_scale, page_table=page_table, page_size=self.page_size,
                      max_context=self.max_context, accuracy=self.accuracy, **rows)
        if self.fused[form]:
            res = ops.indexer_topk(q, weights, kv_pool, k=self.k, order=self.order, **common)
        else:
            logits, _ = ops.indexer_logits(q, weights, kv_pool, **common)
            res = ops.topk(logits, self.k, max_context=self.max_context, page_table=page_table,
                           page_size=self.page_size, num_pages=kv_pool.shape[0], order=self.order,
                           **{key: v for key, v in rows.items()})
        if out_slots is not None:
            out_slots.copy_(res.slots)
        if out_indices is not None:
            out_indices.copy_(res.positions)
        return res

    def decode(self, q: Tensor, q_scale: Optional[Tensor], weights: Tensor, kv_pool: Tensor, page_table: Tensor,
               seq_lens: Tensor, out_slots: Optional[Tensor] = None, out_indices: Optional[Tensor] = None):
        """Decode rows: q [B * next_n, H, D or D/2]; seq_lens [B] C4 lengths (row n of request b sees
        [0, seq_lens[b] - (next_n - 1 - n))); writes [B * next_n, K] slots / indices, -1 padding."""
        return self._run("decode", q, q_scale, weights, kv_pool, page_table, out_slots, out_indices,
                         dict(context_lens=seq_lens, next_n=self.next_n))

    def prefill(self, q: Tensor, q_scale: Optional[Tensor], weights: Tensor, kv_pool: Tensor, page_table: Tensor,
                row_request: Tensor, row_start: Tensor, row_end: Tensor, out_slots: Optional[Tensor] = None,
                out_indices: Optional[Tensor] = None):
        """Ragged rows: row r scores C4 positions [row_start[r], row_end[r]) of request row_request[r]."""
        return self._run("prefill", q, q_scale, weights, kv_pool, page_table, out_slots, out_indices,
                         dict(row_batch=row_request, window_start=row_start, window_end=row_end,
                              num_requests=page_table.shape[0]))
