"""The one convention of every verdict (helpers.claims): each rule on both sides of each of its boundaries, the
claim row's fields, and the check that a row's verdict follows from them. The bootstrap (helpers.core.bootstrap)
against a slow loop over replicates."""
import json
import math

import numpy as np
import pytest

from helpers.claims import (
    INCONCLUSIVE,
    NOT_APPLICABLE,
    NOT_REPRODUCED,
    PARTLY,
    REPRODUCED,
    RULE_FIELDS,
    Claim,
    Undefined,
    check_row,
    claim,
    combine,
    combined,
    effect,
    expected_verdict,
    judge,
    judged_or_undefined,
    judge_share,
    judge_within,
    not_applicable,
    share,
    within,
)
from helpers.core import bootstrap

EPS = 1e-9  # a step just across a boundary


# --------------------------------------------------------------------------------------------------- judge


@pytest.mark.parametrize("lo, hi, estimate, expected", [
    (0.0 + EPS, 30.0, 15.0, REPRODUCED),          # lo just above the null, estimate at the paper's level
    (0.0 + EPS, 30.0, 15.0 - EPS, PARTLY),        # ... just below the paper's level
    (0.0, 30.0, 20.0, INCONCLUSIVE),              # lo at the null: not excluded; hi reaches the paper
    (-5.0, 15.0, 5.0, INCONCLUSIVE),              # hi exactly at the paper's level
    (-5.0, 15.0 - EPS, 5.0, NOT_REPRODUCED),      # hi just short of it
    (5.0, 10.0, 7.0, PARTLY),                     # clear of the null, short of the paper
])
def test_judge_paper_above_null(lo, hi, estimate, expected):
    assert judge(estimate, (lo, hi), null=0.0, paper=15.0) == expected


@pytest.mark.parametrize("lo, hi, estimate, expected", [
    (-30.0, 1.0 - EPS, -0.5, REPRODUCED),          # hi just below the null 1, estimate at or below the paper's 0.5
    (-30.0, 1.0 - EPS, 0.5, REPRODUCED),
    (-30.0, 1.0 - EPS, 0.5 + EPS, PARTLY),
    (0.2, 1.0, 0.7, INCONCLUSIVE),                 # hi at the null; lo below the paper's level
    (0.5, 1.2, 0.7, INCONCLUSIVE),                 # lo exactly at the paper's level
    (0.5 + EPS, 1.2, 0.7, NOT_REPRODUCED),         # lo just above it
])
def test_judge_paper_below_null(lo, hi, estimate, expected):
    assert judge(estimate, (lo, hi), null=1.0, paper=0.5) == expected


def test_judge_permutation_stands_in_for_the_interval():
    assert judge(0.8, None, null=1.0, paper=0.9, p_value=0.05 - EPS) == REPRODUCED
    assert judge(0.95, None, null=1.0, paper=0.9, p_value=0.01) == PARTLY
    assert judge(0.8, None, null=1.0, paper=0.9, p_value=0.05) == INCONCLUSIVE  # no interval: cannot rule the level out
    # with an interval too, p decides the null and the interval the paper's level
    assert judge(0.8, (0.7, 1.1), null=1.0, paper=0.9, p_value=0.01) == REPRODUCED
    assert judge(0.98, (0.95, 1.1), null=1.0, paper=0.9, p_value=0.2) == NOT_REPRODUCED


def test_judge_refuses_what_has_no_verdict():
    with pytest.raises(ValueError, match="NaN"):
        judge(float("nan"), (0, 1), null=0, paper=1)
    with pytest.raises(ValueError, match="undefined end"):
        judge(0.5, (float("nan"), 1), null=0, paper=1)
    with pytest.raises(ValueError, match="direction"):
        judge(0.5, (0, 1), null=1, paper=1)
    with pytest.raises(ValueError, match="interval"):
        judge(0.5, None, null=0, paper=1)
    with pytest.raises(ValueError, match="low end"):
        judge(0.5, (1, 0), null=0, paper=1)


# ---------------------------------------------------------------------------------------------- the others


@pytest.mark.parametrize("lo, hi, expected", [
    (-0.01, 0.01, REPRODUCED),             # exactly the range
    (-0.01 - EPS, 0.0, INCONCLUSIVE),      # just out on the low side
    (0.0, 0.01 + EPS, INCONCLUSIVE),       # just out on the high side
    (0.01 + EPS, 0.5, NOT_REPRODUCED),     # wholly above
    (-0.5, -0.01 - EPS, NOT_REPRODUCED),   # wholly below
    (-0.5, -0.01, INCONCLUSIVE),           # touches the low end
])
def test_judge_within(lo, hi, expected):
    assert judge_within((lo + hi) / 2, (lo, hi), low=-0.01, high=0.01) == expected


