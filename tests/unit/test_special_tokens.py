"""Special tokens are found by role (the model's own CLS/SEP or BOS/EOS), not by the strings "[CLS]"/"[SEP]"."""
import pytest

from helpers import load_model
from helpers.core.encoding import encode_words, special_token_ids
from helpers.surface.stats import token_masks


def test_wordpiece_roles(tiny_lm):
    ids = special_token_ids(tiny_lm.tokenizer)
    assert tiny_lm.tokenizer.convert_ids_to_tokens([ids["cls"], ids["sep"]]) == ["[CLS]", "[SEP]"]
    ex = encode_words(tiny_lm.tokenizer, [["the", "cat", "sat"]]).examples[0]
    assert ex.input_ids[0] == ids["cls"] and ex.input_ids[-1] == ids["sep"]
    masks = token_masks(tiny_lm.tokenizer, ex.input_ids)
    assert masks["cls"].tolist() == [True, False, False, False, False]
    assert masks["sep"].tolist() == [False, False, False, False, True]


def test_byte_level_bpe_roles(tiny_bpe_model_dir):
    lm = load_model(str(tiny_bpe_model_dir))
    ids = special_token_ids(lm.tokenizer)
    assert lm.tokenizer.convert_ids_to_tokens([ids["cls"], ids["sep"]]) == ["<s>", "</s>"]
    ex = encode_words(lm.tokenizer, [["the", "dog", "sat", "."]]).examples[0]
    masks = token_masks(lm.tokenizer, ex.input_ids)
    tokens = lm.tokenizer.convert_ids_to_tokens(ex.input_ids.tolist())
    assert [t for t, m in zip(tokens, masks["cls"]) if m] == ["<s>"]
    assert [t for t, m in zip(tokens, masks["sep"]) if m] == ["</s>"]
    assert not any(t in ("[CLS]", "[SEP]") for t in tokens)
    assert masks["punct"].sum() == 1  # "Ġ." counts as a period


def test_bos_eos_fallback_and_clear_error():
    class NoRoles:  # a tokenizer with BOS/EOS only
        cls_token_id = sep_token_id = None
        bos_token_id, eos_token_id = 7, 9

    assert special_token_ids(NoRoles()) == {"cls": 7, "sep": 9}
    NoRoles.eos_token_id = None
    with pytest.raises(ValueError, match="NoRoles"):
        special_token_ids(NoRoles())
