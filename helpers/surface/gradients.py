"""Gradient-based importance of attention weights (paper §3.2, Figure 3).

> We compute the magnitude of the gradient of the loss from BERT's masked language modeling task
> with respect to each attention weight. — Clark et al. (2019), §3.2

For every segment we mask tokens BERT-style (seeded, see :mod:`helpers.surface.mlm`), run the model with
the attention probabilities kept in the autograd graph, take the masked-LM loss (mean
cross-entropy over the segment's masked tokens) and its gradient with respect to every attention
weight ``alpha[layer, head, i, j]``. The magnitudes ``|dL/d alpha|`` are averaged, per segment and
layer, over all heads and query rows ``i`` and over the keys ``j`` of one kind: [SEP], "." or ",",
[CLS], and every other token. Segments then count equally. The paper leaves the masking and the
averaging unit unspecified; these are our choices (book/methods.md, §Surface statistics and gradients).
[CLS] is reported on its own (the paper's figure has no such line) because some models, the offline
default among them, park attention on [CLS] rather than [SEP].

A decoder (``lm.causal``) is scored with its own language-model head, nothing fitted: the loss of a segment is
the mean next-token cross-entropy over its positions ``0..n-2`` (position ``t`` predicts token ``t + 1``), and
the magnitudes are averaged over the entries a head can weigh, query ``i`` and key ``j <= i`` (the gradient
with respect to a masked weight is not zero, but no weight is there to change). The first position takes
[CLS]'s place; a decoder has no [SEP], whose entry is ``None`` (absent).

>>> result = gradient_importance(lm, head, batch, seed=0)          # doctest: +SKIP
>>> result["sep"]                                                   # [layer]
"""
from __future__ import annotations

from typing import Sequence

import numpy as np
import torch
from torch import nn

from helpers.core.encoding import EncodedBatch
from helpers.core.extract import at_least_float32, bucket, model_inputs
from helpers.core.models import LoadedModel
from helpers.core.threads import FIXED_THREADS, torch_threads
from helpers.surface.mlm import masked_examples
from helpers.surface.stats import token_masks

KINDS: tuple[str, ...] = ("sep", "punct", "cls", "other")

GRADIENT_BATCH_WIDTH = 16 * 6 * 384  # segments x layers x hidden size of one backward pass (16 for a 6 x 384 model)


def gradient_batch_size(lm: LoadedModel) -> int:
    """Segments per backward pass: 16 for the 6-layer, 384-wide default, 4 for a 12-layer, 768-wide
    (BERT-base-sized) model. A backward pass keeps every layer's activations, so its memory grows with
    segments x layers x hidden size; this keeps it at the default's (a base-size model with 16 segments
    peaked at 4.35 GB in ``surface``). Segments are scored independently, so the size changes no result
    beyond float round-off."""
    hidden = int(getattr(lm.model.config, "hidden_size", 768))
    return max(1, round(GRADIENT_BATCH_WIDTH / (lm.n_layers * hidden)))


def gradient_importance(lm: LoadedModel, head: nn.Module, batch: EncodedBatch, *, seed: int = 0,
                        batch_size: int | None = None, progress: bool = False) -> dict:
    """Mean ``|dL/d alpha|`` per layer for attention to [SEP], to "."/",", and to other tokens.

    ``batch_size``: segments per backward pass (default :func:`gradient_batch_size`).

    Returns ``{"sep": [layer], "punct": [layer], "cls": [layer], "other": [layer], "segments": int,
    "per_segment": {kind: [segment, layer]}}``; a segment without "." or "," adds nothing to ``punct`` (its row of
    ``per_segment["punct"]`` is NaN). ``per_segment`` holds each segment's mean ``|dL/d alpha|`` per layer, segments
    in the order of their index in ``batch`` (what the intervals resample:
    :func:`helpers.surface.stats.gradient_ratio_interval`); a decoder's ``"sep"`` is ``None`` there too.
    """
    if lm.causal:
        groups = bucket(batch.examples, batch_size=batch_size or gradient_batch_size(lm))
        with torch_threads(FIXED_THREADS):
            return _next_token_importance(lm, groups, len(batch.examples), progress=progress)
    head = head.to(lm.device)
    masked = masked_examples(lm, batch.examples, seed=seed)
    labels_of = {ex.index: labels for ex, labels in masked}
    original = {ex.index: ex.input_ids for ex in batch.examples}
    groups = bucket([ex for ex, _ in masked], batch_size=batch_size or gradient_batch_size(lm))
    with torch_threads(FIXED_THREADS):  # the same sums on any machine (see helpers.core.threads)
        return _importance(lm, head, groups, labels_of, original, len(batch.examples), progress=progress)


