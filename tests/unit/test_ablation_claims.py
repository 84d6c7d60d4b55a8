"""The ablation chapter's claims (helpers.ablation.claims) on hand-made per-sentence losses and summaries (no model):
each claim's rule on both sides of each of its boundaries (the thresholds the claim applies to a head, a layer or a
curve, and the rule's own: the share of resampled sets, the interval against the null, the paper's level and a
range), every row's verdict following from its own fields (helpers.claims.check_row), and the rows that cannot
apply with their reasons.

Where every sentence has the same losses, every resampled set is the sample itself: the share of sets in which a
statement holds is exactly 0 or 1, and an interval is a point; varied sentences make the sets disagree."""
from __future__ import annotations

import math

import numpy as np
import pytest

from helpers.ablation import claims as ac
from helpers.claims import INCONCLUSIVE, NOT_APPLICABLE, NOT_REPRODUCED, PARTLY, REPRODUCED, check_row

REL = 1e-9  # a step just across a threshold, relative to it (the resampled sums round at 1e-16)
IDS = list(ac.IDS)
BASE = 2.0  # every sentence's full-model loss (a power of 2: relative costs stay exact)
L, H, S, S2 = 2, 4, 8, 4
SHARES = [k / (L * H) for k in range(L * H + 1)]


# ------------------------------------------------------------------------------- hand-made runs


def _constant(rel, n=S, base=None) -> list:
    """Per-sentence losses ``[layer][head][n]`` whose change over ``base`` (default BASE) is ``rel`` of it, the same
    in every sentence."""
    base = np.full(n, BASE) if base is None else np.asarray(base)
    return (base * (1.0 + np.asarray(rel, dtype=np.float64)[..., None])).tolist()


def _prune(held_rel=None, gap_rel=0.05, in_sample=None) -> dict:
    """A pruning run: the held-out curve ``held_rel`` (relative rises per step; default flat), random order above it
    by ``gap_rel`` of the loss at the inner steps, the same in every sentence."""
    held_rel = np.zeros(len(SHARES)) if held_rel is None else np.asarray(held_rel, dtype=np.float64)
    held = BASE * (1 + held_rel)[:, None] * np.ones((1, S))
    gap = np.zeros(len(SHARES))
    gap[1:-1] = gap_rel
    random = (held + BASE * gap[:, None])[None]
    return {"shares": SHARES, "removed": list(range(L * H + 1)), "held_out": held.tolist(),
            "in_sample": held.tolist() if in_sample is None else in_sample, "by_delta": None,
            "random": random.tolist(), "orders": [list(range(L * H))] * 2, "folds": [k % 2 for k in range(S)],
            "seeds": [0]}


def _raw(*, single=None, only=None, prune=None, n_heads=H, base=None, parts=None) -> dict:
    """A run of a 2 x 4 model on 8 sentences (4 detail): every head costs 0, every layer keeps the loss with one
    head, the pruning curve stays flat and lies below random order's; each keyword replaces its part."""
    base = [BASE] * S if base is None else base
    return {"segments": S, "detail_segments": S2, "n_layers": L, "n_heads": n_heads,
            "parts": ["single", "importance", "only", "prune", "sinks", "sink_heads", "mean"] if parts is None else parts,
            "base": base,
            "single": _constant(np.zeros((L, H)), base=base) if single is None else single,
            "only": _constant(np.zeros((L, H)), n=S2, base=base[:S2]) if only is None else only,
            "prune": _prune() if prune is None else prune}


def _test(relative, interval=None) -> dict:
    return {"change": BASE * relative, "interval": None, "relative": relative,
            "relative_interval": list(interval or (relative, relative))}


def _set(noop=(0.0, (0.0, 0.0)), gap=(0.05, (0.04, 0.06)), redirect=(0.1, (0.08, 0.12)), heads=("1-1",)) -> dict:
    return {"heads": list(heads), "noop": _test(noop[0], noop[1]), "redirect": _test(redirect[0], redirect[1]),
            "control": _test(noop[0] + gap[0]), "control_minus_noop": _test(gap[0], gap[1]), "spearman": None}


def _premise(measured="cls", sep=None, cls=None, bos=None, causal=False) -> dict:
    if causal:
        return {"measured": "bos", "bos": {"layer_max": 0.6, "reason": bos}}
    return {"measured": measured, "sep": {"layer_max": 0.02, "reason": sep}, "cls": {"layer_max": 0.6, "reason": cls}}


