"""What holds across models (:mod:`helpers.compare.findings`), on constructed claim rows: the groups by the
pre-trained models' verdicts (reproduced only counts as holding), each model's verdict counts, and the random-init
controls judged on the trained-minus-random difference, with and without intervals; a claim's JSON read back with
its rule (:func:`helpers.compare.run.claim_from_json`)."""
from __future__ import annotations

import json

import numpy as np
import pytest
from scipy import stats

from helpers.claims import (INCONCLUSIVE, NOT_APPLICABLE, NOT_REPRODUCED, PARTLY, REPRODUCED, Claim, claim,
                            combined, effect, not_applicable, share, within)
from helpers.compare.findings import difference_interval, differences, findings, random_test, verdict_counts
from helpers.compare.run import ModelResult, claim_from_json

R, P, I, N, NA = REPRODUCED, PARTLY, INCONCLUSIVE, NOT_REPRODUCED, NOT_APPLICABLE
PAPER, NULL = 10.0, 0.0  # every effect claim below: the paper's level 10 above a null of 0


def row(cid: str, verdict: str) -> Claim:
    """A claim with ``verdict`` and no interval to form a difference from: a share of replicates (reproduced,
    inconclusive, not reproduced), or for "partly" an effect judged by a permutation p alone."""
    if verdict == NA:
        return not_applicable(cid, "§3.1", "c", "p", "no [SEP] here")
    judged = (effect(5.0, None, null=NULL, paper=PAPER, p_value=0.01) if verdict == P
              else share({R: 1.0, I: 0.5, N: 0.0}[verdict]))
    return claim(cid, "§3.1", "c", "p", "o", 1.0, judged, resampled="segments", n=40)


def judged(cid: str, estimate: float, interval, **kw) -> Claim:
    """An effect claim on its interval (its verdict from :func:`helpers.claims.judge`)."""
    return claim(cid, "§3.1", "c", "p", "o", estimate, effect(estimate, interval, null=kw.get("null", NULL),
                                                                paper=kw.get("paper", PAPER)),
                 resampled="segments", n=40)


def model(spec: str, claims: list[Claim]) -> ModelResult:
    return ModelResult(spec, {"name": spec, "layers": 2, "heads": 2, "random_init": spec.startswith("random:")}, claims)


def verdicts(spec: str, vs: dict[str, str]) -> ModelResult:
    return model(spec, [row(cid, v) for cid, v in vs.items()])


# ------------------------------------------------------------------------------------ the difference


def test_difference_interval_is_the_normal_interval_for_normal_estimates():
    """Two normal estimates' 95 % intervals (estimate ± z s): the quadrature gives d ± z sqrt(s1^2 + s2^2), the
    exact interval of their difference (scipy's normal quantile as the reference); asymmetric intervals combine
    each side's half-widths (lo: the trained model's lower and the control's upper), worked by hand."""
    z = stats.norm.ppf(0.975)
    a, sa, b, sb = 5.0, 0.7, 2.0, 1.9
    lo, hi = difference_interval(a, (a - z * sa, a + z * sa), b, (b - z * sb, b + z * sb))
    want = stats.norm.interval(0.95, loc=a - b, scale=np.hypot(sa, sb))
    assert lo == pytest.approx(want[0], abs=1e-12) and hi == pytest.approx(want[1], abs=1e-12)
    lo, hi = difference_interval(10.0, (7.0, 11.0), 4.0, (3.0, 8.0))  # below: hypot(3, 4) = 5; above: hypot(1, 1)
    assert (lo, hi) == pytest.approx((6.0 - 5.0, 6.0 + 2 ** 0.5), abs=1e-12)
    # an estimate outside its own interval: that side's half-width counts as 0, never negative
    assert difference_interval(5.0, (6.0, 7.0), 0.0, (0.0, 0.0)) == pytest.approx((5.0, 7.0))


def test_difference_interval_covers_the_true_difference_95_percent_of_the_time():
    """Simulated: independent normal estimates of 3 and 1 with their 95 % intervals, 20,000 times; the combined
    interval holds the true difference 2 in 95 % of them (binomial standard error 0.0015; 4 of them allowed)."""
    rng = np.random.default_rng(0)
    z, n = stats.norm.ppf(0.975), 20_000
    sa, sb = 0.5, 1.5
    a, b = rng.normal(3.0, sa, n), rng.normal(1.0, sb, n)
    held = [lo <= 2.0 <= hi for lo, hi in (difference_interval(x, (x - z * sa, x + z * sa), y, (y - z * sb, y + z * sb))
                                           for x, y in zip(a, b))]
    assert abs(np.mean(held) - 0.95) < 4 * np.sqrt(0.95 * 0.05 / n)


