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
        "parts": ["single", "importance", "only", "prune", "sinks", "sink_heads"],
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
