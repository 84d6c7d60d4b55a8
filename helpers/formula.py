"""The attention formula of paper §2, recomputed from a layer's query and key projections.

    alpha_ij = exp(q_i . k_j / sqrt(d)) / sum_l exp(q_i . k_l / sqrt(d))

The paper's equation omits BERT's ``1/sqrt(d)`` scaling (d = head size); the model applies it.
:func:`recompute_attention` rebuilds ``[head, query, key]`` for one layer from the hidden states
entering that layer, so a chapter can check that the extracted maps are exactly this softmax.

>>> from helpers import load_model, encode_texts
>>> from helpers.formula import recompute_attention
>>> lm = load_model()
>>> ex = encode_texts(lm.tokenizer, ["The cat sat."]).examples[0]
>>> recompute_attention(lm, ex.input_ids, layer=0).shape        # [head, query, key]
torch.Size([12, 5, 5])
"""
from __future__ import annotations

import math

import numpy as np
import torch

from .models import LoadedModel


def _self_attention(lm: LoadedModel, layer: int):
    try:
        return lm.model.encoder.layer[layer].attention.self
    except AttributeError as err:
        raise NotImplementedError(
            f"{lm.label}: recompute_attention knows BERT-style encoders (encoder.layer[i].attention.self)"
        ) from err


def recompute_attention(lm: LoadedModel, input_ids: np.ndarray, *, layer: int) -> torch.Tensor:
    """``softmax(Q K^T / sqrt(d))`` of one layer, ``[head, query, key]``, for a single unpadded input."""
    if not 0 <= layer < lm.n_layers:
        raise ValueError(f"layer {layer}: the model has layers 0..{lm.n_layers - 1} (0-based)")
    ids = torch.as_tensor(np.asarray(input_ids), device=lm.device)[None]
    with torch.inference_mode():
        out = lm.model(input_ids=ids, token_type_ids=torch.zeros_like(ids), output_hidden_states=True)
        hidden = out.hidden_states[layer][0]  # [token, hidden] entering this layer
        attn = _self_attention(lm, layer)
        n_heads, size = lm.n_heads, hidden.shape[-1] // lm.n_heads
        q = attn.query(hidden).view(-1, n_heads, size).transpose(0, 1)  # [head, token, d]
        k = attn.key(hidden).view(-1, n_heads, size).transpose(0, 1)
        return torch.softmax(q @ k.transpose(1, 2) / math.sqrt(size), dim=-1)
