"""The context-mixing chapter's statistics over items (book/methods.md, §Context-mixing maps): per-item counts of
the paper's probes kept for the bootstrap, the map chosen on dev, the paired gain of one map over another on the
same test items, a probe's interval pooled over seeds, and the median's interval over resampled sentences.

Per-item data are JSON-ready dicts: ``{"units": [...], "correct": [...], "total": [...]}`` (one row per item: a
sentence of §4.2, a document of §4.3), and for §5 ``"correct"`` is ``[seed][sentence]``; a score is
``100 * sum(correct) / sum(total)``. Every interval is :mod:`helpers.core.bootstrap`'s percentile interval
(its draws: ``counts(n_units, seed=...)``).

>>> a = {"units": [0, 1, 2], "correct": [3, 2, 4], "total": [4, 4, 5]}
>>> b = {"units": [0, 1, 2], "correct": [2, 2, 3], "total": [4, 4, 5]}
>>> gain, (lo, hi) = paired_gain(a, b, n_boot=200)
>>> round(gain, 4), bool(lo <= gain <= hi)
(15.3846, True)
"""
from __future__ import annotations

from typing import Callable, Mapping, Sequence

import numpy as np

from helpers.core import bootstrap
from helpers.core.bootstrap import BOOTSTRAP


def per_item(units: Sequence[int], correct: Sequence[float], total: Sequence[float]) -> dict:
    """``{"units", "correct", "total"}`` of the items with at least one counted word or mention (``total > 0``:
    the units a bootstrap resamples, as :func:`helpers.syntax.stats.bootstrap_interval` keeps them), counts as
    integers; ``units`` name the items (an index, a sentence id)."""
    correct, total = np.asarray(correct, dtype=np.float64), np.asarray(total, dtype=np.float64)
    if not len(units) == len(correct) == len(total):
        raise ValueError(f"per_item: {len(units)} units, {len(correct)} correct and {len(total)} totals: one each a unit")
    keep = np.flatnonzero(total > 0)
    return {"units": [u.item() if hasattr(u, "item") else u for u in (units[k] for k in keep)],
            "correct": [int(round(correct[k])) for k in keep], "total": [int(total[k]) for k in keep]}


def _check_paired(a: Mapping, b: Mapping) -> None:
    if list(a["units"]) != list(b["units"]) or list(a["total"]) != list(b["total"]):
        raise ValueError("paired_gain: the two sides were scored on different items (units or totals differ); a "
                         "paired comparison needs the same test items on both sides")


def paired_gain(a: Mapping, b: Mapping, *, n_boot: int = BOOTSTRAP, seed: int = 0) -> tuple[float, tuple[float, float]]:
    """``(gain, (lo, hi))`` in points: ``a``'s score minus ``b``'s (each ``100 * sum(correct) / sum(total)``) on the
    same items (:func:`per_item` dicts of the same units and totals), and its 95 % interval, each replicate
    drawing the items once for both sides (the difference of the two ratios of sums). NaN where nothing is
    counted. :func:`pooled_gain` of one run."""
    return pooled_gain(a, b, n_boot=n_boot, seed=seed)


def _seed_correct(side: Mapping) -> np.ndarray:
    return np.atleast_2d(np.asarray(side["correct"], dtype=np.float64))  # [seed, sentence]


def pooled_score(side: Mapping, *, n_boot: int = BOOTSTRAP, seed: int = 0) -> tuple[float, tuple[float, float]]:
    """``(mean, (lo, hi))`` of a probe's score over seeds (``side["correct"]`` ``[seed][sentence]``, ``"total"``
    ``[sentence]``): each seed's score ``100 * sum(correct) / sum(total)``, their mean, and the 95 % interval of
    the test sentences resampled within each seed, the seeds' replicates pooled
    (:func:`helpers.core.bootstrap.pooled_replicates`): :func:`pooled_gain` over a side with nothing correct."""
    return pooled_gain(side, {**side, "correct": np.zeros_like(_seed_correct(side))}, n_boot=n_boot, seed=seed)


def pooled_gain(a: Mapping, b: Mapping, *, n_boot: int = BOOTSTRAP, seed: int = 0) -> tuple[float, tuple[float, float]]:
    """``(gain, (lo, hi))`` of two probes scored on the same test sentences with the same seeds: the mean over
    seeds of ``a``'s score minus ``b``'s, and its 95 % interval, the sentences resampled within each seed (both
    sides' run of that seed from the same draws) and the seeds' replicates pooled."""
    _check_paired(a, b)
    ca, cb, total = _seed_correct(a), _seed_correct(b), np.asarray(a["total"], np.float64)
    if ca.shape != cb.shape:
        raise ValueError(f"pooled_gain: {ca.shape[0]} and {cb.shape[0]} seeds: a paired comparison needs the same seeds")
    if not len(total):
        return float("nan"), (float("nan"), float("nan"))
    gain = float(np.mean(100.0 * (ca.sum(1) - cb.sum(1)) / total.sum()))
    reps = bootstrap.pooled_replicates(lambda s, c: 100.0 * bootstrap.ratio_replicates(ca[s] - cb[s], total, c),
                                       [len(total)] * len(ca), n_boot=n_boot, seed=seed)
    return gain, bootstrap.percentile_interval(reps)


