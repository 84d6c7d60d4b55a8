"""Attention internals through forward hooks: queries, keys, values, the output projection and any
relative position bias of every layer, for each architecture the package loads.

A self-attention layer computes, for head ``h`` of size ``d`` (``x`` a row vector, as in the papers)::

    q_i = x_i W_Q + b_Q,   k_j = x_j W_K + b_K,   v_j = x_j W_V + b_V       (all heads: [token, head * d])
    alpha_ij = softmax_j(q_i . k_j / sqrt(d) + B_ij)                         (B: relative position bias, MPNet)
    out_i = sum_h sum_j alpha_ij v_j^h W_O^h + b_O                           (W_O^h: rows h*d:(h+1)*d of W_O)

:func:`attention_parts` names, for one layer, the ``torch.nn.Linear`` modules computing ``q``, ``k``,
``v`` and ``out`` (the output projection ``W_O``, ``b_O``) and the module whose output is the
relative position bias ``B`` (``None`` where the architecture adds none). torch's ``Linear`` stores
``weight`` as ``[out, in]`` and computes ``x @ weight.T + bias``, so ``W_O = out.weight.T``
``[head * d, hidden]`` in the ``x W`` convention above.

Known architectures (by ``config.model_type``):

=================================  ===========================================  ==========================
model types                        q, k, v / output projection                  relative position bias
=================================  ===========================================  ==========================
bert, roberta, xlm-roberta,        ``encoder.layer[i].attention.self``          none
camembert, electra                 ``.query/.key/.value``; ``.output.dense``
mpnet                              ``encoder.layer[i].attention.attn``          ``encoder.relative_attention_bias``
                                   ``.q/.k/.v``; ``.o``                         (``[query, key, head]``, shared by layers)
distilbert                         ``transformer.layer[i].attention``           none
                                   ``.q_lin/.k_lin/.v_lin``; ``.out_lin``
gpt2 (decoder)                     ``h[i].attn.c_attn`` (one ``Conv1D`` for     none
                                   q, k, v: thirds of its output); ``.c_proj``
llama, mistral, qwen2, qwen3,      ``layers[i].self_attn.q_proj/.k_proj/        rotary, applied to q and k
smollm3 (decoders)                 .v_proj``; ``.o_proj``                       after the hooked projections
=================================  ===========================================  ==========================

GPT-2's ``Conv1D`` stores ``weight`` as ``[in, out]`` (``x @ weight + bias``), so there ``W_O = c_proj.weight``.
Under grouped-query attention (``num_key_value_heads`` below ``num_attention_heads``) ``k`` and ``v`` have
``kv_heads * d`` columns: query head ``h`` reads key-value head ``h // (heads // kv_heads)``
(:func:`kv_head_of`), through its own rows ``h*d:(h+1)*d`` of ``W_O``. Decoders' models are their base
models (``LoadedModel.model``: ``GPT2Model``, ``LlamaModel``), whose attention input is the layer-normed
residual stream.

Any other model type raises :class:`NotImplementedError` naming it.

>>> from helpers import load_model
>>> from helpers.core.internals import capture
>>> lm = load_model()
>>> with capture(lm, ("query", "key")) as seen:                      # doctest: +SKIP
...     lm.model(input_ids=ids)
>>> seen.heads("query", 0).shape                                    # [batch, head, token, d]
"""
from __future__ import annotations

from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Iterator, Sequence

import torch
from torch import nn

BERT_LIKE = ("bert", "roberta", "xlm-roberta", "camembert", "electra")
LLAMA_LIKE = ("llama", "mistral", "qwen2", "qwen3", "smollm3")
PARTS: tuple[str, ...] = ("query", "key", "value", "output", "position_bias")


@dataclass(frozen=True)
class AttentionParts:
    """The modules of one layer's self-attention (see the module docstring for the shapes).

    ``fused``: the query, key and value are one module's output (GPT-2's ``c_attn``), in thirds ``q | k | v``;
    :meth:`select` cuts a part's columns out of it."""

    query: nn.Module
    key: nn.Module
    value: nn.Module
    output: nn.Module
    position_bias: nn.Module | None = None
    fused: bool = False

    def module(self, part: str) -> nn.Module | None:
        if part not in PARTS:
            raise ValueError(f"part {part!r}: choose one of {', '.join(PARTS)}")
        return getattr(self, part)

    def select(self, part: str, output: torch.Tensor) -> torch.Tensor:
        """The columns of ``part`` in the hooked module's ``output`` (all of them, unless fused)."""
        if not self.fused or part not in ("query", "key", "value"):
            return output
        third = output.shape[-1] // 3
        start = ("query", "key", "value").index(part) * third
        return output[..., start : start + third]


def model_type(model: nn.Module) -> str:
    return str(getattr(model.config, "model_type", type(model).__name__))


def layer_blocks(model: nn.Module) -> nn.ModuleList:
    """The model's transformer layers (blocks), in order: where every architecture the package knows keeps them."""
    kind = model_type(model)
    if kind in (*BERT_LIKE, "mpnet"):
        return model.encoder.layer
    if kind == "distilbert":
        return model.transformer.layer
    if kind == "gpt2":
        return _base(model, "h")
    if kind in LLAMA_LIKE:
        return _base(model, "layers")
    raise NotImplementedError(
        f"model type {kind!r}: attention internals (queries, keys, values, output projection) are known for "
        f"{', '.join((*BERT_LIKE, 'mpnet', 'distilbert', 'gpt2', *LLAMA_LIKE))}; add its modules to "
        "helpers.core.internals.layer_blocks and attention_parts"
    )


