"""The minimal-pairs chapter's statistics and bookkeeping (:mod:`helpers.minimal_pairs.stats`, the pure parts of
:mod:`helpers.minimal_pairs.run`) against obvious loops and hand-made cases."""
from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from helpers.core.bootstrap import counts, mean_replicates as counts_replicates, percentile_interval
from helpers.minimal_pairs import run, stats
from tolerances import float64_passes


@pytest.mark.parametrize("n", [1, 7, 33, 1001])
def test_chunked_replicates_are_the_bootstraps_draws(n):
    """The replicates drawn 50 at a time are those of :func:`helpers.core.bootstrap.counts` (the one percentile
    bootstrap), for odd and even numbers of pairs, to float64 round-off of the sums."""
    values = np.random.default_rng(1).normal(size=(n, 3))
    ours = stats.mean_replicates(values, n_boot=1000, seed=5)
    theirs = counts_replicates(values, counts(n, n_boot=1000, seed=5))
    assert np.abs(ours - theirs).max() <= float64_passes(np.abs(values).sum(0))


def test_estimate_and_two_sample():
    rng = np.random.default_rng(0)
    a, b = rng.normal(1.0, 1.0, 200), rng.normal(0.0, 1.0, 300)
    e = stats.estimate(a, n_boot=500)
    assert e["value"] == pytest.approx(a.mean()) and e["n"] == 200
    assert e["interval"] == list(percentile_interval(stats.mean_replicates(a, n_boot=500)))
    d = stats.two_sample(a, b, n_boot=500)
    assert d["value"] == pytest.approx(a.mean() - b.mean()) and d["n"] == 500
    lo, hi = d["interval"]
    reps = stats.mean_replicates(a, n_boot=500, seed=0) - stats.mean_replicates(b, n_boot=500, seed=1)
    assert (lo, hi) == percentile_interval(reps) and lo > 0  # a real difference of 1: far from 0
    assert stats.estimate(np.array([]))["value"] is None and stats.two_sample(a, np.array([]))["interval"] is None
    assert stats.correct(np.array([1.0, 0.0, 2.0]), np.array([0.5, 0.0, 3.0])).tolist() == [1.0, 0.0, 0.0]  # a tie


def test_percentile_of_a_head_and_its_replicates():
    scores = np.array([[0.1, 0.5], [0.3, 0.3]])
    assert stats.percentile_of(scores, 1) == 100.0 and stats.percentile_of(scores, 0) == 25.0
    assert stats.percentile_of(scores, 2) == 75.0  # ties share the higher rank
    per_pair = np.abs(np.random.default_rng(0).normal(size=(40, 2, 2))) + np.array([[0, 5], [0, 0]])
    reps = stats.percentile_replicates(per_pair, 1, n_boot=100)
    assert reps.shape == (100,) and np.all(reps == 100.0)  # head (0, 1) is the largest in every replicate


def test_layer_matched_sets():
    every = stats.layer_matched([(3, 2)], 9, 8)
    assert sorted(every) == [((3, h),) for h in range(9) if h != 2]  # all 8 others of a 9-head layer
    drawn = stats.layer_matched([(0, 4), (0, 7), (10, 0)], 9, 8, seed=0)
    assert len(drawn) == len(set(drawn)) == 8
    for s in drawn:
        assert [l for l, _ in s] == [0, 0, 10] and not {(0, 4), (0, 7), (10, 0)} & set(s)
    assert stats.layer_matched([(0, 0)], 1, 8) == []  # one head a layer: no other


def test_draw_others():
    pool = [(0, 1), (2, 2), (5, 0)]
    assert sorted(stats.draw_others(pool, 2, 8)) == [((0, 1), (2, 2)), ((0, 1), (5, 0)), ((2, 2), (5, 0))]
    many = stats.draw_others([(l, 0) for l in range(12)], 3, 8, seed=0)
    assert len(many) == len(set(many)) == 8 and all(len(s) == 3 for s in many)
    assert stats.draw_others(pool, 4, 8) == []


