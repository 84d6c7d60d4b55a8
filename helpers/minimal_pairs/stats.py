"""Statistics of the minimal-pairs chapter, pure NumPy on per-pair arrays (definitions: book/methods.md, §Minimal
pairs): means over pairs (accuracy, margin, their changes under a removal) with percentile bootstrap intervals over
pairs (:mod:`helpers.core.bootstrap`: the same draws), differences against controls, a head's percentile among all
heads, and the control sets of heads.

A statistic reads the pairs of a paradigm, a phenomenon or the selection; its interval resamples those pairs. Every
paradigm contributes the same number of pairs (its first ``N``), so the mean over pairs is also the mean over
paradigms, as BLiMP's published figures are. Two statistics on the same pairs (a removal and the full model, a head
and its controls) use the same draws (a paired difference); on different pairs, independent draws.

Per-pair arrays are ``[pair, ...]``.

>>> import numpy as np
>>> e = estimate(np.array([1.0, 2.0, 3.0, 4.0]), n_boot=200)
>>> e["value"], e["n"], bool(1.0 <= e["interval"][0] < 2.5 < e["interval"][1] <= 4.0)
(2.5, 4, True)
"""
from __future__ import annotations

from typing import Sequence

import numpy as np

from helpers.core.bootstrap import BOOTSTRAP, percentile_interval

CHUNK = 50  # replicates drawn at a time (even: see :func:`mean_replicates`); 50 x 67,000 pairs is 27 MB of indices


def correct(good: np.ndarray, bad: np.ndarray) -> np.ndarray:
    """``[pair]`` 1.0 where the good sentence scores strictly higher (a tie is wrong), else 0.0."""
    return (np.asarray(good) > np.asarray(bad)).astype(np.float64)


def mean_replicates(values: np.ndarray, *, n_boot: int = BOOTSTRAP, seed: int = 0) -> np.ndarray:
    """``[n_boot, ...]``: the mean over pairs of ``values`` ``[pair, ...]`` in each replicate, the draws of
    :func:`helpers.core.bootstrap.counts` (``default_rng(seed).integers(0, n, (n_boot, n))``) made :data:`CHUNK`
    replicates at a time, so that 67,000 pairs never hold a ``[1000, 67000]`` matrix (numpy draws the same numbers
    in chunks whose size is even; tested against ``counts``)."""
    values = np.asarray(values, dtype=np.float64)
    n = len(values)
    if n == 0:
        raise ValueError("bootstrap: no units to resample")
    rng = np.random.default_rng(seed)
    flat = values.reshape(n, -1)
    out = np.empty((n_boot, flat.shape[1]))
    for start in range(0, n_boot, CHUNK):
        size = min(CHUNK, n_boot - start)
        idx = rng.integers(0, n, size=(size, n))
        drawn = np.stack([np.bincount(row, minlength=n) for row in idx]).astype(np.float64)   # [size, n]: counts
        out[start:start + size] = drawn @ flat / n
    return out.reshape(n_boot, *values.shape[1:])


def estimate(values: np.ndarray, *, n_boot: int = BOOTSTRAP, seed: int = 0) -> dict:
    """``{"value", "interval", "n"}``: the mean of ``values`` (one per pair; a paired difference is the difference per
    pair), its 95 % percentile interval over resampled pairs and the number of pairs. No pair: ``None`` values."""
    values = np.asarray(values, dtype=np.float64)
    if len(values) == 0:
        return {"value": None, "interval": None, "n": 0}
    lo, hi = percentile_interval(mean_replicates(values, n_boot=n_boot, seed=seed))
    return {"value": float(values.mean()), "interval": [lo, hi], "n": int(len(values))}


