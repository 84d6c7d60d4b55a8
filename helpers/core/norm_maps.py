"""Norm maps ``N^h_ij = alpha^h_ij ||f_h(x_j)||`` (Kobayashi et al., 2020) computed from a forward pass,
at token or word level, ``[layer, head, query, key]``; see :mod:`helpers.norms.stats` for the statistics.

``f_h(x_j) = v_j^g W_O^h``: the value vector of key ``j`` for head ``h``'s key-value head ``g`` (``g = h``
except under grouped-query attention, where ``g = h // (heads // kv_heads)``:
:func:`helpers.core.internals.kv_head_of`), through head ``h``'s own rows of the output projection.
"""
from __future__ import annotations

from typing import Sequence

import torch

from helpers.core.encoding import Encoded
from helpers.core.extract import at_least_float32, model_inputs
from helpers.core.internals import (
    attention_parts,
    capture,
    kv_head_of,
    output_weight,
)
from helpers.core.errors import no_attention
from helpers.core.models import LoadedModel


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
