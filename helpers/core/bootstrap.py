"""Percentile bootstrap intervals, one way for every claim: resample the units (segments, sentences, documents,
pairs), recompute the statistic, read the 2.5th and 97.5th percentiles (book/methods.md, §Verdicts).

A replicate is a row of :func:`counts`: how many times each unit was drawn. Every statistic that is a sum over
units is then one product, ``counts @ values`` (``values [unit, ...]``): a mean, a ratio of sums, a paired
difference on the same units, all from the same draws. Draws come from ``numpy.random.default_rng(seed)
.integers(0, n, (n_boot, n))``, the draws §4.2's and §4.3's intervals have always used.

Per-unit values are ``[unit, ...]`` (the unit first); replicates are ``[n_boot, ...]``.

>>> import numpy as np
>>> values = np.array([1.0, 2.0, 3.0, 4.0])
>>> lo, hi = mean_interval(values, n_boot=500)
>>> bool(1.0 <= lo < 2.5 < hi <= 4.0)
True
>>> lo, hi = paired_interval(values, values - 1.0)          # the same units on both sides: the difference is 1
>>> (round(lo, 12), round(hi, 12))
(1.0, 1.0)
"""
from __future__ import annotations

import warnings
from dataclasses import dataclass, field
from functools import cached_property
from typing import Sequence

import numpy as np

BOOTSTRAP = 1000   # replicates of every interval
LEVEL = 0.95       # every interval is a 95 % interval


def counts(n_units: int, *, n_boot: int = BOOTSTRAP, seed: int = 0) -> np.ndarray:
    """``[n_boot, n_units]`` float64: how many times each unit is drawn in each replicate (``n_units`` draws with
    replacement, from ``default_rng(seed).integers``)."""
    if n_units <= 0:
        raise ValueError("bootstrap: no units to resample")
    idx = np.random.default_rng(seed).integers(0, n_units, size=(n_boot, n_units))
    out = np.zeros((n_boot, n_units))
    np.add.at(out, (np.arange(n_boot)[:, None], idx), 1.0)
    return out


def percentile_interval(replicates: np.ndarray, *, level: float = LEVEL) -> np.ndarray:
    """``[..., 2]``: the percentile interval of ``replicates`` ``[n_boot, ...]`` (NaN replicates left out; NaN where
    every replicate is NaN). For a scalar statistic, a pair ``(lo, hi)`` of floats."""
    r = np.asarray(replicates, dtype=np.float64)
    alpha = 100 * (1 - level) / 2
    with warnings.catch_warnings():  # "All-NaN slice": that statistic's interval is NaN
        warnings.simplefilter("ignore", RuntimeWarning)
        lo, hi = np.nanpercentile(r, [alpha, 100 - alpha], axis=0)
    out = np.stack([lo, hi], axis=-1)
    return (float(out[0]), float(out[1])) if out.ndim == 1 else out


def sums(values: np.ndarray, c: np.ndarray) -> np.ndarray:
    """``[n_boot, ...]``: the sum over units of ``values`` ``[unit, ...]`` in each replicate of ``c``."""
    v = np.asarray(values, dtype=np.float64)
    return np.tensordot(c, v, axes=(1, 0))


def mean_replicates(values: np.ndarray, c: np.ndarray) -> np.ndarray:
    """``[n_boot, ...]``: the mean over units of ``values`` ``[unit, ...]`` in each replicate of ``c``."""
    return sums(values, c) / c.sum(1).reshape(-1, *([1] * (np.ndim(values) - 1)))


def ratio_replicates(numerator: np.ndarray, denominator: np.ndarray, c: np.ndarray) -> np.ndarray:
    """``[n_boot, ...]``: ``sum(numerator) / sum(denominator)`` over units in each replicate (NaN where the
    denominator is 0)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        return sums(numerator, c) / sums(denominator, c)


def mean_interval(values: np.ndarray, *, n_boot: int = BOOTSTRAP, seed: int = 0, level: float = LEVEL):
    """The interval of the mean over units of ``values`` ``[unit, ...]``."""
    values = np.asarray(values, dtype=np.float64)
    return percentile_interval(mean_replicates(values, counts(len(values), n_boot=n_boot, seed=seed)), level=level)


def ratio_interval(numerator: np.ndarray, denominator: np.ndarray, *, n_boot: int = BOOTSTRAP, seed: int = 0,
                   level: float = LEVEL):
    """The interval of ``sum(numerator) / sum(denominator)`` over units (e.g. correct over total words)."""
    c = counts(len(numerator), n_boot=n_boot, seed=seed)
    return percentile_interval(ratio_replicates(numerator, denominator, c), level=level)


def paired_interval(a: np.ndarray, b: np.ndarray, *, n_boot: int = BOOTSTRAP, seed: int = 0, level: float = LEVEL):
    """The interval of ``mean(a) - mean(b)`` over the same units, each replicate drawing the units once for both
    sides (a paired comparison)."""
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    if a.shape[0] != b.shape[0]:
        raise ValueError(f"paired_interval: {a.shape[0]} and {b.shape[0]} units: a paired comparison needs the same units")
    c = counts(len(a), n_boot=n_boot, seed=seed)
    return percentile_interval(mean_replicates(a, c) - mean_replicates(b, c), level=level)


def share_holding(holds: np.ndarray) -> float:
    """The share of replicates in which a statement holds (``holds`` ``[n_boot]`` bool)."""
    holds = np.asarray(holds, dtype=bool)
    return float(holds.mean())


def pooled_replicates(statistic, n_units: Sequence[int], *, n_boot: int = BOOTSTRAP, seed: int = 0) -> np.ndarray:
    """``[len(n_units) * n_boot, ...]``: replicates of several runs (a probe's seeds) pooled: run ``s`` resamples
    its own ``n_units[s]`` units (e.g. the test sentences it was scored on) with seed ``seed + s`` and
    ``statistic(s, counts)`` gives its replicates. The pooled interval holds both the sampling of the units and the
    spread over runs; a paired comparison computes both sides inside ``statistic`` from the same ``counts``.

    >>> import numpy as np
    >>> runs = [np.array([0.5, 0.7, 0.6]), np.array([0.6, 0.8, 0.7])]
    >>> pooled_replicates(lambda s, c: mean_replicates(runs[s], c), [3, 3], n_boot=10).shape
    (20,)
    """
    return np.concatenate([np.asarray(statistic(s, counts(n, n_boot=n_boot, seed=seed + s)))
                           for s, n in enumerate(n_units)])


# --- the segments behind a section's means (§3's sinks and norms) ---

@dataclass
class SegmentDraws:
    """Per-segment values kept for intervals over segments (the unit resampled): segments in the order of their
    example ``index`` ``[segment]``; a subclass adds its value arrays ``[segment, ...]``. Replicates are ``n_boot``
    draws of the segments (:func:`counts`, ``seed``), the same draws for every statistic."""

    index: np.ndarray
    n_boot: int = field(default=BOOTSTRAP, kw_only=True)
    seed: int = field(default=0, kw_only=True)

    def __len__(self) -> int:
        return len(self.index)

    @cached_property
    def counts(self) -> np.ndarray:
        """``[n_boot, segment]``: how many times each segment is drawn in each replicate (:func:`counts`)."""
        return counts(len(self), n_boot=self.n_boot, seed=self.seed)
