"""Pure-PyTorch reference of CONTRACT §1 (scores, fp64 on the dequantized inputs) and §3 (the
TopK's total order), written from the contract, not from the library."""
import torch

from flashindexer import quant


def rank_keys(scores):
    """float32 [..] -> int64 keys ordered as §3: NaN lowest (all equal), -inf < ... < -0 < +0 < ... < +inf."""
    bits = scores.float().contiguous().view(torch.int32).long()
    key = torch.where(bits < 0, -(bits & 0x7FFFFFFF) - 1, bits)  # -0 (0x80000000) -> -1, below +0 -> 0
    return torch.where(torch.isnan(scores), torch.full_like(key, -(2 ** 40)), key)


def topk(logits, starts, ends, k, order="position"):
    """positions [rows, k] (-1 padding), counts [rows], scores [rows, k] (-inf padding)."""
    rows = logits.shape[0]
    pos = torch.full((rows, k), -1, dtype=torch.int32)
    sc = torch.full((rows, k), float("-inf"), dtype=torch.float32)
    counts = torch.zeros(rows, dtype=torch.int32)
    for r in range(rows):
        s, e = int(starts[r]), int(ends[r])
        if e <= s:
            continue
        vals = logits[r, s:e].float()
        if e - s <= k:
            chosen = torch.arange(s, e)
            ranked = chosen[torch.sort(rank_keys(vals), descending=True, stable=True).indices]
        else:
            idx = torch.sort(rank_keys(vals), descending=True, stable=True).indices[:k]
            ranked = idx + s
            chosen = torch.sort(ranked).values
        picked = chosen if order == "position" else ranked
        n = picked.numel()
        pos[r, :n] = picked.int()
        sc[r, :n] = logits[r, picked].float()
        counts[r] = n
    return pos, counts, sc


def scores(q_deq, k_deq, w_eff, starts, ends, max_context, slot_of=None):
    """fp64 scores [rows, max_context]; -inf outside [start, end). k_deq is indexed by slot;
    slot_of(r, positions) maps a row's positions to slots (default: slot = position)."""
    rows = q_deq.shape[0]
    out = torch.full((rows, max_context), float("-inf"), dtype=torch.float64)
    for r in range(rows):
        s, e = int(starts[r]), int(ends[r])
        if e <= s:
            continue
        p = torch.arange(s, e)
        keys = k_deq[p if slot_of is None else slot_of(r, p)].double()
        dots = q_deq[r].double() @ keys.t()
        out[r, s:e] = (w_eff[r].double()[:, None] * dots.clamp(min=0)).sum(0)
    return out


def magnitudes(q_deq, k_deq, w_eff, starts, ends, max_context, slot_of=None):
    """M[r, s] = sum_h |w| sum_d |q k| of CONTRACT §4."""
    return scores(q_deq.abs(), k_deq.abs(), w_eff.abs(), starts, ends, max_context, slot_of)


def dequant_fp8_pool(pool, page_size=64, d=128):
    pages = pool.shape[0]
    vals = pool[:, :page_size * d].reshape(pages * page_size, d).view(torch.float8_e4m3fn).float()
    sc = pool[:, page_size * d:page_size * (d + 4)].reshape(pages * page_size, 4).contiguous().view(torch.float32)
    return vals * sc


def dequant_mxfp4_pool(pool, page_size=64, d=128):
    pages = pool.shape[0]
    vals = pool[:, :page_size * d // 2].reshape(pages * page_size, d // 2)
    sc = pool[:, page_size * d // 2:page_size * (d // 2 + 4)].reshape(pages * page_size, 4)
    return quant.dequant_mxfp4(vals, sc)
