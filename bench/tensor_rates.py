# The tensor rates that bound the scorers, in one run on this GPU: cuBLAS bf16 and fp16 GEMMs (torch) against
# an FP8 e4m3 GEMM (torch._scaled_mm), 8192^3. The fp8 default mode scores with FP16 WGMMAs (CONTRACT §4), so
# fp16 / fp8 is that mode's ceiling as a share of the FP8 floor. Usage (GPU): python3 bench/tensor_rates.py
import torch
def ms(f, it=40):
    for _ in range(5): f()
    torch.cuda.synchronize()
    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    s.record()
    for _ in range(it): f()
    e.record(); torch.cuda.synchronize()
    return s.elapsed_time(e) / it
n = 8192
a = torch.randn(n, n, device='cuda', dtype=torch.bfloat16)
b = torch.randn(n, n, device='cuda', dtype=torch.bfloat16)
h, g = a.half(), b.half()
a8 = a.to(torch.float8_e4m3fn)
b8 = b.to(torch.float8_e4m3fn).t().contiguous().t()
one = torch.tensor(1.0, device='cuda')
r = {}
for rep in range(2):
    r['bf16'] = 2 * n**3 / ms(lambda: a @ b) / 1e9
    r['fp16'] = 2 * n**3 / ms(lambda: h @ g) / 1e9
    r['fp8'] = 2 * n**3 / ms(lambda: torch._scaled_mm(a8, b8, scale_a=one, scale_b=one, out_dtype=torch.bfloat16)) / 1e9
    print(torch.cuda.get_device_name(), {k: round(v) for k, v in r.items()}, 'TFLOP/s; fp16/fp8 = %.3f, bf16/fp8 = %.3f' % (r['fp16'] / r['fp8'], r['bf16'] / r['fp8']))