def test_differences_on_a_common_scale_only():
    t = judged("x", 12.0, (11.0, 13.0))
    assert len(differences(t.judged, judged("x", 11.5, (10.5, 12.5)).judged)) == 1
    assert differences(t.judged, judged("x", 11.5, (10.5, 12.5), paper=20.0).judged) == ()  # another paper level
    assert differences(t.judged, judged("x", 11.5, (10.5, 12.5), null=1.0).judged) == ()    # another null
    assert differences(t.judged, None) == () and differences(None, t.judged) == ()         # a row without its rule
    s = claim("x", "§3.1", "c", "p", "o", 1.0, share(0.97), resampled="segments", n=40)
    assert differences(s.judged, s.judged) == ()                                             # a share: no interval
    w1 = within(0.004, (-0.002, 0.009), low=-0.01, high=0.01)
    w2 = within(0.001, (-0.003, 0.006), low=-0.01, high=0.01)
    assert len(differences(w1, w2)) == 1 and not differences(w1, w2)[0].learned
    assert differences(w1, within(0.001, (-0.003, 0.006), low=-0.02, high=0.02)) == ()       # another range
    assert differences(w1, t.judged) == ()                                                   # another rule


# ------------------------------------------------------------------------------------ the groups


def test_groups_count_only_reproduced_as_holding():
    """Two pre-trained models: a claim is shared only when both reproduce it; partly and inconclusive are their own
    (per model), never holding; a claim not applicable to one model leaves that model out; one not applicable to
    both is in none of the three groups."""
    a = verdicts("a", {"r": R, "rp": R, "rn": R, "p": P, "i": I, "pi": P, "n": N, "na": NA, "nax": NA, "ri": R})
    b = verdicts("b", {"r": R, "rp": P, "rn": N, "p": P, "i": N, "pi": I, "n": N, "na": R, "nax": NA, "ri": I})
    got = findings([a, b])
    assert got.shared == ["r", "na"]                 # "na": not applicable to a, reproduced by b
    assert got.model_dependent == ["rp", "rn", "ri"]  # reproduced by one, partly/not/inconclusive for the other
    assert got.none == ["p", "i", "pi", "n"]         # partly for both is reproduced by none
    assert got.not_applicable == ["nax"]
    assert got.partly == {"a": ["p", "pi"], "b": ["rp", "p"]}
    assert got.inconclusive == {"a": ["i"], "b": ["pi", "ri"]}
    assert got.random_too == got.random_own_verdict == got.random_learned == [] and got.tests == []


def test_one_pretrained_model():
    got = findings([verdicts("a", {"x": R, "y": P, "z": I, "w": N, "v": NA})])
    assert (got.shared, got.model_dependent, got.none, got.not_applicable) == (["x"], [], ["y", "z", "w"], ["v"])
    assert got.partly == {"a": ["y"]} and got.inconclusive == {"a": ["z"]}


def test_verdict_counts_name_every_verdict():
    got = verdict_counts([verdicts("a", {"x": R, "y": I, "z": I, "v": NA}), verdicts("random:a", {"x": N})])
    assert got == {"a": {R: 1, P: 0, I: 2, N: 0, NA: 1}, "random:a": {R: 0, P: 0, I: 0, N: 1, NA: 0}}


# ------------------------------------------------------------------------------------ random too


