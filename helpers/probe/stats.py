"""Attention-based probing classifiers (paper §5, Table 3), batched over sentences with padding masks.

For dependent ``i`` the candidates are ``[ROOT, w_1 .. w_n]``. From a sentence's word-level maps
``A [layer, head, n + 2, n + 2]`` ([CLS] first, [SEP] last) we build ``2K`` feature maps
(``K = layers * heads``; the maps and their transposes):

- candidate word ``j``: ``A_k[i, j]`` (dependent attends to candidate) and ``A_k[j, i]`` (candidate
  attends to dependent);
- candidate ROOT: ``r_s A_k[i, CLS] + r_e A_k[i, SEP]`` for the maps, and ``r_s A_k[CLS, i] +
  r_e A_k[SEP, i]`` for the transposes, with ``r_s, r_e`` learned (as in the original code).

Probes (logits over candidates; softmax cross-entropy per word):

- **Attn**: ``sum_k w_k F_k[i, c]`` — the paper's ``sum_k w_k a^k_ij + u_k a^k_ji``.
- **Attn + words**: ``sum_k (W [v_i; v_c] + b)_k F_k[i, c]`` with frozen word vectors ``v``
  (``v_ROOT = 0``). The ROOT column and the word columns are aligned (the original code shifted the
  word vectors by one position: ROOT got ``v_1``, word ``j`` got ``v_{j+1}``); ``misaligned=True``
  reproduces that shift.
- **Distances + words**: one hidden layer, ``tanh(256)``, over ``[v_i; v_c]`` and eight distance
  features (paper footnote 5), no attention.

A decoder's maps (``BOS w_1 .. w_n``, or the words alone; a head sees its prefix) are put in the same layout by
:func:`encoder_layout`, zero where [CLS] or [SEP] is missing: ROOT's features are then the attention to BOS, and
a word's features from the maps are zero for the candidates after it (it does not see them); those from the
transposes are the attention the later candidates give it.

A word is never its own head (the diagonal is masked; the original did not mask it). UAS excludes
punctuation, as in the paper. :func:`mst_heads` decodes a full tree with Chu-Liu-Edmonds. The probes, their
features and their training in words: book/methods.md, §Probing classifiers.
"""
from __future__ import annotations

import dataclasses
import os
import shutil
import threading
import uuid
import weakref
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator, Literal, Sequence

import numpy as np
import torch
from torch import nn

from helpers.core.bootstrap import BOOTSTRAP
from helpers.core.threads import torch_threads

ProbeKind = Literal["attn", "attn+words", "distances+words"]
N_DISTANCE = 8
HIDDEN_UNITS = 256  # the hidden layer of Distances + words (tanh units; paper footnote 5)
# Adam learning rates, chosen on GUM dev with the offline default model (3 epochs of GUM train):
# attention weights are small numbers, so the attention-only probe needs large steps to reach
# large weights (at 2e-3 it was still far from converged after 3 epochs: 46.8 dev UAS against 54.9).
LEARNING_RATES = {"attn": 0.1, "attn+words": 0.02, "distances+words": 5e-3}
_SEEDING = threading.Lock()  # held while a probe is seeded and initialised (torch's generator is the process's)
_OPENING = threading.Lock()  # held while a thread opens a file of spilled rows


def encoder_layout(attn: np.ndarray, lead: int = 1, trail: int = 1) -> np.ndarray:
    """A word-level map ``[layer, head, lead + n + trail, lead + n + trail]`` in the encoder's layout
    ``[layer, head, n + 2, n + 2]`` ([CLS] first, [SEP] last), a missing special position (a decoder's: no [SEP];
    without BOS no [CLS] either) as a row and a column of zeros. An encoder's map (``lead = trail = 1``) is
    returned as it is."""
    if lead == 1 and trail == 1:
        return attn
    A = np.asarray(attn)
    out = np.zeros((*A.shape[:-2], A.shape[-1] - lead - trail + 2, A.shape[-1] - lead - trail + 2), dtype=A.dtype)
    first = 1 - lead
    out[..., first : first + A.shape[-2], first : first + A.shape[-1]] = A
    return out


@dataclass
class ProbeData:
    """Sentences for probing: their word-level maps as the probes read them, gold heads, punctuation masks and word
    vectors, in one form whatever the corpus's size: each sentence's maps kept once, unpadded (:func:`pack`: the
    word-to-word block and the ROOT parts), and the padded features, which hold every map twice (itself and its
    transpose) and the padding, made batch by batch as they are read (:func:`make_batch`, :class:`HeldBatches`).

    Made by the probes' accumulator on the one route (:class:`ProbeBatcher`: ``packed``, at half precision, in
    cache-shard order, ``groups`` the shards; on the CPU ``packed`` and ``vectors`` are :class:`SpilledRows`, read
    from disk) or from in-memory maps ``[layer, head, n + 2, n + 2]`` in the encoder's
    layout (``maps``: small data, the context-mixing section's and the tests'), packed here in their own dtype.
    ``groups`` (optional) partitions the sentences; a batch never mixes two groups.
    """

    maps: list[np.ndarray]          # [layer, head, n + 2, n + 2] each (empty: ``packed`` given)
    heads: list[np.ndarray]         # [n], 0 = ROOT
    punct: list[np.ndarray]         # [n] bool
    vectors: Sequence               # [n, dim] each (NumPy arrays, tensors on the device that holds the maps, or
    #                                 SpilledRows read from disk)
    skipped: int = 0
    names: list[str] = field(default_factory=list)
    n_maps: int = 0  # layers * heads, read from the maps
    groups: list[list[int]] | None = None
    dim_: int = 0    # word-vector size (read from the vectors)
    batch_size: int | None = None  # the batches' size when none is asked for
    packed: Sequence[tuple[torch.Tensor, torch.Tensor]] | None = field(default=None, repr=False)  # (block, root): pack

    def __post_init__(self) -> None:
        if self.maps and self.packed is None:
            self.packed = [pack(torch.as_tensor(np.asarray(A)).reshape(-1, *A.shape[-2:]), 1, A.shape[-1] - 2, 1)
                           for A in self.maps]
        if self.packed and not self.n_maps:
            self.n_maps = int(self.packed[0][0].shape[-1])
        if self.vectors and not self.dim_:
            self.dim_ = int(self.vectors[0].shape[1])

    def __len__(self) -> int:
        return len(self.heads)

    def __getstate__(self) -> dict:  # to a training process: the data, not the batches made from them (_held, _on)
        return {k: v for k, v in self.__dict__.items() if not k.startswith("_")}

    @property
    def dim(self) -> int:
        return self.dim_

    @property
    def device(self) -> torch.device:
        """Where the packed maps are held (the CPU when there are none, or they are spilled to disk)."""
        spilled = isinstance(self.packed, SpilledRows)
        return self.packed[0][0].device if self.packed and not spilled else torch.device("cpu")

    def to(self, device) -> "ProbeData":
        """The same sentences with their packed maps and word vectors copied to ``device``."""
        return dataclasses.replace(self, maps=[], packed=[(b.to(device), r.to(device)) for b, r in self.packed],
                                   vectors=[torch.as_tensor(v).to(device) for v in self.vectors])

    def nbytes(self) -> int:
        """The bytes of the packed maps and the word vectors."""
        maps = self.packed.nbytes if isinstance(self.packed, SpilledRows) else sum(
            b.nbytes + r.nbytes for b, r in self.packed or ())
        return maps + (self.vectors.nbytes if isinstance(self.vectors, SpilledRows) else
                       sum(v.nbytes for v in self.vectors))

    def batches(self, size: int) -> list[list[int]]:
        """Sentence indices grouped by length (little padding) within each of ``groups``."""
        out = []
        for group in (self.groups if self.groups is not None else [range(len(self))]):
            order = sorted(group, key=lambda i: (len(self.heads[i]), i))
            out.extend(order[i : i + size] for i in range(0, len(order), size))
        return out


