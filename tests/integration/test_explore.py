"""The explorer's non-visual part: words of a typed sentence, word-level maps, each word's predicted
head against slow loops, the default head, and the panel built from them (tiny random BERT)."""
import numpy as np
import pytest

from helpers.core.encoding import encode_words
from helpers.presentation.explore import Explorer, analyse, most_confident_head, predicted_heads, split_words
from helpers.core.extract import attention_for
from helpers.syntax.stats import DIRECTIONS
from tolerances import EPS64, decimals, round_off

TEXT = "the cat sat on the big mat ."


def slow_prediction(attn, layer, head, i, direction):
    """Word position (1-based) predicted as word i's head, by plain loops: the other non-special word
    with the most attention from i (dependent-to-head) or to i (head-to-dependent); ties: earliest."""
    n = attn.shape[-1] - 2
    best, best_weight = None, -1.0
    for j in range(1, n + 1):
        if j == i:
            continue
        weight = attn[layer, head, i, j] if direction == "dependent-to-head" else attn[layer, head, j, i]
        if weight > best_weight:
            best, best_weight = j, weight
    return best, best_weight


def test_split_words_keeps_inner_apostrophes_and_splits_punctuation():
    assert split_words("It's the dog's bone, isn't it?") == ["It's", "the", "dog's", "bone", ",", "isn't", "it", "?"]
    assert split_words("  a\tb\n") == ["a", "b"]


def test_analyse_gives_the_word_level_maps_of_the_extraction(tiny_lm):
    ex = analyse(TEXT, tiny_lm)
    words = TEXT.split()
    assert ex.words == ("[CLS]", *words, "[SEP]")
    (expected,) = attention_for(tiny_lm, encode_words(tiny_lm.tokenizer, [words]), level="word")
    assert ex.attn.shape == (tiny_lm.n_layers, tiny_lm.n_heads, len(words) + 2, len(words) + 2)
    np.testing.assert_array_equal(ex.attn, expected)
    assert analyse(words, tiny_lm).words == ex.words  # a list of words is taken as is


def test_predicted_heads_match_slow_loops(tiny_lm):
    ex = analyse(TEXT, tiny_lm)
    n_layers, n_heads, size, _ = ex.attn.shape
    for direction in DIRECTIONS:
        for layer in range(n_layers):
            for head in range(n_heads):
                table = predicted_heads(ex.attn, ex.words, layer=layer, head=head, direction=direction)
                assert table["position"].tolist() == list(range(1, size - 1))
                for row in table.itertuples():
                    best, weight = slow_prediction(ex.attn, layer, head, row.position, direction)
                    assert row._3 == best  # "predicted head"
                    assert row._4 == ex.words[best]  # "head word"
                    # tolerance: the table shows weights rounded to 3 decimals
                    assert row.weight == pytest.approx(weight, rel=0, abs=decimals(3))


def test_ties_go_to_the_earliest_word():
    attn = np.full((1, 1, 5, 5), 0.2)  # [CLS] w1 w2 w3 [SEP], uniform: every candidate ties
    table = predicted_heads(attn, ["[CLS]", "a", "b", "c", "[SEP]"], layer=0, head=0)
    assert table["predicted head"].tolist() == [2, 1, 1]


def test_most_confident_head_by_slow_loops(tiny_lm):
    ex = analyse(TEXT, tiny_lm)
    n_layers, n_heads, size, _ = ex.attn.shape
    best, best_score = None, -1.0
    # two float64 means of the same size - 2 weights (at most 1) differ by at most this: closer scores are a tie,
    # which the earliest head wins
    tie = round_off(1.0, size, eps=EPS64)
    for layer in range(n_layers):
        for head in range(n_heads):
            score = np.mean([max(float(ex.attn[layer, head, i, j]) for j in range(1, size - 1) if j != i)
                             for i in range(1, size - 1)])  # in float64, as the function
            if score > best_score + tie:
                best, best_score = (layer, head), score
    assert most_confident_head(ex.attn) == best