def test_random_too_on_the_difference():
    """The control ``random:a`` against ``a``, every claim an effect of paper level 10 over 0:

    - ``same``: both reproduce, the difference's interval holds 0: reproduced too;
    - ``learned``: the control is partly, the trained model's estimate exceeds it beyond chance (the difference's
      interval lies above 0, and the difference reaches the claim's effect size): not too, pre-training adds;
    - ``learned-short``: the same with a difference above 0 that falls short of the effect size: still learned
      (partly on the difference);
    - ``control-stronger``: the control's estimate exceeds the trained model's beyond chance: too (on its side);
    - ``inconclusive``, ``not``: the control's own verdict is neither reproduced nor partly: never too, whatever
      the difference;
    - ``na``: not applicable to the control: no test."""
    a = model("a", [judged("same", 12.0, (11.0, 13.0)), judged("learned", 25.0, (24.0, 26.0)),
                    judged("learned-short", 9.0, (8.5, 9.5)), judged("control-stronger", 11.0, (10.5, 11.5)),
                    judged("inconclusive", 12.0, (11.0, 13.0)), judged("not", 12.0, (11.0, 13.0)),
                    judged("na", 12.0, (11.0, 13.0))])
    ctrl = model("random:a", [judged("same", 11.5, (10.0, 13.0)), judged("learned", 5.0, (4.0, 6.0)),
                              judged("learned-short", 5.0, (4.5, 5.5)), judged("control-stronger", 20.0, (19.0, 21.0)),
                              judged("inconclusive", 5.0, (-1.0, 11.0)), judged("not", 1.0, (-1.0, 3.0)),
                              row("na", NA)])
    assert [c.verdict for c in ctrl.claims] == [R, P, P, R, I, N, NA]
    got = findings([a, ctrl])
    assert got.random_too == ["same", "control-stronger"]
    assert got.random_learned == ["learned", "learned-short"] and got.random_own_verdict == []
    tests = {t.claim: t for t in got.tests}
    assert "na" not in tests and all(t.basis == "difference" and t.trained == "a" for t in tests.values())
    same = tests["same"].differences[0]
    assert same.estimate == pytest.approx(0.5) and same.interval[0] < 0 < same.interval[1] and not same.learned
    assert tests["learned"].differences[0].learned and not tests["learned"].too
    assert tests["learned-short"].differences[0].interval[0] > 0 and tests["learned-short"].differences[0].learned
    assert tests["control-stronger"].differences[0].interval[1] < 0 and tests["control-stronger"].too
    assert not tests["inconclusive"].too and not tests["not"].too


def test_random_too_downward_claim():
    """A claim whose paper level lies below its null (paper -0.5, null 0): pre-training adds when the difference's
    interval lies below 0."""
    down = dict(paper=-0.5)
    a = model("a", [judged("x", -0.9, (-1.0, -0.8), **down), judged("y", -0.6, (-0.7, -0.5), **down)])
    ctrl = model("random:a", [judged("x", -0.3, (-0.4, -0.2), **down), judged("y", -0.55, (-0.7, -0.4), **down)])
    got = findings([a, ctrl])
    assert got.random_learned == ["x"] and got.random_too == ["y"]


def test_random_too_on_the_own_verdict_where_rows_carry_no_interval():
    """Rows without an interval on a common scale (shares, a permutation p alone), or a control whose pre-trained
    model is not among those compared: no difference can be formed, so the control's own verdict decides, listed
    apart (``random_own_verdict``)."""
    old = findings([verdicts("a", {"x": R, "y": R}), verdicts("random:a", {"x": P, "y": N})])
    assert old.random_own_verdict == ["x"] and old.random_too == [] and old.random_learned == []
    assert [t.basis for t in old.tests] == ["own verdict", "own verdict"] and old.tests[0].too
    alone = findings([verdicts("b", {"x": R}), model("random:a", [judged("x", 11.0, (10.5, 11.5))])])
    assert alone.random_own_verdict == ["x"] and alone.tests[0].trained is None
    s = claim("s", "§3.1", "c", "p", "o", 1.0, share(0.97), resampled="segments", n=40)
    shares = findings([model("a", [s]), model("random:a", [s])])
    assert shares.random_own_verdict == ["s"]


def test_random_too_on_a_combined_claim_part_by_part():
    """A combined claim: its parts of the same name each give a difference; one learned part withholds "too"."""
    def two(x, y):
        return claim("c", "§3.1", "c", "p", "o", 1.0,
                     combined(effect(x[0], x[1], null=0.0, paper=PAPER, name="first"),
                              within(y[0], y[1], low=-1.0, high=1.0, name="second")), resampled="segments", n=40)

    a = model("a", [two((12.0, (11.0, 13.0)), (0.1, (-0.2, 0.4)))])
    same = model("random:a", [two((11.8, (10.8, 12.8)), (0.0, (-0.3, 0.3)))])
    moved = model("random:a", [two((11.8, (10.8, 12.8)), (0.8, (0.7, 0.9)))])  # the second part moves: two-sided
    got = findings([a, same])
    assert got.random_too == ["c"] and [d.name for d in got.tests[0].differences] == ["first", "second"]
    got = findings([a, moved])
    assert got.random_learned == ["c"] and [d.learned for d in got.tests[0].differences] == [False, True]


