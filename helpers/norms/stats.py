"""Norm-based attention maps (Kobayashi, Kuribayashi, Yokoi and Inui, 2020) and their statistics.

> [W]e propose measuring the norm of the weighted transformed vector ||alpha f(x)|| [...] as an
> indicator of the contribution of each input. — Kobayashi et al. (2020), "Attention is Not Only a
> Weight: Analyzing Transformers with Vector Norms", §3

A self-attention layer's output at token ``i`` decomposes over heads ``h`` and attended tokens ``j``
(see :mod:`helpers.core.internals`; ``x W`` convention, ``W_O^h`` the rows ``h*d:(h+1)*d`` of ``W_O``)::

    out_i = sum_h sum_j alpha^h_ij f_h(x_j) + b_O,      f_h(x_j) = (x_j W_V^h + b_V^h) W_O^h

The *norm map* of head ``h`` is ``N^h_ij = ||alpha^h_ij f_h(x_j)|| = alpha^h_ij ||f_h(x_j)||``
(alpha >= 0), ``[layer, head, query, key]`` like the weight maps; ``b_O`` belongs to no token and is
left out, as in the paper. ``x_j W_V + b_V`` is the value projection's own output, captured with a
forward hook in the same forward pass that returns the weights (no second run); ``||f_h(x_j)||`` is
computed as ``sqrt(v G_h v^T)`` with the head's Gram matrix ``G_h = W_O^h (W_O^h)^T [d, d]``, which
costs ``d`` rather than ``hidden`` products per value vector.

Word-level norm maps use the conversion of the weight maps, ``R N S`` (:mod:`helpers.core.wordlevel`):
the norm *to* a split word is the sum over its tokens (an upper bound of the norm of the summed
vectors, equal when they point the same way) and the norm *from* a split word the mean over its
tokens. Rows of norm maps do not sum to 1.

Statistics (:class:`NormAccumulator`) are shares per query row, then means over rows and segments:
``share_i(kind) = sum_{j in kind} M_ij / sum_j M_ij`` for kinds [CLS], [SEP], "." or "," and every
other token, under ``M = alpha`` (rows sum to 1: the surface chapter's statistics) and ``M = N``
(a row whose norms are all 0 adds 0 to every kind). Special tokens are found by role
(``tokenizer.cls_token_id`` / ``sep_token_id``, see :func:`helpers.surface.stats.token_masks`). The
Spearman correlation between weights and norms of a head is taken over the ``n * n`` query-key pairs
of each segment (ties ranked by their mean rank) and averaged over segments. Each segment's shares are kept too
(:class:`NormSegments`, ``[segment, kind, layer, head]``), with the share uniform attention would give each kind,
for percentile bootstrap intervals over segments (:mod:`helpers.core.bootstrap`): a mean share's interval, and that
of a ratio of the norm share to the weight share in chosen layers (a ratio of sums over the resampled segments). In
words, with the no-op test: book/methods.md, §Attention norms.

>>> acc = reduce_maps(lm, batch, NormAccumulator, maps="weights+norms",    # doctest: +SKIP
...                   extras=lambda ex: (kind_masks(lm.tokenizer, ex.input_ids),))
"""
from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property

import numpy as np
import torch

from helpers.core import bootstrap
from helpers.core.batching import length_groups, stat_chunks
from helpers.core.labels import head_label
from helpers.surface.stats import SINK_SHARE, sink_layers, token_masks

KINDS: tuple[str, ...] = ("cls", "sep", "punct", "other")
# The kinds a causal map (a decoder's) does not have, with the reason: left out of its JSON, named under ``undefined``.
CAUSAL_ABSENT = {"sep": "absent: a decoder's input has no [SEP]"}
KIND_NAMES = {"cls": "[CLS]", "sep": "[SEP]", "punct": ". or ,", "other": "other tokens"}


# ------------------------------------------------------------------------------ statistics


def kind_masks(tokenizer, input_ids: np.ndarray, *, causal: bool = False) -> dict[str, np.ndarray]:
    """Masks of :data:`KINDS` over one input's tokens: [CLS] and [SEP] by role, "." / ",", and the rest; for a
    ``causal`` input (a decoder's) the first position as [CLS] and no [SEP] (:func:`~helpers.surface.stats.token_masks`)."""
    masks = token_masks(tokenizer, input_ids, causal=causal)
    special = masks["cls"] | masks["sep"]
    punct = masks["punct"] & ~special
    out = {"cls": masks["cls"], "sep": masks["sep"], "punct": punct, "other": ~(special | punct)}
    return {**out, "causal": masks["causal"]} if "causal" in masks else out


