"""JS distances against scipy, their invariants, MDS determinism, behaviours, the layer test, the CLI."""
import json

import numpy as np
import pytest
import torch
from scipy.spatial.distance import jensenshannon

from helpers.cli import main
from helpers.cluster.stats import (
    JSAccumulator,
    batch_js,
    causal_map,
    embed_mds,
    hierarchical_order,
    layer_ratio_parts,
    layer_similarity,
    smooth,
)
from helpers.cluster.run import NO_BEHAVIOUR, behaviours
from helpers.surface.stats import STATISTICS, SurfaceStats
from tests.references import js_reference, map_batch
from tolerances import EPS32, EPS64, round_off


def segment_js(attn, **kw):
    """``[head, head]``: :func:`batch_js` of one segment's map ``[layer, head, n, n]``."""
    return batch_js(torch.as_tensor(np.asarray(attn))[None], [np.shape(attn)[-1]], **kw)[0]


def add(acc, attn):
    """Feed one segment's map to ``acc`` as the route feeds a batch of one."""
    acc.update(map_batch([attn]), [()])


def maps(seed, L=2, H=3, n=7, alpha=0.5):
    return np.random.default_rng(seed).dirichlet(np.ones(n) * alpha, size=(L, H, n))


def js_tolerance(n: int, eps: float) -> float:
    """Round-off of one entry of :func:`segment_js` on a segment of n tokens, in precision ``eps``: a difference
    of sums of n * n terms x log x, each sum at most n log n in size (n rows of entropy at most log n), so the
    scale is n log n, not the (smaller, cancelled) result."""
    return round_off(n * np.log(n), n * n, eps=eps)


@pytest.mark.parametrize("chunk", [None, 1, 4, 100])
def test_matches_scipy_reference_float64_and_float32(chunk):
    attn = maps(0)  # 6 heads: chunks of 4 leave a partial last chunk
    ref = js_reference(attn)
    n = attn.shape[-1]
    # tolerance: float64 against scipy's float64 (js_tolerance)
    np.testing.assert_allclose(segment_js(attn, dtype=torch.float64, chunk=chunk).numpy(), ref, rtol=0,
                               atol=js_tolerance(n, EPS64))
    # tolerance: float32 (the cast of the inputs, then js_tolerance) against float64
    np.testing.assert_allclose(segment_js(attn.astype(np.float32)).numpy(), ref, rtol=0, atol=js_tolerance(n, EPS32))


def causal_maps(seed, L=2, H=3, n=7):
    """Maps whose query i weighs keys 0..i only (a decoder's), each row a Dirichlet draw over its prefix."""
    rng = np.random.default_rng(seed)
    attn = np.zeros((L, H, n, n))
    for i in range(n):
        attn[..., i, : i + 1] = rng.dirichlet(np.ones(i + 1) * 0.5, size=(L, H))
    return attn


def test_a_causal_map_is_summed_over_its_visible_entries_with_the_same_distances():
    attn = causal_maps(4)
    assert causal_map(torch.as_tensor(attn)) and not causal_map(torch.as_tensor(maps(0)))
    leaky = attn.copy()
    leaky[1, 2, 3, 5] = 1e-3  # one head weighs one later key: every entry is kept
    assert not causal_map(torch.as_tensor(leaky))
    from scipy.special import rel_entr

    L, H, n, _ = attn.shape
    P = smooth(torch.as_tensor(attn)).numpy().reshape(L * H, n, n)  # every n * n entry, the hidden ones smoothed too
    ref = np.zeros((L * H, L * H))  # the divergence of every pair of rows, as scipy's relative entropies (a slow loop;
    for a in range(L * H):          # js_reference takes square roots, which a row of one visible key, 0 up to
        for b in range(L * H):      # round-off, can turn into NaN)
            for i in range(n):
                m = (P[a, i] + P[b, i]) / 2
                ref[a, b] += 0.5 * rel_entr(P[a, i], m).sum() + 0.5 * rel_entr(P[b, i], m).sum()
    # tolerance: float64 against scipy's float64 (js_tolerance)
    np.testing.assert_allclose(segment_js(attn, dtype=torch.float64).numpy(), ref, rtol=0, atol=js_tolerance(n, EPS64))
    # tolerance: float32 (the cast of the inputs, then js_tolerance) against float64
    np.testing.assert_allclose(segment_js(attn.astype(np.float32)).numpy(), ref, rtol=0, atol=js_tolerance(n, EPS32))


