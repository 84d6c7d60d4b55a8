"""The probes' padded batches built where the model's passes leave the maps: on an accelerator, nothing on the host.

When the probes train on a device other than the CPU, hold their batches there (:func:`helpers.probe.stats.batches_on`:
they fit in :data:`~helpers.probe.stats.RESIDENT_SHARE` of its free memory) and the maps are not in the cache, the
batches are made on that device from the model's passes instead of being spilled to disk and read back
(:mod:`helpers.probe.batches`). One cache shard at a time: each forward pass's word-level maps
(:func:`helpers.core.map_batches.iter_map_batches`, padded, float32, on the model's device) are rounded to float16
there and their features and ROOT parts written into the shard's padded batches by :func:`batch_features`, the
batched torch form of :func:`~helpers.probe.stats.encoder_layout` and :func:`~helpers.probe.stats.fill_sentence`;
then the pass's float32 maps go, before the next pass runs. No map is copied to the host and no file is written;
only the word vectors (small, made on the host as ever) and the labels and masks go to the device. The held
:class:`~helpers.probe.stats.ResidentBatches` are the data's ``spilled`` batches (no file: what
:func:`~helpers.probe.stats.prepared` gives) and those :func:`~helpers.probe.stats.batches_on` finds for the device;
:func:`helpers.probe.run.remove_spills` lets them go.

The batches are those of the spill, bit for bit (tested): the same passes (the streaming store's,
:meth:`helpers.data.cache.AttentionStore.shard_items`), the same rounding of the same float32 maps to float16, the same
sentences in the same batches (:meth:`~helpers.probe.stats.ProbeData.batches` within each shard) and the same word
vectors, labels and masks.

>>> from helpers.probe.run import probe_data
>>> data = probe_data(lm, "gum:train", batch_size=32)     # lm on "cuda": made there   # doctest: +SKIP
>>> data.spilled                                         # no file: the batches held on the device   # doctest: +SKIP
<helpers.probe.stats.ResidentBatches object at ...>
"""
from __future__ import annotations

from types import SimpleNamespace
from typing import Callable, Sequence

import numpy as np
import torch

from helpers.core.models import LoadedModel
from helpers.probe.stats import Batch, ProbeData, ResidentBatches, assemble_batch


def batch_features(maps: torch.Tensor, words: torch.Tensor, lead: torch.Tensor, trail: torch.Tensor,
                   n: int) -> tuple[torch.Tensor, torch.Tensor]:
    """``(features [b, n, n + 1, 2K], root [b, n, 2K, 2])`` of ``b`` sentences padded to ``n`` words, from their
    right-padded word-level ``maps [b, K, position, position]`` (``K = layer * head``, flattened as
    ``layer * n_heads + head``; sentence ``s`` holds ``lead[s]`` special positions, its ``words[s]`` words, then
    ``trail[s]``: an encoder's 1, 1; a decoder's 1 or 0, 0), in the maps' dtype and on their device: what
    :func:`~helpers.probe.stats.fill_sentence` writes for each sentence of its map in
    :func:`~helpers.probe.stats.encoder_layout`, and zeros beyond its words (and in the ROOT column of ``features``).

    ``words``, ``lead``, ``trail``: ``[b]`` integer tensors on the maps' device. Every value is copied, none computed,
    so the result holds the maps' own bits."""
    b, K, P, _ = maps.shape
    device = maps.device
    i = torch.arange(n, device=device)
    real = i[None, :] < words[:, None]                                    # [b, n]: a word, not padding
    pos = (lead[:, None] + i[None, :]).clamp(max=P - 1)                   # [b, n]: each word's position
    sep = (lead + words).clamp(max=P - 1)                                 # [b]: [SEP]'s position (where there is one)
    A = maps.permute(0, 2, 3, 1)                                          # [b, query, key, K] (a view)
    rows = A.gather(1, pos[:, :, None, None].expand(b, n, P, K))          # [b, n, key, K]: the words' rows
    cols = A.gather(2, pos[:, None, :, None].expand(b, P, n, K))          # [b, query, n, K]: the words' columns
    block = rows.gather(2, pos[:, None, :, None].expand(b, n, n, K))      # [b, n, n, K]: word to word
    pair = (real[:, :, None] & real[:, None, :])[..., None]               # [b, n, n, 1]
    zero = maps.new_zeros(())
    feats = maps.new_zeros(b, n, n + 1, 2 * K)
    feats[:, :, 1:, :K] = torch.where(pair, block, zero)                  # A[i, j]: the dependent attends
    feats[:, :, 1:, K:] = torch.where(pair, block.transpose(1, 2), zero)  # A[j, i]: the candidate attends
    cls = (real & (lead[:, None] > 0))[..., None]                         # [b, n, 1]: [CLS] (or BOS) is there
    has_sep = (real & (trail[:, None] > 0))[..., None]
    at_sep = sep[:, None, None, None]
    root = maps.new_zeros(b, n, 2 * K, 2)
    root[:, :, :K, 0] = torch.where(cls, rows[:, :, 0], zero)             # A[i, CLS]
    root[:, :, K:, 0] = torch.where(cls, cols[:, 0], zero)                # A[CLS, i]
    root[:, :, :K, 1] = torch.where(has_sep, rows.gather(2, at_sep.expand(b, n, 1, K))[:, :, 0], zero)  # A[i, SEP]
    root[:, :, K:, 1] = torch.where(has_sep, cols.gather(1, at_sep.expand(b, 1, n, K))[:, 0], zero)     # A[SEP, i]
    return feats, root


