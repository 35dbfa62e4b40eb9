"""flashindexer.compat: the engines' signatures give the semantics its table promises."""
import torch

import flashindexer as fi
import reference
from flashindexer import compat, quant
from problems import make


def test_fast_topk_v2_indices_are_relative_to_the_row_start(device):
    g = torch.Generator().manual_seed(3)
    score = torch.randn(4, 1000, generator=g)
    starts = torch.tensor([0, 100, 500, 990], dtype=torch.int32)
    lengths = torch.tensor([1000, 300, 500, 10], dtype=torch.int32)
    got = compat.fast_topk_v2(score.to(device), lengths.to(device), 64, starts.to(device)).cpu()
    pos, counts, _ = reference.topk(score, starts, starts + lengths, 64)
    want = torch.where(pos >= 0, pos - starts[:, None], -1)
    assert torch.equal(got, want)
    assert (got[3, 10:] == -1).all() and (got[3, :10] >= 0).all()
    no_starts = compat.fast_topk_v2(score.to(device), lengths.to(device), 64).cpu()
    pos0, _, _ = reference.topk(score, torch.zeros(4, dtype=torch.int32), lengths, 64)
    assert torch.equal(no_starts, pos0)


def test_fast_topk_transform_fused_maps_through_the_page_size_one_table(device):
    g = torch.Generator().manual_seed(4)
    score = torch.randn(5, 800, generator=g)
    lengths = torch.tensor([800, 700, 600, 50, 800], dtype=torch.int32)
    cu = torch.tensor([0, 2, 5], dtype=torch.int32)  # rows 0-1 request 0, rows 2-4 request 1
    table = torch.randperm(2 * 800, generator=g).int().reshape(2, 800)
    got = compat.fast_topk_transform_fused(score.to(device), lengths.to(device), table.to(device), cu.to(device),
                                           128).cpu()
    rel = compat.fast_topk_v2(score, lengths, 128)
    req = torch.tensor([0, 0, 1, 1, 1])
    want = torch.where(rel >= 0, table[req[:, None], rel.clamp(min=0).long()], -1)
    assert torch.equal(got, want)
    assert (got[3, 50:] == -1).all()


def test_vllm_top_k_per_row_write_in_place(device):
    g = torch.Generator().manual_seed(5)
    logits = torch.randn(6, 1024, generator=g)
    starts = torch.tensor([0, 5, 10, 0, 500, 1000], dtype=torch.int32)
    ends = torch.tensor([1024, 900, 700, 30, 1024, 1024], dtype=torch.int32)
    idx = torch.full((6, 256), 99, dtype=torch.int32, device=device)
    compat.top_k_per_row_prefill(logits.to(device), starts.to(device), ends.to(device), idx, 6, 1024, 1)
    pos, _, _ = reference.topk(logits, starts, ends, 256)
    assert torch.equal(idx.cpu(), torch.where(pos >= 0, pos - starts[:, None], -1))
    seq_lens = torch.tensor([1024, 600, 300], dtype=torch.int32)
    idx = torch.full((6, 256), 99, dtype=torch.int32, device=device)
    compat.top_k_per_row_decode(logits.to(device), 2, seq_lens.to(device), idx, 6, 1024, 1)
    dends = torch.tensor([1023, 1024, 599, 600, 299, 300], dtype=torch.int32)
    pos, _, _ = reference.topk(logits, torch.zeros(6, dtype=torch.int32), dends, 256)
    assert torch.equal(idx.cpu(), pos)


def test_deepgemm_prefill_logits_match_the_operator_and_the_bound(device):
    g = torch.Generator().manual_seed(6)
    n, s, h = 500, 6, 64
    k8, ks = quant.fp8_rows(torch.randn(n, 128, generator=g))
    q8, qs = quant.fp8_rows(torch.randn(s, h, 128, generator=g))
    w = torch.randn(s, h, generator=g) * qs
    starts = torch.tensor([0, 0, 10, 20, 400, 0], dtype=torch.int32)
    ends = torch.tensor([500, 100, 300, 21, 500, 0], dtype=torch.int32)
    d = lambda t: t.to(device)  # noqa: E731
    got = compat.fp8_fp4_mqa_logits((d(q8), None), (d(k8), d(ks)), d(w), d(starts), d(ends)).cpu()
    exact = reference.scores(q8.float(), k8.float() * ks[:, None], w, starts, ends, n)
    m = reference.magnitudes(q8.float(), k8.float() * ks[:, None], w, starts, ends, n)
    inside = torch.isfinite(exact)
    assert torch.equal(torch.isinf(got) & (got < 0), ~inside)
    assert ((got.double() - exact).abs()[inside] <= 2.0 ** -8 * m[inside]).all()
    rel = compat.fp8_fp4_mqa_logits((d(q8), None), (d(k8), d(ks)), d(w), d(starts), d(ends), max_seqlen_k=300).cpu()
    for i in range(s):
        a, b = int(starts[i]), int(ends[i])
        assert torch.equal(rel[i, :min(b - a, 300)], got[i, a:min(b, a + 300)])
    bf = compat.fp8_fp4_mqa_logits((d(q8), None), (d(k8), d(ks)), d(w), d(starts), d(ends),
                                   logits_dtype=torch.bfloat16)
    assert bf.dtype == torch.bfloat16


def test_deepgemm_paged_logits_read_the_cache_in_place(device):
    args, kw, ref = make("fp8_e4m3", decode=True, batch=3, next_n=2, device=device)
    q, w, pool = args
    cache = pool.view(pool.shape[0], 64, 1, 132)  # DeepGEMM's [num_blocks, block_kv, 1, D + 4]
    meta = compat.get_paged_mqa_logits_metadata(kw["context_lens"], 64, 132)
    assert meta.shape == (133, 2)
    got = compat.fp8_fp4_paged_mqa_logits((q.reshape(3, 2, 64, 128), None), cache, w, kw["context_lens"],
                                          kw["page_table"], meta, kw["max_context"])
    want, _ = fi.indexer_logits(q, w, pool, format="fp8_e4m3", max_context=kw["max_context"],
                                page_table=kw["page_table"], context_lens=kw["context_lens"], next_n=2)
    assert torch.equal(got.view(torch.int32), want.view(torch.int32))
