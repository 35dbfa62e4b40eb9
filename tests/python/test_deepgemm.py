"""On a GPU machine with DeepGEMM importable (bench/peers/run.sh builds it): flashindexer.compat's
logits against DeepGEMM's on the same fp8 inputs, both within CONTRACT §4's production bound of
the fp64 scores, and the compat TopK over DeepGEMM's logits equal to our TopK bit for bit."""
import pytest
import torch

import flashindexer as fi
import reference
from flashindexer import compat, quant

deep_gemm = pytest.importorskip("deep_gemm")
pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")


def test_compat_logits_agree_with_deepgemm_within_the_production_bound():
    g = torch.Generator(device="cuda").manual_seed(1)
    n, s, h = 4096, 64, 64
    k8, ks = quant.fp8_rows(torch.randn(n, 128, device="cuda", generator=g))
    q8, qs = quant.fp8_rows(torch.randn(s, h, 128, device="cuda", generator=g))
    w = (torch.randn(s, h, device="cuda", generator=g) * qs).contiguous()
    ends = torch.arange(n - s + 1, n + 1, dtype=torch.int32, device="cuda")
    starts = torch.zeros_like(ends)
    ours = compat.fp8_fp4_mqa_logits((q8, None), (k8, ks), w, starts, ends)
    theirs = deep_gemm.fp8_fp4_mqa_logits((q8, None), (k8, ks), w, starts, ends, clean_logits=True)[:, :n]
    cpu = lambda t: t.cpu()  # noqa: E731
    exact = reference.scores(cpu(q8).float(), cpu(k8).float() * cpu(ks)[:, None], cpu(w), cpu(starts), cpu(ends), n)
    m = reference.magnitudes(cpu(q8).float(), cpu(k8).float() * cpu(ks)[:, None], cpu(w), cpu(starts), cpu(ends), n)
    inside = torch.isfinite(exact)
    for name, x in (("flashindexer", ours), ("DeepGEMM", theirs)):
        err = (cpu(x).double() - exact).abs()[inside]
        assert (err <= 2.0 ** -8 * m[inside]).all(), f"{name}: worst |err|/M {(err / m[inside]).max():.3g}"
    top = compat.fast_topk_v2(theirs.contiguous(), ends - starts, 512, starts)
    direct = fi.topk(theirs.contiguous(), 512, window_start=starts, window_end=ends)
    assert torch.equal(top, direct.positions)
