"""helpers.ablation.stats against slow, obvious references on small inputs: the bootstrap intervals against a loop
over the same resampled segments, percentiles against counting, the permutation test against every head subset of
a tiny score array, Spearman's rho against scipy, and the pruning curve's largest share on constructed curves."""
from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from scipy.stats import spearmanr

from helpers.ablation import stats
from tolerances import EPS64, round_off


def _loop_interval(values: np.ndarray, n_boot: int, seed: int, confidence: float = stats.CONFIDENCE) -> np.ndarray:
    """One resample at a time: the same ``n_boot x S`` indices drawn at once from ``seed``, each row's mean over the
    last axis, then the two quantiles."""
    n = values.shape[-1]
    idx = np.random.default_rng(seed).integers(0, n, size=(n_boot, n))
    means = np.stack([np.mean(values[..., row], axis=-1) for row in idx], axis=-1)   # [..., n_boot]
    alpha = (1 - confidence) / 2
    return np.stack([np.quantile(means, alpha, axis=-1), np.quantile(means, 1 - alpha, axis=-1)], axis=-1)


@pytest.mark.parametrize("seed", [0, 7])
def test_bootstrap_interval_equals_a_loop_over_the_same_resamples(seed):
    values = np.random.default_rng(100 + seed).normal(size=(2, 3, 9))    # [layer, head, segment]
    got = stats.bootstrap_mean_interval(values, n_boot=300, seed=seed)
    assert got.shape == (2, 3, 2)
    # tolerance: each mean is a float64 sum of 9 terms, added in whichever order the two reductions use
    atol = round_off(np.abs(values).max(), 9, eps=EPS64)
    np.testing.assert_allclose(got, _loop_interval(values, 300, seed), rtol=0, atol=atol)
    assert np.all(got[..., 0] <= values.mean(-1)) and np.all(values.mean(-1) <= got[..., 1])
    # every leading index is resampled with the same segments: one row alone gives its own interval (as above)
    np.testing.assert_allclose(stats.bootstrap_mean_interval(values[1, 2], n_boot=300, seed=seed), got[1, 2], rtol=0,
                               atol=atol)


def test_bootstrap_interval_edge_cases():
    assert np.isnan(stats.bootstrap_mean_interval(np.zeros((2, 0)))).all()
    assert stats.bootstrap_mean_interval(np.zeros((2, 0))).shape == (2, 2)
    np.testing.assert_array_equal(stats.bootstrap_mean_interval(np.full(5, 0.25), n_boot=50), [0.25, 0.25])
    wide = stats.bootstrap_mean_interval(np.arange(10.0), n_boot=400, confidence=0.99)
    narrow = stats.bootstrap_mean_interval(np.arange(10.0), n_boot=400, confidence=0.5)
    assert wide[0] <= narrow[0] <= narrow[1] <= wide[1]


def _loop_percentiles(scores: np.ndarray) -> np.ndarray:
    flat = scores.ravel()
    return np.array([100.0 * sum(1 for y in flat if y <= x) / flat.size for x in flat]).reshape(scores.shape)


@pytest.mark.parametrize("scores", [
    np.random.default_rng(1).normal(size=(3, 4)),
    np.array([[1.0, 2.0, 2.0], [0.5, 2.0, 3.0]]),     # ties share the higher rank
    np.full((2, 2), 0.1),                               # all tied: every head at 100
])
def test_percentiles_count_the_heads_at_most_as_large(scores):
    got = stats.percentiles(scores)
    np.testing.assert_array_equal(got, _loop_percentiles(scores))
    assert got.max() == 100.0 and got.shape == scores.shape


def _exact_p(scores: np.ndarray, heads) -> float:
    """The share of all sets of as many distinct heads whose mean is at least the set's (every subset enumerated,
    with the function's own allowance for round-off in the comparison)."""
    flat = scores.ravel()
    observed = np.mean([scores[l, h] for l, h in heads])
    means = [np.mean(flat[list(c)]) for c in itertools.combinations(range(flat.size), len(heads))]
    return float(np.mean([m >= observed - 1e-12 * max(1.0, abs(observed)) for m in means]))


SCORES_2x2 = np.array([[0.1, 0.4], [0.3, 0.2]])


