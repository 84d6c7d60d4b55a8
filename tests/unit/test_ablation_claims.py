"""The ablation chapter's claims (helpers.ablation.claims): each verdict rule on both sides of each of its named
thresholds, the thresholds :func:`claims` applies itself (a head's cost, a layer's best head, the pruning curve's
rise) on both sides too, and :func:`claims` on hand-made summaries (no model), with the rows that cannot apply and
their reasons."""
from __future__ import annotations

import math

import pytest

from helpers.ablation import claims as ac
from helpers.claims import NOT_APPLICABLE, NOT_REPRODUCED, PARTLY, REPRODUCED

EPS = 1e-9  # a step just across a threshold
IDS = ["ablation-single-heads", "ablation-one-head-layers", "ablation-pruning", "ablation-paper-heads",
       "ablation-sink-noop", "ablation-importance-ranks"]


# ------------------------------------------------------------------------------- the verdict rules


def test_single_heads_on_both_sides_of_its_thresholds():
    assert ac.verdict_single(ac.MOST + EPS) == REPRODUCED
    assert ac.verdict_single(ac.MOST) == PARTLY          # "more than half": half is not most
    assert ac.verdict_single(ac.SOME) == PARTLY
    assert ac.verdict_single(ac.SOME - EPS) == NOT_REPRODUCED


def test_one_head_layers_on_both_sides_of_its_thresholds():
    assert ac.verdict_one_head(ac.MANY_LAYERS) == REPRODUCED
    assert ac.verdict_one_head(ac.MANY_LAYERS - EPS) == PARTLY
    assert ac.verdict_one_head(EPS) == PARTLY             # any layer at all
    assert ac.verdict_one_head(0.0) == NOT_REPRODUCED


def test_pruning_on_both_sides_of_its_threshold_and_the_random_order():
    assert ac.verdict_pruning(ac.LARGE_SHARE, True) == REPRODUCED
    assert ac.verdict_pruning(ac.LARGE_SHARE - EPS, True) == PARTLY
    assert ac.verdict_pruning(ac.LARGE_SHARE, False) == PARTLY
    assert ac.verdict_pruning(ac.LARGE_SHARE - EPS, False) == NOT_REPRODUCED


def test_paper_heads_on_both_sides_of_its_thresholds():
    assert ac.verdict_paper_heads(ac.P_VALUE - EPS, 0.0) == REPRODUCED
    assert ac.verdict_paper_heads(ac.P_VALUE, ac.ABOVE_MEDIAN + EPS) == PARTLY
    assert ac.verdict_paper_heads(ac.P_VALUE, ac.ABOVE_MEDIAN) == NOT_REPRODUCED  # the median is not above it
    assert ac.verdict_paper_heads(1.0, ac.ABOVE_MEDIAN - EPS) == NOT_REPRODUCED


@pytest.mark.parametrize("sign", [1.0, -1.0])  # a change's size counts, not its direction
def test_sink_noop_on_both_sides_of_its_thresholds(sign):
    small = ac.NOOP_MAX / 2
    assert ac.verdict_noop(sign * ac.NOOP_MAX, sign * ac.REDIRECT_RATIO * ac.NOOP_MAX) == REPRODUCED
    assert ac.verdict_noop(sign * (ac.NOOP_MAX + EPS), 1.0) == PARTLY              # no-op moves the loss too much
    assert ac.verdict_noop(sign * small, -sign * ac.REDIRECT_RATIO * small) == REPRODUCED
    assert ac.verdict_noop(sign * small, sign * (ac.REDIRECT_RATIO * small - EPS)) == PARTLY  # redirect too small
    assert ac.verdict_noop(sign * small, sign * (small + EPS)) == PARTLY           # redirect larger at all
    assert ac.verdict_noop(sign * small, sign * small) == NOT_REPRODUCED
    assert ac.verdict_noop(sign * small, 0.0) == NOT_REPRODUCED
    tiny = ac.REDIRECT_MIN / (2 * ac.REDIRECT_RATIO)  # a redirect change 5 times the no-op's may still be tiny
    assert ac.verdict_noop(sign * tiny, sign * ac.REDIRECT_MIN) == REPRODUCED
    assert ac.verdict_noop(sign * tiny, sign * (ac.REDIRECT_MIN - EPS)) == PARTLY   # redirect below the floor
    assert ac.verdict_noop(0.0, 0.0) == NOT_REPRODUCED                             # nothing moves: no evidence