def _paper(gain=40.0, interval=(30.0, 50.0), p=0.001, heads=("2-1",)) -> dict:
    entry = {"heads": list(heads), "delta_mean_percentile": 50.0 + gain, "delta_expected_percentile": 50.0,
             "delta_gain": gain, "delta_gain_interval": list(interval), "delta_p_layers": p}
    return {"syntax": entry, "specialised": entry, "all": entry}


def _summary(*, paper=None, sink_sets=None, premise=None, spearman=None) -> dict:
    """A summarise()-shaped summary where every claim holds: the specialised heads far above same-layer random
    sets, [SEP] no sink and [CLS] one whose no-op test moves nothing, importance ranking heads as removal does."""
    return {"base_loss": BASE, "delta_significant": {"raise": 1, "lower": 0, "heads": L * H},
            "paper_heads": _paper() if paper is None else paper,
            "sink_sets": {"cls": _set()} if sink_sets is None else sink_sets,
            "sink_premise": _premise(sep="[SEP] is not a sink of this model: it takes at most 0.02 of any layer's "
                                         "attention (a sink takes more than 0.25)") if premise is None else premise,
            "spearman": {"rho": 0.9, "interval": [0.6, 1.0]} if spearman is None else spearman}


def _rows(summary=None, raw=None, *, causal=False) -> dict:
    rows = ac.claims(_summary() if summary is None else summary, _raw() if raw is None else raw, causal=causal,
                     n_boot=200)
    assert [c.id for c in rows] == IDS  # every row is always there (the chapter glues each), in this order
    for c in rows:
        check_row(c.to_json())          # the verdict follows from the row's own fields
        if c.verdict != NOT_APPLICABLE:
            assert c.resampled == "sentences" and c.n in (S, S2, (raw or {}).get("segments"))
    return {c.id: c for c in rows}


def _not_applicable(row, *words):
    assert row.verdict == NOT_APPLICABLE and row.value is None and row.reason
    assert row.ours == f"not applicable: {row.reason}"
    for w in words:
        assert w in row.reason, (w, row.reason)


def test_claims_on_runs_where_every_claim_holds():
    rows = _rows()
    expected = dict.fromkeys(IDS, REPRODUCED)
    expected["ablation-sink-noop"] = NOT_APPLICABLE  # [SEP] is not a sink here: the measured sink's row is judged
    assert {k: c.verdict for k, c in rows.items()} == expected
    single = rows["ablation-single-heads"]
    assert single.value == pytest.approx(100.0) and single.judged.rule == "share" and single.judged.share == 1.0
    assert "Michel's count: 1 of 8" in single.ours
    assert rows["ablation-one-head-layers"].n == S2 and "2 of 2 layers" in rows["ablation-one-head-layers"].ours
    assert rows["ablation-pruning"].judged.rule == "combined" and rows["ablation-pruning"].value == pytest.approx(100.0)
    assert rows["ablation-paper-heads"].value == pytest.approx(90.0)
    measured = rows["ablation-sink-noop-measured"]
    assert "[CLS]" in measured.claim and measured.judged.rule == "combined" and len(measured.judged.parts) == 3


# ------------------------------------------------------------------------------- single heads


def test_single_heads_on_both_sides_of_little_cost_and_most():
    """Five of eight heads cheap (more than half): reproduced in every resampled set; four (half): not "most"; a
    cost one step above LITTLE_COST is not little; a negative cost is."""
    def verdict(costs):
        row = _rows(raw=_raw(single=_constant(np.array(costs).reshape(L, H))))["ablation-single-heads"]
        return row.verdict, row.value

    at, above = ac.LITTLE_COST * (1 - REL), ac.LITTLE_COST * (1 + REL)
    assert verdict([at] * 5 + [1.0] * 3) == (REPRODUCED, pytest.approx(62.5))
    assert verdict([at] * 4 + [1.0] * 4) == (NOT_REPRODUCED, pytest.approx(50.0))
    assert verdict([above] * 5 + [1.0] * 3) == (NOT_REPRODUCED, pytest.approx(0.0))
    assert verdict([-1.0] * 8)[0] == REPRODUCED


