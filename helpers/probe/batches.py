"""Probe batches spilled to disk and streamed back, so probing memory does not grow with the corpus.

A probe trains for several epochs, seeds and probe kinds on the same padded batches (features of
every map and its transpose, ``[batch, n, n + 1, 2K]``). Held in RAM for GUM train/dev/test and EWT
dev, for a model and its random-init control, they took 13.6 GB with a 6 x 12 model. Here they are
built once, one cache shard at a time, and written to one file per corpus:

``probe-<key>.bin``   for each batch: its sentences' word vectors ``[m, dim]`` as float32 (``m`` words),
                      then their word-level maps as float16 ``[query, key, K]`` over ``m + 2`` positions
                      ([CLS] first, [SEP] last). Unpadded, and each map once: the padded
                      features hold every map twice (itself and its transpose), which took 2.3 times the
                      bytes; they are made from these when a batch is read
                      (:func:`helpers.probe.stats.fill_sentence`, the one function that makes them in memory
                      too). The probes read the maps at half precision in both forms (in memory too), so
                      spilled and in-memory batches are equal; a probe's weighted sum is insensitive to that
                      rounding, unlike the argmax analyses, which read the float32 cache
``probe-<key>.json``  the index (written last, atomically: its presence marks the file complete):
                      per batch its sentence indices, their word counts, padded length and byte offset

A random-init control's batches hold the same sentences in the same batches with the model's word vectors:
its file holds its maps only and reads the vectors from the model's (``vectors_from`` in its index).

The spill lies in the folder named by the key of the maps it was made from
(:func:`helpers.data.cache.cache_key`), whether or not those maps are in the cache: the probes make it from
cached maps when there are, else from the model's pass itself (the maps are then never written). On an
accelerator the batches of maps the cache lacks are not spilled: they are made on the device from the model's
passes and held there (:mod:`helpers.probe.device_batches`, the same batches).

The key names those maps, the word vectors, the batch size and the code that builds the batches
(:func:`helpers.digest.code_digest` of :func:`helpers.probe.run.probe_data`, whose imports include this
module): a change to that code or to this layout builds them again, with no format number to bump.

:class:`DiskBatches` reads one batch at a time with ordinary file reads (not a memory map, whose
touched pages would count as resident memory), and rebuilds labels and masks from the gold heads.
Batches follow :meth:`ProbeData.batches` with the cache shards as groups, so an in-memory
:class:`~helpers.probe.stats.ProbeData` with the same groups yields exactly the same batches (tested).
"""
from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Iterator, Sequence

import numpy as np
import torch

try:  # POSIX advisory locks; without them (Windows) a spill is removed whoever else reads it
    import fcntl
except ImportError:  # pragma: no cover
    fcntl = None

from helpers.data.cache import write_cache_json
from helpers.data.files import atomic_write
from helpers.probe.stats import Batch, ProbeData, assemble_batch, fill_sentence


