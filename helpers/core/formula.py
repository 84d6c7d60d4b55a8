"""The attention formula of paper §2, recomputed from a layer's queries and keys.

    alpha_ij = exp(q_i . k_j / sqrt(d) + B_ij) / sum_l exp(q_i . k_l / sqrt(d) + B_il)

The paper's equation omits the ``1/sqrt(d)`` scaling (d = head size) that BERT applies, and ``B``:
BERT, RoBERTa and DistilBERT add nothing (``B = 0``), while MPNet adds a learned relative position
bias to every score (one value per head and bucketed distance ``j - i``, shared by all layers).
:func:`recompute_attention` runs the model once with forward hooks on the layer's query and key
projections (and on MPNet's relative position bias, see :mod:`helpers.core.internals`), then rebuilds
``[head, query, key]`` from them, so a chapter can check that the extracted maps are exactly this
softmax for every architecture the package loads. A decoder's scores add its causal mask (``B = -inf`` for a key
after the query), its rotary models rotate ``q`` and ``k`` by position first, and a key-value head shared by
several query heads (grouped-query attention) serves each of them.

>>> from helpers import load_model, encode_texts
>>> from helpers.core.formula import recompute_attention
>>> lm = load_model()
>>> ex = encode_texts(lm.tokenizer, ["The cat sat."]).examples[0]
>>> recompute_attention(lm, ex.input_ids, layer=0).shape        # [head, query, key]
torch.Size([12, 5, 5])
"""
from __future__ import annotations

import math

import numpy as np
import torch

from helpers.core.encoding import Encoded
from helpers.core.extract import at_least_float32, model_inputs
from helpers.core.internals import capture
from helpers.core.models import LoadedModel


def recompute_attention(lm: LoadedModel, input_ids: np.ndarray, *, layer: int) -> torch.Tensor:
    """``softmax(Q K^T / sqrt(d) + B)`` of one layer, ``[head, query, key]``, for a single unpadded input.

    ``B`` is the relative position bias where the architecture adds one (MPNet), else 0.
    Raises ``NotImplementedError`` naming the model type for architectures whose modules are unknown.
    """
    if not 0 <= layer < lm.n_layers:
        raise ValueError(f"layer {layer}: the model has layers 0..{lm.n_layers - 1} (0-based)")
    example = Encoded(index=0, input_ids=np.asarray(input_ids, dtype=np.int64))
    with torch.inference_mode(), capture(lm, ("query", "key", "position_bias"), layers=[layer]) as seen:
        lm.model(**model_inputs(lm, [example]))
    q, k = seen.heads("query", layer)[0], seen.heads("key", layer)[0]  # [head, token, d]; keys: [kv head, token, d]
    q, k = at_least_float32(q), at_least_float32(k)  # half-precision weights (--dtype): scores and softmax in float32
    if lm.causal:
        q, k = _decoder_keys(lm, q, k)
    scores = q @ k.transpose(1, 2) / math.sqrt(q.shape[-1])
    bias = seen.bias(layer)
    if bias is not None:
        scores = scores + bias
    if lm.causal:  # a query sees its prefix: later keys get no weight
        n = scores.shape[-1]
        scores = scores.masked_fill(torch.ones(n, n, dtype=torch.bool, device=scores.device).triu(1), float("-inf"))
    return torch.softmax(scores, dim=-1)


def _decoder_keys(lm: LoadedModel, q: torch.Tensor, k: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """A decoder's queries and keys as its attention multiplies them: rotated by its rotary position embedding
    (Llama, Qwen, SmolLM ...: the base model's ``rotary_emb``, applied by the model family's own
    ``apply_rotary_pos_emb``; the hooked projections are taken before it), and each key-value head repeated for
    the query heads that share it (grouped-query attention; :func:`helpers.core.internals.kv_head_of`)."""
    rotary = getattr(lm.model, "rotary_emb", None)
    if rotary is not None:
        import importlib

        family = importlib.import_module(type(lm.model).__module__)
        positions = torch.arange(q.shape[1], device=q.device)[None]
        cos, sin = rotary(q[None], position_ids=positions)
        q, k = (x[0] for x in family.apply_rotary_pos_emb(q[None], k[None], cos, sin))
    return q, k.repeat_interleave(q.shape[0] // k.shape[0], dim=0)