@pytest.mark.parametrize("scores, heads", [
    (SCORES_2x2, [(0, 1)]),                    # the largest head alone: 1 of 4 sets
    (SCORES_2x2, [(1, 0)]),                    # the second largest: 2 of 4
    (SCORES_2x2, [(0, 1), (1, 0)]),            # the two largest: 1 of 6
    (SCORES_2x2, [(0, 0), (1, 1)]),            # the two smallest: every set
    (SCORES_2x2, [(0, 0), (0, 1), (1, 1)]),    # 2 of the 4 sets of three
    (np.array([[1.0, 2.0], [2.0, 0.0]]), [(0, 1)]),   # a tie counts as at least as large: 2 of 4
    (np.arange(6.0).reshape(2, 3), [(1, 1), (0, 2)]),  # not square: heads are (layer, head) of a [2, 3] array
])
def test_permutation_p_against_every_subset(scores, heads):
    """The Monte Carlo p is (1 + X) / (1 + n) with X ~ Binomial(n, p) for the exact p: it lies within 4.5 binomial
    standard deviations of its mean (a chance of about 1e-5 to fail with another seed; this one is fixed)."""
    n = 4000
    p = _exact_p(scores, heads)
    got = stats.permutation_p(scores, heads, n_perm=n, seed=3)
    mean = (1 + n * p) / (1 + n)
    sd = math.sqrt(n * p * (1 - p)) / (1 + n)
    assert abs(got - mean) <= 4.5 * sd + 1e-12, (got, p)
    assert 1 / (1 + n) <= got <= 1.0


def test_permutation_p_edge_cases():
    every = [(l, h) for l in range(2) for h in range(2)]
    assert stats.permutation_p(SCORES_2x2, every, n_perm=500) == 1.0  # every set of four is the same set
    assert math.isnan(stats.permutation_p(SCORES_2x2, []))
    # repeats count once: the same as the head alone
    assert stats.permutation_p(SCORES_2x2, [(0, 1), (0, 1)], n_perm=500) == stats.permutation_p(
        SCORES_2x2, [(0, 1)], n_perm=500)
    assert stats.set_mean(SCORES_2x2, [(0, 1), (1, 0)]) == pytest.approx(0.35)
    assert math.isnan(stats.set_mean(SCORES_2x2, []))


@pytest.mark.parametrize("seed", [0, 1])
def test_spearman_equals_scipy(seed):
    rng = np.random.default_rng(seed)
    x, y = rng.normal(size=(3, 4)), rng.normal(size=(3, 4))
    y[0, 0] = y[1, 1]  # a tie: average ranks, as scipy gives them
    # tolerance: both are Pearson's correlation of the same 12 ranks, in float64
    reference = spearmanr(x.ravel(), y.ravel()).statistic
    assert stats.spearman(x, y) == pytest.approx(reference, abs=round_off(1.0, 12, eps=EPS64))
    assert stats.spearman(x, 2 * x + 1) == pytest.approx(1.0) and stats.spearman(x, -x) == pytest.approx(-1.0)
    assert math.isnan(stats.spearman(x, np.ones_like(x)))


def test_spearman_interval_equals_a_loop_over_the_same_resamples():
    rng = np.random.default_rng(5)
    x = rng.normal(size=(2, 3, 6))
    y = x + rng.normal(scale=0.5, size=x.shape)
    rho, (lo, hi) = stats.spearman_interval(x, y, n_boot=200, seed=4)
    assert rho == pytest.approx(spearmanr(x.mean(-1).ravel(), y.mean(-1).ravel()).statistic)
    draws = []
    for row in np.random.default_rng(4).integers(0, 6, size=(200, 6)):
        a, b = x[..., row].mean(-1).ravel(), y[..., row].mean(-1).ravel()
        if np.ptp(a) > 0 and np.ptp(b) > 0:
            draws.append(spearmanr(a, b).statistic)
    assert (lo, hi) == pytest.approx((np.quantile(draws, 0.025), np.quantile(draws, 0.975)))
    one = stats.spearman_interval(x[..., :1], y[..., :1])  # one segment: no interval
    assert math.isfinite(one[0]) and all(math.isnan(v) for v in one[1])


SHARES = [0.0, 0.25, 0.5, 0.75, 1.0]


@pytest.mark.parametrize("losses, limit, expected", [
    ([1.0, 1.0, 1.0, 1.0, 1.0], 1.05, 1.0),     # never rises: every head
    ([1.0, 1.01, 1.2, 1.3, 1.4], 1.05, 0.25),   # rises at the third step: the second's share
    ([1.0, 1.05, 1.05, 1.06, 1.0], 1.05, 0.5),  # at the limit is within; the first step above stops it for good
    ([1.0, 2.0, 1.0, 1.0, 1.0], 1.05, 0.0),     # the first pruned step already rises
    ([2.0, 1.0, 1.0, 1.0, 1.0], 1.05, 0.0),     # nothing removed and already above: 0
])
def test_largest_share_within_on_constructed_curves(losses, limit, expected):
    assert stats.largest_share_within(SHARES, losses, limit) == expected


def test_distinct_heads_sorted_without_repeats():
    assert stats.distinct([(1, 2), (0, 3), (1, 2), (np.int64(0), 1)]) == [(0, 1), (0, 3), (1, 2)]
    assert stats.distinct([]) == []
