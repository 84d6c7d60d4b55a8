"""Statistics of the ablation chapter, pure NumPy/SciPy on per-segment arrays (definitions: book/methods.md, §Removing
heads): bootstrap intervals over segments, percentiles among all heads, a permutation test of a head set against
random sets of the same size, and Spearman's rank correlation with a bootstrap interval.

Arrays per head are ``[layer, head]``; per segment ``[..., segment]`` (the last axis). Heads in sets are 0-based
``(layer, head)`` pairs; labels are 1-based ``"layer-head"`` (:func:`helpers.core.labels.head_label`).

>>> import numpy as np
>>> lo, hi = bootstrap_mean_interval(np.array([[1.0, 2.0, 3.0]]), n_boot=200)[0]
>>> bool(1.0 <= lo <= 2.0 <= hi <= 3.0)
True
"""
from __future__ import annotations

from typing import Iterable, Sequence

import numpy as np

BOOTSTRAP = 1000      # resamples of the segments for an interval
PERMUTATIONS = 10000  # random head sets of the permutation test
CONFIDENCE = 0.95


def bootstrap_mean_interval(values: np.ndarray, *, n_boot: int = BOOTSTRAP, seed: int = 0) -> np.ndarray:
    """``[..., 2]``: the percentile bootstrap interval of the mean over the last axis (segments), the same resampled
    segments for every leading index (one draw of ``n_boot x S`` indices from ``seed``)."""
    values = np.asarray(values, dtype=np.float64)
    n = values.shape[-1]
    if n == 0:
        return np.full((*values.shape[:-1], 2), np.nan)
    idx = np.random.default_rng(seed).integers(0, n, size=(n_boot, n))
    means = values[..., idx].mean(-1)                                   # [..., n_boot]
    alpha = (1 - CONFIDENCE) / 2
    return np.stack([np.quantile(means, alpha, axis=-1), np.quantile(means, 1 - alpha, axis=-1)], axis=-1)


def percentiles(scores: np.ndarray) -> np.ndarray:
    """Each head's percentile among all heads, ``[layer, head]``: 100 x the share of heads whose score is at most its
    own (ties share the higher rank; the largest score is 100)."""
    flat = np.asarray(scores, dtype=np.float64).ravel()
    ranks = np.searchsorted(np.sort(flat), flat, side="right")
    return (100.0 * ranks / flat.size).reshape(np.shape(scores))


def permutation_p(scores: np.ndarray, heads: Sequence[tuple[int, int]], *, n_perm: int = PERMUTATIONS,
                  seed: int = 0) -> float:
    """One-sided p-value that ``heads`` have a larger mean score than random sets of as many distinct heads:
    ``(1 + #{random mean >= observed}) / (1 + n_perm)``; NaN for an empty set."""
    heads = list(dict.fromkeys(heads))
    if not heads:
        return float("nan")
    flat = np.asarray(scores, dtype=np.float64).ravel()
    n_heads = scores.shape[1]
    observed = np.mean([flat[l * n_heads + h] for l, h in heads])
    rng = np.random.default_rng(seed)
    draws = np.argsort(rng.random((n_perm, flat.size)), axis=1)[:, : len(heads)]   # sets without repeats
    random = flat[draws].mean(1)
    return float((1 + np.sum(random >= observed - 1e-12 * max(1.0, abs(observed)))) / (1 + n_perm))


def spearman(x: np.ndarray, y: np.ndarray) -> float:
    """Spearman's rank correlation of two score arrays (flattened); NaN when either is constant."""
    from scipy.stats import spearmanr

    x, y = np.ravel(x), np.ravel(y)
    if np.ptp(x) == 0 or np.ptp(y) == 0:
        return float("nan")
    return float(spearmanr(x, y).statistic)


