"""What the chapters show, built in :mod:`helpers.presentation.chapters`, :mod:`helpers.presentation.compare_view`
(chapter 08's paragraphs), :mod:`helpers.presentation.performance` and :mod:`helpers.presentation.measured` from
their sections' results and the benchmarks' JSON: each table and paragraph against an obvious computation written here on small
constructed inputs, and the section reports' parts that the chapters read (computed once, the numbers the
chapters showed when they computed them).

A table is checked whole (``pd.testing.assert_frame_equal``: values, types, index and column order) against the frame
written out here for its constructed input, or built cell by cell by loops over that input (the slow reference)."""
from __future__ import annotations

import sys
from collections import Counter
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest

from claim_rows import claim_as
from helpers import paper
from helpers.cluster.run import NO_BEHAVIOUR, THRESHOLDS, ClusterResult
from helpers.presentation import chapters, performance
from helpers.presentation.book import MISSING, table
from helpers.surface.stats import SurfaceStats


# ------------------------------------------------------------------------------- §2 attention maps (chapter 02)


def _maps_example():
    """A constructed example: 6 tokens over 5 positions ([CLS], 'the', 'unbelievable' in two tokens, 'cat', [SEP]),
    random token-level maps ``[layer, head, query, key]`` (2 x 3) and their word-level maps by the mean (the paper)
    and by the first token (the released code), written out here for the split word."""
    rng = np.random.default_rng(1)
    tokens = ["[CLS]", "the", "unbeliev", "##able", "cat", "[SEP]"]
    word_of_token = np.array([0, 1, 2, 2, 3, 4])
    words = ["[CLS]", "the", "unbelievable", "cat", "[SEP]"]
    token_attn = rng.dirichlet(np.ones(6), size=(2, 3, 6))
    def to_words(rows):  # [layer, head, word, token] -> [layer, head, word, word]: sum over a word's tokens
        return np.stack([rows[..., word_of_token == w].sum(-1) for w in range(5)], axis=-1)
    pick = [0, 1, 2, 4, 5]
    mean_rows = token_attn[:, :, pick].copy()
    mean_rows[:, :, 2] = token_attn[:, :, 2:4].mean(2)
    first_rows = token_attn[:, :, pick]
    return tokens, word_of_token, words, to_words(mean_rows), to_words(first_rows)


def test_the_token_table_gives_each_token_its_word():
    tokens, word_of_token, words, _, _ = _maps_example()
    frame = chapters.token_table(tokens, word_of_token, words)
    expected = pd.DataFrame([["[CLS]", 0, "[CLS]"], ["the", 1, "the"], ["unbeliev", 2, "unbelievable"],
                             ["##able", 2, "unbelievable"], ["cat", 3, "cat"], ["[SEP]", 4, "[SEP]"]],
                            columns=["token", "word position", "word"])
    pd.testing.assert_frame_equal(frame, expected, check_exact=True)


@pytest.mark.parametrize("layer, head", [(0, 0), (1, 2)])
def test_the_first_or_mean_table_shows_the_split_words_rows(layer, head):
    _, word_of_token, words, word_attn, first_attn = _maps_example()
    split_word = int(np.bincount(word_of_token).argmax())
    frame = chapters.first_mean_table(word_attn, first_attn, words, layer=layer, head=head, word=split_word)
    cells = [[float(f"{maps[layer, head, split_word, key]:.3f}") for key in range(len(words))]  # to 3 places, cell by cell
             for maps in (word_attn, first_attn)]
    expected = pd.DataFrame(cells, columns=words,
                            index=pd.Index(["mean (paper)", "first (released code)"], name="row of the split word"))
    pd.testing.assert_frame_equal(frame, expected, check_exact=True)
    assert frame.loc["mean (paper)"].sum() == pytest.approx(1.0, abs=5 * 5e-4)  # a word-level row, rounded to 3 places
    assert (frame.loc["mean (paper)"] != frame.loc["first (released code)"]).any()


@pytest.mark.parametrize("split_fraction, deviation, formula, shown", [
    (0.0712, 2.2e-16, 3.1e-7, ("7.1% (GUM dev)", "max deviation 2.2e-16", "max difference 3.1e-07")),
    (0.1, 0.0, 0.0, ("10.0% (GUM dev)", "max deviation 0.0e+00", "max difference 0.0e+00"))])
def test_the_maps_summary_states_the_three_measures_beside_the_paper(split_fraction, deviation, formula, shown):
    frame = chapters.maps_summary(split_fraction, deviation, formula)
    expected = pd.DataFrame([["words split into several tokens", "~8% (WSJ)", shown[0], "different corpus and vocabulary"],
                             ["word-level rows sum to 1", "yes", shown[1], "by construction"],
                             ["maps equal softmax(QKᵀ/√d)", "formula in §2", shown[2], "scaling written in"]],
                            columns=["claim", "paper", "this model", "note"])
    pd.testing.assert_frame_equal(frame, expected, check_exact=True)


# ------------------------------------------------------------------------------- §3 surface


def test_a_decoders_figure1_and_scatters_leave_out_what_it_does_not_have():
    """A decoder's statistics (``undefined``: next token, [SEP]): Figure 1 names no head for those patterns and says
    why instead of drawing; the scatters draw only the defined series, and a figure with none says so; the
    gradient lines leave out a series that is None. An encoder's draw every panel."""
    from helpers.presentation import charts
    from helpers.surface.run import FIGURE1_PATTERNS, figure1_heads, figure1_undefined
    from helpers.surface.section import Figure1

    rng = np.random.default_rng(0)
    keys = ("entropy", "next", "sep", "punct", "sep_sep", "rest_sep", "cls", "prev", "self")
    encoder = SurfaceStats({k: rng.random((2, 3)) for k in keys}, 1.0, 4)
    reasons = {"next": "no query sees its next token", "sep": "no [SEP]", "sep_sep": "no [SEP]", "rest_sep": "no [SEP]"}
    decoder = SurfaceStats({k: (np.full((2, 3), np.nan) if k in reasons else v) for k, v in encoder.per_head.items()},
                           1.0, 4, undefined=reasons)
    assert set(figure1_heads(encoder)) == set(FIGURE1_PATTERNS) and figure1_undefined(encoder) == {}
    assert figure1_undefined(decoder) == {"attends to the next token": reasons["next"], "attends to [SEP]": reasons["sep"]}
    assert set(figure1_heads(decoder)) == {"attends broadly", "attends to periods and commas"}
    assert set(decoder.shown) == set(keys) - set(reasons) and set(encoder.shown) == set(keys)
    attn = rng.dirichlet(np.ones(5), size=(2, 3, 5))
    figure = Figure1(figure1_heads(decoder), 0, [f"t{i}" for i in range(5)], attn, figure1_undefined(decoder))
    note = chapters.example_head_view(figure, "attends to [SEP]")
    assert "Not drawn" in note.data and reasons["sep"] in note.data
    assert "Not drawn" not in str(getattr(chapters.example_head_view(figure, "attends broadly"), "data", ""))
    chart = charts.layer_scatter(decoder.shown, {"cls": "[CLS]", "sep": "[SEP]", "punct": ". or ,"})
    assert sorted({r["series"] for r in chart.to_dict()["datasets"].popitem()[1]}) == [". or ,", "[CLS]"]
    empty = charts.layer_scatter(decoder.shown, {"sep_sep": "[SEP] → [SEP]", "rest_sep": "other → [SEP]"}, title="x")
    assert "Not drawn" in empty.data
    lines = charts.layer_lines({"[SEP]": None, "[CLS]": [0.1, 0.2]})
    assert {r["series"] for r in lines.to_dict()["datasets"].popitem()[1]} == {"[CLS]"}


