"""helpers/README.md's worked example is code that works: its accumulator, run as the route runs it (batches of
padded maps, one accumulator per shard, merged in shard order), against slow loops over each input's map."""
from __future__ import annotations

import re
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import torch

README = Path(__file__).resolve().parents[2] / "helpers" / "README.md"


def _accumulator():
    """The README's first Python block, executed: its ``DistanceAccumulator``."""
    block = re.findall(r"```python\n(.*?)```", README.read_text(encoding="utf-8"), re.S)[0]
    names: dict = {}
    exec(compile(block, str(README), "exec"), names)
    return names["DistanceAccumulator"]


def _batch(maps, first_index):
    """A MapBatch of ``maps`` (each ``[layer, head, n, n]``) right-padded with nonzero garbage, which must count for
    nothing."""
    from helpers.core.extract import MapBatch

    P = max(m.shape[-1] for m in maps)
    weights = torch.full((len(maps), *maps[0].shape[:2], P, P), 0.7)
    for b, m in enumerate(maps):
        weights[b, :, :, : m.shape[-1], : m.shape[-1]] = torch.as_tensor(m)
    examples = [SimpleNamespace(index=first_index + b) for b in range(len(maps))]
    return MapBatch(examples, weights, lengths=[m.shape[-1] for m in maps])


def test_the_readmes_accumulator_against_loops():
    Distance = _accumulator()
    rng = np.random.default_rng(0)
    layers, heads = 2, 3
    maps = [rng.dirichlet(np.ones(n), size=(layers, heads, n)).astype(np.float32) for n in (3, 5, 4, 6, 2)]
    shards = [[maps[:2], maps[2:3]], [maps[3:]]]  # two shards: the first of two batches
    partials = []
    for shard in shards:
        acc, start = Distance(), 0
        for group in shard:
            acc.update(_batch(group, start), [()] * len(group))
            start += len(group)
        partials.append(acc)
    got = partials[0].merge(partials[1]).result()

    expected, queries = np.zeros((layers, heads)), 0
    for m in maps:
        n = m.shape[-1]
        for layer in range(layers):
            for head in range(heads):
                for q in range(n):
                    expected[layer, head] += sum(float(m[layer, head, q, k]) * abs(q - k) for k in range(n))
        queries += n
    expected /= queries
    assert got.shape == (layers, heads)
    # the same float32 maps summed in float64 in another order: a few units of 1e-16 of sums below 10
    np.testing.assert_allclose(got, expected, rtol=1e-13)
