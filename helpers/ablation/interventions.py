"""Interventions on attention heads during a forward pass: a mask on each head's context vector, and the sink
tests that edit a head's attention weights (definitions: book/methods.md, §Removing heads).

Head ``h`` of layer ``l`` computes its context ``z_i = sum_j alpha_ij v_j`` (``[batch, token, d]`` per head, before
the output projection ``W_O``); the layer's attention output is ``sum_h z^h W_O^h + b_O``. Every intervention here is
one row per batch row, so copies of the same segments with different interventions run as one batch:

- ``xi`` ``[batch, layer, head]``: multiplies each head's context (Michel et al. 2019's ``xi_h``; 1 keeps a head, 0
  removes it; the bias ``b_O`` stays). Applied by a forward pre-hook on each layer's output projection
  (:func:`helpers.core.internals.attention_parts`), so it works for every architecture the package loads, and a
  leaf ``xi`` with ``requires_grad`` gives ``dL/dxi`` per row.
- a sink test (:class:`SinkTest`): for the heads it selects, the attention weights are edited before they weigh the
  values: ``"noop"`` removes the sink's term ``alpha_is v_s`` from every row that is not a sink (weights unchanged
  elsewhere, no renormalisation: value zeroing of the sink from the other rows); ``"redirect"`` sets the sink
  columns to 0 and renormalises each row over the rest (a row that sees only sinks, a decoder's first row, is left
  unchanged). Applied where the weights are: the attention function models call through transformers'
  ``AttentionInterface`` (BERT, DistilBERT, GPT-2, Llama-like), or MPNet's dropout on its probabilities.

A model whose attention neither route reaches raises :class:`NotMaskable` (one line, naming the model type).

>>> with intervene(lm, xi=torch.ones(2, lm.n_layers, lm.n_heads)):     # doctest: +SKIP
...     out = lm.model(**inputs)
"""
from __future__ import annotations

import sys
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from typing import Iterator, Literal

import torch
from torch import nn

from helpers.core.head_mask import NotMaskable, expanded as _expanded, first_layer, head_mask as _head_mask, layer_modules
from helpers.core.head_mask import parts_of as _parts
from helpers.core.internals import kv_head_of, model_type

SinkMode = Literal["noop", "redirect"]
SINK_MODES: tuple[str, ...] = ("noop", "redirect")
INTERFACE_NAME = "helpers_ablation"  # the attention implementation registered while sink tests run


@dataclass(frozen=True)
class SinkTest:
    """A sink test for a padded batch: ``sinks`` ``[batch, token]`` bool (the sink positions of each row),
    ``heads`` ``[batch, layer, head]`` bool (the heads it is applied to, per row) and ``mode`` (``"noop"`` or
    ``"redirect"``)."""

    sinks: torch.Tensor
    heads: torch.Tensor
    mode: SinkMode

    def __post_init__(self):
        if self.mode not in SINK_MODES:
            raise ValueError(f"sink test mode {self.mode!r}: choose one of {', '.join(SINK_MODES)}")


def edit_weights(weights: torch.Tensor, sinks: torch.Tensor, heads: torch.Tensor, mode: SinkMode) -> torch.Tensor:
    """The edited weights ``[batch, head, query, key]`` of one layer: ``sinks`` ``[batch, key]`` bool, ``heads``
    ``[batch, head]`` bool (the rows' heads the test applies to; others are returned unchanged). Queries and keys are
    the same positions (a full forward pass)."""
    cols = sinks[:, None, None, :]                                      # [batch, 1, 1, key]
    if mode == "noop":
        rows = sinks[:, None, :, None]                                  # [batch, 1, query, 1]: a sink's own row stays
        edited = weights.masked_fill(cols & ~rows, 0.0)
    else:
        kept = weights.masked_fill(cols, 0.0)
        total = kept.sum(-1, keepdim=True)
        sees_only_sinks = total == 0
        edited = torch.where(sees_only_sinks, weights, kept / torch.where(sees_only_sinks, torch.ones_like(total), total))
    return torch.where(heads[:, :, None, None], edited, weights)