def attention_parts(model: nn.Module, layer: int) -> AttentionParts:
    """:class:`AttentionParts` of ``layer`` (0-based) of a loaded encoder (``LoadedModel.model``)."""
    kind = model_type(model)
    n_layers = int(model.config.num_hidden_layers)
    if not 0 <= layer < n_layers:
        raise ValueError(f"layer {layer}: the model has layers 0..{n_layers - 1} (0-based)")
    block = layer_blocks(model)[layer]
    if kind in BERT_LIKE:
        attn = block.attention
        return AttentionParts(attn.self.query, attn.self.key, attn.self.value, attn.output.dense)
    if kind == "mpnet":
        attn = block.attention.attn
        return AttentionParts(attn.q, attn.k, attn.v, attn.o, model.encoder.relative_attention_bias)
    if kind == "distilbert":
        attn = block.attention
        return AttentionParts(attn.q_lin, attn.k_lin, attn.v_lin, attn.out_lin)
    if kind == "gpt2":
        return AttentionParts(block.attn.c_attn, block.attn.c_attn, block.attn.c_attn, block.attn.c_proj, fused=True)
    attn = block.self_attn  # LLAMA_LIKE: layer_blocks refused every other kind
    return AttentionParts(attn.q_proj, attn.k_proj, attn.v_proj, attn.o_proj)


def _base(model: nn.Module, blocks: str) -> nn.ModuleList:
    """A decoder's list of blocks, from its base model or from the whole causal LM (``model.base_model``)."""
    base = model if hasattr(model, blocks) else model.base_model
    return getattr(base, blocks)


def kv_head_of(config) -> torch.Tensor:
    """For every query head, its key-value head: ``h // (heads // kv_heads)`` ``[head]`` (``h`` without
    grouped-query attention), the grouping of transformers' ``repeat_kv``."""
    heads = int(config.num_attention_heads)
    kv = int(getattr(config, "num_key_value_heads", None) or heads)
    if heads % kv:
        raise ValueError(f"{heads} attention heads cannot share {kv} key-value heads evenly")
    return torch.arange(heads) // (heads // kv)


def linear_weight(module: nn.Module) -> torch.Tensor:
    """A projection's weight in the ``x W`` convention, ``[in, out]``: ``Linear.weight.T``; GPT-2's ``Conv1D``
    stores it so already."""
    return module.weight if type(module).__name__ == "Conv1D" else module.weight.T


def output_weight(parts: AttentionParts, n_heads: int) -> torch.Tensor:
    """``W_O`` split by head, ``[head, d, hidden]`` in the ``x W`` convention (``W_O^h`` = rows h*d:(h+1)*d)."""
    weight = linear_weight(parts.output)  # [head * d, hidden]
    return weight.reshape(n_heads, -1, weight.shape[1])


@dataclass
class Captured:
    """Outputs of the hooked modules during one forward pass, by part and layer.

    ``raw[part][layer]`` is the module's output as computed: ``[batch, token, head * d]`` for
    ``query``/``key``/``value``/``output``, ``[query, key, head]`` for MPNet's ``position_bias``.
    """

    n_heads: int
    raw: dict[str, dict[int, torch.Tensor]] = field(default_factory=dict)
    n_kv_heads: int | None = None  # key-value heads under grouped-query attention (None: n_heads)

    def heads(self, part: str, layer: int) -> torch.Tensor:
        """``query``/``key``/``value`` of ``layer`` split by head: ``[batch, head, token, d]`` (``key``/``value``
        under grouped-query attention: ``[batch, kv_head, token, d]``). Rotary positions (decoders) are applied
        after these projections, so a decoder's query and key here are without them."""
        x = self.raw[part][layer]
        n = self.n_heads if part == "query" or self.n_kv_heads is None else self.n_kv_heads
        return x.view(*x.shape[:-1], n, -1).transpose(-3, -2)

    def bias(self, layer: int) -> torch.Tensor | None:
        """The relative position bias added to the scores of ``layer``, ``[head, query, key]``; ``None`` if none."""
        b = self.raw.get("position_bias", {}).get(layer)
        return None if b is None else b.permute(2, 0, 1)


@contextmanager
def capture(lm_or_model, parts: Sequence[str] = ("query", "key", "position_bias"), *,
            layers: Sequence[int] | None = None, on_output=None) -> Iterator[Captured]:
    """Hook ``parts`` of ``layers`` (default: all) for the forward passes run inside the ``with`` block.

    ``on_output(part, layer, tensor)``, when given, is called instead of keeping the tensor (to reduce
    it on the fly); otherwise outputs are kept in :attr:`Captured.raw` (the last pass wins). Hooks are
    removed on exit, also after an error. A bias module shared by all layers (MPNet) runs once per
    pass; its output is recorded for every requested layer.
    """
    model = getattr(lm_or_model, "model", lm_or_model)
    n_heads = int(model.config.num_attention_heads)
    seen = Captured(n_heads, n_kv_heads=int(getattr(model.config, "num_key_value_heads", None) or n_heads))
    chosen = range(int(model.config.num_hidden_layers)) if layers is None else layers
    handles = []

    def hook_for(part: str, owners: list[int], select):
        def hook(_module, _inputs, output):
            output = select(part, output)
            for layer in owners:
                if on_output is not None:
                    on_output(part, layer, output)
                else:
                    seen.raw.setdefault(part, {})[layer] = output.detach()
        return hook

    try:
        owners: dict[tuple[str, int], tuple[nn.Module, list[int], object]] = {}
        for layer in chosen:
            p = attention_parts(model, layer)
            for part in parts:
                module = p.module(part)
                if module is None:
                    continue
                owners.setdefault((part, id(module)), (module, [], p.select))[1].append(layer)
        for (part, _), (module, layer_list, select) in owners.items():
            handles.append(module.register_forward_hook(hook_for(part, layer_list, select)))
        yield seen
    finally:
        for handle in handles:
            handle.remove()