def _importance(lm: LoadedModel, head: nn.Module, groups, labels_of, original, n_segments: int, *,
                progress: bool) -> dict:
    from tqdm.auto import tqdm

    sums = {k: np.zeros(lm.n_layers) for k in KINDS}
    counts = {k: 0 for k in KINDS}
    rows: dict[int, dict[str, np.ndarray]] = {}  # each segment's [layer] per kind, by its index
    for group in tqdm(groups, desc="gradients", disable=not progress):
        # parameters keep requires_grad, but only the attention gradients are taken
        with torch.enable_grad():
            out = lm.model(**model_inputs(lm, group), output_attentions=True)
            hidden = out.last_hidden_state
            labels = torch.full(hidden.shape[:2], -100, dtype=torch.long)
            for b, ex in enumerate(group):
                labels[b, : len(ex)] = torch.from_numpy(labels_of[ex.index])
            labels = labels.to(hidden.device)
            # the head scores only the masked positions (it acts on each position alone): 15% of the
            # vocabulary-sized products of scoring every position
            chosen = labels != -100
            # the head is float32 (fitted, or the checkpoint's): half-precision hidden states (--dtype) are cast to it
            per_token = nn.functional.cross_entropy(head(hidden[chosen].to(next(head.parameters()).dtype)),
                                                    labels[chosen], reduction="none")
            # one mean loss per segment, summed: each segment's gradients are its own
            segment = chosen.nonzero()[:, 0]
            loss = (per_token / chosen.sum(1)[segment]).sum()
            grads = torch.autograd.grad(loss, out.attentions)
        g = at_least_float32(torch.stack(grads, dim=1).abs()).cpu().numpy()  # [batch, layer, head, query, key]
        for b, ex in enumerate(group):
            n = len(ex)
            # token kinds come from the unmasked input: a masked "." is still attention to a period slot
            masks = token_masks(lm.tokenizer, original[ex.index])
            per_key = g[b, :, :, :n, :n].mean(axis=(1, 2))  # [layer, key]
            kinds = {"sep": masks["sep"], "punct": masks["punct"], "cls": masks["cls"],
                     "other": ~(masks["sep"] | masks["punct"] | masks["cls"])}
            rows[ex.index] = _add_segment(per_key, kinds, sums, counts)
    return {**{k: (sums[k] / max(counts[k], 1)).tolist() for k in KINDS}, "segments": n_segments,
            "per_segment": _per_segment(rows, KINDS, lm.n_layers)}


def _add_segment(per_key: np.ndarray, kinds: dict[str, np.ndarray], sums: dict, counts: dict) -> dict[str, np.ndarray]:
    """Add one segment's mean ``|dL/d alpha|`` over the keys of each kind (``per_key [layer, key]``, ``kinds``
    ``{kind: key mask}``) to ``sums`` and ``counts``; returns the segment's ``{kind: [layer]}`` (NaN for a kind it
    does not have)."""
    row = {}
    for kind, mask in kinds.items():
        if mask.any():
            row[kind] = per_key[:, mask].mean(axis=1)
            sums[kind] += row[kind]
            counts[kind] += 1
        else:
            row[kind] = np.full(per_key.shape[0], np.nan)
    return row


def _per_segment(rows: dict[int, dict[str, np.ndarray]], kinds, n_layers: int) -> dict[str, np.ndarray]:
    """``{kind: [segment, layer]}`` float64, segments ordered by their index."""
    order = sorted(rows)
    return {k: np.array([rows[i][k] for i in order], dtype=np.float64).reshape(len(order), n_layers) for k in kinds}


def next_token_loss(logits: torch.Tensor, input_ids: torch.Tensor, lengths: Sequence[int]) -> torch.Tensor:
    """The sum over segments of each segment's mean next-token cross-entropy: ``logits [batch, token, vocab]``
    of a right-padded batch whose segment ``b`` has ``lengths[b]`` tokens (one of a single token adds nothing)."""
    total = logits.new_zeros(())
    for b, n in enumerate(lengths):
        if n > 1:
            total = total + nn.functional.cross_entropy(logits[b, : n - 1], input_ids[b, 1:n])
    return total


def visible_key_means(g: np.ndarray) -> np.ndarray:
    """``[layer, key]``: the mean of ``g [layer, head, query, key]`` over heads and the queries that see each key
    under a causal mask (query ``i >= key``)."""
    n = g.shape[-1]
    visible = np.tril(np.ones((n, n)))  # [query, key]
    return (g * visible).sum(axis=(1, 2)) / (g.shape[1] * visible.sum(0))


def _next_token_importance(lm: LoadedModel, groups, n_segments: int, *, progress: bool) -> dict:
    from tqdm.auto import tqdm

    kinds = ("punct", "cls", "other")
    sums = {k: np.zeros(lm.n_layers) for k in kinds}
    counts = {k: 0 for k in kinds}
    rows: dict[int, dict[str, np.ndarray]] = {}  # each segment's [layer] per kind, by its index
    for group in tqdm(groups, desc="gradients", disable=not progress):
        inputs = model_inputs(lm, group)
        with torch.enable_grad():
            out = lm.language_model(**inputs, output_attentions=True)
            loss = next_token_loss(at_least_float32(out.logits), inputs["input_ids"], [len(ex) for ex in group])
            grads = torch.autograd.grad(loss, out.attentions, allow_unused=True)
        g = at_least_float32(torch.stack([torch.zeros_like(a) if d is None else d for a, d in zip(out.attentions, grads)],
                                         dim=1).abs()).cpu().numpy()  # [batch, layer, head, query, key]
        for b, ex in enumerate(group):
            n = len(ex)
            masks = token_masks(lm.tokenizer, ex.input_ids, causal=True)
            per_key = visible_key_means(g[b, :, :, :n, :n])  # [layer, key]
            of = {"punct": masks["punct"] & ~masks["cls"], "cls": masks["cls"], "other": ~(masks["punct"] | masks["cls"])}
            rows[ex.index] = _add_segment(per_key, of, sums, counts)
    return {"sep": None, **{k: (sums[k] / max(counts[k], 1)).tolist() for k in kinds}, "segments": n_segments,
            "per_segment": {"sep": None, **_per_segment(rows, kinds, lm.n_layers)}}
