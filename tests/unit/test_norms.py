"""Norm-based maps ||alpha_ij f(x_j)|| against a slow reference written from the formula, the decomposition
of the attention output they rest on, shares, Spearman correlations, the cache and the command."""
from __future__ import annotations

import copy
import json

import numpy as np
import pytest
import torch

from helpers.core.encoding import encode_ids, encode_words
from helpers.core.internals import attention_parts, capture, output_weight
from helpers.norms.stats import KINDS, NormAccumulator, NormStats, batch_kind_shares, batch_spearman, kind_masks
from helpers.core.map_batches import iter_norm_maps
from helpers.core.norm_maps import forward_weights_and_norms
from helpers.surface.stats import batch_statistics, token_masks

from test_formula import tiny
from tests.references import map_batch, norm_maps_reference, word_level_reference
from tolerances import EPS16, EPS64, decimals, in_float64, round_off


def kind_shares(maps, masks):
    """``[kind, layer, head]`` of one map: :func:`batch_kind_shares` of a batch of one."""
    return batch_kind_shares(map_batch([np.asarray(maps)]).weights, [np.shape(maps)[-1]], [masks])[0]


def spearman_per_head(a, b):
    """``[layer, head]`` of two maps of one segment: :func:`batch_spearman` of a batch of one."""
    batch = map_batch([np.asarray(a)], [np.asarray(b)])
    return batch_spearman(batch.weights, batch.norms, batch.lengths)[0]


def add(acc, attn, norms, masks, index=0):
    """Feed one segment's weight and norm maps to ``acc`` as the route feeds a batch of one."""
    acc.update(map_batch([attn], [norms], indices=[index]), [(masks,)])


def fast_path_terms(lm) -> int:
    """The longest sums of the float32 fast path: ``W_O^h (W_O^h)^T`` over the hidden size, then the quadratic
    form ``v G v`` over d * d."""
    d = lm.model.config.hidden_size // lm.n_heads
    return lm.model.config.hidden_size + d * d


@pytest.mark.parametrize("kind", ["bert", "roberta", "mpnet", "distilbert"])
def test_norm_maps_equal_slow_reference(kind):
    """In a float64 model, so that the batched and the single pass differ by float64 round-off only: what is
    left is the fast path's own float32 arithmetic (it casts the states to float32), against float64 loops."""
    lm = in_float64(tiny(kind))
    ids = [np.array([0, 5, 9, 12, 7, 30, 5, 2]), np.array([0, 8, 6, 2, 11, 2])]  # two lengths: padding is exercised
    batch = encode_ids(ids)
    for example, norms in iter_norm_maps(lm, batch, batch_size=2):
        reference = norm_maps_reference(lm, example.input_ids)
        assert norms.shape == reference.shape == (lm.n_layers, lm.n_heads, len(example), len(example))
        # tolerance: float32 sums of at most fast_path_terms terms, on norms of the size of the reference's
        np.testing.assert_allclose(norms, reference, rtol=0, atol=round_off(reference, fast_path_terms(lm)))
        assert reference.max() > 0.1  # not a comparison of near-zero maps


def test_heads_and_keys_rebuild_the_attention_output():
    """sum_h sum_j alpha_ij f_h(x_j) + b_O is the output projection's output: f_h is the right slice of W_O.
    An identity, checked in a float64 model."""
    lm = in_float64(tiny("bert"))
    ids = torch.tensor([[0, 5, 9, 12, 7, 2]])
    with torch.inference_mode(), capture(lm, ("value", "output")) as seen:
        out = lm.model(input_ids=ids, output_attentions=True)
    for layer in range(lm.n_layers):
        parts = attention_parts(lm.model, layer)
        torch.set_grad_enabled(False)
        v = seen.heads("value", layer)[0]                       # [head, token, d]
        f = torch.einsum("htd,hdo->hto", v, output_weight(parts, lm.n_heads))  # [head, token, hidden]
        rebuilt = torch.einsum("hij,hjo->io", out.attentions[layer][0], f) + parts.output.bias
        torch.set_grad_enabled(True)
        # tolerance: both sides add the same n_tokens * hidden products alpha v W_O in float64, in other orders
        output = seen.raw["output"][layer][0]
        terms = ids.shape[1] * lm.model.config.hidden_size
        torch.testing.assert_close(rebuilt, output, rtol=0, atol=round_off(output, terms, eps=EPS64))


