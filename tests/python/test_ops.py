"""The torch ops against the pure-PyTorch reference of CONTRACT §1 and §3, opcheck, torch.compile,
and bad inputs (each error names the argument, the expected and the actual value)."""
import pytest
import torch

import flashindexer as fi
import reference
from problems import make

MODES = {"production": 2.0 ** -8, "exact": 2e-4}


@pytest.mark.parametrize("fmt", ["mxfp4", "fp8_e4m3"])
@pytest.mark.parametrize("decode", [False, True])
@pytest.mark.parametrize("accuracy", list(MODES))
@pytest.mark.parametrize("generator", ["gaussian", "ties", "plateau"])
def test_scores_within_the_modes_bound_and_fused_equals_dense_then_topk(device, fmt, decode, accuracy, generator):
    args, kw, ref = make(fmt, decode=decode, next_n=2, generator=generator, device=device)
    logits, status = fi.indexer_logits(*args, accuracy=accuracy, **{k: v for k, v in kw.items() if k != "k"})
    assert (status == 0).all()
    exact = reference.scores(ref["q_deq"], ref["k_deq"], ref["w"], ref["starts"], ref["ends"], kw["max_context"],
                             ref["slot_of"])
    m = reference.magnitudes(ref["q_deq"], ref["k_deq"], ref["w"], ref["starts"], ref["ends"], kw["max_context"],
                             ref["slot_of"])
    inside = torch.isfinite(exact)
    got = logits.cpu().double()
    assert torch.equal(torch.isinf(got) & (got < 0), ~inside), "-inf exactly outside the windows"
    err = (got - exact).abs()[inside]
    assert (err <= MODES[accuracy] * m[inside]).all(), f"worst |err|/M {(err / m[inside]).max():.3g}"

    out = fi.indexer_topk(*args, accuracy=accuracy, **kw)
    want_pos, want_counts, want_scores = reference.topk(logits.cpu(), ref["starts"], ref["ends"], kw["k"])
    assert torch.equal(out.positions.cpu(), want_pos)
    assert torch.equal(out.counts.cpu(), want_counts)
    assert torch.equal(out.scores.cpu().view(torch.int32), want_scores.view(torch.int32))
    assert (out.counts.cpu() == torch.clamp(ref["ends"] - ref["starts"], 0, kw["k"])).all()
    if "page_table" in kw:  # slots: the positions through the page table, -1 padding
        p = out.positions.cpu().long()
        for r in range(p.shape[0]):
            valid = p[r] >= 0
            want = ref["slot_of"](r, p[r][valid]).int()
            assert torch.equal(out.slots.cpu()[r][valid], want)
            assert (out.slots.cpu()[r][~valid] == -1).all()


@pytest.mark.parametrize("order", ["position", "rank"])
@pytest.mark.parametrize("dist", ["gaussian", "ties", "zeros", "signed_zeros", "specials", "ascending",
                                  "descending", "ulp", "offset", "tiny"])
def test_topk_is_exact_on_adversarial_rows(device, order, dist):
    g = torch.Generator().manual_seed(7)
    rows, width, k = 5, 3000, 256
    x = torch.randn(rows, width, generator=g)
    if dist == "ties":
        x = torch.randint(0, 4, (rows, width), generator=g).float()
    elif dist == "zeros":
        x = torch.where(torch.rand(rows, width, generator=g) < 0.9, torch.zeros_like(x), x.abs())
    elif dist == "signed_zeros":
        x = torch.where(torch.rand(rows, width, generator=g) < 0.5, torch.zeros_like(x), -torch.zeros_like(x))
    elif dist == "specials":
        pick = torch.randint(0, 6, (rows, width), generator=g)
        vals = torch.tensor([float("nan"), float("inf"), float("-inf"), 0.0, -0.0, 1.0])
        x = torch.where(torch.rand(rows, width, generator=g) < 0.7, vals[pick], x)
    elif dist == "ascending":
        x = torch.sort(x, dim=1).values
    elif dist == "descending":
        x = torch.sort(x, dim=1, descending=True).values
    elif dist == "ulp":
        x = (torch.full((rows, width), 1.0).view(torch.int32) + torch.randint(0, 8, (rows, width), generator=g).int()
             ).view(torch.float32)
    elif dist == "offset":
        x = x + 100.0
    elif dist == "tiny":
        x = x * 1e-30
    starts = torch.tensor([0, 10, 0, 2900, 5], dtype=torch.int32)
    ends = torch.tensor([3000, 2500, 200, 3000, 5], dtype=torch.int32)
    out = fi.topk(x.to(device), k, window_start=starts.to(device), window_end=ends.to(device), order=order)
    want_pos, want_counts, want_scores = reference.topk(x, starts, ends, k, order)
    assert torch.equal(out.positions.cpu(), want_pos)
    assert torch.equal(out.counts.cpu(), want_counts)
    assert torch.equal(out.scores.cpu().view(torch.int32), want_scores.view(torch.int32))
    assert torch.equal(out.slots.cpu(), want_pos), "no page table: slots are the positions"


def test_deepgemm_style_two_dimensional_lengths_equal_decode_rows(device):
    args, kw, _ = make("fp8_e4m3", decode=True, batch=3, next_n=2, device=device)
    lens = kw["context_lens"]
    a = fi.indexer_topk(*args, **kw)
    lens2d = torch.stack([lens - 1, lens], 1).int()
    kw2 = dict(kw, context_lens=lens2d)
    b = fi.indexer_topk(*args, **kw2)
    for x, y in zip(a, b):
        assert torch.equal(x, y)


