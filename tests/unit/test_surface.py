"""Surface statistics on constructed maps with known answers, and against a slow loop reference."""
import json

import numpy as np
import pytest

from helpers.surface.stats import STATISTICS, SurfaceAccumulator, SurfaceStats, batch_statistics
from helpers.surface.run import SurfaceReport
from helpers.surface.claims import claims as surface_claims
from tests.references import map_batch, surface_stats
from tolerances import decimals


def segment_statistics(attn, masks):
    """The statistics of one segment: :func:`batch_statistics` of a batch of one."""
    return {k: v[0] for k, v in batch_statistics(map_batch([attn]).weights, [attn.shape[-1]], [masks]).items()}


def add(acc, attn, masks):
    """Feed one segment's map to ``acc`` as the route feeds a batch of one."""
    acc.update(map_batch([attn], indices=[masks.get("segment", 0)]), [(masks,)])


def masks_for(n, sep=(3, 7), punct=(2,)):
    sep_mask = np.zeros(n, bool)
    sep_mask[list(sep)] = True
    cls = np.zeros(n, bool)
    cls[0] = True
    punct_mask = np.zeros(n, bool)
    punct_mask[list(punct)] = True
    return {"cls": cls, "sep": sep_mask, "punct": punct_mask}


def reference(attn, masks):
    """Slow loops over heads, rows and columns, written from the definitions in the docstring."""
    L, H, n, _ = attn.shape
    sep, cls, punct = masks["sep"], masks["cls"], masks["punct"]
    cls_row = [i for i in range(n) if cls[i]][0]
    out = {k: np.zeros((L, H)) for k in STATISTICS}
    for l in range(L):
        for h in range(H):
            a = attn[l, h].astype(float)
            ent = []
            for i in range(n):
                out["self"][l, h] += a[i, i] / n
                if i + 1 < n:
                    out["next"][l, h] += a[i, i + 1] / n
                if i - 1 >= 0:
                    out["prev"][l, h] += a[i, i - 1] / n
                row_h = 0.0
                for j in range(n):
                    if cls[j]:
                        out["cls"][l, h] += a[i, j] / n
                        if i == cls_row:  # the row of [CLS] on [CLS]
                            out["cls_cls"][l, h] += a[i, j]
                    if sep[j]:
                        out["sep"][l, h] += a[i, j] / n
                        if sep[i]:
                            out["sep_sep"][l, h] += a[i, j] / sep.sum()
                        else:
                            out["rest_sep"][l, h] += a[i, j] / (n - sep.sum())
                    if punct[j]:
                        out["punct"][l, h] += a[i, j] / n
                    p = 0.9999 * a[i, j] + 0.0001 / n
                    row_h -= p * np.log(p)
                ent.append(row_h)
            out["entropy"][l, h] = np.mean(ent)
            out["entropy_cls"][l, h] = ent[0]
    return out


def test_matches_slow_reference_on_random_maps():
    rng = np.random.default_rng(0)
    attn = rng.dirichlet(np.ones(8) * 0.5, size=(2, 3, 8))
    fast = segment_statistics(attn, masks_for(8))
    slow = reference(attn, masks_for(8))
    for name in STATISTICS:
        # tolerance: the same float64 arithmetic in another order
        np.testing.assert_allclose(fast[name], slow[name], rtol=1e-10, err_msg=name)


def test_uniform_rows_have_entropy_log_n():
    n = 10
    stats = segment_statistics(np.full((1, 2, n, n), 1 / n), masks_for(n))
    # tolerance: float64 statistics of constructed maps, sums of n terms: the default relative 1e-7 (here and below)
    np.testing.assert_allclose(stats["entropy"], np.log(n))
    np.testing.assert_allclose(stats["entropy_cls"], np.log(n))
    np.testing.assert_allclose(stats["sep"], 2 / n)


def test_shifted_identity_attends_to_next_token():
    n = 9
    shifted = np.eye(n, k=1)
    shifted[-1, -1] = 1.0  # the last row has no next token
    stats = segment_statistics(shifted[None, None], masks_for(n))
    np.testing.assert_allclose(stats["next"], (n - 1) / n)
    np.testing.assert_allclose(stats["prev"], 0.0)
    np.testing.assert_allclose(stats["self"], 1 / n)
    prev = segment_statistics(np.eye(n, k=-1)[None, None], masks_for(n))
    np.testing.assert_allclose(prev["prev"], (n - 1) / n)