def test_properties():
    attn = maps(1)
    n = attn.shape[-1]
    D = segment_js(attn, dtype=torch.float64).numpy()
    np.testing.assert_array_equal(np.diag(D), 0.0)  # exact: the diagonal is set to 0
    # tolerance: (a, b) and (b, a) add the same terms, perhaps in another order (js_tolerance)
    np.testing.assert_allclose(D, D.T, rtol=0, atol=js_tolerance(n, EPS64))
    assert (D >= 0).all()
    same = np.stack([attn[0], attn[0]])  # two identical layers: JS(x, x) = 0 across them
    D2 = segment_js(same, dtype=torch.float64).numpy()
    # tolerance: identical rows: zero up to float64 round-off (js_tolerance)
    np.testing.assert_allclose(D2[:3, 3:].diagonal(), 0.0, rtol=0, atol=js_tolerance(n, EPS64))
    upper = n * np.log(2)  # JS of each row is at most log 2
    assert D.max() <= upper


@pytest.mark.parametrize("chunk", [1, 2, 4, None])
@pytest.mark.parametrize("causal", [False, True])
def test_distances_are_exactly_symmetric(chunk, causal):
    # exact, not within round-off: scikit-learn's MDS refuses a precomputed matrix asymmetric by more than 1e-10,
    # and on a GPU the two sums of a pair inside a chunk's diagonal block came out in different orders
    attn = maps(5, L=2, H=3, n=9)
    if causal:
        attn = np.tril(attn)
        attn /= attn.sum(-1, keepdims=True)
    for dtype in (torch.float32, torch.float64):
        D = segment_js(attn.astype(np.float32), chunk=chunk, dtype=dtype).numpy()
        np.testing.assert_array_equal(D, D.T)


def test_scipy_single_row():
    p, q = np.array([0.7, 0.2, 0.1]), np.array([0.1, 0.1, 0.8])
    attn = np.stack([np.tile(p, (3, 1)), np.tile(q, (3, 1))])[None]  # one layer, two heads, 3 identical rows
    ps, qs = smooth(torch.tensor(p)).numpy(), smooth(torch.tensor(q)).numpy()
    expected = 3 * jensenshannon(ps, qs) ** 2  # scipy gives the square root of the divergence
    # tolerance: float64 against scipy's float64 (js_tolerance)
    np.testing.assert_allclose(segment_js(attn, dtype=torch.float64).numpy()[0, 1], expected, rtol=0,
                               atol=js_tolerance(3, EPS64))


def test_accumulator_sums_segments():
    acc = JSAccumulator(6)
    add(acc, maps(2, n=5))
    add(acc, maps(3, n=9))
    expected = js_reference(maps(2, n=5)) + js_reference(maps(3, n=9))
    # tolerance: the accumulator works in float32 on each segment (js_tolerance), and adds them in float64
    np.testing.assert_allclose(acc.result(), expected, rtol=0, atol=js_tolerance(5, EPS32) + js_tolerance(9, EPS32))
    assert acc.tokens == 14 and acc.segments == 2


def test_mds_is_seeded_and_layer_test_detects_structure():
    rng = np.random.default_rng(0)
    centres = rng.normal(size=(3, 2)) * 10
    points = np.repeat(centres, 4, axis=0) + rng.normal(size=(12, 2))
    D = np.linalg.norm(points[:, None] - points[None], axis=-1)
    a, b = embed_mds(D, seed=1), embed_mds(D, seed=1)
    np.testing.assert_allclose(a, b)  # tolerance: float64, the same seeded computation twice (relative 1e-7)
    sim = layer_similarity(D, n_heads=4, n_perm=200)
    assert sim["within_layer_mean"] < sim["between_layer_mean"] and sim["p_value"] < 0.05
    flat = layer_similarity(np.ones((12, 12)) - np.eye(12), n_heads=4, n_perm=200)  # no structure at all
    assert flat["p_value"] > 0.05
    order, _ = hierarchical_order(D)
    assert sorted(order.tolist()) == list(range(12))


def test_behaviour_rules_and_order():
    per_head = {k: np.zeros((1, 4)) for k in STATISTICS}
    per_head["next"][0, 0] = 0.9
    per_head["prev"][0, 1] = 0.9
    per_head["entropy"][0, 2] = 2.9
    per_head["cls"][0, 2] = 0.7  # later rule overrides "broadly"
    stats = SurfaceStats(per_head, uniform_entropy=3.0, n_segments=1)
    assert behaviours(stats) == ["attends to next", "attends to previous", "attends to [CLS]", NO_BEHAVIOUR]