def shard_shapes(data: ProbeData, groups: Sequence[Sequence[int]], batch_size: int) -> list[list[list[int]]]:
    """The batches of each cache shard: ``groups`` (the positions of each shard's sentences in ``data``, in the
    shard's order) cut by :meth:`ProbeData.batches` as :func:`helpers.probe.batches.spill` cuts them; per shard a
    list of batches, each the positions of its sentences."""
    out = []
    for positions in groups:
        local = ProbeData([], [data.heads[p] for p in positions], [data.punct[p] for p in positions], [])
        out.append([[positions[i] for i in group] for group in local.batches(batch_size)])
    return out


def held_bytes(data: ProbeData, batches: Sequence[Sequence[Sequence[int]]], n_maps: int, dim: int) -> int:
    """The bytes the batches of :func:`shard_shapes` take held on a device (:meth:`ResidentBatches.nbytes` of their
    shapes, as of a spill's index): what is weighed against the device's free memory before any pass runs."""
    entries = [{"indices": group, "n": max(len(data.heads[p]) for p in group)} for shard in batches for group in shard]
    return ResidentBatches.nbytes(SimpleNamespace(index={"n_maps": n_maps, "dim": dim, "batches": entries}))


def device_batches(lm: LoadedModel, store, data: ProbeData, batches: Sequence[Sequence[Sequence[int]]],
                   positions: dict[int, int], batch_size: int, device, *,
                   vectors: Callable[[list], dict[int, np.ndarray]] | None = None,
                   shared: Sequence[Batch] | None = None) -> ResidentBatches:
    """Every batch of ``data`` made on ``device`` from the passes of ``lm`` over the streaming ``store``'s shards
    (:class:`~helpers.data.cache.AttentionStore` with nothing cached), and held there (:class:`ResidentBatches`, of
    ``batch_size``).

    ``batches``: :func:`shard_shapes` (per shard, the positions in ``data`` of each batch's sentences);
    ``positions``: each example's position in ``data`` (by example index). The word vectors come from
    ``vectors(shard)`` (``{example index: [m, dim]}``, made on the host) or, for a random-init control, from
    ``shared`` (the model's batches of the same sentences in the same batches, on ``device``: their tensors are
    used, not copied). On ``device`` at a time: the batches made so far (float16 features and ROOT parts), one
    pass's float32 maps and their float16 copy."""
    device = torch.device(device)
    K = lm.n_layers * lm.n_heads
    held: list[Batch] = []
    for number, shard in enumerate(store.shards):
        slot = {}  # position in data -> (batch of the shard, row)
        feats, roots = [], []
        for d, group in enumerate(batches[number]):
            n = max(len(data.heads[p]) for p in group)
            feats.append(torch.zeros(len(group), n, n + 1, 2 * K, dtype=torch.float16, device=device))
            roots.append(torch.zeros(len(group), n, 2 * K, 2, dtype=torch.float16, device=device))
            slot.update({p: (d, row) for row, p in enumerate(group)})
        for mb in _passes(lm, store, number):
            b, P = mb.weights.shape[0], mb.weights.shape[-1]
            if mb.weights.shape[1] * mb.weights.shape[2] != K:
                raise ValueError(f"{lm.label}: maps of {mb.weights.shape[1]} x {mb.weights.shape[2]} heads, "
                                 f"expected {lm.n_layers} x {lm.n_heads}")
            half = mb.weights.to(device, torch.float16).reshape(b, K, P, P)  # the spill's rounding, on the device
            examples = mb.examples
            del mb  # the pass's float32 maps go before the next pass runs
            where = [slot[positions[ex.index]] for ex in examples]
            info = torch.tensor([[ex.n_words, ex.lead, ex.trail] for ex in examples], dtype=torch.long).to(device)
            for d in sorted({d for d, _ in where}):  # the pass's sentences batch by batch: one set of kernels each
                mine = [k for k, (e, _) in enumerate(where) if e == d]
                rows = torch.tensor(mine, dtype=torch.long).to(device)
                at = torch.tensor([where[k][1] for k in mine], dtype=torch.long).to(device)
                f, r = batch_features(half[rows], info[rows, 0], info[rows, 1], info[rows, 2], feats[d].shape[1])
                feats[d][at], roots[d][at] = f, r
                del f, r
            del half
        made = None if shared is not None else vectors(shard)
        index_at = {positions[ex.index]: ex.index for ex in shard}
        for d, group in enumerate(batches[number]):
            if shared is not None:
                theirs = shared[len(held)] if len(held) < len(shared) else None
                if theirs is None or tuple(theirs.indices) != tuple(group):
                    raise ValueError("the shared batches hold other sentences: their word vectors cannot be shared")
                vecs = theirs.vectors
            else:
                n, dim = feats[d].shape[1], data.dim
                host = torch.zeros(len(group), n, dim)
                for row, p in enumerate(group):
                    words = made[index_at[p]]
                    host[row, : len(words)] = torch.from_numpy(np.ascontiguousarray(words, dtype=np.float32))
                vecs = host.to(device)
            labels = assemble_batch(data, group, feats[d], roots[d], vecs)  # heads, punctuation and masks, on the host
            held.append(Batch(feats[d], roots[d], labels.heads.to(device), labels.punct.to(device), vecs,
                              labels.mask.to(device), labels.cand_mask.to(device), indices=tuple(group)))
        del feats, roots
    resident = ResidentBatches([], device, held=held)
    resident.batch_size = batch_size
    return resident


def _passes(lm: LoadedModel, store, number: int):
    """The forward passes of the streaming ``store``'s shard ``number`` (those of
    :meth:`~helpers.data.cache.AttentionStore.shard_items`: the same buckets, so the same maps), on the model's
    device."""
    from helpers.core.map_batches import iter_map_batches

    return iter_map_batches(lm, store.shards[number], batch_size=store.stats.get("batch_size", 32), level="word",
                            word_mode=store.word_mode)