def uniform_shares(masks: dict[str, np.ndarray]) -> np.ndarray:
    """``[kind]``: the shares of :data:`KINDS` that uniform attention gives one input, per query row averaged over
    rows: each kind's share of the tokens, or for causal masks (a decoder's) of each row's visible prefix
    (row ``i`` sees keys ``0..i``). What "large weights" on a kind are set against (the punctuation claim's premise)."""
    causal = bool(masks.get("causal", False))
    out = []
    for k in KINDS:
        m = np.asarray(masks[k], dtype=np.float64)
        if causal:
            out.append(float((np.cumsum(m) / np.arange(1, len(m) + 1)).mean()))
        else:
            out.append(float(m.mean()))
    return np.asarray(out)


def average_ranks(x: np.ndarray) -> np.ndarray:
    """0-based ranks along the last axis of a 2-D array, ties given their mean rank (as scipy's ``rankdata``).

    One sort of every row at once (:func:`_mean_ranks` then finds the runs of equal values in the sorted
    rows). Finite float32 rows (the maps) are sorted by :func:`_sorted_float32`, a radix sort (for a 6 x 12
    map of 123 tokens, idle 2-core machine: an ``argsort`` of the floats 39 ms, the sort of 64-bit
    value-and-column keys this replaced 36 ms, the radix sort 27 ms; the ranks 46 -> 32 ms, and a segment
    of the norms chapter's statistics 97 -> 64 ms). Every sort gives the same ranks, exactly (tested
    against scipy)."""
    x = np.asarray(x)
    if x.dtype == np.float32 and x.size and np.isfinite(x.min()) and np.isfinite(x.max()):  # NaN makes min NaN
        ordered, flat = _sorted_float32(x)
    else:
        order = np.argsort(x, axis=-1)
        ordered = np.take_along_axis(x, order, axis=-1)
        flat = order + np.arange(x.shape[0])[:, None] * x.shape[1]
    return _mean_ranks(ordered, flat)