def test_cluster_command_json(tiny_model_dir, fake_data, tmp_path):
    out = tmp_path / "cluster.json"
    rc = main(["cluster", "--model", str(tiny_model_dir), "--data-dir", str(fake_data), "--segments", "3",
               "--permutations", "20", "--no-linguistic", "--json", str(out), "--quiet", "--cache-dir", str(tmp_path / "c")])
    assert rc == 0
    result = json.loads(out.read_text())
    K = 2 * 4
    assert np.asarray(result["distance"]).shape == (K, K) and np.asarray(result["coordinates"]).shape == (K, 2)
    assert len(result["behaviours"]) == K and result["labels"][:2] == ["1-1", "1-2"]
    sim = result["layer_similarity"]  # the layer test, with the ratio's interval over the resampled segments
    assert sim["segments_resampled"] == result["segments"]  # (the fake corpus holds fewer than asked for)
    lo, hi = sim["ratio_interval"]
    assert lo <= hi and {"ratio", "p_value", "within_layer_mean", "between_layer_mean", "permutations"} <= set(sim)


def test_merged_partials_equal_one_accumulator():
    """Shards' partials merged in order == one accumulator fed every segment; other head counts are refused."""
    segments = [maps(seed, n=n) for seed, n in zip(range(10, 16), (5, 9, 4, 7, 7, 6))]
    whole = JSAccumulator(6)
    for attn in segments:
        add(whole, attn)
    merged = JSAccumulator(6)
    for chunk in (segments[:2], [], segments[2:5], segments[5:]):
        part = JSAccumulator(6)
        for attn in chunk:
            add(part, attn)
        assert merged.merge(part) is merged
    # tolerance: the same float64 sums of float32 terms in another grouping
    np.testing.assert_allclose(merged.result(), whole.result(), rtol=1e-13, atol=1e-15)
    assert (merged.tokens, merged.segments) == (whole.tokens, whole.segments) == (38, 6)
    with pytest.raises(ValueError, match="4 heads"):
        JSAccumulator(6).merge(JSAccumulator(4))