def test_single_heads_inconclusive_where_the_resampled_sets_disagree():
    """The first layer's heads cost nothing; the second's raise half the sentences' loss by 4 % and lower the other
    half's by as much: they are cheap in a resampled set unless it draws the first half much more often, so more
    than half of the heads are cheap in some sets and not in others."""
    base = np.full(S, BASE)
    single = np.full((L, H, S), BASE)
    single[1, :, ::2] = BASE * (1 + 4 * ac.LITTLE_COST)
    single[1, :, 1::2] = BASE * (1 - 4 * ac.LITTLE_COST)
    row = _rows(raw=_raw(single=single.tolist()))["ablation-single-heads"]
    assert 0.05 < row.judged.share < 0.95 and row.verdict == INCONCLUSIVE
    assert ac.single_holds(single, base, n_boot=200) == row.judged.share


def test_relative_changes_are_over_the_same_sentences_base():
    """All but one runs on the first S2 sentences: a change of 6 % of THEIR loss is not within ONE_HEAD_COST, though it
    is 0.7 % of the mean loss of all the sentences (which the chapter divided by before)."""
    base = [BASE] * S2 + [32.0] * (S - S2)
    only = np.full((L, H), 0.06)
    row = _rows(raw=_raw(base=base, only=_constant(only, n=S2, base=base[:S2]),
                         single=_constant(np.zeros((L, H)), base=base)))["ablation-one-head-layers"]
    assert row.value == 0.0 and row.verdict == NOT_REPRODUCED


def test_one_head_layers_on_both_sides_of_one_head_cost_and_many_layers():
    def verdict(first_layer_best, second_layer_best=1.0):
        only = np.full((L, H), 1.0)
        only[0, 2], only[1, 3] = first_layer_best, second_layer_best
        row = _rows(raw=_raw(only=_constant(only, n=S2)))["ablation-one-head-layers"]
        return row.verdict, row.value

    assert verdict(ac.ONE_HEAD_COST * (1 - REL)) == (REPRODUCED, pytest.approx(50.0))   # half the layers: many
    assert verdict(ac.ONE_HEAD_COST * (1 + REL)) == (NOT_REPRODUCED, 0.0)


# ------------------------------------------------------------------------------- pruning


def _curve(last_within: int) -> np.ndarray:
    """A held-out curve within PRUNE_RISE up to step ``last_within``, then above it."""
    rel = np.full(len(SHARES), 2 * ac.PRUNE_RISE)
    rel[: last_within + 1] = ac.PRUNE_RISE * (1 - REL)
    return rel


@pytest.mark.parametrize("causal, large", [(False, ac.LARGE_SHARE_ENCODER), (True, ac.LARGE_SHARE_DECODER)])
def test_pruning_share_on_both_sides_of_a_large_share(causal, large):
    """Michel et al.'s 40 % (BERT) for an encoder, 20 % (WMT) for a decoder: the last step within PRUNE_RISE at the
    first share at least that large (reproduced), or one step short of it (its part not reproduced)."""
    step = next(k for k, s in enumerate(SHARES) if s >= large)
    summary = _summary(premise=_premise(causal=True), sink_sets={"bos": _set()}) if causal else _summary()
    row = _rows(summary, _raw(prune=_prune(_curve(step))), causal=causal)["ablation-pruning"]
    assert row.value == pytest.approx(100 * SHARES[step]) and row.verdict == REPRODUCED
    row = _rows(summary, _raw(prune=_prune(_curve(step - 1))), causal=causal)["ablation-pruning"]
    assert row.judged.parts[0].verdict == NOT_REPRODUCED and row.verdict == NOT_REPRODUCED


def test_pruning_is_judged_on_the_held_out_curve():
    """A curve scored on its own sentences that stays flat does not help a held-out curve that rises at once."""
    flat = (BASE * np.ones((len(SHARES), S))).tolist()
    row = _rows(raw=_raw(prune=_prune(_curve(0), in_sample=flat)))["ablation-pruning"]
    assert row.value == 0.0 and row.judged.parts[0].verdict == NOT_REPRODUCED


