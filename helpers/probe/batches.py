"""Probe batches spilled to disk and streamed back, so probing memory does not grow with the corpus.

A probe trains for several epochs, seeds and probe kinds on the same padded batches (features of
every map and its transpose, ``[batch, n, n + 1, 2K]``). Held in RAM for GUM train/dev/test and EWT
dev, for a model and its random-init control, they took 13.6 GB with a 6 x 12 model. Here they are
built once, one cache shard at a time, and written to one file per corpus:

``probe-<key>.bin``   for each batch: ``features [B, n, n + 1, 2K]`` and ``root [B, n, 2K, 2]`` as
                      float16, ``vectors [B, n, dim]`` as float32. The probes read the maps at half
                      precision in both forms (in memory too), so spilled and in-memory batches are
                      equal; a probe's weighted sum is insensitive to that rounding, unlike the argmax
                      analyses, which read the float32 cache
``probe-<key>.json``  the index (written last, atomically: its presence marks the file complete):
                      per batch its sentence indices, padded length and byte offset

The key names the cached maps, the word vectors, the batch size and the code that builds the batches
(:func:`helpers.digest.code_digest` of :func:`helpers.probe.run.probe_data`, whose imports include this
module): a change to that code or to this layout builds them again, with no format number to bump.

:class:`DiskBatches` reads one batch at a time with ordinary file reads (not a memory map, whose
touched pages would count as resident memory), and rebuilds labels and masks from the gold heads.
Batches follow :meth:`ProbeData.batches` with the cache shards as groups, so an in-memory
:class:`~helpers.probe.probes.ProbeData` with the same groups yields exactly the same batches (tested).
"""
from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Iterator, Sequence

import numpy as np
import torch

from helpers.data.cache import write_cache_json
from helpers.data.files import atomic_write
from helpers.probe.probes import Batch, ProbeData, assemble_batch, make_batch


class DiskBatches(Sequence):
    """The padded batches of a spilled :class:`ProbeData`, read from disk on demand.

    ``len()``, indexing and iteration give :class:`~helpers.probe.probes.Batch` objects; ``features=False``
    (see :meth:`without_features`) skips reading the attention features (the Distances + words probe
    uses none).
    """

    def __init__(self, data: ProbeData, path: Path, index: dict, *, features: bool = True):
        self.data, self.path, self.index, self.features = data, Path(path), index, features
        self.batch_size = int(index["batch_size"])

    def __len__(self) -> int:
        return len(self.index["batches"])

    def __getitem__(self, k: int) -> Batch:
        entry = self.index["batches"][k]
        indices, n, offset = entry["indices"], entry["n"], entry["offset"]
        B, K2, dim = len(indices), 2 * self.index["n_maps"], self.index["dim"]
        sizes = self._sizes(k)
        with open(self.path, "rb") as handle:
            if self.features:
                handle.seek(offset)
                feats = _read(handle, np.float16, sizes[0]).view(B, n, n + 1, K2).float()
                root = _read(handle, np.float16, sizes[1]).view(B, n, K2, 2).float()
            else:
                feats, root = torch.zeros(B, n, n + 1, 0), torch.zeros(B, n, 0, 2)
                handle.seek(offset + 2 * (sizes[0] + sizes[1]))
            vectors = _read(handle, np.float32, sizes[2]).view(B, n, dim)
        return assemble_batch(self.data, indices, feats, root, vectors)

    def __iter__(self) -> Iterator[Batch]:
        for k in range(len(self)):
            yield self[k]

    def stream(self, order) -> Iterator[Batch]:
        """The batches at ``order`` (indices), read into buffers sized for the largest batch and reused:
        each batch is valid until the next one is read. The training loops read every batch once an
        epoch; fresh tensors per batch would cost a page fault per 4 KiB, which took as long as the
        arithmetic (an epoch of an attention probe is one read of the file, converted to float32)."""
        K2, dim = 2 * self.index["n_maps"], self.index["dim"]
        sizes = [self._sizes(k) for k in range(len(self))]
        most = [max((z[i] for z in sizes), default=0) for i in range(3)]
        half = np.empty(most[0] + most[1] if self.features else 0, np.float16)
        full = torch.empty(half.size, dtype=torch.float32)
        vec = np.empty(most[2], np.float32)
        with open(self.path, "rb") as handle:
            for k in order:
                entry = self.index["batches"][int(k)]
                indices, n, offset = entry["indices"], entry["n"], entry["offset"]
                B = len(indices)
                f, r, v = sizes[int(k)]
                if self.features:
                    handle.seek(offset)
                    _read_into(handle, half[: f + r])
                    flat = full[: f + r]
                    flat.copy_(torch.from_numpy(half[: f + r]))
                    feats, root = flat[:f].view(B, n, n + 1, K2), flat[f:].view(B, n, K2, 2)
                else:
                    feats, root = torch.zeros(B, n, n + 1, 0), torch.zeros(B, n, 0, 2)
                    handle.seek(offset + 2 * (f + r))
                _read_into(handle, vec[:v])
                yield assemble_batch(self.data, indices, feats, root, torch.from_numpy(vec[:v]).view(B, n, dim))

    def _sizes(self, k: int) -> tuple[int, int, int]:
        """Element counts of batch ``k``'s features, root parts and word vectors."""
        entry = self.index["batches"][k]
        B, n, K2 = len(entry["indices"]), entry["n"], 2 * self.index["n_maps"]
        return B * n * (n + 1) * K2, B * n * K2 * 2, B * n * self.index["dim"]

    def without_features(self) -> "DiskBatches":
        return DiskBatches(self.data, self.path, self.index, features=False)


