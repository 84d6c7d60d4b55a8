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


# ------------------------------------------------------------------ issue 61: same layers, replicates, the claims


def _exact_layer_p(scores: np.ndarray, heads) -> float:
    """Every set drawn from the same layers enumerated (per layer, every choice of as many distinct heads as the set
    holds there): the share whose mean is at least the set's."""
    layers = sorted({l for l, _ in heads})
    choices = [list(itertools.combinations(range(scores.shape[1]), sum(1 for l, _ in heads if l == layer)))
               for layer in layers]
    observed = np.mean([scores[l, h] for l, h in heads])
    means = [np.mean([scores[layer, h] for layer, pick in zip(layers, combo) for h in pick])
             for combo in itertools.product(*choices)]
    return float(np.mean([m >= observed - 1e-12 * max(1.0, abs(observed)) for m in means]))


SCORES_3x4 = np.array([[0.1, 0.9, 0.5, 0.3], [5.0, 6.0, 7.0, 8.0], [0.2, 0.4, 0.6, 0.8]])


@pytest.mark.parametrize("heads", [
    [(0, 1)],                          # the largest of its layer: 1 of 4
    [(0, 1), (0, 2)],                  # the two largest of layer 1: 1 of 6
    [(0, 0), (2, 3)],                  # one per layer: 4 x 4 sets
    [(1, 0), (2, 1), (2, 3)],          # a layer of large scores does not help a head of it against its own layer
])
def test_layer_matched_p_against_every_same_layer_set(heads):
    """As :func:`test_permutation_p_against_every_subset`, the random sets drawn from the set's own layers."""
    n = 4000
    p = _exact_layer_p(SCORES_3x4, heads)
    got = stats.layer_matched_p(SCORES_3x4, heads, n_perm=n, seed=3)
    mean = (1 + n * p) / (1 + n)
    sd = math.sqrt(n * p * (1 - p)) / (1 + n)
    assert abs(got - mean) <= 4.5 * sd + 1e-12, (got, p)
    # the expected mean of such a set: the mean over the enumerated sets
    layers = sorted({l for l, _ in heads})
    choices = [list(itertools.combinations(range(4), sum(1 for l, _ in heads if l == layer))) for layer in layers]
    means = [np.mean([SCORES_3x4[layer, h] for layer, pick in zip(layers, combo) for h in pick])
             for combo in itertools.product(*choices)]
    assert stats.layer_expected_mean(SCORES_3x4, heads) == pytest.approx(np.mean(means), abs=round_off(10.0, 12, eps=EPS64))


def test_layer_matched_p_edge_cases():
    assert stats.layer_matched_p(SCORES_3x4, [(1, h) for h in range(4)], n_perm=300) == 1.0  # the whole layer
    assert math.isnan(stats.layer_matched_p(SCORES_3x4, []))
    assert math.isnan(stats.layer_expected_mean(SCORES_3x4, []))
    # against all heads the layer of large scores stands out; against its own layer it does not
    assert stats.permutation_p(SCORES_3x4, [(1, 0)], n_perm=2000) < 0.4 < stats.layer_matched_p(SCORES_3x4, [(1, 0)],
                                                                                                n_perm=2000)


def test_percentiles_replicates_are_each_replicates_percentiles():
    reps = np.random.default_rng(2).normal(size=(5, 2, 3))
    reps[0, 0, 0] = reps[0, 1, 1]   # a tie
    got = stats.percentiles_replicates(reps)
    for r in range(5):
        np.testing.assert_array_equal(got[r], _loop_percentiles(reps[r]))


def _draws(n: int, n_boot: int, seed: int) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, n, size=(n_boot, n))


def test_the_claims_replicate_statistics_against_loops():
    """The shares of resampled sets in which a claim's statement holds, and the pruning gain's interval, against a
    loop over the same draws: each set's sentences listed, its sums taken, the statement checked."""
    from helpers.ablation import claims as ac

    rng = np.random.default_rng(11)
    S, n_boot = 7, 300
    base = rng.uniform(1.0, 3.0, size=S)
    single = base * (1 + rng.normal(0.009, 0.012, size=(2, 3, S)))
    only = base * (1 + rng.normal(0.06, 0.02, size=(2, 3, S)))
    idx = _draws(S, n_boot, 5)
    single_loop = np.mean([np.mean([(single[l, h, row] - base[row]).sum() / base[row].sum() <= ac.LITTLE_COST
                                    for l in range(2) for h in range(3)]) > ac.MOST for row in idx])
    assert ac.single_holds(single, base, n_boot=n_boot, seed=5) == pytest.approx(single_loop)
    assert 0 < single_loop < 1  # the sets disagree: the comparison can fail
    only_loop = np.mean([np.mean([min((only[l, h, row] - base[row]).sum() / base[row].sum() for h in range(3))
                                  <= ac.ONE_HEAD_COST for l in range(2)]) >= ac.MANY_LAYERS for row in idx])
    assert ac.one_head_holds(only, base, n_boot=n_boot, seed=5) == pytest.approx(only_loop)
    assert 0 < only_loop < 1

    steps = 5
    shares = [k / (steps - 1) for k in range(steps)]
    held = base * (1 + np.linspace(0, 0.1, steps)[:, None] + rng.normal(0, 0.02, size=(steps, S)))
    random = held[None] + base * rng.normal(0.01, 0.02, size=(3, steps, S))
    curve_loop = []
    gap_loop = []
    for row in idx:
        curve = [held[k, row].mean() for k in range(steps)]
        curve_loop.append(stats.largest_share_within(shares, curve, base[row].mean() * (1 + ac.PRUNE_RISE)) >= 0.5)
        gaps = [np.mean([random[:, k, s].mean() - held[k, s] for k in range(1, steps - 1)]) for s in row]
        gap_loop.append(np.sum(gaps) / base[row].sum())
    assert ac.prune_holds(shares, held, base, 0.5, n_boot=n_boot, seed=5) == pytest.approx(np.mean(curve_loop))
    gain, interval = ac.prune_gain(held, random, base, n_boot=n_boot, seed=5)
    full = np.mean([np.mean([random[:, k, s].mean() - held[k, s] for k in range(1, steps - 1)]) for s in range(S)])
    assert gain == pytest.approx(full * S / base.sum())
    assert interval == pytest.approx((np.quantile(gap_loop, 0.025), np.quantile(gap_loop, 0.975)))


