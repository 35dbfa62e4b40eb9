"""Drop-in entry points with the signatures engines call today, on flashindexer's operators.

| function | whose signature | differences |
|---|---|---|
| `fp8_fp4_mqa_logits` | DeepGEMM | keys `(kv [N, D] e4m3, kv_sf [N] fp32)` or `(kv [N, D/2] packed E2M1, kv_sf [N] int32 = 4 UE8M0 bytes)` are copied into 64-token pages per call (N x 132 or 68 bytes); logits are always -inf outside the window (`clean_logits` has no cost); rows are not padded to 256 columns; scores follow the production mode (docs/semantics.md) |
| `get_paged_mqa_logits_metadata` | DeepGEMM | returns a zero `[num_sms + 1, 2]` int32 tensor: flashindexer plans on the host from bounds and needs no schedule |
| `fp8_fp4_paged_mqa_logits` | DeepGEMM | the uint8 `[num_blocks, block_kv, 1, D + 4]` (or `D/2 + 4`) cache is read in place as flashindexer pages; `context_lens` `[B]` or `[B, next_n]`; `-inf` outside each row's window whatever `clean_logits` says |
| `fast_topk_v2` | SGLang | indices relative to the row start, -1 padding, in ascending position order (SGLang's order is unspecified); exact under the total order of docs/semantics.md (NaN lowest, -0 < +0, ties to the lower position) |
| `fast_topk_transform_fused` | SGLang | as `fast_topk_v2`, then mapped through `page_table_size_1[request, index]`; rows belong to requests by `cu_seqlens_q` |
| `top_k_per_row_prefill`, `top_k_per_row_decode` | vLLM | write `indices` in place (relative to the row start, -1 padding), ascending position order (vLLM's is unspecified), exact |
"""
from typing import Optional, Tuple

import torch
from torch import Tensor

from . import ops, quant

PAGE = 64


def _q_fp8_or_fp4(q, leading):
    q_fp, q_sf = q
    if q_sf is None:
        return q_fp.reshape(leading, *q_fp.shape[-2:]), None, "fp8_e4m3"
    sf = q_sf.contiguous().view(torch.uint8).reshape(leading, q_fp.shape[-2], 4)
    return q_fp.view(torch.uint8).reshape(leading, *q_fp.shape[-2:]), sf, "mxfp4"


def _to_dtype(logits, logits_dtype):
    return logits if logits_dtype in (None, torch.float32) else logits.to(logits_dtype)


def fp8_fp4_mqa_logits(q: Tuple[Tensor, Optional[Tensor]], kv: Tuple[Tensor, Tensor], weights: Tensor,
                       cu_seq_len_k_start: Tensor, cu_seq_len_k_end: Tensor, clean_logits: bool = True,
                       max_seqlen_k: int = 0, logits_dtype: torch.dtype = torch.float32) -> Tensor:
    """DeepGEMM's prefill logits: q [S, H, D] e4m3 (or packed FP4 + [S, H] int32 scales), kv
    contiguous [N, D]; returns [S, N] (or [S, max_seqlen_k] row-relative when max_seqlen_k > 0)."""
    seq = q[0].shape[0]
    qq, qs, fmt = _q_fp8_or_fp4(q, seq)
    kv_fp, kv_sf = kv
    if fmt == "fp8_e4m3":
        pool = quant.fp8_pool(kv_fp, kv_sf.float(), PAGE)
    else:
        pool = quant.mxfp4_pool(kv_fp.view(torch.uint8), kv_sf.contiguous().view(torch.uint8).reshape(-1, 4), PAGE)
    n = kv_fp.shape[0]
    logits, _ = ops.indexer_logits(qq, weights, pool, q_scale=qs, format=fmt, max_context=n,
                                   window_start=cu_seq_len_k_start.int(), window_end=cu_seq_len_k_end.int())
    if max_seqlen_k > 0:  # row-relative: column j of row i is position start[i] + j
        cols = cu_seq_len_k_start.long()[:, None] + torch.arange(max_seqlen_k, device=logits.device)[None, :]
        inside = cols < n
        logits = torch.where(inside, logits.gather(1, cols.clamp(max=n - 1)), float("-inf"))
    return _to_dtype(logits, logits_dtype)