class DiskBatches(Sequence):
    """The padded batches of a spilled :class:`ProbeData`, read from disk on demand.

    ``len()``, indexing and iteration give :class:`~helpers.probe.stats.Batch` objects; ``features=False``
    (see :meth:`without_features`) leaves the attention features empty (the Distances + words probe
    uses none). ``vectors``: the spilled batches whose file holds this file's word vectors (a random-init
    control's batches read the model's: the same sentences in the same batches with the same vectors), or
    ``None`` when this file holds its own.
    """

    def __init__(self, data: ProbeData, path: Path, index: dict, *, features: bool = True,
                 vectors: "DiskBatches | None" = None):
        self.data, self.path, self.index, self.features, self.vectors = data, Path(path), index, features, vectors
        self.batch_size = int(index["batch_size"])

    def __len__(self) -> int:
        return len(self.index["batches"])

    def __getitem__(self, k: int) -> Batch:
        return next(self._batches([k], reuse=False))

    def __iter__(self) -> Iterator[Batch]:
        for k in range(len(self)):
            yield self[k]

    def stream(self, order) -> Iterator[Batch]:
        """The batches at ``order`` (indices), read into buffers sized for the largest batch and reused:
        each batch is valid until the next one is read. The training loops read every batch once an
        epoch; fresh tensors per batch would cost a page fault per 4 KiB, which took as long as the
        arithmetic (an epoch of an attention probe is one read of the file, converted to float32)."""
        return self._batches(order, reuse=True)

    def _batches(self, order, *, reuse: bool) -> Iterator[Batch]:
        """Each batch at ``order``: its bytes read at once, its features made at half precision in NumPy (one
        :func:`fill_sentence` per sentence: the same bytes the padded float16 batches of the in-memory form
        hold) and converted to float32 in one contiguous copy; with ``reuse``, into buffers kept from batch to
        batch (see :meth:`stream`)."""
        K, dim = self.index["n_maps"], self.index["dim"]
        K2 = 2 * K if self.features else 0
        entries = self.index["batches"]
        sizes = [(len(e["indices"]) * e["n"] * (e["n"] + 1) * K2, len(e["indices"]) * e["n"] * K2 * 2,
                  len(e["indices"]) * e["n"] * dim, e["bytes"]) for e in entries]
        most = [max((z[i] for z in sizes), default=0) for i in range(4)]
        if self.vectors is not None:  # room for the other file's vectors before the maps
            most[3] += max((sum(e["words"]) * dim * 4 for e in entries), default=0)
            sizes = [(*z[:3], z[3] + sum(e["words"]) * dim * 4) for z, e in zip(sizes, entries)]
        buffers = None
        own = self.vectors is None  # the vectors in this file, before each batch's maps, or in the other's
        with open(self.path, "rb") as handle, open(self.path if own else self.vectors.path, "rb") as other:
            for k in order:
                entry = entries[int(k)]
                indices, n, words = entry["indices"], entry["n"], entry["words"]
                B = len(indices)
                if buffers is None or not reuse:
                    shape = most if reuse else sizes[int(k)]
                    # float16 features and ROOT parts (one buffer: one conversion), float32 copies, vectors, bytes
                    buffers = (np.empty(shape[0] + shape[1], np.float16), torch.empty(shape[0] + shape[1]),
                               torch.empty(shape[2]), bytearray(shape[3]))
                half, full, vec_buf, raw = buffers
                vector_bytes = sum(words) * dim * 4  # the batch's vectors, then its maps
                if own:
                    wanted = entry["bytes"] if self.features else vector_bytes  # without features: the vectors only
                    view = memoryview(raw)[:wanted]
                    handle.seek(entry["offset"])
                    if handle.readinto(view) != wanted:
                        raise ValueError(f"{self.path}: truncated probe batch file")
                else:  # the vectors from the other file, then this file's maps after them in the buffer
                    wanted = vector_bytes + (entry["bytes"] if self.features else 0)
                    view = memoryview(raw)[:wanted]
                    other.seek(self.vectors.index["batches"][int(k)]["offset"])
                    handle.seek(entry["offset"])
                    if (other.readinto(view[:vector_bytes]) != vector_bytes
                            or handle.readinto(view[vector_bytes:]) != wanted - vector_bytes):
                        raise ValueError(f"{self.path}: truncated probe batch file")
                f, r = B * n * (n + 1) * K2, B * n * K2 * 2
                feats16, root16 = half[:f].reshape(B, n, n + 1, K2), half[f : f + r].reshape(B, n, K2, 2)
                vectors = vec_buf[: B * n * dim].view(B, n, dim)
                V = vectors.numpy()
                vecs = np.frombuffer(view, np.float32, count=sum(words) * dim)
                at, start = vector_bytes, 0
                for b, m in enumerate(words):
                    # zeros where fill_sentence writes nothing: the ROOT column and the padding
                    feats16[b, :, 0] = 0
                    feats16[b, m:] = 0
                    feats16[b, :m, m + 1 :] = 0
                    root16[b, m:] = 0
                    V[b, m:] = 0
                    vec = vecs[start * dim : (start + m) * dim].reshape(m, dim)
                    start += m
                    if not self.features:
                        V[b, :m] = vec
                        continue
                    size = (m + 2) * (m + 2) * K
                    maps = np.frombuffer(view, np.float16, count=size, offset=at).reshape(m + 2, m + 2, K)
                    at += 2 * size
                    fill_sentence(feats16[b], root16[b], V[b], maps, vec)
                flat = full[: f + r]
                flat.copy_(torch.from_numpy(half[: f + r]))  # float16 -> float32, contiguous
                yield assemble_batch(self.data, indices, flat[:f].view(B, n, n + 1, K2), flat[f:].view(B, n, K2, 2),
                                     vectors)

    def without_features(self) -> "DiskBatches":
        return DiskBatches(self.data, self.path, self.index, features=False, vectors=self.vectors)


def load_spilled(data: ProbeData, path: Path, key: str, *, vectors: DiskBatches | None = None) -> DiskBatches | None:
    """The spilled batches at ``path`` if they are complete and belong to ``key`` (and, for a file whose word
    vectors are in another, ``vectors`` are those batches); else ``None``."""
    index_path = Path(path).with_suffix(".json")
    try:
        index = json.loads(index_path.read_text())
        expected = sum(entry["bytes"] for entry in index["batches"])
        if index.get("key") != key or os.path.getsize(path) != expected:
            return None
        source = index.get("vectors_from")
        if source is not None and (vectors is None or source != {"path": vectors.path.name, "key": vectors.index["key"]}):
            return None
    except (OSError, ValueError, KeyError, TypeError):
        return None
    data.n_maps, data.dim_ = int(index["n_maps"]), int(index["dim"])
    return DiskBatches(data, Path(path), index, vectors=vectors if index.get("vectors_from") else None)