def test_out_tensors_are_written_in_place_and_workspace_can_be_passed(device):
    args, kw, _ = make("mxfp4", device=device)
    want = fi.indexer_topk(*args, **kw)
    rows, k = want.positions.shape
    out = fi.IndexerTopK(torch.full_like(want.positions, 7), torch.full_like(want.slots, 7),
                         torch.full_like(want.scores, 7.0), torch.full_like(want.counts, 7),
                         torch.full_like(want.status, 7))
    ws = torch.empty(1 << 22, dtype=torch.uint8, device=device)
    got = fi.indexer_topk(*args, out=out, workspace=ws, **kw)
    assert got.positions.data_ptr() == out.positions.data_ptr()
    for x, y in zip(got, want):
        assert torch.equal(x, y)


def test_opcheck_every_op():
    args, kw, _ = make("mxfp4", rows=4, ctx=300, k=32)
    q, w, pool = args
    base = (q, kw["q_scale"], w, pool, kw["page_table"], None, kw["window_start"], kw["window_end"], None, 1, None,
            kw["max_context"], 64)
    torch.library.opcheck(torch.ops.flashindexer.indexer_topk.default,
                          base + (kw["k"], "mxfp4", "position", "production", 1.0, None))
    torch.library.opcheck(torch.ops.flashindexer.indexer_logits.default, base + ("mxfp4", "exact", 1.0, None))
    logits, _ = fi.indexer_logits(q, w, pool, **{k: v for k, v in kw.items() if k != "k"})
    torch.library.opcheck(torch.ops.flashindexer.topk.default,
                          (logits, None, kw["window_start"], kw["window_end"], None, 1, None, kw["max_context"],
                           kw["page_table"], 64, pool.shape[0], kw["k"], "rank", None))
    outs = tuple(torch.empty_like(t) for t in fi.indexer_topk(q, w, pool, **kw))
    torch.library.opcheck(torch.ops.flashindexer.indexer_topk_out.default,
                          base + (kw["k"], "mxfp4", "position", "production", 1.0, None) + outs)


def test_torch_compile_fullgraph_traces_the_ops():
    args, kw, _ = make("fp8_e4m3", decode=True, batch=2, next_n=1)

    def step(q, w, pool, lens, table):
        out = fi.indexer_topk(q, w, pool, format="fp8_e4m3", k=kw["k"], max_context=kw["max_context"],
                              context_lens=lens, page_table=table)
        return out.positions + 0, out.slots

    compiled = torch.compile(step, fullgraph=True, backend="eager")
    a = compiled(*args, kw["context_lens"], kw["page_table"])
    b = step(*args, kw["context_lens"], kw["page_table"])
    assert torch.equal(a[0], b[0]) and torch.equal(a[1], b[1])


def _errors_of(fn):
    with pytest.raises((ValueError, TypeError, NotImplementedError)) as e:
        fn()
    return str(e.value)


def test_bad_inputs_name_the_argument_expected_and_actual():
    args, kw, _ = make("mxfp4", rows=4, ctx=300, k=32)
    q, w, pool = args
    call = lambda **over: fi.indexer_topk(*(over.pop("args", (q, w, pool))), **dict(kw, **over))  # noqa: E731
    assert "q: expected uint8, got float32" in _errors_of(lambda: call(args=(q.float(), w, pool)))
    assert "weights: expected float32 or bfloat16, got int32" in _errors_of(lambda: call(args=(q, w.int(), pool)))
    assert "weights: expected shape [4, 64], got [4, 32]" in _errors_of(lambda: call(args=(q, w[:, :32], pool)))
    assert "q_scale: expected a [rows, H, 4] uint8 tensor for mxfp4, got None" in _errors_of(
        lambda: call(q_scale=None))
    assert "format: expected 'fp8_e4m3' or 'mxfp4', got 'nvfp4'" in _errors_of(lambda: call(format="nvfp4"))
    assert "accuracy: expected 'exact' or 'production', got 'fp32'" in _errors_of(lambda: call(accuracy="fp32"))
    assert "window_end: expected int32, got int64" in _errors_of(lambda: call(window_end=kw["window_end"].long()))
    assert "k: expected 1..65536, got 0" in _errors_of(lambda: call(k=0))
    assert "a contiguous last dimension" in _errors_of(lambda: call(args=(q.transpose(0, 1).contiguous().transpose(0, 1)[:, :, ::2], w, pool)))
    assert "rows: expected either window_start/window_end" in _errors_of(
        lambda: call(context_lens=torch.ones(2, dtype=torch.int32)))
    ok, why = fi.supports(q, w, pool, **dict(kw, k=100000))
    assert not ok and "k" in why
    ok, why = fi.supports(q, w, pool, **kw)
    assert ok and why == "ok"


def test_cuda_graph_replay_with_mutated_metadata(device):
    if device.type != "cuda":
        import pytest as _pytest
        _pytest.skip("CUDA graphs need a CUDA device")
    args, kw, _ = make("mxfp4", decode=True, batch=4, next_n=2, ctx=3000, k=256, device=device)
    lens = kw["context_lens"]
    out = fi.IndexerTopK(*(torch.empty_like(t) for t in fi.indexer_topk(*args, **kw)))
    ws = torch.empty(1 << 24, dtype=torch.uint8, device=device)
    fi.indexer_topk(*args, out=out, workspace=ws, **kw)  # warm up outside the capture
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        fi.indexer_topk(*args, out=out, workspace=ws, **kw)
    gen = torch.Generator().manual_seed(11)
    for _ in range(5):
        lens.copy_(torch.randint(1, 3001, lens.shape, generator=gen).int().to(device))
        g.replay()
        torch.cuda.synchronize()
        want = fi.indexer_topk(*args, **kw)
        for x, y in zip(out, want):
            assert torch.equal(x, y)