def spearman_interval(x: np.ndarray, y: np.ndarray, *, n_boot: int = BOOTSTRAP,
                      seed: int = 0) -> tuple[float, tuple[float, float]]:
    """``(rho, (lo, hi))``: Spearman's rho between the means over segments of ``x`` and ``y`` (``[..., segment]``, per
    head), and its percentile bootstrap interval resampling segments (the same segments for both)."""
    x, y = np.asarray(x, dtype=np.float64), np.asarray(y, dtype=np.float64)
    n = x.shape[-1]
    rho = spearman(x.mean(-1), y.mean(-1))
    if n < 2:
        return rho, (float("nan"), float("nan"))
    rng = np.random.default_rng(seed)
    draws = [spearman(x[..., i].mean(-1), y[..., i].mean(-1)) for i in rng.integers(0, n, size=(n_boot, n))]
    draws = np.asarray([d for d in draws if np.isfinite(d)])
    if draws.size == 0:
        return rho, (float("nan"), float("nan"))
    alpha = (1 - CONFIDENCE) / 2
    return rho, (float(np.quantile(draws, alpha)), float(np.quantile(draws, 1 - alpha)))


def largest_share_within(shares: Sequence[float], losses: Sequence[float], limit: float) -> float:
    """The largest share of heads removed, along a pruning curve, before the loss first exceeds ``limit``: the share
    of the last step before the first step above it (0 if the first pruned step already is)."""
    best = 0.0
    for share, loss in zip(shares, losses):
        if loss > limit:
            break
        best = share
    return float(best)


def distinct(heads: Iterable[tuple[int, int]]) -> list[tuple[int, int]]:
    """``heads`` without repeats, sorted by layer then head."""
    return sorted(set((int(l), int(h)) for l, h in heads))


# ------------------------------------------------------------------ issue 61: sets against the same layers, replicates


def layer_expected_mean(scores: np.ndarray, heads: Sequence[tuple[int, int]]) -> float:
    """The expected mean score of a random set drawn as :func:`layer_matched_p` draws them (for each head of
    ``heads``, a head of its own layer): the mean over ``heads`` of their layers' mean scores; NaN for no head."""
    heads = list(dict.fromkeys(heads))
    if not heads:
        return float("nan")
    layer_means = np.asarray(scores, dtype=np.float64).mean(1)
    return float(np.mean([layer_means[l] for l, _ in heads]))


def layer_matched_p(scores: np.ndarray, heads: Sequence[tuple[int, int]], *, n_perm: int = PERMUTATIONS,
                    seed: int = 0) -> float:
    """One-sided p-value that ``heads`` have a larger mean score than random sets drawn from the same layers: for
    each layer, as many distinct heads of that layer as ``heads`` hold there (uniformly, ``default_rng(seed)``),
    ``(1 + #{random mean >= observed}) / (1 + n_perm)``; NaN for an empty set. A set that holds every head of its
    layers is every random set: ``p = 1``."""
    heads = list(dict.fromkeys((int(l), int(h)) for l, h in heads))
    if not heads:
        return float("nan")
    s = np.asarray(scores, dtype=np.float64)
    n_heads = s.shape[1]
    observed = float(np.mean([s[l, h] for l, h in heads]))
    rng = np.random.default_rng(seed)
    total = np.zeros(n_perm)
    for layer in sorted({l for l, _ in heads}):
        k = sum(1 for l, _ in heads if l == layer)
        picks = np.argsort(rng.random((n_perm, n_heads)), axis=1)[:, :k]      # k distinct heads of the layer
        total += s[layer][picks].sum(1)
    random = total / len(heads)
    return float((1 + np.sum(random >= observed - 1e-12 * max(1.0, abs(observed)))) / (1 + n_perm))


def percentiles_replicates(scores: np.ndarray) -> np.ndarray:
    """:func:`percentiles` of each replicate ``scores`` ``[n_boot, layer, head]`` (each replicate's heads ranked
    among themselves), ``[n_boot, layer, head]``."""
    s = np.asarray(scores, dtype=np.float64)
    flat = s.reshape(len(s), -1)
    ordered = np.sort(flat, axis=1)
    ranks = np.stack([np.searchsorted(row, values, side="right") for row, values in zip(ordered, flat)])
    return (100.0 * ranks / flat.shape[1]).reshape(s.shape)
