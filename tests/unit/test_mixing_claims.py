"""The context-mixing chapter's claims (helpers.mixing.claims): each verdict rule on both sides of each of its
named thresholds, and :func:`claims` on hand-made results (no model)."""
from __future__ import annotations

import math

import pytest

from helpers.claims import NOT_APPLICABLE, NOT_REPRODUCED, PARTLY, REPRODUCED
from helpers.mixing import claims as mc

EPS = 1e-9


def test_erases_on_both_sides_of_its_threshold():
    assert mc.verdict_erases(mc.ERASE_RATIO) == REPRODUCED
    assert mc.verdict_erases(mc.ERASE_RATIO + EPS) == PARTLY
    assert mc.verdict_erases(1 - EPS) == PARTLY
    assert mc.verdict_erases(1.0) == NOT_REPRODUCED
    assert mc.verdict_erases(math.nan) == NOT_REPRODUCED


def test_squared_norms_on_both_sides_of_its_thresholds():
    assert mc.verdict_squared_norms(mc.CLOSE_R, mc.SAME_ARGMAX) == REPRODUCED
    assert mc.verdict_squared_norms(mc.CLOSE_R - EPS, mc.SAME_ARGMAX) == PARTLY
    assert mc.verdict_squared_norms(mc.CLOSE_R, mc.SAME_ARGMAX - EPS) == PARTLY
    assert mc.verdict_squared_norms(mc.PARTLY_R, 0.0) == PARTLY
    assert mc.verdict_squared_norms(mc.PARTLY_R - EPS, 1.0) == NOT_REPRODUCED


def test_better_on_both_sides_of_its_threshold_and_capped_by_the_interval():
    assert mc.verdict_better(mc.IMPROVE_MARGIN, None, 30.0) == REPRODUCED
    assert mc.verdict_better(mc.IMPROVE_MARGIN - EPS, None, 30.0) == PARTLY
    assert mc.verdict_better(EPS, None, 30.0) == PARTLY
    assert mc.verdict_better(0.0, None, 30.0) == NOT_REPRODUCED
    assert mc.verdict_better(2.0, [31.5, 33.0], 30.0) == REPRODUCED  # the interval leaves the weights out
    assert mc.verdict_better(2.0, [29.5, 33.0], 30.0) == PARTLY      # ... or holds them: partly at best


def _result(method: str, *, all_acc=None, ci=None, coref=None, probe=None, first=None, last=None, **extra) -> dict:
    r = {"method": method, "special_share": {"first": first, "last": last}, "coref": {"accuracy": coref, "interval": None}}
    if all_acc is not None:
        r["syntax"] = {"relations": {"all": {"held_out_accuracy": all_acc, "held_out_ci": ci, "unit": "1-1"}}}
    if probe is not None:
        r["probe"] = {"mean": probe}
    return {**r, **extra}


def test_claims_from_results():
    results = {
        "attention": _result("attention", all_acc=30.0, ci=[28.0, 32.0], coref=50.0, probe=40.0, first=[0.4, 0.2], last=[0.2, 0.2]),
        "norms": _result("norms", all_acc=31.0, ci=[29.0, 33.0], coref=55.0, probe=39.0, first=[0.1, 0.1], last=[0.1, 0.1]),
        "rollout": _result("rollout", all_acc=25.0, ci=[23.0, 27.0], coref=40.0, probe=20.0, first=[0.1, 0.1], last=[0.0, 0.0]),
        "value_zeroing_heads": _result("value_zeroing_heads", all_acc=90.0, ci=[89.0, 91.0], coref=99.0, probe=99.0,
                                       subset={"everything": False},
                                       squared_norms={"median_r": 0.99, "same_argmax": 0.95, "rows": 10}),
    }
    rows = {c.id: c for c in mc.claims(results)}
    assert list(rows) == ["mixing-rollout-sinks", "mixing-vz-heads-norms", "mixing-parse", "mixing-coref", "mixing-probe"]
    # sinks: weights 0.3 + 0.2 = 0.5 on average, rollout 0.1 + 0.0 = 0.1: ratio 0.2
    assert rows["mixing-rollout-sinks"].value == pytest.approx(0.2) and rows["mixing-rollout-sinks"].verdict == REPRODUCED
    assert rows["mixing-vz-heads-norms"].verdict == REPRODUCED
    # per-head value zeroing on its CPU subset is not compared (its 90 % is of other sentences)
    assert rows["mixing-parse"].value == pytest.approx(1.0) and rows["mixing-parse"].verdict == PARTLY  # interval holds 30
    assert "attention norms" in rows["mixing-parse"].ours
    assert rows["mixing-coref"].value == pytest.approx(5.0) and rows["mixing-coref"].verdict == REPRODUCED  # no interval
    assert rows["mixing-probe"].value == pytest.approx(-1.0) and rows["mixing-probe"].verdict == NOT_REPRODUCED
    results["value_zeroing_heads"]["subset"] = {"everything": True}  # on an accelerator it ran on everything: compared
    assert {c.id: c for c in mc.claims(results)}["mixing-parse"].value == pytest.approx(60.0)


def test_claims_leave_out_what_was_not_run():
    only = {"rollout": _result("rollout", all_acc=25.0, first=[0.1], last=[0.1])}
    assert mc.claims(only) == []
    decoder = {"attention": _result("attention", all_acc=30.0, first=[0.8]), "rollout": _result("rollout", all_acc=20.0, first=[0.9])}
    rows = {c.id: c for c in mc.claims(decoder)}  # a decoder: BOS only, no [SEP]
    assert rows["mixing-rollout-sinks"].value == pytest.approx(0.9 / 0.8) and rows["mixing-rollout-sinks"].verdict == NOT_REPRODUCED
    # nothing scored for §4.3 and §5: each claim is still there (the page glues it), not applicable, saying why
    for claim_id in ("mixing-coref", "mixing-probe"):
        assert rows[claim_id].verdict == NOT_APPLICABLE and rows[claim_id].value is None
        assert "scored for the weights at these sizes" in rows[claim_id].reason
    no_other = {"attention": _result("attention", all_acc=30.0, coref=50.0, first=[0.8]),
                "rollout": _result("rollout", all_acc=20.0, first=[0.9])}
    assert "for any other map" in {c.id: c for c in mc.claims(no_other)}["mixing-coref"].reason
