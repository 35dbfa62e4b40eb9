#!/usr/bin/env python3
"""flashindexer beside what engines run on Hopper today, same process, same GPU, same inputs.

Per point: DeepGEMM's sm90 indexer logits (fp8_fp4_mqa_logits / fp8_fp4_paged_mqa_logits, on
an fp8 copy of the keys for mxfp4 caches, as engines must on Hopper) followed by our TopK over
its logits; our fused operator and our dense logits + TopK, in production (the default) and
exact mode; the FP8 tensor floor (torch._scaled_mm 8192^3) and the copy floor of this run.
Quality on sampled rows: recall@K against the exact fp64 TopK of the dequantized inputs, and
DeepGEMM's calc_diff of the logits against fp64. One JSON line per measurement.

Prefill times are medians of CUDA-event-timed calls; decode times are per call of a CUDA graph
of calls over rotating pool copies (as servers replay decode). Needs torch with CUDA,
DeepGEMM on PYTHONPATH (../shared/peers/build_deepgemm.sh) and FLASHINDEXER_LIB pointing at
libflashindexer_c.so; start python with LD_PRELOAD of the system libstdc++ (DeepGEMM's JIT).
  usage: deepgemm_indexer.py [--points v32_prefill,...] [--iters 10] [--git SHA]"""
import argparse
import ctypes
import datetime
import json
import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))
from flashindexer import _capi as C  # noqa: E402
from flashindexer import quant  # noqa: E402

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from torch_timing import median_ms  # noqa: E402

H, D, PAGE = 64, 128, 64

# name: (preset, format, K, form, rows or batch, context, next_n)
POINTS = {
    "v32_prefill_8192_c65536": ("v32", "fp8_e4m3", 2048, "ragged", 8192, 65536, 1),
    "v4-flash_prefill_8192_c65536": ("v4-flash", "mxfp4", 512, "ragged", 8192, 65536, 1),
    "v4-pro_prefill_8192_c196608": ("v4-pro", "mxfp4", 1024, "ragged", 8192, 196608, 1),
    "v4-flash_decode_b64_n1_c65536": ("v4-flash", "mxfp4", 512, "decode", 64, 65536, 1),
    "v4-flash_decode_b1_n1_c65536": ("v4-flash", "mxfp4", 512, "decode", 1, 65536, 1),
    "v32_decode_b64_n1_c65536": ("v32", "fp8_e4m3", 2048, "decode", 64, 65536, 1),
    "v32_decode_b64_n2_c65536": ("v32", "fp8_e4m3", 2048, "decode", 64, 65536, 2),
}


# ---- one problem: the same inputs in our layout and in DeepGEMM's -------------------------

