"""Context-mixing maps beyond raw attention, batched on the model's device: attention rollout (Abnar & Zuidema
2020), value zeroing (Mohebbi et al. 2023, per layer and per query head) and ALTI (Ferrando et al. 2022), beside
the weights and the norm maps ``||alpha f(x)||`` of :mod:`helpers.core.norm_maps`. Definitions:
book/methods.md, §Context-mixing maps (as the authors' code computes them).

Every map is ``[..., query, key]``: row ``i`` the receiving token, column ``j`` the source, special tokens included.

The contract (:func:`mixing_batch`, what a section codes against)
------------------------------------------------------------------
``mixing_batch(lm, input_ids, attention_mask, methods) -> dict[str, torch.Tensor]``

- ``input_ids``, ``attention_mask``: ``[batch, token]`` on ``lm.device``, right-padded, as
  :func:`helpers.core.extract.model_inputs` makes them (``token_type_ids`` are added as zeros where the tokenizer
  takes them). :func:`mixing_for` does this from :class:`~helpers.core.encoding.Encoded` examples.
- ``methods``: any of :data:`METHODS`; one model forward pass serves them all.
- ``rows`` (keyword, optional): ``[batch, token]`` bool, the query rows a caller reads. Value zeroing (per layer and
  per head) reruns only these rows, and its other rows come back exactly 0 (the reruns are what costs: a caller
  that reads a few rows of a long input, as §4.3 reads its mentions' rows, pays for those); the other maps are
  whole. ``None`` (the default): every row.
- Returns, under each method's name, a float32 tensor on ``lm.device``:
  ``attention``, ``norms``, ``value_zeroing_heads``: ``[batch, layer, head, query, key]``;
  ``rollout``, ``value_zeroing``, ``alti``, ``alti_rollout``: ``[batch, layer, query, key]``.
  Rows and columns of padding are exactly 0; a decoder's upper triangle (``key > query``) is exactly 0.
- Rows of every map but ``norms`` sum to 1 over the keys the row sees (value zeroing's: the rows asked for), except
  **empty rows**: a value-zeroing row whose every distance is 0 (a layer or head whose output projection is zero
  moves nothing) stays all 0, never divided by zero; :func:`empty_rows` counts them (report them). ``norms`` are not normalised.

The maps, per layer ``l`` (``x`` the layer's input, ``alpha^h`` its attention weights, ``f^h(x_j) = v_j W_O^h``
what source ``j`` sends through head ``h``, ``u_i = x_i + sum_h sum_j alpha^h_ij f^h(x_j) + b_O`` the residual
sum after attention):

- ``rollout``: ``R^1 = Ahat^1``, ``R^l = Ahat^l R^(l-1)`` with ``Ahat = rows(0.5 mean_h alpha + 0.5 I)``
  (the identity only here: value zeroing and ALTI already contain the residual).
- ``value_zeroing``: ``j``'s value row zeroed in every head, ``u'_i = u_i - sum_h alpha^h_ij f^h(x_j)`` (attention
  weights are reused, never recomputed: zeroing a value cannot move them), the rest of the layer rerun (encoder:
  LN1, FFN, LN2; decoder: the post-attention norm and MLP), ``D_ij`` the cosine distance between the rerun and
  the original output of row ``i``, computed as ``0.5 ||a/|a| - b/|b|||^2`` (``1 - cos`` in float32 cancels:
  book/methods.md, §Context-mixing maps, the pitfalls); rows normalised. All ``T`` reruns of a layer are one
  batch (cut by :func:`max_rows_for`).
- ``value_zeroing_heads``: the same with ``j`` removed from query head ``h`` alone, ``u'_i = u_i -
  alpha^h_ij f^h(x_j)`` (under grouped-query attention: the query head, not the shared key-value head);
  ``heads x T`` reruns a layer, normalised within each head.
- ``alti``: encoders (post-LN): ``T_i(x_j) = L(sum_h alpha^h_ij f^h(x_j) + [i=j] x_i) / s_i``, ``L(z) = gamma (z -
  mean z)``, ``s_i`` the real LN1 scale of ``u_i``, ``y_i = LN1(u_i)``; decoders (pre-LN): ``T_i(x_j)`` without
  ``L`` and ``s``, ``y_i = u_i``. ``c_ij = max(0, |y_i|_1 - |y_i - T_i(x_j)|_1)`` with the exact L1 distance
  (not torch's ``pairwise_distance``, which adds 1e-6 to every component), rows normalised.
- ``alti_rollout``: ``R^1 = C^1``, ``R^l = C^l R^(l-1)``, no identity added.

Architectures: BERT-like, MPNet (its relative position bias lives in ``alpha``, which is reused), DistilBERT,
GPT-2, Llama-like decoders (:mod:`helpers.core.internals`). A layer's output is taken from the layer itself,
never from ``hidden_states[-1]`` (after a decoder's final norm in transformers 5.x).

>>> from helpers import load_model
>>> from helpers.mixing import token_maps
>>> lm = load_model()
>>> maps = token_maps(lm, ["The", "cat", "sat", "."])          # doctest: +SKIP
>>> maps["alti"].shape                                          # [layer, query, key] over [CLS] ... [SEP]
(6, 6, 6)
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Iterable, Iterator, Sequence

import numpy as np
import torch
from torch import nn

from helpers.core.encoding import Encoded, check_words, encode_words
from helpers.core.errors import no_attention
from helpers.core.extract import at_least_float32, convert, model_inputs
from helpers.core.internals import (
    BERT_LIKE,
    LLAMA_LIKE,
    _base,
    attention_parts,
    capture,
    kv_head_of,
    model_type,
    output_weight,
)
from helpers.core.models import LoadedModel
from helpers.core.norm_maps import gram_matrices, transformed_norms

METHODS: tuple[str, ...] = ("attention", "norms", "rollout", "value_zeroing", "alti", "alti_rollout",
                            "value_zeroing_heads")

# Vectors (rows of the hidden size) one rerun chunk may hold: value zeroing reruns a layer on ``batch x units x
# token`` rows (units: T sources, or heads x T), ALTI forms ``batch x query x key`` vectors; both are cut into
# chunks of at most this many rows. On the CPU, MAX_ROWS: measured on the 2-core machine (1 torch thread, MiniLM,
# GUM dev sentences and coreference windows), 2**11 rows took 53 s of CPU where 2**14 took 61 s, of which 1 s and
# 11 s in the kernel: a chunk's intermediates (2**14 x 1536 floats, 96 MiB, in the FFN) are above glibc's largest
# mmap threshold (32 MiB), so each is mapped, faulted in page by page and unmapped again; 2**16 rows also took the
# process from under 1 GB to 1.9 GB. On an accelerator ACCELERATOR_MAX_ROWS: the same arithmetic in fewer, larger
# launches. The chunks change no map (tests: test_chunking_changes_no_map).
MAX_ROWS = 1 << 11
ACCELERATOR_MAX_ROWS = 1 << 14


def max_rows_for(device: torch.device) -> int:
    """The rows of a rerun chunk on ``device``: :data:`MAX_ROWS` on the CPU, :data:`ACCELERATOR_MAX_ROWS` else."""
    return MAX_ROWS if device.type == "cpu" else ACCELERATOR_MAX_ROWS


def check_methods(methods: Iterable[str] | None) -> tuple[str, ...]:
    """``methods`` in :data:`METHODS` order (``None``: all); an unknown name raises naming the choices."""
    if methods is None:
        return METHODS
    chosen = [methods] if isinstance(methods, str) else list(methods)
    unknown = [m for m in chosen if m not in METHODS]
    if unknown:
        raise ValueError(f"--methods {','.join(unknown)}: unknown; choose from {', '.join(METHODS)}")
    if not chosen:
        raise ValueError(f"--methods: none given; choose from {', '.join(METHODS)}")
    return tuple(m for m in METHODS if m in chosen)


# ------------------------------------------------------------------------------ one layer's post-attention part


@dataclass(frozen=True)
class Block:
    """What follows the attention in one layer: ``after(u)`` maps the residual sum ``u [..., hidden]`` to the
    layer's output (the FFN part, recomputed with fresh norm statistics); ``ln1`` is the norm ALTI linearises
    (post-LN encoders), ``None`` for pre-LN decoders (the attention block's output is ``u`` itself)."""

    module: nn.Module
    after: Callable[[torch.Tensor], torch.Tensor]
    ln1: nn.LayerNorm | None


def blocks(model: nn.Module) -> list[Block]:
    """Every layer's :class:`Block`, for the architectures of :mod:`helpers.core.internals`. Each ``after`` takes and
    gives the maps' arithmetic dtype (float32 or wider), running the layer's modules in the weights' own dtype
    (``--dtype bfloat16``: the reruns in bfloat16, their inputs and outputs float32; float32 weights: no cast)."""
    return [Block(b.module, _in_weights_dtype(b.after, b.module), b.ln1) for b in _blocks(model)]


def _in_weights_dtype(after: Callable[[torch.Tensor], torch.Tensor], module: nn.Module):
    dtype = next(module.parameters()).dtype

    def run(u: torch.Tensor) -> torch.Tensor:
        return after(u.to(dtype)).to(u.dtype)  # no-ops where u is already in the weights' dtype
    return run


def _blocks(model: nn.Module) -> list[Block]:
    kind = model_type(model)
    if kind in BERT_LIKE or kind == "mpnet":
        out = []
        for layer in model.encoder.layer:
            ln1 = layer.attention.LayerNorm if kind == "mpnet" else layer.attention.output.LayerNorm
            out.append(Block(layer, _encoder_after(layer, ln1), ln1))
        return out
    if kind == "distilbert":
        return [Block(layer, _distil_after(layer), layer.sa_layer_norm) for layer in model.transformer.layer]
    if kind == "gpt2":
        return [Block(b, _decoder_after(b.ln_2, b.mlp), None) for b in _base(model, "h")]
    if kind in LLAMA_LIKE:
        return [Block(b, _decoder_after(b.post_attention_layernorm, b.mlp), None) for b in _base(model, "layers")]
    raise NotImplementedError(
        f"model type {kind!r}: the mixing maps know the layers of "
        f"{', '.join((*BERT_LIKE, 'mpnet', 'distilbert', 'gpt2', *LLAMA_LIKE))}; "
        "add its post-attention modules to helpers.mixing.maps.blocks")


def _encoder_after(layer, ln1):
    def after(u):
        y = ln1(u)
        return layer.output(layer.intermediate(y), y)  # LN2(y + FFN(y)); dropout is off (eval)
    return after


def _distil_after(layer):
    def after(u):
        y = layer.sa_layer_norm(u)
        return layer.output_layer_norm(layer.ffn(y) + y)
    return after


def _decoder_after(norm2, mlp):
    def after(u):
        return u + mlp(norm2(u))
    return after


# ------------------------------------------------------------------------------ arithmetic shared by the maps


def normalise_rows(m: torch.Tensor) -> torch.Tensor:
    """Each row of ``m [..., query, key]`` (non-negative) divided by its sum; rows summing to 0 stay 0."""
    s = m.sum(-1, keepdim=True)
    return torch.where(s > 0, m / torch.where(s > 0, s, torch.ones_like(s)), torch.zeros_like(m))


def cosine_distance(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """``1 - cos(a, b)`` over the last axis as ``0.5 ||a/|a| - b/|b|||^2`` (equal in exact arithmetic; no
    cancellation for nearly parallel vectors, where ``1 - cos`` in float32 loses every digit)."""
    tiny = torch.finfo(a.dtype).tiny
    a = a / a.norm(dim=-1, keepdim=True).clamp_min(tiny)
    b = b / b.norm(dim=-1, keepdim=True).clamp_min(tiny)
    return 0.5 * (a - b).pow(2).sum(-1)


def l1_distance(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """``||a - b||_1`` over the last axis, exactly (no epsilon added to the difference)."""
    return (a - b).abs().sum(-1)


def rollout(maps: torch.Tensor, *, identity: bool = False) -> torch.Tensor:
    """Products through the layers of ``maps [batch, layer, query, key]``: ``R^1 = M^1``, ``R^l = M^l R^(l-1)``;
    ``identity``: each ``M`` replaced first by ``rows(0.5 M + 0.5 I)`` (Abnar & Zuidema: raw attention only).
    Padding rows (all 0) stay 0, and get no identity: pass ``visible [batch, token]`` through the maps' zeros."""
    if identity:
        live = (maps.sum(-1) > 0).to(maps.dtype)  # [batch, layer, query]: rows that exist
        eye = torch.diag_embed(live)
        maps = normalise_rows(0.5 * maps + 0.5 * eye)
    out = [maps[:, 0]]
    for layer in range(1, maps.shape[1]):
        out.append(maps[:, layer] @ out[-1])
    return torch.stack(out, dim=1)


def empty_rows(maps: torch.Tensor, attention_mask: torch.Tensor) -> int:
    """Rows of real (unpadded) queries in ``maps [batch, ..., query, key]`` that sum to 0 (value zeroing over a
    layer or head whose output projection moves nothing): kept at 0 by :func:`normalise_rows`, to be reported."""
    real = attention_mask.bool()
    real = real.view(real.shape[0], *([1] * (maps.dim() - 3)), real.shape[1])
    return int(((maps.sum(-1) == 0) & real).sum())


# ------------------------------------------------------------------------------ the batched core


@dataclass
class LayerState:
    """One layer of one forward pass: ``x`` its input ``[batch, token, hidden]``, ``alpha`` its weights
    ``[batch, head, query, key]`` (padding rows and columns 0), ``f`` per-head transformed values
    ``[batch, head, key, hidden]`` (``v W_O^h``, no ``b_O``), ``u`` the residual sum after attention
    ``[batch, token, hidden]``, ``pairs`` the visible (query, key) pairs ``[batch, query, key]``."""

    x: torch.Tensor
    alpha: torch.Tensor
    f: torch.Tensor
    u: torch.Tensor
    pairs: torch.Tensor


def layer_states(lm: LoadedModel, input_ids: torch.Tensor,
                 attention_mask: torch.Tensor) -> Iterator[tuple[LayerState, torch.Tensor]]:
    """One forward pass, then every layer's :class:`LayerState` with its values ``[batch, token, kv_head * d]``,
    layer by layer (``f``, the largest piece, is formed for one layer at a time)."""
    model = lm.model
    layers = blocks(model)
    inputs: dict[int, torch.Tensor] = {}
    handles = [b.module.register_forward_pre_hook(_keep_input(inputs, k), with_kwargs=True)
               for k, b in enumerate(layers)]
    extra = {}
    if "token_type_ids" in getattr(lm.tokenizer, "model_input_names", ()):
        extra["token_type_ids"] = torch.zeros_like(input_ids)
    try:
        with capture(lm, ("value", "output")) as seen:
            out = model(input_ids=input_ids, attention_mask=attention_mask, output_attentions=True, **extra)
    finally:
        for h in handles:
            h.remove()
    if not getattr(out, "attentions", None) or out.attentions[0] is None:
        raise no_attention(lm.label)
    real = attention_mask.bool()
    pairs = real[:, :, None] & real[:, None, :]
    if lm.causal:
        pairs = pairs & torch.ones(pairs.shape[-2:], dtype=torch.bool, device=pairs.device).tril()
    groups = kv_head_of(model.config).to(input_ids.device)
    for k in range(lm.n_layers):
        x = at_least_float32(inputs.pop(k))  # the arithmetic in float32 or wider whatever the weights (--dtype)
        zero = torch.zeros((), dtype=x.dtype, device=x.device)
        alpha = torch.where(pairs[:, None], out.attentions[k].to(x.dtype), zero)
        v = at_least_float32(seen.raw["value"].pop(k))
        W = output_weight(attention_parts(model, k), lm.n_heads).to(x.dtype)  # [head, d, hidden]
        heads = v.view(*v.shape[:-1], -1, W.shape[1])  # [batch, token, kv_head, d]
        if heads.shape[-2] != lm.n_heads:
            heads = heads.index_select(-2, groups)
        f = torch.einsum("bthd,hde->bhte", heads, W)
        u = x + seen.raw["output"].pop(k).to(x.dtype)
        yield LayerState(x, alpha, f, u, pairs), v


def _keep_input(inputs: dict[int, torch.Tensor], k: int):
    def hook(_module, args, kwargs):
        inputs[k] = (args[0] if args else kwargs["hidden_states"]).detach()
    return hook


def value_zeroing(block: Block, s: LayerState, *, per_head: bool, max_rows: int = MAX_ROWS,
                  rows: torch.Tensor | None = None) -> torch.Tensor:
    """Row-normalised value-zeroing map of one layer: ``[batch, query, key]``, or ``[batch, head, query, key]``
    with ``per_head``. The layer is rerun on ``u - delta`` for every unit (source ``j``, or head and source) as
    one batch, cut into chunks of at most ``max_rows`` vectors; only the rows a zeroing moves are rerun (half of a
    decoder's: a source moves only the rows after it), and of those only the query rows in ``rows`` (``[batch,
    query]`` bool; the others stay 0) where it is given."""
    B, H, T, _ = s.alpha.shape
    o = block.after(s.u)  # the original output, through the same arithmetic as the reruns
    alpha, u, n_q = s.alpha, s.u, T  # the query rows formed: every one, or each input's own asked ones
    if rows is not None:  # [batch, n_q]: each input's asked rows first, in order, then others (masked out)
        counts = rows.sum(1)
        n_q = max(1, int(counts.max()))
        pick = torch.argsort((~rows).to(torch.uint8), dim=1, stable=True)[:, :n_q]
        asked = torch.arange(n_q, device=rows.device)[None] < counts[:, None]
        alpha = alpha.gather(2, pick[:, None, :, None].expand(B, H, n_q, T))  # [batch, head, n_q, key]
        u, o = (t.gather(1, pick[..., None].expand(B, n_q, t.shape[-1])) for t in (u, o))  # [batch, n_q, hidden]
    if per_head:
        weights = alpha.transpose(2, 3).reshape(B, H * T, n_q)  # [batch, unit (head, key), query]
        sent = s.f.reshape(B, H * T, -1)  # [batch, unit, hidden]
    units = H * T if per_head else T
    D = torch.zeros(B, units, n_q, dtype=s.u.dtype, device=s.u.device)  # [batch, unit, query]
    step = max(1, max_rows // max(1, B * n_q))
    for start in range(0, units, step):
        stop = min(units, start + step)
        if per_head:
            delta = weights[:, start:stop, :, None] * sent[:, start:stop, None, :]
        else:
            delta = torch.einsum("bhij,bhjd->bjid", alpha[..., start:stop], s.f[:, :, start:stop])
        moved = delta.abs().amax(-1) > 0  # [batch, unit, query]: rows the zeroing reaches at all (a decoder's
        # rows before the source, padding and a silent head's rows are not rerun: their distance is exactly 0)
        if rows is not None:
            moved &= asked[:, None, :]  # and that the caller reads
        rerun = block.after((u[:, None] - delta)[moved])  # [moved rows, hidden]
        chunk = torch.zeros(moved.shape, dtype=D.dtype, device=D.device)
        chunk[moved] = cosine_distance(rerun, o[:, None].expand_as(delta)[moved])
        D[:, start:stop] = chunk
    if rows is not None:  # back to every query position: the rows not asked for are 0
        D = torch.zeros(B, units, T, dtype=D.dtype, device=D.device).scatter_(
            2, pick[:, None, :].expand(B, units, n_q), D)
    if per_head:
        D = D.view(B, H, T, T).transpose(2, 3)  # [batch, head, query, key]
        pairs = s.pairs[:, None]
    else:
        D = D.transpose(1, 2)
        pairs = s.pairs
    return normalise_rows(torch.where(pairs, D, torch.zeros_like(D)))


def alti(block: Block, s: LayerState, *, max_rows: int = MAX_ROWS) -> torch.Tensor:
    """Row-normalised ALTI map of one layer, ``[batch, query, key]``, queries cut into chunks of at most
    ``max_rows`` vectors of ``T_i(x_j)``."""
    B, H, T, _ = s.alpha.shape
    if block.ln1 is not None:
        ln = block.ln1
        y = torch.nn.functional.layer_norm(s.u, ln.normalized_shape, ln.weight.to(s.u.dtype), ln.bias.to(s.u.dtype),
                                           ln.eps)
        scale = torch.sqrt(s.u.var(-1, unbiased=False, keepdim=True) + ln.eps)  # [batch, query, 1]
    else:
        y = s.u
    ynorm = y.abs().sum(-1)  # [batch, query]
    C = torch.zeros(B, T, T, dtype=s.u.dtype, device=s.u.device)
    step = max(1, max_rows // max(1, B * T))
    for start in range(0, T, step):
        stop = min(T, start + step)
        rows = torch.arange(start, stop, device=s.u.device)
        parts = torch.einsum("bhij,bhjd->bijd", s.alpha[:, :, start:stop], s.f)  # [batch, query, key, hidden]
        parts[:, rows - start, rows] += s.x[:, start:stop]
        if block.ln1 is not None:
            parts = (parts - parts.mean(-1, keepdim=True)) * block.ln1.weight.to(s.u.dtype) / scale[:, start:stop, None]
        d = l1_distance(y[:, start:stop, None], parts)
        C[:, start:stop] = (ynorm[:, start:stop, None] - d).clamp_min(0)
    return normalise_rows(torch.where(s.pairs, C, torch.zeros_like(C)))


def mixing_batch(lm: LoadedModel, input_ids: torch.Tensor, attention_mask: torch.Tensor,
                 methods: Sequence[str] | None = None, *, max_rows: int | None = None,
                 dtype: torch.dtype | None = torch.float32, rows: torch.Tensor | None = None) -> dict[str, torch.Tensor]:
    """The maps of ``methods`` (default: all of :data:`METHODS`) for a right-padded batch, in ``dtype`` (``None``:
    the model's own, e.g. float64 for a test's float64 copy) on the model's device: ``[batch, layer, head, query,
    key]`` for ``attention``, ``norms``, ``value_zeroing_heads``, ``[batch, layer, query, key]`` for the others;
    padding rows and columns 0; value zeroing's rows only those in ``rows`` (``[batch, token]`` bool) where it is
    given (the module docstring is the contract). ``max_rows``: the rerun chunks' rows (default
    :func:`max_rows_for` the model's device)."""
    chosen = check_methods(methods)
    model = lm.model
    max_rows = max_rows_for(lm.device) if max_rows is None else max_rows
    with torch.inference_mode():
        layers = blocks(model)
        result: dict[str, list[torch.Tensor]] = {m: [] for m in chosen}
        grams = gram_matrices(lm) if "norms" in chosen else None
        groups = kv_head_of(model.config)
        states = layer_states(lm, input_ids.to(lm.device), attention_mask.to(lm.device))
        if rows is not None:
            rows = rows.to(device=lm.device, dtype=torch.bool)
        for k, (block, (s, values)) in enumerate(zip(layers, states)):
            if "attention" in chosen or "rollout" in chosen:
                result.setdefault("_weights", []).append(s.alpha)
            if "norms" in chosen:
                fnorm = transformed_norms(values, grams[k].to(values.device), groups)  # [batch, head, key]
                result["norms"].append(s.alpha * fnorm[:, :, None, :].to(s.alpha.dtype))
            if "value_zeroing" in chosen:
                result["value_zeroing"].append(value_zeroing(block, s, per_head=False, max_rows=max_rows,
                                                              rows=rows))
            if "value_zeroing_heads" in chosen:
                result["value_zeroing_heads"].append(value_zeroing(block, s, per_head=True, max_rows=max_rows,
                                                                    rows=rows))
            if "alti" in chosen or "alti_rollout" in chosen:
                result.setdefault("_alti", []).append(alti(block, s, max_rows=max_rows))
        out: dict[str, torch.Tensor] = {}
        weights = torch.stack(result.pop("_weights"), dim=1) if "_weights" in result else None
        per_layer_alti = torch.stack(result.pop("_alti"), dim=1) if "_alti" in result else None
        for m in chosen:
            if m == "attention":
                out[m] = weights
            elif m == "rollout":
                out[m] = rollout(weights.mean(2), identity=True)
            elif m == "alti":
                out[m] = per_layer_alti
            elif m == "alti_rollout":
                out[m] = rollout(per_layer_alti)
            else:
                out[m] = torch.stack(result[m], dim=1)
        return {m: t if dtype is None else t.to(dtype) for m, t in out.items()}


def mixing_for(lm: LoadedModel, examples: Sequence[Encoded], methods: Sequence[str] | None = None, *,
               max_rows: int | None = None, dtype: torch.dtype | None = torch.float32) -> dict[str, torch.Tensor]:
    """:func:`mixing_batch` over encoded examples, padded as :func:`helpers.core.extract.model_inputs` pads them;
    slice ``[..., :n, :n]`` per example."""
    inputs = model_inputs(lm, examples)
    return mixing_batch(lm, inputs["input_ids"], inputs["attention_mask"], methods, max_rows=max_rows, dtype=dtype)


def token_maps(lm: LoadedModel, words: Sequence[str], *, methods: Sequence[str] | None = None,
               max_rows: int | None = None) -> dict:
    """The maps of one sentence of ``words``, encoded as the project encodes them (special tokens included;
    a decoder's BOS first): ``{"tokens": list[str], method: np.ndarray float32}``, ``[layer, head, T, T]`` for
    ``attention``, ``norms``, ``value_zeroing_heads`` and ``[layer, T, T]`` for the others (``methods``: a
    subset of :data:`METHODS`, default all). Rows are receiving tokens, columns sources.

    >>> maps = token_maps(lm, ["A", "cat", "sat", "."], methods=["alti"])     # doctest: +SKIP
    >>> maps["alti"].sum(-1)                                                     # every row sums to 1
    """
    check_words(words)
    chosen = check_methods(methods)
    batch = encode_words(lm.tokenizer, [list(words)], max_length=lm.max_positions, model_max=lm.max_positions)
    if not batch.examples:
        raise ValueError(f"words: {len(words)} words make more than the model's {lm.max_positions} tokens")
    example = batch.examples[0]
    maps = mixing_for(lm, [example], chosen, max_rows=max_rows)
    out: dict = {"tokens": lm.tokenizer.convert_ids_to_tokens(example.input_ids.tolist())}
    for m in chosen:
        out[m] = convert(maps[m][0], np.float32)
    return out