def pack(maps: torch.Tensor, lead: int, n: int, trail: int) -> tuple[torch.Tensor, torch.Tensor]:
    """One sentence's word-level ``maps [K, lead + n + trail, lead + n + trail]`` (``K = layer * head``, flattened as
    ``layer * n_heads + head``; ``lead`` special positions, its ``n`` words, then ``trail``: an encoder's 1, 1, a
    decoder's 1 or 0, 0) as the probes keep them, in the maps' dtype and on their device: ``(block [n, n, K], root
    [n, 2K, 2])`` with ``block[i, j] = A[i, j]`` between words, ``root[i, :K] = (A[i, CLS], A[i, SEP])`` and
    ``root[i, K:] = (A[CLS, i], A[SEP, i])``, zero where a special position is missing (what the encoder's layout,
    :func:`encoder_layout`, puts there). Every value is copied, none computed."""
    K, words = maps.shape[0], slice(lead, lead + n)
    block = maps[:, words, words].permute(1, 2, 0).contiguous()
    root = maps.new_zeros(n, 2 * K, 2)
    for column, at, present in ((0, 0, lead > 0), (1, lead + n, trail > 0)):
        if present:
            root[:, :K, column] = maps[:, words, at].T
            root[:, K:, column] = maps[:, at, words].T
    return block, root


class SpilledRows(Sequence):
    """Rows of tensors, one a sentence (its packed maps ``(block, root)``, :func:`pack`, or its word vectors), written
    to files in ``folder`` as they come and read back with ordinary file reads when a batch is made (not a memory map,
    whose touched pages would count as resident memory; the operating system's page cache keeps the reads fast), so
    that holding a treebank's rows takes a few bytes a sentence in memory. Indexing gives fresh CPU tensors as they
    were written: the tuple of a row's parts, or with ``single`` its one part. :meth:`extend` appends another's rows
    (files in the same folder), :meth:`take` gives the rows in another order (no copy); the folder is removed when
    the rows that :meth:`owning` returned are let go (or the process ends). Safe to read from several threads."""

    def __init__(self, folder, *, single: bool = False):
        self.folder, self.single = Path(folder), single
        self.rows: list[tuple[str, int, tuple, tuple, torch.dtype]] = []  # (file, offset, shapes, sizes, dtype)
        self._name, self._writer, self._readers = None, None, {}
        self.nbytes = 0

    def append(self, parts) -> None:
        """One row (a tuple of tensors of one dtype, or with ``single`` one tensor or array) written at the end of
        this object's file."""
        parts = [torch.as_tensor(p) for p in ((parts,) if self.single else parts)]
        if self._writer is None:
            self._name = f"probe-{uuid.uuid4().hex}.bin"  # what `prune` removes (a stopped run's leftovers)
            self._writer = open(self.folder / self._name, "wb")
        offset = self._writer.tell()
        for part in parts:
            self._writer.write(part.detach().cpu().contiguous().numpy().tobytes())
        self.rows.append((self._name, offset, tuple(tuple(p.shape) for p in parts), tuple(p.numel() for p in parts),
                          parts[0].dtype))
        self.nbytes += sum(p.nbytes for p in parts)

    def _flush(self) -> None:
        if self._writer is not None:
            self._writer.close()
            self._writer = None

    def __len__(self) -> int:
        return len(self.rows)

    def __getitem__(self, i: int):
        self._flush()
        name, offset, shapes, sizes, dtype = self.rows[i]
        if name not in self._readers:
            with _OPENING:
                if name not in self._readers:
                    self._readers[name] = os.open(self.folder / name, os.O_RDONLY)
        out = torch.empty(sum(sizes), dtype=dtype)
        got = os.preadv(self._readers[name], [out.numpy()], offset)
        if got != out.nbytes:
            raise OSError(f"{self.folder / name}: {got} bytes at {offset}, expected {out.nbytes} (removed while read?)")
        if self.single:
            return out.view(shapes[0])
        parts, at = [], 0  # slices of the one read (a row is read thousands of times: no split, no size products)
        for shape, size in zip(shapes, sizes):
            parts.append(out[at : at + size].view(shape))
            at += size
        return tuple(parts)

    def extend(self, other: "SpilledRows") -> "SpilledRows":
        other._flush()
        self.rows.extend(other.rows)
        self.nbytes += other.nbytes
        return self

    def take(self, order: Sequence[int]) -> "SpilledRows":
        self._flush()
        out = SpilledRows(self.folder, single=self.single)
        out.rows, out.nbytes = [self.rows[i] for i in order], self.nbytes
        return out

    def owning(self) -> "SpilledRows":
        """These rows, removing their folder when let go."""
        weakref.finalize(self, _remove_folder, self.folder, self._readers)
        return self

    def __getstate__(self) -> dict:  # to and from a Dask worker: the rows, not the open files
        self._flush()
        return {**self.__dict__, "_writer": None, "_readers": {}}


def _remove_folder(folder: Path, readers: dict) -> None:
    for fd in readers.values():
        os.close(fd)
    readers.clear()
    shutil.rmtree(folder, ignore_errors=True)


