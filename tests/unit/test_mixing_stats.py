"""The context-mixing chapter's statistics (helpers.mixing.stats): each interval against a slow loop over the
bootstrap's replicates (the same draws, ``default_rng(seed).integers(0, n, (n_boot, n))``, one replicate at a
time), the median of a replicated sample against ``numpy.median`` of the sample written out, and the map chosen on
dev on constructed scores."""
from __future__ import annotations

import math

import numpy as np
import pytest

from helpers.mixing import stats as ms

N_BOOT = 200
# float64 sums of at most a few hundred counts, divided once and scaled by 100: round-off far below 1e-9 points
TOL = 1e-9


def _items(rng, n: int, seeds: int | None = None) -> tuple[dict, dict]:
    total = rng.integers(1, 30, n)
    shape = (n,) if seeds is None else (seeds, n)
    a = (rng.random(shape) * total).round()
    b = (rng.random(shape) * total).round()
    units = list(range(n))
    return ({"units": units, "correct": a.astype(int).tolist(), "total": total.tolist()},
            {"units": units, "correct": b.astype(int).tolist(), "total": total.tolist()})


def _percentiles(values) -> tuple[float, float]:
    lo, hi = np.percentile(np.asarray(values), [2.5, 97.5])
    return float(lo), float(hi)


def test_paired_gain_against_a_loop():
    a, b = _items(np.random.default_rng(0), 23)
    gain, (lo, hi) = ms.paired_gain(a, b, n_boot=N_BOOT, seed=3)
    ca, cb, t = (np.asarray(x, float) for x in (a["correct"], b["correct"], a["total"]))
    draws = np.random.default_rng(3).integers(0, len(t), size=(N_BOOT, len(t)))
    reps = []
    for idx in draws:  # one replicate at a time: the same sentences on both sides
        reps.append(100 * (sum(ca[i] for i in idx) - sum(cb[i] for i in idx)) / sum(t[i] for i in idx))
    want = _percentiles(reps)
    assert gain == pytest.approx(100 * ca.sum() / t.sum() - 100 * cb.sum() / t.sum(), abs=TOL)
    assert (lo, hi) == pytest.approx(want, abs=TOL)
    assert lo <= gain <= hi


def test_a_paired_interval_is_narrower_than_the_two_scores_apart():
    """Pairing removes what the two sides share: two maps that agree on most items have a narrow gain interval."""
    rng = np.random.default_rng(1)
    total = rng.integers(5, 30, 60)
    base = (rng.random(60) * total).round()
    a = {"units": list(range(60)), "correct": (base + (rng.random(60) < 0.3)).tolist(), "total": total.tolist()}
    a["correct"] = np.minimum(a["correct"], total).astype(int).tolist()
    b = {"units": list(range(60)), "correct": base.astype(int).tolist(), "total": total.tolist()}
    _, (lo, hi) = ms.paired_gain(a, b)
    width_a = np.diff(ms.pooled_score(a)[1])[0]  # one side's own interval (one "seed")
    assert hi - lo < width_a / 3


def test_pooled_gain_and_score_against_a_loop():
    a, b = _items(np.random.default_rng(2), 17, seeds=3)
    ca, cb = np.asarray(a["correct"], float), np.asarray(b["correct"], float)
    t = np.asarray(a["total"], float)
    gain, (lo, hi) = ms.pooled_gain(a, b, n_boot=N_BOOT, seed=5)
    mean, (slo, shi) = ms.pooled_score(a, n_boot=N_BOOT, seed=5)
    reps, own = [], []
    for s in range(3):  # seed s resamples its test sentences with its own draws (seed + s), both sides alike
        for idx in np.random.default_rng(5 + s).integers(0, len(t), size=(N_BOOT, len(t))):
            reps.append(100 * (ca[s, idx].sum() - cb[s, idx].sum()) / t[idx].sum())
            own.append(100 * ca[s, idx].sum() / t[idx].sum())
    assert gain == pytest.approx(np.mean([100 * (ca[s].sum() - cb[s].sum()) / t.sum() for s in range(3)]), abs=TOL)
    assert (lo, hi) == pytest.approx(_percentiles(reps), abs=TOL)
    assert mean == pytest.approx(np.mean([100 * ca[s].sum() / t.sum() for s in range(3)]), abs=TOL)
    assert (slo, shi) == pytest.approx(_percentiles(own), abs=TOL)


