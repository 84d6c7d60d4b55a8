"""The context-mixing chapter's claims (helpers.mixing.claims): each rule on both sides of each of its boundaries,
and :func:`claims` on hand-made results (no model): the map chosen on dev and scored on test, the gain paired on
the same test items, every row's verdict following from its own fields, and a NaN never a verdict."""
from __future__ import annotations

import math

import numpy as np
import pytest

from helpers.claims import INCONCLUSIVE, NOT_APPLICABLE, NOT_REPRODUCED, PARTLY, REPRODUCED, Undefined, check_row
from helpers.mixing import claims as mc
from helpers.mixing import stats as ms

EPS = 1e-9


# ------------------------------------------------------------------------------------------- the rules


def test_erases_on_both_sides_of_its_boundaries():
    e, n = mc.ERASE_RATIO, mc.NO_CHANGE
    assert mc.judge_erases(e, (e - 0.1, n - EPS)).verdict == REPRODUCED       # below the null, at our level
    assert mc.judge_erases(e + EPS, (e - 0.1, n - EPS)).verdict == PARTLY     # below the null, short of it
    assert mc.judge_erases(0.9, (0.8, n - EPS)).verdict == PARTLY
    assert mc.judge_erases(e, (e - 0.1, n)).verdict == INCONCLUSIVE           # holds the null and our level
    assert mc.judge_erases(0.9, (e, n + 0.1)).verdict == INCONCLUSIVE
    assert mc.judge_erases(0.9, (e + EPS, n + 0.1)).verdict == NOT_REPRODUCED  # holds the null, not our level
    assert mc.judge_erases(1.02, (0.95, 1.1)).verdict == NOT_REPRODUCED
    for bad in ((math.nan, (0.1, 0.2)), (0.3, (math.nan, 0.2)), (0.3, None)):
        with pytest.raises(Undefined):
            mc.judge_erases(*bad)


def test_squared_norms_on_both_sides_of_its_boundaries():
    r, s = mc.CLOSE_R, mc.SAME_ARGMAX
    assert mc.judge_squared_norms(0.99, (r, 1.0), 0.95, (s, 1.0)).verdict == REPRODUCED
    assert mc.judge_squared_norms(0.99, (r - EPS, 1.0), 0.95, (s, 1.0)).verdict == INCONCLUSIVE
    assert mc.judge_squared_norms(0.99, (r, 1.0), 0.95, (s - EPS, 1.0)).verdict == INCONCLUSIVE
    assert mc.judge_squared_norms(0.9, (0.8, r - EPS), 0.95, (s, 1.0)).verdict == NOT_REPRODUCED
    assert mc.judge_squared_norms(0.99, (r, 1.0), 0.8, (0.7, s - EPS)).verdict == NOT_REPRODUCED
    judged = mc.judge_squared_norms(0.99, (r, 1.0), 0.95, (s - EPS, 1.0))
    assert judged.rule == "combined" and [p.verdict for p in judged.parts] == [REPRODUCED, INCONCLUSIVE]
    assert [p.range for p in judged.parts] == [(r, 1.0), (s, 1.0)]
    for bad in ((math.nan, (0.9, 1.0), 0.9, (0.9, 1.0)), (0.99, None, 0.9, (0.9, 1.0)), (0.99, (0.9, 1.0), 0.9, None)):
        with pytest.raises(Undefined):
            mc.judge_squared_norms(*bad)


def test_better_on_both_sides_of_its_boundaries():
    m = mc.IMPROVE_MARGIN
    assert mc.judge_better(m, (EPS, 3.0)).verdict == REPRODUCED
    assert mc.judge_better(m - EPS, (EPS, 3.0)).verdict == PARTLY
    assert mc.judge_better(0.4, (EPS, 0.8)).verdict == PARTLY
    assert mc.judge_better(2.0, (0.0, 3.0)).verdict == INCONCLUSIVE          # the interval holds 0 and the margin
    assert mc.judge_better(0.5, (-0.5, m)).verdict == INCONCLUSIVE
    # any gain above 0 is no longer "partly" when its interval holds 0
    assert mc.judge_better(0.5, (-0.5, m - EPS)).verdict == NOT_REPRODUCED
    assert mc.judge_better(-1.0, (-2.0, -0.1)).verdict == NOT_REPRODUCED
    judged = mc.judge_better(0.5, (-0.5, 1.5))
    assert (judged.null, judged.paper_level, judged.estimate) == (mc.NO_GAIN, m, 0.5)
    for bad in ((math.nan, (0.1, 0.2)), (0.3, (-1.0, math.nan)), (0.3, None)):
        with pytest.raises(Undefined):
            mc.judge_better(*bad)


# --------------------------------------------------------------------------------- claims on results


def _syntax(dev: float, test: float, correct: list[int], total: list[int]) -> dict:
    return {"relations": {"all": {"dev_accuracy": dev, "held_out_accuracy": test, "held_out_ci": None, "unit": "1-1"}},
            "per_sentence": {"units": list(range(len(total))), "correct": correct, "total": total}}