class ProbeBatcher:
    """The probes' accumulator on the one route (:func:`helpers.pipeline.route.reduce_maps` of word-level weights):
    each sentence's maps rounded to float16 where the route hands them (the model's device) and packed
    (:func:`pack`), one group per cache shard in the shard's order (by example index). Where they are kept:
    ``spill`` (a folder): written there (:class:`SpilledRows`: the memory does not grow with the treebank); else on
    ``hold`` (a device; ``None``: where the maps are). ``result()``: ``(rows, groups)``, the packed maps in the groups'
    order (indexable, ``(block, root)`` each: a :class:`ProbeData`'s ``packed``) and per group, in shard order, its
    example indices."""

    def __init__(self, hold=None, spill=None):
        self.hold = hold
        self.rows = [] if spill is None else SpilledRows(spill)
        self.groups: list[list[tuple[int, int]]] = []  # per closed shard: (example index, row), by example index
        self._shard: list[tuple[int, int]] = []

    def update(self, batch, extras=None) -> None:
        """One forward pass's :class:`~helpers.core.extract.MapBatch` (word level, ``[batch, layer, head, position,
        position]``); ``extras`` unused."""
        b, L, H, P, _ = batch.weights.shape
        half = batch.weights.to(torch.float16).reshape(b, L * H, P, P)
        for k, ex in enumerate(batch.examples):
            block, root = pack(half[k], ex.lead, ex.n_words, ex.trail)
            if isinstance(self.rows, list) and self.hold is not None:
                block, root = block.to(self.hold), root.to(self.hold)
            self._shard.append((ex.index, len(self.rows)))
            self.rows.append((block, root))

    def _close(self) -> None:
        if self._shard:
            self.groups.append(sorted(self._shard))
            self._shard = []

    def merge(self, other: "ProbeBatcher") -> "ProbeBatcher":
        self._close()
        other._close()
        start = len(self.rows)
        self.groups.extend([(index, start + row) for index, row in group] for group in other.groups)
        self.rows.extend(other.rows)
        return self

    def result(self) -> tuple[Sequence, list[list[int]]]:
        self._close()
        order = [row for group in self.groups for _, row in group]
        rows = self.rows.take(order) if isinstance(self.rows, SpilledRows) else [self.rows[i] for i in order]
        return rows, [[index for index, _ in group] for group in self.groups]


@dataclass
class Batch:
    """Padded tensors of a group of sentences (float32: no cast in the training loop).

    ``features [batch, n, n + 1, 2K]`` holds the word columns (candidate 0, ROOT, is filled from
    ``root_parts [batch, n, 2K, 2]``: the [CLS] and [SEP] entries mixed by the learned ``r_s, r_e``).
    """

    features: torch.Tensor
    root_parts: torch.Tensor
    heads: torch.Tensor      # [batch, n] (-100 for padding)
    punct: torch.Tensor      # [batch, n] bool
    vectors: torch.Tensor    # [batch, n, dim]
    mask: torch.Tensor       # [batch, n] bool, real words
    cand_mask: torch.Tensor  # [batch, n, n + 1] bool, allowed candidates
    indices: tuple[int, ...] = ()

    def to(self, device) -> "Batch":
        """The batch with its tensors on ``device`` (itself, no copy, where they already are: the CPU)."""
        if _same_device(self.features.device, device):
            return self
        moved = {name: getattr(self, name).to(device) for name in
                 ("features", "root_parts", "heads", "punct", "vectors", "mask", "cand_mask")}
        return Batch(**moved, indices=self.indices)

    def word_vectors(self, misaligned: bool = False) -> torch.Tensor:
        """``[batch, n, dim]``; with ``misaligned`` the original code's shift (word j gets word j + 1's
        vector, the last word none)."""
        if not misaligned:
            return self.vectors
        return torch.cat([self.vectors[:, 1:], torch.zeros_like(self.vectors[:, :1])], dim=1)


def _same_device(here: torch.device, device) -> bool:
    device = torch.device(device)
    return here == device or (device.type == "cuda" and device.index is None and here.type == "cuda"
                              and here.index == torch.cuda.current_device())  # "cuda" is the current "cuda:N"


def labels(data: ProbeData, indices: Sequence[int]) -> tuple[torch.Tensor, ...]:
    """``(heads, punct, mask, cand_mask)`` of :class:`Batch` for sentences ``indices`` of ``data``, on the device that
    holds its maps."""
    B, n = len(indices), max(len(data.heads[i]) for i in indices)
    heads = torch.full((B, n), -100, dtype=torch.long)
    punct = torch.zeros(B, n, dtype=torch.bool)
    mask = torch.zeros(B, n, dtype=torch.bool)
    cand = torch.zeros(B, n, n + 1, dtype=torch.bool)
    for b, i in enumerate(indices):
        m = len(data.heads[i])
        heads[b, :m] = torch.from_numpy(np.asarray(data.heads[i], dtype=np.int64))
        punct[b, :m] = torch.from_numpy(np.asarray(data.punct[i], dtype=bool))
        mask[b, :m] = True
        cand[b, :m, : m + 1] = True
        cand[b, torch.arange(m), torch.arange(m) + 1] = False  # never its own head
    return tuple(x.to(data.device) for x in (heads, punct, mask, cand))


def make_batch(data: ProbeData, indices: Sequence[int], *, features: bool = True, buffers=None,
               labelled: tuple | None = None) -> Batch:
    """Sentences ``indices`` of ``data`` padded into a :class:`Batch` on the device that holds their maps: the
    features and ROOT parts (float32) copied from the packed maps, the word vectors, zeros elsewhere (and in the
    ROOT column of ``features``). ``features=False``: none (``[batch, n, n + 1, 0]``; Distances + words reads
    none). ``buffers``: ``(flat, vectors)`` float32 tensors large enough, whose starts hold the features, then the
    ROOT parts, and the vectors (the batch is valid until they are written again); ``None``: fresh ones.
    ``labelled``: :func:`labels` of ``indices``, when the caller keeps them."""
    B, n = len(indices), max(len(data.heads[i]) for i in indices)
    K = data.n_maps if features else 0
    f, r, v = B * n * (n + 1) * 2 * K, B * n * 2 * K * 2, B * n * data.dim
    if buffers is None:
        buffers = torch.empty(f + r, device=data.device), torch.empty(v, device=data.device)
    F, R = buffers[0][:f].view(B, n, n + 1, 2 * K), buffers[0][f : f + r].view(B, n, 2 * K, 2)
    V = buffers[1][:v].view(B, n, data.dim)
    if K:
        F[:, :, 0] = 0  # the ROOT column: from the ROOT parts
    for b, i in enumerate(indices):
        m = len(data.heads[i])
        if K:
            block, root = data.packed[i]
            F[b, :m, 1 : m + 1, :K] = block       # A[i, j]: the dependent attends
            F[b, :m, 1 : m + 1, K:] = block.transpose(0, 1)  # A[j, i]: the candidate attends
            R[b, :m] = root
        V[b, :m] = torch.as_tensor(data.vectors[i])
        if m < n:
            if K:
                F[b, :m, m + 1 :] = 0
                F[b, m:] = 0
                R[b, m:] = 0
            V[b, m:] = 0
    heads, punct, mask, cand = labels(data, indices) if labelled is None else labelled
    return Batch(F, R, heads, punct, V, mask, cand, tuple(indices))