class _Active:
    """The interventions of the forward pass in progress (one ``intervene`` block at a time)."""

    def __init__(self):
        self.sink: SinkTest | None = None
        self.layer_of: dict[int, int] = {}   # id(attention module) -> layer
        self.kv_of: torch.Tensor | None = None
        self.seen: set[int] = set()          # layers whose weights were edited in this block


_ACTIVE = _Active()


def _edited(layer: int, weights: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor] | None:
    """``(heads [batch, head], edited weights)`` of the active sink test at ``layer`` (marked as reached), or ``None``
    where it selects none of the layer's heads: what both routes to the weights apply."""
    test = _ACTIVE.sink
    _ACTIVE.seen.add(layer)
    heads = test.heads[:, layer].to(weights.device)
    if not bool(heads.any()):
        return None
    return heads, edit_weights(weights, test.sinks[:, : weights.shape[-1]].to(weights.device), heads, test.mode)


def _interface_attention(module, query, key, value, attention_mask, *args, **kwargs):
    """The model's own eager attention, then the active sink test applied to its weights: ``(output [batch, token,
    head, d], weights [batch, head, query, key])``."""
    eager = getattr(sys.modules[type(module).__module__], "eager_attention_forward")
    out, weights = eager(module, query, key, value, attention_mask, *args, **kwargs)
    layer = _ACTIVE.layer_of.get(id(module))
    found = None if _ACTIVE.sink is None or layer is None else _edited(layer, weights)
    if found is None:
        return out, weights
    heads, edited = found
    kv = _ACTIVE.kv_of.to(value.device)
    values = value.index_select(1, kv)                                  # [batch, head, key, d]: repeat_kv's grouping
    new = torch.matmul(edited.to(values.dtype), values).transpose(1, 2)  # [batch, token, head, d]
    return torch.where(heads[:, None, :, None], new.to(out.dtype), out), edited


def _attention_modules(model: nn.Module) -> dict[int, nn.Module]:
    """``{layer: the module that owns its query projection}`` (the one that calls the attention function), from one
    walk over the model's modules."""
    parent = {id(child): module for module in model.modules() for child in module.children()}
    out = {}
    for layer in range(int(model.config.num_hidden_layers)):
        owner = parent.get(id(_parts(model, layer).query))
        if owner is None:
            raise NotMaskable(f"model type {model_type(model)!r}: layer {layer}'s attention module was not found")
        out[layer] = owner
    return out


@contextmanager
def _sink_edits(model: nn.Module, test: SinkTest) -> Iterator[None]:
    """The sink test applied to every layer's weights: through transformers' attention interface, or (MPNet)
    through a hook on the dropout its probabilities pass; afterwards, checks that every layer the test selects was
    reached."""
    from transformers import AttentionInterface
    from transformers.masking_utils import ALL_MASK_ATTENTION_FUNCTIONS, AttentionMaskInterface, eager_mask

    n_layers = int(model.config.num_hidden_layers)
    kind = model_type(model)
    modules = _attention_modules(model)
    _ACTIVE.sink, _ACTIVE.seen = test, set()
    _ACTIVE.layer_of = {id(m): layer for layer, m in modules.items()}
    _ACTIVE.kv_of = kv_head_of(model.config)
    handles = []
    configs = {id(m.config): m.config for m in model.modules() if hasattr(m, "config")} or {id(model.config): model.config}
    before = {k: getattr(c, "_attn_implementation", None) for k, c in configs.items()}
    try:
        if kind == "mpnet":
            for layer, module in modules.items():
                handles.append(module.dropout.register_forward_hook(_dropout_hook(layer)))
        else:
            AttentionInterface.register(INTERFACE_NAME, _interface_attention)
            if INTERFACE_NAME not in ALL_MASK_ATTENTION_FUNCTIONS:
                AttentionMaskInterface.register(INTERFACE_NAME, eager_mask)
            for c in configs.values():
                c._attn_implementation = INTERFACE_NAME
        yield
        wanted = {layer for layer in range(n_layers) if bool(test.heads[:, layer].any())}
        missed = wanted - _ACTIVE.seen
        if missed:
            raise NotMaskable(f"model type {kind!r}: its attention weights could not be edited (layers "
                              f"{sorted(missed)} never called the attention function): sink tests need a model whose "
                              "attention goes through transformers' AttentionInterface, or MPNet")
    finally:
        for h in handles:
            h.remove()
        for k, c in configs.items():
            if before[k] is not None:
                c._attn_implementation = before[k]
        _ACTIVE.sink, _ACTIVE.layer_of, _ACTIVE.kv_of = None, {}, None