def test_zero_value_vector_gets_norm_share_zero(tiny_lm):
    """A layer whose input at [SEP] is 0 (constant embedding through a bias-free layer norm) and whose value
    bias is 0 gives [SEP] a zero value vector: its norm share is 0 whatever its weight."""
    lm = copy.deepcopy(tiny_lm)
    emb = lm.model.embeddings
    sep = lm.tokenizer.sep_token_id
    with torch.no_grad():
        emb.position_embeddings.weight.zero_()
        emb.token_type_embeddings.weight.zero_()
        emb.word_embeddings.weight[sep] = 1.0    # a constant vector: layer norm makes it 0 ...
        emb.LayerNorm.bias.zero_()               # ... with no bias to add back
        parts = attention_parts(lm.model, 0)
        parts.value.bias.zero_()
        parts.key.bias.fill_(0.5)                # [SEP]'s key is this bias: it gets a sizeable weight
    batch = encode_words(lm.tokenizer, [["the", "cat", "sat", "on", "the", "mat", "."]])
    example = batch.examples[0]
    attn, norms = forward_weights_and_norms(lm, batch.examples)
    masks = kind_masks(lm.tokenizer, example.input_ids)
    weights_share = kind_shares(attn[0, :1].numpy(), masks)[KINDS.index("sep")]
    norms_share = kind_shares(norms[0, :1].numpy(), masks)[KINDS.index("sep")]
    assert (weights_share > 0.01).all()
    assert (norms_share == 0).all()  # exact: [SEP]'s value vector is exactly 0 (layer norm of a constant: x - mean = 0)
    # tolerance: float64 shares of n keys add up to 1 within n roundings
    np.testing.assert_allclose(kind_shares(norms[0, :1].numpy(), masks).sum(0), 1.0, rtol=0,
                               atol=round_off(1.0, len(example), eps=EPS64))


def test_kind_shares_under_weights_equal_surface_statistics():
    rng = np.random.default_rng(0)
    attn = rng.dirichlet(np.ones(7), size=(2, 3, 7))
    ids = np.array([2, 5, 9, 6, 3, 11, 3])
    from types import SimpleNamespace

    vocab = {2: "[CLS]", 3: "[SEP]", 5: ".", 6: ",", 9: "cat", 11: "dog"}
    tok = SimpleNamespace(cls_token_id=2, sep_token_id=3, convert_ids_to_tokens=lambda xs: [vocab[x] for x in xs])
    shares = kind_shares(attn, kind_masks(tok, ids))
    stats = {k: v[0] for k, v in batch_statistics(map_batch([attn]).weights, [7], [token_masks(tok, ids)]).items()}
    for kind in ("cls", "sep", "punct"):
        # tolerance: two float64 means over 7 rows of sums over 7 keys (values at most 1)
        np.testing.assert_allclose(shares[KINDS.index(kind)], stats[kind], rtol=0,
                                   atol=round_off(1.0, 7 + 7, eps=EPS64))
    np.testing.assert_allclose(shares.sum(0), 1.0, rtol=0, atol=round_off(1.0, 7 + 7, eps=EPS64))  # as above


def test_kind_shares_normalise_each_row():
    maps = np.zeros((1, 1, 4, 4))
    maps[0, 0, 0] = [2.0, 2.0, 0.0, 0.0]   # row total 4: half on key 0
    maps[0, 0, 2] = [0.0, 0.0, 4.0, 0.0]   # all on key 2
    # rows 1 and 3 have no norm and add nothing
    masks = {"cls": np.array([True, False, False, False]), "sep": np.array([False, False, True, False]),
             "punct": np.array([False, False, False, True]), "other": np.array([False, True, False, False])}
    shares = kind_shares(maps, masks)[:, 0, 0]
    np.testing.assert_array_equal(shares, [0.125, 0.25, 0.0, 0.125])  # exact: halves and quarters of 4 rows