class HeldBatches(Sequence):
    """Every padded batch of a :class:`ProbeData` (its :meth:`~ProbeData.batches` of ``size``), made from its packed
    maps when it is read (:func:`make_batch`): indexing gives fresh tensors, :meth:`stream` reuses one set of buffers
    sized for the largest batch (each batch valid until the next is read: the training loops read every batch once
    an epoch, and fresh tensors per batch would cost a page fault per 4 KiB). ``features=False``
    (:meth:`without_features`): no attention features (Distances + words reads none)."""

    def __init__(self, data: ProbeData, size: int, *, features: bool = True, labelled: list | None = None):
        self.data, self.batch_size, self.features = data, size, features
        self.groups = data.batches(size)
        self.labelled = [labels(data, g) for g in self.groups] if labelled is None else labelled

    def __len__(self) -> int:
        return len(self.groups)

    def __getitem__(self, k: int) -> Batch:
        return make_batch(self.data, self.groups[k], features=self.features, labelled=self.labelled[k])

    def stream(self, order) -> Iterator[Batch]:
        """The batches at ``order`` (indices), made into buffers reused from batch to batch."""
        K = self.data.n_maps if self.features else 0
        shapes = [(len(g), max(len(self.data.heads[i]) for i in g)) for g in self.groups]
        buffers = (torch.empty(max(B * n * (n + 1) * 2 * K + B * n * 4 * K for B, n in shapes), device=self.data.device),
                   torch.empty(max(B * n * self.data.dim for B, n in shapes), device=self.data.device))
        for k in order:
            yield make_batch(self.data, self.groups[int(k)], features=self.features, buffers=buffers,
                             labelled=self.labelled[int(k)])

    def without_features(self) -> "HeldBatches":
        return HeldBatches(self.data, self.batch_size, features=False, labelled=self.labelled)


def prepared(data: ProbeData, batch_size: int | None = None) -> HeldBatches:
    """The batches of ``data`` of ``batch_size`` (default: the data's own size, else 32), kept on ``data``: their
    labels and masks are made once, their features each time they are read."""
    size = batch_size or data.batch_size or 32
    held = data.__dict__.setdefault("_held", {})
    if size not in held:
        held[size] = HeldBatches(data, size)
    return held[size]