def _method(name: str, *, test_correct: list[int], dev: float, first=None, last=None, shares=None, **extra) -> dict:
    """A method's scores: §4.2 on four test sentences of 10 counted words each (test accuracy from the counts),
    §4.3 on two documents of 5 mentions, §5 with two seeds on the same four sentences."""
    total = [10, 10, 10, 10]
    acc = 100 * sum(test_correct) / sum(total)
    hits = [test_correct[0] // 2, test_correct[1] // 2]
    probe_correct = [test_correct, [min(10, c + 1) for c in test_correct]]
    runs = [100 * sum(c) / 40 for c in probe_correct]
    r = {"method": name, "special_share": {"first": first, "last": last},
         "syntax": _syntax(dev, acc, test_correct, total),
         "coref": {"dev_accuracy": dev, "accuracy": 100 * sum(hits) / 10, "interval": None,
                   "per_document": {"units": [0, 1], "correct": hits, "total": [5, 5]}},
         "probe": {"dev": [dev, dev], "runs": runs, "mean": float(np.mean(runs)),
                   "per_sentence": {"units": ["a", "b", "c", "d"], "correct": probe_correct, "total": total}}}
    if shares is not None:
        r["special_share_sentences"] = {"units": [0, 1, 2], "share": shares}
    return {**r, **extra}


def _results() -> dict:
    return {
        "attention": _method("attention", test_correct=[5, 5, 5, 5], dev=30.0, first=[0.4, 0.2], last=[0.2, 0.2],
                             shares=[0.5, 0.4, 0.6]),
        # best on test (+30 points) but not on dev: must not be chosen
        "norms": _method("norms", test_correct=[8, 8, 8, 8], dev=31.0, first=[0.1, 0.1], last=[0.1, 0.1],
                         shares=[0.2, 0.2, 0.2]),
        # best on dev: the chosen map, scored on test (+10 points on every sentence: its interval leaves 0 out)
        "rollout": _method("rollout", test_correct=[6, 6, 6, 6], dev=50.0, first=[0.1, 0.1], last=[0.0, 0.0],
                           shares=[0.1, 0.05, 0.15]),
        "value_zeroing_heads": {**_method("value_zeroing_heads", test_correct=[10, 10, 10, 10], dev=90.0),
                                "subset": {"everything": False},
                                "squared_norms": {"median_r": 0.99, "same_argmax": 0.95, "rows": 10, "sentences": 3,
                                                  "median_r_interval": [0.97, 0.995],
                                                  "same_argmax_interval": [0.93, 0.97]}},
    }


def test_claims_choose_the_map_on_dev_and_score_it_on_test():
    results = _results()
    rows = {c.id: c for c in mc.claims(results)}
    assert list(rows) == ["mixing-rollout-sinks", "mixing-vz-heads-norms", "mixing-parse", "mixing-coref", "mixing-probe"]
    for c in rows.values():
        check_row(c.to_json())  # every verdict follows from its own fields
    parse = rows["mixing-parse"]
    # rollout, the best on dev, not norms, the best on test; per-head value zeroing on its CPU subset not compared
    assert "attention rollout" in parse.ours and "norms" not in parse.ours
    assert parse.value == pytest.approx(10.0) and parse.judged.estimate == pytest.approx(10.0)
    assert parse.judged.interval == pytest.approx((10.0, 10.0))  # +1 word in every sentence: every replicate +10
    assert parse.verdict == REPRODUCED and (parse.resampled, parse.n) == ("sentences", 4)
    assert parse.judged.null == mc.NO_GAIN and parse.judged.paper_level == mc.IMPROVE_MARGIN
    coref = rows["mixing-coref"]  # documents: rollout 3 + 3 hits of 10, weights 2 + 2
    assert coref.value == pytest.approx(20.0) and (coref.resampled, coref.n) == ("documents", 2)
    probe = rows["mixing-probe"]
    assert probe.value == pytest.approx(10.0) and (probe.resampled, probe.n) == ("sentences", 4)
    assert "2 seeds, pooled" in probe.ours
    sinks = rows["mixing-rollout-sinks"]  # weights 0.3 + 0.2 = 0.5 on average, rollout 0.1 + 0.0 = 0.1: ratio 0.2
    assert sinks.value == pytest.approx(0.2) and sinks.verdict == REPRODUCED
    assert sinks.judged.null == mc.NO_CHANGE and sinks.judged.paper_level == mc.ERASE_RATIO
    lo, hi = sinks.judged.interval
    assert lo <= 0.3 / 1.5 <= hi and (sinks.resampled, sinks.n) == ("sentences", 3)
    assert rows["mixing-vz-heads-norms"].verdict == REPRODUCED and rows["mixing-vz-heads-norms"].value == 0.99
    results["value_zeroing_heads"]["subset"] = {"everything": True}  # on an accelerator it ran on everything: compared
    assert "value zeroing (per head)" in {c.id: c for c in mc.claims(results)}["mixing-parse"].ours


def test_a_gain_whose_interval_holds_zero_is_not_partly():
    results = _results()
    results["rollout"] = _method("rollout", test_correct=[9, 2, 5, 5], dev=50.0)  # +4 -3 0 0 over the weights
    row = {c.id: c for c in mc.claims(results)}["mixing-parse"]
    lo, hi = row.judged.interval
    assert row.value == pytest.approx(2.5) and lo <= 0 <= hi
    assert row.verdict == INCONCLUSIVE and "a gain of +2.5 points" in row.ours
    check_row(row.to_json())


def test_undefined_statistics_are_not_applicable():
    results = _results()
    results["attention"]["special_share"] = {"first": [0.0, 0.0], "last": [0.0, 0.0]}  # no share: the ratio is NaN
    results["value_zeroing_heads"]["squared_norms"]["median_r_interval"] = None
    results["rollout"]["syntax"]["per_sentence"]["units"] = [9, 1, 2, 3]  # not the weights' sentences: no pairing
    del results["rollout"]["coref"]["per_document"]
    rows = {c.id: c for c in mc.claims(results)}
    for claim_id, said in (("mixing-rollout-sinks", "undefined (NaN)"), ("mixing-vz-heads-norms", "undefined"),
                           ("mixing-parse", "different items"), ("mixing-coref", "no per-item scores")):
        assert rows[claim_id].verdict == NOT_APPLICABLE and said in rows[claim_id].reason, claim_id
        assert rows[claim_id].value is None
        check_row(rows[claim_id].to_json())
    assert rows["mixing-probe"].verdict == REPRODUCED


def test_the_interval_is_the_paired_bootstrap_of_the_items():
    results = _results()
    results["rollout"] = _method("rollout", test_correct=[9, 2, 5, 7], dev=50.0)
    rows = {c.id: c for c in mc.claims(results)}
    want = ms.paired_gain(results["rollout"]["syntax"]["per_sentence"], results["attention"]["syntax"]["per_sentence"])
    assert rows["mixing-parse"].judged.interval == pytest.approx(want[1])
    want = ms.pooled_gain(results["rollout"]["probe"]["per_sentence"], results["attention"]["probe"]["per_sentence"])
    assert rows["mixing-probe"].judged.interval == pytest.approx(want[1])


def test_claims_leave_out_what_was_not_run():
    only = {"rollout": _method("rollout", test_correct=[1, 1, 1, 1], dev=1.0, first=[0.1], last=[0.1])}
    assert mc.claims(only) == []
    weights = _method("attention", test_correct=[5, 5, 5, 5], dev=30.0, first=[0.8])
    rollout = _method("rollout", test_correct=[4, 4, 4, 4], dev=20.0, first=[0.9])
    for r in (weights, rollout):
        r.pop("probe")
        r["coref"] = {"accuracy": None}
    rows = {c.id: c for c in mc.claims({"attention": weights, "rollout": rollout})}  # a decoder: BOS only, no [SEP]
    # no per-sentence shares: the ratio has no interval, so no verdict
    assert rows["mixing-rollout-sinks"].verdict == NOT_APPLICABLE and "no interval" in rows["mixing-rollout-sinks"].reason
    # nothing scored for §4.3 and §5: each claim is still there (the page glues it), not applicable, saying why
    for claim_id in ("mixing-coref", "mixing-probe"):
        assert rows[claim_id].verdict == NOT_APPLICABLE and rows[claim_id].value is None
        assert "scored for the weights at these sizes" in rows[claim_id].reason
    weights["coref"] = _method("attention", test_correct=[5, 5, 5, 5], dev=30.0)["coref"]
    assert "for any other map" in {c.id: c for c in mc.claims({"attention": weights, "rollout": rollout})}["mixing-coref"].reason


def test_an_interval_over_one_unit_is_no_verdict():
    """One document (or sentence) drawn again and again gives an interval of no width: not applicable, saying why;
    two units are judged."""
    results = _results()
    for m in ("attention", "rollout"):
        doc = results[m]["coref"]["per_document"]
        results[m]["coref"]["per_document"] = {k: v[:1] for k, v in doc.items()}
        results[m]["special_share_sentences"] = {k: v[:1] for k, v in results[m]["special_share_sentences"].items()}
    results["value_zeroing_heads"]["squared_norms"]["sentences"] = 1
    rows = {c.id: c for c in mc.claims(results)}
    for claim_id, said in (("mixing-coref", "1 document to resample"), ("mixing-rollout-sinks", "1 sentence to resample"),
                           ("mixing-vz-heads-norms", "1 sentence to resample")):
        assert rows[claim_id].verdict == NOT_APPLICABLE and said in rows[claim_id].reason, claim_id
    assert mc.too_few(mc.MIN_UNITS, "documents") is None and mc.too_few(mc.MIN_UNITS - 1, "documents") is not None