def test_spearman_matches_scipy_with_ties():
    from scipy.stats import spearmanr

    rng = np.random.default_rng(1)
    a = rng.integers(0, 4, size=(2, 3, 5, 5)).astype(np.float32)  # many ties
    b = a * rng.random((2, 3, 5, 5)) + rng.integers(0, 2, size=(2, 3, 5, 5))
    ours = spearman_per_head(a, b)
    for l in range(2):
        for h in range(3):
            # tolerance: both correlate the same ranks (scipy averages ties the same way) in float64, sums of 25
            assert ours[l, h] == pytest.approx(spearmanr(a[l, h].ravel(), b[l, h].ravel()).statistic, rel=0,
                                               abs=round_off(1.0, 25, eps=EPS64))
    const = spearman_per_head(np.ones((1, 1, 3, 3)), b[:1, :1, :3, :3])
    assert np.isnan(const).all()


def test_average_ranks_equal_scipys_exactly():
    """Both paths of ``average_ranks`` (float32 keys; any other dtype) give scipy's average ranks exactly, with
    ties, runs at a row's ends, negative values, -0.0 beside +0.0 and rows of one value."""
    from scipy.stats import rankdata

    from helpers.norms.stats import average_ranks

    rng = np.random.default_rng(3)
    cases = [rng.dirichlet(np.ones(9), size=6).astype(np.float32),               # weights: no ties
             rng.integers(0, 3, size=(5, 11)).astype(np.float32),                 # many ties
             (rng.integers(-3, 3, size=(4, 7)) * 0.5).astype(np.float32),         # negative values with ties
             np.array([[0.0, -0.0, 1.0, -0.0, -2.5, 1.0, 0.0]], dtype=np.float32),  # -0.0 equals +0.0
             np.full((2, 5), 0.25, dtype=np.float32),                             # one run per row
             np.array([[1, 1, 2, 3, 3], [4, 4, 4, 0, 0]], dtype=np.float32),      # runs at both ends, in every row
             rng.random((3, 200)).astype(np.float32) ** 8,                        # tiny values, as maps have
             rng.dirichlet(np.ones(123), size=12 * 123).astype(np.float32).reshape(12, -1),  # a head's map per row
             np.round(rng.dirichlet(np.ones(50), size=8 * 50), 3).astype(np.float32).reshape(8, -1)]  # ... with ties
    cases += [c.astype(np.float64) for c in cases] + [rng.integers(0, 4, size=(3, 8))]
    for x in cases:
        ours = average_ranks(x)
        assert ours.dtype == np.float64
        np.testing.assert_array_equal(ours, rankdata(x, axis=-1) - 1, err_msg=str(x))
    with_nan = np.array([[0.5, np.nan, 0.1]], dtype=np.float32)  # not finite: the general path, no error
    assert average_ranks(with_nan)[0, [0, 2]].tolist() == [1.0, 0.0]


def test_a_causal_maps_ranks_are_those_of_its_whole_rows_exactly():
    """A decoder's map is ranked by its visible entries (the hidden zeros tied below them): the ranks equal scipy's
    over every entry, with visible zeros tied to the hidden ones and ties among the rest; a map with weight above the
    diagonal, or a negative value, takes the general path."""
    from scipy.stats import rankdata

    from helpers.norms.stats import map_ranks

    rng = np.random.default_rng(5)
    n = 9
    weights = np.tril(rng.dirichlet(np.ones(n), size=(2, 3, n))).astype(np.float32)
    ties = np.tril(rng.integers(0, 3, size=(2, 3, n, n))).astype(np.float32)  # visible zeros and ties
    leaky = weights.copy()
    leaky[1, 2, 0, 4] = 0.5  # one later key weighed
    negative = ties - np.tril(np.ones((n, n), np.float32))  # -1 visible: the hidden zeros are not the lowest
    for maps in (weights, ties, leaky, negative, weights.astype(np.float64)):
        np.testing.assert_array_equal(map_ranks(maps), rankdata(maps.reshape(6, -1), axis=-1) - 1)


