"""Distances between heads and their embedding (paper §6, Figure 6).

> We compute the distance between two heads H_i and H_j as
> sum_{token in data} JS(H_i(token), H_j(token)), where JS is the Jensen-Shannon divergence
> between attention distributions. — Clark et al. (2019), §6

For one segment of ``n`` tokens, every head's map is smoothed as in the original code,
``P~ = 0.999 P + 0.001 / n`` (natural log throughout), and for heads ``a`` and ``b``

    sum_i JS_i(a, b) = (S_a + S_b) / 2 - T_ab,    S_k = sum_ij P~_k log P~_k,
    T_ab = sum_ij M log M,  M = (P~_a + P~_b) / 2,

summed over every query row ``i`` of every segment (no averaging, as the paper's formula and the
original code; the square root is not taken). ``S`` costs one pass; ``T`` is formed in chunks of
heads against all later heads with batched tensor operations, never a Python loop over head pairs.
Heads are flattened as ``layer * n_heads + head``; matrices are ``[head, head]``. The distance, the MDS and the
behaviour labels in words: book/methods.md, §Distances between heads.

>>> acc = reduce_maps(lm, batch, partial(JSAccumulator, 72))       # doctest: +SKIP
>>> D = acc.result()                                               # [head, head]   # doctest: +SKIP
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import torch

from helpers.core.batching import length_groups
from helpers.core.bootstrap import BOOTSTRAP

JS_SMOOTHING = 1e-3  # P~ = (1 - s) P + s / n, as in the original head_distances.py


def smooth(P: torch.Tensor) -> torch.Tensor:
    """The original's smoothing over the last axis of length n: ``0.999 P + 0.001 / n``."""
    n = P.shape[-1]
    return (1.0 - JS_SMOOTHING) * P + JS_SMOOTHING / n


def _xlogx_sum(x: torch.Tensor) -> torch.Tensor:
    return (x * torch.log(x)).sum(dim=(-1, -2))


# Elements of one chunk's mixture tensor [chunk, K - start, n, n]: about 8 MB in float32 keeps it in
# the CPU cache. Measured with 72 heads: 128-token segments 114 -> 53 ms with chunks of 1 head
# instead of 8; short segments keep chunks of up to MAX_CHUNK heads (fewer Python steps).
CHUNK_ELEMENTS = 2_000_000
MAX_CHUNK = 8


def causal_map(A: torch.Tensor) -> bool:
    """Whether every head of ``A [layer, head, query, key]`` weighs zero every key after its query (a causal map).

    Such keys are smoothed to the same ``0.001 / n`` in every head, so their terms cancel exactly in each
    divergence (``(S_a + S_b) / 2 - T_ab`` adds ``c / 2 + c / 2 - c``): :func:`batch_js` leaves them out,
    about half the work of a decoder's map. An encoder's map has weight above the diagonal and keeps every
    entry (its sums, and so its bits, as before)."""
    n = A.shape[-1]
    if n < 2 or bool(A[..., 0, 1:].any()):  # the first query sees weight after it: most encoders' maps end here
        return False
    return not bool(torch.triu(A.reshape(-1, n, n), diagonal=1).any())


# Elements of one step's mixture tensor on an accelerator, ``[segments, chunk, K - start, n, n]``: 2**27 float32
# (512 MiB, and as much again for its logarithm) takes 13 of the default model's 128-token segments, or 2 of a
# 16 x 32-head model's, at once: one set of kernels for many segments, within a GPU's memory.
DEVICE_CHUNK_ELEMENTS = 2**27