def distance_features(n: int, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """``[n, n + 1, 8]`` features of paper footnote 5 for dependent i and candidate c (c = 0 is ROOT):
    signed relative distance / n split into right and left, indicators for c = i, i - 1, i + 1,
    i - 2, i + 2, and ROOT; as ``dtype`` (each quotient rounded once, to ``dtype``)."""
    indicators, distances = distance_parts(n, dtype)
    return indicators + distances / n


def distance_parts(n: int, dtype: torch.dtype = torch.float32) -> tuple[torch.Tensor, torch.Tensor]:
    """:func:`distance_features` of a padded length ``n`` split so that each sentence divides by its *own*
    length: ``(indicators, distances)``, both ``[n, n + 1, 8]`` as ``dtype``, ``distances`` the whole numbers
    ``max(c - i, 0)`` and ``max(i - c, 0)`` in its first two features (zero for ROOT) and zero elsewhere,
    ``indicators`` the other six features (zero in the first two); for a sentence of ``m`` words the features
    are ``indicators + distances / m`` (equal to ``distance_features(m)`` on its rows: the same quotients)."""
    i = torch.arange(1, n + 1)[:, None]
    c = torch.arange(0, n + 1)[None, :]
    is_root = (c == 0).expand(n, n + 1)
    d = torch.where(is_root, 0, c - i)
    zero = torch.zeros(n, n + 1, dtype=torch.long)
    distances = torch.stack([d.clamp(min=0), (-d).clamp(min=0), *[zero] * 6], dim=-1).to(dtype)
    indicators = torch.stack([zero, zero, *[(d == k) & ~is_root for k in (0, -1, 1, -2, 2)], is_root], dim=-1).to(dtype)
    return indicators, distances


class AttentionProbe(nn.Module):
    """Attn (``with_words=False``) or Attn + words probe."""

    def __init__(self, n_features: int, dim: int = 0, *, with_words: bool = False):
        super().__init__()
        self.with_words = with_words
        self.root = nn.Parameter(torch.tensor([1.0, 1.0]))  # r_s, r_e
        if with_words:
            self.dep = nn.Linear(dim, n_features, bias=True)   # W acting on v_i
            self.cand = nn.Linear(dim, n_features, bias=False)  # W acting on v_c
            for layer in (self.dep, self.cand):
                nn.init.normal_(layer.weight, std=0.01)
            nn.init.constant_(self.dep.bias, 1.0 / n_features)
        else:
            self.w = nn.Parameter(torch.full((n_features,), 1.0 / n_features))

    def forward(self, batch: Batch, misaligned: bool = False) -> torch.Tensor:
        F = batch.features                                            # [b, n, n + 1, 2K]
        b, n, c1, k = F.shape
        root = batch.root_parts @ self.root                           # [b, n, 2K]: the ROOT column's features
        if not self.with_words:
            # over every column of F (contiguous: no copy); column 0 (ROOT) is zero in F and is replaced
            words = (F @ self.w)[..., 1:]                             # [b, n, n]
            logits = torch.cat([(root @ self.w)[..., None], words], dim=-1)
        else:
            v = batch.word_vectors(misaligned)
            a = self.dep(v)                                           # [b, n, 2K] (includes the bias)
            c = self.cand(v)                                          # [b, n, 2K]; ROOT's vector is 0
            # words[i, j] = sum_k a[i,k] F[i,j,k] + sum_k c[j,k] F[i,j,k]. The second half of the features
            # is the first half transposed (F[i,j,K+k] = F[j,i,k]), so the second sum is
            # sum_k c'[j,k] F[j,i,k] with c' = c with its halves swapped: both sums are products of the same
            # rows F[x, :, :] with one vector each, one batched matrix product and one pass over F.
            half = k // 2
            rhs = torch.stack([a, torch.cat([c[..., half:], c[..., :half]], dim=-1)], dim=-1)  # [b, n, 2K, 2]
            # every column of F (a view, no copy); column 0 (ROOT) is zero in F and is dropped
            both = torch.bmm(F.view(b * n, c1, k), rhs.reshape(b * n, k, 2)).reshape(b, n, c1, 2)[:, :, 1:]
            words = both[..., 0] + both[..., 1].transpose(1, 2)
            logits = torch.cat([(root * a).sum(-1, keepdim=True), words], dim=-1)
        return logits.masked_fill(~batch.cand_mask, -1e9)


_DISTANCE_FEATURES: dict[tuple[int, torch.dtype, torch.device], torch.Tensor] = {}


def sentence_distance_features(m: int, dtype: torch.dtype = torch.float32, device=None) -> torch.Tensor:
    """:func:`distance_features` of a sentence of ``m`` words as ``[m * (m + 1), 8]`` on ``device`` (default the
    CPU; memoised: read-only)."""
    device = torch.device("cpu" if device is None else device)
    if (m, dtype, device) not in _DISTANCE_FEATURES:
        _DISTANCE_FEATURES[m, dtype, device] = distance_features(m, dtype).reshape(-1, N_DISTANCE).to(device)
    return _DISTANCE_FEATURES[m, dtype, device]


def _pair_hidden(dep: torch.Tensor, cand: torch.Tensor, dist_weight: torch.Tensor) -> torch.Tensor:
    """``tanh(dep[i] + cand[c] + W_d f(i, c))`` for one sentence of ``m`` words, ``[m, m + 1, H]``, with
    ``f`` its distance features (:func:`distance_features`, relative distances divided by its own length),
    ``dep [m, H]``, ``cand [m + 1, H]``, ``dist_weight`` (``W_d``) ``[H, 8]``."""
    m, hidden = dep.shape
    t = (sentence_distance_features(m, dep.dtype, dep.device) @ dist_weight.t()).view(m, m + 1, hidden)
    t.add_(dep[:, None, :]).add_(cand[None, :, :])
    return t.tanh_()


class PairTanhLoss(torch.autograd.Function):
    """The training loss of the Distances + words probe, fused: for each sentence of ``m`` words,
    ``scores[i, c] = w . tanh(dep[i] + cand[c] + W_d f(i, c)) + bias`` (a word is never its own head), and
    the loss is the cross-entropy over candidates summed over the words of every sentence, divided by the
    number of sentences (as :func:`train_probe`'s loss of the other probes).

    Computed one sentence at a time over its own length (no padding): the ``[m, m + 1, H]`` hidden layer
    of one sentence fits in the CPU cache, and its gradient is computed in the forward pass while it is
    still there, from the softmax (``d loss / d scores = softmax - one-hot``). Plain autograd of the padded
    expression materialises several ``[batch, n, n + 1, H]`` temporaries in memory (``benchmarks/probes.py``
    compares the two; ``tests/unit/test_probes.py`` checks this against plain autograd). Shapes:
    ``dep [b, n, H]``, ``cand [b, n + 1, H]``, ``dist_weight [H, 8]``, ``w [H]``, ``bias [1]``, ``heads`` a list of
    ``b`` integer tensors ``[m_b]`` (0 = ROOT).
    """

    @staticmethod
    def forward(ctx, dep, cand, dist_weight, w, bias, heads):
        grads = [torch.zeros_like(x) for x in (dep, cand, dist_weight, w, bias)]
        total = torch.zeros((), dtype=dep.dtype, device=dep.device)
        n_sentences = len(heads)
        # one intra-op thread: the per-sentence tensors are too small to split, and when another process holds a
        # core, threads that wait for each other at every operation made an epoch 15 times slower (2-core machine)
        with torch_threads(1):
            PairTanhLoss._sentences(dep, cand, dist_weight, w, bias, heads, grads, total)
        ctx.grads = grads
        return total / n_sentences

    @staticmethod
    def _sentences(dep, cand, dist_weight, w, bias, heads, grads, total) -> None:
        g_dep, g_cand, g_dist, g_w, g_bias = grads
        n_sentences = len(heads)
        for b, gold in enumerate(heads):
            m = len(gold)
            t = _pair_hidden(dep[b, :m], cand[b, : m + 1], dist_weight)        # [m, m + 1, H]
            flat = t.view(-1, t.shape[-1])
            scores = torch.mv(flat, w).view(m, m + 1) + bias
            scores.diagonal(offset=1).fill_(-1e9)                            # never its own head
            logp = torch.log_softmax(scores, dim=-1)
            rows = torch.arange(m, device=g_dep.device)
            total -= logp[rows, gold].sum()
            g = logp.exp_()                                                  # d loss / d scores: softmax - one-hot
            g[rows, gold] -= 1.0
            g.div_(n_sentences)
            g_bias += g.sum()
            g_w.add_(torch.mv(flat.t(), g.view(-1)))
            d = torch.ops.aten.tanh_backward(g[..., None] * w, t)           # d loss / d pre-activation
            g_dep[b, :m] += d.sum(1)
            g_cand[b, : m + 1] += d.sum(0)
            g_dist.addmm_(d.view(-1, d.shape[-1]).t(), sentence_distance_features(m, d.dtype, d.device))

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, grad):
        grads, ctx.grads = ctx.grads, None
        return (*(g * grad for g in grads), None)