def test_accumulator_round_trips_and_json_layout():
    rng = np.random.default_rng(2)
    acc = NormAccumulator()
    masks = {"cls": np.array([1, 0, 0, 0], bool), "sep": np.array([0, 0, 0, 1], bool),
             "punct": np.array([0, 1, 0, 0], bool), "other": np.array([0, 0, 1, 0], bool)}
    for _ in range(3):
        attn = rng.dirichlet(np.ones(4), size=(2, 3, 4))
        add(acc, attn, attn * rng.random(4), masks)
    stats = acc.result()
    again = NormStats.from_cache(json.loads(json.dumps(stats.to_cache())))
    # exact: JSON writes float64 with every digit (repr round-trips)
    np.testing.assert_array_equal(again.norms, stats.norms)
    np.testing.assert_array_equal(again.spearman, stats.spearman)
    payload = stats.to_json()
    # the layout of before the intervals, then the keys they add (the layout only gains keys)
    assert list(payload) == ["segments", "heads", "layers", "bootstrap"] and payload["segments"] == 3
    assert payload["bootstrap"] == {"resampled": "segments", "n": 3, "replicates": 1000, "level": 0.95}
    assert set(payload["heads"]) == {f"{l}-{h}" for l in (1, 2) for h in (1, 2, 3)} and set(payload["layers"]) == {"1", "2"}
    row = payload["heads"]["2-3"]
    assert list(row) == ["weights", "norms", "spearman", "interval"] and set(row["weights"]) == set(KINDS)
    # tolerance: the JSON keeps 6 decimals
    assert row["norms"]["sep"] == pytest.approx(stats.norms[KINDS.index("sep"), 1, 2], rel=0, abs=decimals(6))
    lo, hi = row["interval"]["norms"]["sep"]
    assert lo - decimals(6) <= row["norms"]["sep"] <= hi + decimals(6)  # 3 segments: the mean lies within their range
    layer = payload["layers"]["2"]["interval"]["weights"]["cls"]
    want = stats.segments.layer_share_intervals("weights")[KINDS.index("cls"), 1]
    np.testing.assert_allclose(layer, want, rtol=0, atol=decimals(6))  # as above
    bare = NormStats.from_cache(stats.to_cache()).to_json()  # read back without its segments: the layout of before
    assert list(bare) == ["segments", "heads", "layers"] and list(bare["heads"]["2-3"]) == ["weights", "norms", "spearman"]


def test_word_level_norm_maps_use_the_weight_conversion(tiny_lm):
    batch = encode_words(tiny_lm.tokenizer, [["the", "unaffable", "cat", "sat", "."]])
    example = batch.examples[0]
    ((_, tokens),) = iter_norm_maps(tiny_lm, batch, level="token")
    ((_, words),) = iter_norm_maps(tiny_lm, batch, level="word")  # the same pass: the same float32 token maps
    reference = word_level_reference(tokens, example.word_of_token)
    # tolerance: the float32 conversion R N S, two products of at most n tokens on non-negative maps, against float64
    np.testing.assert_allclose(words, reference, rtol=0, atol=round_off(reference, 2 * len(example)))


def test_norm_maps_are_cached_apart_from_weights(tiny_lm, tmp_path):
    from helpers.pipeline.extraction import extract

    batch = encode_words(tiny_lm.tokenizer, [["the", "cat", "sat", "."], ["a", "dog", "sat", "on", "the", "mat"]])
    weights = extract(tiny_lm, batch, level="word", cache_root=tmp_path, progress=False)
    norms = extract(tiny_lm, batch, level="word", cache_root=tmp_path, progress=False, maps="norms")
    assert weights.directory != norms.directory
    direct = dict((ex.index, m) for ex, m in iter_norm_maps(tiny_lm, batch, level="word"))
    for example, m in norms:
        # tolerance: the store rounds each value once to float16 (the two float32 passes differ by far less)
        np.testing.assert_allclose(m, direct[example.index], rtol=0, atol=round_off(direct[example.index], eps=EPS16))
    again = extract(tiny_lm, batch, level="word", cache_root=tmp_path, progress=False, maps="norms")
    assert again.stats["shards_computed"] == 0


def test_norms_command_writes_the_contract(tiny_model_dir, fake_data, tmp_path):
    from helpers.cli import main

    out = tmp_path / "norms.json"
    rc = main(["norms", "--segments", "3", "--model", str(tiny_model_dir), "--data-dir", str(fake_data),
               "--cache-dir", str(tmp_path / "c"), "--json", str(out), "--quiet"])
    assert rc == 0
    result = json.loads(out.read_text())
    assert list(result) == ["model", "segments", "heads", "layers", "bootstrap"] and result["segments"] >= 1
    assert result["bootstrap"]["n"] == result["segments"] and result["bootstrap"]["resampled"] == "segments"
    assert len(result["heads"]) == 2 * 4 and set(result["layers"]) == {"1", "2"}
    for row in result["heads"].values():
        # tolerance: float64 shares that sum to 1, each written with 6 decimals
        assert sum(row["weights"].values()) == pytest.approx(1.0, rel=0, abs=len(KINDS) * decimals(6))
        assert sum(row["norms"].values()) == pytest.approx(1.0, rel=0, abs=len(KINDS) * decimals(6))  # as above
        assert -1 <= row["spearman"] <= 1


