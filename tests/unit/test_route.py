"""The one route (:func:`helpers.pipeline.route.reduce_maps`): every accumulator speaks ``update(batch, extras)`` /
``merge`` / ``result``; the shards' partials merged in shard order equal one accumulator fed every batch of one pass;
a shard is read from the cache when the maps are there, else made, and written only when kept; the sections reduce
through it and the route imports no section."""
from __future__ import annotations

import ast
import json
from functools import partial
from pathlib import Path

import numpy as np
import pytest

from helpers.cluster.stats import JSAccumulator
from helpers.context import RunContext
from helpers.core.encoding import encode_ids
from helpers.core.map_batches import iter_map_batches
from helpers.norms.stats import NormAccumulator, kind_masks
from helpers.pipeline.extraction import SHARD_SIZE, plan_extraction
from helpers.pipeline.route import reduce_maps
from helpers.reduce import Accumulator
from helpers.segment_pass import SegmentAccumulator
from helpers.sinks.stats import FirstPositionAccumulator
from helpers.surface.stats import SurfaceAccumulator, token_masks

PACKAGE = Path(__file__).resolve().parents[2] / "helpers"


@pytest.mark.parametrize("make", [SurfaceAccumulator, partial(JSAccumulator, 4), NormAccumulator,
                                  FirstPositionAccumulator, partial(SegmentAccumulator, 4, ("surface",))])
def test_every_accumulator_speaks_the_protocol(make):
    acc = make()
    assert isinstance(acc, Accumulator)
    assert not hasattr(acc, "add") and not hasattr(acc, "update_batch")  # one name for one thing


def _segments(n=300, seed=3):
    rng = np.random.default_rng(seed)
    ids = []
    for _ in range(n):
        a, b = rng.integers(5, 23, int(rng.integers(1, 8))), rng.integers(5, 23, int(rng.integers(1, 8)))
        ids.append([2, *a, 3, *b, 3])  # [CLS] A [SEP] B [SEP] in the toy vocabulary
    return encode_ids(ids, max_length=32)


class Seen:
    """A toy accumulator: what it was fed, in order (each batch's example indices and extras), merged in order."""

    def __init__(self):
        self.batches = []

    def update(self, batch, extras):
        self.batches.append(([ex.index for ex in batch.examples], list(extras), tuple(batch.weights.shape)))

    def merge(self, other):
        self.batches += other.batches
        return self

    def result(self):
        return self.batches


def test_shards_in_shard_order_with_their_extras(tiny_lm, tmp_path):
    batch = _segments(600, seed=4)
    shards = plan_extraction(tiny_lm, batch, level="token", cache=False).shards
    assert len(shards) == 3  # two partials merge the same in either order; three do not
    seen = reduce_maps(tiny_lm, batch, Seen, ctx=RunContext(cache_dir=tmp_path), extras=lambda ex: (ex.index * 10,))
    fed = seen.result()
    assert [i for indices, _, _ in fed for i in indices] == [ex.index for shard in shards
                                                              for ex in sorted(shard, key=lambda e: (len(e), e.index))]
    assert all(extras == [(i * 10,) for i in indices] for indices, extras, _ in fed)
    assert all(shape[0] <= 32 for _, _, shape in fed)  # one forward pass of batch_size each
    assert not any(tmp_path.rglob("shard-*.npz"))  # nothing kept: nothing written


def test_merged_shards_equal_one_pass(tiny_lm):
    """Two cache shards reduced and merged == one accumulator fed every batch of one pass, for every statistic of
    the segment pass: the same batches (a shard holds whole batches), the sums grouped by shard."""
    batch = _segments()
    assert len(plan_extraction(tiny_lm, batch, level="token", cache=False).shards) == 2
    assert len(batch.examples) > SHARD_SIZE
    tok, total = tiny_lm.tokenizer, tiny_lm.n_layers * tiny_lm.n_heads
    parts = ("surface", "distances", "norms")
    masks = {ex.index: (token_masks(tok, ex.input_ids) | {"segment": ex.index}, kind_masks(tok, ex.input_ids))
             for ex in batch.examples}
    one = SegmentAccumulator(total, parts, n_layers=tiny_lm.n_layers)
    for mb in iter_map_batches(tiny_lm, batch, maps="weights+norms"):
        one.update(mb, [masks[ex.index] for ex in mb.examples])
    got = reduce_maps(tiny_lm, batch, partial(SegmentAccumulator, total, parts, n_layers=tiny_lm.n_layers),
                      maps="weights+norms", extras=lambda ex: masks[ex.index], ctx=RunContext()).result()
    one = one.result()
    s_got, s_one = got["surface"].result(), one["surface"].result()
    for name, value in s_one.per_head.items():
        # tolerance: the same float64 terms, summed per shard and then merged
        np.testing.assert_allclose(s_got.per_head[name], value, rtol=1e-12, atol=1e-15)
        np.testing.assert_array_equal(s_got.per_segment[name], s_one.per_segment[name])  # each segment's, in order
    assert got["distances"].tokens == one["distances"].tokens and got["distances"].segments == 300
    np.testing.assert_allclose(got["distances"].result(), one["distances"].result(), rtol=1e-12, atol=1e-15)  # as above
    np.testing.assert_array_equal(got["distances"].segment_blocks(), one["distances"].segment_blocks())
    n_got, n_one = got["norms"].result(), one["norms"].result()
    for field in ("weights", "norms", "spearman"):
        np.testing.assert_allclose(getattr(n_got, field), getattr(n_one, field), rtol=1e-12, atol=1e-15)  # as above
    np.testing.assert_array_equal(n_got.segments.weights, n_one.segments.weights)


