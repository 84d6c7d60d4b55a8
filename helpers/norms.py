"""Norm-based attention maps (Kobayashi, Kuribayashi, Yokoi and Inui, 2020) and their statistics.

> [W]e propose measuring the norm of the weighted transformed vector ||alpha f(x)|| [...] as an
> indicator of the contribution of each input. — Kobayashi et al. (2020), "Attention is Not Only a
> Weight: Analyzing Transformers with Vector Norms", §3

A self-attention layer's output at token ``i`` decomposes over heads ``h`` and attended tokens ``j``
(see :mod:`helpers.internals`; ``x W`` convention, ``W_O^h`` the rows ``h*d:(h+1)*d`` of ``W_O``)::

    out_i = sum_h sum_j alpha^h_ij f_h(x_j) + b_O,      f_h(x_j) = (x_j W_V^h + b_V^h) W_O^h

The *norm map* of head ``h`` is ``N^h_ij = ||alpha^h_ij f_h(x_j)|| = alpha^h_ij ||f_h(x_j)||``
(alpha >= 0), ``[layer, head, query, key]`` like the weight maps; ``b_O`` belongs to no token and is
left out, as in the paper. ``x_j W_V + b_V`` is the value projection's own output, captured with a
forward hook in the same forward pass that returns the weights (no second run); ``||f_h(x_j)||`` is
computed as ``sqrt(v G_h v^T)`` with the head's Gram matrix ``G_h = W_O^h (W_O^h)^T [d, d]``, which
costs ``d`` rather than ``hidden`` products per value vector.

Word-level norm maps use the conversion of the weight maps, ``R N S`` (:mod:`helpers.wordlevel`):
the norm *to* a split word is the sum over its tokens (an upper bound of the norm of the summed
vectors, equal when they point the same way) and the norm *from* a split word the mean over its
tokens. Rows of norm maps do not sum to 1.

Statistics (:class:`NormAccumulator`) are shares per query row, then means over rows and segments:
``share_i(kind) = sum_{j in kind} M_ij / sum_j M_ij`` for kinds [CLS], [SEP], "." or "," and every
other token, under ``M = alpha`` (rows sum to 1: the surface chapter's statistics) and ``M = N``
(a row whose norms are all 0 adds 0 to every kind). Special tokens are found by role
(``tokenizer.cls_token_id`` / ``sep_token_id``, see :func:`helpers.surface.token_masks`). The
Spearman correlation between weights and norms of a head is taken over the ``n * n`` query-key pairs
of each segment (ties ranked by their mean rank) and averaged over segments.

>>> for example, attn, norms in iter_weights_and_norms(lm, batch):     # doctest: +SKIP
...     acc.add(attn, norms, kind_masks(lm.tokenizer, example.input_ids))
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Iterator, Sequence

import numpy as np
import torch

from .encoding import Encoded, EncodedBatch
from .extract import LEVELS, Level, bucket, convert, model_inputs
from .internals import attention_parts, capture, output_weight
from .labels import head_label
from .models import LoadedModel
from .surface import token_masks
from .wordlevel import WordMode, batched_matrices, word_level_batch

KINDS: tuple[str, ...] = ("cls", "sep", "punct", "other")
VERSION = 1  # part of cache keys: bump when a definition changes


# ------------------------------------------------------------------------------ the maps


def gram_matrices(lm: LoadedModel) -> list[torch.Tensor]:
    """Per layer ``G [head, d, d]`` with ``G_h = W_O^h (W_O^h)^T``, so ``||v W_O^h||^2 = v G_h v^T``."""
    out = []
    for layer in range(lm.n_layers):
        W = output_weight(attention_parts(lm.model, layer), lm.n_heads).detach().float()  # [head, d, hidden]
        out.append(W @ W.transpose(1, 2))
    return out


def transformed_norms(values: torch.Tensor, gram: torch.Tensor) -> torch.Tensor:
    """``||f_h(x_j)||`` ``[batch, head, token]`` from value outputs ``[batch, token, head * d]`` and ``G [head, d, d]``."""
    n_heads = gram.shape[0]
    v = values.float().view(*values.shape[:-1], n_heads, -1)  # [batch, token, head, d]
    squared = torch.einsum("bthd,hde,bthe->bht", v, gram, v)
    return squared.clamp_min(0).sqrt()


def forward_weights_and_norms(lm: LoadedModel, examples: Sequence[Encoded]) -> tuple[torch.Tensor, torch.Tensor]:
    """Weights and norm maps of a padded batch from one forward pass, both ``[batch, layer, head, query, key]``.

    Rows and columns of padding are meaningless; slice ``[:n, :n]`` per example.
    """
    grams = gram_matrices(lm)
    key_norms: dict[int, torch.Tensor] = {}

    def keep(_part, layer, values):
        key_norms[layer] = transformed_norms(values, grams[layer])

    with torch.inference_mode(), capture(lm, ("value",), on_output=keep):
        out = lm.model(**model_inputs(lm, examples), output_attentions=True)
    if not out.attentions or out.attentions[0] is None:
        raise RuntimeError(f"{lm.label} returned no attention probabilities; load it with attn_implementation='eager'.")
    attn = torch.stack(out.attentions, dim=1).float()  # [batch, layer, head, query, key]
    fnorm = torch.stack([key_norms[l] for l in range(lm.n_layers)], dim=1)  # [batch, layer, head, key]
    return attn, attn * fnorm[:, :, :, None, :]


def batch_norm_maps(lm: LoadedModel, examples: Sequence[Encoded], *, level: Level = "token",
                    word_mode: WordMode = "mean") -> list[torch.Tensor]:
    """Per-example norm maps ``[layer, head, n, n]`` (float32) for one batch; word level as ``R N S``."""
    if level not in LEVELS:
        raise ValueError(f"--level {level!r}: choose one of {', '.join(LEVELS)}")
    _, norms = forward_weights_and_norms(lm, examples)
    if level == "token":
        return [norms[b, :, :, : len(ex), : len(ex)] for b, ex in enumerate(examples)]
    if any(ex.word_of_token is None for ex in examples):
        raise ValueError("word-level maps need pre-split words (encode with encode_words)")
    R, S = batched_matrices([ex.word_of_token for ex in examples], norms.shape[-1], mode=word_mode, device=norms.device)
    words = word_level_batch(norms, R, S)
    return [words[b, :, :, : ex.n_positions, : ex.n_positions] for b, ex in enumerate(examples)]


def iter_norm_maps(lm: LoadedModel, batch: EncodedBatch | Sequence[Encoded], *, level: Level = "token",
                   word_mode: WordMode = "mean", batch_size: int = 32, progress: bool = False,
                   dtype=np.float32) -> Iterator[tuple[Encoded, np.ndarray]]:
    """Stream ``(example, norms [layer, head, n, n])``, like :func:`helpers.extract.iter_attention`."""
    from tqdm.auto import tqdm

    examples = batch.examples if isinstance(batch, EncodedBatch) else list(batch)
    with tqdm(total=len(examples), desc=f"{level}-level norms", unit="ex", disable=not progress) as bar:
        for group in bucket(examples, batch_size=batch_size):
            for ex, norms in zip(group, batch_norm_maps(lm, group, level=level, word_mode=word_mode)):
                yield ex, convert(norms, dtype)
            bar.update(len(group))


def iter_weights_and_norms(lm: LoadedModel, batch: EncodedBatch | Sequence[Encoded], *, batch_size: int = 32,
                           progress: bool = False) -> Iterator[tuple[Encoded, np.ndarray, np.ndarray]]:
    """Stream token-level ``(example, attn, norms)``, both float32 ``[layer, head, n, n]``, one pass per batch."""
    from tqdm.auto import tqdm

    examples = batch.examples if isinstance(batch, EncodedBatch) else list(batch)
    with tqdm(total=len(examples), desc="weights and norms", unit="ex", disable=not progress) as bar:
        for group in bucket(examples, batch_size=batch_size):
            attn, norms = forward_weights_and_norms(lm, group)
            for b, ex in enumerate(group):
                n = len(ex)
                yield ex, convert(attn[b, :, :, :n, :n], np.float32), convert(norms[b, :, :, :n, :n], np.float32)
            bar.update(len(group))


def norm_maps_reference(lm: LoadedModel, input_ids: np.ndarray) -> np.ndarray:
    """Slow, obvious version of the token-level norm maps of one input, used only to test the fast path.

    For every layer, head, query ``i`` and key ``j``: ``||alpha_ij (x_j W_V^h + b_V^h) W_O^h||`` with ``x``
    the hidden states entering the layer, ``W`` read from the modules' weights, in float64 loops.
    """
    example = Encoded(0, np.asarray(input_ids, dtype=np.int64))
    n = len(example)
    result = np.zeros((lm.n_layers, lm.n_heads, n, n))
    with torch.no_grad():
        out = lm.model(**model_inputs(lm, [example]), output_attentions=True, output_hidden_states=True)
        for layer in range(lm.n_layers):
            parts = attention_parts(lm.model, layer)
            x = out.hidden_states[layer][0].double()  # [token, hidden] entering the layer
            WV, bV = parts.value.weight.double().T, parts.value.bias.double()  # [hidden, head * d], [head * d]
            WO = parts.output.weight.double().T  # [head * d, hidden]
            d = WV.shape[1] // lm.n_heads
            for h in range(lm.n_heads):
                cols = slice(h * d, (h + 1) * d)
                for j in range(n):
                    f = (x[j] @ WV[:, cols] + bV[cols]) @ WO[cols, :]
                    for i in range(n):
                        alpha = float(out.attentions[layer][0, h, i, j])
                        result[layer, h, i, j] = float(torch.linalg.vector_norm(alpha * f))
    return result


# ------------------------------------------------------------------------------ statistics


def kind_masks(tokenizer, input_ids: np.ndarray) -> dict[str, np.ndarray]:
    """Masks of :data:`KINDS` over one input's tokens: [CLS] and [SEP] by role, "." / ",", and the rest."""
    masks = token_masks(tokenizer, input_ids)
    special = masks["cls"] | masks["sep"]
    punct = masks["punct"] & ~special
    return {"cls": masks["cls"], "sep": masks["sep"], "punct": punct, "other": ~(special | punct)}