def get_paged_mqa_logits_metadata(context_lens: Tensor, block_kv: int, num_sms: int,
                                  indices: Optional[Tensor] = None) -> Tensor:
    """DeepGEMM's schedule metadata: flashindexer needs none (a zero tensor of its shape)."""
    return torch.zeros(num_sms + 1, 2, dtype=torch.int32, device=context_lens.device)


def fp8_fp4_paged_mqa_logits(q: Tuple[Tensor, Optional[Tensor]], kv_cache: Tensor, weights: Tensor,
                             context_lens: Tensor, block_table: Tensor, schedule_meta: Tensor, max_context_len: int,
                             clean_logits: bool = False, logits_dtype: torch.dtype = torch.float32,
                             indices: Optional[Tensor] = None) -> Tensor:
    """DeepGEMM's paged decode logits: q [B, next_n, H, D]; kv_cache uint8 [blocks, block_kv, 1, bytes];
    returns [B * next_n, max_context_len]."""
    if indices is not None:
        raise NotImplementedError("indices: expected None (varlen decode rows are not supported), got a tensor")
    b, next_n = q[0].shape[:2]
    qq, qs, fmt = _q_fp8_or_fp4(q, b * next_n)
    blocks, block_kv = kv_cache.shape[:2]
    pool = kv_cache.view(torch.uint8).as_strided((blocks, kv_cache.shape[1] * kv_cache.shape[-1]),
                                                 (kv_cache.stride(0), 1))
    logits, _ = ops.indexer_logits(qq, weights, pool, q_scale=qs, format=fmt, max_context=max_context_len,
                                   page_table=block_table.int(), page_size=block_kv, context_lens=context_lens.int(),
                                   next_n=next_n)
    return _to_dtype(logits, logits_dtype)


def _relative(out, starts):
    rel = out.positions - starts[:, None]
    return torch.where(out.positions >= 0, rel, -1).int()


def fast_topk_v2(score: Tensor, lengths: Tensor, topk: int, row_starts: Optional[Tensor] = None) -> Tensor:
    """SGLang's TopK: row i scores score[i, start : start + lengths[i]]; indices relative to start."""
    starts = torch.zeros_like(lengths, dtype=torch.int32) if row_starts is None else row_starts.int()
    out = ops.topk(score.float(), topk, window_start=starts, window_end=starts + lengths.int(),
                   max_context=score.shape[1])
    return _relative(out, starts)


def fast_topk_transform_fused(score: Tensor, lengths: Tensor, page_table_size_1: Tensor, cu_seqlens_q: Tensor,
                              topk: int, row_starts: Optional[Tensor] = None) -> Tensor:
    """SGLang's TopK then the page-size-1 table: the physical slot of each selected index, -1 padding."""
    idx = fast_topk_v2(score, lengths, topk, row_starts)
    rows = score.shape[0]
    counts = (cu_seqlens_q[1:] - cu_seqlens_q[:-1]).long()
    request = torch.repeat_interleave(torch.arange(counts.numel(), device=score.device), counts, output_size=rows)
    slots = page_table_size_1[request[:, None], idx.clamp(min=0).long()]
    return torch.where(idx >= 0, slots.int(), -1)


def top_k_per_row_prefill(logits: Tensor, row_starts: Tensor, row_ends: Tensor, indices: Tensor, num_rows: int,
                          stride0: int, stride1: int) -> None:
    """vLLM's prefill TopK: indices [num_rows, K] int32 written in place, relative to row_starts."""
    view = logits.as_strided((num_rows, logits.shape[-1]), (stride0, stride1))
    starts = row_starts[:num_rows].int()
    out = ops.topk(view.float(), indices.shape[1], window_start=starts, window_end=row_ends[:num_rows].int(),
                   max_context=view.shape[1])
    indices[:num_rows].copy_(_relative(out, starts))


def top_k_per_row_decode(logits: Tensor, next_n: int, seq_lens: Tensor, indices: Tensor, num_rows: int,
                         stride0: int, stride1: int) -> None:
    """vLLM's decode TopK: row i of request i // next_n sees [0, seq_lens - next_n + i % next_n + 1)."""
    view = logits.as_strided((num_rows, logits.shape[-1]), (stride0, stride1))
    out = ops.topk(view.float(), indices.shape[1], context_lens=seq_lens.int(), next_n=next_n,
                   max_context=view.shape[1])
    indices[:num_rows].copy_(out.positions)
