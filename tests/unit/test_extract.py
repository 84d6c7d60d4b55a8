"""Extraction on a tiny random BERT: shapes, row sums, batching equals one-by-one, word level."""
import numpy as np
import torch

from helpers.core.encoding import encode_words
from helpers.core.extract import bucket, forward_attentions, iter_attention, model_inputs
from helpers.core.wordlevel import word_level_reference

SENTS = [["the", "cat", "sat"], ["a", "dog", "sat", "on", "the", "mat", "."], ["the", "unaffable", "cat"],
         ["a", "cat"], ["the", "biggest", "dog", "is", "big", "."]]


def test_token_maps_shape_and_rows(tiny_lm):
    batch = encode_words(tiny_lm.tokenizer, SENTS)
    seen = {}
    for ex, attn in iter_attention(tiny_lm, batch, level="token", batch_size=2):
        assert attn.shape == (2, 4, len(ex), len(ex))
        # tolerance: float32 softmax rows sum to 1 within a few ulps times the row length
        np.testing.assert_allclose(attn.sum(-1), 1.0, atol=1e-5)
        seen[ex.index] = attn
    assert sorted(seen) == list(range(len(SENTS)))


def test_padding_and_batching_do_not_change_maps(tiny_lm):
    batch = encode_words(tiny_lm.tokenizer, SENTS)
    batched = {ex.index: a for ex, a in iter_attention(tiny_lm, batch, level="token", batch_size=8)}
    for ex in batch.examples:
        alone = forward_attentions(tiny_lm, [ex])[0].numpy()
        # tolerance: float32: batching pads other inputs, which reorders the softmax sums
        np.testing.assert_allclose(batched[ex.index], alone, atol=1e-5)


def test_word_level_matches_reference_on_model_maps(tiny_lm):
    batch = encode_words(tiny_lm.tokenizer, SENTS)
    tokens = {ex.index: a for ex, a in iter_attention(tiny_lm, batch, level="token")}
    for mode in ("mean", "first"):
        for ex, words in iter_attention(tiny_lm, batch, level="word", word_mode=mode, batch_size=3):
            assert words.shape == (2, 4, ex.n_words + 2, ex.n_words + 2)
            np.testing.assert_allclose(words, word_level_reference(tokens[ex.index], ex.word_of_token, mode=mode),
                                       atol=1e-5)  # float32 model maps against the float64 reference conversion
            np.testing.assert_allclose(words.sum(-1), 1.0, atol=1e-5)  # float32 rows, as above


def test_token_types_are_zero_and_buckets_sorted(tiny_lm):
    batch = encode_words(tiny_lm.tokenizer, SENTS)
    inputs = model_inputs(tiny_lm, batch.examples)
    assert torch.all(inputs["token_type_ids"] == 0)
    groups = bucket(batch.examples, batch_size=2)
    lengths = [len(e) for g in groups for e in g]
    assert lengths == sorted(lengths) and [len(g) for g in groups] == [2, 2, 1]
