#!/usr/bin/env python3
"""Candidate models of the Hopper FP8 MMA accumulator, on rows like the `structured` and
`wide_range` generators (numpy only; no GPU).

A k32 step adds 32 exact fp8 products to an accumulator C. Two models:
  A: the step's sum is exact, the result is truncated to 13 fraction bits (an e8m13 accumulator);
  B: the products go in sub-blocks of `sub`; each sub-block and C are aligned to their largest
     exponent and truncated to F fraction bits before the sum, which is then truncated as in A.
The scorer's modes: fp32 (each k32 step from zero, partials added exactly), chain2 (two chains
of two steps) and chain4 (kReduced: one chain). Prints the worst |err| / M of each, next to
what the GPU oracle tests measured, and each model's error on the wide_range vector.
  usage: tools/experiments/fp8_mma_model.py
"""
import numpy as np


def e4m3_grid():
    vals = {((m / 8) * 2.0 ** -6 if e == 0 else (1 + m / 8) * 2.0 ** (e - 7))
            for e in range(16) for m in range(8) if not (e == 15 and m == 7)}
    g = np.array(sorted(vals))
    return np.concatenate([-g[::-1], g])


GRID = e4m3_grid()


def quantize(x):
    """Per-row e4m3 with amax -> 448 (as the synthetic problems and the model do)."""
    s = np.abs(x).max(axis=-1, keepdims=True) / 448.0
    y = x / s
    i = np.clip(np.searchsorted(GRID, y), 1, len(GRID) - 1)
    lo, hi = GRID[i - 1], GRID[i]
    return np.where(np.abs(y - lo) <= np.abs(hi - y), lo, hi), s


def trunc(x, bits):
    m, e = np.frexp(np.asarray(x, dtype=np.float64))
    return np.ldexp(np.trunc(m * 2.0 ** (bits + 1)) / 2.0 ** (bits + 1), e)


def step(c, prods, model):
    """One k32 step: c [H] plus prods [H, 32] under `model` = ('A',) or ('B', sub, F)."""
    if model[0] == "A":
        return trunc(c + prods.sum(-1), 13)
    _, sub, f = model
    for j in range(0, 32, sub):
        v = np.concatenate([c[:, None], prods[:, j:j + sub]], axis=1)
        ulp = 2.0 ** (np.floor(np.log2(np.maximum(np.abs(v).max(-1, keepdims=True), 1e-300))) - f)
        c = trunc((np.trunc(v / ulp) * ulp).sum(-1), 13)
    return c


def modes(prods, model):
    g = prods.reshape(prods.shape[0], 4, 32)
    z = np.zeros(prods.shape[0])
    fp32 = sum(step(z, g[:, k], model) for k in range(4))
    chain2 = step(step(z, g[:, 0], model), g[:, 1], model) + step(step(z, g[:, 2], model), g[:, 3], model)
    c = z
    for k in range(4):
        c = step(c, g[:, k], model)
    return {"fp32": fp32, "chain2": chain2, "chain4": c}


def worst_structured(model, positions=1500, heads=64, seed=1):
    rng = np.random.default_rng(seed)
    u, base = rng.standard_normal(128), rng.standard_normal(128)
    q, qs = quantize(u + 0.3 * base + 0.1 * rng.standard_normal((heads, 128)))
    w = np.abs(rng.standard_normal(heads)) * qs[:, 0]
    worst = {}
    for s in range(positions):
        a = 3.0 if rng.integers(512) == 0 else 0.6 * s / positions
        k, _ = quantize((rng.standard_normal(128) + a * u)[None, :])
        prods = q * k[0][None, :]
        exact = (w * np.maximum(prods.sum(-1), 0)).sum()
        m = (w * np.abs(prods).sum(-1)).sum()
        for name, acc in modes(prods, model).items():
            worst[name] = max(worst.get(name, 0.0), abs((w * np.maximum(acc, 0)).sum() - exact) / m)
    return worst


def wide_range(model):
    k = np.where(np.arange(128) % 32 == 0, 448.0, 3.75)
    q = np.where(np.arange(128) % 32 == 0, 448.0, 4.0)
    prods = (q * k)[None, :]
    exact, m = prods.sum(), np.abs(prods).sum()
    return {name: abs(acc[0] - exact) / m for name, acc in modes(prods, model).items()}


if __name__ == "__main__":
    print("GPU oracle tests (structured fp8, worst |err|/M): fp32 4.8e-5, chain2 1.14e-4, chain4 4.7e-4 - 5.1e-4")
    for model in (("A",), ("B", 32, 13), ("B", 16, 13), ("B", 8, 13)):
        st = worst_structured(model)
        wr = wide_range(model)
        print(f"model {model}: structured " + ", ".join(f"{k} {v:.2e}" for k, v in st.items())
              + " | wide_range " + ", ".join(f"{k} {v:.2e}" for k, v in wr.items()))