def _read_into(handle, out: np.ndarray) -> None:
    """Fill ``out`` from ``handle`` (raises on a short read: a truncated file)."""
    if handle.readinto(memoryview(out).cast("B")) != out.nbytes:
        raise ValueError(f"{handle.name}: truncated probe batch file")


def _read(handle, dtype, count: int) -> torch.Tensor:
    array = np.fromfile(handle, dtype=dtype, count=count)
    if array.size != count:
        raise ValueError(f"{handle.name}: truncated probe batch file")
    return torch.from_numpy(array)


def load_spilled(data: ProbeData, path: Path, key: str) -> DiskBatches | None:
    """The spilled batches at ``path`` if they are complete and belong to ``key``; else ``None``."""
    index_path = Path(path).with_suffix(".json")
    try:
        index = json.loads(index_path.read_text())
        expected = sum(entry["bytes"] for entry in index["batches"])
        if index.get("key") != key or os.path.getsize(path) != expected:
            return None
    except (OSError, ValueError, KeyError, TypeError):
        return None
    data.n_maps, data.dim_ = int(index["n_maps"]), int(index["dim"])
    return DiskBatches(data, Path(path), index)


def spill(data: ProbeData, shards, path: Path, key: str, batch_size: int) -> DiskBatches:
    """Write the batches of ``data`` to ``path``, built shard by shard, and return them streamed.

    ``shards`` yields ``(positions, maps, vectors)`` per cache shard: the sentences' positions in
    ``data`` (as in ``data.groups``) with their float16 maps ``[layer, head, n + 2, n + 2]`` and word
    vectors ``[n, dim]``. Only one shard's maps are in memory at a time.
    """
    path = Path(path)
    entries: list[dict] = []
    meta = {"n_maps": data.n_maps, "dim": data.dim}

    def write(handle) -> None:
        offset = 0
        for positions, maps, vectors in shards:
            local = ProbeData(list(maps), [data.heads[p] for p in positions], [data.punct[p] for p in positions],
                              list(vectors))
            meta["n_maps"], meta["dim"] = local.n_maps, local.dim
            for group in local.batches(batch_size):
                batch = make_batch(local, group, dtype=torch.float16)  # the maps' own precision: no float32 copy
                parts = (batch.features.numpy(), batch.root_parts.numpy(),
                         batch.vectors.numpy().astype(np.float32, copy=False))
                size = 0
                for part in parts:
                    handle.write(np.ascontiguousarray(part).data)  # no bytes copy
                    size += part.nbytes
                entries.append({"indices": [positions[i] for i in group], "n": int(batch.heads.shape[1]),
                                "offset": offset, "bytes": size})
                offset += size
                del batch, parts
            del local, maps, vectors  # this shard's maps go before the next shard is read

    atomic_write(path, write)
    index = {"key": key, "batch_size": batch_size, **meta, "batches": entries}
    write_cache_json(path.with_suffix(".json"), index)
    data.n_maps, data.dim_ = meta["n_maps"], meta["dim"]
    return DiskBatches(data, path, index)
