"""Masking attention heads during a forward pass: each head's context vector multiplied by a mask, one mask per batch
row, and the rows of a batch repeated from a layer on, so that copies of an input under different masks share the
layers no mask touches (definitions: book/methods.md, §Removing heads).

Head ``h`` of layer ``l`` computes its context ``z_i = sum_j alpha_ij v_j`` (``[batch, token, d]`` per head, before the
output projection ``W_O``); the layer's attention output is ``sum_h z^h W_O^h + b_O``. :func:`head_mask` multiplies each
head's context by ``xi`` ``[batch, layer, head]`` (Michel et al. 2019's ``xi_h``: 1 keeps a head, 0 removes it; the
bias ``b_O`` stays), through a forward pre-hook on each layer's output projection
(:func:`helpers.core.internals.attention_parts`), so it works for every architecture the package loads, and a leaf
``xi`` with ``requires_grad`` gives ``d/dxi`` per row. With ``fill`` ``[layer, head, d]`` a removed head's context is
replaced by that vector instead of 0 (``z' = xi z + (1 - xi) fill``: mean ablation, the fill being the head's mean
context over a reference set).

The chapters that remove heads (:mod:`helpers.ablation`, :mod:`helpers.minimal_pairs`) share these; a model whose
modules are unknown raises :class:`NotMaskable` (one line, naming the model type).

>>> with head_mask(lm.model, torch.ones(2, lm.n_layers, lm.n_heads)):     # doctest: +SKIP
...     out = lm.model(**inputs)
"""
from __future__ import annotations

from contextlib import contextmanager
from typing import Iterator

import torch
from torch import nn

from helpers.core.internals import attention_parts, layer_blocks


class NotMaskable(NotImplementedError):
    """The model's attention weights cannot be reached to edit them (or its heads' contexts to mask them)."""


def parts_of(model: nn.Module, layer: int):
    """:func:`~helpers.core.internals.attention_parts` of ``layer``; an architecture whose modules are unknown raises
    :class:`NotMaskable` (its one line names the model type), not the bare ``NotImplementedError``."""
    try:
        return attention_parts(model, layer)
    except NotImplementedError as err:
        raise NotMaskable(str(err)) from None


@contextmanager
def head_mask(model: nn.Module, xi: torch.Tensor, from_layer: int = 0,
              fill: torch.Tensor | None = None) -> Iterator[None]:
    """``xi [batch, layer, head]`` multiplies each head's context, through a pre-hook on each output projection of the
    layers from ``from_layer`` on (those before it must be all ones: the callers check); in a :func:`staggered` pass a
    layer that runs fewer rows reads the first of ``xi``'s. ``fill`` ``[layer, head, d]``
    (optional): what a head's context becomes where ``xi`` is 0 (``z' = xi z + (1 - xi) fill``); without it, 0."""
    n_heads = int(model.config.num_attention_heads)
    handles = []

    def hook_for(layer: int):
        def hook(_module, args):
            (z, *rest) = args
            scale = xi[: z.shape[0], layer].to(device=z.device, dtype=z.dtype)  # [batch, head] (a staggered pass:
            # the rows this layer runs, the first of xi's)
            shaped = z.reshape(*z.shape[:-1], n_heads, -1) * scale[:, None, :, None]
            if fill is not None:
                vec = fill[layer].to(device=z.device, dtype=z.dtype)     # [head, d]
                shaped = shaped + (1 - scale)[:, None, :, None] * vec[None, None]
            return (shaped.reshape(z.shape), *rest)
        return hook

    try:
        for layer in range(from_layer, int(model.config.num_hidden_layers)):
            handles.append(parts_of(model, layer).output.register_forward_pre_hook(hook_for(layer)))
        yield
    finally:
        for h in handles:
            h.remove()


def layer_modules(model: nn.Module) -> nn.ModuleList:
    """The model's list of transformer layers (blocks), in order (:func:`~helpers.core.internals.layer_blocks`); an
    architecture whose layers are unknown raises :class:`NotMaskable`."""
    try:
        return layer_blocks(model)
    except NotImplementedError as err:
        raise NotMaskable(str(err)) from None


def first_layer(xi: torch.Tensor | None, sink_heads: torch.Tensor | None) -> int:
    """The first layer that ``xi`` ``[K, layer, head]`` (a mask other than 1) or ``sink_heads`` (a head tested) touches;
    the number of layers when neither touches any."""
    touched = torch.zeros(0, dtype=torch.bool)
    for t in (None if xi is None else (xi != 1), sink_heads):
        if t is not None:
            per_layer = t.reshape(-1, t.shape[1], t.shape[2]).any(-1).any(0)
            touched = per_layer if touched.numel() == 0 else touched | per_layer
    hits = touched.nonzero()
    return int(hits[0]) if hits.numel() else int(touched.numel())