def test_importance_ranks_on_both_sides_of_its_thresholds():
    assert ac.verdict_ranks(ac.RHO_STRONG, EPS) == REPRODUCED
    assert ac.verdict_ranks(ac.RHO_STRONG - EPS, EPS) == PARTLY
    assert ac.verdict_ranks(1.0, 0.0) == NOT_REPRODUCED   # an interval that reaches 0 establishes nothing
    assert ac.verdict_ranks(1.0, math.nan) == NOT_REPRODUCED


# ------------------------------------------------------------------------------- claims() on summaries

BASE = 2.0  # the full model's mean loss in the summaries below (a power of 2: relative costs stay exact)
L, H = 2, 4


def _raw(n_heads: int = H, **extra) -> dict:
    return {"segments": 12, "detail_segments": 4, "n_layers": L, "n_heads": n_heads, **extra}


def _tests(noop, redirect) -> dict:
    return {"noop": {"all": noop, "all_interval": None, "per_head": None},
            "redirect": {"all": redirect, "all_interval": None, "per_head": None}}


def _summary(*, relative=None, only_min=None, prune=None, paper=None, sinks=None, spearman=None) -> dict:
    """A summarise()-shaped summary of a 2 x 4 model: every head costs 0, every layer keeps the loss with one head,
    pruning keeps the loss flat and beats random order, the paper's heads are the largest, the no-op test moves
    nothing and redirect a lot, and importance ranks heads as removal does; each keyword replaces its part."""
    relative = [[0.0] * H for _ in range(L)] if relative is None else relative
    shares = [k / (L * H) for k in range(L * H + 1)]
    return {
        "base_loss": BASE,
        "delta": [[BASE * x for x in row] for row in relative], "delta_relative": relative,
        "only_layer_min": [0.0] * L if only_min is None else only_min,
        "prune": prune or {"shares": shares, "importance": [BASE] * len(shares),
                           "random_mean": [BASE + 1.0] * len(shares)},
        "paper_heads": {"all": {"heads": ["2-1"], "delta_p": 0.001, "delta_mean_percentile": 100.0}}
        if paper is None else paper,
        "sinks": {"sep": _tests(0.0, 0.5), "cls": _tests(0.0, 0.5)} if sinks is None else sinks,
        "spearman": {"rho": 0.9, "interval": [0.5, 1.0]} if spearman is None else spearman,
    }


def _rows(summary, raw=None, *, causal=False) -> dict:
    rows = ac.claims(summary, raw or _raw(), causal=causal)
    assert [c.id for c in rows] == IDS  # every row is always there (the chapter glues each), in this order
    return {c.id: c for c in rows}


def test_claims_on_a_summary_where_every_claim_holds():
    rows = _rows(_summary())
    assert {k: c.verdict for k, c in rows.items()} == dict.fromkeys(IDS, REPRODUCED)
    single, one = rows["ablation-single-heads"], rows["ablation-one-head-layers"]
    assert single.value == pytest.approx(100.0) and "12 sentences" in single.ours
    assert "2 of 2 layers" in one.ours and "4 sentences" in one.ours
    assert rows["ablation-pruning"].value == pytest.approx(100.0)
    assert rows["ablation-paper-heads"].value == pytest.approx(100.0)
    assert "[SEP]" in rows["ablation-sink-noop"].claim and rows["ablation-sink-noop"].value == 0.0
    assert rows["ablation-importance-ranks"].value == pytest.approx(0.9)
    assert all(c.reason is None for c in rows.values())


