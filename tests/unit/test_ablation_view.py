"""What the ablation chapter shows (helpers.presentation.ablation_view), on a constructed ``ablate`` JSON: the per-head
frame marks the paper's heads, the pruning frame holds both orders, the tables' rows, and the sentences that say what
was run, each branch both ways."""
from __future__ import annotations

import pytest

from helpers.presentation import ablation_view as view

L, H, BASE = 2, 3, 4.0


def _result(**changes) -> dict:
    per_head = [[0.1 * (l * H + h) for h in range(H)] for l in range(L)]
    shares = [0.0, 0.5, 1.0]
    out = {
        "model": "tiny", "loss": "next-token loss (the model's own head)", "loss_head": None, "treebank": "gum:test",
        "segments": 5, "detail_segments": 2, "tokens": 1234, "n_layers": L, "n_heads": H, "base_loss": BASE,
        "parts": ["single", "importance", "only", "prune", "sinks", "sink_heads", "mean"],
        "delta_relative": per_head, "importance_normalised": per_head,
        "prune": {"shares": shares, "removed": [0, 3, 6], "importance": [BASE, BASE + 0.1, BASE + 1.0],
                  "order": ["1-1", "1-2", "1-3", "2-1", "2-2", "2-3"], "random_mean": [BASE, BASE + 0.5, BASE + 1.0],
                  "random_min": [BASE, BASE + 0.2, BASE + 1.0], "random_max": [BASE, BASE + 0.8, BASE + 1.0],
                  "seeds": [0, 1, 2]},
        "sinks": {"bos": {"noop": {"all": 0.04, "all_interval": [0.0, 0.08], "per_head": [[0.0] * H, [0.0, -0.2, 0.1]]},
                          "redirect": {"all": 0.4, "all_interval": [0.2, 0.6], "per_head": None}}},
        "sink_share": {"bos": [[0.5] * H, [0.9] * H]},
        "paper_heads": {"syntax": {"heads": ["2-2"], "delta_mean_percentile": 83.3, "delta_p": 0.2,
                                   "importance_mean_percentile": None, "importance_p": None},
                        "all": {"heads": ["2-2"], "delta_mean_percentile": 83.3, "delta_p": 0.2,
                                "importance_mean_percentile": 50.0, "importance_p": 0.5}},
        "settings": {"everything": False},
    }
    out.update(changes)
    return out


def test_head_frame_marks_the_paper_heads_and_scales_the_effect_to_percent():
    frame = view.head_scores_frame(_result())
    assert len(frame) == 2 * L * H
    marked = frame[frame["paper"] != ""]
    assert set(marked["label"]) == {"2-2"} and set(marked["paper"]) == {"§4.2"}
    effect = frame[frame["measure"].str.contains("change")].set_index("label")["value"]
    assert effect["2-3"] == pytest.approx(100 * 0.5)
    assert view.head_scores_frame(_result(delta_relative=None, importance_normalised=None)).empty


def test_prune_frame_holds_both_orders_with_the_random_range():
    frame = view.prune_frame(_result())
    assert len(frame) == 6 and frame["order"].nunique() == 2
    random = frame[frame["order"].str.startswith("random")]
    assert list(random["low"]) == [BASE, BASE + 0.2, BASE + 1.0] and list(random["high"]) == [BASE, BASE + 0.8, BASE + 1.0]
    assert list(frame["share"])[:3] == [0.0, 50.0, 100.0]


def test_sink_rows_give_percent_of_the_loss_and_the_largest_head():
    rows = view.sink_rows(_result())
    noop, redirect = rows
    assert noop["sink"] == "BOS" and noop["every head at once"] == "+1.00 % [+0.00, +2.00]"
    assert noop["largest per head"] == "-5.00 % (2-2)"  # the largest in size, with its sign
    assert redirect["largest per head"] == "—"  # not run per head


def test_sink_frame_pairs_each_heads_share_with_its_change():
    frame = view.sink_frame(_result())
    assert len(frame) == L * H  # only the no-op test ran per head
    row = frame.set_index("label").loc["2-2"]
    assert row["share"] == 0.9 and row["change"] == pytest.approx(-5.0)
    assert view.sink_frame(_result(sink_share=None)).empty


