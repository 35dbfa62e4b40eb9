"""PyTorch custom ops (namespace `flashindexer`) over the C ABI: CPU and CUDA tensors, fake
implementations for torch.compile, the caller's current stream, workspaces from torch's
caching allocator (or a caller-passed uint8 tensor), nothing that breaks CUDA-graph capture.

Tensors (docs/layouts.md; D = 128, H = 32 or 64):
  q            fp8_e4m3: [rows, H, 128] float8_e4m3fn or uint8; mxfp4: [rows, H, 64] uint8 (packed E2M1)
  q_scale      mxfp4 only: [rows, H, 4] uint8 (UE8M0)
  weights      [rows, H] float32 or bfloat16
  kv_pool      [num_pages, page_stride] uint8 (per page: page_size token values, then their scales)
  page_table   [num_requests, width] int32, or None (contiguous cache: slot = position)
  rows         ragged: window_start, window_end [rows] int32 (+ row_batch [rows] int32, default 0);
               decode: context_lens [num_requests] int32 with next_n, or [num_requests, next_n]
               int32 per-row lengths (DeepGEMM's form)
Outputs: positions, slots [rows, K] int32 (-1 padding), scores [rows, K] float32 (-inf padding),
counts [rows] int32, status [rows] int32 (the row status bits of docs/semantics.md)."""
from typing import NamedTuple, Optional, Tuple

import ctypes

import torch
from torch import Tensor

from . import _capi as C

D = 128
_OUT_OPS = ("positions", "slots", "scores", "counts", "status")


class IndexerTopK(NamedTuple):
    positions: Tensor
    slots: Tensor
    scores: Tensor
    counts: Tensor
    status: Tensor


# ---- argument checks: each names the argument, what it expects and what it got ---------------

def _fail(arg, expected, actual, exc=ValueError):
    raise exc(f"{arg}: expected {expected}, got {actual}")


def _tensor(arg, t, dtypes, ndim=None, device=None):
    if not isinstance(t, Tensor):
        _fail(arg, "a torch.Tensor", type(t).__name__, TypeError)
    if t.dtype not in dtypes:
        _fail(arg, " or ".join(str(d).replace("torch.", "") for d in dtypes), str(t.dtype).replace("torch.", ""),
              TypeError)
    if ndim is not None and t.dim() not in ((ndim,) if isinstance(ndim, int) else ndim):
        _fail(arg, f"{ndim} dimensions", f"{t.dim()} (shape {list(t.shape)})")
    if device is not None and t.device != device:
        _fail(arg, f"a tensor on {device}", f"one on {t.device}")
    if t.numel() and t.stride(-1) != 1:
        _fail(arg, "a contiguous last dimension (stride 1)", f"stride {t.stride(-1)}")


def _shape(arg, t, expected):
    if list(t.shape) != list(expected):
        _fail(arg, f"shape {list(expected)}", f"{list(t.shape)}")


def _one_of(arg, value, choices):
    if value not in choices:
        _fail(arg, " or ".join(repr(c) for c in choices), repr(value))


_I32 = (torch.int32,)


class _Rows(NamedTuple):
    form: str
    rows: int
    num_requests: int
    next_n: int
    row_batch: Optional[Tensor]
    window_start: Optional[Tensor]
    window_end: Optional[Tensor]
    context_lens: Optional[Tensor]