class Problem:
    def __init__(self, name, spec, seed=1):
        preset, fmt, k, form, n, ctx, next_n = spec
        self.name, self.fmt, self.k, self.form, self.ctx, self.next_n = name, fmt, k, form, ctx, next_n
        g = torch.Generator(device="cuda").manual_seed(seed)
        dev = "cuda"
        self.rows = n if form == "ragged" else n * next_n
        self.batch = 1 if form == "ragged" else n
        tokens = ctx if form == "ragged" else n * ctx  # decode: each request has its own keys
        k_f = torch.randn(tokens, D, generator=g, device=dev)
        q_f = torch.randn(self.rows, H, D, generator=g, device=dev)
        w = torch.randn(self.rows, H, generator=g, device=dev) * (H ** -0.5) * (D ** -0.5)
        if form == "ragged":  # causal C4 windows: row i is raw token 4 * ctx - rows + i
            i = torch.arange(self.rows, device=dev)
            self.ends = torch.clamp((4 * ctx - self.rows + i + 1) // 4, min=1).int()
            self.starts = torch.zeros_like(self.ends)
        else:
            self.lens = torch.full((n,), ctx, dtype=torch.int32, device=dev)
            nn = torch.arange(next_n, device=dev)
            self.lens2d = (self.lens[:, None] - (next_n - 1 - nn)[None, :]).int().contiguous()
            self.ends = self.lens2d.reshape(-1)
            self.starts = torch.zeros_like(self.ends)
        self.num_pages = (tokens + PAGE - 1) // PAGE
        tpad = self.num_pages * PAGE
        if tpad > tokens:
            k_f = torch.cat([k_f, torch.zeros(tpad - tokens, D, device=dev)])
        if fmt == "fp8_e4m3":
            k8, ks = quant.fp8_rows(k_f)
            self.k_deq = k8.float() * ks[:, None]
            q8, qs = quant.fp8_rows(q_f)
            self.q_deq = q8.float()  # the q scale folds into the weights (V3.2 convention)
            self.w = (w * qs).contiguous()
            self.q = q8.contiguous()
            self.q_scale = None
            self.page_stride = PAGE * (D + 4)
            self.pool = quant.fp8_pool(k8, ks, PAGE)
            self.dg_k8, self.dg_ks = k8, ks
            self.dg_q, self.dg_w = q8, self.w
        else:
            kp, ksc, self.k_deq = quant.mxfp4(k_f)
            qp, qsc, qdq = quant.mxfp4(q_f.reshape(-1, D))
            self.q_deq = qdq.reshape(self.rows, H, D)
            self.q = qp.reshape(self.rows, H, D // 2).contiguous()
            self.q_scale = qsc.reshape(self.rows, H, 4).contiguous()
            self.w = w.contiguous()
            self.page_stride = PAGE * (D // 2 + 4)
            self.pool = quant.mxfp4_pool(kp, ksc, PAGE)
            # What an engine on Hopper feeds DeepGEMM: fp8 copies of the dequantized keys and queries.
            self.dg_k8, self.dg_ks = quant.fp8_rows(self.k_deq)
            dq8, dqs = quant.fp8_rows(self.q_deq)
            self.dg_q, self.dg_w = dq8.contiguous(), (w * dqs).contiguous()
        if form == "decode":  # pages of each request in random physical order
            perm = torch.randperm(self.num_pages, generator=g, device=dev).int()
            self.table = perm.reshape(n, self.num_pages // n).contiguous()
            self.dg_pool = self.pool if fmt == "fp8_e4m3" else self._dg_fp8_pool()
        else:
            self.table = None
        self.row_batch = torch.zeros(self.rows, dtype=torch.int32, device=dev)
        del k_f, q_f

    def _dg_fp8_pool(self):
        return quant.fp8_pool(self.dg_k8, self.dg_ks, PAGE)

    def c_problem(self, accuracy, pool=None):
        p = C.new_problem()
        p.format = C.FORMATS[self.fmt]
        p.page_size = PAGE
        p.pool = (pool if pool is not None else self.pool).data_ptr()
        p.page_stride = self.page_stride
        p.num_pages = self.num_pages
        if self.table is not None:
            p.table, p.table_width, p.table_row_stride = self.table.data_ptr(), self.table.shape[1], self.table.shape[1]
        p.num_heads = H
        p.weight_type = C.WEIGHT_TYPES["fp32"]
        p.q = self.q.data_ptr()
        p.q_row_stride, p.q_head_stride = self.q.stride(0), self.q.stride(1)
        if self.q_scale is not None:
            p.q_scale = self.q_scale.data_ptr()
            p.q_scale_row_stride, p.q_scale_head_stride = self.q_scale.stride(0), self.q_scale.stride(1)
        p.weights, p.weights_row_stride = self.w.data_ptr(), self.w.stride(0)
        self._rows(p)
        p.k = self.k
        p.accuracy = C.ACCURACIES[accuracy]
        return p

    def _rows(self, p):
        p.max_context = self.ctx
        if self.form == "ragged":
            p.row_form, p.num_requests, p.num_rows = C.ROW_FORMS["ragged"], 1, self.rows
            p.row_batch, p.window_start, p.window_end = (self.row_batch.data_ptr(), self.starts.data_ptr(),
                                                         self.ends.data_ptr())
        else:
            p.row_form, p.num_requests, p.next_n = C.ROW_FORMS["decode"], self.batch, self.next_n
            p.context_lens = self.lens.data_ptr()

    def c_topk(self, logits):
        t = C.new_topk_problem()
        t.logits, t.logits_row_stride = logits.data_ptr(), logits.stride(0)
        self._rows(t)
        t.page_size, t.num_pages = PAGE, self.num_pages
        if self.table is not None:
            t.table, t.table_width, t.table_row_stride = self.table.data_ptr(), self.table.shape[1], self.table.shape[1]
        t.k = self.k
        return t

    def flops(self):
        return 2.0 * H * D * float((self.ends - self.starts).clamp(min=0).sum())

    def key_bytes(self):
        """Every key read once: the pool (decode reads each request's keys once for its next_n rows)."""
        return float(self.num_pages * self.page_stride)


# ---- running our operators through the C ABI -----------------------------------------------

class Outputs:
    def __init__(self, rows, k):
        self.positions = torch.empty(rows, k, dtype=torch.int32, device="cuda")
        self.slots = torch.empty(rows, k, dtype=torch.int32, device="cuda")
        self.scores = torch.empty(rows, k, dtype=torch.float32, device="cuda")
        self.counts = torch.empty(rows, dtype=torch.int32, device="cuda")
        self.status = torch.empty(rows, dtype=torch.int32, device="cuda")

    def c(self):
        o = C.TopKOutputs()
        o.positions, o.positions_row_stride = self.positions.data_ptr(), self.positions.stride(0)
        o.slots, o.slots_row_stride = self.slots.data_ptr(), self.slots.stride(0)
        o.scores, o.scores_row_stride = self.scores.data_ptr(), self.scores.stride(0)
        o.counts, o.status = self.counts.data_ptr(), self.status.data_ptr()
        return o

    def poison(self):
        for t in (self.positions, self.slots, self.counts, self.status):
            t.fill_(-7)
        self.scores.fill_(float("nan"))

    def same(self, other):
        return all(torch.equal(a, b) for a, b in ((self.positions, other.positions), (self.slots, other.slots),
                                                   (self.counts, other.counts), (self.status, other.status))) and \
            torch.equal(self.scores.view(torch.int32), other.scores.view(torch.int32))


def launch(ws=None):
    return C.new_launch("cuda", stream=torch.cuda.current_stream().cuda_stream,
                        workspace=ws.data_ptr() if ws is not None and ws.numel() else None,
                        workspace_bytes=ws.numel() if ws is not None else 0)


def workspace(p, op):
    n = ctypes.c_size_t(0)
    C.call(C.lib().fi_workspace_size, ctypes.byref(p), C.OPERATORS[op], ctypes.byref(launch()), ctypes.byref(n))
    return torch.empty(max(n.value, 16), dtype=torch.uint8, device="cuda")


def topk_workspace(t):
    n = ctypes.c_size_t(0)
    C.call(C.lib().fi_topk_workspace_size, ctypes.byref(t), ctypes.byref(launch()), ctypes.byref(n))
    return torch.empty(max(n.value, 16), dtype=torch.uint8, device="cuda")


class Ours:
    """The fused operator and dense + TopK over one set of buffers, callable from Python."""

    def __init__(self, prob, accuracy, pool=None):
        self.p = prob.c_problem(accuracy, pool)
        self.ws_f = workspace(self.p, "fused_topk")
        self.ws_d = workspace(self.p, "dense_logits")
        self.logits = torch.empty(prob.rows, prob.ctx, dtype=torch.float32, device="cuda")
        self.lstatus = torch.empty(prob.rows, dtype=torch.int32, device="cuda")
        self.t = prob.c_topk(self.logits)
        self.ws_t = topk_workspace(self.t)
        self.fused_out, self.dense_out = Outputs(prob.rows, prob.k), Outputs(prob.rows, prob.k)
        self.fo, self.do = self.fused_out.c(), self.dense_out.c()
        lo = C.LogitsOutput()
        lo.logits, lo.row_stride, lo.status = self.logits.data_ptr(), self.logits.stride(0), self.lstatus.data_ptr()
        self.lo = lo

    def fused(self):
        C.call(C.lib().fi_fused_topk, ctypes.byref(self.p), ctypes.byref(self.fo), ctypes.byref(launch(self.ws_f)))

    def dense(self):
        C.call(C.lib().fi_dense_logits, ctypes.byref(self.p), ctypes.byref(self.lo), ctypes.byref(launch(self.ws_d)))

    def dense_topk(self):
        self.dense()
        C.call(C.lib().fi_topk_over_logits, ctypes.byref(self.t), ctypes.byref(self.do),
               ctypes.byref(launch(self.ws_t)))


class TopKOver:
    """Our TopK over someone else's logits [rows, >= ctx] (row stride taken from the tensor)."""

    def __init__(self, prob, logits):
        self.t = prob.c_topk(logits)
        self.ws = topk_workspace(self.t)
        self.out = Outputs(prob.rows, prob.k)
        self.o = self.out.c()

    def __call__(self):
        C.call(C.lib().fi_topk_over_logits, ctypes.byref(self.t), ctypes.byref(self.o), ctypes.byref(launch(self.ws)))


# ---- DeepGEMM ------------------------------------------------------------------------------

class DeepGemm:
    def __init__(self, prob, pool=None):
        import deep_gemm
        self.dg, self.prob = deep_gemm, prob
        if prob.form == "ragged":
            self.kw = dict(q=(prob.dg_q, None), kv=(prob.dg_k8, prob.dg_ks), weights=prob.dg_w,
                           cu_seq_len_k_start=prob.starts, cu_seq_len_k_end=prob.ends, clean_logits=False)
        else:
            pool = prob.dg_pool if pool is None else pool
            self.kw = dict(q=(prob.dg_q.reshape(prob.batch, prob.next_n, H, D), None),
                           kv_cache=pool.view(prob.num_pages, PAGE, 1, D + 4), weights=prob.dg_w,
                           context_lens=prob.lens2d, block_table=prob.table, max_context_len=prob.ctx,
                           clean_logits=False)
        self.logits = None

    def __call__(self):
        if self.prob.form == "ragged":
            self.logits = self.dg.fp8_fp4_mqa_logits(**self.kw)
        else:
            meta = self.dg.get_paged_mqa_logits_metadata(self.prob.lens2d, PAGE, self.dg.get_num_sms())
            self.logits = self.dg.fp8_fp4_paged_mqa_logits(schedule_meta=meta, **self.kw)
        return self.logits


# ---- timing ----------------------------------------------------------------------------------

def event_ms(fn, iters):
    return median_ms(fn, 1, iters)


def graph_ms(fns, reps=20):
    """Per call of a CUDA graph that runs fns (one per pool copy) round robin, reps calls."""
    for f in fns:
        f()
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        with torch.cuda.graph(g, stream=s):
            for i in range(reps):
                fns[i % len(fns)]()
    torch.cuda.current_stream().wait_stream(s)
    g.replay()
    torch.cuda.synchronize()
    times = []
    for _ in range(7):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        g.replay()
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b) / reps)
    return sorted(times)[len(times) // 2]


def floors():
    n = 8192
    a = torch.randn(n, n, device="cuda").to(torch.float8_e4m3fn)
    b = torch.randn(n, n, device="cuda").to(torch.float8_e4m3fn).t()
    one = torch.ones((), device="cuda")
    ms = event_ms(lambda: torch._scaled_mm(a, b, scale_a=one, scale_b=one, out_dtype=torch.bfloat16), 10)
    x = torch.empty(2 ** 30, dtype=torch.uint8, device="cuda")
    y = torch.empty_like(x)
    cms = event_ms(lambda: y.copy_(x), 10)
    return {"fp8_gemm_tflops": 2.0 * n ** 3 / (ms * 1e9), "copy_gbps": 2.0 * x.numel() / (cms * 1e6)}


# ---- quality -------------------------------------------------------------------------------

def exact_scores(prob, rows):
    """fp64 scores of §1 on the dequantized inputs for the given rows: [len(rows), ctx], -inf outside."""
    out = torch.full((len(rows), prob.ctx), float("-inf"), dtype=torch.float64, device="cuda")
    for j, r in enumerate(rows):
        b = 0 if prob.form == "ragged" else r // prob.next_n
        s, e = int(prob.starts[r]), int(prob.ends[r])
        if e <= s:
            continue
        if prob.table is None:
            keys = prob.k_deq[s:e].double()
        else:
            pos = torch.arange(s, e, device="cuda")
            slots = prob.table[b][pos // PAGE].long() * PAGE + pos % PAGE
            keys = prob.k_deq[slots].double()
        dots = prob.q_deq[r].double() @ keys.t()  # [H, L]
        out[j, s:e] = (prob.w[r].double()[:, None] * dots.clamp(min=0)).sum(0)
    return out


def calc_diff(x, y):
    x, y = x.double(), y.double()
    return float(1 - 2 * (x * y).sum() / (x * x + y * y).sum())


def quality(prob, rows, ref, logits_rows, positions_rows):
    """recall@K of positions against ref's top K, and calc_diff of in-window logits vs ref."""
    k = prob.k
    recall, diffs = [], []
    for j, r in enumerate(rows):
        s, e = int(prob.starts[r]), int(prob.ends[r])
        if e - s <= k:
            continue
        want = set(torch.topk(ref[j, s:e], k).indices.add(s).tolist())
        if positions_rows is not None:
            got = positions_rows[j]
        else:
            got = torch.topk(logits_rows[j, s:e].float(), k).indices.add(s)
        recall.append(len(want & set(got.tolist())) / k)
        if logits_rows is not None:
            diffs.append(calc_diff(logits_rows[j, s:e], ref[j, s:e]))
    res = {"recall_at_k": sum(recall) / max(len(recall), 1), "recall_min": min(recall) if recall else None,
           "quality_rows": len(recall)}
    if diffs:
        res["calc_diff"] = max(diffs)
    return res


# ---- the run ---------------------------------------------------------------------------------

def run_point(name, spec, args, base, fl):
    prob = Problem(name, spec)
    is_decode = prob.form == "decode"
    rec = dict(base, point=name, preset=spec[0], format=prob.fmt, k=prob.k, rows=prob.rows, context=prob.ctx,
               next_n=prob.next_n if is_decode else 0, flops=prob.flops(), key_bytes=prob.key_bytes(),
               tensor_floor_ms=prob.flops() / (fl["fp8_gemm_tflops"] * 1e9),
               key_read_floor_ms=prob.key_bytes() / (fl["copy_gbps"] * 1e6),
               timing="graph" if is_decode else "events")
    lines = []
    # Decode rotates pool copies (> 2 x L2 together) so that no call reads keys from L2.
    copies = 1
    if is_decode:
        copies = max(1, min(16, -(-150_000_000 // prob.pool.numel())))
    pools = [prob.pool] + [prob.pool.clone() for _ in range(copies - 1)]
    dg_pools = [prob.dg_pool] + [prob.dg_pool.clone() for _ in range(copies - 1)] if is_decode else [None]

    def timed(fns):
        return graph_ms(fns) if is_decode else event_ms(fns[0], args.iters)

    dgs = [DeepGemm(prob, p) for p in dg_pools]
    dg_ms = timed(dgs)
    logits = dgs[0]()
    topk = TopKOver(prob, logits)
    topk_ms = timed([topk])
    # An engine's step: DeepGEMM's logits (a fresh tensor each call), then our TopK over them.
    pair_ms = timed([lambda d=d: TopKOver(prob, d())() for d in dgs])
    rows = sorted(set(int(x) for x in torch.linspace(0, prob.rows - 1, args.quality_rows).round().tolist()))
    ref = exact_scores(prob, rows)
    dg_logits_rows = logits[rows][:, :prob.ctx]
    dgq = quality(prob, rows, ref, dg_logits_rows, None)
    lines.append(dict(rec, impl="deepgemm", op="logits", time_ms=dg_ms, **dgq))
    lines.append(dict(rec, impl="flashindexer", op="topk_over_deepgemm_logits", time_ms=topk_ms))
    lines.append(dict(rec, impl="deepgemm+flashindexer_topk", op="logits_then_topk", time_ms=pair_ms,
                      recall_at_k=quality(prob, rows, ref, None, topk.out.positions[rows])["recall_at_k"]))
    del dgs, logits, topk, dg_logits_rows
    torch.cuda.empty_cache()
    for acc in args.accuracy:
        ours = [Ours(prob, acc, p) for p in pools]
        fused_ms = timed([o.fused for o in ours])
        dense_ms = timed([o.dense_topk for o in ours])
        o = ours[0]
        o.fused_out.poison()
        o.dense_out.poison()
        o.fused()
        o.dense_topk()
        torch.cuda.synchronize()
        same = o.fused_out.same(o.dense_out)
        q = quality(prob, rows, ref, o.logits[rows], o.fused_out.positions[rows])
        ws = o.ws_f.numel()
        lines.append(dict(rec, impl="flashindexer", op="fused_topk", accuracy=acc, time_ms=fused_ms,
                          workspace_bytes=ws, identical_to_dense_topk=same,
                          speedup_vs_deepgemm_topk=pair_ms / fused_ms, **q))
        lines.append(dict(rec, impl="flashindexer", op="dense_then_topk", accuracy=acc, time_ms=dense_ms,
                          speedup_vs_deepgemm_topk=pair_ms / dense_ms))
        del ours, o
        torch.cuda.empty_cache()
    for ln in lines:
        ln["command"] = f"bench/peers/deepgemm_indexer.py --points {name} --iters {args.iters}"
        print(json.dumps(ln), flush=True)
    return lines


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--points", default=",".join(POINTS))
    ap.add_argument("--iters", type=int, default=10)
    ap.add_argument("--quality-rows", type=int, default=24)
    ap.add_argument("--accuracy", default="production,exact")
    ap.add_argument("--git", default=os.environ.get("FLASHINDEXER_GIT", "unknown"))
    args = ap.parse_args()
    args.accuracy = args.accuracy.split(",")
    torch.manual_seed(0)
    props = torch.cuda.get_device_properties(0)
    fl = floors()
    base = {"gpu": props.name, "sms": props.multi_processor_count, "git": args.git,
            "date": datetime.date.today().isoformat()}
    print(json.dumps(dict(base, op="floors", **fl)), flush=True)
    rc = 0
    for name in args.points.split(","):
        if name not in POINTS:
            print(f"unknown point {name}; known: {', '.join(POINTS)}", file=sys.stderr)
            return 2
        try:
            run_point(name, POINTS[name], args, base, fl)
        except Exception as e:  # report and go on with the other points
            print(json.dumps(dict(base, point=name, error=f"{type(e).__name__}: {e}")), flush=True)
            rc = 1
        torch.cuda.empty_cache()
    return rc


if __name__ == "__main__":
    sys.exit(main())