def test_everything_to_sep():
    n = 8
    attn = np.zeros((1, 1, n, n))
    attn[..., [3, 7]] = 0.5
    stats = segment_statistics(attn, masks_for(n))
    for name in ("sep", "sep_sep", "rest_sep"):
        np.testing.assert_allclose(stats[name], 1.0)
    np.testing.assert_allclose(stats["cls"], 0.0)


def test_accumulator_weights_segments_equally_and_round_trips():
    acc = SurfaceAccumulator()
    add(acc, np.full((1, 1, 4, 4), 0.25), masks_for(4, sep=(3,), punct=()))
    add(acc, np.eye(8, k=1)[None, None] + np.eye(8)[None, None] * 0, masks_for(8))
    result = acc.result()
    np.testing.assert_allclose(result.uniform_entropy, (np.log(4) + np.log(8)) / 2)
    np.testing.assert_allclose(result.per_head["next"], (3 / 16 + 7 / 8) / 2)
    again = SurfaceStats.from_json(json.loads(json.dumps(result.to_json())))
    # tolerance: the JSON round trip keeps 6 decimals
    np.testing.assert_allclose(again.per_head["next"], result.per_head["next"], rtol=0, atol=decimals(6))
    with pytest.raises(ValueError, match="no segments"):
        SurfaceAccumulator().result()


def test_specialist_heads_and_claims():
    per_segment = {k: np.zeros((3, 2, 3)) for k in STATISTICS}
    per_segment["prev"][:, 1, 2] = 0.6
    per_segment["next"][:, 0, 0] = 0.7
    per_segment["sep"][:, 1] = 0.6
    per_segment["sep_sep"][:, 1] = 0.95
    per_segment["entropy"][:, 0] = 2.5
    per_segment["entropy"][:, 1] = 2.0
    per_segment["entropy_cls"][:, 1] = 1.0
    stats = surface_stats(per_segment, np.full(3, 3.0))
    assert stats.n_segments == 3 and stats.uniform_entropy == 3.0
    assert stats.heads_above("prev") == ["2-3"] and stats.heads_above("next") == ["1-1"]
    assert stats.best_head("next") == (0, 0)
    report = SurfaceReport("toy", {}, stats, None, None, None)
    claims = {c.id: c.verdict for c in surface_claims(report, n_boot=50)}
    assert claims["prev-token-heads"] == "reproduced"
    assert claims["sep-attention-middle-layers"] == "reproduced"
    assert claims["sep-self-attention"] == "reproduced"
    assert claims["broad-attention-lower-layers"] == "reproduced"
    assert claims["cls-broad-last-layer"] == "not reproduced"
    assert "sep-gradient-small" not in claims  # no gradients, no claim


def _draws(n_units, n_boot, seed=0):
    """The bootstrap's draws, written out: replicate r takes segments idx[r] (helpers.core.bootstrap's generator)."""
    return np.random.default_rng(seed).integers(0, n_units, size=(n_boot, n_units))