def test_paired_ratio_against_a_loop():
    rng = np.random.default_rng(3)
    num, den = rng.random(31), rng.random(31) + 0.1
    ratio, (lo, hi) = ms.paired_ratio(num, den, n_boot=N_BOOT)
    reps = [num[idx].sum() / den[idx].sum() for idx in np.random.default_rng(0).integers(0, 31, size=(N_BOOT, 31))]
    assert ratio == pytest.approx(num.sum() / den.sum(), abs=TOL)
    assert (lo, hi) == pytest.approx(_percentiles(reps), abs=TOL)
    assert all(math.isnan(x) for x in (ms.paired_ratio([1.0], [0.0])[0], *ms.paired_ratio([], [])[1]))


@pytest.mark.parametrize("n_units, rows", [(1, 5), (4, 9), (7, 40)])
def test_median_replicates_is_the_median_of_the_replicated_sample(n_units, rows):
    rng = np.random.default_rng(n_units)
    values = rng.normal(size=rows).round(1)  # ties among values, as among r's
    unit = rng.integers(0, n_units, rows)
    unit[:n_units] = np.arange(n_units)  # every unit has a row
    c = np.random.default_rng(9).integers(0, 3, size=(60, n_units + 1)).astype(float)  # the last unit has no row
    c[0] = 0.0  # a replicate with nothing drawn: NaN
    c[1, :-1] = 0.0  # ... or only the unit without rows
    got = ms.median_replicates(values, unit, c)
    assert math.isnan(got[0]) and math.isnan(got[1])
    for k in range(2, len(c)):
        sample = np.concatenate([values[unit == u].repeat(int(c[k, u])) for u in range(n_units + 1)])
        want = np.median(sample) if len(sample) else np.nan
        assert (math.isnan(want) and math.isnan(got[k])) or got[k] == pytest.approx(want, abs=1e-12), k


def test_median_interval_holds_the_median():
    rng = np.random.default_rng(4)
    values, unit = rng.random(300), rng.integers(0, 12, 300)
    lo, hi = ms.median_interval(values, unit, 12, n_boot=N_BOOT)
    assert lo <= np.median(values) <= hi


def test_per_item_keeps_the_items_with_counted_words():
    got = ms.per_item(np.array(["s1", "s2", "s3"]), [1.0, 0.0, 2.0], [3, 0, 2])
    assert got == {"units": ["s1", "s3"], "correct": [1, 2], "total": [3, 2]}
    with pytest.raises(ValueError, match="one each a unit"):
        ms.per_item([0, 1], [1], [1, 1])


def test_a_paired_comparison_refuses_different_items():
    a, b = _items(np.random.default_rng(5), 5)
    with pytest.raises(ValueError, match="different items"):
        ms.paired_gain(a, {**b, "units": [9, 1, 2, 3, 4]})
    with pytest.raises(ValueError, match="different items"):
        ms.paired_gain(a, {**b, "total": [t + 1 for t in b["total"]]})
    a3, b3 = _items(np.random.default_rng(5), 5, seeds=3)
    with pytest.raises(ValueError, match="same seeds"):
        ms.pooled_gain(a3, {**b3, "correct": b3["correct"][:2]})


def test_the_map_is_chosen_on_dev_never_on_test():
    dev = {"norms": 40.0, "rollout": 35.0, "alti": 41.0}
    test = {"norms": 45.0, "rollout": 60.0, "alti": 44.0}  # rollout is best on test, alti on dev
    assert ms.choose_on_dev(list(dev), dev.get) == "alti"
    assert ms.choose_on_dev(list(dev), test.get) == "rollout"  # (what choosing on test would pick)
    tied = {"norms": 41.0, "rollout": 35.0, "alti": 41.0}
    assert ms.choose_on_dev(list(tied), tied.get) == "norms"  # ties: the first in order
    assert ms.choose_on_dev(["alti", "norms"], tied.get) == "alti"
    assert ms.choose_on_dev(["norms", "alti"], {"norms": None, "alti": float("nan")}.get) is None
    assert ms.choose_on_dev(["norms", "alti"], {"norms": None, "alti": 3.0}.get) == "alti"
    assert ms.choose_on_dev([], dev.get) is None