def test_a_heads_cost_on_both_sides_of_little_cost():
    """Five of eight heads at exactly LITTLE_COST count as cheap (more than half: reproduced); one step above it,
    they do not (three of eight: partly, at least a quarter)."""
    at = [[ac.LITTLE_COST] * 4, [ac.LITTLE_COST, 1.0, 1.0, 1.0]]
    above = [[ac.LITTLE_COST + EPS] * 4, [ac.LITTLE_COST + EPS, 0.0, 0.0, 0.0]]
    assert _rows(_summary(relative=at))["ablation-single-heads"].verdict == REPRODUCED
    row = _rows(_summary(relative=above))["ablation-single-heads"]
    assert row.value == pytest.approx(100 * 3 / 8) and row.verdict == PARTLY
    negative = [[-1.0] * 4, [-1.0] * 4]  # removing a head may lower the loss: that costs little too
    assert _rows(_summary(relative=negative))["ablation-single-heads"].verdict == REPRODUCED


def test_a_layers_best_head_on_both_sides_of_one_head_cost():
    """The layers' minima are relative to the full model's loss: BASE x ONE_HEAD_COST is within, a step more is not."""
    rows = _rows(_summary(only_min=[BASE * ac.ONE_HEAD_COST, 1.0]))
    assert rows["ablation-one-head-layers"].value == pytest.approx(50.0)
    assert rows["ablation-one-head-layers"].verdict == REPRODUCED  # half the layers: many
    rows = _rows(_summary(only_min=[BASE * ac.ONE_HEAD_COST + EPS, 1.0]))
    assert rows["ablation-one-head-layers"].value == 0.0 and rows["ablation-one-head-layers"].verdict == NOT_REPRODUCED


def test_the_pruning_curve_on_both_sides_of_its_rise():
    """Nine steps of an 8-head model; the loss stays at BASE x (1 + PRUNE_RISE) (within) up to 2 heads, then rises.
    Importance beats random order on the steps between nothing and everything removed (the ends are the same)."""
    shares = [k / 8 for k in range(9)]
    limit = BASE * (1 + ac.PRUNE_RISE)
    curve = [BASE, BASE, limit, limit + EPS, *[BASE + 5] * 5]
    better = {"shares": shares, "importance": curve, "random_mean": [BASE, *[BASE + 6] * 7, BASE + 5]}
    row = _rows(_summary(prune=better))["ablation-pruning"]
    assert row.value == pytest.approx(25.0) and row.verdict == REPRODUCED  # 2 of 8 heads: at least LARGE_SHARE
    # random order worse only at the ends (which are left out): importance does not beat it
    worse = {**better, "random_mean": [0.0, *curve[1:-1], 100.0]}
    assert _rows(_summary(prune=worse))["ablation-pruning"].verdict == PARTLY
    early = {**better, "importance": [BASE, limit + EPS, *curve[2:]]}  # the first pruned step already rises
    row = _rows(_summary(prune=early))["ablation-pruning"]
    assert row.value == 0.0 and row.verdict == PARTLY  # importance still beats random


def test_a_decoders_sink_is_bos():
    rows = _rows(_summary(sinks={"bos": _tests(0.0, 0.5)}), causal=True)
    assert "BOS" in rows["ablation-sink-noop"].claim and rows["ablation-sink-noop"].verdict == REPRODUCED
    # the relative changes: no-op 2 % of the loss (over NOOP_MAX), redirect 25 %
    rows = _rows(_summary(sinks={"bos": _tests(-0.04, 0.5)}), causal=True)
    assert rows["ablation-sink-noop"].value == pytest.approx(-2.0) and rows["ablation-sink-noop"].verdict == PARTLY


def _not_applicable(row, *words):
    assert row.verdict == NOT_APPLICABLE and row.value is None and row.reason
    assert row.ours == f"not applicable: {row.reason}"
    for w in words:
        assert w in row.reason, (w, row.reason)


