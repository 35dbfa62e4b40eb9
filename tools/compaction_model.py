#!/usr/bin/env python3
"""Model of the fused lockstep kernel's stream selection on alternate tiles (fused_topk.cu,
SelectSink): how many keys a row appends and how many compactions it runs, with the plain
tile order from tau = 0 (the tree) and with the sampled start on pairs (the lockstep kernel's alternate tiles).
CPU only, no GPU: a prediction to hold GPU profiles against (FI_FUSED_PROFILE's
"n comp" is compactions per CTA of 4 rows).

The rules follow src/cuda/heuristics.h (fused_vote_interval, fused_vote_limit,
fused_sample_tiles), sampled_start.h (SampleOrder, guess_rank) and SelectSink (a vote at the
top of every vote_every-th step compacts a row past the limit to at most
K + (limit - K) / 4 keys). A compaction keeps the keys >= the lower edge of a radix bin: here
modelled as keeping a uniform number in [K, max_keep] (--keep exact: exactly K).
Scores: i.i.d. normal, or ascending along the row (the plain order's worst case).

--deferred models deferred votes (cuda::fused_vote_plan): three intervals of room,
and a row past the limit at a vote compacts at the next one (no skew between warpgroups).

--wgs N: tiles per step (three consumer warpgroups on alternate tiles: 3; four on shared
tiles, the production fp8 groups of 4 rows: 2). With --k 2048 --deferred --wgs 2 it gives 14.2
compactions per CTA at cap 2,744 (FI_FUSED_PROFILE measured 14.9, 2026-12-07) and 3.8 at 3,768.

  usage: tools/compaction_model.py [--k 1024] [--cap 2458] [--window 61440] [--rows 64] [--deferred] [--wgs 3]
"""
import argparse

import numpy as np

TILE = 64


def vote_interval(cap, k, step_puts, max_every=8):
    def fits(every, reserve):
        return k + reserve * every * step_puts <= cap
    every = max_every
    while every > 1 and not fits(every, 2):
        every //= 2
    if every > 1:
        return every
    every = max_every
    while every > 1 and not fits(every, 1):
        every //= 2
    return every


def sample_tiles(cap, k, step_puts, every):
    limit = cap - every * step_puts
    if limit <= k:
        return 0
    return limit // step_puts // every * every


def guess_rank(k, n, window):
    mean = k * n / window
    if mean < 8:
        return 0
    m = int(np.ceil(mean + 6 * np.sqrt(mean))) + 1
    return m if m < k and 2 * m <= n else 0


def sample_order(num_tiles, max_sample):
    if max_sample <= 0 or num_tiles < 4 * max_sample:
        return list(range(num_tiles)), 0
    stride = num_tiles // max_sample
    first = [j * stride for j in range(max_sample)]
    taken = set(first)
    return first + [t for t in range(num_tiles) if t not in taken], max_sample


def run_row(scores, k, cap, sampled, keep_exact, rng, deferred=False, tps=2):
    step_puts = tps * TILE  # alternate tiles: a step is one tile per consumer warpgroup, all score every row
    room = 3 * step_puts if deferred else step_puts
    every = vote_interval(cap, k, room)
    limit = cap - every * room
    max_keep = k + (limit - k) // 4
    num_tiles = (len(scores) + TILE - 1) // TILE
    sample_steps = limit // step_puts // every * every if limit > k else 0
    order, sample = sample_order(num_tiles, tps * sample_steps if sampled else 0)
    cand = np.empty(0)
    tau = -np.inf
    appends = compactions = 0
    guessed = False
    flagged = False  # deferred: a row past the limit at the last vote
    for j in range((num_tiles + tps - 1) // tps):
        if j % every == 0:
            over = len(cand) > limit
            act = flagged if deferred else over
            flagged = over
            if sample and not guessed and tps * j == sample:
                m = guess_rank(k, len(cand), len(scores))
                guessed = True
                if m > 0:
                    cand = np.sort(cand)[::-1][:m]
                    tau = cand[-1]
            elif act and len(cand) > limit:
                keep = k if keep_exact else int(rng.integers(k, max_keep + 1))
                cand = np.sort(cand)[::-1][:keep]
                tau = cand[-1]
                compactions += 1
        for t in order[tps * j:tps * j + tps]:
            v = scores[t * TILE:(t + 1) * TILE]
            new = v[v > tau]
            appends += len(new)
            cand = np.concatenate([cand, new])
            assert len(cand) <= cap, "a row overflowed its buffer"
    top = np.sort(scores)[::-1][:k]
    exact = len(cand) >= k and np.all(np.sort(cand)[::-1][:k] == top)
    return appends, compactions, exact


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--k", type=int, default=1024)
    ap.add_argument("--cap", type=int, default=2458)
    ap.add_argument("--window", type=int, default=61440)
    ap.add_argument("--rows", type=int, default=64)
    ap.add_argument("--keep", choices=["uniform", "exact"], default="uniform")
    ap.add_argument("--deferred", action="store_true", help="deferred votes: act one vote late")
    ap.add_argument("--wgs", type=int, default=2, help="tiles per step (cuda::fused_step_puts / 64)")
    a = ap.parse_args()
    rng = np.random.default_rng(1)
    print(f"K {a.k}, cap {a.cap}, window {a.window}, {a.rows} rows, keep {a.keep}{', deferred votes' if a.deferred else ''}"
          f", {a.wgs} tiles per step")
    for dist in ("normal", "ascending"):
        for sampled in (False, True):
            res = []
            for _ in range(a.rows):
                s = rng.standard_normal(a.window)
                if dist == "ascending":
                    s = np.sort(s)
                res.append(run_row(s, a.k, a.cap, sampled, a.keep == "exact", rng, a.deferred, a.wgs))
            app = np.mean([r[0] for r in res])
            comp = np.mean([r[1] for r in res])
            fails = sum(not r[2] for r in res)
            print(f"{dist:9} {'sampled' if sampled else 'plain':7}  appends/row {app:8.0f}  compactions/row {comp:5.2f}"
                  f"  per CTA of 4 rows {4 * comp:6.1f}  guess underfilled {fails}")


if __name__ == "__main__":
    main()