def test_pruning_beats_random_on_both_sides_of_its_gain():
    def parts(gap):
        row = _rows(raw=_raw(prune=_prune(gap_rel=gap)))["ablation-pruning"]
        return row.judged.parts[1].verdict, row.verdict

    assert parts(ac.PRUNE_GAIN * (1 + REL)) == (REPRODUCED, REPRODUCED)
    assert parts(ac.PRUNE_GAIN * (1 - REL)) == (PARTLY, PARTLY)          # above random, short of the level
    assert parts(0.0) == (NOT_REPRODUCED, NOT_REPRODUCED)                 # the interval holds 0, cannot reach it
    held = BASE * np.ones((len(SHARES), S))
    random = held.copy()
    random[1:-1, ::2] += BASE * 0.2                                       # half the sentences far above, half below
    random[1:-1, 1::2] -= BASE * 0.19
    prune = {**_prune(), "random": random[None].tolist()}
    row = _rows(raw=_raw(prune=prune))["ablation-pruning"]
    lo, hi = row.judged.parts[1].interval
    assert lo <= 0 and hi >= ac.PRUNE_GAIN and row.verdict == INCONCLUSIVE


# ------------------------------------------------------------------------------- the paper's heads


@pytest.mark.parametrize("gain, interval, p, expected", [
    (ac.PAPER_HEADS_GAIN, (10.0, 40.0), 0.049, REPRODUCED),
    (ac.PAPER_HEADS_GAIN - 0.1, (10.0, 40.0), 0.049, PARTLY),
    (10.0, (-5.0, ac.PAPER_HEADS_GAIN), 0.05, INCONCLUSIVE),          # p does not exclude the null; the level in reach
    (10.0, (-5.0, ac.PAPER_HEADS_GAIN - 0.1), 0.05, NOT_REPRODUCED),
])
def test_paper_heads_on_both_sides_of_the_null_and_its_level(gain, interval, p, expected):
    """The permutation p against same-layer random sets stands in for the null; the gain's interval says whether
    the level is in reach. A mean percentile above 50 is no evidence by itself (the old "partly")."""
    row = _rows(_summary(paper=_paper(gain, interval, p)))["ablation-paper-heads"]
    assert row.verdict == expected and row.judged.p_value == p and row.value == pytest.approx(50.0 + gain)


def test_paper_heads_not_applicable_says_why():
    _not_applicable(_rows(_summary(paper={}))["ablation-paper-heads"], "--no-paper-heads")
    raw = {**_raw(), "single": None}
    _not_applicable(_rows(raw=raw)["ablation-paper-heads"], "single-head effects were not run")
    no_syntax = {k: v for k, v in _paper().items() if k != "specialised"}
    _not_applicable(_rows(_summary(paper=no_syntax))["ablation-paper-heads"], "syntax chapter's heads")
    _not_applicable(_rows(_summary(paper=_paper(heads=())))["ablation-paper-heads"], "clears the syntax chapter's margin")


# ------------------------------------------------------------------------------- sinks


@pytest.mark.parametrize("noop, expected", [
    ((0.0, (-ac.NOOP_MAX, ac.NOOP_MAX)), REPRODUCED),                    # the range is closed
    ((0.0, (-ac.NOOP_MAX, ac.NOOP_MAX * (1 + REL))), INCONCLUSIVE),
    ((0.03, (ac.NOOP_MAX * (1 + REL), 0.05)), NOT_REPRODUCED),
    ((-0.03, (-0.05, -ac.NOOP_MAX * (1 + REL))), NOT_REPRODUCED),       # a fall counts as a move too
])
def test_the_noop_part_on_both_sides_of_its_range(noop, expected):
    row = _rows(_summary(sink_sets={"cls": _set(noop=noop)}))["ablation-sink-noop-measured"]
    assert row.judged.parts[0].verdict == expected
    assert row.value == pytest.approx(100 * noop[0])


@pytest.mark.parametrize("part, level, index", [("gap", ac.CONTROL_GAP, 1), ("redirect", ac.REDIRECT_MIN, 2)])
def test_the_control_and_redirect_parts_on_both_sides_of_their_levels(part, level, index):
    def verdict(value, interval):
        row = _rows(_summary(sink_sets={"cls": _set(**{part: (value, interval)})}))["ablation-sink-noop-measured"]
        return row.judged.parts[index].verdict, row.verdict

    assert verdict(level, (level / 2, 2 * level)) == (REPRODUCED, REPRODUCED)
    assert verdict(level * (1 - REL), (level / 2, 2 * level)) == (PARTLY, PARTLY)
    assert verdict(level / 2, (0.0, level)) == (INCONCLUSIVE, INCONCLUSIVE)       # the interval holds 0 and the level
    assert verdict(level / 2, (0.0, level * (1 - REL))) == (NOT_REPRODUCED, NOT_REPRODUCED)