def padded_pair_scores(dep: torch.Tensor, cand: torch.Tensor, dist_weight: torch.Tensor, w: torch.Tensor,
                       bias: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
    """The scores of Distances + words for a padded batch at once, ``[b, n, n + 1]``: ``w . tanh(dep[i] + cand[c]
    + W_d f_m(i, c)) + bias`` with ``f_m`` each sentence's distance features over its *own* length ``m``
    (:func:`distance_parts`), the same per sentence as :func:`_pair_hidden`; one set of kernels per batch, for a
    device (the ``[b, n, n + 1, H]`` hidden layer is made whole). Entries beyond a sentence's words are finite and
    meaningless (masked by the caller). ``dep [b, n, H]``, ``cand [b, n + 1, H]``, ``dist_weight [H, 8]``,
    ``w [H]``, ``bias [1]``, ``lengths [b]`` (integers)."""
    b, n, hidden = dep.shape
    indicators, distances = (x.to(dep.device) for x in distance_parts(n, dep.dtype))  # [n, n + 1, 8]
    m = lengths.clamp(min=1).to(dep.dtype)[:, None, None, None]
    features = indicators + distances / m                                # [b, n, n + 1, 8]: f_m, as distance_features(m)
    t = (features.reshape(b, -1, N_DISTANCE) @ dist_weight.t()).view(b, n, n + 1, hidden)
    t = torch.tanh(t + dep[:, :, None, :] + cand[:, None, :, :])
    return t @ w + bias


def cross_entropy_loss(logits: torch.Tensor, batch: Batch) -> torch.Tensor:
    """Cross-entropy over candidates summed over a sentence's words, averaged over the batch's sentences
    (``logits [b, n, n + 1]``, padding ignored)."""
    return nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), batch.heads.reshape(-1),
                                       ignore_index=-100, reduction="sum") / len(batch.indices)


class DistanceProbe(nn.Module):
    """Distances + words: ``w2 . tanh(W1 [v_i; v_c; distances] + b1)`` (first layer factorised). On the CPU the
    hidden layer is computed one sentence at a time over its own length, and for training fused with the loss in
    :class:`PairTanhLoss` (each sentence's hidden layer stays in the cache); on other devices, for the whole
    padded batch at once (:func:`padded_pair_scores`: one set of kernels per batch, not a loop per sentence).
    ``per_sentence`` (``True``/``False``) chooses one of the two on any device (tests)."""

    def __init__(self, dim: int, hidden: int = HIDDEN_UNITS):
        super().__init__()
        self.dep = nn.Linear(dim, hidden)
        self.cand = nn.Linear(dim, hidden, bias=False)
        self.dist = nn.Linear(N_DISTANCE, hidden, bias=False)
        self.out = nn.Linear(hidden, 1)
        self.per_sentence: bool | None = None  # None: per sentence on the CPU, padded elsewhere (see padded())

    def _parts(self, batch: Batch, misaligned: bool):
        """``(dep [b, n, H], cand [b, n + 1, H], lengths)``: the word terms of the first layer."""
        v = batch.word_vectors(misaligned)
        v_cand = torch.cat([torch.zeros_like(v[:, :1]), v], dim=1)            # ROOT's vector is 0
        return self.dep(v), self.cand(v_cand), batch.mask.sum(1).tolist()

    def padded(self, batch: Batch) -> bool:
        """Whether this batch takes the padded path (:func:`padded_pair_scores`): on every device but the CPU,
        unless :attr:`per_sentence` says otherwise (``None``: by device)."""
        return (batch.heads.device.type != "cpu") if self.per_sentence is None else not self.per_sentence

    def forward(self, batch: Batch, misaligned: bool = False) -> torch.Tensor:
        if self.padded(batch):
            return self._padded_logits(batch, misaligned)
        dep, cand, lengths = self._parts(batch, misaligned)
        n = batch.heads.shape[1]
        w = self.out.weight[0]
        with torch_threads(1):  # per-sentence tensors: one intra-op thread (see PairTanhLoss.forward)
            rows = [nn.functional.pad(_pair_hidden(dep[k, :m], cand[k, : m + 1], self.dist.weight) @ w, (0, n - m, 0, n - m))
                    for k, m in enumerate(lengths)]
        logits = torch.stack(rows) + self.out.bias
        return logits.masked_fill(~batch.cand_mask, -1e9)

    def _padded_logits(self, batch: Batch, misaligned: bool) -> torch.Tensor:
        v = batch.word_vectors(misaligned)
        v_cand = torch.cat([torch.zeros_like(v[:, :1]), v], dim=1)            # ROOT's vector is 0
        scores = padded_pair_scores(self.dep(v), self.cand(v_cand), self.dist.weight, self.out.weight[0],
                                    self.out.bias, batch.mask.sum(1))
        return scores.masked_fill(~batch.cand_mask, -1e9)

    def loss(self, batch: Batch, misaligned: bool = False) -> torch.Tensor:
        """The training loss of :func:`train_probe` (summed over words, averaged over sentences): fused, one
        sentence at a time (the CPU), or the cross-entropy of the padded logits (other devices)."""
        if self.padded(batch):
            return cross_entropy_loss(self._padded_logits(batch, misaligned), batch)
        dep, cand, lengths = self._parts(batch, misaligned)
        heads = [batch.heads[k, :m] for k, m in enumerate(lengths)]
        return PairTanhLoss.apply(dep, cand, self.dist.weight, self.out.weight[0], self.out.bias, heads)


def probe_loss(model: nn.Module, batch: Batch, misaligned: bool = False) -> torch.Tensor:
    """Cross-entropy over candidates summed over a sentence's words, averaged over the batch's sentences."""
    if isinstance(model, DistanceProbe):
        return model.loss(batch, misaligned)
    return cross_entropy_loss(model(batch, misaligned), batch)


def build_probe(kind: ProbeKind, data: ProbeData) -> nn.Module:
    if kind == "attn":
        return AttentionProbe(2 * data.n_maps)
    if kind == "attn+words":
        return AttentionProbe(2 * data.n_maps, data.dim, with_words=True)
    if kind == "distances+words":
        return DistanceProbe(data.dim)
    raise ValueError(f"probe {kind!r}: choose attn, attn+words or distances+words")


# The share of a device's free memory the probes' packed maps may take (the rest: the probes' own tensors; the
# hidden layer of Distances + words is [batch, n, n + 1, 256] float32 and autograd keeps a few).
RESIDENT_SHARE = 0.5


def batches_on(data: ProbeData, batch_size: int | None, device) -> HeldBatches:
    """The batches of ``data`` for training or evaluating on ``device``: made where its maps are held when that is
    ``device`` or the CPU (:func:`prepared`); for another device, made there from a copy of the packed maps and word
    vectors moved there once and kept on ``data``, or, where they would take more than :data:`RESIDENT_SHARE` of its
    free memory (:func:`fits_on`), made where they are (each batch moved when used)."""
    device = torch.device(device)
    if device.type == "cpu" or _same_device(data.device, device) or not data.packed:
        return prepared(data, batch_size)
    moved = data.__dict__.setdefault("_on", {})
    if str(device) not in moved:
        moved[str(device)] = data.to(device) if fits_on(device, data.nbytes()) else data
    return prepared(moved[str(device)], batch_size or data.batch_size)


