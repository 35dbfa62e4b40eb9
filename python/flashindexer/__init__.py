"""flashindexer: the DeepSeek sparse-attention lightning indexer, fused scoring + exact TopK.

    import flashindexer as fi
    out = fi.indexer_topk(q, weights, kv_pool, format="fp8_e4m3", k=2048, max_context=L,
                          page_table=table, context_lens=lens)      # torch tensors, CPU or CUDA

The ops are torch custom ops (torch.ops.flashindexer.*) over the C library's ABI, so one build
serves any torch >= 2.4. `flashindexer.quant` quantizes as the models do; `flashindexer.compat`
offers DeepGEMM's, SGLang's and vLLM's signatures; `flashindexer.integrations.sglang` the
fused indexer adapter."""
from ._capi import FlashIndexerArgumentError, FlashIndexerError, FlashIndexerUnsupported  # noqa: F401

__version__ = "0.1.0"

try:
    import torch  # noqa: F401
except ImportError:  # the C ABI (flashindexer._capi) works without torch
    pass
else:
    from .ops import IndexerTopK, indexer_logits, indexer_topk, supports, topk  # noqa: F401