def test_unknown_architecture_is_named():
    lm = tiny("albert", embedding_size=16)
    with pytest.raises(NotImplementedError, match="albert"):
        forward_weights_and_norms(lm, encode_ids([[0, 5, 2]]).examples)


def test_special_tokens_found_by_role_for_roberta(tiny_bpe_model_dir):
    """<s> and </s> play [CLS] and [SEP]: found through the tokenizer's roles, not by spelling."""
    from helpers import load_model

    lm = in_float64(load_model(str(tiny_bpe_model_dir)))  # as in test_norm_maps_equal_slow_reference
    batch = encode_words(lm.tokenizer, [["the", "cat", "sat", "."]])
    ids = batch.examples[0].input_ids
    masks = kind_masks(lm.tokenizer, ids)
    assert ids[masks["cls"]].tolist() == [lm.tokenizer.convert_tokens_to_ids("<s>")]
    assert ids[masks["sep"]].tolist() == [lm.tokenizer.convert_tokens_to_ids("</s>")]
    assert masks["punct"].sum() == 1 and sum(m.astype(int) for m in masks.values()).tolist() == [1] * len(ids)
    ((_, norms),) = iter_norm_maps(lm, batch)
    reference = norm_maps_reference(lm, ids)
    np.testing.assert_allclose(norms, reference, rtol=0, atol=round_off(reference, fast_path_terms(lm)))  # as there


def test_merged_partials_equal_one_accumulator():
    """Shards' partials merged in order == one accumulator fed every segment, NaN correlations included."""
    rng = np.random.default_rng(7)
    segments = []
    for n in (4, 6, 5, 6, 3):
        attn = rng.dirichlet(np.ones(n), size=(2, 3, n))
        norms = attn * rng.random(n)
        if n == 5:
            norms[0, 1] = 1.0  # a constant map: no correlation for head 1-2 in this segment
        masks = {"cls": np.eye(n, dtype=bool)[0], "sep": np.eye(n, dtype=bool)[n - 1],
                 "punct": np.eye(n, dtype=bool)[1], "other": ~np.eye(n, dtype=bool)[[0, 1, n - 1]].any(0)}
        segments.append((attn, norms, masks))
    whole = NormAccumulator()
    for segment in segments:
        add(whole, *segment)
    merged = NormAccumulator()
    for chunk in (segments[:1], [], segments[1:3], segments[3:]):
        part = NormAccumulator()
        for segment in chunk:
            add(part, *segment)
        assert merged.merge(part) is merged
    a, b = whole.result(), merged.result()
    assert b.n_segments == a.n_segments == 5
    np.testing.assert_array_equal(merged.spearman_count, whole.spearman_count)
    assert merged.spearman_count[0, 1] == 4  # the constant map was left out of that head's mean
    # tolerance: the same float64 terms summed in another grouping
    np.testing.assert_allclose(b.weights, a.weights, rtol=1e-13, atol=1e-15)
    np.testing.assert_allclose(b.norms, a.norms, rtol=1e-13, atol=1e-15)  # as above
    np.testing.assert_allclose(b.spearman, a.spearman, rtol=1e-13, atol=1e-15)  # as above


def test_layer_ratios_are_the_chapters_two_measures():
    """Per layer: gradient for attention to a kind over that to other tokens, and its norm share over its weight
    share (what the norms chapter plots); NaN where the weight share is 0."""
    from helpers.norms.stats import layer_ratios

    w, n = np.zeros((len(KINDS), 2, 2)), np.zeros((len(KINDS), 2, 2))
    w[KINDS.index("sep"), 1], n[KINDS.index("sep"), 1] = 0.6, 0.15
    stats = NormStats(w, n, np.zeros((2, 2)), 1)
    grads = {"sep": [2.0, 0.5], "cls": [1.0, 1.0], "punct": [1.0, 3.0], "other": [1.0, 2.0]}
    got = layer_ratios(stats, grads)
    assert list(got) == ["gradient, [SEP]", "gradient, [CLS]", "gradient, . or ,",
                         "norm/weight, [SEP]", "norm/weight, [CLS]", "norm/weight, . or ,"]
    np.testing.assert_array_equal(got["gradient, [SEP]"], [2.0, 0.25])  # exact: ratios of constructed floats
    np.testing.assert_array_equal(got["norm/weight, [SEP]"][1], 0.25)  # as above
    assert np.isnan(got["norm/weight, [SEP]"][0]) and np.isnan(got["norm/weight, [CLS]"]).all()