def paired_ratio(numerator: Sequence[float], denominator: Sequence[float], *, n_boot: int = BOOTSTRAP,
                 seed: int = 0) -> tuple[float, tuple[float, float]]:
    """``(ratio, (lo, hi))``: ``sum(numerator) / sum(denominator)`` over the same units (e.g. one map's share on the
    special positions over another's, per sentence) and its 95 % interval, each replicate drawing the units once
    for both sums. NaN where the denominator's sum is 0."""
    num, den = np.asarray(numerator, np.float64), np.asarray(denominator, np.float64)
    if num.shape != den.shape:
        raise ValueError(f"paired_ratio: {len(num)} and {len(den)} units: a paired ratio needs the same units")
    if not len(num) or den.sum() == 0:
        return float("nan"), (float("nan"), float("nan"))
    c = bootstrap.counts(len(num), n_boot=n_boot, seed=seed)
    return float(num.sum() / den.sum()), bootstrap.percentile_interval(bootstrap.ratio_replicates(num, den, c))


def median_replicates(values: np.ndarray, unit: np.ndarray, c: np.ndarray) -> np.ndarray:
    """``[n_boot]``: the median of ``values`` (one per row; ``unit[k]`` the unit, e.g. the sentence, of row ``k``)
    in each replicate of ``c`` ``[n_boot, n_units]``: each row weighted by how many times its unit was drawn, the
    median of that replicated sample (``numpy.median``'s: the mean of the two middle values of an even count);
    NaN for a replicate that draws no row.

    The rows are sorted once; the weight of the first ``j + 1`` sorted rows in a replicate is ``c @ M[:, j]``
    (``M[u, j]``: how many of them belong to unit ``u``), so each middle position is found by a binary search over
    ``j``, every replicate at once (``n_units x rows`` integers of memory)."""
    values, unit = np.asarray(values, np.float64), np.asarray(unit, dtype=int)
    c = np.asarray(c).astype(np.int64)
    order = np.argsort(values, kind="stable")
    v, u = values[order], unit[order]
    rows = len(v)
    M = np.zeros((c.shape[1], rows), dtype=np.int64)
    M[u, np.arange(rows)] = 1
    np.cumsum(M, axis=1, out=M)                                  # [unit, j]: unit's rows among sorted 0 .. j
    n = c @ M[:, -1] if rows else np.zeros(len(c), np.int64)     # each replicate's sample size

    def position(k: np.ndarray) -> np.ndarray:
        """The first sorted row ``j`` whose cumulative weight exceeds ``k`` (0-based position in the sample)."""
        lo, hi = np.zeros(len(c), np.int64), np.full(len(c), max(rows - 1, 0), np.int64)
        for _ in range(int(np.ceil(np.log2(max(rows, 2)))) + 1):
            mid = (lo + hi) // 2
            above = np.einsum("bu,ub->b", c, M[:, mid]) > k
            hi, lo = np.where(above, mid, hi), np.where(above, lo, mid + 1)
        return np.minimum(lo, max(rows - 1, 0))

    with np.errstate(invalid="ignore"):
        lo_k, hi_k = np.floor((n - 1) / 2), np.ceil((n - 1) / 2)  # the middle positions of n values
    if not rows:
        return np.full(len(c), np.nan)
    return np.where(n > 0, 0.5 * (v[position(lo_k)] + v[position(hi_k)]), np.nan)


def median_interval(values: Sequence[float], unit: Sequence[int], n_units: int, *, n_boot: int = BOOTSTRAP,
                    seed: int = 0) -> tuple[float, float]:
    """The 95 % interval of the median of ``values`` when their ``n_units`` units (``unit[k]`` in ``0 ..
    n_units - 1``) are resampled (:func:`median_replicates`)."""
    c = bootstrap.counts(n_units, n_boot=n_boot, seed=seed)
    return bootstrap.percentile_interval(median_replicates(values, unit, c))


def choose_on_dev(candidates: Sequence[str], dev_score: Callable[[str], float | None]) -> str | None:
    """The candidate with the highest ``dev_score`` (``None`` or NaN: not scored, left out); ties go to the first
    in ``candidates``' order; ``None`` when none is scored. Only dev scores are read: the chosen map is then scored
    on test, where it was not chosen (no winner's curse).

    >>> choose_on_dev(["norms", "rollout", "alti"], {"norms": 30.0, "rollout": 41.0, "alti": 41.0}.get)
    'rollout'
    """
    best, best_score = None, -np.inf
    for m in candidates:
        s = dev_score(m)
        if s is not None and np.isfinite(s) and s > best_score:
            best, best_score = m, float(s)
    return best