def test_segment_replicates_against_a_slow_loop():
    """Each replicate's means, shares, self-attention (its layers chosen again) and [CLS] entropy fraction,
    against loops over the drawn segments."""
    from helpers.surface.stats import (SegmentReplicates, cls_entropy_fraction_replicates, self_attention,
                                       self_attention_replicates, share_broadest_layer, share_some_head_above,
                                       share_some_layer_above)

    rng = np.random.default_rng(7)
    S, L, H, B = 9, 4, 3, 60
    per = {k: rng.uniform(0, 1, (S, L, H)) for k in STATISTICS}
    per["prev"] = rng.uniform(0.3, 0.7, (S, L, H))
    uniform = rng.uniform(2, 4, S)
    stats = surface_stats(per, uniform)
    boot = SegmentReplicates(stats, n_boot=B)
    idx = _draws(S, B)
    heads = np.stack([np.mean([per["prev"][i] for i in row], axis=0) for row in idx])  # [B, L, H]
    # tolerance: the same float64 means, summed as a product with draw counts (relative 1e-12)
    np.testing.assert_allclose(boot.head_means("prev"), heads, rtol=1e-12)
    assert share_some_head_above(boot, "prev") == np.mean([(h > 0.5).any() for h in heads])
    sep_layers = np.stack([np.mean([per["sep"][i].mean(-1) for i in row], axis=0) for row in idx])  # [B, L]
    assert share_some_layer_above(boot, "sep", 0.5) == np.mean([(m > 0.5).any() for m in sep_layers])
    entropy = [np.mean([per["entropy"][i].mean(-1) for i in row], axis=0) for row in idx]
    assert share_broadest_layer(boot, 0) == np.mean([int(np.argmax(m)) == 0 for m in entropy])
    for kind, own in (("sep", "sep_sep"), ("cls", "cls_cls")):
        want = []
        for row in idx:
            shares = np.mean([per[kind][i].mean(-1) for i in row], axis=0)
            mine = np.mean([per[own][i].mean(-1) for i in row], axis=0)
            top = sorted(range(L), key=lambda l: -shares[l])[: L // 2]
            want.append(np.mean([mine[l] for l in top]))
        np.testing.assert_allclose(self_attention_replicates(boot, kind), want, rtol=1e-12)  # as above
        full = SegmentReplicates(stats, n_boot=1)
        full.counts = np.ones((1, S))  # every segment once: the whole sample's statistic
        np.testing.assert_allclose(self_attention_replicates(full, kind), self_attention(stats, kind)[0], rtol=1e-12)
    fraction = [sum(per["entropy_cls"][i][-1].mean() for i in row) / sum(uniform[i] for i in row) for row in idx]
    np.testing.assert_allclose(cls_entropy_fraction_replicates(boot), fraction, rtol=1e-12)  # as above
    with pytest.raises(ValueError, match="per_segment"):
        SegmentReplicates(SurfaceStats(stats.per_head, 3.0, S))


def test_each_segments_values_in_index_order_however_fed_and_merged():
    """The per-segment values follow the segments' indices (masks["segment"]), whatever order the segments were
    fed in and however the partials were grouped; their mean is the per-head mean; they survive the cache's
    round trip (segment_arrays / with_segments)."""
    rng = np.random.default_rng(11)
    segments = []
    for index, n in enumerate((5, 8, 6, 9, 8, 4, 7)):
        attn = rng.dirichlet(np.ones(n) * 0.3, size=(2, 3, n))
        segments.append((attn, {**masks_for(n, sep=(2, n - 1), punct=(1,)), "segment": index}))
    results = []
    for order, cuts in (([0, 1, 2, 3, 4, 5, 6], (7,)), ([6, 3, 0, 5, 1, 4, 2], (2, 5)), ([2, 4, 6, 0, 1, 3, 5], (1, 4))):
        parts, start = [], 0
        for cut in (*cuts, 7):
            part = SurfaceAccumulator()
            for k in order[start:cut]:
                add(part, *segments[k])
            parts.append(part)
            start = cut
        merged = SurfaceAccumulator()
        for part in parts:
            merged.merge(part)
        results.append(merged.result())
    first = results[0]
    for other in results[1:]:
        for name in STATISTICS:
            assert np.array_equal(other.per_segment[name], first.per_segment[name]), name
        assert np.array_equal(other.segment_uniform, first.segment_uniform)
    for k, (attn, masks) in enumerate(segments):
        one = segment_statistics(attn, masks)
        for name in STATISTICS:
            assert np.array_equal(first.per_segment[name][k], one[name]), name
        assert first.segment_uniform[k] == np.log(attn.shape[-1])
    for name in STATISTICS:
        # tolerance: the same float64 terms summed in another order
        np.testing.assert_allclose(first.per_segment[name].mean(0), first.per_head[name], rtol=1e-13, atol=1e-15)
    again = SurfaceStats.from_json(json.loads(json.dumps(first.to_json()))).with_segments(first.segment_arrays())
    assert all(np.array_equal(again.per_segment[k], first.per_segment[k]) for k in STATISTICS)
    with pytest.raises(ValueError, match="do not fit"):
        SurfaceStats.from_json(first.to_json()).with_segments({**first.segment_arrays(), "prev": np.zeros((3, 2, 3))})
    twice = SurfaceAccumulator()
    add(twice, *segments[0])
    add(twice, *segments[0])
    with pytest.raises(ValueError, match="added twice"):
        twice.result()


def test_merged_partials_equal_one_accumulator():
    """Shards' partials merged in order == one accumulator fed every segment (an empty partial included)."""
    rng = np.random.default_rng(5)
    segments = []
    for n in (5, 8, 6, 9, 8, 4, 7):
        attn = rng.dirichlet(np.ones(n) * 0.3, size=(2, 3, n))
        segments.append((attn, masks_for(n, sep=(2, n - 1), punct=(1,))))
    whole = SurfaceAccumulator()
    for attn, masks in segments:
        add(whole, attn, masks)
    parts = []
    for chunk in (segments[:3], [], segments[3:4], segments[4:]):
        part = SurfaceAccumulator()
        for attn, masks in chunk:
            add(part, attn, masks)
        parts.append(part)
    merged = SurfaceAccumulator()
    for part in parts:
        assert merged.merge(part) is merged
    a, b = whole.result(), merged.result()
    assert b.n_segments == a.n_segments == len(segments)
    # tolerance: the same float64 terms summed in another grouping
    np.testing.assert_allclose(b.uniform_entropy, a.uniform_entropy, rtol=1e-13)
    for name in STATISTICS:
        np.testing.assert_allclose(b.per_head[name], a.per_head[name], rtol=1e-13, atol=1e-15)  # as above
    # a merge adds: merging a part twice counts its segments twice
    twice = SurfaceAccumulator().merge(parts[0]).merge(parts[0])
    np.testing.assert_allclose(twice.sums["next"], 2 * parts[0].sums["next"])
    assert twice.count == 6


def test_sink_gradient_is_the_ratio_in_the_sink_layers():
    """The surface chapter's [CLS] test: layers whose mean [CLS] share exceeds SINK_SHARE, gradient ratio there."""
    from helpers.surface.stats import SINK_SHARE, gradient_ratio, sink_layers

    per_head = {k: np.zeros((4, 2)) for k in STATISTICS}
    per_head["cls"][1] = SINK_SHARE + 0.1
    per_head["cls"][3] = [SINK_SHARE + 0.2, SINK_SHARE - 0.1]  # layer mean above too
    per_head["cls"][2] = [SINK_SHARE, SINK_SHARE]  # at the threshold: not a sink
    stats = SurfaceStats(per_head, 3.0, 1)
    grads = {"cls": [1.0, 0.2, 1.0, 0.4], "other": [1.0, 1.0, 1.0, 2.0]}
    layers = sink_layers(stats.layer_means("cls"))
    assert layers.tolist() == [1, 3]
    # tolerance: a ratio of constructed floats (relative 1e-12)
    assert gradient_ratio(grads, "cls", layers) == pytest.approx(np.mean([0.2, 0.4]) / np.mean([1.0, 2.0]), rel=1e-12)
    layers = sink_layers(SurfaceStats({k: np.zeros((4, 2)) for k in STATISTICS}, 3.0, 1).layer_means("cls"))
    # no sink: no ratio (the chapter says "none")
    assert len(layers) == 0 and np.isnan(gradient_ratio(grads, "cls", layers))


def test_cached_statistics_keep_each_segments_values(tiny_lm, tmp_path, monkeypatch):
    """The cache keeps the means (JSON) and each segment's values (an .npz beside them) under one key: read back
    together without a pass, equal to what the pass computed; either file missing, both are computed again."""
    from helpers.context import RunContext
    from helpers.core.encoding import encode_ids
    from helpers.surface import run

    rng = np.random.default_rng(2)
    batch = encode_ids([[2, *rng.integers(5, 23, 4 + k % 5), 3, *rng.integers(5, 23, 3), 3] for k in range(7)],
                       max_length=32)
    first = run.cached_surface_statistics(tiny_lm, batch, ctx=RunContext(cache_dir=tmp_path))
    assert first.per_segment["prev"].shape == (7, tiny_lm.n_layers, tiny_lm.n_heads)
    (npz,) = (tmp_path / "artifacts").glob("surface-stats-segments-*.npz")
    passes = []
    real = run.reduce_maps  # the pass of surface_statistics (the function itself names the cache key's code)
    monkeypatch.setattr(run, "reduce_maps", lambda *a, **k: passes.append(1) or real(*a, **k))
    again = run.cached_surface_statistics(tiny_lm, batch, ctx=RunContext(cache_dir=tmp_path))
    assert passes == [] and again.to_json() == first.to_json()
    assert all(np.array_equal(again.per_segment[k], v) for k, v in first.per_segment.items())
    assert np.array_equal(again.segment_uniform, first.segment_uniform)
    # each segment's values are those of one accumulator fed the segments in the batch's order
    from helpers.core.extract import iter_attention
    from helpers.surface.stats import token_masks

    one = SurfaceAccumulator()
    for ex, attn in sorted(iter_attention(tiny_lm, batch, level="token"), key=lambda item: item[0].index):
        add(one, attn, token_masks(tiny_lm.tokenizer, ex.input_ids))
    for name, values in one.result().per_segment.items():
        # the same maps (the pass's batches are iter_attention's) and the same arithmetic: bit for bit
        np.testing.assert_array_equal(first.per_segment[name], values, err_msg=name)
    npz.unlink()
    run.cached_surface_statistics(tiny_lm, batch, ctx=RunContext(cache_dir=tmp_path))
    assert passes == [1] and npz.exists()