def _rows(device, row_batch, window_start, window_end, context_lens, next_n, num_requests) -> _Rows:
    """The row description of §2.3; DeepGEMM's [B, next_n] lengths become ragged rows."""
    if context_lens is not None:
        if window_start is not None or window_end is not None or row_batch is not None:
            _fail("rows", "either window_start/window_end (ragged) or context_lens (decode)", "both")
        _tensor("context_lens", context_lens, _I32, (1, 2), device)
        if context_lens.dim() == 1:
            if not 1 <= next_n <= 4:
                _fail("next_n", "1..4", next_n)
            b = context_lens.shape[0]
            return _Rows("decode", b * next_n, b, next_n, None, None, None, context_lens.contiguous())
        b, n = context_lens.shape
        if next_n not in (1, n):
            _fail("next_n", f"{n} (context_lens.shape[1]) or 1", next_n)
        rb = torch.arange(b, dtype=torch.int32, device=device).repeat_interleave(n)
        ends = context_lens.reshape(-1).contiguous()
        return _Rows("ragged", b * n, b, 1, rb, torch.zeros_like(ends), ends, None)
    if window_start is None or window_end is None:
        _fail("rows", "window_start and window_end (ragged) or context_lens (decode)", "neither")
    _tensor("window_start", window_start, _I32, 1, device)
    _tensor("window_end", window_end, _I32, 1, device)
    rows = window_start.shape[0]
    _shape("window_end", window_end, [rows])
    if row_batch is None:
        row_batch = torch.zeros(rows, dtype=torch.int32, device=device)
        nreq = 1 if num_requests is None else num_requests
    else:
        _tensor("row_batch", row_batch, _I32, 1, device)
        _shape("row_batch", row_batch, [rows])
        if num_requests is None:
            _fail("num_requests", "an int when row_batch is given (the requests it may name)", None)
        nreq = num_requests
    return _Rows("ragged", rows, nreq, 1, row_batch.contiguous(), window_start.contiguous(),
                 window_end.contiguous(), None)


def _set_rows(p, r: _Rows, max_context):
    p.max_context = max_context
    p.num_requests = r.num_requests
    if r.form == "decode":
        p.row_form, p.next_n, p.context_lens = C.ROW_FORMS["decode"], r.next_n, r.context_lens.data_ptr()
    else:
        p.row_form, p.num_rows = C.ROW_FORMS["ragged"], r.rows
        p.row_batch, p.window_start, p.window_end = (r.row_batch.data_ptr(), r.window_start.data_ptr(),
                                                     r.window_end.data_ptr())


def _set_pages(p, kv_pool_pages, page_size, page_table, device):
    p.page_size, p.num_pages = page_size, kv_pool_pages
    if page_table is not None:
        _tensor("page_table", page_table, _I32, 2, device)
        p.table, p.table_width, p.table_row_stride = page_table.data_ptr(), page_table.shape[1], page_table.stride(0)


class _Indexer(NamedTuple):
    problem: C.IndexerProblem
    rows: _Rows
    keep: Tuple  # tensors the problem points into, alive for the call