# ------------------------------------------------------------------------------------------------ run's bookkeeping

HEADS = {"relations": {"det": "24-7", "nsubj": "1-5", "aux": "11-1", "cop": "1-8", "amod": "24-7", "obj": "11-2"},
         "coref": "3-5"}


def test_groups_and_matrix_rows():
    groups = run.group_heads(HEADS)
    assert groups == {"det": ((23, 6),), "sva": ((0, 4), (0, 7), (10, 0)), "coref": ((2, 4),)}
    rows = run.matrix_rows(HEADS)
    assert [r.key for r in rows] == ["1-5", "1-8", "3-5", "11-1", "11-2", "24-7", "sva"]
    assert rows[-1].label == "nsubj+aux+cop (1-5, 1-8, 11-1)" and rows[5].label == "24-7 (det, amod)"
    assert run.group_heads({"relations": {"det": "2-1"}, "coref": "1-1"}) == {"det": ((1, 0),), "coref": ((0, 0),)}


def test_conditions_of_both_rounds():
    first = run.first_conditions(HEADS, 9, draws=8, seed=0)
    names = [c.name for c in first]
    assert names[:7] == ["zero:1-5", "zero:1-8", "zero:3-5", "zero:11-1", "zero:11-2", "zero:24-7", "zero:sva"]
    assert sum(n.startswith("layer:det:") for n in names) == 8 and sum(n.startswith("layer:coref:") for n in names) == 8
    others = [c for c in first if c.name.startswith("others:sva:")]
    assert others and all(len(c.heads) == 3 and not set(c.heads) & {(0, 4), (0, 7), (10, 0)} for c in others)
    importance = {g: np.zeros((30, 9)) for g in ("det", "sva", "coref")}
    importance["det"][23, 6] = 5.0  # the det head is the most important for its targets: no second removal of it
    importance["det"][4, 4] = 4.0
    second = run.second_conditions(HEADS, importance, first)
    det = [c.name for c in second if c.name.startswith("top:det:")]
    # the top ten: 24-7, 5-5, then the ties at 0 by layer and head: 1-1 ... 1-8; 24-7, 1-5 and 1-8 are matrix rows
    assert det == ["top:det:5-5", "top:det:1-1", "top:det:1-2", "top:det:1-3", "top:det:1-4", "top:det:1-6",
                   "top:det:1-7"]
    assert [c for c in second if c.fill == "mean"] == [run.Condition("mean:det", ((23, 6),), "mean", "det"),
                                                       run.Condition("mean:sva", ((0, 4), (0, 7), (10, 0)), "mean",
                                                                     "sva"),
                                                       run.Condition("mean:coref", ((2, 4),), "mean", "coref")]
    assert run.top_heads(importance["det"], 2) == [(23, 6), (4, 4)]


def test_tasks_are_chunks_of_similar_length():
    lengths = np.array([9, 3, 7, 3, 12])
    assert run.chunks(np.arange(5), lengths, 2) == [(1, 3), (2, 0), (4,)]


def test_paper_heads_read_the_reports():
    table = {"det": {"best_head": "2-1"}, "nsubj": {"best_head": "1-3"}, "cop": {"best_head": "2-2"},
             "obj": {"best_head": "1-1"}}
    syntax = SimpleNamespace(best_heads=lambda: {"det": "2-1", "obj": "1-1"},
                             dev=SimpleNamespace(scores=SimpleNamespace(table=lambda: table)))
    coref = SimpleNamespace(dev=SimpleNamespace(best_head=lambda: (1, 3)))
    heads = run.paper_heads(syntax, coref)
    assert heads == {"relations": {"det": "2-1", "obj": "1-1", "nsubj": "1-3", "cop": "2-2"}, "coref": "2-4"}
    assert run.group_heads(heads)["sva"] == ((0, 2), (1, 1))  # aux absent from GUM dev: nsubj and cop