def spill(data: ProbeData, shards, path: Path, key: str, batch_size: int, *,
          vectors: DiskBatches | None = None) -> DiskBatches:
    """Write the batches of ``data`` to ``path``, built shard by shard, and return them streamed.

    ``shards`` yields ``(positions, maps, vectors)`` per cache shard: the sentences' positions in
    ``data`` (as in ``data.groups``) with their float16 maps ``[layer, head, n + 2, n + 2]`` and word
    vectors ``[n, dim]``. Only one shard's maps are in memory at a time. With ``vectors`` (spilled batches of
    the same sentences in the same batches, with the same word vectors: a model's, for its random-init
    control) the file holds the maps only and reads the vectors from that file (checked batch by batch).
    """
    path = Path(path)
    entries: list[dict] = []
    meta = {"n_maps": data.n_maps, "dim": data.dim}

    def write(handle) -> None:
        offset = 0
        for positions, maps, vecs in shards:
            local = ProbeData(list(maps), [data.heads[p] for p in positions], [data.punct[p] for p in positions],
                              list(vecs))
            meta["n_maps"], meta["dim"] = local.n_maps, local.dim
            K = local.n_maps
            for group in local.batches(batch_size):
                words = [int(local.maps[i].shape[-1] - 2) for i in group]
                indices = [positions[i] for i in group]
                parts = []
                if vectors is None:  # vectors first: float32 at the batch's start, aligned as the reader's buffer is
                    parts += [np.ascontiguousarray(local.vectors[i], dtype=np.float32) for i in group]
                else:
                    theirs = vectors.index["batches"][len(entries)] if len(entries) < len(vectors) else {}
                    if theirs.get("indices") != indices or theirs.get("words") != words:
                        raise ValueError(f"{path}: the batches of {vectors.path} hold other sentences: their word "
                                         "vectors cannot be shared")
                parts += [np.ascontiguousarray(local.maps[i].reshape(K, m + 2, m + 2).transpose(1, 2, 0))
                          for i, m in zip(group, words)]  # then the float16 maps
                size = 0
                for part in parts:
                    handle.write(part.data)  # no bytes copy
                    size += part.nbytes
                del parts
                entries.append({"indices": indices, "words": words, "n": max(words), "offset": offset, "bytes": size})
                offset += size
            del local, maps, vecs  # this shard's maps go before the next shard is read

    atomic_write(path, write)
    if vectors is not None and len(entries) != len(vectors):
        raise ValueError(f"{path}: {len(entries)} batches, but {vectors.path} has {len(vectors)}: their word vectors "
                         "cannot be shared")
    index = {"key": key, "batch_size": batch_size, **meta, "batches": entries}
    if vectors is not None:
        index["vectors_from"] = {"path": vectors.path.name, "key": vectors.index["key"]}
        meta["dim"] = index["dim"] = vectors.index["dim"]
    write_cache_json(path.with_suffix(".json"), index)
    data.n_maps, data.dim_ = meta["n_maps"], meta["dim"]
    return DiskBatches(data, path, index, vectors=vectors)


# ------------------------------------------------------------------ who reads a spill: a shared lock per process

_HELD: dict[str, int] = {}  # spill path -> the descriptor of its lock file, held shared by this process


def hold(path: Path) -> None:
    """Take this process's shared lock on the spill at ``path`` (its ``.lock`` file beside it), before the spill is
    read or written: while it is held, another process's :func:`remove` leaves the spill alone. Two runs of the same
    probes at once (two notebooks, two commands) then share the batches, and the last one to finish removes them."""
    if fcntl is None or str(path) in _HELD:
        return
    lock = Path(path).with_suffix(".lock")
    while True:
        fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o644)
        fcntl.flock(fd, fcntl.LOCK_SH)
        try:
            if os.stat(lock).st_ino == os.fstat(fd).st_ino:  # not a lock file another process removed meanwhile
                break
        except FileNotFoundError:
            pass
        os.close(fd)
    _HELD[str(path)] = fd


def remove(path: Path) -> int:
    """Remove the spill at ``path`` (its batches, index and lock) unless another process holds it (:func:`hold`);
    this process's hold ends either way. The bytes removed (0 when another process still reads it)."""
    path = Path(path)
    fd = _HELD.pop(str(path), None)
    if fcntl is not None and fd is None:  # not held here (removed already, or made by another process)
        try:
            fd = os.open(path.with_suffix(".lock"), os.O_RDWR)
        except FileNotFoundError:
            pass
    if fd is not None:  # (only with fcntl: hold takes no lock without it)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:  # another process reads it: the last one removes it
            os.close(fd)
            return 0
    freed = 0
    try:
        for part in (path, path.with_suffix(".json"), path.with_suffix(".lock")):
            try:
                freed += part.stat().st_size
                part.unlink()
            except FileNotFoundError:
                pass
    finally:
        if fd is not None:
            os.close(fd)
    return freed