def test_paper_heads_rows_say_dashes_where_a_score_was_not_run():
    rows = {r["heads"]: r for r in view.paper_heads_rows(_result())}
    assert rows["§4.2 best heads"]["effect: mean percentile"] == "83" and rows["§4.2 best heads"]["importance: p"] == "—"
    assert rows["all of them"]["importance: p"] == "0.5"


def test_sizes_note_says_the_subset_or_everything():
    subset = view.sizes_note(_result(parts=["importance", "sinks"]))
    assert "first 5 sentences" in subset and "1,234 tokens" in subset
    assert "not run here: single-head effects, all but one" in subset
    assert "all but one and" not in subset  # no detail part ran
    full = view.sizes_note(_result())
    assert "all but one and sink tests per head on the first 2 of them" in full and "not run here" not in full
    every = view.sizes_note(_result(settings={"everything": True}))
    assert every.startswith("Every part ran on all 5 sentences")


def test_loss_note_adds_a_fitted_heads_losses_only():
    assert view.loss_note(_result()) == "next-token loss (the model's own head)"
    fitted = view.loss_note(_result(loss="masked-LM loss (fitted)", loss_head={"heldout_loss": 6.684,
                                                                                 "heldout_unigram_loss": 7.581}))
    assert fitted.endswith("6.68 nats, against 7.58 for word frequencies alone")
    own = view.loss_note(_result(loss="masked-LM loss (own)", loss_head={"source": "own"}))
    assert own == "masked-LM loss (own)"


def test_the_charts_are_drawn_or_say_why_not():
    assert view.effect_heatmaps(_result()).to_dict()  # an Altair chart
    assert view.prune_chart(_result()).to_dict()
    assert view.sink_chart(_result()).to_dict()
    assert "pruning curve): it was not run" in view.prune_chart(_result(prune=None)).data
    assert "neither the single-head effects nor importance" in view.effect_heatmaps(
        _result(delta_relative=None, importance_normalised=None)).data
    assert "per-head sink tests" in view.sink_chart(_result(sinks=None)).data


# ------------------------------------------------------------------------------- issue 61's additions


def _relative(rel, lo, hi) -> dict:
    return {"change": BASE * rel, "interval": [BASE * lo, BASE * hi], "relative": rel, "relative_interval": [lo, hi]}


def test_per_head_sink_changes_are_over_the_detail_sentences_loss():
    """The per-head tests ran on the detail sentences: their changes are shares of THOSE sentences' loss."""
    rows = view.sink_rows(_result(detail_base_loss=2.0))
    assert rows[0]["largest per head"] == "-10.00 % (2-2)"
    frame = view.sink_frame(_result(detail_base_loss=2.0)).set_index("label")
    assert frame.loc["2-2", "change"] == pytest.approx(-10.0)


def test_sink_rows_add_the_control_and_sink_set_rows_say_whether_each_token_is_a_sink():
    control = _relative(0.002, -0.001, 0.005)
    rows = view.sink_rows(_result(sinks_control=control))
    assert rows[-1]["sink"] == "a content token" and rows[-1]["every head at once"] == "+0.20 % [-0.10, +0.50]"
    premise = {"measured": "bos", "bos": {"layer_max": 0.61, "reason": None}}
    entry = {"heads": ["1-1", "2-3"], "noop": _relative(0.001, -0.002, 0.004), "redirect": _relative(0.05, 0.03, 0.07),
             "control": _relative(0.01, 0.005, 0.015), "control_minus_noop": _relative(0.009, 0.004, 0.014),
             "spearman": {"rho": 0.25, "interval": [-0.1, 0.6], "heads": 2, "segments": 2}}
    (row,) = view.sink_set_rows(_result(sink_premise=premise, sink_sets={"bos": entry}))
    assert row["sink"] == "BOS (measured sink)" and row["a sink?"] == "yes" and row["its heads"] == 2
    assert row["largest layer share"] == "0.61" and row["no-op"] == "+0.10 % [-0.20, +0.40]"
    assert row["control minus no-op"] == "+0.90 % [+0.40, +1.40]" and row["share vs own no-op (rho)"] == "0.25 [-0.10, 0.60]"
    premise = {"measured": "bos", "bos": {"layer_max": 0.1, "reason": "BOS is not a sink"}}
    (row,) = view.sink_set_rows(_result(sink_premise=premise, sink_sets=None))
    assert row["a sink?"] == "no" and row["its heads"] == 0 and row["no-op"] == "—"