def _sorted_float32(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(ordered, flat)`` of a finite float32 ``[rows, n]`` array: each row's values in increasing order as
    keys (equal keys for equal values) and, for each sorted position, the flat index (``row * n + column``)
    of the value there.

    A least-significant-digit radix sort of 32-bit keys: a stable sort by the low 16 bits, then a stable
    sort by the high 16 bits (numpy sorts 16-bit integers stably by counting, in linear time). For
    non-negative floats (attention weights and norms) the bits order as the values do; otherwise negative
    values' bits are flipped and the others get the sign bit. ``-0.0`` is first made ``+0.0``, so equal
    keys are equal values."""
    rows, n = x.shape
    x = x + np.float32(0.0)  # -0.0 -> +0.0
    key = x.view(np.uint32)
    if x.min() < 0:
        key = np.where(key >> np.uint32(31) == 1, ~key, key | np.uint32(0x80000000))
    key = key.reshape(-1)
    offsets = (np.arange(rows) * n)[:, None]
    by_low = np.argsort(key.reshape(rows, n).astype(np.uint16), axis=-1, kind="stable")  # the low 16 bits
    by_low += offsets
    by_low = by_low.reshape(-1)
    high = (key[by_low] >> np.uint32(16)).astype(np.uint16).reshape(rows, n)
    by_high = np.argsort(high, axis=-1, kind="stable")  # then the high 16 bits, ties kept in low-bit order
    by_high += offsets
    flat = by_low[by_high]  # [rows, n]
    return key[flat], flat


def _mean_ranks(ordered: np.ndarray, flat_order: np.ndarray) -> np.ndarray:
    """``[rows, n]`` ranks from each row's sorted values ``ordered`` and the flat indices ``flat_order``
    (``row * n + column``) of the values at each sorted position: every sorted position its position, each
    run of equal values the mean of its first and last positions (exact half-integers), written back to
    the values' places."""
    rows, n = ordered.shape
    position = np.broadcast_to(np.arange(n, dtype=np.float64), (rows, n)).copy()
    row, column = np.nonzero(ordered[:, 1:] == ordered[:, :-1])  # sorted positions column and column + 1 are equal
    if len(row):
        flat = row * n + column
        starts = np.ones(len(flat), dtype=bool)
        starts[1:] = flat[1:] != flat[:-1] + 1  # a new run of equal values (rows never share one)
        first = flat[starts]  # the run's first sorted position
        last = flat[np.append(starts[1:], True)] + 1  # and its last
        length = last - first + 1
        offset = np.repeat(np.cumsum(length) - length, length)
        runs = np.repeat(first, length) + (np.arange(length.sum()) - offset)
        position.reshape(-1)[runs] = np.repeat((first % n + last % n) / 2.0, length)
    ranks = np.empty((rows, n), dtype=np.float64)
    ranks.reshape(-1)[flat_order.reshape(-1)] = position.reshape(-1)
    return ranks


def map_ranks(maps: np.ndarray) -> np.ndarray:
    """``[layer * head, query * key]``: :func:`average_ranks` of each head's ``[query, key]`` map, flattened.

    A causal map (a decoder's: every head weighs 0 on every key after its query) whose values are non-negative is
    ranked by its visible entries alone: its ``m = n (n - 1) / 2`` hidden zeros are the lowest values of every row,
    tied with the ``z`` visible zeros, so all of them take the rank ``(m + z - 1) / 2`` and every positive entry its
    rank among the visible ones plus ``m``. Those are the ranks of the whole row, exactly (half-integers), in a
    little over half the time for a 30 x 9 map of 126 tokens (0.45 -> 0.26 s on one loaded core): the hidden zeros
    made one long run of ties in every row."""
    maps = np.asarray(maps)
    n = maps.shape[-1]
    flat = maps.reshape(-1, n * n)
    rows, cols = np.tril_indices(n)
    visible = rows * n + cols
    hidden = np.ones(n * n, bool)
    hidden[visible] = False
    if n < 2 or flat[:, 1].any() or flat[:, hidden].any():
        return average_ranks(flat)
    values = flat[:, visible]
    if not (values.size and np.isfinite(values).all() and values.min() >= 0):
        return average_ranks(flat)
    m = n * n - len(visible)
    zeros = values == 0
    tied = (m + zeros.sum(-1, keepdims=True) - 1) / 2.0  # [row, 1]: the zeros' mean rank
    ranks = np.broadcast_to(tied, flat.shape).copy()  # the hidden entries
    ranks[:, visible] = np.where(zeros, tied, average_ranks(values) + m)
    return ranks


def average_ranks_on(x):
    """:func:`average_ranks` of a 2-D torch tensor on its own device (ties given their mean rank), as float64."""
    rows, n = x.shape
    ordered, order = torch.sort(x, dim=-1, stable=True)
    starts = torch.ones_like(ordered, dtype=torch.bool)
    starts[:, 1:] = ordered[:, 1:] != ordered[:, :-1]
    runs = (torch.cumsum(starts, dim=-1) - 1 + torch.arange(rows, device=x.device)[:, None] * n).reshape(-1)
    positions = torch.arange(n, device=x.device, dtype=torch.float64).repeat(rows)
    sums = torch.zeros(rows * n, dtype=torch.float64, device=x.device).scatter_add_(0, runs, positions)
    counts = torch.zeros(rows * n, dtype=torch.float64, device=x.device).scatter_add_(0, runs, torch.ones_like(positions))
    means = (sums / counts.clamp(min=1))[runs].view(rows, n)
    return torch.empty_like(means).scatter_(1, order, means)


def batch_kind_shares(maps, lengths, masks: list[dict[str, np.ndarray]]) -> np.ndarray:
    """``[batch, kind, layer, head]``: for every example of a padded batch ``maps`` ``[batch, layer, head, query,
    key]`` (weights or norms; a torch tensor, on its device; ``lengths`` ``[batch]``, ``masks`` one
    :func:`kind_masks` per example), per query row the share of the row's total on each kind of :data:`KINDS`,
    averaged over rows (a row summing to 0 adds 0 to every kind). In float64 where the maps are, examples of one
    length together (their ``[:n, :n]`` corners: padding never enters a sum), cut by
    :func:`helpers.core.batching.stat_chunks`; only the ``[batch, kind, layer, head]`` values leave the device."""
    M_all = torch.as_tensor(maps)
    B, L, H = M_all.shape[:3]
    out = np.zeros((B, len(KINDS), L, H))
    for n, positions in length_groups(lengths):
        for part in stat_chunks(len(positions), 2 * L * H * n * n * 8, M_all.device):
            idx = positions[part]
            M = M_all[torch.as_tensor(idx, device=M_all.device), :, :, :n, :n].to(torch.float64)  # [G, layer, head, n, n]
            kinds = torch.as_tensor(np.stack([np.stack([np.asarray(masks[b][k], bool) for k in KINDS]) for b in idx]),
                                    device=M.device, dtype=M.dtype)  # [G, kind, n]
            totals = M.sum(-1)  # [G, layer, head, query]
            safe = torch.where(totals > 0, totals, torch.ones((), dtype=M.dtype, device=M.device))
            on_kind = M @ kinds.transpose(1, 2)[:, None, None]  # [G, layer, head, query, kind]
            out[idx] = (on_kind / safe[..., None]).mean(-2).permute(0, 3, 1, 2).cpu().numpy()
    return out


def batch_spearman(a, b, lengths) -> np.ndarray:
    """``[batch, layer, head]``: for every example of two padded batches ``a`` and ``b`` ``[batch, layer, head,
    query, key]`` (torch tensors on one device; ``lengths`` ``[batch]``), each head's Spearman correlation over the
    ``n * n`` query-key pairs (ties given their mean rank; NaN for a head whose weights or norms are constant), in
    float64 where the maps are, the examples of one length together, cut by :func:`helpers.core.batching.stat_chunks`.
    The ranks are exact whichever way they are found: on the CPU by :func:`map_ranks` (a radix sort, 2.5 times faster
    there than a torch sort: 0.25 against 0.63 s for a 6 x 12 map of 128 tokens on one core), on an accelerator by
    :func:`average_ranks_on`."""
    a, b = torch.as_tensor(a), torch.as_tensor(b)
    B, L, H = a.shape[:3]
    out = np.full((B, L, H), np.nan)
    for n, positions in length_groups(lengths):
        for part in stat_chunks(len(positions), 16 * L * H * n * n * 8, a.device):  # two maps: sorts, indices, ranks
            index = torch.as_tensor(positions[part], device=a.device)
            ra, rb = (_ranks(x[index, :, :, :n, :n]) for x in (a, b))  # [G * layer * head, n * n]
            ra -= ra.mean(-1, keepdim=True)
            rb -= rb.mean(-1, keepdim=True)
            rho = (ra * rb).sum(-1) / torch.sqrt((ra * ra).sum(-1) * (rb * rb).sum(-1))
            out[positions[part]] = rho.reshape(len(index), L, H).cpu().numpy()
    return out


def _ranks(maps: torch.Tensor) -> torch.Tensor:
    """``[G * layer * head, n * n]`` float64: the average ranks of each head's map in ``maps [G, layer, head, n, n]``,
    on their device (:func:`map_ranks` of each example on the CPU, :func:`average_ranks_on` elsewhere)."""
    n = maps.shape[-1]
    if maps.device.type == "cpu":
        return torch.from_numpy(np.concatenate([map_ranks(m.numpy()) for m in maps]))
    return average_ranks_on(maps.reshape(-1, n * n))


SEGMENT_DTYPE = np.float32  # each segment's shares as kept and cached (a mean of them is float64)


@dataclass
class NormSegments(bootstrap.SegmentDraws):
    """Each segment's values behind :class:`NormStats`, for its bootstrap intervals over segments
    (:class:`helpers.core.bootstrap.SegmentDraws`: ``index``, ``n_boot``, ``seed``, ``counts``): ``weights`` and
    ``norms`` ``[segment, kind, layer, head]`` (:func:`batch_kind_shares`), ``uniform`` ``[segment, kind]``
    (:func:`uniform_shares`), float32 (:data:`SEGMENT_DTYPE`: as cached, whether computed now or read back, so every
    run gives the same intervals)."""

    weights: np.ndarray
    norms: np.ndarray
    uniform: np.ndarray

    def share_intervals(self, measure: str) -> np.ndarray:
        """``[kind, layer, head, 2]``: the 95 % interval of each head's mean share under ``measure`` ("weights" or
        "norms")."""
        return self._share_intervals[measure]

    @cached_property
    def _share_intervals(self) -> dict[str, np.ndarray]:
        return {m: np.asarray(bootstrap.percentile_interval(bootstrap.mean_replicates(getattr(self, m), self.counts)))
                for m in ("weights", "norms")}

    def layer_share_intervals(self, measure: str) -> np.ndarray:
        """``[kind, layer, 2]``: the 95 % interval of each layer's mean share over heads under ``measure``."""
        values = getattr(self, measure).astype(np.float64).mean(-1)  # [segment, kind, layer]
        return np.asarray(bootstrap.percentile_interval(bootstrap.mean_replicates(values, self.counts)))

    def ratio_parts(self, kind: str, layers) -> tuple[np.ndarray, np.ndarray]:
        """``(norms, weights)`` ``[segment]``: each segment's share of ``kind`` under norms and under weights, averaged
        over the heads of 0-based ``layers``: the sums over segments whose ratio :func:`shrink_ratio` is."""
        k, layers = KINDS.index(kind), np.asarray(layers, dtype=int)
        return tuple(getattr(self, m)[:, k][:, layers].astype(np.float64).mean((1, 2)) for m in ("norms", "weights"))

    def ratio_interval(self, kind: str, layers) -> tuple[float, float]:
        """The 95 % interval of :func:`shrink_ratio` (the norm share over the weight share of ``kind`` in 0-based
        ``layers``) over the resampled segments: NaN ends when ``layers`` is empty or no replicate is defined."""
        if len(np.atleast_1d(layers)) == 0:
            return float("nan"), float("nan")
        num, den = self.ratio_parts(kind, layers)
        return bootstrap.percentile_interval(bootstrap.ratio_replicates(num, den, self.counts))

    def to_arrays(self) -> dict[str, np.ndarray]:
        """What the cache keeps (``.npz``): ``index``, ``weights``, ``norms``, ``uniform``."""
        return {"index": np.asarray(self.index, dtype=np.int64), "weights": self.weights.astype(SEGMENT_DTYPE),
                "norms": self.norms.astype(SEGMENT_DTYPE), "uniform": self.uniform.astype(SEGMENT_DTYPE)}

    @classmethod
    def from_arrays(cls, arrays: dict) -> "NormSegments":
        return cls(np.asarray(arrays["index"]), np.asarray(arrays["weights"], SEGMENT_DTYPE),
                   np.asarray(arrays["norms"], SEGMENT_DTYPE), np.asarray(arrays["uniform"], SEGMENT_DTYPE))


@dataclass
class NormStats:
    """Per-head means over segments: ``weights`` and ``norms`` shares ``[kind, layer, head]`` (kinds as
    :data:`KINDS`) and ``spearman`` ``[layer, head]``; ``segments``, each segment's values (:class:`NormSegments`),
    for intervals (``None`` where they were not kept)."""

    weights: np.ndarray
    norms: np.ndarray
    spearman: np.ndarray
    n_segments: int
    causal: bool = False  # the statistics of causal maps (a decoder's): no [SEP], whose shares are absent
    segments: NormSegments | None = field(default=None, compare=False, repr=False)

    def share(self, measure: str, kind: str) -> np.ndarray:
        """``[layer, head]`` share of ``kind`` under ``measure`` ("weights" or "norms")."""
        return getattr(self, measure)[KINDS.index(kind)]

    def layer_share(self, measure: str, kind: str) -> np.ndarray:
        """``[layer]`` mean over heads."""
        return self.share(measure, kind).mean(axis=1)

    def uniform_share(self, kind: str) -> float:
        """The mean share of ``kind`` under uniform attention (:func:`uniform_shares`; NaN without :attr:`segments`)."""
        if self.segments is None:
            return float("nan")
        return float(self.segments.uniform[:, KINDS.index(kind)].astype(np.float64).mean())

    def to_json(self) -> dict:
        """``{"segments", "heads": {"L-H": {"weights", "norms", "spearman"}}, "layers": {"1": {...}}}``; with
        :attr:`segments`, every head's and layer's row gains ``"interval": {"weights": {kind: [lo, hi]}, "norms":
        ...}`` (95 % over the resampled segments) and the whole ``"bootstrap": {"resampled", "n", "replicates",
        "level"}``."""
        kinds = [k for k in KINDS if not (self.causal and k in CAUSAL_ABSENT)]

        def shares(values):
            return {k: round(float(v), 6) for k, v in zip(KINDS, values) if k in kinds}

        def spans(values):  # [kind, 2]
            return {k: [round(float(v[0]), 6), round(float(v[1]), 6)] for k, v in zip(KINDS, values) if k in kinds}

        def row(w, n, s, interval=None):
            out = {"weights": shares(w), "norms": shares(n), "spearman": None if not np.isfinite(s) else round(float(s), 6)}
            if interval is not None:
                out["interval"] = {"weights": spans(interval[0]), "norms": spans(interval[1])}
            return out
        n_layers, n_heads = self.spearman.shape
        seg = self.segments
        heads_iv = None if seg is None else (seg.share_intervals("weights"), seg.share_intervals("norms"))
        layers_iv = None if seg is None else (seg.layer_share_intervals("weights"), seg.layer_share_intervals("norms"))
        heads = {head_label(l, h): row(self.weights[:, l, h], self.norms[:, l, h], self.spearman[l, h],
                                       None if seg is None else (heads_iv[0][:, l, h], heads_iv[1][:, l, h]))
                 for l in range(n_layers) for h in range(n_heads)}
        with np.errstate(invalid="ignore"):
            spear = [np.nanmean(s) if np.isfinite(s).any() else np.nan for s in self.spearman]
        layers = {str(l + 1): row(self.weights[:, l].mean(-1), self.norms[:, l].mean(-1), spear[l],
                                  None if seg is None else (layers_iv[0][:, l], layers_iv[1][:, l]))
                  for l in range(n_layers)}
        out = {"segments": self.n_segments, "heads": heads, "layers": layers}
        if self.causal:
            out["undefined"] = dict(CAUSAL_ABSENT)
        if seg is not None:
            out["bootstrap"] = {"resampled": "segments", "n": len(seg), "replicates": seg.n_boot,
                                "level": bootstrap.LEVEL}
        return out

    def to_cache(self) -> dict:
        out = {"weights": self.weights.tolist(), "norms": self.norms.tolist(),
               "spearman": np.where(np.isfinite(self.spearman), self.spearman, -9.0).tolist(), "n_segments": self.n_segments}
        return {**out, "causal": True} if self.causal else out

    @classmethod
    def from_cache(cls, payload: dict) -> "NormStats":
        spear = np.asarray(payload["spearman"], dtype=np.float64)
        return cls(np.asarray(payload["weights"]), np.asarray(payload["norms"]), np.where(spear < -1.5, np.nan, spear),
                   payload["n_segments"], bool(payload.get("causal", False)))


def top_layers(stats: NormStats, kind: str) -> np.ndarray:
    """0-based layers where ``kind`` receives the most weight: the top half of layers by mean weight share."""
    shares = stats.layer_share("weights", kind)
    return np.sort(np.argsort(shares)[::-1][: max(1, len(shares) // 2)])


def shrink_ratio(stats: NormStats, kind: str, layers: np.ndarray | None = None) -> float:
    """Mean norm share over mean weight share of ``kind`` in ``layers`` (default :func:`top_layers`)."""
    layers = top_layers(stats, kind) if layers is None else layers
    weights = float(stats.layer_share("weights", kind)[layers].mean())
    return float(stats.layer_share("norms", kind)[layers].mean()) / weights if weights > 0 else float("nan")


def sink(stats: NormStats) -> tuple[str, np.ndarray]:
    """The special token this model parks attention on ([CLS] or [SEP], whichever has the larger layer-mean
    weight share somewhere) and the layers where its share exceeds
    :data:`~helpers.surface.stats.SINK_SHARE` (else its top layers)."""
    kind = max(("cls",) if stats.causal else ("cls", "sep"), key=lambda k: stats.layer_share("weights", k).max())
    layers = sink_layers(stats.layer_share("weights", kind), SINK_SHARE)
    return kind, (layers if len(layers) else top_layers(stats, kind))


def layer_ratios(stats: NormStats, grads: dict, kinds: tuple[str, ...] = ("sep", "cls", "punct")) -> dict[str, np.ndarray]:
    """Two ``[layer]`` measures of what attention to each of ``kinds`` does, 1 meaning "like other tokens":
    ``"gradient, K"``, the mean ``|dL/d alpha|`` for attention to it over that to other tokens (``grads`` of
    :func:`helpers.surface.gradients.gradient_importance`), and ``"norm/weight, K"``, its share under norms
    over its share under weights (NaN where the weight share is 0)."""
    kinds = tuple(k for k in kinds if not (stats.causal and k in CAUSAL_ABSENT))  # a decoder has no [SEP]
    out = {f"gradient, {KIND_NAMES[k]}": np.asarray(grads[k]) / np.asarray(grads["other"]) for k in kinds}
    with np.errstate(invalid="ignore", divide="ignore"):
        out.update({f"norm/weight, {KIND_NAMES[k]}": stats.layer_share("norms", k) / stats.layer_share("weights", k)
                    for k in kinds})
    return out


@dataclass
class NormAccumulator:
    """Streaming means of :func:`batch_kind_shares` (weights and norms) and :func:`batch_spearman` per segment
    (``update``, ``merge``, ``result``: the protocol of :class:`helpers.reduce.Accumulator`), and each segment's
    shares kept (``rows``: ``(index, weights, norms, uniform)``) for :class:`NormSegments`: a merge appends another
    partial's rows, and the result orders them by example index, so a sharded or distributed run keeps the same
    segments in the same order as one pass."""

    weights: np.ndarray | float = 0.0
    norms: np.ndarray | float = 0.0
    spearman_sum: np.ndarray | float = 0.0
    spearman_count: np.ndarray | float = 0.0
    count: int = 0
    causal: bool = False  # set by a causal segment (its masks say so)
    rows: list = field(default_factory=list)  # per segment: (example index or None, weights, norms, uniform)

    def update(self, batch, extras: list[tuple]) -> None:
        """Add a :class:`~helpers.core.extract.MapBatch` with ``weights`` and ``norms`` (on their device) and one
        ``(kind_masks,)`` per example: :func:`batch_kind_shares` and :func:`batch_spearman` there, then each
        segment's values added in the batch's order, its row kept with its example index."""
        masks = [e[0] for e in extras]
        weights = batch_kind_shares(batch.weights, batch.lengths, masks)
        norms = batch_kind_shares(batch.norms, batch.lengths, masks)
        spearman = batch_spearman(batch.weights, batch.norms, batch.lengths)
        for k, mask in enumerate(masks):
            self.causal = self.causal or bool(mask.get("causal", False))
            self.weights = self.weights + weights[k]
            self.norms = self.norms + norms[k]
            finite = np.isfinite(spearman[k])
            self.spearman_sum = self.spearman_sum + np.where(finite, spearman[k], 0.0)
            self.spearman_count = self.spearman_count + finite
            self.count += 1
            self.rows.append((batch.examples[k].index, weights[k], norms[k], uniform_shares(mask)))

    def merge(self, other: "NormAccumulator") -> "NormAccumulator":
        """Add ``other``'s segments (another shard's partial) to this accumulator, in place; returns it."""
        self.weights = self.weights + other.weights
        self.norms = self.norms + other.norms
        self.spearman_sum = self.spearman_sum + other.spearman_sum
        self.spearman_count = self.spearman_count + other.spearman_count
        self.count += other.count
        self.causal = self.causal or other.causal
        self.rows.extend(other.rows)
        return self

    def segments(self) -> NormSegments:
        """The kept rows as :class:`NormSegments`, ordered by example index (by arrival where an index is
        missing)."""
        rows = self.rows
        if rows and all(r[0] is not None for r in rows):
            rows = sorted(rows, key=lambda r: r[0])
            index = np.asarray([r[0] for r in rows], dtype=np.int64)
        else:
            index = np.arange(len(rows), dtype=np.int64)
        return NormSegments(index, np.asarray([r[1] for r in rows], SEGMENT_DTYPE),
                            np.asarray([r[2] for r in rows], SEGMENT_DTYPE),
                            np.asarray([r[3] for r in rows], SEGMENT_DTYPE))

    def result(self) -> NormStats:
        if self.count == 0:
            raise ValueError("no segments were added")
        with np.errstate(invalid="ignore", divide="ignore"):
            spearman = np.where(self.spearman_count > 0, self.spearman_sum / np.maximum(self.spearman_count, 1), np.nan)
        return NormStats(self.weights / self.count, self.norms / self.count, spearman, self.count, self.causal,
                         self.segments())

