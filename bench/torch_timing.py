"""Event timing shared by the PyTorch baseline scripts (same method as bench_util.h)."""
import torch


def median_ms(fn, warmup, iters):
    """Median of `iters` event-timed calls of fn, after `warmup` calls."""
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(iters):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        fn()
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b))
    times.sort()
    return times[len(times) // 2]