@contextmanager
def expanded(model: nn.Module, from_layer: int, repeats: torch.Tensor) -> Iterator[None]:
    """The batch's ``n`` rows run the layers before ``from_layer`` once; at that layer's input every tensor argument
    whose first dimension is ``n`` (the hidden states, the attention mask, position embeddings or biases) is repeated
    ``repeats[b]`` times per row (``repeat_interleave``), so the copies of a segment under different interventions
    share the layers no intervention touches. Later layers get the model-level arguments expanded the same way."""
    n, total = len(repeats), int(repeats.sum())

    def grow(value: torch.Tensor) -> torch.Tensor:
        if value.dim() >= 2 and value.shape[0] == n and n != total:
            return value.repeat_interleave(repeats.to(value.device), dim=0)
        return value

    with _inputs_edited([(layer, grow) for layer in list(layer_modules(model))[from_layer:]]):
        yield


@contextmanager
def staggered(model: nn.Module, n: int, starts) -> Iterator[None]:
    """A pass whose batch grows: its ``n`` rows (the trunk) run every layer, and copy ``k`` of them joins at the input
    of layer ``starts[k]`` (not decreasing), as a block of ``n`` rows appended after the rows already there (the
    trunk's hidden states at that layer, repeated). The model's output has ``n * (1 + len(starts))`` rows: the trunk,
    then each copy's block in the order of ``starts``. A copy whose interventions touch no layer before its start
    (``xi`` of :func:`head_mask` for its rows, whose hook reads the first rows of ``xi`` at each layer) computes
    exactly what it would alone, and shares the earlier layers with the trunk: copies at different layers in one pass,
    each costing only the layers from its own on (:func:`expanded` copies every row at one layer instead).

    At each layer where copies join, every tensor argument (at any depth of a tuple) whose first dimension is the rows
    so far and above ``n`` is the hidden state: the new blocks' rows are the trunk's, appended; one whose first
    dimension is ``n`` is a model-level argument (the attention mask, position embeddings or biases) and is indexed
    by the rows' trunk row at every layer from the first start on."""
    starts = [int(s) for s in starts]
    if any(b < a for a, b in zip(starts, starts[1:])):
        raise ValueError(f"staggered: the copies' first layers {starts} must not decrease")
    layers = list(layer_modules(model))
    if starts and not (0 <= starts[0] and starts[-1] < len(layers)):
        raise ValueError(f"staggered: first layers {starts} outside 0..{len(layers) - 1}")
    if not starts:
        yield
        return
    rows_before = {}
    origin_at = {}
    rows, origin = n, torch.arange(n)
    for layer in range(starts[0], len(layers)):
        rows_before[layer] = rows
        joining = sum(1 for s in starts if s == layer)
        if joining:
            origin = torch.cat([origin, torch.arange(n).repeat(joining)])
            rows += joining * n
        origin_at[layer] = origin

    def edit_for(layer: int):
        before, index = rows_before[layer], origin_at[layer]
        grow = len(index) - before

        def edit(value: torch.Tensor) -> torch.Tensor:
            if value.dim() >= 1:
                if value.shape[0] == before and before > n:          # the hidden state, already grown
                    if not grow:
                        return value
                    return torch.cat([value, value[:n].repeat(grow // n, *([1] * (value.dim() - 1)))])
                if value.shape[0] == n and len(index) > n:           # a model-level argument, or the trunk's state
                    return value.index_select(0, index.to(value.device))
            return value
        return edit

    with _inputs_edited([(layers[layer], edit_for(layer)) for layer in range(starts[0], len(layers))]):
        yield


@contextmanager
def _inputs_edited(edits) -> Iterator[None]:
    """For the duration, each ``(layer, edit)`` of ``edits``: the layer's tensor arguments, positional and keyword, and
    each tensor of an argument that is a tuple of tensors, replaced by ``edit`` of it (a forward pre-hook)."""
    def hook_for(edit):
        def each(value):
            if isinstance(value, torch.Tensor):
                return edit(value)
            if isinstance(value, tuple) and value and all(isinstance(v, torch.Tensor) for v in value):
                return tuple(edit(v) for v in value)
            return value
        return lambda _module, args, kwargs: (tuple(each(a) for a in args), {k: each(v) for k, v in kwargs.items()})

    handles = [layer.register_forward_pre_hook(hook_for(edit), with_kwargs=True) for layer, edit in edits]
    try:
        yield
    finally:
        for h in handles:
            h.remove()
