"""Attention to the first position and the sink rate (Gu et al., 2025, "When Attention Sink Emerges in
Language Models: An Empirical View", §3), from weight maps and from norm maps.

For one input of ``T`` tokens and head ``h`` of layer ``l``, the attention to the first position is

    alpha_1 = (1/T) * sum over q = 1..T of A[l, h, q, 1]

the mean over every query that can see position 1, itself included: under a decoder's causal mask every query
sees it, and so does every query of an encoder. Position 1 is the first token: a decoder's BOS (or, with
``--no-bos``, its first word's first token), an encoder's [CLS]. ``alpha_1`` is averaged over inputs. A head is a
*sink head* when ``alpha_1 > epsilon`` (Gu et al.: ``epsilon = 0.3``, :data:`EPSILON`); the *sink rate* is the
share of the ``layer x head`` heads that are sink heads, overall and per layer.

The norm-based counterpart replaces ``A`` by the norm map ``N = ||alpha f(x)||`` (Kobayashi et al. 2020,
:mod:`helpers.core.norm_maps`), whose rows do not sum to 1: each row's share ``N[q, 1] / sum_k N[q, k]`` is
averaged over queries instead (a row of zero norms adds 0), as the norms chapter's shares are.

Shapes: a padded batch of maps ``[batch, layer, head, query, key]`` and the inputs' lengths ``[batch]``; per
head ``[layer, head]``; per layer ``[layer]``. Code is 0-based (position 1 of the papers is index 0). Each input's
``alpha_1`` is kept too (:class:`SegmentShares`, ``[segment, layer, head]``), for percentile bootstrap intervals over
the segments (:mod:`helpers.core.bootstrap`): a sink rate recomputed from each replicate's means, a ratio of the norm
share to the weight share as a ratio of sums, and a run without BOS paired with the run with it on the same segments.
In words: book/methods.md, §Attention sinks.

>>> acc = reduce_maps(lm, batch, FirstPositionAccumulator, maps="weights+norms")    # doctest: +SKIP
>>> sink_rate(acc.result()["weights"], EPSILON)                                     # doctest: +SKIP
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from helpers.core import bootstrap

EPSILON = 0.3  # Gu et al. (2025): a head whose alpha_1 exceeds it is a sink head


def first_position_shares(maps: torch.Tensor, lengths: torch.Tensor | np.ndarray, *, normalise: bool = False) -> torch.Tensor:
    """``[batch, layer, head]``: per input, the mean over its queries ``q < n`` of the share of row ``q`` on key 0.

    ``maps`` ``[batch, layer, head, query, key]`` is a right-padded batch; ``lengths`` ``[batch]`` the inputs'
    token counts (rows and columns from ``n`` on are padding, left out). With ``normalise`` each row is divided by
    its sum over the input's keys (norm maps); weight maps' rows sum to 1 already, so their share is the entry."""
    n_max = maps.shape[-1]
    lengths = torch.as_tensor(np.asarray(lengths), device=maps.device)
    valid = torch.arange(n_max, device=maps.device)[None, :] < lengths[:, None]  # [batch, position]
    first = maps[..., 0].double()  # [batch, layer, head, query]
    if normalise:
        keys = valid[:, None, None, None, :]  # padding keys left out (their weights are 0 already)
        totals = maps.masked_fill(~keys, 0).sum(-1, dtype=torch.float64)  # [batch, layer, head, query]
        first = torch.where(totals > 0, first / torch.where(totals > 0, totals, 1.0), 0.0)
    rows = valid[:, None, None, :].to(first.dtype)
    return (first * rows).sum(-1) / lengths[:, None, None].to(first.dtype)


class FirstPositionAccumulator:
    """Per-input ``alpha_1`` ``[layer, head]`` from weights and from norms (:func:`first_position_shares` of a
    :class:`~helpers.core.extract.MapBatch` with both, on its device), each input's kept (``rows``, with its example
    index, for :class:`SegmentShares`) and each batch's sums, added in the batches' order at :meth:`result` (a
    :meth:`merge` appends another partial's: the protocol of :mod:`helpers.reduce`)."""

    def __init__(self) -> None:
        self.sums: list[tuple[np.ndarray, np.ndarray]] = []  # per batch: (weights [layer, head], norms), summed
        self.count = 0
        self.rows: list[tuple] = []  # per input: (example index, weights [layer, head], norms [layer, head])

    def update(self, batch, extras: list | None = None) -> None:
        """Add a batch's inputs: the shares of their weight maps and (row-normalised) norm maps."""
        w = first_position_shares(batch.weights, batch.lengths).cpu().numpy()
        n = first_position_shares(batch.norms, batch.lengths, normalise=True).cpu().numpy()
        self.sums.append((w.sum(0), n.sum(0)))
        self.count += w.shape[0]
        self.rows.extend((int(ex.index), w[b], n[b]) for b, ex in enumerate(batch.examples))

    def merge(self, other: "FirstPositionAccumulator") -> "FirstPositionAccumulator":
        self.sums.extend(other.sums)
        self.count += other.count
        self.rows.extend(other.rows)
        return self

    def segments(self) -> "SegmentShares":
        """The kept rows as :class:`SegmentShares`, ordered by example index."""
        rows = sorted(self.rows, key=lambda r: r[0])
        return SegmentShares(np.asarray([r[0] for r in rows], dtype=np.int64),
                             np.asarray([r[1] for r in rows], SEGMENT_DTYPE),
                             np.asarray([r[2] for r in rows], SEGMENT_DTYPE))

    def result(self) -> dict:
        """``{"weights", "norms"}``: mean ``alpha_1`` over inputs, ``[layer, head]``; ``{"inputs"}``: their count."""
        if not self.count:
            raise ValueError("no input to measure the attention to the first position on (no segment fits)")
        weights, norms = sum(w for w, _ in self.sums), sum(n for _, n in self.sums)  # in the batches' order
        return {"weights": weights / self.count, "norms": norms / self.count, "inputs": self.count}


SEGMENT_DTYPE = np.float32  # each input's alpha_1 as kept and cached (the means are float64 sums)


@dataclass
class SegmentShares(bootstrap.SegmentDraws):
    """Each input's ``alpha_1`` behind the means, for bootstrap intervals over segments
    (:class:`helpers.core.bootstrap.SegmentDraws`: ``index``, ``n_boot``, ``seed``, ``counts``): ``weights`` and
    ``norms`` ``[segment, layer, head]``, float32 (:data:`SEGMENT_DTYPE`, as cached, so a cold and a warm run give
    the same intervals)."""

    weights: np.ndarray
    norms: np.ndarray

    def mean_replicates(self, measure: str = "weights") -> np.ndarray:
        """``[n_boot, layer, head]``: mean ``alpha_1`` under ``measure`` in each replicate."""
        return bootstrap.mean_replicates(getattr(self, measure), self.counts)

    def share_intervals(self, measure: str = "weights") -> np.ndarray:
        """``[layer, head, 2]``: the 95 % interval of each head's mean ``alpha_1`` under ``measure``."""
        return np.asarray(bootstrap.percentile_interval(self.mean_replicates(measure)))

    def rate_replicates(self, epsilon: float = EPSILON, layers=None) -> np.ndarray:
        """``[n_boot]``: the sink rate (:func:`sink_rate`) of each replicate's means, over 0-based ``layers``
        (default every layer)."""
        means = self.mean_replicates("weights")
        if layers is not None:
            means = means[:, np.asarray(layers, dtype=int)]
        return (means > epsilon).reshape(len(means), -1).mean(-1)

    def ratio_interval(self, layers) -> tuple[float, float]:
        """The 95 % interval of the mean ``alpha_1`` under norms over that under weights in 0-based ``layers`` (a
        ratio of sums over the resampled segments); NaN ends when ``layers`` is empty."""
        layers = np.asarray(layers, dtype=int)
        if len(layers) == 0:
            return float("nan"), float("nan")
        num, den = (getattr(self, m)[:, layers].astype(np.float64).mean((1, 2)) for m in ("norms", "weights"))
        return bootstrap.percentile_interval(bootstrap.ratio_replicates(num, den, self.counts))

    def paired(self, other: "SegmentShares") -> tuple["SegmentShares", "SegmentShares"]:
        """``self`` and ``other`` cut to the segments both hold (by example index), in one order: the units of a
        paired comparison (the run without BOS reads the same segments as the run with it)."""
        common = np.intersect1d(self.index, other.index)
        if not len(common):
            raise ValueError("paired: the two runs share no segment (they read different segments)")

        def cut(s: "SegmentShares") -> "SegmentShares":
            at = np.searchsorted(s.index, common)
            return SegmentShares(common, s.weights[at], s.norms[at], n_boot=self.n_boot, seed=self.seed)
        return cut(self), cut(other)

    def to_arrays(self) -> dict[str, np.ndarray]:
        """What the cache keeps (``.npz``): ``index``, ``weights``, ``norms``."""
        return {"index": np.asarray(self.index, dtype=np.int64), "weights": self.weights.astype(SEGMENT_DTYPE),
                "norms": self.norms.astype(SEGMENT_DTYPE)}

    @classmethod
    def from_arrays(cls, arrays: dict) -> "SegmentShares":
        return cls(np.asarray(arrays["index"]), np.asarray(arrays["weights"], SEGMENT_DTYPE),
                   np.asarray(arrays["norms"], SEGMENT_DTYPE))


def kept_replicates(with_bos: SegmentShares, without_bos: SegmentShares, epsilon: float = EPSILON) -> np.ndarray:
    """``[n_boot]``: the sink rate without BOS over the sink rate with it, in each replicate of the segments both
    runs read, drawn once for both (paired); NaN where a replicate has no sink head with BOS."""
    a, b = with_bos.paired(without_bos)
    with np.errstate(invalid="ignore", divide="ignore"):
        return b.rate_replicates(epsilon) / a.rate_replicates(epsilon)


def sink_heads(share: np.ndarray, epsilon: float = EPSILON) -> np.ndarray:
    """``[layer, head]`` booleans: heads whose ``alpha_1`` exceeds ``epsilon``."""
    return np.asarray(share) > epsilon


def sink_rate(share: np.ndarray, epsilon: float = EPSILON) -> float:
    """The share of all heads that are sink heads (``alpha_1 > epsilon``)."""
    return float(sink_heads(share, epsilon).mean())


def sink_rate_by_layer(share: np.ndarray, epsilon: float = EPSILON) -> np.ndarray:
    """``[layer]``: per layer, the share of its heads that are sink heads."""
    return sink_heads(share, epsilon).mean(-1)