def fits_on(device, nbytes: int) -> bool:
    """Whether ``nbytes`` are held on ``device`` (not the CPU): on a CUDA device when they take at most
    :data:`RESIDENT_SHARE` of its free memory, on any other always."""
    device = torch.device(device)
    if device.type != "cuda":
        return True
    free, _ = torch.cuda.mem_get_info(device)
    return nbytes <= RESIDENT_SHARE * free


def predict(model: nn.Module, data: ProbeData, *, batch_size: int | None = None,
            misaligned: bool = False, device=None) -> list[np.ndarray]:
    """Logits ``[n, n + 1]`` of every sentence (in order); batches of ``batch_size`` (default the data's own size,
    else 64), computed on ``device`` (default: where ``model`` is)."""
    device = _device_of(model) if device is None else torch.device(device)
    batch_size = batch_size or data.batch_size or 64
    out: list[np.ndarray | None] = [None] * len(data)
    model.eval()
    with torch.no_grad():
        batches = _for_model(batches_on(data, batch_size, device), model)
        for batch in stream(batches, range(len(batches))):
            logits = model(batch.to(device), misaligned).cpu()
            for b, i in enumerate(batch.indices):
                n = len(data.heads[i])
                out[i] = logits[b, :n, : n + 1].numpy()
    return out  # type: ignore[return-value]


def _device_of(model: nn.Module) -> torch.device:
    return next(model.parameters()).device


def stream(batches: Sequence[Batch], order) -> Iterator[Batch]:
    """The batches at ``order``, one at a time; :class:`HeldBatches` are made into buffers that are reused
    (each is valid until the next is read: no fresh memory, and no page faults, per batch)."""
    if hasattr(batches, "stream"):
        yield from batches.stream(order)
    else:
        for k in order:
            yield batches[k]


def _for_model(batches: Sequence[Batch], model: nn.Module) -> Sequence[Batch]:
    """The batches without their attention features when ``model`` reads none (less to make)."""
    if isinstance(model, DistanceProbe) and hasattr(batches, "without_features"):
        return batches.without_features()
    return batches


def greedy_uas(model: nn.Module, data: ProbeData, *, batch_size: int | None = None, misaligned: bool = False,
               device=None) -> float:
    """:func:`uas` of :func:`predict`'s logits with greedy decoding, counted batch by batch on ``device`` (default:
    where ``model`` is) from the padded logits: the argmax of a word's row over the padded candidates is its
    argmax over its own (the padding is ``-1e9``, after them), so the score is the same number, with one
    transfer to the host at the end instead of every sentence's logits."""
    device = _device_of(model) if device is None else torch.device(device)
    batch_size = batch_size or data.batch_size or 64
    correct = total = 0  # become tensors on the batches' device at the first sum (one transfer, at the end)
    model.eval()
    with torch.no_grad():
        batches = _for_model(batches_on(data, batch_size, device), model)
        for batch in stream(batches, range(len(batches))):
            batch = batch.to(device)
            keep = batch.mask & ~batch.punct
            correct += ((model(batch, misaligned).argmax(-1) == batch.heads) & keep).sum()
            total += keep.sum()
    return 100.0 * int(correct) / max(int(total), 1)


def uas(logits: Sequence[np.ndarray], data: ProbeData, *, decode: Literal["greedy", "mst"] = "greedy") -> float:
    """Unlabelled attachment score (percent), punctuation excluded."""
    correct = sentence_correct(logits, data, decode=decode)
    return 100.0 * int(correct.sum()) / max(int(sentence_totals(data).sum()), 1)


def sentence_correct(logits: Sequence[np.ndarray], data: ProbeData, *,
                     decode: Literal["greedy", "mst"] = "greedy") -> np.ndarray:
    """``[sentence]`` (int64): the words of each sentence of ``data`` (in its order) whose head ``logits`` (one
    ``[n, n + 1]`` per sentence) decode correctly, punctuation excluded: :func:`uas`'s numerator sentence by
    sentence (its denominator: :func:`sentence_totals`), what a bootstrap over sentences resamples."""
    out = np.zeros(len(data), dtype=np.int64)
    for k, (scores, heads, punct) in enumerate(zip(logits, data.heads, data.punct)):
        pred = scores.argmax(-1) if decode == "greedy" else mst_heads(scores)
        keep = ~punct
        out[k] = int((pred[keep] == heads[keep]).sum())
    return out


def sentence_totals(data: ProbeData) -> np.ndarray:
    """``[sentence]`` (int64): the words UAS counts in each sentence of ``data`` (punctuation excluded)."""
    return np.array([int((~punct).sum()) for punct in data.punct], dtype=np.int64)


def right_branching_correct(data: ProbeData) -> np.ndarray:
    """``[sentence]``: :func:`sentence_correct` of the right-branching baseline (:func:`right_branching_uas`)."""
    out = np.zeros(len(data), dtype=np.int64)
    for k, (heads, punct) in enumerate(zip(data.heads, data.punct)):
        n = len(heads)
        pred = np.arange(2, n + 2)
        pred[-1] = 0
        out[k] = int((pred[~punct] == heads[~punct]).sum())
    return out


def right_branching_uas(data: ProbeData) -> float:
    """Every word's head is the next word; the last word attaches to ROOT (punctuation excluded)."""
    return 100.0 * int(right_branching_correct(data).sum()) / max(int(sentence_totals(data).sum()), 1)


def pooled_uas_replicates(correct: Sequence[np.ndarray], total: np.ndarray, *, baseline: Sequence[np.ndarray] | None = None,
                          n_boot: int = BOOTSTRAP, seed: int = 0) -> np.ndarray:
    """``[runs * n_boot]``: UAS (percent) of a probe trained with several seeds (``correct``: one
    :func:`sentence_correct` ``[sentence]`` per seed), each seed's test sentences resampled on their own
    (:func:`helpers.core.bootstrap.pooled_replicates`: seed ``s`` draws with ``seed + s``), the replicates of every
    seed pooled: the sampling of the sentences and the spread over seeds in one interval. With ``baseline`` (one
    ``[sentence]`` array per seed, or one for all seeds: a deterministic baseline), the UAS of ``correct`` minus
    that of ``baseline`` on the same draws of the same sentences (a paired comparison, seed by seed); ``total`` is
    :func:`sentence_totals` of those sentences. NaN where a replicate holds no counted word."""
    from helpers.core.bootstrap import pooled_replicates, ratio_replicates

    total = np.asarray(total, dtype=np.float64)
    runs = [np.asarray(c, dtype=np.float64) for c in correct]
    if baseline is not None:
        base = [np.asarray(b, dtype=np.float64) for b in baseline]
        if len(base) not in (1, len(runs)):
            raise ValueError(f"pooled_uas_replicates: {len(base)} baseline runs for {len(runs)} runs (one, or one per run)")
        runs = [r - base[s if len(base) > 1 else 0] for s, r in enumerate(runs)]
    for r in runs:
        if r.shape != total.shape:
            raise ValueError(f"pooled_uas_replicates: {r.shape[0]} sentences of counts for {total.shape[0]} totals: "
                             "every run is scored on the same sentences")
    return 100.0 * pooled_replicates(lambda s, c: ratio_replicates(runs[s], total, c), [len(total)] * len(runs),
                                     n_boot=n_boot, seed=seed)