def test_prune_frame_holds_the_held_out_orders_and_the_in_sample_curve():
    prune = {**_result()["prune"], "by_delta": [BASE, BASE + 0.2, BASE + 1.0], "in_sample": [BASE, BASE, BASE + 1.0]}
    frame = view.prune_frame(_result(prune=prune))
    assert frame["order"].nunique() == 4 and len(frame) == 12
    assert list(frame[frame["order"] == "by measured D (held out)"]["loss"]) == prune["by_delta"]
    assert view.prune_chart(_result(prune=prune)).to_dict()


def test_paper_heads_rows_show_the_same_layer_test():
    entry = {"heads": ["2-2"], "delta_mean_percentile": 83.3, "delta_p": 0.2, "importance_mean_percentile": None,
             "importance_p": None, "delta_expected_percentile": 55.0, "delta_gain": 28.3,
             "delta_gain_interval": [4.0, 40.0], "delta_p_layers": 0.03}
    rows = {r["heads"]: r for r in view.paper_heads_rows(_result(paper_heads={"specialised": entry}))}
    row = rows["§4.2 heads past the margin (judged)"]
    assert row["same layers: expected"] == "55" and row["gain over them"] == "+28 [+4, +40]"
    assert row["same layers: p"] == "0.03"
    old = {r["heads"]: r for r in view.paper_heads_rows(_result())}["§4.2 best heads"]
    assert old["gain over them"] == "—" and old["same layers: p"] == "—"


def test_notes_on_the_scale_the_count_and_mean_ablation():
    result = _result(loss_scale={"base": BASE, "unigram": 7.5, "every_head_removed": 8.25},
                     delta_significant={"raise": 3, "lower": 1, "heads": 6},
                     delta_mean_relative=[[0.0, 0.002, 0.3], [0.0, 0.0, 0.5]])
    assert view.scale_note(result) == ("4.00 nats with every head, 8.25 with every head removed (+106.2 % of the "
                                       "loss), 7.50 for token frequencies alone (the unigram loss)")
    assert view.significant_note(result).startswith("4 of 6 heads have an interval that excludes 0 (3 raise")
    note = view.mean_ablation_note(result, 0.01)
    assert "66.7 % of heads cost at most 1 %" in note and "(zeroed: 16.7 %)" in note
    assert view.mean_ablation_note(_result(), 0.01) == "Mean ablation was not run here."


def test_rule_note_says_what_each_rule_read():
    from helpers.claims import claim, combined, effect, not_applicable, share, within

    row = claim("x", "s", "t", "p", "o", 1.0, combined(
        within(0.001, (-0.002, 0.004), low=-0.01, high=0.01, name="little"),
        effect(0.03, (0.01, 0.05), null=0.0, paper=0.02, name="much")), resampled="sentences", n=5).to_json()
    assert view.rule_note(row, percent=True) == (
        "little: +0.10 % [-0.20 %, +0.40 %] against the range [-1.00 %, +1.00 %], reproduced; "
        "much: +3.00 % [+1.00 %, +5.00 %] against +0.00 % (no effect) and +2.00 % asked, reproduced")
    row = claim("x", "s", "t", "p", "o", 1.0, share(0.5), resampled="sentences", n=5).to_json()
    assert view.rule_note(row) == "it holds in 50.0 % of the resampled sets of sentences"
    row = claim("x", "s", "t", "p", "o", 1.0, effect(30.0, (5.0, 40.0), null=0.0, paper=25.0, p_value=0.01),
                resampled="sentences", n=5).to_json()
    assert view.rule_note(row, fmt="+.1f") == ("+30.0 [+5.0, +40.0] against +0.0 (no effect) and +25.0 asked, "
                                               "permutation p = 0.01")
    assert view.rule_note(not_applicable("x", "s", "t", "p", "why").to_json()) == "not applicable: why"


def test_the_large_share_names_whose_figure_it_is():
    from helpers.presentation.ablation_view import large_share_source

    encoder, decoder = large_share_source(False, 0.4, 0.2), large_share_source(True, 0.4, 0.2)
    assert encoder.startswith("Michel et al.'s figure for fine-tuned BERT") and encoder.endswith("it is 20%")
    assert decoder.startswith("Michel et al.'s figure for their translation model") and decoder.endswith("it is 40%")