def _dropout_hook(layer: int):
    def hook(_module, _args, weights):
        found = _edited(layer, weights)
        return weights if found is None else found[1]
    return hook


@contextmanager
def intervene(lm_or_model, *, xi: torch.Tensor | None = None, sink: SinkTest | None = None,
              shared: tuple[int, torch.Tensor] | None = None, fill: torch.Tensor | None = None) -> Iterator[None]:
    """Run the forward passes inside the block with the head mask ``xi`` ``[batch, layer, head]`` and/or the sink
    test ``sink`` (:class:`SinkTest`) applied; hooks are removed on exit, also after an error.

    ``shared = (layer, repeats)``: the pass is given each segment once (``len(repeats)`` rows) and its rows are
    repeated ``repeats`` times at the input of ``layer`` (``xi`` and ``sink`` have the repeated rows): the layers
    before it, which no intervention may touch (checked), run once per segment.

    ``fill`` ``[layer, head, d]`` (with ``xi``): a removed head's context is replaced by ``fill`` rather than zeroed,
    ``xi z + (1 - xi) fill`` (mean ablation, with ``fill`` each head's mean context: :func:`mean_contexts`)."""
    model = getattr(lm_or_model, "model", lm_or_model)
    start = 0 if shared is None else shared[0]
    if shared is not None and first_layer(xi, None if sink is None else sink.heads) < start:
        raise ValueError(f"shared layers: an intervention touches a layer before layer {start}")
    if fill is not None and xi is None:
        raise ValueError("fill: a head's context is filled where xi removes it; pass xi too")
    with ExitStack() as stack:
        if xi is not None:
            expected = (int(model.config.num_hidden_layers), int(model.config.num_attention_heads))
            if tuple(xi.shape[1:]) != expected:
                raise ValueError(f"xi: expected [batch, {expected[0]}, {expected[1]}], got {list(xi.shape)}")
            if fill is not None and tuple(fill.shape[:2]) != expected:
                raise ValueError(f"fill: expected [{expected[0]}, {expected[1]}, d], got {list(fill.shape)}")
            stack.enter_context(_head_mask(model, xi, start, fill))
        if sink is not None:
            stack.enter_context(_sink_edits(model, sink))
        if shared is not None and start > 0:
            stack.enter_context(_expanded(model, start, shared[1]))
        yield


@contextmanager
def recording_contexts(lm_or_model, valid: torch.Tensor) -> Iterator[dict]:
    """Inside the block, every forward pass adds each head's context vectors ``z`` (before the output projection) at
    the positions ``valid`` ``[batch, token]`` (bool: the tokens that are not padding) to ``sums`` ``[layer, head, d]``
    (float64, on the CPU) and their number to ``count``: yields ``{"sums": {layer: tensor}, "count": {layer: int}}``.
    The mean context of a head (mean ablation's fill) is ``sums / count``."""
    model = getattr(lm_or_model, "model", lm_or_model)
    n_heads = int(model.config.num_attention_heads)
    out: dict = {"sums": {}, "count": {}}
    handles = []

    def hook_for(layer: int):
        def hook(_module, args):
            z = args[0]
            keep = valid.to(z.device)[:, : z.shape[1]]
            picked = z[keep].double().reshape(-1, n_heads, z.shape[-1] // n_heads)   # [n, head, d]
            out["sums"][layer] = out["sums"].get(layer, 0) + picked.sum(0).cpu()
            out["count"][layer] = out["count"].get(layer, 0) + int(picked.shape[0])
        return hook

    try:
        for layer in range(int(model.config.num_hidden_layers)):
            handles.append(_parts(model, layer).output.register_forward_pre_hook(hook_for(layer)))
        yield out
    finally:
        for h in handles:
            h.remove()
