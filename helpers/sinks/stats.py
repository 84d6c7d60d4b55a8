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
head ``[layer, head]``; per layer ``[layer]``. Code is 0-based (position 1 of the papers is index 0). In words:
book/methods.md, §Attention sinks.

>>> acc = FirstPositionAccumulator()
>>> acc.update(first_position_shares(attn, lengths), first_position_shares(norms, lengths, normalise=True))  # doctest: +SKIP
>>> sink_rate(acc.result()["weights"], EPSILON)                                                              # doctest: +SKIP
"""
from __future__ import annotations

import numpy as np
import torch

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
    """Sums of per-input ``alpha_1`` ``[layer, head]`` from weights and from norms, and the count of inputs; a
    deterministic :meth:`merge` (the protocol of :mod:`helpers.reduce`)."""

    def __init__(self) -> None:
        self.weights: np.ndarray | None = None
        self.norms: np.ndarray | None = None
        self.count = 0

    def update(self, weights: torch.Tensor | np.ndarray, norms: torch.Tensor | np.ndarray) -> None:
        """Add a batch of per-input shares, each ``[batch, layer, head]`` (:func:`first_position_shares`)."""
        w = np.asarray(weights.detach().cpu() if isinstance(weights, torch.Tensor) else weights, dtype=np.float64)
        n = np.asarray(norms.detach().cpu() if isinstance(norms, torch.Tensor) else norms, dtype=np.float64)
        if self.weights is None:
            self.weights, self.norms = np.zeros(w.shape[1:]), np.zeros(n.shape[1:])
        self.weights += w.sum(0)
        self.norms += n.sum(0)
        self.count += w.shape[0]

    def merge(self, other: "FirstPositionAccumulator") -> "FirstPositionAccumulator":
        if other.weights is not None:
            if self.weights is None:
                self.weights, self.norms = np.zeros_like(other.weights), np.zeros_like(other.norms)
            self.weights += other.weights
            self.norms += other.norms
            self.count += other.count
        return self

    def result(self) -> dict:
        """``{"weights", "norms"}``: mean ``alpha_1`` over inputs, ``[layer, head]``; ``{"inputs"}``: their count."""
        if not self.count:
            raise ValueError("no input to measure the attention to the first position on (no segment fits)")
        return {"weights": self.weights / self.count, "norms": self.norms / self.count, "inputs": self.count}


def sink_heads(share: np.ndarray, epsilon: float = EPSILON) -> np.ndarray:
    """``[layer, head]`` booleans: heads whose ``alpha_1`` exceeds ``epsilon``."""
    return np.asarray(share) > epsilon


def sink_rate(share: np.ndarray, epsilon: float = EPSILON) -> float:
    """The share of all heads that are sink heads (``alpha_1 > epsilon``)."""
    return float(sink_heads(share, epsilon).mean())


def sink_rate_by_layer(share: np.ndarray, epsilon: float = EPSILON) -> np.ndarray:
    """``[layer]``: per layer, the share of its heads that are sink heads."""
    return sink_heads(share, epsilon).mean(-1)


def first_position_reference(maps: np.ndarray, *, normalise: bool = False) -> np.ndarray:
    """Slow, obvious loops: ``alpha_1`` ``[layer, head]`` of one input's map ``[layer, head, query, key]``, used
    only to test :func:`first_position_shares`."""
    n_layers, n_heads, n, _ = maps.shape
    out = np.zeros((n_layers, n_heads))
    for layer in range(n_layers):
        for head in range(n_heads):
            total = 0.0
            for q in range(n):
                row = sum(float(maps[layer, head, q, k]) for k in range(n)) if normalise else 1.0
                total += float(maps[layer, head, q, 0]) / row if row > 0 else 0.0
            out[layer, head] = total / n
    return out