def batch_js(maps: torch.Tensor | np.ndarray, lengths, *, chunk: int | None = None,
             dtype=torch.float32) -> torch.Tensor:
    """``[batch, head, head]``: for every segment of a padded batch ``maps`` ``[batch, layer, head, query, key]``
    (``lengths`` ``[batch]``: rows and columns from ``n`` on are padding), the sum over its query rows of JS between
    every pair of heads, symmetric with a zero diagonal, computed and left on the maps' device.

    ``dtype`` float32 (default) is about ten times faster than float64 on the CPU and agrees with a float64
    reference to about 1e-6 relative; sums over segments are kept in float64. A causal map (:func:`causal_map`) is
    summed over its visible entries only: the same divergences, in half the work. Segments of one length are
    computed together (their ``[:n, :n]`` corners: padding never enters a sum), as many per step as fit
    :data:`CHUNK_ELEMENTS` on the CPU (there one segment at a time, so a segment's sums do not depend on its
    batch: tested) or :data:`DEVICE_CHUNK_ELEMENTS` on an accelerator; ``chunk`` (heads per step) defaults to
    what fits :data:`CHUNK_ELEMENTS`."""
    A_all = torch.as_tensor(maps)
    B, L, H = A_all.shape[:3]
    K = L * H
    out = torch.zeros(B, K, K, dtype=dtype, device=A_all.device)
    budget = CHUNK_ELEMENTS if A_all.device.type == "cpu" else DEVICE_CHUNK_ELEMENTS
    for n, positions in length_groups(lengths):
        index = torch.as_tensor(positions, device=A_all.device)
        A = A_all[index, :, :, :n, :n]
        P = smooth(A.reshape(len(positions), K, n, n).to(dtype))  # [G, K, n, n]
        if causal_map(A):  # every segment's map causal (the check reads any leading axes): only the visible entries: [G, K, 1, n (n + 1) / 2]
            rows, cols = torch.tril_indices(n, n, device=P.device)
            P = P[:, :, rows, cols].unsqueeze(2)
        per_head = K * P.shape[-2] * P.shape[-1]  # one head against all: a chunk's elements per head and segment
        c = chunk if chunk is not None else max(1, min(MAX_CHUNK, CHUNK_ELEMENTS // per_head))
        step = max(1, budget // (c * per_head))  # segments per step
        for first in range(0, len(positions), step):
            out[index[first:first + step]] = _group_js(P[first:first + step], c)
    return out


def _group_js(P: torch.Tensor, chunk: int) -> torch.Tensor:
    """``[G, K, K]`` divergences of ``G`` segments' smoothed maps ``P [G, K, rows, keys]`` of one length."""
    G, K = P.shape[:2]
    S = _xlogx_sum(P)  # [G, K]
    half = 0.5 * P  # M = P_a / 2 + P_b / 2: halving is exact, so M's bits are those of (P_a + P_b) / 2
    T = torch.zeros(G, K, K, dtype=P.dtype, device=P.device)
    for start in range(0, K, chunk):
        stop = min(start + chunk, K)
        M = half[:, start:stop, None] + half[:, None, start:]  # [G, c, K - start, n, n]
        logs = torch.log(M)
        T[:, start:stop, start:] = logs.mul_(M).sum(dim=(-1, -2))  # in place: two temporaries instead of four
    T = T.triu() + T.triu(1).transpose(-1, -2)  # each pair's one sum on both sides: exactly symmetric (MDS needs it)
    D = 0.5 * (S[:, :, None] + S[:, None, :]) - T
    D.diagonal(0, -2, -1).fill_(0.0)
    return D.clamp_(min=0.0)


def layer_blocks(D: torch.Tensor | np.ndarray, n_layers: int) -> torch.Tensor:
    """``[..., layer, layer]`` float64: the sums of ``D [..., head, head]`` (flattened ``layer * n_heads + head``)
    over each block of a layer's heads against another's (a layer against itself on the diagonal, both triangles):
    all a segment's distances must keep for the within- and between-layer means (:func:`layer_ratio_parts`)."""
    D = torch.as_tensor(D)
    K = D.shape[-1]
    if K % n_layers:
        raise ValueError(f"{K} heads do not split into {n_layers} layers")
    H = K // n_layers
    return D.to(torch.float64).reshape(*D.shape[:-2], n_layers, H, n_layers, H).sum(dim=(-3, -1))


@dataclass
class JSAccumulator:
    """Streaming sum of :func:`batch_js` over segments (``update``, ``merge``, ``result``: the protocol of
    :class:`helpers.reduce.Accumulator`). With ``n_layers`` each segment's :func:`layer_blocks` are kept too
    (``blocks``: ``[segment, layer, layer]``, in the order the segments were added), from which
    :func:`layer_ratio_interval` resamples segments."""

    n_heads_total: int
    total: np.ndarray | None = None
    tokens: int = 0
    segments: int = 0
    n_layers: int | None = None  # keep each segment's layer blocks (None: only the sums)
    blocks: list = field(default_factory=list)  # [segment, layer, layer] blocks, one array (or tensor) per update

    def update(self, batch, extras: list | None = None) -> None:
        """Add a :class:`~helpers.core.extract.MapBatch` of segments (its ``weights``, on their device):
        :func:`batch_js` there, then each segment's distances added in float64 in the batch's order, on that
        device; the sums come to the host once, at :meth:`merge`/:meth:`result` (or when the partial travels)."""
        D = batch_js(batch.weights, batch.lengths)
        if D.shape[1:] != (self.n_heads_total, self.n_heads_total):
            raise ValueError(f"map has {D.shape[1]} heads, expected {self.n_heads_total}")
        total = None if self.total is None else torch.as_tensor(self.total, device=D.device)
        for b in range(D.shape[0]):
            total = D[b].to(torch.float64) if total is None else total + D[b].to(torch.float64)
        self.total = total
        if self.n_layers is not None:
            self.blocks.append(layer_blocks(D, self.n_layers))
        self.tokens += int(batch.lengths.sum())
        self.segments += len(batch)

    def _host(self) -> None:
        if isinstance(self.total, torch.Tensor):
            self.total = self.total.cpu().numpy()
        self.blocks = [b.cpu().numpy() if isinstance(b, torch.Tensor) else b for b in self.blocks]

    def __getstate__(self) -> dict:
        self._host()  # a partial travels (to the driver, from a Dask worker) with its sums on the host
        return dict(self.__dict__)

    def merge(self, other: "JSAccumulator") -> "JSAccumulator":
        """Add ``other``'s segments (another shard's partial) to this accumulator, in place; returns it."""
        if other.n_heads_total != self.n_heads_total:
            raise ValueError(f"cannot merge sums over {other.n_heads_total} heads into sums over {self.n_heads_total}")
        self._host()
        other._host()
        if other.n_layers != self.n_layers:
            raise ValueError(f"cannot merge an accumulator keeping blocks of {other.n_layers} layers into one keeping "
                             f"{self.n_layers}")
        if other.total is not None:
            self.total = other.total.copy() if self.total is None else self.total + other.total
        self.blocks.extend(other.blocks)
        self.tokens += other.tokens
        self.segments += other.segments
        return self

    def result(self) -> np.ndarray:
        if self.total is None:
            raise ValueError("no segments were added")
        self._host()
        return self.total

    def segment_blocks(self) -> np.ndarray:
        """``[segment, layer, layer]`` float64: each segment's :func:`layer_blocks` (needs ``n_layers``)."""
        if self.n_layers is None:
            raise ValueError("this accumulator keeps no per-segment blocks: make it with n_layers")
        self._host()
        if not self.blocks:
            return np.zeros((0, self.n_layers, self.n_layers))
        return np.concatenate(self.blocks, axis=0)

    def to_cache(self) -> dict:
        """What the JS-distance cache holds (:func:`helpers.cluster.run.run_cluster` reads it): the summed
        ``distance [head, head]``, the ``tokens`` and, with ``n_layers``, each segment's ``layer_blocks``."""
        out = {"distance": self.result().tolist(), "tokens": self.tokens}
        if self.n_layers is not None:
            out["layer_blocks"] = self.segment_blocks().tolist()
        return out


MDS_STARTS = 5  # random starts of the MDS (the original's n_init), the best layout kept


def embed_mds(D: np.ndarray, *, seed: int = 0) -> np.ndarray:
    """``[head, 2]`` metric MDS of a precomputed distance matrix, every argument set and seeded.

    scikit-learn changed ``eps`` (1.7) and the ``n_init`` default (1.9); we pass all of them
    (:data:`MDS_STARTS` random starts). The layout is defined up to rotation and reflection.
    """
    from sklearn.manifold import MDS

    mds = MDS(n_components=2, metric_mds=True, n_init=MDS_STARTS, init="random", max_iter=1000, eps=1e-10,
              n_jobs=1, random_state=seed, metric="precomputed", normalized_stress=False)
    return mds.fit_transform(np.asarray(D, dtype=np.float64))


PERMUTATIONS = 1000  # shuffles of the layer labels in the layer test (the chapter's, the command's default)


def layer_similarity(D: np.ndarray, n_heads: int, *, n_perm: int = PERMUTATIONS, seed: int = 0) -> dict:
    """Mean distance between heads of the same layer against heads of different layers, with a
    permutation test (layer labels shuffled over heads, ``n_perm`` times; one-sided p-value for
    "same-layer heads are closer")."""
    K = D.shape[0]
    layers = np.arange(K) // n_heads
    upper = np.triu_indices(K, k=1)
    d = D[upper]

    def gap(labels: np.ndarray) -> tuple[float, float]:
        same = labels[upper[0]] == labels[upper[1]]
        return float(d[same].mean()), float(d[~same].mean())

    within, between = gap(layers)
    rng = np.random.default_rng(seed)
    observed = between - within
    hits = 0
    for _ in range(n_perm):
        w, b = gap(rng.permutation(layers))
        hits += (b - w) >= observed
    return {"within_layer_mean": within, "between_layer_mean": between, "ratio": within / between,
            "permutations": n_perm, "p_value": (hits + 1) / (n_perm + 1)}


def layer_ratio_parts(blocks: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(within [segment], between [segment])``: each segment's share of :func:`layer_similarity`'s two means,
    from its :func:`layer_blocks` ``[segment, layer, layer]``: the distances between two heads of the same layer
    (each pair once) divided by the number of such pairs, and the same for heads of different layers. Summed over
    the segments they are the two means; their ratio is the within/between ratio."""
    blocks = np.asarray(blocks, dtype=np.float64)
    L = blocks.shape[-1]
    diagonal = np.trace(blocks, axis1=-2, axis2=-1)  # both triangles of each layer's block (its diagonal is 0)
    off = blocks.sum(axis=(-2, -1)) - diagonal        # both triangles of every pair of layers
    return diagonal / 2, off / 2  # each pair once


def layer_ratio_interval(blocks: np.ndarray, n_heads: int, *, n_boot: int = BOOTSTRAP, seed: int = 0,
                         level: float = 0.95) -> tuple[float, float]:
    """Percentile bootstrap interval of :func:`layer_similarity`'s within/between ratio, resampling the segments:
    each replicate sums the drawn segments' :func:`layer_ratio_parts` (a ratio of sums:
    :func:`helpers.core.bootstrap.ratio_replicates`). ``blocks`` ``[segment, layer, layer]``; ``n_heads`` heads
    per layer. ``(nan, nan)`` without segments."""
    from helpers.core.bootstrap import counts, percentile_interval, ratio_replicates

    blocks = np.asarray(blocks, dtype=np.float64)
    if not len(blocks):
        return (float("nan"), float("nan"))
    L = blocks.shape[-1]
    pairs_within = L * n_heads * (n_heads - 1) / 2
    pairs_between = (L * n_heads) * (L * n_heads - 1) / 2 - pairs_within
    within, between = layer_ratio_parts(blocks)
    c = counts(len(blocks), n_boot=n_boot, seed=seed)
    return percentile_interval(ratio_replicates(within / pairs_within, between / pairs_between, c), level=level)


def layer_distances(D: np.ndarray, n_heads: int) -> list[dict]:
    """Per layer (1-based ``"layer"``): the mean distance between two of its heads (``"within"``, over the
    pairs above the diagonal) and from its heads to every head of the other layers (``"to_others"``).
    ``D`` is ``[head, head]`` over flattened ``layer * n_heads + head``."""
    D = np.asarray(D)
    layers = np.arange(D.shape[0]) // n_heads
    rows = []
    for layer in range(int(layers.max()) + 1):
        idx = np.flatnonzero(layers == layer)
        within = D[np.ix_(idx, idx)][np.triu_indices(len(idx), 1)].mean()
        others = D[np.ix_(idx, np.flatnonzero(layers != layer))].mean()
        rows.append({"layer": layer + 1, "within": float(within), "to_others": float(others)})
    return rows


def hierarchical_order(D: np.ndarray, *, method: str = "average") -> tuple[np.ndarray, np.ndarray]:
    """``(leaf order, linkage matrix)`` of agglomerative clustering (scipy) on ``D``."""
    from scipy.cluster.hierarchy import leaves_list, linkage
    from scipy.spatial.distance import squareform

    sym = 0.5 * (D + D.T)
    np.fill_diagonal(sym, 0.0)
    Z = linkage(squareform(sym, checks=False), method=method)
    return leaves_list(Z), Z
