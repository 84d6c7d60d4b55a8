"""Word-level conversion against a slow loop reference, and its invariants."""
import numpy as np
import pytest
import torch

from helpers.core.wordlevel import (
    batched_matrices,
    conversion_matrices,
    word_level,
    word_level_batch,
)
from tests.references import word_level_reference
from tolerances import round_off


def random_maps(rng, n_layers, n_heads, n_tokens):
    """Row-stochastic random maps [layer, head, query, key]."""
    return rng.dirichlet(np.ones(n_tokens), size=(n_layers, n_heads, n_tokens))


def random_alignment(rng, n_words):
    """[CLS]=0, words 1..n split into 1-3 tokens each, [SEP]=n+1."""
    parts = [0] + [w for w in range(1, n_words + 1) for _ in range(rng.integers(1, 4))] + [n_words + 1]
    return np.array(parts)


@pytest.mark.parametrize("mode", ["mean", "first"])
@pytest.mark.parametrize("seed", range(5))
def test_matches_slow_reference(mode, seed):
    rng = np.random.default_rng(seed)
    align = random_alignment(rng, n_words=int(rng.integers(1, 7)))
    attn = random_maps(rng, 2, 3, len(align))
    fast = word_level(attn, align, mode=mode)
    slow = word_level_reference(attn, align, mode=mode)
    n = len(align)
    # tolerance: float32 R A S against the float64 loop: the cast of A, then two products of at most n tokens
    # (non-negative terms: no cancellation)
    np.testing.assert_allclose(fast, slow, rtol=0, atol=round_off(slow, 2 * n + 1))
    # as above, then the sum of a row's words
    np.testing.assert_allclose(fast.sum(-1), 1.0, rtol=0, atol=round_off(1.0, 3 * n + 1))


def test_unsplit_words_leave_map_unchanged():
    rng = np.random.default_rng(1)
    attn = random_maps(rng, 1, 2, 5)
    # tolerance: identity alignment: the cast of A to float32, then products with 1 and sums of exact zeros
    np.testing.assert_allclose(word_level(attn, np.arange(5)), attn, rtol=0, atol=round_off(attn))


def test_sum_to_and_mean_from_split_word():
    # tokens: [CLS] un ##aff ##able cat [SEP]; word 1 = tokens 1..3
    attn = np.zeros((1, 1, 6, 6))
    attn[0, 0, :, 2] = 0.5   # every token gives half its attention to "##aff"
    attn[0, 0, :, 5] = 0.5
    attn[0, 0, 1] = [0, 0, 0, 0, 1, 0]  # "un" attends fully to "cat"
    out = word_level(attn, np.array([0, 1, 1, 1, 2, 3]))
    # tolerance: float32 thirds (R's 1/3) in sums of 6 tokens, against float64
    # from the split word: mean over its 3 tokens of (to word1, to cat, to [SEP])
    np.testing.assert_allclose(out[0, 0, 1], [0, (0 + 0.5 + 0.5) / 3, 1 / 3, 1 / 3], rtol=0, atol=round_off(1.0, 2 * 6))
    # to the split word: sum over its tokens' columns
    np.testing.assert_array_equal(out[0, 0, 2], [0, 0.5, 0, 0.5])  # exact: sums of halves and zeros
    first = word_level(attn, np.array([0, 1, 1, 1, 2, 3]), mode="first")
    np.testing.assert_array_equal(first[0, 0, 1], [0, 0, 1, 0])  # exact: one token's row, summed over columns


def test_batched_torch_matches_per_example():
    rng = np.random.default_rng(7)
    aligns = [random_alignment(rng, k) for k in (2, 5, 3)]
    T = max(len(a) for a in aligns)
    attn = np.zeros((3, 2, 2, T, T))
    for b, a in enumerate(aligns):
        attn[b, :, :, : len(a), : len(a)] = random_maps(rng, 2, 2, len(a))
        attn[b, :, :, len(a):, :] = 0.3  # padding-query garbage must not leak
    R, S = batched_matrices(aligns, T)
    out = word_level_batch(torch.tensor(attn, dtype=torch.float32), R, S).numpy()
    for b, a in enumerate(aligns):
        n = a.max() + 1
        reference = word_level_reference(attn[b, :, :, : len(a), : len(a)], a)
        # tolerance: float32 batched conversion (the cast of A, two products of at most T tokens) against float64
        np.testing.assert_allclose(out[b, :, :, :n, :n], reference, rtol=0, atol=round_off(reference, 2 * T + 1))


def test_bad_mode_is_named():
    with pytest.raises(ValueError, match="word mode 'max'"):
        conversion_matrices(np.array([0, 1, 2]), mode="max")
