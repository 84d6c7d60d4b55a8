"""Extraction on a tiny random BERT: shapes, row sums, batching equals one-by-one, word level."""
import numpy as np
import torch

from helpers.core.encoding import encode_words
from helpers.core.extract import bucket, forward_attentions, iter_attention, model_inputs
from tests.references import word_level_reference
from test_norms import fast_path_terms
from tolerances import default_float64, float64_passes, in_float64, round_off

SENTS = [["the", "cat", "sat"], ["a", "dog", "sat", "on", "the", "mat", "."], ["the", "unaffable", "cat"],
         ["a", "cat"], ["the", "biggest", "dog", "is", "big", "."]]


def test_token_maps_shape_and_rows(tiny_lm):
    batch = encode_words(tiny_lm.tokenizer, SENTS)
    seen = {}
    for ex, attn in iter_attention(tiny_lm, batch, level="token", batch_size=2):
        assert attn.shape == (2, 4, len(ex), len(ex))
        # tolerance: float32 softmax rows: a sum of n weights of at most 1
        np.testing.assert_allclose(attn.sum(-1), 1.0, rtol=0, atol=round_off(1.0, len(ex)))
        seen[ex.index] = attn
    assert sorted(seen) == list(range(len(SENTS)))


def test_padding_and_batching_do_not_change_maps(tiny_lm):
    lm = in_float64(tiny_lm)  # two float32 passes differ by what the layers make of their round-off: no bound
    batch = encode_words(lm.tokenizer, SENTS)
    batched = {ex.index: a for ex, a in iter_attention(lm, batch, level="token", batch_size=8, dtype=np.float64)}
    for ex in batch.examples:
        alone = forward_attentions(lm, [ex])[0].numpy()
        # tolerance: two float64 passes; batching pads other inputs, which reorders the sums
        np.testing.assert_allclose(batched[ex.index], alone, rtol=0, atol=float64_passes(alone))


def test_word_level_matches_reference_on_model_maps(tiny_lm):
    batch = encode_words(tiny_lm.tokenizer, SENTS)
    # the token maps of the same passes (the same batches) as the word maps below: the same float32 numbers
    tokens = {ex.index: a for ex, a in iter_attention(tiny_lm, batch, level="token", batch_size=3)}
    for mode in ("mean", "first"):
        for ex, words in iter_attention(tiny_lm, batch, level="word", word_mode=mode, batch_size=3):
            assert words.shape == (2, 4, ex.n_words + 2, ex.n_words + 2)
            reference = word_level_reference(tokens[ex.index], ex.word_of_token, mode=mode)
            # tolerance: the float32 conversion R A S (two products of at most n tokens, non-negative) against float64
            np.testing.assert_allclose(words, reference, rtol=0, atol=round_off(reference, 2 * len(ex)))
            # tolerance: float32 softmax rows of n weights (see above), then the conversion
            np.testing.assert_allclose(words.sum(-1), 1.0, rtol=0, atol=round_off(1.0, 3 * len(ex)))


def test_token_types_are_zero_and_buckets_sorted(tiny_lm):
    batch = encode_words(tiny_lm.tokenizer, SENTS)
    inputs = model_inputs(tiny_lm, batch.examples)
    assert torch.all(inputs["token_type_ids"] == 0)
    groups = bucket(batch.examples, batch_size=2)
    lengths = [len(e) for g in groups for e in g]
    assert lengths == sorted(lengths) and [len(g) for g in groups] == [2, 2, 1]


def test_forward_parts_cut_a_bucket_by_attention_bytes(tiny_lm, monkeypatch):
    import helpers.core.extract as extract

    batch = encode_words(tiny_lm.tokenizer, SENTS)
    group = bucket(batch.examples, batch_size=8)[0]  # all five, sorted by length
    longest = max(len(e) for e in group)
    per_example = tiny_lm.n_layers * tiny_lm.n_heads * longest * longest * 4  # float32 [layer, head, n, n]
    assert extract.forward_parts(tiny_lm, group) == [group]  # the default budget: one pass
    monkeypatch.setattr(extract, "FORWARD_ATTENTION_BYTES", 2 * per_example + 1)
    parts = extract.forward_parts(tiny_lm, group)
    assert [len(p) for p in parts] == [2, 2, 1] and [e for p in parts for e in p] == list(group)
    monkeypatch.setattr(extract, "FORWARD_ATTENTION_BYTES", 1)  # below one example: one example per pass
    assert [len(p) for p in extract.forward_parts(tiny_lm, group)] == [1] * 5


def test_cut_forward_passes_give_the_same_maps(tiny_lm, monkeypatch):
    """A bucket cut into one-example passes (what a 12 x 12 model at 512 tokens gets) gives every map,
    token and word level, weights and norms, as the uncut pass does."""
    import helpers.core.extract as extract
    import helpers.core.map_batches as map_batches
    import helpers.core.norm_maps as norm_maps
    from helpers.core.map_batches import iter_norm_maps
    from tests.references import iter_weights_and_norms

    lm = in_float64(tiny_lm)  # two float32 passes differ by what the layers make of their round-off: no bound
    batch = encode_words(lm.tokenizer, SENTS)

    def run():
        out = {"token": {ex.index: a for ex, a in iter_attention(lm, batch, level="token", batch_size=8)}}
        with default_float64():  # the word conversion's matrices in float64, as the maps they multiply
            out["word"] = {ex.index: a for ex, a in iter_attention(lm, batch, level="word", batch_size=8)}
        out["norms"] = {ex.index: a for ex, a in iter_norm_maps(lm, batch, level="word", batch_size=8)}
        out["both"] = {ex.index: np.stack([a, n]) for ex, a, n in iter_weights_and_norms(lm, batch, batch_size=8)}
        return out

    passes = []  # the batch size of every forward pass

    def counted(module, name):
        original = getattr(module, name)

        def wrapper(lm, examples):
            passes.append(len(examples))
            return original(lm, examples)
        monkeypatch.setattr(module, name, wrapper)

    counted(extract, "forward_attentions")
    counted(norm_maps, "forward_weights_and_norms")  # the reference's passes
    counted(map_batches, "forward_weights_and_norms")  # iter_norm_maps'
    whole = run()
    assert passes == [len(SENTS)] * 4  # one pass per level and kind
    passes.clear()
    monkeypatch.setattr(extract, "FORWARD_ATTENTION_BYTES", 1)
    cut = run()
    assert passes == [1] * (4 * len(SENTS))
    # tolerance: float64 weights, each side rounded once to the float32 of the maps (1 term); the norms' own float32
    # arithmetic (test_norms.fast_path_terms), in other orders for other batch shapes, then the word conversion
    n = max(len(ex) for ex in batch.examples)
    terms = {"token": 1, "word": 1, "norms": fast_path_terms(lm) + 2 * n, "both": fast_path_terms(lm)}
    for kind in whole:
        assert sorted(cut[kind]) == list(range(len(SENTS)))
        for i, maps in whole[kind].items():
            np.testing.assert_allclose(cut[kind][i], maps, rtol=0, atol=round_off(maps, terms[kind]))
