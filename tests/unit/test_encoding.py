"""Token-word alignment, over-long inputs, and paper-style segments."""
import random

import numpy as np
import pytest

from helpers.core.encoding import encode_ids, encode_words
from helpers.data.segments import Segment, encode_segments, pair_template, truncate_pair
from tolerances import round_off


def test_alignment_with_split_words(tiny_lm):
    batch = encode_words(tiny_lm.tokenizer, [["The", "unaffable", "cat", "sat", "."]])
    ex = batch.examples[0]
    tokens = tiny_lm.tokenizer.convert_ids_to_tokens(ex.input_ids.tolist())
    assert tokens == ["[CLS]", "the", "un", "##aff", "##able", "cat", "sat", ".", "[SEP]"]
    assert ex.word_of_token.tolist() == [0, 1, 2, 2, 2, 3, 4, 5, 6]
    assert ex.n_positions == 7


def test_over_long_inputs_are_skipped_and_counted(tiny_lm):
    short, long_ = ["a", "cat"], ["the", "cat"] * 10  # 22 tokens with specials
    batch = encode_words(tiny_lm.tokenizer, [short, long_, short], max_length=12)
    assert [e.index for e in batch.examples] == [0, 2]
    assert batch.skipped == [1]
    assert batch.summary()["skipped_over_length"] == 1
    assert encode_ids([[1] * 5, [1] * 3], max_length=4).skipped == [0]


def test_max_length_beyond_model_limit_is_an_error(tiny_lm):
    with pytest.raises(ValueError, match="--max-length 100 exceeds"):
        encode_words(tiny_lm.tokenizer, [["a"]], max_length=100, model_max=tiny_lm.max_positions)


def test_word_without_tokens_keeps_its_row(tiny_lm):
    batch = encode_words(tiny_lm.tokenizer, [["the", "\u200b", "cat"]])
    ex = batch.examples[0]
    assert batch.unknown_words == 1
    assert sorted(set(ex.word_of_token.tolist())) == [0, 1, 2, 3, 4]


def test_truncate_pair_respects_budget_and_seed():
    a, b = list(range(50)), list(range(100, 120))
    out1 = truncate_pair(a, b, 30, random.Random(0))
    out2 = truncate_pair(a, b, 30, random.Random(0))
    assert out1 == out2
    assert len(out1[0]) + len(out1[1]) == 30
    # the longer side always loses the token, so both end within one token of each other
    assert abs(len(out1[0]) - len(out1[1])) <= 1
    for kept in out1:  # what remains of each side is a contiguous run of the original
        assert kept == list(range(kept[0], kept[0] + len(kept)))
    assert truncate_pair(a[:5], b[:5], 30, random.Random(0)) == (a[:5], b[:5])


def test_segment_layout_is_cls_a_sep_b_sep(tiny_lm):
    tok = tiny_lm.tokenizer
    assert pair_template(tok) == ([tok.cls_token_id], [tok.sep_token_id], [tok.sep_token_id])
    seg = Segment("d", 0, (9, 11), (10, 12, 13))
    ids = encode_segments(tok, [seg]).examples[0].input_ids
    assert tok.convert_ids_to_tokens(ids.tolist()) == ["[CLS]", "the", "cat", "[SEP]", "a", "dog", "sat", "[SEP]"]


def test_byte_level_bpe_alignment_and_pair_template(tiny_bpe_model_dir):
    from helpers import iter_attention, load_model

    lm = load_model(str(tiny_bpe_model_dir))
    batch = encode_words(lm.tokenizer, [["the", "unaffable", "cat", "sat"]])
    ex = batch.examples[0]
    tokens = lm.tokenizer.convert_ids_to_tokens(ex.input_ids.tolist())
    assert tokens[0] == "<s>" and tokens[-1] == "</s>" and tokens[1] == "Ġthe"  # words keep their space
    pieces = [t for t, w in zip(tokens, ex.word_of_token) if w == 2]
    assert len(pieces) > 1 and "".join(pieces).replace("Ġ", "") == "unaffable"
    assert ex.word_of_token[0] == 0 and ex.word_of_token[-1] == 5
    bos, eos = lm.tokenizer.bos_token_id, lm.tokenizer.eos_token_id
    assert pair_template(lm.tokenizer) == ([bos], [eos, eos], [eos])
    (_, attn), = list(iter_attention(lm, batch, level="word"))
    assert attn.shape == (2, 4, 6, 6)
    # tolerance: float32 softmax rows of n tokens, then the word conversion's two products of at most n tokens
    np.testing.assert_allclose(attn.sum(-1), 1.0, rtol=0, atol=round_off(1.0, 3 * len(ex)))


# ------------------------------------------------------------- a sentence as one string is refused

def _refusers():
    """Every public function taking a list of words, called with one string in its place: ``(name, call)``."""
    from helpers.core.encoding import position_labels
    from helpers.mixing.maps import token_maps
    from helpers.presentation.chapters import first_mean_table, token_table
    from helpers.presentation.explore import predicted_heads
    from helpers.presentation.views import attention_lines

    text, attn = "[CLS] a cat [SEP]", np.full((1, 1, 4, 4), 0.25)
    return [
        ("sentences", lambda lm: encode_words(lm.tokenizer, "a cat sat")),
        ("sentences[1]", lambda lm: encode_words(lm.tokenizer, [["a", "cat"], "a cat sat"])),
        ("words", lambda lm: position_labels("a cat", lead=1, trail=1)),
        ("words", lambda lm: lm.position_labels(type("Example", (), {"words": "a cat", "lead": 1, "trail": 1}))),
        ("words", lambda lm: token_maps(lm, "a cat sat", methods=["attention"])),
        ("words", lambda lm: predicted_heads(attn, text, layer=0, head=0)),
        ("words", lambda lm: attention_lines(attn[0, 0], text)),
        ("words", lambda lm: token_table(["a", "cat"], [1, 2], text)),
        ("words", lambda lm: first_mean_table(attn, attn, text, layer=0, head=0, word=1)),
    ]


@pytest.mark.parametrize("k", range(len(_refusers())))
def test_a_sentence_as_one_string_is_refused_naming_the_argument(k, tiny_lm):
    """A string is iterable: read as a list of words, each character became a word. Refused, in one line."""
    name, call = _refusers()[k]
    with pytest.raises(TypeError) as err:
        call(tiny_lm)
    message = str(err.value)
    assert message.startswith(f"{name}: expected a list of ") and "got a str; split it first: " in message
    assert "\n" not in message and message.endswith(".split()" if name != "sentences" else ".split()]")


def test_the_fix_shown_is_the_users_own_text_when_short():
    from helpers.core.encoding import check_words

    with pytest.raises(TypeError, match=r"^words: expected a list of words, got a str; split it first: "
                                        r"'The cat sat'\.split\(\)$"):
        check_words("The cat sat")
    with pytest.raises(TypeError, match=r"split it first: 'a b'\.split\(\)$"):
        check_words("cat " * 50)
    with pytest.raises(TypeError, match=r"^sentences: expected a list of sentences, each a list of words, got a "
                                        r"bytes; split it first: \['a b'\.split\(\)\]$"):
        check_words(b"a cat", "sentences", sentences=True)
    check_words(["The", "cat"])
    check_words(("The", "cat"))
