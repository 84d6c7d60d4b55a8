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
Heads are flattened as ``layer * n_heads + head``; matrices are ``[head, head]``.

>>> acc = JSAccumulator(n_heads_total=72)
>>> for example, attn in helpers.iter_attention(lm, batch):       # doctest: +SKIP
...     acc.update(attn)
>>> D = acc.result()                                               # [head, head]
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import torch

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
    divergence (``(S_a + S_b) / 2 - T_ab`` adds ``c / 2 + c / 2 - c``): :func:`segment_js` leaves them out,
    about half the work of a decoder's map. An encoder's map has weight above the diagonal and keeps every
    entry (its sums, and so its bits, as before)."""
    n = A.shape[-1]
    if n < 2 or bool(A[..., 0, 1:].any()):  # the first query sees weight after it: most encoders' maps end here
        return False
    return not bool(torch.triu(A.reshape(-1, n, n), diagonal=1).any())


def segment_js(attn: np.ndarray | torch.Tensor, *, chunk: int | None = None, dtype=torch.float32,
               device=None) -> torch.Tensor:
    """``[head, head]`` sum over the segment's query rows of JS between every pair of heads.

    ``attn`` is ``[layer, head, query, key]``; the result is symmetric with a zero diagonal.
    ``dtype`` float32 (default) is about ten times faster than float64 on CPU and agrees with a
    float64 reference to about 1e-6 relative; sums over segments are kept in float64. A causal map
    (:func:`causal_map`) is summed over its visible entries only: the same divergences, in half the work. ``chunk``
    (heads per step) defaults to what fits :data:`CHUNK_ELEMENTS`. Computed on ``device`` (default: where
    ``attn`` is, the CPU for an array); the result is on the CPU.
    """
    A = torch.as_tensor(np.asarray(attn) if not isinstance(attn, torch.Tensor) else attn)
    if device is not None:
        A = A.to(device)
    L, H, n, _ = A.shape
    P = smooth(A.reshape(L * H, n, n).to(dtype))
    if causal_map(A):  # only the visible entries: [K, 1, n (n + 1) / 2]
        rows, cols = torch.tril_indices(n, n, device=P.device)
        P = P[:, rows, cols].unsqueeze(1)
    S = _xlogx_sum(P)  # [K]
    K = P.shape[0]
    if chunk is None:
        chunk = max(1, min(MAX_CHUNK, CHUNK_ELEMENTS // (K * P.shape[-2] * P.shape[-1])))
    half = 0.5 * P  # M = P_a / 2 + P_b / 2: halving is exact, so M's bits are those of (P_a + P_b) / 2
    T = torch.zeros(K, K, dtype=dtype, device=P.device)
    for start in range(0, K, chunk):
        stop = min(start + chunk, K)
        M = half[start:stop, None] + half[None, start:]  # [c, K - start, n, n]
        logs = torch.log(M)
        block = logs.mul_(M).sum(dim=(-1, -2))  # in place: two temporaries instead of four
        T[start:stop, start:] = block  # rows start..stop, pairs (a, b >= start): the upper triangle and beyond
    T = mirror_upper(T)  # each pair's one sum on both sides, so D is exactly symmetric
    D = 0.5 * (S[:, None] + S[None, :]) - T
    D.fill_diagonal_(0.0)
    return D.clamp_(min=0.0).cpu()


def mirror_upper(D: torch.Tensor) -> torch.Tensor:
    """``[K, K]`` ``D`` made exactly symmetric: its upper triangle (and diagonal), mirrored below.

    :func:`segment_js` sums each pair (a, b) once in row a and mirrors it. Inside a chunk's diagonal block it also
    sums (b, a) in row b: on the CPU the two sums agree to the bit, but a GPU's reductions may add them in different
    orders, and scikit-learn's MDS refuses a precomputed matrix that is asymmetric by more than 1e-10."""
    return D.triu() + D.triu(1).T


def js_reference(attn: np.ndarray) -> np.ndarray:
    """Slow float64 loop over head pairs and rows with scipy's Jensen-Shannon (squared), for tests."""
    from scipy.spatial.distance import jensenshannon

    L, H, n, _ = attn.shape
    P = (1.0 - JS_SMOOTHING) * attn.reshape(L * H, n, n).astype(np.float64) + JS_SMOOTHING / n
    K = P.shape[0]
    D = np.zeros((K, K))
    for a in range(K):
        for b in range(K):
            D[a, b] = sum(jensenshannon(P[a, i], P[b, i]) ** 2 for i in range(n))
    return D


@dataclass
class JSAccumulator:
    """Streaming sum of :func:`segment_js` over segments (``update``, ``merge``, ``result``: the protocol
    of :class:`helpers.reduce.Accumulator`)."""

    n_heads_total: int
    chunk: int | None = None  # heads per step; None: see segment_js
    total: np.ndarray | None = None
    tokens: int = 0
    segments: int = 0
    dtype: torch.dtype = field(default=torch.float32)
    device: str | None = None  # where each segment's distances are computed (None: the CPU); sums stay on the CPU

    def update(self, attn) -> None:
        """Add one segment's ``[layer, head, query, key]`` map."""
        D = segment_js(attn, chunk=self.chunk, dtype=self.dtype, device=self.device).numpy().astype(np.float64)
        if D.shape != (self.n_heads_total, self.n_heads_total):
            raise ValueError(f"map has {D.shape[0]} heads, expected {self.n_heads_total}")
        self.total = D if self.total is None else self.total + D
        self.tokens += int(np.shape(attn)[-1])
        self.segments += 1

    add = update  # the name before the shared protocol

    def merge(self, other: "JSAccumulator") -> "JSAccumulator":
        """Add ``other``'s segments (another shard's partial) to this accumulator, in place; returns it."""
        if other.n_heads_total != self.n_heads_total:
            raise ValueError(f"cannot merge sums over {other.n_heads_total} heads into sums over {self.n_heads_total}")
        if other.total is not None:
            self.total = other.total.copy() if self.total is None else self.total + other.total
        self.tokens += other.tokens
        self.segments += other.segments
        return self

    def result(self) -> np.ndarray:
        if self.total is None:
            raise ValueError("no segments were added")
        return self.total


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