def kind_shares(maps: np.ndarray, masks: dict[str, np.ndarray]) -> np.ndarray:
    """``[kind, layer, head]``: per query row, the share of the row's total on each kind, averaged over rows.

    ``maps`` is ``[layer, head, query, key]`` (weights or norms); rows summing to 0 add 0 to every kind.
    """
    M = np.asarray(maps, dtype=np.float64)
    totals = M.sum(-1)  # [layer, head, query]
    safe = np.where(totals > 0, totals, 1.0)
    return np.stack([(M[..., masks[k]].sum(-1) / safe).mean(-1) for k in KINDS])


def average_ranks(x: np.ndarray) -> np.ndarray:
    """0-based ranks along the last axis of a 2-D array, ties given their mean rank (as scipy's ``rankdata``).

    One sort of every row at once; equal values are found as runs in the sorted rows.
    """
    rows, n = x.shape
    order = np.argsort(x, axis=-1)
    ordered = np.take_along_axis(x, order, axis=-1)
    starts = np.ones((rows, n), dtype=bool)
    starts[:, 1:] = ordered[:, 1:] != ordered[:, :-1]  # a new run of equal values (each row starts one)
    run = np.cumsum(starts.ravel()) - 1  # run id of every sorted position, rows never share a run
    first = np.flatnonzero(starts.ravel())  # flat position where each run starts
    length = np.bincount(run)
    mean_position = first + (length - 1) / 2.0 - (first // n) * n  # within its row
    ranks = np.empty((rows, n), dtype=np.float64)
    np.put_along_axis(ranks, order, mean_position[run].reshape(rows, n), axis=-1)
    return ranks


def spearman_per_head(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``[layer, head]`` Spearman correlation of two ``[layer, head, query, key]`` maps over their query-key pairs.

    A head whose weights or norms are constant over the segment gets NaN.
    """
    a, b = np.asarray(a), np.asarray(b)
    shape = a.shape[:2]
    ra, rb = average_ranks(a.reshape(-1, a.shape[2] * a.shape[3])), average_ranks(b.reshape(-1, b.shape[2] * b.shape[3]))
    ra -= ra.mean(-1, keepdims=True)
    rb -= rb.mean(-1, keepdims=True)
    with np.errstate(invalid="ignore", divide="ignore"):
        rho = (ra * rb).sum(-1) / np.sqrt((ra * ra).sum(-1) * (rb * rb).sum(-1))
    return rho.reshape(shape)


@dataclass
class NormStats:
    """Per-head means over segments: ``weights`` and ``norms`` shares ``[kind, layer, head]`` (kinds as
    :data:`KINDS`) and ``spearman`` ``[layer, head]``."""

    weights: np.ndarray
    norms: np.ndarray
    spearman: np.ndarray
    n_segments: int

    def share(self, measure: str, kind: str) -> np.ndarray:
        """``[layer, head]`` share of ``kind`` under ``measure`` ("weights" or "norms")."""
        return getattr(self, measure)[KINDS.index(kind)]

    def layer_share(self, measure: str, kind: str) -> np.ndarray:
        """``[layer]`` mean over heads."""
        return self.share(measure, kind).mean(axis=1)

    def to_json(self) -> dict:
        """``{"segments", "heads": {"L-H": {"weights", "norms", "spearman"}}, "layers": {"1": {...}}}``."""
        def row(w, n, s):
            return {"weights": {k: round(float(v), 6) for k, v in zip(KINDS, w)},
                    "norms": {k: round(float(v), 6) for k, v in zip(KINDS, n)},
                    "spearman": None if not np.isfinite(s) else round(float(s), 6)}
        n_layers, n_heads = self.spearman.shape
        heads = {head_label(l, h): row(self.weights[:, l, h], self.norms[:, l, h], self.spearman[l, h])
                 for l in range(n_layers) for h in range(n_heads)}
        with np.errstate(invalid="ignore"):
            spear = [np.nanmean(s) if np.isfinite(s).any() else np.nan for s in self.spearman]
        layers = {str(l + 1): row(self.weights[:, l].mean(-1), self.norms[:, l].mean(-1), spear[l]) for l in range(n_layers)}
        return {"segments": self.n_segments, "heads": heads, "layers": layers}

    def to_cache(self) -> dict:
        return {"weights": self.weights.tolist(), "norms": self.norms.tolist(),
                "spearman": np.where(np.isfinite(self.spearman), self.spearman, -9.0).tolist(), "n_segments": self.n_segments}

    @classmethod
    def from_cache(cls, payload: dict) -> "NormStats":
        spear = np.asarray(payload["spearman"], dtype=np.float64)
        return cls(np.asarray(payload["weights"]), np.asarray(payload["norms"]), np.where(spear < -1.5, np.nan, spear),
                   payload["n_segments"])


@dataclass
class NormAccumulator:
    """Streaming means of :func:`kind_shares` (weights and norms) and :func:`spearman_per_head` per segment."""

    weights: np.ndarray | float = 0.0
    norms: np.ndarray | float = 0.0
    spearman_sum: np.ndarray | float = 0.0
    spearman_count: np.ndarray | float = 0.0
    count: int = 0

    def add(self, attn: np.ndarray, norms: np.ndarray, masks: dict[str, np.ndarray]) -> None:
        self.weights = self.weights + kind_shares(attn, masks)
        self.norms = self.norms + kind_shares(norms, masks)
        rho = spearman_per_head(attn, norms)
        finite = np.isfinite(rho)
        self.spearman_sum = self.spearman_sum + np.where(finite, rho, 0.0)
        self.spearman_count = self.spearman_count + finite
        self.count += 1

    def result(self) -> NormStats:
        if self.count == 0:
            raise ValueError("no segments were added")
        with np.errstate(invalid="ignore", divide="ignore"):
            spearman = np.where(self.spearman_count > 0, self.spearman_sum / np.maximum(self.spearman_count, 1), np.nan)
        return NormStats(self.weights / self.count, self.norms / self.count, spearman, self.count)


def norm_statistics(lm: LoadedModel, batch: EncodedBatch, *, batch_size: int = 32, progress: bool = False) -> NormStats:
    """Every statistic above in one streaming pass of weights and norms (no corpus of maps in memory)."""
    acc = NormAccumulator()
    for example, attn, norms in iter_weights_and_norms(lm, batch, batch_size=batch_size, progress=progress):
        acc.add(attn, norms, kind_masks(lm.tokenizer, example.input_ids))
    return acc.result()