def test_layer_distances_against_a_loop_over_pairs():
    from helpers.cluster.stats import layer_distances

    rng = np.random.default_rng(1)
    n_layers, n_heads = 3, 4
    D = rng.random((n_layers * n_heads, n_layers * n_heads))
    D = D + D.T
    np.fill_diagonal(D, 0.0)
    rows = layer_distances(D, n_heads)
    assert [r["layer"] for r in rows] == [1, 2, 3]
    for r in rows:
        mine = [r["layer"] - 1 == k // n_heads for k in range(len(D))]
        within = [D[a, b] for a in range(len(D)) for b in range(a + 1, len(D)) if mine[a] and mine[b]]
        others = [D[a, b] for a in range(len(D)) for b in range(len(D)) if mine[a] and not mine[b]]
        # tolerance: the same float64 numbers averaged in another order
        assert r["within"] == pytest.approx(np.mean(within), rel=1e-12)
        assert r["to_others"] == pytest.approx(np.mean(others), rel=1e-12)  # as above


def test_broad_behaviour_uses_the_one_broad_threshold():
    """§6's "attends broadly" and §3.3's [CLS] claim share one threshold: the original's 3.8 nats of log 128."""
    from helpers import paper
    from helpers.surface import claims as surface_claims
    from helpers.surface.stats import BROAD_ENTROPY_FRACTION

    assert BROAD_ENTROPY_FRACTION == pytest.approx(3.8 / np.log(128), rel=1e-15)  # the value behaviours always used
    assert BROAD_ENTROPY_FRACTION == paper.BROAD_ENTROPY.value / np.log(paper.SEGMENT_TOKENS.value)
    per_head = {k: np.zeros((1, 2)) for k in STATISTICS}
    per_head["entropy"][0] = 3.0 * BROAD_ENTROPY_FRACTION + np.array([1e-9, -1e-9])
    stats = SurfaceStats(per_head, uniform_entropy=3.0, n_segments=1)
    assert behaviours(stats) == ["attends broadly", NO_BEHAVIOUR]
    assert surface_claims.CLS_BROAD_RANGE[0] == BROAD_ENTROPY_FRACTION
    for low_end, want in ((BROAD_ENTROPY_FRACTION, "reproduced"), (BROAD_ENTROPY_FRACTION - 1e-9, "inconclusive")):
        assert surface_claims.cls_broad(0.95, (low_end, 0.99)).verdict == want


def test_layer_blocks_kept_per_segment_one_at_a_time_batched_and_merged():
    """Each segment's layer blocks, whether added one segment at a time, in a padded batch or from shards'
    partials merged in order: the same ``[segment, layer, layer]`` sums of its distances (a loop over head pairs)."""
    from helpers.cluster.stats import layer_blocks
    from helpers.core.extract import MapBatch

    L, H = 2, 3
    segments = [maps(seed, L, H, n=n) for seed, n in zip(range(20, 25), (5, 8, 4, 8, 6))]
    one = JSAccumulator(L * H, n_layers=L)
    for attn in segments:
        add(one, attn)
    blocks = one.segment_blocks()
    assert blocks.shape == (5, L, L)
    for attn, got in zip(segments, blocks):
        D = js_reference(attn)
        want = np.array([[sum(D[a, b] for a in range(l * H, (l + 1) * H) for b in range(m * H, (m + 1) * H))
                          for m in range(L)] for l in range(L)])
        # tolerance: one segment's float32 distances (js_tolerance each), H * H of them summed per block
        np.testing.assert_allclose(got, want, rtol=0, atol=H * H * js_tolerance(attn.shape[-1], EPS32))
    P = max(a.shape[-1] for a in segments)
    padded = torch.zeros(len(segments), L, H, P, P)
    for b, attn in enumerate(segments):
        padded[b, :, :, : attn.shape[-1], : attn.shape[-1]] = torch.as_tensor(attn)
    batched = JSAccumulator(L * H, n_layers=L)
    batched.update(MapBatch([None] * len(segments), padded, lengths=[a.shape[-1] for a in segments]), [()] * len(segments))
    # tolerance: the same float32 kernels on the same segments, one at a time or batched (bit for bit on the CPU)
    np.testing.assert_array_equal(batched.segment_blocks(), blocks)
    merged = JSAccumulator(L * H, n_layers=L)
    for chunk in (segments[:2], segments[2:]):
        part = JSAccumulator(L * H, n_layers=L)
        for attn in chunk:
            add(part, attn)
        merged.merge(part)
    np.testing.assert_array_equal(merged.segment_blocks(), blocks)
    cached = merged.to_cache()
    assert np.asarray(cached["layer_blocks"]).shape == (5, L, L) and cached["tokens"] == merged.tokens
    with pytest.raises(ValueError, match="blocks"):
        JSAccumulator(L * H).merge(part)
    # summed over the segments, the blocks give layer_similarity's two means
    within, between = layer_ratio_parts(blocks)
    sim = layer_similarity(one.result(), H, n_perm=10)
    pairs_within, pairs_between = L * H * (H - 1) / 2, (L * H) * (L * H - 1) / 2 - L * H * (H - 1) / 2
    # tolerance: float64 sums of the same float32 distances in another order
    assert within.sum() / pairs_within == pytest.approx(sim["within_layer_mean"], rel=1e-12)
    assert between.sum() / pairs_between == pytest.approx(sim["between_layer_mean"], rel=1e-12)


@pytest.mark.parametrize("seed", [0, 1])
def test_layer_ratio_interval_resamples_segments_against_a_loop(seed):
    """The within/between ratio's interval: segments drawn with replacement, each replicate's ratio from the drawn
    segments' summed distances (a loop over head pairs), the 2.5th and 97.5th percentiles."""
    from helpers.cluster.stats import layer_blocks, layer_ratio_interval

    rng = np.random.default_rng(seed)
    L, H, S = 3, 2, 9
    K = L * H
    per_segment = []
    for _ in range(S):
        D = rng.random((K, K)) * (1 + (np.arange(K)[:, None] // H != np.arange(K)[None] // H))  # layers apart
        D = D + D.T
        np.fill_diagonal(D, 0.0)
        per_segment.append(D)
    blocks = layer_blocks(torch.as_tensor(np.stack(per_segment)), L).numpy()
    got = layer_ratio_interval(blocks, H, n_boot=300, seed=seed)
    draws = np.random.default_rng(seed).integers(0, S, size=(300, S))
    ratios = []
    for row in draws:
        D = sum(per_segment[i] for i in row)
        within = [D[a, b] for a in range(K) for b in range(a + 1, K) if a // H == b // H]
        between = [D[a, b] for a in range(K) for b in range(a + 1, K) if a // H != b // H]
        ratios.append(np.mean(within) / np.mean(between))
    # tolerance: float64 sums of at most S * K * K terms of size <= 2 S, in another order
    np.testing.assert_allclose(got, np.percentile(ratios, [2.5, 97.5]), rtol=0, atol=round_off(1.0, S * K * K, eps=EPS64))
    assert np.isnan(layer_ratio_interval(np.zeros((0, L, L)), H)).all()