def test_bad_input_says_which_argument(tiny_lm):
    with pytest.raises(ValueError, match="text: 1 word"):
        analyse("cat", tiny_lm)
    with pytest.raises(ValueError, match="max_length"):
        analyse("the cat " * 40, tiny_lm, max_length=16)
    with pytest.raises(ValueError, match="direction="):
        predicted_heads(np.full((1, 1, 4, 4), 0.25), ["[CLS]", "a", "b", "[SEP]"], layer=0, head=0, direction="up")
    with pytest.raises(ValueError, match="layer, head"):
        Explorer(TEXT, tiny_lm, layer=0, head=None, direction=DIRECTIONS[0], max_length=128)


def test_panel_follows_the_chosen_head(tiny_lm):
    pytest.importorskip("ipywidgets")
    panel = Explorer(TEXT, tiny_lm, layer=None, head=None, direction=DIRECTIONS[0], max_length=128)
    assert panel.head.value == most_confident_head(panel.exploration.attn)
    assert [len(o.outputs) for o in (panel.libraries, panel.view, panel.map, panel.predictions)] == [1, 1, 1, 1]
    assert "data-helpers-lib" in panel.libraries.outputs[0]["data"]["text/html"]
    assert "data-helpers-lib" not in panel.view.outputs[0]["data"]["text/html"]  # sent once, by the panel
    panel.head.value = (1, 2)
    expected = predicted_heads(panel.exploration.attn, panel.exploration.words, layer=1, head=2)
    assert panel.table.equals(expected)
    assert "Head 2-3" in panel.map.outputs[0]["data"]["text/html"]
    panel.sentence.value = "a dog sat on the mat"
    assert panel.exploration.words[1:3] == ("a", "dog") and panel.message.value == ""
    panel.sentence.value = "dog"
    assert "at least two" in panel.message.value  # the old sentence stays


@pytest.mark.parametrize("bos", [True, False], ids=["bos", "no-bos"])
def test_a_decoders_exploration_follows_its_layout_and_mask(tmp_path, bos):
    """A tiny random Llama: the positions are BOS (when used) and the words, nothing after; each word's predicted
    head is, by plain loops, the word it sees with the most attention (dependent-to-head: an earlier word;
    head-to-dependent: a later word attending to it), 0 and no head word for a word that sees none."""
    import tiny_decoders as td
    from helpers.core.models import load_model

    lm = load_model(str(td.save_llama(tmp_path / "llama")), bos=bos)
    ex = analyse(TEXT, lm)
    words = TEXT.split()
    lead = 1 if bos else 0
    assert ex.causal and ex.n_words == len(words)
    assert ex.words == ((lm.tokenizer.bos_token,) if bos else ()) + tuple(words)
    assert ex.attn.shape[-1] == len(words) + lead
    n_layers, n_heads = ex.attn.shape[:2]
    for direction in DIRECTIONS:
        for layer in range(n_layers):
            for head in range(n_heads):
                table = predicted_heads(ex.attn, ex.words, layer=layer, head=head, direction=direction,
                                        n_words=ex.n_words, causal=True)
                assert table["position"].tolist() == list(range(1, len(words) + 1))
                for row in table.itertuples():
                    i = row.position
                    seen = range(1, i) if direction == "dependent-to-head" else range(i + 1, len(words) + 1)
                    best, weight = 0, 0.0
                    for j in seen:  # 1-based words; map positions j - 1 + lead
                        w = (ex.attn[layer, head, i - 1 + lead, j - 1 + lead] if direction == "dependent-to-head"
                             else ex.attn[layer, head, j - 1 + lead, i - 1 + lead])
                        if best == 0 or w > weight:
                            best, weight = j, w
                    assert row._3 == best and row._4 == (words[best - 1] if best else "")
                    assert row.weight == pytest.approx(weight, rel=0, abs=decimals(3))
    layer, head = most_confident_head(ex.attn, n_words=ex.n_words)
    assert 0 <= layer < n_layers and 0 <= head < n_heads
