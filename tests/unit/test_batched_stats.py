"""The segment pass's statistics on whole padded batches (issue 51: the maps never leave the device).

Each batched statistic (:func:`helpers.surface.stats.batch_statistics`, :func:`helpers.cluster.stats.batch_js`,
:func:`helpers.norms.stats.batch_kind_shares` and :func:`~helpers.norms.stats.batch_spearman`) is checked against a
slow reference of each example (:mod:`tests.references`, the loops of ``test_surface`` and ``test_causal``) and
against the same example in a batch of its own: on small random maps in right-padded batches of unequal lengths,
encoder and causal maps, with padding rows and columns full of NaN (a value that leaked into any sum would show).
The batched code is the code an accelerator runs; here it runs on the CPU.
"""
from __future__ import annotations

import pickle

import numpy as np
import pytest
import torch

from helpers.cluster.stats import JSAccumulator, batch_js
from helpers.core.batching import CPU_STAT_BYTES, DEVICE_STAT_BYTES, stat_chunks
from helpers.core.extract import MapBatch
from helpers.norms.stats import batch_kind_shares, batch_spearman
from helpers.segment_pass import SegmentAccumulator
from helpers.surface.stats import batch_statistics
from test_causal import reference_causal
from test_surface import reference as surface_reference
from tests.references import Example, js_reference, kind_shares_reference, map_batch, spearman_reference
from tests.tolerances import EPS32, EPS64, round_off

LAYERS, HEADS = 2, 3
LENGTHS = [7, 5, 7, 4, 6]