def _indexer_problem(q, q_scale, weights, kv_pool, page_table, row_batch, window_start, window_end, context_lens,
                     next_n, num_requests, max_context, page_size, k, format, order, accuracy, weight_scale):
    _one_of("format", format, tuple(C.FORMATS))
    _one_of("order", order, tuple(C.ORDERS))
    _one_of("accuracy", accuracy, tuple(C.ACCURACIES))
    mx = format == "mxfp4"
    _tensor("kv_pool", kv_pool, (torch.uint8,), 2)
    dev = kv_pool.device
    _tensor("q", q, (torch.uint8,) if mx else (torch.uint8, torch.float8_e4m3fn), 3, dev)
    r = _rows(dev, row_batch, window_start, window_end, context_lens, next_n, num_requests)
    heads = q.shape[1]
    _shape("q", q, [r.rows, heads, D // 2 if mx else D])
    _tensor("weights", weights, (torch.float32, torch.bfloat16), 2, dev)
    _shape("weights", weights, [r.rows, heads])
    p = C.new_problem()
    p.format = C.FORMATS[format]
    p.pool, p.page_stride = kv_pool.data_ptr(), kv_pool.stride(0)
    _set_pages(p, kv_pool.shape[0], page_size, page_table, dev)
    p.num_heads = heads
    p.q, p.q_row_stride, p.q_head_stride = q.data_ptr(), q.stride(0), q.stride(1)
    if mx:
        if q_scale is None:
            _fail("q_scale", "a [rows, H, 4] uint8 tensor for mxfp4", None)
        _tensor("q_scale", q_scale, (torch.uint8,), 3, dev)
        _shape("q_scale", q_scale, [r.rows, heads, D // 32])
        p.q_scale, p.q_scale_row_stride, p.q_scale_head_stride = q_scale.data_ptr(), q_scale.stride(0), q_scale.stride(1)
    elif q_scale is not None:
        _fail("q_scale", "None for fp8_e4m3 (fold the q scale into the weights)", "a tensor")
    p.weight_type = C.WEIGHT_TYPES["bf16" if weights.dtype == torch.bfloat16 else "fp32"]
    p.weights, p.weights_row_stride = weights.data_ptr(), weights.stride(0)
    p.weight_scale = weight_scale
    _set_rows(p, r, max_context)
    p.k, p.order, p.accuracy = k, C.ORDERS[order], C.ACCURACIES[accuracy]
    return _Indexer(p, r, (r.row_batch, r.window_start, r.window_end, r.context_lens))


def _launch(device, workspace, nbytes):
    if device.type == "cuda":
        backend, stream = "cuda", torch.cuda.current_stream(device).cuda_stream
    elif device.type == "cpu":
        backend, stream = "cpu", None
    else:
        _fail("device", "cpu or cuda tensors", device.type)
    if workspace is None or nbytes == 0:
        workspace = torch.empty(max(nbytes, 16), dtype=torch.uint8, device=device)
    else:
        _tensor("workspace", workspace, (torch.uint8,), 1, device)
        if workspace.numel() < nbytes:
            _fail("workspace", f">= {nbytes} bytes (workspace_size)", f"{workspace.numel()}")
    return C.new_launch(backend, stream=stream, workspace=workspace.data_ptr(), workspace_bytes=nbytes), workspace


def _workspace_bytes(problem, op, device):
    n = ctypes.c_size_t(0)
    probe = C.new_launch("cuda" if device.type == "cuda" else "cpu")
    C.call(C.lib().fi_workspace_size, ctypes.byref(problem), C.OPERATORS[op], ctypes.byref(probe), ctypes.byref(n))
    return n.value


def _topk_outputs(positions, slots, scores, counts, status):
    o = C.TopKOutputs()
    o.positions, o.positions_row_stride = positions.data_ptr(), positions.stride(0)
    o.slots, o.slots_row_stride = slots.data_ptr(), slots.stride(0)
    o.scores, o.scores_row_stride = scores.data_ptr(), scores.stride(0)
    o.counts, o.status = counts.data_ptr(), status.data_ptr()
    return o


def _check_outputs(rows, k, device, positions, slots, scores, counts, status):
    for name, t, dt, shape in (("positions", positions, torch.int32, [rows, k]), ("slots", slots, torch.int32, [rows, k]),
                               ("scores", scores, torch.float32, [rows, k]), ("counts", counts, torch.int32, [rows]),
                               ("status", status, torch.int32, [rows])):
        _tensor(name, t, (dt,), len(shape), device)
        _shape(name, t, shape)


def _new_outputs(rows, k, device):
    return (torch.empty(rows, k, dtype=torch.int32, device=device), torch.empty(rows, k, dtype=torch.int32, device=device),
            torch.empty(rows, k, dtype=torch.float32, device=device), torch.empty(rows, dtype=torch.int32, device=device),
            torch.empty(rows, dtype=torch.int32, device=device))


def _rows_of(window_start, context_lens, next_n):
    if context_lens is not None:
        return context_lens.shape[0] * (next_n if context_lens.dim() == 1 else context_lens.shape[1])
    return window_start.shape[0]


# ---- flashindexer::indexer_topk (fused) --------------------------------------------------------

def _indexer_topk_into(outs, q, q_scale, weights, kv_pool, page_table, row_batch, window_start, window_end,
                       context_lens, next_n, num_requests, max_context, page_size, k, format, order, accuracy,
                       weight_scale, workspace):
    ind = _indexer_problem(q, q_scale, weights, kv_pool, page_table, row_batch, window_start, window_end,
                           context_lens, next_n, num_requests, max_context, page_size, k, format, order, accuracy,
                           weight_scale)
    _check_outputs(ind.rows.rows, k, kv_pool.device, *outs)
    nbytes = _workspace_bytes(ind.problem, "fused_topk", kv_pool.device)
    launch, ws = _launch(kv_pool.device, workspace, nbytes)
    o = _topk_outputs(*outs)
    C.call(C.lib().fi_fused_topk, ctypes.byref(ind.problem), ctypes.byref(o), ctypes.byref(launch))


@torch.library.custom_op("flashindexer::indexer_topk", mutates_args=())
def indexer_topk_op(q: Tensor, q_scale: Optional[Tensor], weights: Tensor, kv_pool: Tensor,
                    page_table: Optional[Tensor], row_batch: Optional[Tensor], window_start: Optional[Tensor],
                    window_end: Optional[Tensor], context_lens: Optional[Tensor], next_n: int,
                    num_requests: Optional[int], max_context: int, page_size: int, k: int, format: str, order: str,
                    accuracy: str, weight_scale: float, workspace: Optional[Tensor]
                    ) -> Tuple[Tensor, Tensor, Tensor, Tensor, Tensor]:
    outs = _new_outputs(_rows_of(window_start, context_lens, next_n), k, kv_pool.device)
    _indexer_topk_into(outs, q, q_scale, weights, kv_pool, page_table, row_batch, window_start, window_end,
                       context_lens, next_n, num_requests, max_context, page_size, k, format, order, accuracy,
                       weight_scale, workspace)
    return outs


@indexer_topk_op.register_fake
def _(q, q_scale, weights, kv_pool, page_table, row_batch, window_start, window_end, context_lens, next_n,
      num_requests, max_context, page_size, k, format, order, accuracy, weight_scale, workspace):
    return _new_outputs(_rows_of(window_start, context_lens, next_n), k, kv_pool.device)


@torch.library.custom_op("flashindexer::indexer_topk_out", mutates_args=_OUT_OPS)
def indexer_topk_out_op(q: Tensor, q_scale: Optional[Tensor], weights: Tensor, kv_pool: Tensor,
                        page_table: Optional[Tensor], row_batch: Optional[Tensor], window_start: Optional[Tensor],
                        window_end: Optional[Tensor], context_lens: Optional[Tensor], next_n: int,
                        num_requests: Optional[int], max_context: int, page_size: int, k: int, format: str,
                        order: str, accuracy: str, weight_scale: float, workspace: Optional[Tensor],
                        positions: Tensor, slots: Tensor, scores: Tensor, counts: Tensor, status: Tensor) -> None:
    _indexer_topk_into((positions, slots, scores, counts, status), q, q_scale, weights, kv_pool, page_table,
                       row_batch, window_start, window_end, context_lens, next_n, num_requests, max_context,
                       page_size, k, format, order, accuracy, weight_scale, workspace)


@indexer_topk_out_op.register_fake
def _(*args):
    return None


# ---- flashindexer::indexer_logits (dense) ------------------------------------------------------

@torch.library.custom_op("flashindexer::indexer_logits", mutates_args=())
def indexer_logits_op(q: Tensor, q_scale: Optional[Tensor], weights: Tensor, kv_pool: Tensor,
                      page_table: Optional[Tensor], row_batch: Optional[Tensor], window_start: Optional[Tensor],
                      window_end: Optional[Tensor], context_lens: Optional[Tensor], next_n: int,
                      num_requests: Optional[int], max_context: int, page_size: int, format: str, accuracy: str,
                      weight_scale: float, workspace: Optional[Tensor]) -> Tuple[Tensor, Tensor]:
    ind = _indexer_problem(q, q_scale, weights, kv_pool, page_table, row_batch, window_start, window_end,
                           context_lens, next_n, num_requests, max_context, page_size, 1, format, "position",
                           accuracy, weight_scale)
    dev = kv_pool.device
    logits = torch.empty(ind.rows.rows, max_context, dtype=torch.float32, device=dev)
    status = torch.empty(ind.rows.rows, dtype=torch.int32, device=dev)
    lo = C.LogitsOutput()
    lo.logits, lo.row_stride, lo.status = logits.data_ptr(), max(max_context, 1), status.data_ptr()
    nbytes = _workspace_bytes(ind.problem, "dense_logits", dev)
    launch, ws = _launch(dev, workspace, nbytes)
    C.call(C.lib().fi_dense_logits, ctypes.byref(ind.problem), ctypes.byref(lo), ctypes.byref(launch))
    return logits, status


@indexer_logits_op.register_fake
def _(q, q_scale, weights, kv_pool, page_table, row_batch, window_start, window_end, context_lens, next_n,
      num_requests, max_context, page_size, format, accuracy, weight_scale, workspace):
    rows = _rows_of(window_start, context_lens, next_n)
    return (torch.empty(rows, max_context, dtype=torch.float32, device=kv_pool.device),
            torch.empty(rows, dtype=torch.int32, device=kv_pool.device))


# ---- flashindexer::topk (over logits) ----------------------------------------------------------

def _topk_into(outs, logits, row_batch, window_start, window_end, context_lens, next_n, num_requests, max_context,
               page_table, page_size, num_pages, k, order, workspace):
    _one_of("order", order, tuple(C.ORDERS))
    _tensor("logits", logits, (torch.float32,), 2)
    dev = logits.device
    r = _rows(dev, row_batch, window_start, window_end, context_lens, next_n, num_requests)
    if logits.shape[0] != r.rows or logits.shape[1] < max_context:
        _fail("logits", f"shape [{r.rows}, >= {max_context}] (rows, max_context)", list(logits.shape))
    _check_outputs(r.rows, k, dev, *outs)
    t = C.new_topk_problem()
    t.logits, t.logits_row_stride = logits.data_ptr(), logits.stride(0)
    _set_rows(t, r, max_context)
    _set_pages(t, num_pages, page_size, page_table, dev)
    t.k, t.order = k, C.ORDERS[order]
    n = ctypes.c_size_t(0)
    probe = C.new_launch("cuda" if dev.type == "cuda" else "cpu")
    C.call(C.lib().fi_topk_workspace_size, ctypes.byref(t), ctypes.byref(probe), ctypes.byref(n))
    launch, ws = _launch(dev, workspace, n.value)
    o = _topk_outputs(*outs)
    C.call(C.lib().fi_topk_over_logits, ctypes.byref(t), ctypes.byref(o), ctypes.byref(launch))


@torch.library.custom_op("flashindexer::topk", mutates_args=())
def topk_op(logits: Tensor, row_batch: Optional[Tensor], window_start: Optional[Tensor], window_end: Optional[Tensor],
            context_lens: Optional[Tensor], next_n: int, num_requests: Optional[int], max_context: int,
            page_table: Optional[Tensor], page_size: int, num_pages: int, k: int, order: str,
            workspace: Optional[Tensor]) -> Tuple[Tensor, Tensor, Tensor, Tensor, Tensor]:
    outs = _new_outputs(_rows_of(window_start, context_lens, next_n), k, logits.device)
    _topk_into(outs, logits, row_batch, window_start, window_end, context_lens, next_n, num_requests, max_context,
               page_table, page_size, num_pages, k, order, workspace)
    return outs


@topk_op.register_fake
def _(logits, row_batch, window_start, window_end, context_lens, next_n, num_requests, max_context, page_table,
      page_size, num_pages, k, order, workspace):
    return _new_outputs(_rows_of(window_start, context_lens, next_n), k, logits.device)


# ---- the Python entry points -------------------------------------------------------------------

def indexer_topk(q: Tensor, weights: Tensor, kv_pool: Tensor, *, format: str, k: int, max_context: int,
                 q_scale: Optional[Tensor] = None, page_table: Optional[Tensor] = None, page_size: int = 64,
                 window_start: Optional[Tensor] = None, window_end: Optional[Tensor] = None,
                 row_batch: Optional[Tensor] = None, num_requests: Optional[int] = None,
                 context_lens: Optional[Tensor] = None, next_n: int = 1, weight_scale: float = 1.0,
                 order: str = "position", accuracy: str = "production", workspace: Optional[Tensor] = None,
                 out: Optional[IndexerTopK] = None) -> IndexerTopK:
    """Fused scoring + exact TopK (docs/semantics.md) without the [rows, context] score matrix.
    With out=IndexerTopK(...) of preallocated tensors the results are written in place."""
    args = (q, q_scale, weights, kv_pool, page_table, row_batch, window_start, window_end, context_lens, next_n,
            num_requests, max_context, page_size, k, format, order, accuracy, float(weight_scale), workspace)
    if out is not None:
        torch.ops.flashindexer.indexer_topk_out(*args, *out)
        return IndexerTopK(*out)
    return IndexerTopK(*torch.ops.flashindexer.indexer_topk(*args))


def indexer_logits(q: Tensor, weights: Tensor, kv_pool: Tensor, *, format: str, max_context: int,
                   q_scale: Optional[Tensor] = None, page_table: Optional[Tensor] = None, page_size: int = 64,
                   window_start: Optional[Tensor] = None, window_end: Optional[Tensor] = None,
                   row_batch: Optional[Tensor] = None, num_requests: Optional[int] = None,
                   context_lens: Optional[Tensor] = None, next_n: int = 1, weight_scale: float = 1.0,
                   accuracy: str = "production", workspace: Optional[Tensor] = None) -> Tuple[Tensor, Tensor]:
    """Dense logits [rows, max_context] float32 (-inf outside each window) and the row status."""
    return torch.ops.flashindexer.indexer_logits(q, q_scale, weights, kv_pool, page_table, row_batch, window_start,
                                                 window_end, context_lens, next_n, num_requests, max_context,
                                                 page_size, format, accuracy, float(weight_scale), workspace)


def topk(logits: Tensor, k: int, *, max_context: Optional[int] = None, window_start: Optional[Tensor] = None,
         window_end: Optional[Tensor] = None, row_batch: Optional[Tensor] = None,
         num_requests: Optional[int] = None, context_lens: Optional[Tensor] = None, next_n: int = 1,
         page_table: Optional[Tensor] = None, page_size: int = 64, num_pages: Optional[int] = None,
         order: str = "position", workspace: Optional[Tensor] = None) -> IndexerTopK:
    """Exact TopK over float32 logits (docs/semantics.md), any fp32 input. Without a page table the
    slots equal the positions; num_pages then defaults to cover max_context."""
    if max_context is None:
        max_context = logits.shape[-1]
    if num_pages is None:
        num_pages = max(1, -(-max_context // page_size)) if page_table is None else 2 ** 31 - 1
    return IndexerTopK(*torch.ops.flashindexer.topk(logits, row_batch, window_start, window_end, context_lens, next_n,
                                                    num_requests, max_context, page_table, page_size, num_pages, k,
                                                    order, workspace))


def supports(q: Tensor, weights: Tensor, kv_pool: Tensor, *, format: str, k: int, max_context: int,
             operator: str = "fused_topk", **kw) -> Tuple[bool, str]:
    """(supported, reason): whether this call can run on the tensors' device; probe once at start-up."""
    try:
        ind = _indexer_problem(q, kw.get("q_scale"), weights, kv_pool, kw.get("page_table"), kw.get("row_batch"),
                               kw.get("window_start"), kw.get("window_end"), kw.get("context_lens"),
                               kw.get("next_n", 1), kw.get("num_requests"), max_context, kw.get("page_size", 64), k,
                               format, kw.get("order", "position"), kw.get("accuracy", "production"),
                               float(kw.get("weight_scale", 1.0)))
        _one_of("operator", operator, ("fused_topk", "dense_logits"))
        backend = "cuda" if kv_pool.device.type == "cuda" else "cpu"
        C.call(C.lib().fi_can_implement, ctypes.byref(ind.problem), C.OPERATORS[operator],
               ctypes.byref(C.new_launch(backend)))
        return True, "ok"
    except (ValueError, TypeError, C.FlashIndexerError) as e:
        return False, str(e)
