"""Random indexer problems for the Python tests: model-like inputs quantized with
flashindexer.quant, in both row forms, paged (shuffled pages) or contiguous."""
import torch

from flashindexer import quant

PAGE = 64


def make(fmt="mxfp4", heads=64, rows=6, ctx=700, k=64, decode=False, batch=2, next_n=1, paged=True,
         generator="gaussian", weights_dtype=torch.float32, seed=0, device="cpu"):
    g = torch.Generator().manual_seed(seed)
    requests = batch if decode else 1
    n_rows = batch * next_n if decode else rows
    tokens_per_req = -(-ctx // PAGE) * PAGE
    keys = torch.randn(requests * tokens_per_req, 128, generator=g)
    if generator == "ties":  # keys from 8 vectors: runs of equal scores
        keys = keys[torch.randint(0, 8, (keys.shape[0],), generator=g)]
    elif generator == "plateau":  # most keys exactly zero: plateaus of +0 scores
        keys = keys * (torch.rand(keys.shape[0], 1, generator=g) < 0.1)
    q = torch.randn(n_rows, heads, 128, generator=g)
    w = torch.randn(n_rows, heads, generator=g) * heads ** -0.5 * 128 ** -0.5
    if fmt == "fp8_e4m3":
        kv, ks = quant.fp8_rows(keys)
        k_deq = kv.float() * ks[:, None]
        pool = quant.fp8_pool(kv, ks, PAGE)
        q8, qs = quant.fp8_rows(q)
        q_in, q_scale, q_deq, w = q8, None, q8.float(), w * qs
    else:
        kp, ksc, k_deq = quant.mxfp4(keys)
        pool = quant.mxfp4_pool(kp, ksc, PAGE)
        q_in, q_scale, q_deq = quant.mxfp4(q)
    w = w.to(weights_dtype)
    pages_per_req = tokens_per_req // PAGE
    kw = dict(format=fmt, k=k, max_context=ctx, q_scale=q_scale)
    slot_of = None
    if paged:
        perm = torch.randperm(requests * pages_per_req, generator=g)
        table = perm.reshape(requests, pages_per_req).int()
        # the pool's page i holds keys[i * PAGE:(i + 1) * PAGE]; request b's logical page j is table[b, j]
        kw["page_table"] = table
        batch_of = (lambda r: r // next_n) if decode else (lambda r: 0)
        slot_of = lambda r, p: table[batch_of(r)][p // PAGE].long() * PAGE + p % PAGE  # noqa: E731
    if decode:
        lens = torch.randint(ctx // 2, ctx + 1, (batch,), generator=g).int()
        lens[0] = ctx
        kw.update(context_lens=lens, next_n=next_n)
        nn = torch.arange(next_n)
        ends = (lens[:, None] - (next_n - 1 - nn)[None, :]).reshape(-1).clamp(min=0).int()
        starts = torch.zeros_like(ends)
    else:
        i = torch.arange(rows)
        ends = torch.clamp((4 * ctx - rows + i + 1) // 4, min=1).int()
        starts = torch.zeros_like(ends)
        kw.update(window_start=starts, window_end=ends)
    dev = torch.device(device)
    args = (q_in.to(dev), w.to(dev), pool.to(dev))
    kw = {key: (v.to(dev) if isinstance(v, torch.Tensor) else v) for key, v in kw.items()}
    ref = dict(q_deq=q_deq, k_deq=k_deq, w=w.float(), starts=starts, ends=ends, slot_of=slot_of)
    return args, kw, ref
