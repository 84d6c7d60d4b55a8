"""The one route's shard task (:func:`reduce_shard`): one cache shard's maps as padded
:class:`~helpers.core.extract.MapBatch` es on the model's device, read from the cache or made by the model's passes
(and then written), each handed to a fresh accumulator. The same task in this process and on a Dask worker
(:func:`helpers.pipeline.engine.map_tasks`), for :func:`helpers.pipeline.route.reduce_maps`, and for
:func:`helpers.pipeline.extraction.extract`, which writes the shards the cache lacks with it (here or on a cluster):
one writer of cache shards.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterator

import numpy as np
import torch

from helpers.core.encoding import Encoded
from helpers.core.extract import MapBatch, bucket, convert, forward_parts, torch_dtype
from helpers.core.map_batches import iter_map_batches
from helpers.data import cache as store_format
from helpers.data.cache import _read_shard, _write_shard


@dataclass(frozen=True)
class ShardJob:
    """What every shard's task shares (sent once to each Dask worker): how to make the maps, where the cache's
    shards are (``directory`` ``None``: nothing is read or written) and the accumulator's maker (``None``: the
    shards are only made and written: :func:`~helpers.pipeline.extraction.extract`)."""

    level: str
    word_mode: str
    maps: str
    batch_size: int
    make: Callable[[], Any] | None
    key: str | None = None
    directory: str | None = None


def reduce_shard(lm, job: ShardJob, payload: tuple):
    """One shard's partial (the task of :func:`~helpers.pipeline.route.reduce_maps`, here or on a worker): ``payload``
    is ``(number, shard, extras by example index or None)``; a fresh accumulator (``job.make()``) updated with each of
    the shard's batches (:func:`shard_batches`). Without an accumulator, the shard is only made and written."""
    number, shard, extras = payload
    acc = None if job.make is None else job.make()
    for batch in shard_batches(lm, job, number, shard):
        if acc is not None:
            acc.update(batch, [() if extras is None else extras[ex.index] for ex in batch.examples])
        del batch  # its maps go before the next pass makes its own (else two batches' maps are alive at once)
    return acc


def shard_batches(lm, job: ShardJob, number: int, shard: list[Encoded]) -> Iterator[MapBatch]:
    """The maps of shard ``number`` as :class:`~helpers.core.extract.MapBatch` es on the model's device, one per forward
    pass (length buckets of ``job.batch_size``, cut by :func:`~helpers.core.extract.forward_parts`): read from the
    cache when the shard is there and sound, else made by the passes (:func:`~helpers.core.map_batches.iter_map_batches`)
    and, when ``job`` has a cache folder, written there as the cache's dtype (the values the batches then hold)."""
    path = None if job.directory is None else Path(job.directory) / f"shard-{number:05d}.npz"
    if path is not None:
        try:
            stored = _read_shard(path, lm.n_layers, lm.n_heads, job.key, [ex.index for ex in shard], maps=job.maps)
        except ValueError:
            stored = None  # missing or damaged: made again below
        if stored is not None:
            yield from _stored_batches(lm, shard, stored, job)
            return
    dtype = np.dtype(store_format.SHARD_DTYPE)
    written: list = []
    for batch in iter_map_batches(lm, shard, batch_size=job.batch_size, maps=job.maps, level=job.level,
                                  word_mode=job.word_mode):
        if path is not None:
            batch = _as_stored(batch, dtype, written)
        yield batch
        del batch  # released before the next pass, as the consumer releases its own reference (reduce_shard)
    if path is not None:
        written.sort(key=lambda pair: pair[0].index)
        _write_shard(path, job.key, written)


def _as_stored(batch: MapBatch, dtype: np.dtype, into: list) -> MapBatch:
    """``batch`` with its maps (weights or norms) as the cache stores them (``dtype``), each example's appended to
    ``into`` as ``(example, map [layer, head, n, n])`` on the host: one copy of the pass to the host."""
    maps = batch.weights if batch.weights is not None else batch.norms
    host = convert(maps, dtype)
    into.extend((ex, host[b, :, :, :n, :n]) for b, (ex, n) in enumerate(zip(batch.examples, batch.lengths.tolist())))
    if maps.dtype != torch_dtype(dtype):
        maps = maps.to(torch_dtype(dtype))
        lengths = batch.lengths.tolist()
        return (MapBatch(batch.examples, maps, lengths=lengths) if batch.weights is not None
                else MapBatch(batch.examples, None, maps, lengths=lengths))
    return batch


def _stored_batches(lm, shard: list[Encoded], stored: dict[int, np.ndarray], job: ShardJob) -> Iterator[MapBatch]:
    """A cached shard's maps in the batches the model's passes would make (:func:`shard_batches`), right-padded with
    zeros, on the model's device."""
    for group in bucket(shard, batch_size=job.batch_size):
        for part in forward_parts(lm, group):
            sizes = [stored[ex.index].shape[-1] for ex in part]
            P = max(sizes)
            padded = torch.zeros(len(part), lm.n_layers, lm.n_heads, P, P, dtype=torch.float32)
            for b, ex in enumerate(part):
                padded[b, :, :, : sizes[b], : sizes[b]] = torch.from_numpy(stored[ex.index])
            padded = padded.to(lm.device)
            yield (MapBatch(part, padded, lengths=sizes) if job.maps == "weights"
                   else MapBatch(part, None, padded, lengths=sizes))
            del padded  # before the next batch is padded