def test_a_chapter_says_what_its_models_heads_see():
    """The note each section chapter opens with: an encoder sees the whole input; a decoder names its mask, its BOS
    and the section's own definition under the mask (said once on the record)."""
    from helpers.section import CAUSAL_MASK
    from helpers.syntax.section import SECTION

    encoder = SimpleNamespace(name="enc", causal=False)
    assert chapters.causal_note(SECTION, encoder) == ("enc is an encoder: each of its heads sees the whole input, as "
                                                      "BERT's did in the paper.")
    for bos, start in ((True, "start with BOS"), (False, "no BOS")):
        note = chapters.causal_note(SECTION, SimpleNamespace(name="dec", causal=True, bos=bos))
        assert note.startswith("dec is a decoder") and start in note
        assert CAUSAL_MASK in note and SECTION.causal in note and SECTION.paper in note


def test_example_heads_are_labelled_one_based():
    frame = chapters.example_heads({"attends broadly": (0, 2), "attends to [SEP]": (3, 0)})
    assert frame.columns.tolist() == ["pattern", "head"]
    assert frame.values.tolist() == [["attends broadly", "1-3"], ["attends to [SEP]", "4-1"]]


FITTED = {"source": "fitted on the frozen encoder", "train_tokens": 1234, "heldout_loss": 3.14159,
          "heldout_unigram_loss": 6.5}


def test_the_masked_lm_paragraph_of_a_fitted_head_states_its_fit():
    assert chapters.mlm_source(FITTED) == "This model's head: fitted on the frozen encoder."
    note = chapters.mlm_note(FITTED)
    assert "on 1234 masked tokens" in note and "held-out loss is 3.14 nats" in note and "against 6.50 for unigram" in note
    assert note.startswith("The checkpoint has no masked-LM head") and note.endswith("not what the model was trained on.")


def test_the_masked_lm_paragraph_of_the_models_own_head_says_so():
    own = {"source": "the checkpoint's own masked-LM head"}
    assert chapters.mlm_source(own) == "This model's head: the checkpoint's own masked-LM head."
    assert chapters.mlm_note(own) == "The gradients are those of the model's own pre-training masked-LM loss, as in the paper."


def test_figure1_is_the_models_own_attention_on_the_example_segment(tiny_lm, toy_data, tmp_path):
    """The §3 report's Figure 1 example: the heads with the largest statistics, and the segment's maps equal to the
    model's own attention output (both float32 passes over the same ids: equal up to float32 rounding)."""
    import torch

    from helpers.context import RunContext
    from helpers.surface.section import SECTION

    report = SECTION.run(tiny_lm, RunContext(data_dir=toy_data, cache_dir=tmp_path), n_segments=3, max_length=60)
    fig = report.figure1
    for name, statistic in (("attends broadly", "entropy"), ("attends to the next token", "next"),
                            ("attends to [SEP]", "sep"), ("attends to periods and commas", "punct")):
        values = report.stats.per_head[statistic]
        assert values[fig.heads[name]] == values.max(), name
    ids = report.batch.examples[fig.position].input_ids
    assert fig.tokens == tiny_lm.tokenizer.convert_ids_to_tokens(ids.tolist())
    with torch.no_grad():
        out = tiny_lm.model(input_ids=torch.as_tensor(ids)[None], output_attentions=True)
    expected = torch.stack(out.attentions)[:, 0].numpy()  # [layer, head, query, key]
    assert fig.attn.shape == expected.shape == (tiny_lm.n_layers, tiny_lm.n_heads, len(ids), len(ids))
    np.testing.assert_allclose(fig.attn, expected, rtol=1e-5, atol=1e-6)
    assert report.figure1 is fig  # a part: computed once


# ------------------------------------------------------------------------------- §4.2 syntax


