"""One reduction: every accumulator speaks ``update`` / ``merge`` / ``result``, and :func:`reduce_shards` (the
local loop of ``surface``, ``cluster`` and ``norms``) equals one accumulator fed every segment in order."""
from __future__ import annotations

import ast
from functools import partial
from pathlib import Path

import numpy as np
import pytest

from helpers.cluster.stats import JSAccumulator
from helpers.norms.stats import NormAccumulator
from helpers.reduce import Accumulator, merge_all, reduce_shards, reduce_stream
from helpers.surface.stats import SurfaceAccumulator
from helpers.syntax.stats import HeadScorer

PACKAGE = Path(__file__).resolve().parents[2] / "helpers"


@pytest.mark.parametrize("make", [SurfaceAccumulator, partial(JSAccumulator, 4), NormAccumulator, HeadScorer])
def test_every_accumulator_speaks_the_protocol(make):
    acc = make()
    assert isinstance(acc, Accumulator)


class Sum:
    """A toy accumulator: the sum of the numbers given and how many were given."""

    def __init__(self):
        self.total, self.count, self.seen = 0.0, 0, []

    def update(self, x, extra=0.0):
        self.total += x + extra
        self.count += 1
        self.seen.append(x)

    def merge(self, other):
        self.total += other.total
        self.count += other.count
        self.seen += other.seen
        return self

    def result(self):
        return self.total, self.count


def test_reduce_stream_and_merge_all_keep_the_order():
    class Example:
        def __init__(self, index):
            self.index = index

    shards = [[(Example(0), 1.0), (Example(1), 2.0)], [], [(Example(2), 3.0)]]
    parts = [reduce_stream(iter(s), (Sum, {e.index: (10.0,) for e, _ in s})) for s in shards]
    total = merge_all(parts, Sum())
    assert total.result() == (36.0, 3) and total.seen == [1.0, 2.0, 3.0]
    plain = reduce_stream(iter(shards[0]), (Sum, None))  # no extras: update(*maps) alone
    assert plain.result() == (3.0, 2)


def _segments(tiny_lm, n=300):
    from helpers.core.encoding import encode_ids

    rng = np.random.default_rng(3)
    ids = []
    for _ in range(n):
        a, b = rng.integers(5, 23, int(rng.integers(1, 8))), rng.integers(5, 23, int(rng.integers(1, 8)))
        ids.append([2, *a, 3, *b, 3])  # [CLS] A [SEP] B [SEP] in the toy vocabulary
    return encode_ids(ids, max_length=32)


def test_reduce_shards_equals_one_pass(tiny_lm):
    """Two cache shards reduced and merged == one accumulator fed every segment, for all three statistics."""
    from helpers.core.extract import iter_attention
    from helpers.core.norm_maps import iter_weights_and_norms
    from helpers.norms.stats import kind_masks
    from helpers.pipeline.extraction import plan_extraction
    from helpers.surface.stats import token_masks

    batch = _segments(tiny_lm)
    assert len(plan_extraction(tiny_lm, batch, level="token", cache=False).shards) == 2
    tok, total = tiny_lm.tokenizer, tiny_lm.n_layers * tiny_lm.n_heads
    surface, js, norms = SurfaceAccumulator(), JSAccumulator(total), NormAccumulator()
    for ex, attn in iter_attention(tiny_lm, batch, level="token"):
        surface.update(attn, token_masks(tok, ex.input_ids))
        js.update(attn)
    for ex, attn, nm in iter_weights_and_norms(tiny_lm, batch):
        norms.update(attn, nm, kind_masks(tok, ex.input_ids))

    got = reduce_shards(tiny_lm, batch, SurfaceAccumulator, extras=lambda ex: (token_masks(tok, ex.input_ids),)).result()
    for name, value in surface.result().per_head.items():
        # tolerance: the same float64 terms, summed per shard and then merged
        np.testing.assert_allclose(got.per_head[name], value, rtol=1e-12, atol=1e-15)
    acc = reduce_shards(tiny_lm, batch, partial(JSAccumulator, total))
    assert acc.tokens == js.tokens and acc.segments == 300
    np.testing.assert_allclose(acc.result(), js.result(), rtol=1e-12, atol=1e-15)  # as above
    ours = reduce_shards(tiny_lm, batch, NormAccumulator, extras=lambda ex: (kind_masks(tok, ex.input_ids),),
                         maps="weights+norms").result()
    np.testing.assert_allclose(ours.weights, norms.result().weights, rtol=1e-12, atol=1e-15)  # as above


def test_sections_reduce_through_one_loop():
    """surface, cluster and norms call reduce_shards; no section keeps a loop of its own over map_shards."""
    for path in ("surface/run.py", "cluster/run.py", "norms/stats.py"):
        calls = {n.func.id for n in ast.walk(ast.parse((PACKAGE / path).read_text()))
                 if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)}
        assert "reduce_shards" in calls and "map_shards" not in calls, path


def test_syntax_run_uses_head_scorer_merge_not_its_private_fields():
    tree = ast.parse((PACKAGE / "syntax" / "run.py").read_text())
    private = sorted({n.attr for n in ast.walk(tree) if isinstance(n, ast.Attribute) and n.attr.startswith("_")
                      and not n.attr.startswith("__")})
    assert private == [], private