def test_sink_claims_are_judged_where_the_token_is_a_sink():
    """[SEP] not a sink: its row is not applicable with the measured share, and the measured sink ([CLS]) has its
    own row; [SEP] the measured sink: its row is judged and the measured row points to it; a decoder: no [SEP],
    BOS judged; shares not read: neither row is judged."""
    rows = _rows()
    _not_applicable(rows["ablation-sink-noop"], "[SEP] is not a sink", "0.02")
    assert rows["ablation-sink-noop-measured"].verdict == REPRODUCED

    sep_sink = _summary(premise=_premise(measured="sep", cls="[CLS] is not a sink ..."), sink_sets={"sep": _set()})
    rows = _rows(sep_sink)
    assert rows["ablation-sink-noop"].verdict == REPRODUCED and "[SEP]" in rows["ablation-sink-noop"].ours
    _not_applicable(rows["ablation-sink-noop-measured"], "measured sink is [SEP]")

    rows = _rows(_summary(premise=_premise(causal=True), sink_sets={"bos": _set()}), causal=True)
    _not_applicable(rows["ablation-sink-noop"], "a decoder has no [SEP]")
    assert rows["ablation-sink-noop-measured"].verdict == REPRODUCED and "BOS" in rows["ablation-sink-noop-measured"].claim
    rows = _rows(_summary(premise=_premise(causal=True, bos="BOS is not a sink of this model: it takes at most 0.10"),
                          sink_sets={"bos": _set()}), causal=True)
    _not_applicable(rows["ablation-sink-noop-measured"], "BOS is not a sink", "0.10")

    rows = _rows({**_summary(), "sink_premise": None})
    _not_applicable(rows["ablation-sink-noop"], "--no-paper-heads")
    _not_applicable(rows["ablation-sink-noop-measured"], "--no-paper-heads")


def test_sink_claims_not_run_or_without_heads_say_so():
    rows = _rows(_summary(sink_sets={}))
    _not_applicable(rows["ablation-sink-noop-measured"], "no head puts more than 0.25")
    rows = _rows(raw=_raw(parts=["single", "importance", "only", "prune"]))
    _not_applicable(rows["ablation-sink-noop-measured"], "sink tests were not run")


# ------------------------------------------------------------------------------- ranks and what was not run


@pytest.mark.parametrize("rho, interval, expected", [
    (ac.RHO_STRONG, (0.1, 0.8), REPRODUCED),
    (ac.RHO_STRONG - 0.01, (0.1, 0.8), PARTLY),
    (0.2, (0.0, ac.RHO_STRONG), INCONCLUSIVE),        # an interval that reaches 0 does not exclude it
    (0.2, (0.0, ac.RHO_STRONG - 0.01), NOT_REPRODUCED),
])
def test_importance_ranks_on_both_sides_of_its_boundaries(rho, interval, expected):
    row = _rows(_summary(spearman={"rho": rho, "interval": list(interval)}))["ablation-importance-ranks"]
    assert row.verdict == expected and row.value == rho


def test_not_applicable_rows_say_why():
    rows = _rows(raw={**_raw(), "single": None}, summary={**_summary(), "spearman": None})
    _not_applicable(rows["ablation-single-heads"], "single-head effects were not run")
    _not_applicable(rows["ablation-importance-ranks"], "were not run")
    assert rows["ablation-sink-noop-measured"].verdict == REPRODUCED  # the others stand

    _not_applicable(_rows(raw={**_raw(n_heads=1), "only": None})["ablation-one-head-layers"], "one head per layer")
    _not_applicable(_rows(raw={**_raw(), "only": None})["ablation-one-head-layers"], "all but one was not run")
    _not_applicable(_rows(raw={**_raw(), "prune": None})["ablation-pruning"], "pruning curve was not run")
    one = {**_raw(), "prune": None, "segments": 1}
    _not_applicable(_rows(raw=one)["ablation-pruning"], "at least 2 sentences")
    row = _rows(_summary(spearman={"rho": math.nan, "interval": [math.nan, math.nan]}))["ablation-importance-ranks"]
    _not_applicable(row, "the same for every head")