def _held(relation, count, in_sample, in_ci, in_head, held, held_ci, dev_head, baseline):
    gain = held - baseline  # the paired gain's interval: the head's, moved by the baseline (constructed)
    return {"relation": relation, "count": count, "in_sample_accuracy": in_sample, "in_sample_ci": in_ci,
            "in_sample_head": in_head, "held_out_accuracy": held, "held_out_ci": held_ci, "dev_head": dev_head,
            "baseline_accuracy": baseline, "dev_direction": "dependent-to-head", "gain": gain,
            "gain_ci": (held_ci[0] - baseline, held_ci[1] - baseline), "sentences": count // 5}


HELD = [_held("all", 500, 40.04, (38.0, 42.16), "5-1", 38.5, (36.44, 40.5), "5-2", 30.0),
        _held("det", 50, 90.0, (85.0, 95.0), "2-3", 90.0, (85.0, 95.0), "2-3", 50.0),
        _held("aux:pass", 9, 70.0, (50.0, 90.0), "1-1", 60.0, (40.0, 80.0), "1-2", 20.0)]  # a claims-only relation


def test_the_held_out_table_shows_the_table1_rows_in_order():
    frame = chapters.held_out_table(HELD, ["all", "det", "nsubj"])  # nsubj: no held-out row, left out
    assert frame.index.tolist() == ["all", "det"]
    assert frame.columns.tolist() == ["count", "in-sample (test)", "chosen on dev → test", "baseline_accuracy",
                                      "gain over the baseline"]
    assert frame.loc["all"].tolist() == [500, "40.0 [38.0, 42.2] 5-1", "38.5 [36.4, 40.5] 5-2", 30.0,
                                         "+8.5 [+6.4, +10.5]"]
    assert frame.loc["det"].tolist() == [50, "90.0 [85.0, 95.0] 2-3", "90.0 [85.0, 95.0] 2-3", 50.0,
                                         "+40.0 [+35.0, +45.0]"]


def test_the_mean_drop_is_over_the_rows_shown():
    assert chapters.held_out_drop(HELD, ["all", "det"]) == pytest.approx(((40.04 - 38.5) + 0.0) / 2)
    assert chapters.held_out_drop(HELD, ["all", "det", "aux:pass"]) == pytest.approx((1.54 + 0.0 + 10.0) / 3)


def test_the_possessive_table_has_one_row_per_scoring():
    row = lambda acc: {"count": 7, "best_head": "3-2", "accuracy": acc}  # noqa: E731
    plain = SimpleNamespace(table=lambda: {"nmod:poss": row(40.0), "det": row(1.0)})
    convention = SimpleNamespace(table=lambda: {"nmod:poss": row(85.0)})
    frame = chapters.possessive_table(plain, convention, "nmod:poss")
    assert frame.index.tolist() == ["UD (possessor is the dependent)", "paper's convention ('s counts as the dependent)"]
    assert frame["accuracy"].tolist() == [40.0, 85.0] and frame.columns.tolist() == ["count", "best_head", "accuracy"]


def test_the_held_out_rows_are_computed_once_for_the_claims_and_the_chapter(monkeypatch):
    """The §4.2 report's ``held_out`` is what the claims read and the chapter's table shows: one computation."""
    from helpers.context import RunContext
    from helpers.syntax import claims as syntax_claims
    from helpers.syntax.section import SECTION

    calls = []
    monkeypatch.setattr(syntax_claims, "held_out", lambda test, dev: calls.append((test, dev)) or HELD)
    report = SECTION.run(None, RunContext(small=True))
    report.__dict__.update(test="test run", dev="dev run", relations=["all", "det"],  # the runs, as if computed
                           statements={"relations": ["det"], "specialised": 1.0, "specialised_sentences": 100,
                                       "direction": 1.0, "direction_sentences": 100})
    claims = {c.id: c for c in SECTION.claims(report)}
    frame = chapters.held_out_table(report.held_out, report.relations)
    assert calls == [("test run", "dev run")]
    assert claims["single-head-parsing-all"].value == 38.5 and frame.loc["all", "chosen on dev → test"].startswith("38.5 ")
    assert claims["det-head"].value == 90.0 and claims["auxpass-head"].value == 60.0  # the claims-only row too


def test_the_chapters_held_out_rows_equal_those_computed_alone(tiny_lm, toy_conllu):
    """The chapter used to compute :func:`held_out_rows` for Table 1's relations alone; the claims' rows (with their
    own relations added) hold the same numbers for those relations, bootstrap intervals included (each relation
    resamples with the same seed)."""
    from helpers.syntax.claims import held_out
    from helpers.syntax.run import held_out_rows, run_heads, table1_relations

    run = run_heads(tiny_lm, str(toy_conllu), max_length=60)
    relations = table1_relations(run.scores)
    alone = held_out_rows(run.scores, run.scores, relations, n_boot=50)
    shown = chapters.held_out_rows_shown(held_out(run, run, n_boot=50), relations)
    assert shown == alone and len(shown) > 1


# ------------------------------------------------------------------------------- §4.3 coreference


def _coref_run(n_layers=2, n_heads=3, kinds=("pronoun", "proper", "nominal", "nominal"), seed=0):
    """A constructed coreference run: 48 queries in 12 documents, random correctness of every head (choosing among
    mentions and among every word) and baseline; with ``kinds`` lacking a mention type, that type's accuracies are
    NaN."""
    from helpers.coref.run import CorefRun

    rng = np.random.default_rng(seed)
    n = 48
    kind = np.array(list(kinds) * (n // len(kinds)))[:n]
    return CorefRun("test", "truncated", rng.random((n_layers, n_heads, n)) < 0.6, rng.random((3, n)) < 0.4, kind,
                    np.repeat(np.arange(12), 4), 12, [], word_correct=rng.random((n_layers, n_heads, n)) < 0.3)


def _table2_reference(dev, test, candidate_sets):
    """The chapter's Table 2 computed here by loops over the queries: per candidate set, the head with the best "all"
    accuracy on ``dev`` (the first in layer-then-head order on a tie) and on ``test``, each scored on ``test``; the
    baselines on ``test``; accuracies in percent to 0.1, NaN for a type without a mention; the heads' intervals are the
    run's own bootstrap (:meth:`CorefRun.head_interval`, tested with the coreference statistics); the paper's rows;
    the mentions counted one by one."""
    from helpers.coref.run import BASELINES, CANDIDATE_LABELS
    from helpers.coref.stats import MENTION_TYPES

    types = ("all", *MENTION_TYPES)

    def queries(run, kind):
        return [q for q in range(len(run.kinds)) if kind == "all" or run.kinds[q] == kind]

    def percent(correct, run, kind):  # correct: [query] booleans
        qs = queries(run, kind)
        return float(f"{100 * sum(bool(correct[q]) for q in qs) / len(qs):.1f}") if qs else float("nan")

    def best(correct):  # correct: [layer, head, query]; the most queries right is the best "all" accuracy
        hits = {(l, h): sum(map(bool, correct[l, h])) for l in range(correct.shape[0]) for h in range(correct.shape[1])}
        return next(lh for lh, v in hits.items() if v == max(hits.values()))

    rows = []
    for candidates in candidate_sets:
        tag = "" if tuple(candidate_sets) == ("mentions",) else f", candidates: {CANDIDATE_LABELS[candidates]}"
        correct = {"mentions": "head_correct", "words": "word_correct"}[candidates]
        for (l, h), how in ((best(getattr(dev, correct)), "chosen on dev"),
                            (best(getattr(test, correct)), "best on test, in-sample")):
            lo, hi = test.head_interval(l, h, candidates=candidates)
            rows.append({"system": f"head {l + 1}-{h + 1} ({how}{tag})",
                         **{k: percent(getattr(test, correct)[l, h], test, k) for k in types},
                         "95% interval (all)": f"[{lo:.1f}, {hi:.1f}]"})
    for b, name in enumerate(BASELINES):
        rows.append({"system": name, **{k: percent(test.baseline_correct[b], test, k) for k in types},
                     "95% interval (all)": ""})
    for name, values in paper.TABLE2.items():
        rows.append({"system": f"paper: {name}", **dict(zip(types, values)), "95% interval (all)": ""})
    rows.append({"system": "mentions (test)", **{k: len(queries(test, k)) for k in types}, "95% interval (all)": ""})
    return pd.DataFrame(rows, dtype=object).set_index("system")


@pytest.mark.parametrize("candidate_sets", [("mentions",), ("mentions", "words")])
@pytest.mark.parametrize("kinds", [("pronoun", "proper", "nominal", "nominal"), ("pronoun", "nominal")])
def test_table2_frame_against_loops_over_the_queries(candidate_sets, kinds):
    """Both calls of the chapter (the mentions alone; mentions and every word), with every mention type and with one
    missing (its accuracies NaN); the heads' intervals filled in, the baselines' empty."""
    dev, test = _coref_run(kinds=kinds, seed=0), _coref_run(kinds=kinds, seed=1)
    frame = chapters.table2_frame(dev, test, candidate_sets=candidate_sets)
    pd.testing.assert_frame_equal(frame, _table2_reference(dev, test, candidate_sets))
    heads = 2 * len(candidate_sets)
    intervals = frame["95% interval (all)"].tolist()
    assert all(i.startswith("[") for i in intervals[:heads]) and not any(intervals[heads:])
    assert frame.loc["mentions (test)", "all"] == 48 and type(frame.loc["mentions (test)", "all"]) is int
    assert frame.loc["paper: Head match"].tolist()[:4] == list(paper.TABLE2["Head match"])
    assert pd.isna(frame.loc["nearest", "proper"]) == ("proper" not in kinds)


def test_the_coref_heat_maps_frame_has_one_row_per_type_and_head():
    acc = _coref_run().accuracy()
    frame = chapters.coref_accuracy_frame(acc)
    rows = []
    for kind in ("all", "pronoun", "proper", "nominal"):  # the accuracy's order: all, then the mention types
        for layer in range(2):
            for head in range(3):
                rows.append([kind, "mention head → candidates", layer + 1, head + 1, f"{layer + 1}-{head + 1}",
                             float(f"{acc[kind][layer, head]:.1f}")])
    expected = pd.DataFrame(rows, columns=["relation", "direction", "layer", "head", "label", "accuracy"])
    pd.testing.assert_frame_equal(frame, expected, check_exact=True)


# ------------------------------------------------------------------------------- §5 probes


def _summary(runs):
    return {"mean": round(float(np.mean(runs)), 2), "sd": round(float(np.std(runs, ddof=1)), 2) if len(runs) > 1 else 0.0,
            "runs": runs}


def test_table3_rows_give_mean_and_sd_over_seeds_beside_the_paper():
    result = {"rows": {
        "Right-branching": {"test": _summary([26.04]), "ewt": _summary([30.0])},
        "Attn": {"test": _summary([60.0, 62.0]), "test_mst": _summary([61.0, 61.0]), "ewt": _summary([50.0, 54.0])},
        "Attn + words (original misalignment)": {"test": _summary([70.0]), "test_mst": _summary([71.0]),
                                                 "ewt": _summary([66.0])},
    }}
    frame = chapters.table3(result)
    assert frame.index.tolist() == ["Right-branching", "Attn", "Attn + words (original misalignment)"]
    read_back = chapters.table3({"rows": dict(sorted(result["rows"].items()))})  # as the cache's JSON holds them
    assert read_back.equals(frame)
    assert frame.loc["Attn"].tolist() == ["61.0 ± 1.4", "61.0", "52.0 ± 2.8", 2, str(paper.TABLE3["Attn"])]
    assert frame.loc["Right-branching"].tolist()[:1] == ["26.0"] and frame.loc["Right-branching", "seeds"] == 1
    assert pd.isna(frame.loc["Right-branching", "GUM test UAS, MST decoding"])  # no MST row for a baseline
    assert pd.isna(frame.loc["Attn + words (original misalignment)", "paper (WSJ)"])  # the paper has no such row
    assert f"| Right-branching | 26.0 | {MISSING} | 30.0 | 1 | {paper.TABLE3['Right-branching']} |" in table(
        frame, name="tbl-x", caption="c").data


# ------------------------------------------------------------------------------- §6 clustering


def _cluster(n_layers=2, n_heads=3, behaviours=None, distance=None):
    rng = np.random.default_rng(0)
    per_head = {k: rng.random((n_layers, n_heads)) for k in chapters.HEAD_STATISTICS}
    n = n_layers * n_heads
    return ClusterResult("m", np.zeros((n, n)) if distance is None else distance, np.zeros((n, 2)),
                         behaviours or [NO_BEHAVIOUR] * n, SurfaceStats(per_head, 3.0, 4), n_layers, n_heads, 4, 100,
                         {}, np.arange(n))


def test_the_head_frame_has_one_row_per_head_in_flattened_order():
    behaviours = ["attends to next", NO_BEHAVIOUR, "attends broadly", NO_BEHAVIOUR, NO_BEHAVIOUR, "attends to [SEP]"]
    result = _cluster(behaviours=behaviours)
    frame = chapters.head_frame(result, {"1-2": "syntax: det", "2-3": "coreference"})
    assert frame["head"].tolist() == ["1-1", "1-2", "1-3", "2-1", "2-2", "2-3"]
    assert frame["layer"].tolist() == [1, 1, 1, 2, 2, 2]
    assert frame["behaviour"].tolist() == ["attends to next", "syntax: det", "attends broadly", NO_BEHAVIOUR,
                                           NO_BEHAVIOUR, "coreference"]  # a linguistic head overrides its label
    for name in chapters.HEAD_STATISTICS:
        values = result.stats.per_head[name]
        expected = [round(float(values[k // 3, k % 3]), 3) for k in range(6)]
        assert frame[name].tolist() == pytest.approx(expected, abs=1e-12), name


def test_the_layer_table_averages_pairs_within_and_across_layers():
    D = np.array([[0, 10, 20, 30],
                  [10, 0, 40, 50],
                  [20, 40, 0, 6],
                  [30, 50, 6, 0]], float)  # two layers of two heads
    frame = chapters.layer_table(_cluster(n_layers=2, n_heads=2, distance=D))
    assert frame.index.tolist() == [1, 2]
    assert frame.loc[1].tolist() == [10, round((20 + 30 + 40 + 50) / 4)]
    assert frame.loc[2].tolist() == [6, round((20 + 40 + 30 + 50) / 4)]


def test_behaviour_counts_leave_out_the_heads_without_one():
    behaviours = ["b", NO_BEHAVIOUR, "a", "b", NO_BEHAVIOUR, "a", "c", NO_BEHAVIOUR, NO_BEHAVIOUR]
    frame = chapters.head_frame(_cluster(n_layers=3, n_heads=3, behaviours=behaviours), {})
    counted = [(k, v) for k, v in Counter(behaviours).most_common() if k != NO_BEHAVIOUR]  # ties: first seen first
    assert chapters.behaviour_counts(frame) == (5, ", ".join(f"{k} {v}" for k, v in counted)) == (5, "b 2, a 2, c 1")
    assert chapters.behaviour_counts(chapters.head_frame(_cluster(), {})) == (0, "none")


def test_the_cluster_thresholds_are_the_jsons():
    result = _cluster()
    result.similarity, result.order = {}, np.arange(6)
    assert result.to_json()["thresholds"] == THRESHOLDS
    assert list(THRESHOLDS) == ["next", "prev", "broad_entropy_fraction", "cls", "sep", "punct"]  # the rules' order


# ------------------------------------------------------------------------------- attention norms (chapter 07)


def test_the_norms_table1_shows_each_rows_heads_and_accuracies():
    """Rows of :func:`helpers.norms.run.table1_comparison` with both directions under each kind of map and
    accuracies to be rounded, against the table written out here (rounded as pandas rounds: 50.55 to 50.6); with
    the change's paired interval, one more column before the baseline."""
    from helpers.syntax.stats import DIRECTIONS

    def row(relation, count, w, n, wd, nd, base):
        return {"relation": relation, "count": count, "weights_head": "5-2", "weights_direction": DIRECTIONS[wd],
                "weights_accuracy": w, "norms_head": "4-11", "norms_direction": DIRECTIONS[nd], "norms_accuracy": n,
                "change": round(n - w, 4), "same_head": False, "baseline_accuracy": base}

    table1 = [row("all", 500, 40.04, 42.16, 0, 1, 30.0), row("det", 50, 90.0, 89.95, 1, 0, 50.55),
              row("nsubj", 7, 33.333, 66.667, 1, 1, 14.2857)]
    frame = chapters.norms_table1(table1)
    expected = pd.DataFrame([[500, "5-2 dep→head", 40.0, "4-11 head→dep", 42.2, 2.1, 30.0],
                             [50, "5-2 head→dep", 90.0, "4-11 dep→head", 90.0, -0.0, 50.6],
                             [7, "5-2 head→dep", 33.3, "4-11 head→dep", 66.7, 33.3, 14.3]],
                            columns=["count", "weights: head", "weights: accuracy", "norms: head", "norms: accuracy",
                                     "change", "baseline"], index=pd.Index(["all", "det", "nsubj"], name="relation"))
    pd.testing.assert_frame_equal(frame, expected, check_exact=True)
    paired = chapters.norms_table1([{**r, "change_interval": [r["change"] - 1.04, r["change"] + 2.06]} for r in table1])
    pd.testing.assert_frame_equal(paired, expected.assign(**{"change: 95% interval": ["[1.1, 4.2]", "[-1.1, 2.0]",
                                                                                    "[32.3, 35.4]"]})
                                  [[*expected.columns[:6], "change: 95% interval", "baseline"]], check_exact=True)


# ------------------------------------------------------------------------------- the comparison (chapter 08)


def _model(spec, random_init, verdicts, *, sizes=None):
    """A model's result with one claim per verdict (``c0``, ``c1`` ...; an item that is a claim's estimate and
    interval makes an effect claim of paper level 10 over a null of 0; a verdict alone, a row with no interval to
    form a difference from: :func:`claim_rows.judged_without_interval`), 2 layers x 3 heads."""
    from helpers.claims import NOT_APPLICABLE, claim, effect, not_applicable
    from helpers.compare.run import ModelResult

    def one(i, v):
        if isinstance(v, tuple):
            return claim(f"c{i}", "§3.1", "c", "p", "o", v[0], effect(*v, null=0.0, paper=10.0), resampled="segments",
                         n=40)
        from claim_rows import judged_without_interval

        return not_applicable(f"c{i}", "§3.1", "c", "p", "no [SEP]") if v == NOT_APPLICABLE else \
            claim(f"c{i}", "§3.1", "c", "p", "o", 1.0, judged_without_interval(v), resampled="segments", n=40)

    claims = [one(i, v) for i, v in enumerate(verdicts)]
    return ModelResult(spec, {"name": spec, "layers": 2, "heads": 3, "random_init": random_init}, claims,
                       sizes=sizes or {}, seconds=12.5, peak_rss_gib=1.25)


R, P, I, N, NA = "reproduced", "partly", "inconclusive", "not reproduced", "not applicable"


def test_the_comparisons_findings_paragraph_on_both_sides_of_each_branch():
    """Two pre-trained models and a control: c0 is reproduced by both (shared), c1 and c3 by one (model-dependent:
    partly is not reproduced), c2 and c4 by none; c5 applies to neither; each model's partly and inconclusive named.
    The control reproduces c0 on its own verdict alone (rows without intervals). One pre-trained model and no
    control: the other sentence, no control's, no "apply to none" sentence."""
    from helpers.presentation.compare_view import findings_text

    two = [_model("a", False, [R, P, N, R, I, NA]), _model("b", False, [R, R, N, P, P, NA]),
           _model("random:a", True, [P, N, N, N, N, NA])]
    assert findings_text(two) == (
        "Across the pre-trained models (a and b), 1 claim is reproduced by every one of them: c0. "
        "These look like properties of pre-trained transformers rather than of one model. "
        "2 claims depend on the model (reproduced by some, not by others): c1 and c3. "
        "2 claims are reproduced by none of them: c2 and c4. "
        "Short of reproduced, a gives \"partly\" for 1 claim (c1) and \"inconclusive\" for 1 claim (c4); "
        "b gives \"partly\" for 2 claims (c3 and c4) and \"inconclusive\" for 0 claims (none). "
        "1 claim applies to none of them: c5. "
        "Judged on the difference of their statistics, the random-init controls (random:a) reproduce no claim too. "
        "For 1 claim a control's own verdict is \"reproduced\" or \"partly\" but the two rows carry no intervals on "
        "a common scale, so that verdict alone says the control reproduces it too: c0.")
    one = [_model("a", False, [R, N, N])]
    assert findings_text(one) == (
        "Across the pre-trained models (a), 1 claim is reproduced by every one of them: c0. "
        "With one pre-trained model, nothing can be said yet about other models. "
        "0 claims depend on the model (reproduced by some, not by others): none. "
        "2 claims are reproduced by none of them: c1 and c2. "
        "Short of reproduced, a gives \"partly\" for 0 claims (none) and \"inconclusive\" for 0 claims (none).")


def test_the_comparisons_random_control_on_the_difference():
    """Effect claims with intervals: the control reproduces c0 too (the difference's interval holds 0) and c1 only
    by its own verdict, which pre-training exceeds (the difference's interval lies above 0); c2's control is not
    reproduced (no row in the table). The paragraph, the table and the verdict counts."""
    from helpers.presentation.compare_view import findings_text, random_table, verdict_table

    a = _model("a", False, [(12.0, (11.0, 13.0)), (25.0, (24.0, 26.0)), (12.0, (11.0, 13.0))])
    ctrl = _model("random:a", True, [(11.0, (10.0, 12.0)), (5.0, (4.0, 6.0)), (1.0, (-1.0, 3.0))])
    text = findings_text([a, ctrl])
    assert ("The random-init controls (random:a) reproduce 1 claim too: c0 (their own verdict is \"reproduced\" or "
            "\"partly\", and the pre-trained model's statistic does not exceed theirs beyond chance); for these the "
            "verdict does not need pre-training (the pattern comes with the architecture or the input format, or the "
            "claim is a negative one that an untrained model satisfies too).") in text
    assert "For 1 claim a control's own verdict is \"reproduced\" or \"partly\", but pre-training adds to the " \
           "pattern beyond chance: c1." in text and "no intervals" not in text
    frame = random_table([a, ctrl])
    assert frame.to_dict("records") == [
        {"claim": "c0", "control": "random:a", "its verdict": R, "statistic": "estimate", "pre-trained": "12 [11, 13]",
         "control's": "11 [10, 12]", "difference": "1 [-0.414, 2.41]", "reproduces too": "yes"},
        {"claim": "c1", "control": "random:a", "its verdict": P, "statistic": "estimate", "pre-trained": "25 [24, 26]",
         "control's": "5 [4, 6]", "difference": "20 [18.6, 21.4]", "reproduces too": "no: pre-training adds to it"}]
    counts = verdict_table([a, ctrl, _model("b", False, [I, NA])])
    assert counts.to_dict("index") == {
        "a": {R: 3, P: 0, I: 0, N: 0, NA: 0}, "random:a": {R: 1, P: 1, I: 0, N: 1, NA: 0},
        "b": {R: 0, P: 0, I: 1, N: 0, NA: 1}}
    nothing = random_table([a])  # no control: one row saying so
    assert nothing["claim"].tolist() == ["none"] and nothing.drop(columns="claim").isna().all().all()


def test_results_at_a_glance_colours_and_tally():
    """Each verdict on its colour, after the legend; the tally names all four verdicts, then "not applicable"."""
    from helpers.claims import not_applicable
    from helpers.presentation.summary import claims_html, tally_text
    from helpers.presentation.verdicts import VERDICT_COLOURS

    claims = [claim_as("prev-token-heads", "§3.1", I), claim_as("det-head", "§4.2", R),
              not_applicable("sep-self-attention", "§3.2", "c", "p", "no [SEP]")]
    html = claims_html(claims)
    assert html.startswith("<p><span") and html.count("</tr>") == 4  # the header and three claims
    for c in claims:
        assert f'<span style="background:{VERDICT_COLOURS[c.verdict]};padding:0 0.3em"><b>{c.verdict}</b></span>' in html
    assert tally_text(claims, "m") == ("Of the paper's 3 claims tested on m: 1 reproduced, 0 partly, 1 inconclusive, "
                                       "0 not reproduced, 1 not applicable.")


def test_the_comparisons_models_sizes_and_cost():
    """The models with their shapes; the sizes note in a small and a full build, with and without models at reduced
    sizes (the book's model, ``default``, runs at the chapters' sizes); the cost table's rows."""
    from helpers.compare.run import REDUCED_SIZES, SMALL_REDUCED_SIZES
    from helpers.context import RunContext
    from helpers.presentation.compare_view import cost_table, models_text, sizes_note

    book, other = _model("default", False, [R]), _model("m", False, [R], sizes=dict(REDUCED_SIZES))
    control = _model("random:default", True, [N])
    assert models_text([book, other]) == "default (2 layers x 3 heads); m (2 layers x 3 heads)"
    chapters = "The book's model's rows are those of the chapters (same sizes, read from their cache"
    assert sizes_note([book], RunContext(small=False)) == chapters + ")."
    assert sizes_note([book], RunContext(small=True)) == chapters + "; this build uses the small test configuration)."
    reduced = (" To keep the book's build within budget, m and random:default use reduced sizes: {}; their verdicts "
               "rest on less data than the book's model.")
    full = (f"{REDUCED_SIZES['n_segments']} segments, the first {REDUCED_SIZES['max_sentences']} sentences of each "
            f"treebank and the first {REDUCED_SIZES['max_documents']} documents of each coreference split")
    assert sizes_note([book, other, control], RunContext(small=False)) == chapters + ")." + reduced.format(full)
    small = (f"{SMALL_REDUCED_SIZES['n_segments']} segments, the first {SMALL_REDUCED_SIZES['max_sentences']} sentences "
             f"of each treebank and the first {SMALL_REDUCED_SIZES['max_documents']} documents of each coreference "
             f"split, probes trained for {SMALL_REDUCED_SIZES['epochs']} epoch(s)")
    assert sizes_note([book, other, control], RunContext(small=True)) == (
        chapters + "; this build uses the small test configuration)." + reduced.format(small))
    frame = cost_table([book, other])
    assert frame.index.tolist() == ["default", "m"]
    assert frame["sizes"].tolist() == ["the chapters' sizes", full]
    assert frame["seconds"].tolist() == [12.5, 12.5] and frame["peak resident memory (GiB)"].tolist() == [1.25, 1.25]


# ------------------------------------------------------------------------------- the Performance page

BUILD = {"seconds_cold_build": 1000.0, "seconds_floor": 250.0, "ratio_build_over_floor": 4.0,
         "cpu_seconds_cold_build": 1500.0, "seconds_rebuild": 12.5, "peak_rss_gib": 2.5, "jobs": 2,
         "pages": {"notebooks/a": 300.0, "notebooks/b": 600.0, "notebooks/c": 600.0},
         "slowest_cells": {"notebooks/b": [[3, 420.4, "report = SECTION.run(lm, ctx)"]]},
         "page_cpu_seconds": {"notebooks/a": 500.0},
         "recorded": {"date": "2026-01-01", "machine": {"cores": 2, "cpu": "x"}, "command": "python b.py", "commit": "abc"}}


def test_the_clustering_benchmarks_table():
    """benchmarks/clustering.py's JSON as the page shows it: per-segment seconds in milliseconds to 0.1, the rest as
    written, one row each, in the page's order."""
    from helpers.presentation.measured import clustering_table

    bench = {"segments": 20, "per_segment_seconds": {"batched_float32": 0.00126, "batched_float64": 0.0021,
                                                     "per_head_loop_float64": 0.5, "original_per_head_loop_float16": 1.25},
             "speedup_vs_per_head_loop": 396.8, "speedup_vs_original_loop": 992.1, "seconds_js_all_segments": 0.03,
             "seconds_forward_all_segments": 0.4, "peak_rss_mib": 512.5}
    frame = clustering_table(bench)
    assert frame.columns.tolist() == ["value"] and frame.index.name == "measure"
    assert [m.split(" (")[0].split(",")[0] for m in frame.index] == [
        "segments", "batched", "batched", "per-head loop", "the original's per-head loop", "speed-up over the per-head loop",
        "speed-up over the original's loop", "JS distances", "forward passes", "peak resident memory"]
    assert frame["value"].tolist() == [20, 1.3, 2.1, 500.0, 1250.0, 396.8, 992.1, 0.03, 0.4, 512.5]


EXTRACTION = {"sentences": 40, "seconds_bare_forward": 1.25, "seconds_extraction_word_level": 1.5,
              "ratio_extraction_over_bare": 1.2, "seconds_conversion_batched": 0.01, "seconds_conversion_naive_loop": 0.5,
              "speedup_conversion_over_naive": 50.0, "peak_rss_mib": 700.5, "threads": 2, "model": "m"}
HEADS = {"sentences": 60, "seconds_bare_forward": 2.0, "seconds_extract_and_score": 2.5,
         "ratio_extract_and_score_over_bare": 1.25, "seconds_scoring_only": 0.25, "seconds_naive_scoring_estimated": 30.0,
         "speedup_scoring_over_naive": 120.0, "peak_rss_mib": 800.0}


def _measures_frame(rows):
    """``measure | value`` as the page shows it: indexed by ``measure``, the values an object column of floats."""
    index = pd.Index([m for m, _ in rows], name="measure")
    return pd.DataFrame({"value": pd.Series([float(v) for _, v in rows], dtype=object, index=index)})


def test_the_extraction_benchmarks_table():
    """benchmarks/extraction.py's JSON as the page shows it: each value as written, in the page's order (the count
    among seconds a float, 40.0, as the page has always shown it)."""
    from helpers.presentation.measured import extraction_table

    frame = extraction_table(EXTRACTION)
    pd.testing.assert_frame_equal(frame, _measures_frame([
        ("sentences (GUM test)", 40), ("bare forward pass with attentions (s)", 1.25),
        ("extraction + word-level maps (s)", 1.5), ("ratio to the bare forward pass (goal ≤ 1.2)", 1.2),
        ("token→word conversion, batched matrix products (s)", 0.01),
        ("token→word conversion, per-head Python loop (s)", 0.5), ("speed-up of the conversion (goal ≥ 20)", 50.0),
        ("peak resident memory (MiB)", 700.5)]), check_exact=True)
    assert [type(v) for v in frame["value"]] == [float] * 8


def test_the_heads_benchmarks_table():
    """benchmarks/heads.py's JSON as the page shows it: each value as written, in the page's order."""
    from helpers.presentation.measured import heads_table

    frame = heads_table(HEADS)
    pd.testing.assert_frame_equal(frame, _measures_frame([
        ("sentences", 60), ("bare forward pass with attentions (s)", 2.0),
        ("extraction + word maps + scoring every head, direction and relation (s)", 2.5),
        ("ratio to the bare forward pass", 1.25), ("scoring alone (s)", 0.25),
        ("per-word Python loop scoring, estimated (s)", 30.0), ("speed-up of the scoring", 120.0),
        ("peak resident memory (MiB)", 800.0)]), check_exact=True)
    assert [type(v) for v in frame["value"]] == [float] * 8


def test_packed_over_floor_reads_the_recording_or_computes_it_from_the_cores():
    assert performance.packed_over_floor({**BUILD, "ratio_packed_over_floor": 9.99}) == 9.99
    assert performance.packed_over_floor(BUILD) == round(1500.0 / 2 / 250.0, 2)  # processor time / cores / floor
    assert performance.packed_over_floor({k: v for k, v in BUILD.items() if k != "recorded"}) is None


def test_page_rows_give_each_pages_share_and_slowest_cell():
    rows = performance.page_rows("default", BUILD)
    assert [r["page"] for r in rows] == ["notebooks/a", "notebooks/b", "notebooks/c"]
    assert [r["share of the build"] for r in rows] == ["30%", "60%", "60%"]
    assert rows[1]["slowest cell"] == "420 s: report = SECTION.run(lm, ctx)" and rows[0]["slowest cell"] is None
    assert [r["processor s"] for r in rows] == [500.0, None, None]
    assert performance.slowest_page(BUILD) == "notebooks/b"  # the first of two equally slow pages
    assert performance.slowest_page(None) == "not recorded yet"


def test_page_table_stacks_the_recorded_builds_and_drops_empty_columns():
    frame = performance.page_table({"default": BUILD, "other": None, "big": {**BUILD, "pages": {"notebooks/a": 10.0}}})
    assert frame.index.tolist() == [("default", "notebooks/a"), ("default", "notebooks/b"), ("default", "notebooks/c"),
                                    ("big", "notebooks/a")]
    assert "peak (GiB)" not in frame.columns and frame["seconds"].tolist() == [300.0, 600.0, 600.0, 10.0]
    assert performance.page_table({"default": None}).columns.tolist() == ["seconds"]


def test_build_table_has_one_row_per_model():
    frame = performance.build_table({"default": BUILD, "mpnet-base": None})
    assert frame.loc["default", "cold build (min)"] == round(1000.0 / 60, 1)
    assert frame.loc["default", "processor time / cores / floor"] == 3.0
    assert frame.loc["default", "measurement"].startswith("recorded 2026-01-01 on x (2 cores")
    assert frame.loc["mpnet-base", "measurement"].startswith("not recorded yet")


def test_phase_rows_give_each_phase_its_share_of_its_page():
    phases = {"pages": {"surface": 200.0, "probe": 100.0}, "floor": {"surface": 50.0},
              "phases": {"surface: extraction": 150.0, "surface: . inside it": 50.0, "probe: training": 25.0}}
    rows = performance.phase_rows("default", phases)
    assert [(r["page"], r["phase"], r["share of the page"]) for r in rows] == [
        ("surface", "the page's first cell", "100%"), ("surface", "extraction", "75%"), ("surface", ". inside it", "25%"),
        ("probe", "the page's first cell", "100%"), ("probe", "training", "25%")]
    assert rows[0]["floor of its passes (s)"] == 50.0 and rows[3]["floor of its passes (s)"] is None
    assert performance.phase_table({"default": phases}).index.names == ["model", "page", "phase"]
    assert performance.phase_table({"default": None})["measurement"].tolist()[0].startswith("not recorded yet")


def test_memory_and_probe_tables():
    row = {"model": "m", "command": "heads", "peak_rss_gib": 1.5, "ratio_to_floor": 1.2, "seconds": 3.0, "budget_gb": 3,
           "within_budget": False}
    frame = performance.memory_table({"default": {"rows": [row, {**row, "command": "probe", "within_budget": True}]},
                                      "mpnet-base": None})
    assert frame["within budget"].tolist() == ["NO", "yes"] and frame.index.tolist() == [("m", "heads"), ("m", "probe")]
    assert performance.memory_table({"default": None})["measurement"].tolist()[0].startswith("not recorded yet")
    probe = {"seconds_epoch": 2.0, "ratio_epoch_over_batches": 4.0, "seconds_forward_only": 1.0,
             "ratio_training_over_forward": 2.0}
    frame = performance.probe_epoch_table({key: {**probe, "seconds_epoch": float(i)}
                                           for i, key in enumerate(performance.PROBES.values())})
    assert frame.index.tolist() == list(performance.PROBES) and frame["epoch (s)"].tolist() == [0.0, 1.0, 2.0]
    assert frame["plain autograd (s)"].isna().all() and frame["epoch / making the batches"].tolist() == [4.0] * 3


def test_the_benchmarks_are_read_without_touching_sys_path():
    before = list(sys.path)
    common = performance.benchmarks_common()
    assert common.__file__ == str(performance.BENCHMARKS / "common.py") and sys.path == before
    assert "common" not in sys.modules or sys.modules["common"] is not common


def test_run_benchmark_returns_the_scripts_json_and_says_when_it_fails(tmp_path, monkeypatch):
    (tmp_path / "ok.py").write_text("import json, sys\nout = sys.argv[sys.argv.index('--out') + 1]\n"
                                    "json.dump({'args': sys.argv[1:-2]}, open(out, 'w'))\n")
    (tmp_path / "bad.py").write_text("import sys\nsys.exit('the corpora are missing')\n")
    monkeypatch.setattr(performance, "BENCHMARKS", tmp_path)
    assert performance.run_benchmark("ok", "--sentences", "4") == {"args": ["--sentences", "4"]}
    with pytest.raises(RuntimeError, match=r"benchmarks/bad.py --x 1 failed \(exit 1\)(.|\n)*the corpora are missing"):
        performance.run_benchmark("bad", "--x", "1")


def test_run_benchmark_runs_the_script_with_passive_waiting_threads(tmp_path, monkeypatch):
    """On a machine shared with other work, spinning OpenMP threads burnt most of the Performance page's processor
    time: its benchmarks run with the passive wait policy, whatever the kernel's environment says."""
    (tmp_path / "env.py").write_text("import json, os, sys\nout = sys.argv[sys.argv.index('--out') + 1]\n"
                                     "json.dump({'policy': os.environ.get('OMP_WAIT_POLICY')}, open(out, 'w'))\n")
    monkeypatch.setattr(performance, "BENCHMARKS", tmp_path)
    monkeypatch.setenv("OMP_WAIT_POLICY", "ACTIVE")
    assert performance.run_benchmark("env") == {"policy": "PASSIVE"}


def _probes_recording(folder, name: str, date: str, time: str, *, naive: bool = True) -> None:
    """A recorded benchmarks/probes.py run in ``folder`` (the fields the page reads), with or without its trainings
    against the naive loop (a run with --skip-naive has none)."""
    import json

    def how(seconds, cpu):
        return {"seconds": seconds, "cpu_seconds": cpu, "loss": 3.5, "peak_mib": 800.0}

    row = {"batched": how(1.5, 1.0), "naive": how(6.0, 4.0), "forward": how(0.75, 0.5), "ratio_batched_over_naive": 0.25,
           "ratio_batched_over_forward": 2.0}
    data = {"corpus": "gum:train", "sentences": 2000, "maps": 72, "threads": 1, "model_spec": "6x12",
            "recorded": {"date": date, "time": time, "command": "python benchmarks/probes.py --record", "commit": "abc1234",
                         "machine": {"cpu": "Xeon", "cores": 2, "memory_gib": 23.5}}}
    if naive:
        data["device"] = {"name": "cpu", **{key: row for key in performance.PROBES.values()}}
    (folder / name).write_text(json.dumps(data))


def test_the_probes_naive_loop_is_read_from_the_newest_recording_that_has_it(tmp_path):
    """The build does not run the probes' naive per-sentence loop: the page reads the newest recording that timed it
    (a later run without it, --skip-naive, is passed over) and labels it with what, when, where, how and at which
    commit it was recorded."""
    _probes_recording(tmp_path, "probes-6x12-2026-11-27.json", "2026-11-27", "10:00:00")
    _probes_recording(tmp_path, "probes-6x12-2026-11-28.json", "2026-11-28", "09:00:00")
    _probes_recording(tmp_path, "probes-6x12-2026-11-28-120000.json", "2026-11-28", "12:00:00", naive=False)
    record = performance.probe_naive_record(tmp_path)
    assert record["recorded"]["date"] == "2026-11-28" and record["device"]
    note = performance.probe_naive_note(record)
    assert note.startswith("2,000 sentences with the lengths of gum:train, 72 maps, on cpu with 1 thread")
    for label in ("recorded 2026-11-28", "Xeon (2 cores", "`python benchmarks/probes.py --record`", "commit abc1234"):
        assert label in note
    frame = performance.probe_naive_table(record)
    assert frame.index.tolist() == list(performance.PROBES)
    assert frame.loc["Attn", "naive per-sentence loop (processor s)"] == 4.0
    assert frame.loc["Attn", "batched / naive"] == 0.25 and frame.loc["Attn", "batched / forward"] == 2.0  # of processor s
    assert frame.loc["Attn", "wall, batched / naive (s)"] == "1.50 / 6.00" and frame.loc["Attn", "peak (MiB)"] == 800
    assert not frame.isna().any().any()


def test_without_a_recording_of_the_probes_naive_loop_the_page_says_how_to_make_one(tmp_path):
    assert performance.probe_naive_record(tmp_path) is None
    _probes_recording(tmp_path, "probes-6x12-2026-11-28.json", "2026-11-28", "12:00:00", naive=False)
    assert performance.probe_naive_record(tmp_path) is None  # a run with --skip-naive is not one
    note = performance.probe_naive_note(None)
    assert note.startswith("not recorded yet: run `python benchmarks/probes.py --skip-formulations --threads 1 --record`")
    frame = performance.probe_naive_table(None)
    assert frame.columns.tolist() == ["measurement"] and frame["measurement"].tolist() == [note]


def test_the_repository_has_a_recording_of_the_probes_naive_loop():
    """The Performance page shows it in every build: a recording is committed in benchmarks/results/."""
    record = performance.probe_naive_record()
    assert record is not None and set(performance.PROBES.values()) <= set(record["device"])
    assert record["recorded"].get("commit") and record["recorded"].get("machine")


def test_a_chapters_claims_table_can_show_the_rules_fields():
    """The chapter's claims table shows any field of a claim's JSON: the rule's numbers to 3 significant digits, an
    interval as "[lo, hi]", a combined claim's parts, "—" where a row has none (not applicable; an effect judged
    by its permutation p alone has no interval); an
    unknown column is refused, naming it."""
    from helpers.claims import claim, combined, effect, not_applicable, within
    from helpers.presentation.book import claims_table

    rows = [claim("a", "§3.1", "c", "p", "o", 1.0, effect(12.3456, (11.0, 13.0), null=0.0, paper=10.0),
                  resampled="segments", n=40),
            claim("b", "§3.1", "c", "p", "o", 1.0, combined(effect(12.0, (11.0, 13.0), null=0.0, paper=10.0, name="x"),
                                                            within(0.5, (0.2, 2.0), low=0.0, high=1.0, name="y")),
                  resampled="sentences", n=7),
            not_applicable("c", "§3.2", "c", "p", "no [SEP]"),
            claim("d", "§3.1", "c", "p", "o", 2.0, effect(5.0, None, null=0.0, paper=10.0, p_value=0.01),
                  resampled="segments", n=40)]
    frame = claims_table(rows, columns=("verdict", "rule", "estimate", "interval", "paper_level", "parts", "n"))
    assert frame.to_dict("index") == {
        "a": {"verdict": R, "rule": "effect", "estimate": "12.3", "interval": "[11, 13]", "paper_level": "10",
              "parts": "—", "n": 40},
        "b": {"verdict": I, "rule": "combined", "estimate": "—", "interval": "—", "paper_level": "—",
              "parts": "reproduced, inconclusive", "n": 7},
        "c": {"verdict": NA, **dict.fromkeys(("rule", "estimate", "interval", "paper_level", "parts", "n"), "—")},
        "d": {"verdict": P, "rule": "effect", "estimate": "5", "interval": "—", "paper_level": "10", "parts": "—",
              "n": 40}}
    assert claims_table(rows).columns.tolist() == ["section", "claim", "paper", "ours", "verdict"]
    with pytest.raises(ValueError, match="'nonsense'"):
        claims_table(rows, columns=("verdict", "nonsense"))