def pooled_uas_gain(correct: Sequence[np.ndarray], total: np.ndarray, baseline: Sequence[np.ndarray] | None = None
                    ) -> float:
    """The mean over seeds of each seed's UAS (percent; with ``baseline``, minus that of the baseline on the same
    sentences, as :func:`pooled_uas_replicates` pairs them): the estimate its replicates scatter around."""
    total = float(np.sum(total))
    if not total:
        return float("nan")
    uas_runs = [100.0 * float(np.sum(c)) / total for c in correct]
    if baseline is None:
        return float(np.mean(uas_runs))
    base = [100.0 * float(np.sum(b)) / total for b in baseline]
    return float(np.mean([u - base[s if len(base) > 1 else 0] for s, u in enumerate(uas_runs)]))


def chu_liu_edmonds(scores: np.ndarray) -> np.ndarray:
    """Maximum spanning arborescence rooted at node 0 of a dense graph, ``scores[head, dependent]``
    (``-inf`` for a missing edge). Returns ``heads`` with ``heads[0] = -1``. Recursive cycle
    contraction (Chu-Liu-Edmonds), O(n^3) at worst, no Python loop over edges."""
    scores = np.array(scores, dtype=np.float64)
    n = scores.shape[0]
    scores[:, 0] = -np.inf
    np.fill_diagonal(scores, -np.inf)
    heads = scores.argmax(axis=0)
    heads[0] = -1
    cycle = _find_cycle(heads)
    if cycle is None:
        return heads
    in_cycle = np.zeros(n, bool)
    in_cycle[cycle] = True
    keep = np.flatnonzero(~in_cycle)  # node 0 is never in a cycle
    m = len(keep)
    contracted = np.full((m + 1, m + 1), -np.inf)
    contracted[:m, :m] = scores[np.ix_(keep, keep)]
    entering = scores[np.ix_(keep, cycle)] - scores[heads[cycle], cycle][None, :]  # [m, |C|]
    enter_at = cycle[entering.argmax(axis=1)]
    contracted[:m, m] = entering.max(axis=1)
    leaving = scores[np.ix_(cycle, keep)]  # [|C|, m]
    leave_from = cycle[leaving.argmax(axis=0)]
    contracted[m, :m] = leaving.max(axis=0)
    sub = chu_liu_edmonds(contracted)
    out = heads.copy()
    for j in range(1, m):
        out[keep[j]] = leave_from[j] if sub[j] == m else keep[sub[j]]
    u = sub[m]
    out[enter_at[u]] = keep[u]
    return out


def _find_cycle(heads: np.ndarray) -> np.ndarray | None:
    n = len(heads)
    state = np.zeros(n, np.int8)  # 0 new, 1 on the current path, 2 done
    for start in range(1, n):
        path, node = [], start
        while node > 0 and state[node] == 0:
            state[node] = 1
            path.append(node)
            node = heads[node]
        if node > 0 and state[node] == 1:
            return np.array(path[path.index(node):])
        state[path] = 2
    return None


def mst_heads(scores: np.ndarray) -> np.ndarray:
    """Heads (0 = ROOT) of the maximum spanning tree over ``scores [dependent, candidate]`` (candidate 0 =
    ROOT, logits or log-probabilities), decoded with :func:`chu_liu_edmonds`."""
    n = scores.shape[0]
    graph = np.full((n + 1, n + 1), -np.inf)
    graph[:, 1:] = np.where(scores > -1e8, scores, -np.inf).T  # graph[head, dependent]
    return chu_liu_edmonds(graph)[1:]


def train_probe(kind: ProbeKind, train: ProbeData, dev: ProbeData, *, seed: int = 0, epochs: int = 3,
                batch_size: int | None = None, lr: float | None = None, misaligned: bool = False,
                device=None) -> tuple[nn.Module, dict]:
    """Train with Adam (``lr`` default :data:`LEARNING_RATES`) on ``train`` (cross-entropy summed over a
    sentence's words, averaged over the batch's sentences); keep the epoch with the best UAS on ``dev``.
    ``batch_size`` defaults to the data's own size, else 32. The probe and each batch are on ``device`` (default the
    CPU; on another device the packed maps are moved there once, for every training on the same data, when they are
    not there already: :func:`batches_on`), the same code on every device. The probe's initial weights are drawn
    from torch's generator, which is the process's, under a lock (trainings in several threads of one process draw
    in turn). Returns the model and ``{"dev_uas": [...], "best_epoch"}``."""
    lr = LEARNING_RATES[kind] if lr is None else lr
    device = torch.device("cpu" if device is None else device)
    with _SEEDING:
        torch.manual_seed(seed)
        model = build_probe(kind, train)
    model = model.to(device)  # initialised on the CPU (the same weights on every device)
    optim = torch.optim.Adam(model.parameters(), lr=lr)
    history, best, best_state = [], -1.0, None
    batches = _for_model(batches_on(train, batch_size, device), model)
    for epoch in range(epochs):
        model.train()
        for batch in stream(batches, np.random.default_rng(seed * 1000 + epoch).permutation(len(batches))):
            loss = probe_loss(model, batch.to(device), misaligned)
            optim.zero_grad()
            loss.backward()
            optim.step()
        score = greedy_uas(model, dev, misaligned=misaligned, device=device)
        history.append(round(score, 3))
        if score > best:
            best, best_state = score, {k: v.detach().clone() for k, v in model.state_dict().items()}
    model.load_state_dict(best_state)
    return model, {"dev_uas": history, "best_epoch": int(np.argmax(history)) + 1}