def test_summarise_new_statistics_against_loops():
    """summarise's relative changes (over the same sentences' loss), Michel's count, the loss's scale, mean ablation,
    the sink-set tests with their control and Spearman's rho, and the paper heads' gain over same-layer random sets,
    against loops over the same draws."""
    from helpers.ablation.run import summarise

    rng = np.random.default_rng(21)
    L, H, S, S2, n_boot = 2, 3, 6, 4, 200
    base = rng.uniform(1.0, 3.0, size=S)
    single = base + rng.normal(0.0, 0.1, size=(L, H, S))
    mean = base + rng.normal(0.0, 0.05, size=(L, H, S))
    chosen = np.array([[True, False, True], [False, True, True]])
    per_head = base[:S2] + rng.normal(0.0, 0.1, size=(L, H, S2))
    share = rng.uniform(0.2, 0.9, size=(L, H))
    raw = {"base": base.tolist(), "detail_segments": S2, "n_heads": H, "single": single.tolist(),
           "mean": mean.tolist(), "importance": None, "only": None, "prune": None,
           "sinks": {"cls": {"noop": {"all": None, "per_head": per_head.tolist()},
                             "redirect": {"all": None, "per_head": per_head.tolist()}}},
           "control": {"all": (base + rng.normal(0, 0.1, size=(3, S))).tolist()},
           "sink_sets": {"cls": {"heads": chosen.tolist(), "noop": (base + 0.01).tolist(),
                                 "redirect": (base + rng.normal(0.2, 0.1, size=S)).tolist(),
                                 "control": (base + rng.normal(0.05, 0.05, size=(3, S))).tolist()}},
           "all_removed": (base + 1.0).tolist(), "unigram": (base + 2.0).tolist()}
    heads = {"specialised": [(0, 1), (1, 2)]}
    out = summarise(raw, heads, n_boot=n_boot, n_perm=500, seed=3, shares={"cls": share.tolist(),
                                                                          "sep": np.zeros((L, H)).tolist()})
    idx = _draws(S, n_boot, 3)
    assert out["detail_base_loss"] == pytest.approx(base[:S2].mean())
    lo_hi = stats.bootstrap_mean_interval(single - base, n_boot=n_boot, seed=3)
    assert out["delta_significant"] == {"raise": int((lo_hi[..., 0] > 0).sum()), "lower": int((lo_hi[..., 1] < 0).sum()),
                                        "heads": L * H}
    np.testing.assert_allclose(out["delta_mean_relative"], (mean - base).mean(-1) / base.mean(), rtol=1e-12)
    assert out["loss_scale"] == pytest.approx({"base": base.mean(), "every_head_removed": base.mean() + 1.0,
                                               "unigram": base.mean() + 2.0})
    entry = out["sink_sets"]["cls"]
    assert entry["heads"] == ["1-1", "1-3", "2-2", "2-3"]
    tests = raw["sink_sets"]["cls"]
    for name, change in (("noop", np.asarray(tests["noop"]) - base),
                         ("control", (np.asarray(tests["control"]) - base).mean(0)),
                         ("control_minus_noop", (np.asarray(tests["control"]) - base).mean(0)
                          - (np.asarray(tests["noop"]) - base))):
        loop = [change[row].sum() / base[row].sum() for row in idx]
        assert entry[name]["relative"] == pytest.approx(change.sum() / base.sum())
        assert entry[name]["relative_interval"] == pytest.approx([np.quantile(loop, 0.025), np.quantile(loop, 0.975)])
    sp_loop = []
    change = per_head - base[:S2]
    for row in _draws(S2, n_boot, 3):
        sp_loop.append(spearmanr(share[chosen], change[chosen][:, row].mean(-1)).statistic)
    assert entry["spearman"]["rho"] == pytest.approx(spearmanr(share[chosen], change[chosen].mean(-1)).statistic)
    assert entry["spearman"]["interval"] == pytest.approx([np.quantile(sp_loop, 0.025), np.quantile(sp_loop, 0.975)])
    assert out["sink_premise"]["measured"] == "cls" and out["sink_premise"]["sep"]["reason"].startswith("[SEP] is not")

    paper = out["paper_heads"]["specialised"]
    pct = _loop_percentiles((single - base).mean(-1))
    expected = np.mean([pct[l].mean() for l, _ in heads["specialised"]])
    assert paper["delta_expected_percentile"] == pytest.approx(expected)
    assert paper["delta_gain"] == pytest.approx(np.mean([pct[l, h] for l, h in heads["specialised"]]) - expected)
    gains = []
    for row in idx:
        p = _loop_percentiles((single[..., row] - base[row]).mean(-1))
        gains.append(np.mean([p[l, h] for l, h in heads["specialised"]]) - np.mean([p[l].mean() for l, _ in heads["specialised"]]))
    assert paper["delta_gain_interval"] == pytest.approx([np.quantile(gains, 0.025), np.quantile(gains, 0.975)])