def _batch(seed: int, *, causal: bool, lengths=LENGTHS, pad=np.nan):
    """``(weights, norms, masks)``: a padded batch ``[batch, layer, head, T, T]`` of row-stochastic float32 maps (lower
    triangular when ``causal``), norm-like maps (weights times positive key norms, some rows all zero), padding ``pad``;
    and one surface/kind mask set per example."""
    rng = np.random.default_rng(seed)
    T = max(lengths)
    weights = np.full((len(lengths), LAYERS, HEADS, T, T), pad, np.float32)
    norms = weights.copy()
    masks = []
    for b, n in enumerate(lengths):
        x = rng.random((LAYERS, HEADS, n, n))
        x[rng.random(x.shape) < 0.2] = 0.0
        x[..., 0] += 1e-3
        if causal:
            x = np.tril(x)
        w = (x / x.sum(-1, keepdims=True)).astype(np.float32)
        weights[b, :, :, :n, :n] = w
        nm = (w * rng.random((LAYERS, HEADS, 1, n)) * 3).astype(np.float32)
        nm[0, 0, 1] = 0.0  # a row of zero norms adds 0 to every kind
        norms[b, :, :, :n, :n] = nm
        cls = np.arange(n) == 0
        sep = np.zeros(n, bool) if causal else np.isin(np.arange(n), [n // 2, n - 1])
        punct = (rng.random(n) < 0.3) & ~cls & ~sep
        surface = {"cls": cls, "sep": sep, "punct": punct, **({"causal": np.True_} if causal else {})}
        kinds = {"cls": cls, "sep": sep, "punct": punct, "other": ~(cls | sep | punct),
                 **({"causal": np.True_} if causal else {})}
        masks.append((surface, kinds))
    return torch.from_numpy(weights), torch.from_numpy(norms), masks


def _close(actual, expected, terms: int, eps: float = EPS64) -> None:
    """Two evaluations of one statistic in other orders: ``terms`` roundings in precision ``eps``."""
    np.testing.assert_allclose(actual, expected, rtol=0, atol=round_off(np.nan_to_num(expected), terms, eps=eps) + 1e-300)


def _alone(maps, b: int, n: int) -> torch.Tensor:
    """Example ``b`` of a padded batch in a batch of its own, ``[1, layer, head, n, n]``."""
    return maps[b : b + 1, :, :, :n, :n].clone()


@pytest.mark.parametrize("causal", [False, True])
def test_surface_statistics_of_a_batch_are_each_segments(causal):
    weights, _, masks = _batch(0, causal=causal)
    values = batch_statistics(weights, LENGTHS, [m[0] for m in masks])
    for b, n in enumerate(LENGTHS):
        alone = batch_statistics(_alone(weights, b, n), [n], [masks[b][0]])
        maps = weights[b, :, :, :n, :n].numpy().astype(np.float64)
        reference = reference_causal(maps) if causal else surface_reference(maps, masks[b][0])
        for name, value in alone.items():
            assert np.array_equal(np.isnan(values[name][b]), np.isnan(value[0])), name
            _close(values[name][b], value[0], 4 * n * n)  # the same segment with others of its length, or alone
            if name in reference:
                _close(values[name][b], reference[name], 4 * n * n)


def test_surface_statistics_of_float64_maps_are_those_of_the_same_float32_values():
    weights, _, masks = _batch(1, causal=False)
    single = batch_statistics(weights, LENGTHS, [m[0] for m in masks])
    double = batch_statistics(weights.double(), LENGTHS, [m[0] for m in masks])
    for name in single:
        assert np.array_equal(single[name], double[name], equal_nan=True), name


@pytest.mark.parametrize("causal", [False, True])
def test_js_distances_of_a_batch_are_each_segments_bit_for_bit(causal):
    weights, _, _ = _batch(2, causal=causal)
    D = batch_js(weights, LENGTHS)
    for b, n in enumerate(LENGTHS):
        assert torch.equal(D[b], batch_js(_alone(weights, b, n), [n])[0])  # on the CPU one segment at a time
        # tolerance: float32 sums of n * n terms x log x, each sum at most n log n in size, against float64 scipy
        np.testing.assert_allclose(D[b].numpy(), js_reference(weights[b, :, :, :n, :n].numpy()), rtol=0,
                                   atol=round_off(n * np.log(n), n * n, eps=EPS32))


@pytest.mark.parametrize("causal", [False, True])
def test_norm_shares_and_spearman_of_a_batch_are_each_segments(causal):
    weights, norms, masks = _batch(3, causal=causal)
    kinds = [m[1] for m in masks]
    for maps in (weights, norms):
        shares = batch_kind_shares(maps, LENGTHS, kinds)
        for b, n in enumerate(LENGTHS):
            _close(shares[b], kind_shares_reference(maps[b, :, :, :n, :n].numpy(), kinds[b]), 4 * n)
    rho = batch_spearman(weights, norms, LENGTHS)
    for b, n in enumerate(LENGTHS):
        expected = spearman_reference(weights[b, :, :, :n, :n].numpy(), norms[b, :, :, :n, :n].numpy())
        _close(rho[b], expected, 4 * n * n)


def test_padding_never_leaks():
    """Padding of NaN and padding of zeros give the same values, bit for bit."""
    nan_w, nan_n, masks = _batch(4, causal=False, pad=np.nan)
    zero_w, zero_n, _ = _batch(4, causal=False, pad=0.0)
    surface = [m[0] for m in masks]
    kinds = [m[1] for m in masks]
    a = batch_statistics(nan_w, LENGTHS, surface)
    b = batch_statistics(zero_w, LENGTHS, surface)
    assert all(np.array_equal(a[k], b[k]) for k in a) and not any(np.isnan(v).any() for v in a.values())
    assert torch.equal(batch_js(nan_w, LENGTHS), batch_js(zero_w, LENGTHS))
    assert np.array_equal(batch_kind_shares(nan_n, LENGTHS, kinds), batch_kind_shares(zero_n, LENGTHS, kinds))
    assert np.array_equal(batch_spearman(nan_w, nan_n, LENGTHS), batch_spearman(zero_w, zero_n, LENGTHS),
                          equal_nan=True)


def _stream(weights, norms, lengths, sizes):
    """The batches of a pass (``sizes`` examples each), as :func:`helpers.core.map_batches.iter_map_batches` yields them."""
    start = 0
    for size in sizes:
        part = slice(start, start + size)
        examples = [Example(start + k, n) for k, n in enumerate(lengths[part])]
        T = max(lengths[part])
        yield MapBatch(examples, weights[part, :, :, :T, :T], None if norms is None else norms[part, :, :, :T, :T])
        start += size


@pytest.mark.parametrize("causal", [False, True])
def test_the_segment_accumulator_fed_batches_equals_it_fed_examples(causal):
    """The pass's accumulator (surface, JS, norms) fed two batches equals it fed the same segments one by one: the
    per-head sums are added in the same order; JS distances exactly, the rest to float64 round-off."""
    weights, norms, masks = _batch(5, causal=causal)
    parts = ("surface", "distances", "norms")
    masks = [({**surface, "segment": k}, kinds) for k, (surface, kinds) in enumerate(masks)]
    batched = SegmentAccumulator(LAYERS * HEADS, parts)
    for mb in _stream(weights, norms, LENGTHS, [3, 2]):
        batched.update(mb, [masks[ex.index] for ex in mb.examples])
    single = SegmentAccumulator(LAYERS * HEADS, parts)
    for b, n in enumerate(LENGTHS):
        single.update(map_batch([weights[b, :, :, :n, :n].numpy()], [norms[b, :, :, :n, :n].numpy()], indices=[b]),
                      [masks[b]])
    batched, single = batched.result(), single.result()
    assert np.array_equal(batched["distances"].result(), single["distances"].result())
    assert batched["distances"].tokens == single["distances"].tokens == sum(LENGTHS)
    s_new, s_old = batched["surface"].result(), single["surface"].result()
    assert s_new.n_segments == s_old.n_segments and s_new.uniform_entropy == s_old.uniform_entropy
    assert s_new.undefined == s_old.undefined
    for name, value in s_old.per_head.items():
        _close(s_new.per_head[name], value, 4 * max(LENGTHS) ** 2)
        _close(s_new.per_segment[name], s_old.per_segment[name], 4 * max(LENGTHS) ** 2)  # each segment's, in order
    assert np.array_equal(s_new.segment_uniform, s_old.segment_uniform)
    n_new, n_old = batched["norms"].result(), single["norms"].result()
    _close(n_new.weights, n_old.weights, 4 * max(LENGTHS))
    _close(n_new.norms, n_old.norms, 4 * max(LENGTHS))
    _close(n_new.spearman, n_old.spearman, 4 * max(LENGTHS) ** 2)
    assert n_new.causal == n_old.causal == causal


def test_js_sums_travel_on_the_host():
    weights, _, _ = _batch(7, causal=False)
    acc = JSAccumulator(LAYERS * HEADS)
    acc.update(next(_stream(weights, None, LENGTHS, [5])))
    copy = pickle.loads(pickle.dumps(acc))
    assert isinstance(copy.total, np.ndarray) and copy.total.dtype == np.float64
    assert np.array_equal(copy.total, acc.result())


def test_batches_are_cut_by_bytes_not_counts():
    per = 10 * 2**20
    cpu = stat_chunks(32, per, "cpu")
    assert [len(range(32)[s]) for s in cpu][0] == CPU_STAT_BYTES // per
    assert sum(len(range(32)[s]) for s in cpu) == 32
    assert stat_chunks(32, per, "cuda:0") == [slice(0, 32)] and DEVICE_STAT_BYTES >= 32 * per
    assert stat_chunks(3, 10 * CPU_STAT_BYTES, "cpu") == [slice(0, 1), slice(1, 2), slice(2, 3)]  # at least one


def test_a_nonsegment_is_refused_in_a_batch():
    weights, _, masks = _batch(8, causal=False)
    surface = [dict(m[0]) for m in masks]
    surface[2]["sep"] = np.zeros(LENGTHS[2], bool)
    with pytest.raises(ValueError, match="no \\[SEP\\]"):
        batch_statistics(weights, LENGTHS, surface)
    mixed = [m[0] for m in masks]
    mixed[1] = {**mixed[1], "causal": np.True_}
    with pytest.raises(ValueError, match="causal and a bidirectional"):
        batch_statistics(weights, LENGTHS, mixed)


# ------------------------------------------------------------------------------ §4.2: the heads' dependency scores


@pytest.mark.parametrize("causal, extra", [(False, 2), (True, 1), (True, 0)])
def test_head_predictions_of_a_batch_are_each_sentences(causal, extra):
    """Maps of small integers (many ties: the earliest word must win), padding of NaN, a one-word sentence."""
    from helpers.syntax.stats import predict_heads
    from tests.references import predict_heads_reference

    rng = np.random.default_rng(9)
    words = [5, 1, 3, 8, 2]
    P = max(words) + extra
    maps = np.full((len(words), LAYERS, HEADS, P, P), np.nan, np.float32)
    for b, n in enumerate(words):
        maps[b, :, :, : n + extra, : n + extra] = rng.integers(0, 4, (LAYERS, HEADS, n + extra, n + extra))
    pred = predict_heads(torch.from_numpy(maps), [n + extra for n in words], words, causal=causal).numpy()
    for b, n in enumerate(words):
        expected = predict_heads_reference(maps[b, :, :, : n + extra, : n + extra], n, causal=causal)
        if n == 1 and not causal:  # a lone word has no candidate (its head is the root: it is never scored)
            continue
        assert np.array_equal(pred[b, ..., :n], expected)


def test_head_scores_of_batches_equal_those_of_sentences():
    """:class:`HeadScorer` fed batches cut by bytes (here of two or three maps, in any order) against one sentence a
    batch in index order, with the possessive convention: the same scores, exactly; :class:`HeadScorers` gives each
    convention's from the same predictions."""
    from helpers.data.conllu_io import Sentence
    from helpers.syntax.stats import HeadScorer, HeadScorers, map_batches

    rng = np.random.default_rng(10)
    items, sentences = [], []
    for index, n in enumerate([4, 6, 3, 6, 5]):
        heads = [0] + [int(rng.integers(1, n + 1)) for _ in range(n - 1)]
        deprels = ["root"] + [str(rng.choice(["det", "nmod:poss", "obj"])) for _ in range(n - 1)]
        words = [str(rng.choice(["the", "'s", "cat"])) for _ in range(n)]
        sentences.append(Sentence(tuple(words), tuple(heads), tuple(deprels), ("X",) * n, ("X",) * n,
                                  sent_id=f"s{index}"))
        attn = rng.integers(0, 5, (LAYERS, HEADS, n + 2, n + 2)).astype(np.float32)
        items.append((Example(index, n + 2), attn))

    def fed(acc, batches):
        for batch in batches:
            acc.update(batch, [(sentences[ex.index],) for ex in batch.examples])
        return acc

    one = fed(HeadScorer(possessive="nmod:poss"), map_batches(items, budget=1)).result()
    budget = 3 * LAYERS * HEADS * 8 * 8 * 4
    batches = list(map_batches(items[::-1], budget=budget))
    assert sum(map(len, batches)) == 5 and max(map(len, batches)) < 5
    plain, poss = fed(HeadScorers((None, "nmod:poss")), batches).result()
    for a, b in ((one, poss), (fed(HeadScorer(), map_batches(items, budget=1)).result(), plain)):
        assert a.relations == b.relations
        for name in ("word_relation", "word_sentence", "word_correct", "offset_correct"):
            assert np.array_equal(getattr(a, name), getattr(b, name)), name


# ------------------------------------------------------------------------------ §4.3: the heads' coreference scores


@pytest.mark.parametrize("causal, extra", [(False, 2), (True, 1), (True, 0)])
@pytest.mark.parametrize("candidates", ["mentions", "words"])
def test_coreference_predictions_of_a_batch_are_each_windows(causal, extra, candidates):
    """Windows of unequal lengths padded with NaN, maps of small integers (ties), a window without queries and a
    query without candidates (the first word: a miss)."""
    from helpers.coref.stats import Query, head_predictions
    from tests.references import antecedent_reference

    rng = np.random.default_rng(11)
    words = [6, 3, 9]
    P = max(words) + extra
    maps = np.full((len(words), LAYERS, HEADS, P, P), np.nan, np.float32)
    queries = []
    for b, n in enumerate(words):
        maps[b, :, :, : n + extra, : n + extra] = rng.integers(0, 3, (LAYERS, HEADS, n + extra, n + extra))
        window = [Query(None, 0, (), frozenset({1}), b)]
        for head in range(1, n):
            cands = sorted(rng.choice(head, size=min(head, 2), replace=False).tolist())
            window.append(Query(None, head, tuple(cands), frozenset(cands[-1:]), b))
        queries.append([] if b == 1 else window)
    got = head_predictions(torch.from_numpy(maps), [n + extra for n in words], words, queries, candidates,
                           causal=causal)
    for b, n in enumerate(words):
        expected = antecedent_reference(maps[b, :, :, : n + extra, : n + extra], queries[b], n, candidates,
                                        causal=causal)
        assert got[b].shape == expected.shape and np.array_equal(got[b], expected)