@pytest.mark.parametrize("s, expected", [(1.0, REPRODUCED), (0.95, REPRODUCED), (0.95 - EPS, INCONCLUSIVE),
                                         (0.05 + EPS, INCONCLUSIVE), (0.05, NOT_REPRODUCED), (0.0, NOT_REPRODUCED)])
def test_judge_share(s, expected):
    assert judge_share(s) == expected


def test_judge_share_refuses_a_non_share():
    for bad in (float("nan"), -0.1, 1.1):
        with pytest.raises(ValueError):
            judge_share(bad)


@pytest.mark.parametrize("parts, expected", [
    ((REPRODUCED, REPRODUCED), REPRODUCED),
    ((REPRODUCED, PARTLY), PARTLY),
    ((PARTLY, PARTLY), PARTLY),
    ((REPRODUCED, INCONCLUSIVE), INCONCLUSIVE),
    ((PARTLY, INCONCLUSIVE), INCONCLUSIVE),
    ((REPRODUCED, NOT_REPRODUCED), NOT_REPRODUCED),
    ((INCONCLUSIVE, NOT_REPRODUCED, PARTLY), NOT_REPRODUCED),
    ((REPRODUCED,), REPRODUCED),
])
def test_combine(parts, expected):
    assert combine(*parts) == expected


def test_combine_refuses_a_part_without_verdict():
    with pytest.raises(ValueError, match="not applicable"):
        combine(REPRODUCED, NOT_APPLICABLE)
    with pytest.raises(ValueError):
        combine()


# ------------------------------------------------------------------------------------------ the claim row


def _row(judged, **kw):
    return claim("x-claim", "§3.1", "text", "paper", "ours", 1.0, judged, resampled="segments", n=40, **kw)


def test_every_row_has_every_field_and_its_verdict_follows():
    rows = [
        _row(effect(12.0, (4.0, 20.0), null=0.0, paper=15.0)),
        _row(within(0.004, (-0.002, 0.009), low=-0.01, high=0.01)),
        _row(share(0.97, estimate=3.0)),
        _row(combined(effect(12.0, (4.0, 20.0), null=0.0, paper=15.0, name="gain"),
                      within(0.004, (-0.002, 0.009), low=-0.01, high=0.01, name="cost"))),
        not_applicable("y", "§3.2", "c", "p", "[SEP] takes 0.02 of every layer: not a sink of this model"),
    ]
    assert [r.verdict for r in rows] == [PARTLY, REPRODUCED, REPRODUCED, PARTLY, NOT_APPLICABLE]
    for r in rows:
        j = r.to_json()
        json.dumps(j)
        assert set(RULE_FIELDS) <= set(j)
        check_row(j)
    assert rows[3].to_json()["parts"] == [PARTLY, REPRODUCED]
    assert [p["name"] for p in rows[3].to_json()["part_rows"]] == ["gain", "cost"]
    na = rows[4].to_json()
    assert all(na[k] is None for k in RULE_FIELDS) and na["reason"]


def test_a_row_whose_verdict_does_not_follow_is_refused():
    j = effect(12.0, (4.0, 20.0), null=0.0, paper=15.0)
    with pytest.raises(ValueError, match="rule gave"):
        Claim("x", "§3", "c", "p", "o", 1.0, REPRODUCED, judged=j)
    row = _row(j).to_json()
    row["verdict"] = REPRODUCED  # edited after the fact
    with pytest.raises(ValueError, match="does not follow"):
        check_row(row)
    row = _row(j).to_json()
    row["interval"] = [-1.0, 10.0]  # now it holds the null and cannot reach 15
    with pytest.raises(ValueError, match="does not follow"):
        check_row(row)
    with pytest.raises(ValueError, match="comes from a rule"):
        Claim("x", "§3", "c", "p", "o", 1.0, REPRODUCED)  # a verdict without a rule
    legacy = {**_row(j).to_json(), **dict.fromkeys(RULE_FIELDS)}  # a row stripped of its rule's fields
    with pytest.raises(ValueError, match="does not follow"):
        check_row(legacy)
    parts = _row(combined(effect(12.0, (4.0, 20.0), null=0.0, paper=15.0, name="a"))).to_json()
    parts["part_rows"][0]["verdict"] = REPRODUCED
    with pytest.raises(ValueError, match="part 'a'"):
        check_row(parts)


