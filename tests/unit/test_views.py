"""Views: compact chart records, bertviz format, example choice, formula check, head labels."""
import json

import numpy as np
import pytest

from helpers.data.conllu_io import read_conllu
from helpers.data.examples import first_with_split_word
from helpers.core.formula import recompute_attention
from helpers.core.labels import head_label, parse_head_label
from helpers.presentation.views import attention_rows, heatmap
from test_formula import formula_tolerance
from tolerances import decimals, in_float64


def test_rows_round_trip_every_weight():
    rng = np.random.default_rng(0)
    attn = rng.dirichlet(np.ones(4), size=(2, 3, 4))
    rows = attention_rows(attn)
    assert len(rows) == 2 * 3 * 4
    for r in rows:
        # tolerance: chart rows keep 3 decimals
        np.testing.assert_allclose(r["w"], attn[r["layer"] - 1, r["head"] - 1, r["query"]], rtol=0, atol=decimals(3))
        assert r["k"] == [0, 1, 2, 3]
    spec = heatmap(attn, list("abcd")).to_dict()
    assert any(p["name"] == "layer" for p in spec["params"])
    assert len(json.dumps(spec)) < 20_000


def test_example_rule_picks_first_sentence_with_split_word(tiny_lm, toy_conllu):
    sents = read_conllu(toy_conllu)
    assert first_with_split_word(sents, tiny_lm.tokenizer, min_words=3, max_words=8) == 2
    with pytest.raises(ValueError, match="no sentence"):
        first_with_split_word(sents[:2], tiny_lm.tokenizer, min_words=3, max_words=8)


def test_formula_reproduces_extracted_maps(tiny_lm):
    from helpers.core.encoding import encode_words
    from helpers.core.extract import forward_attentions

    lm = in_float64(tiny_lm)  # as in test_formula: the formula is checked to float64 round-off
    ex = encode_words(lm.tokenizer, [["the", "cat", "sat", "on", "the", "mat"]]).examples[0]
    attn = forward_attentions(lm, [ex])[0]
    for layer in range(lm.n_layers):
        # tolerance: the formula's round-off (test_formula.formula_tolerance): hooks against the model's own output
        np.testing.assert_allclose(recompute_attention(lm, ex.input_ids, layer=layer).numpy(), attn[layer].numpy(),
                                   rtol=0, atol=formula_tolerance(lm, ex.input_ids, layer))


def test_head_labels_are_one_based():
    assert head_label(0, 0) == "1-1" and head_label(7, 10) == "8-11"
    assert parse_head_label("8-11") == (7, 10)
    with pytest.raises(ValueError, match="1-based"):
        parse_head_label("0-3")


def test_charts_save_as_svg_and_png(tmp_path):
    from helpers.presentation.charts import layer_lines, save_chart

    chart = layer_lines({"a": [1.0, 2.0, 3.0], "b": [3.0, 2.0, 1.0]}, title="t", y_title="y")
    svg, png = save_chart(chart, tmp_path / "figure")
    assert svg.read_text().lstrip().startswith("<svg") and "</svg>" in svg.read_text()
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    with pytest.raises(ValueError, match="format 'pdf'"):
        save_chart(chart, tmp_path / "x", formats=("pdf",))


def test_heatmap_and_head_view_take_the_same_0_based_indices():
    """One convention in code: ``layer=1, head=2`` is head label "2-3" in both views (the sliders show 1-based)."""
    from helpers.presentation.views import head_view

    attn = np.random.default_rng(0).dirichlet(np.ones(4), size=(3, 4, 4))  # [layer, head, query, key]
    spec = heatmap(attn, list("abcd"), layer=1, head=2).to_dict()
    values = {p["name"]: p["value"] for p in spec["params"]}
    assert values == {"layer": 2, "head": 3}
    head_view(attn, list("abcd"), layer=1, heads=[2], html_action="return")  # the same indices are valid there
    with pytest.raises(ValueError, match="layer: 0-based"):
        heatmap(attn, list("abcd"), layer=3)


def test_a_chart_of_every_head_of_a_large_model_is_not_refused(monkeypatch):
    """altair refuses a dataset of more than 5,000 rows by default; relations x heads of a 30 x 9 decoder are 8,640
    (the syntax chapter's heat map): the charts' altair allows :data:`views.MAX_CHART_ROWS`."""
    import pandas as pd

    from helpers.presentation import views

    monkeypatch.setattr(views, "_renderer_checked", [False])
    alt = views.altair_offline()
    rows = pd.DataFrame({"head": range(8640), "accuracy": 0.5})
    assert len(alt.Chart(rows).mark_rect().encode(x="head:O", color="accuracy:Q").to_dict()["datasets"].popitem()[1]) == 8640