def test_several_controls():
    """With two controls, one that reproduces a claim too on the difference puts it in ``random_too``."""
    a, b = model("a", [judged("x", 12.0, (11.0, 13.0))]), model("b", [judged("x", 25.0, (24.0, 26.0))])
    ra, rb = model("random:a", [judged("x", 11.5, (10.5, 12.5))]), model("random:b", [judged("x", 11.5, (10.5, 12.5))])
    got = findings([a, ra, b, rb])
    assert got.random_too == ["x"] and [(t.control, t.too) for t in got.tests] == [("random:a", True), ("random:b", False)]
    assert random_test("x", rb, b).differences[0].learned and random_test("y", rb, b) is None


# ------------------------------------------------------------------------------------ rows read back


@pytest.mark.parametrize("made", [
    judged("effect", 12.0, (11.0, 13.0)),
    claim("p", "§3.1", "c", "p", "o", 1.0, effect(3.0, None, null=0.0, paper=5.0, p_value=0.01), resampled="pairs", n=9),
    claim("w", "§3.1", "c", "p", "o", 1.0, within(0.0, (-0.1, 0.1), low=-1.0, high=1.0), resampled="sentences", n=8),
    claim("s", "§3.1", "c", "p", "o", None, share(0.5, estimate=3.0), resampled="segments", n=40),
    claim("c", "§3.1", "c", "p", "o", 1.0, combined(effect(12.0, (11.0, 13.0), null=0.0, paper=10.0, name="a"),
                                                    share(0.99, name="b")), resampled="documents", n=4),
    not_applicable("na", "§3.2", "c", "p", "no [SEP]"),
])
def test_a_claim_read_back_from_its_json(made):
    """What the compare cache stores (the JSON row) gives the same claim back, with its rule and its check."""
    back = claim_from_json(json.loads(json.dumps(made.to_json())))
    assert back.to_json() == made.to_json() and back == made


def test_a_row_without_its_rule_and_a_wrong_row():
    legacy = {"id": "x", "section": "§3.1", "claim": "c", "paper": "p", "ours": "o", "value": 1.0, "verdict": PARTLY}
    with pytest.raises(ValueError, match="comes from a rule"):  # a verdict is a rule's: rows before the convention are not read
        claim_from_json(legacy)
    wrong = {**judged("x", 12.0, (11.0, 13.0)).to_json(), "verdict": PARTLY}  # the rule gives reproduced
    with pytest.raises(ValueError, match="verdict"):
        claim_from_json(wrong)


def test_the_compare_json_carries_each_rows_rule():
    """``compare --json``: each model's result keeps ``ours``, ``value`` and ``verdict`` first, then the rule's fields
    as the claim's own row has them (a judged row, a row not applicable, a row judged without an interval)."""
    from helpers.claims import FIELDS, RULE_FIELDS, check_row
    from helpers.compare.run import compare_json

    a = model("a", [judged("x", 12.0, (11.0, 13.0)), row("y", NA), row("z", P)])
    ctrl = model("random:a", [judged("x", 5.0, (-1.0, 11.0))])
    payload = compare_json([a, ctrl])
    x, y, z = payload["claims"]
    assert list(x["results"]) == ["a", "random:a"] and list(y["results"]) == ["a"]
    for c in (x, y, z):
        for spec, got in c["results"].items():
            assert list(got) == ["ours", "value", "verdict", *RULE_FIELDS]
            own = next(m for m in (a, ctrl) if m.spec == spec)
            want = {k: v for k, v in next(r for r in own.claims if r.id == c["id"]).to_json().items() if k in got}
            assert got == want
    assert x["results"]["random:a"]["verdict"] == I and x["results"]["random:a"]["interval"] == [-1.0, 11.0]
    check_row({**{k: x[k] for k in FIELDS if k in x}, **x["results"]["a"]})
    assert y["results"]["a"]["rule"] is None and z["results"]["a"]["interval"] is None