def test_maps_are_read_when_kept_and_written_only_when_kept(tiny_lm, tmp_path):
    """keep (or the context's keep_maps) writes the shards; a later run reads them and feeds the same batches, bit for
    bit; a damaged shard is made again and rewritten; without keep and without the maps in the cache nothing is
    written."""
    batch = _segments(300, seed=5)
    ctx = RunContext(cache_dir=tmp_path)

    def fed(**kw):
        acc = reduce_maps(tiny_lm, batch, partial(JSAccumulator, tiny_lm.n_layers * tiny_lm.n_heads), ctx=ctx, **kw)
        return acc.result(), acc.tokens

    streamed = fed()
    assert not any(tmp_path.rglob("shard-*.npz"))
    made = fed(keep=True)
    shards = sorted(tmp_path.rglob("shard-*.npz"))
    assert len(shards) == 2 and json.loads((shards[0].parent / "meta.json").read_text())["complete"]
    np.testing.assert_array_equal(made[0], streamed[0])
    stamps = [p.stat().st_mtime_ns for p in shards]
    read = fed()  # not kept, but in the cache: read
    np.testing.assert_array_equal(read[0], made[0])
    assert [p.stat().st_mtime_ns for p in shards] == stamps
    shards[1].write_bytes(b"damaged")
    again = fed()
    np.testing.assert_array_equal(again[0], made[0])
    assert shards[1].stat().st_size > 100  # made and written again: the extraction is kept
    kept = RunContext(cache_dir=tmp_path / "kept", keep_maps=True)
    reduce_maps(tiny_lm, batch, Seen, ctx=kept)
    assert len(list((tmp_path / "kept").rglob("shard-*.npz"))) == 2
    both = RunContext(cache_dir=tmp_path / "both", keep_maps=True)
    reduce_maps(tiny_lm, batch, partial(SegmentAccumulator, 4, ("surface",)), ctx=both, maps="weights+norms",
                extras=lambda ex: (token_masks(tiny_lm.tokenizer, ex.input_ids), None))
    assert not any((tmp_path / "both").rglob("shard-*.npz"))  # weights and norms together are never cached


def test_one_batch_of_maps_alive_when_a_pass_starts(tiny_lm, tmp_path, monkeypatch):
    """When a forward pass starts, the maps of every batch fed before it are gone, made and fed or also written (the
    route's loops release each batch before asking for the next: a pass's own memory is not added to the last
    batch's maps; chapter 9's encoder side held two batches of weights and norms, 0.3 GiB, issue 63's memory note)."""
    import weakref

    import helpers.core.map_batches as map_batches

    fed, alive = [], []

    class Held:
        def update(self, batch, extras):
            fed.extend(weakref.ref(m) for m in (batch.weights, batch.norms) if m is not None)

        def merge(self, other):
            return self

        def result(self):
            return None

    def counting(real):
        def forward(*args, **kwargs):
            alive.append(sum(ref() is not None for ref in fed))
            return real(*args, **kwargs)
        return forward

    for name in ("forward_attentions", "forward_weights_and_norms"):
        monkeypatch.setattr(map_batches, name, counting(getattr(map_batches, name)))
    batch = _segments(300, seed=6)
    for case, kw in enumerate(({}, {"maps": "weights+norms"}, {"keep": True})):
        fed.clear(), alive.clear()
        reduce_maps(tiny_lm, batch, Held, ctx=RunContext(cache_dir=tmp_path / str(case)), **kw)
        assert len(alive) > 2 and len(fed) >= len(alive)
        assert alive == [0] * len(alive), (kw, alive)


def test_word_level_maps_read_back_are_the_passes(tiny_lm, tmp_path):
    """Word-level maps written by one run and read by the next reach the accumulator in the same batches with the
    same values (their padding aside)."""
    from helpers.core.encoding import encode_words

    words = [["the", "cat", "sat", "on", "the", "mat", "."], ["a", "dog", "sat", ","], ["unaffable", "cat", "."]] * 40
    batch = encode_words(tiny_lm.tokenizer, words)

    class Maps(Seen):
        def update(self, batch, extras):
            self.batches.append([(ex.index, batch.weights[b, :, :, :n, :n].cpu().numpy().copy())
                                 for b, (ex, n) in enumerate(zip(batch.examples, batch.lengths.tolist()))])

    ctx = RunContext(cache_dir=tmp_path)
    made = reduce_maps(tiny_lm, batch, Maps, level="word", keep=True, ctx=ctx).result()
    read = reduce_maps(tiny_lm, batch, Maps, level="word", ctx=ctx).result()
    assert [[i for i, _ in b] for b in made] == [[i for i, _ in b] for b in read]
    assert all(np.array_equal(x, y) for b, c in zip(made, read) for (_, x), (_, y) in zip(b, c))


def test_sections_reduce_through_the_route():
    """surface, cluster, norms, sinks and the segment pass call reduce_maps; the route imports no section."""
    for path in ("surface/run.py", "cluster/run.py", "norms/run.py", "sinks/run.py", "segment_pass.py"):
        calls = {n.func.id for n in ast.walk(ast.parse((PACKAGE / path).read_text()))
                 if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)}
        assert "reduce_maps" in calls, path
    imported = {(n.module or "") for n in ast.walk(ast.parse((PACKAGE / "pipeline" / "route.py").read_text()))
                if isinstance(n, ast.ImportFrom)}
    assert all(m.split(".")[1] in ("context", "core", "data", "pipeline", "reduce")
               for m in imported if m.startswith("helpers.")), imported