def two_sample(a: np.ndarray, b: np.ndarray, *, n_boot: int = BOOTSTRAP, seed: int = 0) -> dict:
    """``{"value", "interval", "n"}``: ``mean(a) - mean(b)`` over two different sets of pairs, each resampled on its
    own (seeds ``seed`` and ``seed + 1``), its interval, and the pairs read on both sides."""
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    if len(a) == 0 or len(b) == 0:
        return {"value": None, "interval": None, "n": int(len(a) + len(b))}
    reps = mean_replicates(a, n_boot=n_boot, seed=seed) - mean_replicates(b, n_boot=n_boot, seed=seed + 1)
    lo, hi = percentile_interval(reps)
    return {"value": float(a.mean() - b.mean()), "interval": [lo, hi], "n": int(len(a) + len(b))}


def percentile_of(scores: np.ndarray, index: int) -> float:
    """The percentile of entry ``index`` among all of ``scores`` (flattened): 100 x the share of entries at most its
    own (ties share the higher rank; the largest is 100)."""
    flat = np.asarray(scores, dtype=np.float64).ravel()
    return float(100.0 * np.sum(flat <= flat[index]) / flat.size)


def percentile_replicates(per_pair: np.ndarray, index: int, *, n_boot: int = BOOTSTRAP, seed: int = 0) -> np.ndarray:
    """``[n_boot]``: :func:`percentile_of` entry ``index`` (flattened ``layer * heads + head``) of the mean over pairs
    of ``per_pair`` ``[pair, layer, head]`` (an importance), in each replicate."""
    per_pair = np.asarray(per_pair, dtype=np.float64)
    reps = mean_replicates(per_pair.reshape(len(per_pair), -1), n_boot=n_boot, seed=seed)     # [n_boot, heads]
    return 100.0 * np.sum(reps <= reps[:, [index]], axis=1) / reps.shape[1]


def draw_others(pool: Sequence, size: int, n: int, *, seed: int = 0) -> list[tuple]:
    """Up to ``n`` distinct sets of ``size`` items of ``pool`` (sorted tuples): every such set when there are at most
    ``n``, in a seeded order; else ``n`` drawn from ``default_rng(seed)``."""
    from itertools import combinations
    from math import comb

    pool = sorted(set(pool))
    if not 1 <= size <= len(pool):
        return []
    rng = np.random.default_rng(seed)
    if comb(len(pool), size) <= n:
        every = list(combinations(pool, size))
        return [every[i] for i in rng.permutation(len(every))]
    out: list[tuple] = []
    while len(out) < n:
        pick = tuple(sorted(pool[i] for i in rng.choice(len(pool), size=size, replace=False)))
        if pick not in out:
            out.append(pick)
    return out


def layer_matched(heads: Sequence[tuple[int, int]], n_heads: int, n: int, *, seed: int = 0) -> list[tuple]:
    """Up to ``n`` distinct sets of heads like ``heads`` layer for layer: each takes, for every head of ``heads``, another
    head of the same layer (none of ``heads``). When there are at most ``n`` such sets (one head of a 9-head layer: 8),
    every one of them; otherwise ``n`` drawn from ``default_rng(seed)``."""
    from itertools import combinations, product
    from math import comb, prod

    heads = sorted(set((int(l), int(h)) for l, h in heads))
    layers = sorted({l for l, _ in heads})
    need = {l: sum(1 for x, _ in heads if x == l) for l in layers}
    others = {l: [h for h in range(n_heads) if (l, h) not in heads] for l in layers}
    if not heads or any(len(others[l]) < need[l] for l in layers):
        return []
    rng = np.random.default_rng(seed)
    if prod(comb(len(others[l]), need[l]) for l in layers) <= n:
        every = [tuple(sorted((l, h) for l, hs in zip(layers, parts) for h in hs))
                 for parts in product(*(combinations(others[l], need[l]) for l in layers))]
        return [every[i] for i in rng.permutation(len(every))]
    out: list[tuple] = []
    while len(out) < n:
        pick = tuple(sorted((l, int(h)) for l in layers for h in rng.choice(others[l], size=need[l], replace=False)))
        if pick not in out:
            out.append(pick)
    return out
