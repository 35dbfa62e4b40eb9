"""The SGLang-style adapter (fused path, its logits + TopK fallback, the kill switch) and the
example layer under torch.compile(fullgraph=True)."""
import importlib.util
import os

import torch

from flashindexer.integrations.sglang import FusedIndexer
from problems import make

EXAMPLE = os.path.join(os.path.dirname(__file__), "..", "..", "examples", "indexer_layer.py")


def _adapter_outputs(indexer, form, args, kw, device):
    q, w, pool = args
    rows = q.shape[0]
    slots = torch.full((rows, indexer.k), 7, dtype=torch.int32, device=device)
    idx = torch.full_like(slots, 7)
    if form == "decode":
        indexer.decode(q, kw["q_scale"], w, pool, kw["page_table"], kw["context_lens"], out_slots=slots,
                       out_indices=idx)
    else:
        req = torch.zeros(rows, dtype=torch.int32, device=device)
        indexer.prefill(q, kw["q_scale"], w, pool, kw["page_table"], req, kw["window_start"], kw["window_end"],
                        out_slots=slots, out_indices=idx)
    return slots, idx


def test_fused_path_and_fallback_write_the_same_slots(device, monkeypatch):
    for form in ("decode", "prefill"):
        for fmt in ("mxfp4", "fp8_e4m3"):
            args, kw, _ = make(fmt, decode=form == "decode", batch=2, next_n=2, device=device)
            fused = FusedIndexer(format=fmt, num_heads=64, k=kw["k"], max_context=kw["max_context"], device=device,
                                 next_n=2)
            assert fused.fused[form], fused.reason[form]
            monkeypatch.setenv("FLASHINDEXER_FUSED", "0")
            off = FusedIndexer(format=fmt, num_heads=64, k=kw["k"], max_context=kw["max_context"], device=device,
                               next_n=2)
            monkeypatch.delenv("FLASHINDEXER_FUSED")
            assert not off.fused[form] and "FLASHINDEXER_FUSED=0" in off.reason[form]
            a = _adapter_outputs(fused, form, args, kw, device)
            b = _adapter_outputs(off, form, args, kw, device)
            assert torch.equal(a[0], b[0]) and torch.equal(a[1], b[1])
            assert (a[0] != 7).all(), "every entry written (slot or -1 padding)"


def test_unsupported_shapes_fall_back_with_the_reason(device):
    ind = FusedIndexer(format="mxfp4", num_heads=48, k=512, max_context=4096, device=device)
    assert not ind.fused["decode"] and "num_heads" in ind.reason["decode"]


def test_example_layer_compiles_fullgraph():
    spec = importlib.util.spec_from_file_location("indexer_layer", EXAMPLE)
    ex = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(ex)
    tokens, page = 256, 64
    layer = ex.IndexerLayer(hidden=1024, k=64, fmt="mxfp4", page=page, max_context=tokens)
    pool = torch.zeros(tokens // page, page * 68, dtype=torch.uint8)
    table = torch.randperm(tokens // page).int()[None, :]
    pos = torch.arange(tokens)
    slots_of = table[0][pos // page].long() * page + pos % page
    ends = (pos + 1).int()
    h = torch.randn(tokens, 1024)
    with torch.no_grad():
        want = layer(h, pool.clone(), table, slots_of, torch.zeros_like(ends), ends)
        got = torch.compile(layer, fullgraph=True, backend="eager")(h, pool.clone(), table, slots_of,
                                                                    torch.zeros_like(ends), ends)
    assert torch.equal(want[0], got[0]) and torch.equal(want[1], got[1])
    assert int(want[1][-1]) == 64 and int(want[1][0]) == 1