def test_a_nan_makes_the_claim_not_applicable_never_a_verdict():
    for make in (lambda: effect(float("nan"), (0, 1), null=0, paper=1),
                 lambda: effect(0.5, (float("nan"), 1), null=0, paper=1),
                 lambda: within(0.5, (0, float("nan")), low=0, high=1),
                 lambda: share(float("nan"))):
        with pytest.raises(Undefined):
            make()
        row = _row(judged_or_undefined(make))
        assert row.verdict == NOT_APPLICABLE and "undefined" in row.reason
    assert expected_verdict({"rule": None}) == NOT_APPLICABLE


# --------------------------------------------------------------------------------------------- bootstrap


def test_bootstrap_counts_are_the_integer_draws():
    n, b = 7, 50
    c = bootstrap.counts(n, n_boot=b, seed=3)
    idx = np.random.default_rng(3).integers(0, n, size=(b, n))
    assert c.shape == (b, n) and (c.sum(1) == n).all()
    for r in range(b):
        assert (c[r] == np.bincount(idx[r], minlength=n)).all()
    # the segments kept behind a section's means draw the same counts (keyword-only n_boot, seed)
    draws = bootstrap.SegmentDraws(np.arange(10, 10 + n), n_boot=b, seed=3)
    assert len(draws) == n and (draws.counts == c).all()


def test_bootstrap_statistics_against_a_loop():
    rng = np.random.default_rng(0)
    num, den = rng.random(30), rng.random(30) + 0.5
    b = 200
    idx = np.random.default_rng(1).integers(0, 30, size=(b, 30))
    loop_ratio = np.array([num[i].sum() / den[i].sum() for i in idx])
    loop_mean = np.array([num[i].mean() for i in idx])
    loop_diff = np.array([num[i].mean() - den[i].mean() for i in idx])
    for got, want in [(bootstrap.ratio_interval(num, den, n_boot=b, seed=1), loop_ratio),
                      (bootstrap.mean_interval(num, n_boot=b, seed=1), loop_mean),
                      (bootstrap.paired_interval(num, den, n_boot=b, seed=1), loop_diff)]:
        assert got == pytest.approx(tuple(np.percentile(want, [2.5, 97.5])), rel=1e-12)


def test_bootstrap_per_head_statistics_share_the_draws():
    values = np.random.default_rng(0).random((20, 3, 4))  # [unit, layer, head]
    out = bootstrap.mean_interval(values, n_boot=100, seed=0)
    assert out.shape == (3, 4, 2)
    for l in range(3):
        for h in range(4):
            assert tuple(out[l, h]) == pytest.approx(bootstrap.mean_interval(values[:, l, h], n_boot=100, seed=0))


def test_pooled_replicates_hold_every_run():
    runs = [np.full(10, 0.5), np.full(10, 0.7)]  # two seeds, no spread within either
    reps = bootstrap.pooled_replicates(lambda s, c: bootstrap.mean_replicates(runs[s], c), [10, 10], n_boot=100)
    lo, hi = bootstrap.percentile_interval(reps)
    assert reps.shape == (200,) and math.isclose(lo, 0.5) and math.isclose(hi, 0.7)  # the spread over seeds


def test_share_holding():
    assert bootstrap.share_holding(np.array([True, True, False, True])) == 0.75


def test_a_rule_judges_the_numbers_as_the_row_reports_them():
    """Numbers are judged to DIGITS significant digits: a last-bit difference from another summation order gives the
    same row and the same verdict; the range's end and the interval's end compare as reported."""
    from helpers.claims import DIGITS, reported

    a, b = 0.1 + 0.2, 0.3  # the same number summed two ways
    assert a != b and reported(a) == reported(b)
    assert _row(effect(a, (a, 1.0), null=0.0, paper=b)).to_json() == _row(effect(b, (b, 1.0), null=0.0, paper=b)).to_json()
    low = 1 / 3
    assert within(0.5, (low, 0.9), low=low, high=1.0).verdict == REPRODUCED  # the interval's end at the range's end
    assert reported(float("nan")) != reported(float("nan")) and reported(None) is None and DIGITS == 10
