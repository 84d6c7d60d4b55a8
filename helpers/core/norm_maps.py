"""Norm maps ``N^h_ij = alpha^h_ij ||f_h(x_j)||`` (Kobayashi et al., 2020) computed from a forward pass,
at token or word level, ``[layer, head, query, key]``; see :mod:`helpers.norms.stats` for the statistics.

``f_h(x_j) = v_j^g W_O^h``: the value vector of key ``j`` for head ``h``'s key-value head ``g`` (``g = h``
except under grouped-query attention, where ``g = h // (heads // kv_heads)``:
:func:`helpers.core.internals.kv_head_of`), through head ``h``'s own rows of the output projection.
"""
from __future__ import annotations

from typing import Iterator, Sequence

import numpy as np
import torch

from helpers.core.encoding import Encoded, EncodedBatch
from helpers.core.extract import LEVELS, Level, at_least_float32, bucket, convert, forward_parts, model_inputs
from helpers.core.internals import (
    attention_parts,
    capture,
    kv_head_of,
    output_weight,
)
from helpers.core.errors import no_attention
from helpers.core.models import LoadedModel
from helpers.core.wordlevel import WordMode, batched_matrices, word_level_batch


# ------------------------------------------------------------------------------ the maps


def gram_matrices(lm: LoadedModel) -> list[torch.Tensor]:
    """Per layer ``G [head, d, d]`` with ``G_h = W_O^h (W_O^h)^T``, so ``||v W_O^h||^2 = v G_h v^T``."""
    out = []
    for layer in range(lm.n_layers):
        # float32, or float64 for a float64 model (whose maps must not be rounded to float32)
        W = at_least_float32(output_weight(attention_parts(lm.model, layer), lm.n_heads).detach())  # [head, d, hidden]
        out.append(W @ W.transpose(1, 2))
    return out


def transformed_norms(values: torch.Tensor, gram: torch.Tensor, kv_of_head: torch.Tensor | None = None) -> torch.Tensor:
    """``||f_h(x_j)||`` ``[batch, head, token]`` from value outputs ``[batch, token, kv_head * d]`` and
    ``G [head, d, d]``; ``kv_of_head [head]`` (grouped-query attention) gives each query head's key-value head
    (``None``: one value head per head)."""
    n_heads, d = gram.shape[0], gram.shape[1]
    v = at_least_float32(values).to(gram.dtype).view(*values.shape[:-1], -1, d)  # [batch, token, kv_head, d]
    if kv_of_head is not None and v.shape[-2] != n_heads:
        v = v.index_select(-2, kv_of_head.to(v.device))  # [batch, token, head, d]: each head's group's values
    squared = torch.einsum("bthd,hde,bthe->bht", v, gram, v)
    return squared.clamp_min(0).sqrt()


def forward_weights_and_norms(lm: LoadedModel, examples: Sequence[Encoded]) -> tuple[torch.Tensor, torch.Tensor]:
    """Weights and norm maps of a padded batch from one forward pass, both ``[batch, layer, head, query, key]``.

    Rows and columns of padding are meaningless; slice ``[:n, :n]`` per example.
    """
    grams = gram_matrices(lm)
    groups = kv_head_of(lm.model.config)
    key_norms: dict[int, torch.Tensor] = {}

    def keep(_part, layer, values):
        key_norms[layer] = transformed_norms(values, grams[layer], groups)

    with torch.inference_mode(), capture(lm, ("value",), on_output=keep):
        out = lm.model(**model_inputs(lm, examples), output_attentions=True)
    if not getattr(out, "attentions", None) or out.attentions[0] is None:
        raise no_attention(lm.label)
    attn = torch.stack(out.attentions, dim=1).float()  # [batch, layer, head, query, key]: the maps are float32
    fnorm = torch.stack([key_norms[l] for l in range(lm.n_layers)], dim=1).float()  # [batch, layer, head, key]
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
    """Stream ``(example, norms [layer, head, n, n])``, like :func:`helpers.core.extract.iter_attention`."""
    from tqdm.auto import tqdm

    examples = batch.examples if isinstance(batch, EncodedBatch) else list(batch)
    with tqdm(total=len(examples), desc=f"{level}-level norms", unit="ex", disable=not progress) as bar:
        for group in bucket(examples, batch_size=batch_size):
            for part in forward_parts(lm, group):
                for ex, norms in zip(part, batch_norm_maps(lm, part, level=level, word_mode=word_mode)):
                    yield ex, convert(norms, dtype)
                bar.update(len(part))