# ------------------------------------------------------------------- each segment's values and their intervals


def _constructed_segments(rng, lengths, *, causal=False):
    """``(attn, norms, masks)`` per segment: random rows (causal: lower-triangular), kinds at fixed places."""
    out = []
    for n in lengths:
        attn = rng.dirichlet(np.ones(n), size=(2, 3, n))
        if causal:
            attn = np.tril(attn)
            attn /= attn.sum(-1, keepdims=True)
        eye = np.eye(n, dtype=bool)
        masks = {"cls": eye[0], "sep": np.zeros(n, bool) if causal else eye[n - 1], "punct": eye[1] | eye[n // 2],
                 "other": ~(eye[0] | eye[1] | eye[n // 2] | (np.zeros(n, bool) if causal else eye[n - 1]))}
        if causal:
            masks["causal"] = np.True_
        out.append((attn, attn * rng.random(n), masks))
    return out


def _uniform_reference(masks) -> np.ndarray:
    """Slow loops: each kind's share under uniform attention, row by row (a causal row ``i`` over keys ``0..i``)."""
    from helpers.norms.stats import KINDS

    n = len(masks["cls"])
    causal = bool(masks.get("causal", False))
    out = []
    for k in KINDS:
        total = 0.0
        for i in range(n):
            keys = range(i + 1) if causal else range(n)
            total += sum(1.0 for j in keys if masks[k][j]) / len(keys)
        out.append(total / n)
    return np.array(out)


@pytest.mark.parametrize("causal", [False, True])
def test_kept_rows_are_each_segments_shares_in_index_order(causal):
    """Each segment's kind shares (weights and norms) and uniform shares are kept, ordered by example index
    whatever the order of arrival; merged partials keep the same rows, exactly."""
    from helpers.norms.stats import SEGMENT_DTYPE, uniform_shares

    rng = np.random.default_rng(11)
    segments = _constructed_segments(rng, (5, 7, 4, 6, 5), causal=causal)
    arrival = [3, 0, 4, 1, 2]
    acc = NormAccumulator()
    for i in arrival:
        add(acc, *segments[i], index=i)
    seg = acc.result().segments
    assert seg.index.tolist() == [0, 1, 2, 3, 4] and seg.weights.dtype == SEGMENT_DTYPE
    for i, (attn, norms, masks) in enumerate(segments):
        # exact up to the float32 the rows are kept in: the same float64 shares, rounded once
        np.testing.assert_array_equal(seg.weights[i], kind_shares(attn, masks).astype(SEGMENT_DTYPE))
        np.testing.assert_array_equal(seg.norms[i], kind_shares(norms, masks).astype(SEGMENT_DTYPE))
        # tolerance: float64 sums of at most n * n terms of at most 1, then float32
        np.testing.assert_allclose(uniform_shares(masks), _uniform_reference(masks), rtol=0,
                                   atol=round_off(1.0, len(masks["cls"]) ** 2, eps=EPS64))
        np.testing.assert_allclose(seg.uniform[i], _uniform_reference(masks), rtol=0, atol=round_off(1.0))  # float32, once
    merged = NormAccumulator()
    for chunk in ([1, 4], [], [0], [3, 2]):  # shards' partials, merged in order
        part = NormAccumulator()
        for i in chunk:
            add(part, *segments[i], index=i)
        merged.merge(part)
    other = merged.result().segments
    for name in ("index", "weights", "norms", "uniform"):
        np.testing.assert_array_equal(getattr(other, name), getattr(seg, name))


def test_share_and_ratio_intervals_against_a_slow_loop():
    """The intervals of NormSegments (draw counts, one product) against a slow loop over the same draws: each
    replicate's segments listed, their mean share and their ratio of summed shares computed one by one, the 2.5th
    and 97.5th percentiles taken with numpy."""
    from helpers.norms.stats import NormSegments

    rng = np.random.default_rng(4)
    S, n_boot, seed = 9, 300, 5
    w = rng.dirichlet(np.ones(len(KINDS)), size=(S, 2, 3)).transpose(0, 3, 1, 2).astype(np.float32)  # [S, kind, l, h]
    n = (w * rng.random(w.shape)).astype(np.float32)
    seg = NormSegments(np.arange(S), w, n, rng.random((S, len(KINDS))).astype(np.float32), n_boot=n_boot, seed=seed)
    draws = np.random.default_rng(seed).integers(0, S, size=(n_boot, S))  # the draws of bootstrap.counts
    slow = np.array([w[d].astype(np.float64).mean(0) for d in draws])  # [n_boot, kind, layer, head]
    lo, hi = np.percentile(slow, [2.5, 97.5], axis=0)
    got = seg.share_intervals("weights")
    # tolerance: the same S float64 terms of at most 1 summed in another order, then interpolated
    np.testing.assert_allclose(got[..., 0], lo, rtol=0, atol=round_off(1.0, S, eps=EPS64))
    np.testing.assert_allclose(got[..., 1], hi, rtol=0, atol=round_off(1.0, S, eps=EPS64))  # as above
    layer_slow = np.percentile(slow.mean(-1), [2.5, 97.5], axis=0)  # [2, kind, layer]
    np.testing.assert_allclose(np.moveaxis(seg.layer_share_intervals("weights"), -1, 0), layer_slow, rtol=0,
                               atol=round_off(1.0, S * 3, eps=EPS64))  # as above, over 3 heads too
    k, layers = KINDS.index("sep"), [1]
    ratios = []
    for d in draws:
        num = sum(float(n[i, k, l, h]) for i in d for l in layers for h in range(3))
        den = sum(float(w[i, k, l, h]) for i in d for l in layers for h in range(3))
        ratios.append(num / den)
    want = np.percentile(ratios, [2.5, 97.5])
    # tolerance: ratios of sums of S * 3 float64 terms, of size about 1 (each side's round-off, relative)
    np.testing.assert_allclose(seg.ratio_interval("sep", layers), want, rtol=4 * round_off(1.0, S * 3, eps=EPS64), atol=0)
    assert all(np.isnan(seg.ratio_interval("sep", [])))  # no layer: no ratio


def test_norm_statistics_and_their_segments_are_cached_together(tiny_lm, tmp_path):
    """The means (JSON) and each segment's shares (.npz) are computed once and read back; a cold and a warm run give
    the same intervals; a cache that lost either computes both again."""
    from helpers.norms.run import SEGMENTS_KIND, cached_norm_statistics, stats_key
    from helpers.data.cache import artifact_path

    batch = encode_ids([[2, 5, 9, 3, 7, 8, 3], [2, 6, 3, 11, 3], [2, 12, 13, 14, 3, 5, 3]])
    rng = np.random.default_rng(6)
    calls = []

    def compute():
        calls.append(1)
        acc = NormAccumulator()
        for i, (attn, norms, masks) in enumerate(_constructed_segments(rng, (5, 6, 4))):
            add(acc, attn, norms, masks, index=i)
        return acc.result()

    cold = cached_norm_statistics(tiny_lm, batch, compute=compute, cache_root=tmp_path)
    warm = cached_norm_statistics(tiny_lm, batch, compute=compute, cache_root=tmp_path)
    assert len(calls) == 1 and warm.n_segments == cold.n_segments == 3
    np.testing.assert_array_equal(warm.segments.norms, cold.segments.norms)  # exact: float32 kept as float32
    assert json.dumps(warm.to_json()) == json.dumps(cold.to_json())  # the same intervals, cold or warm
    artifact_path(SEGMENTS_KIND, stats_key(tiny_lm, batch), ".npz", tmp_path).unlink()
    cached_norm_statistics(tiny_lm, batch, compute=compute, cache_root=tmp_path)
    assert len(calls) == 2


def test_sharded_pass_keeps_the_segments_of_one_pass(tiny_lm):
    """The sharded path (each shard's partial made apart, as on a Dask worker: pickled there and back, then merged
    in shard order) keeps the segments, in index order, of one accumulator fed every segment in one pass; the
    intervals are then the same."""
    import pickle

    from tests.references import iter_weights_and_norms
    from helpers.norms.run import norm_statistics
    from helpers.pipeline.extraction import plan_extraction
    import helpers.norms.stats as ns

    rng = np.random.default_rng(3)
    ids = [[2, *rng.integers(5, 23, int(rng.integers(1, 12))), 3, *rng.integers(5, 23, int(rng.integers(1, 12))), 3]
           for _ in range(300)]
    batch = encode_ids(ids, max_length=32)
    assert len(plan_extraction(tiny_lm, batch, level="token", cache=False).shards) == 2
    one = NormAccumulator()
    for ex, attn, nm in iter_weights_and_norms(tiny_lm, batch):
        add(one, attn, nm, kind_masks(tiny_lm.tokenizer, ex.input_ids), index=ex.index)
    reference = one.result().segments
    merge = NormAccumulator.merge
    travelled = lambda self, other: merge(self, pickle.loads(pickle.dumps(other)))  # noqa: E731
    try:
        ns.NormAccumulator.merge = travelled  # every partial crosses a process boundary before it is merged
        sharded = norm_statistics(tiny_lm, batch).segments
    finally:
        ns.NormAccumulator.merge = merge
    assert sharded.index.tolist() == reference.index.tolist() == sorted(ex.index for ex in batch.examples)
    for name in ("weights", "norms", "uniform"):
        # tolerance: the batched shares sum the same float64 terms in another order, then are rounded to float32 once
        np.testing.assert_allclose(getattr(sharded, name), getattr(reference, name), rtol=0, atol=round_off(1.0))
    np.testing.assert_allclose(sharded.share_intervals("norms"), reference.share_intervals("norms"), rtol=0,
                               atol=round_off(1.0))  # as above: the same draws over the same segments


def _head_scores(rng, word_relation, word_sentence, n_sentences):
    from helpers.syntax.stats import HeadScores, OFFSETS

    n = len(word_relation)
    return HeadScores(["all", "det", "obj"], np.asarray(word_relation), np.asarray(word_sentence),
                      rng.random((2, 2, 3, n)) < 0.5, rng.random((len(OFFSETS), n)) < 0.3, n_sentences)


def test_paired_change_against_a_slow_loop():
    """Table 1's change from the weight maps' head to the norm maps' head, paired: each replicate's sentences listed
    and the correct words of both heads counted over them, one by one; the rows of the comparison carry it."""
    from helpers.norms.run import paired_change, table1_comparison

    rng = np.random.default_rng(8)
    n_sentences = 7
    sentence = np.sort(rng.integers(0, n_sentences, 60))
    relation = rng.integers(1, 3, 60)  # det or obj (every word is also in "all")
    weights, norms = (_head_scores(rng, relation, sentence, n_sentences) for _ in range(2))
    w_index, n_index = (0, 1, 2), (1, 0, 1)
    n_boot, seed = 300, 2
    draws = np.random.default_rng(seed).integers(0, n_sentences, size=(n_boot, n_sentences))
    changes = []
    for d in draws:
        words = [i for s in d for i in np.flatnonzero((sentence == s) & (relation == 1))]  # det's words, repeats kept
        c_w = sum(bool(weights.word_correct[w_index][i]) for i in words)
        c_n = sum(bool(norms.word_correct[n_index][i]) for i in words)
        changes.append(100.0 * (c_n - c_w) / len(words) if words else np.nan)
    want = np.nanpercentile(changes, [2.5, 97.5])
    got = paired_change(weights, norms, "det", w_index, n_index, n_boot=n_boot, seed=seed)
    # tolerance: exact counts divided once in float64, then interpolated
    np.testing.assert_allclose(got, want, rtol=0, atol=round_off(100.0, 4, eps=EPS64))
    rows = table1_comparison(weights, norms, ["det", "obj"])
    assert [r["relation"] for r in rows] == ["det", "obj"] and rows[0]["sentences"] == n_sentences
    row = rows[0]
    lo, hi = row["change_interval"]
    assert lo <= row["change"] <= hi  # the change of the best heads lies within its interval here
    shifted = _head_scores(rng, relation, np.roll(sentence, 1), n_sentences)
    with pytest.raises(ValueError, match="same words"):
        paired_change(weights, shifted, "det", w_index, n_index)