def test_not_applicable_rows_say_why():
    # no single-head effects: their claim, the paper heads' test (no effects to rank) and the ranks
    no_single = {**_summary(), "delta": None, "delta_relative": None, "spearman": None,
                 "paper_heads": {"all": {"heads": ["2-1"], "delta_p": None, "delta_mean_percentile": None}}}
    rows = _rows(no_single)
    _not_applicable(rows["ablation-single-heads"], "single-head effects were not run")
    _not_applicable(rows["ablation-paper-heads"], "single-head effects were not run")
    _not_applicable(rows["ablation-importance-ranks"], "were not run")
    assert rows["ablation-sink-noop"].verdict == REPRODUCED  # the others stand

    # a model with one head per layer: nothing to keep alone
    rows = _rows({**_summary(), "only_layer_min": None}, _raw(n_heads=1))
    _not_applicable(rows["ablation-one-head-layers"], "one head per layer")
    rows = _rows({**_summary(), "only_layer_min": None})
    _not_applicable(rows["ablation-one-head-layers"], "all but one was not run")

    _not_applicable(_rows({**_summary(), "prune": None})["ablation-pruning"], "pruning curve was not run")

    # the paper's heads not looked up (--no-paper-heads); looked up, none found (every kind empty)
    _not_applicable(_rows(_summary(paper={}))["ablation-paper-heads"], "--no-paper-heads")
    _not_applicable(_rows({**_summary(), "paper_heads": None})["ablation-paper-heads"], "--no-paper-heads")
    empty = {"syntax": {"heads": [], "delta_p": None, "delta_mean_percentile": None}}
    _not_applicable(_rows(_summary(paper=empty))["ablation-paper-heads"], "no paper head was found")

    # no sink tests at all; a decoder read against an encoder's sinks: it has no BOS to test
    _not_applicable(_rows({**_summary(), "sinks": None})["ablation-sink-noop"], "sink tests were not run")
    _not_applicable(_rows(_summary(), causal=True)["ablation-sink-noop"], "no BOS")
    _not_applicable(_rows(_summary(sinks={"bos": _tests(0.0, 0.5)}))["ablation-sink-noop"], "no [SEP]")


def test_sink_tests_run_per_head_only_are_not_called_missing_sinks():
    """--parts sink_heads (no "sinks"): the segments have their [SEP]; the tests on every head at once were not run
    (the reason said "the segments have no [SEP]" before)."""
    per_head = {"noop": {"all": None, "all_interval": None, "per_head": [[0.0] * H] * L},
                "redirect": {"all": None, "all_interval": None, "per_head": [[0.0] * H] * L}}
    row = _rows(_summary(sinks={"sep": per_head, "cls": per_head}))["ablation-sink-noop"]
    _not_applicable(row, "every head at once were not run")
    assert "no [SEP]" not in row.reason


def test_ranks_of_constant_scores_are_not_called_not_run():
    """Importance and removal both run, but one is the same for every head: Spearman's rho is undefined (NaN), and
    the reason says so instead of "not run"."""
    row = _rows(_summary(spearman={"rho": math.nan, "interval": [math.nan, math.nan]}))["ablation-importance-ranks"]
    _not_applicable(row, "the same for every head")
    _not_applicable(_rows({**_summary(), "spearman": None})["ablation-importance-ranks"], "were not run")


def test_an_encoders_cls_tests_are_said_beside_the_sep_verdict_and_do_not_change_it():
    """An encoder's [CLS] (where some models park attention rather than on [SEP]) is reported in the no-op row's
    text; the verdict is [SEP]'s alone. A decoder's row names BOS only."""
    sep_noop = _summary(sinks={"sep": _tests(0.0, 0.5), "cls": _tests(BASE * 0.5, 0.0)})
    row = _rows(sep_noop)["ablation-sink-noop"]
    assert "[CLS]" in row.ours and row.verdict == REPRODUCED
    row = _rows(_summary(sinks={"sep": _tests(BASE * 0.5, 0.0), "cls": _tests(0.0, 0.5)}))["ablation-sink-noop"]
    assert "[CLS]" in row.ours and row.verdict != REPRODUCED
    row = _rows(_summary(sinks={"bos": _tests(0.0, 0.5)}), causal=True)["ablation-sink-noop"]
    assert "BOS" in row.claim and "[CLS]" not in row.ours
