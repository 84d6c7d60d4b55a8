"""The attention formula of paper §2, recomputed from a layer's queries and keys.

    alpha_ij = exp(q_i . k_j / sqrt(d) + B_ij) / sum_l exp(q_i . k_l / sqrt(d) + B_il)

The paper's equation omits the ``1/sqrt(d)`` scaling (d = head size) that BERT applies, and ``B``:
BERT, RoBERTa and DistilBERT add nothing (``B = 0``), while MPNet adds a learned relative position
bias to every score (one value per head and bucketed distance ``j - i``, shared by all layers).
:func:`recompute_attention` runs the model once with forward hooks on the layer's query and key
projections (and on MPNet's relative position bias, see :mod:`helpers.core.internals`), then rebuilds
``[head, query, key]`` from them, so a chapter can check that the extracted maps are exactly this
softmax for every architecture the package loads.

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
from helpers.core.extract import model_inputs
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
    q, k = seen.heads("query", layer)[0], seen.heads("key", layer)[0]  # [head, token, d]
    scores = q @ k.transpose(1, 2) / math.sqrt(q.shape[-1])
    bias = seen.bias(layer)
    if bias is not None:
        scores = scores + bias
    return torch.softmax(scores, dim=-1)
