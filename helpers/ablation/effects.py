"""Do the heads matter? Removing heads and sink terms, batched on the model's device (definitions: book/methods.md,
§Removing heads; Michel, Levy and Neubig 2019, "Are Sixteen Heads Really Better than One?"; Clark et al. 2019 §3.2's
"no-op" hypothesis).

Every intervention is one mask per batch row (:mod:`helpers.ablation.interventions`), so ``K`` interventions over
``N`` segments run as ``K x N`` rows of as few forward passes as fit (:func:`intervention_losses`); segments of one
length go together, so padding stays small.

- :func:`single_head_losses`: ``[layer, head, segment]``, the loss with that head's context zeroed (``D`` is its
  mean minus the base loss).
- :func:`importance`: Michel's ``I = |dL/dxi|`` per segment ``[segment, layer, head]``, from one backward pass of a
  per-row ``xi`` (the absolute value is taken per segment, never over a batch's summed gradient).
- :func:`per_layer` of :func:`only_masks`: "all but one", ``[layer, head, segment]``, every other head of that layer
  removed; of :func:`sink_masks` with ``sink`` and ``mode``: the no-op and redirect tests per head
  (:func:`every_head_sink_losses`: on every head at once).
- :func:`held_out_prune_curves`: heads removed 10 % of all at a time, by recomputed layer-normalised importance
  (fitted on other segments than those scored) and in random orders.
- :func:`head_effects`: the whole for a list of word lists (the Python API).

>>> effects = head_effects(lm, [["The", "cat", "sat", "."], ["A", "dog", "ran", "."]], head=my_head)  # doctest: +SKIP
>>> effects.delta.shape                                                                           # [layer, head]
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from itertools import groupby
from typing import Sequence

import numpy as np
import torch

from helpers.ablation.interventions import SinkTest, first_layer, intervene
from helpers.ablation.loss import IGNORE, Segments, padded, prepare, row_losses
from helpers.core.encoding import MAX_LENGTH
from helpers.core.models import LoadedModel
from helpers.core.threads import FIXED_THREADS, torch_threads

ROW_TOKENS = 16 * 128 * 6 * 384  # tokens x layers x hidden of one forward pass (16 segments of 128 for the 6 x 384 default)
GRAD_TOKENS = 8 * 128 * 6 * 384  # the same for a backward pass, which keeps every layer's activations
PRUNE_STEP = 0.1                 # the pruning curve removes ceil(10 % of all heads) a step (Michel et al. §4)
PRUNE_SEEDS = (0, 1, 2)          # the random orders beside it
PRUNE_FOLDS = 2                  # the held-out pruning curve: the order fitted on one fold scores the other
CONTROL_DRAWS = 5                # the no-op test's matched control: random content tokens per segment (one pass each)


def rows_per_pass(lm: LoadedModel, length: int, *, budget: int = ROW_TOKENS) -> int:
    """Rows of ``length`` tokens in one pass: ``budget / (length x layers x hidden)``, at least 1."""
    hidden = int(getattr(lm.model.config, "hidden_size", 768))
    return max(1, budget // (max(length, 1) * lm.n_layers * hidden))


def _by_length(segments: Segments) -> list[int]:
    return sorted(range(len(segments)), key=lambda n: (len(segments.examples[n]), n))


def passes(lm: LoadedModel, segments: Segments, K: int, *, budget: int = ROW_TOKENS) -> list[list[tuple[int, int]]]:
    """The forward passes that run ``K`` interventions over ``segments``: each pass a list of ``(segment,
    intervention)`` rows, segment by segment in length order (the copies of one segment side by side), as many rows
    as :func:`rows_per_pass` allows at the length of the pass's longest segment (every row is padded to it), at
    least one."""
    pairs = [(n, k) for n in _by_length(segments) for k in range(K)]
    out: list[list[tuple[int, int]]] = []
    for pair in pairs:  # lengths only grow: a row fits while the pass, padded to this row's length, stays in budget
        if out and len(out[-1]) < rows_per_pass(lm, len(segments.examples[pair[0]]), budget=budget):
            out[-1].append(pair)
        else:
            out.append([pair])
    return out


def intervention_losses(lm: LoadedModel, segments: Segments, xi: torch.Tensor | None = None, *,
                        sink_heads: torch.Tensor | None = None, sink: str | None = None, mode: str | None = None,
                        budget: int = ROW_TOKENS, fill: torch.Tensor | None = None) -> torch.Tensor:
    """``[K, segment]``: the loss of every segment under each of ``K`` interventions, float64 on the CPU.

    ``xi`` ``[K, layer, head]`` (head masks; ``None``: all ones); ``sink_heads`` ``[K, layer, head]`` bool with
    ``sink`` (a kind of ``segments.sinks``) and ``mode`` (``"noop"`` or ``"redirect"``): the sink test of each
    intervention. The ``K x N`` rows run in passes of :func:`rows_per_pass` rows, segment by segment in length order
    (the copies of one segment side by side). The layers before the first one an intervention touches run once per
    segment (``intervene``'s ``shared``): a layer's single-head removals cost its own and the later layers' time.
    The passes: :func:`passes`. ``fill`` ``[layer, head, d]``: a removed head's context is replaced by it rather than
    zeroed (mean ablation, :func:`mean_contexts`)."""
    L = lm.n_layers
    K = (xi if xi is not None else sink_heads).shape[0]
    start_layer = first_layer(xi, sink_heads)  # the layers before it run once per segment, not once per copy
    out = torch.empty(K, len(segments), dtype=torch.float64)
    with torch.inference_mode(), torch_threads(FIXED_THREADS):
        for chunk in passes(lm, segments, K, budget=budget):
            rows = [n for n, _ in chunk]
            ks = torch.tensor([k for _, k in chunk])
            mask = xi[ks] if xi is not None else None
            test = None
            if sink_heads is not None:
                width = max(len(segments.examples[n]) for n in rows)
                test = SinkTest(padded([segments.sinks[sink][n] for n in rows], width, False), sink_heads[ks], mode)
            given, repeats = _runs(rows)  # each segment once, repeated at the first layer an intervention touches
            shared = (start_layer, torch.tensor(repeats)) if 0 < start_layer < L else None
            with intervene(lm, xi=mask, sink=test, shared=shared, fill=fill):
                losses = row_losses(lm, segments, rows, given=given if shared else None).double().cpu()
            for (n, k), value in zip(chunk, losses):
                out[k, n] = value
    return out


def _runs(rows: Sequence[int]) -> tuple[list[int], list[int]]:
    """``(segments, repeats)``: the runs of equal consecutive ``rows``."""
    runs = [(r, len(list(group))) for r, group in groupby(rows)]
    return [r for r, _ in runs], [k for _, k in runs]


def base_losses(lm: LoadedModel, segments: Segments) -> np.ndarray:
    """``[segment]``: the loss with every head present."""
    return intervention_losses(lm, segments, torch.ones(1, lm.n_layers, lm.n_heads))[0].numpy()


def single_head_masks(n_layers: int, n_heads: int) -> torch.Tensor:
    """``[layer * head, layer, head]``: mask ``k`` removes head ``k`` (flattened ``layer * n_heads + head``)."""
    return 1.0 - torch.eye(n_layers * n_heads).reshape(-1, n_layers, n_heads)


def only_masks(n_layers: int, n_heads: int) -> torch.Tensor:
    """``[layer * head, layer, head]``: mask ``k = (l, h)`` keeps only head ``h`` in layer ``l`` (others intact)."""
    alone = torch.eye(n_layers * n_heads).reshape(-1, n_layers, n_heads)  # head k, and no other head of its layer
    own_layer = (torch.arange(n_layers * n_heads) // n_heads)[:, None] == torch.arange(n_layers)  # [k, layer]
    return torch.where(own_layer[:, :, None], alone, torch.ones_like(alone))


def sink_masks(n_layers: int, n_heads: int) -> torch.Tensor:
    """``[layer * head, layer, head]`` bool: sink-test heads ``k`` tests head ``k`` alone."""
    return torch.eye(n_layers * n_heads, dtype=torch.bool).reshape(-1, n_layers, n_heads)


def layer_losses(lm: LoadedModel, segments: Segments, masks: torch.Tensor, layer: int, **kw) -> np.ndarray:
    """``[head, segment]``: :func:`intervention_losses` of ``layer``'s rows of ``masks`` ``[layer * head, layer, head]``
    (``xi``, or with ``sink`` the heads tested), one batch touching that layer only (so the layers before it run
    once per segment)."""
    H = lm.n_heads
    key = "sink_heads" if "sink" in kw else "xi"
    return intervention_losses(lm, segments, **{key: masks[layer * H:(layer + 1) * H]}, **kw).numpy()


def per_layer(lm: LoadedModel, segments: Segments, masks: torch.Tensor, **kw) -> np.ndarray:
    """``[layer, head, segment]``: :func:`layer_losses` of every layer."""
    return np.stack([layer_losses(lm, segments, masks, layer, **kw) for layer in range(lm.n_layers)])


def single_head_losses(lm: LoadedModel, segments: Segments, **kw) -> np.ndarray:
    """``[layer, head, segment]``: each segment's loss with that head removed (``xi = 0`` for it alone)."""
    return per_layer(lm, segments, single_head_masks(lm.n_layers, lm.n_heads), **kw)


def importance(lm: LoadedModel, segments: Segments, xi: torch.Tensor | None = None, *,
               budget: int = GRAD_TOKENS) -> tuple[np.ndarray, np.ndarray]:
    """``(|dL/dxi| [segment, layer, head], loss [segment])`` at the mask ``xi`` ``[layer, head]`` (default all ones),
    float64 on the CPU. Each row has its own leaf ``xi``, so one backward pass of the summed losses gives every
    segment's own gradient, whose absolute value is taken before any mean (Michel et al. eq. 2)."""
    L, H = lm.n_layers, lm.n_heads
    base = torch.ones(L, H) if xi is None else xi.detach().float().cpu()
    grads = np.empty((len(segments), L, H))
    losses = np.empty(len(segments))
    with torch_threads(FIXED_THREADS):
        for chunk in passes(lm, segments, 1, budget=budget):
            rows = [n for n, _ in chunk]
            leaf = base.expand(len(rows), L, H).clone().to(lm.device).requires_grad_(True)
            with torch.enable_grad(), intervene(lm, xi=leaf):
                loss = row_losses(lm, segments, rows)
                (g,) = torch.autograd.grad(loss.sum(), leaf)
            grads[rows] = g.abs().double().cpu().numpy()
            losses[rows] = loss.detach().double().cpu().numpy()
    return grads, losses


def normalise_layers(scores: np.ndarray) -> np.ndarray:
    """Each layer's row ``[layer, head]`` divided by its l2 norm (Michel et al. §4); a zero row stays zero."""
    norms = np.linalg.norm(scores, axis=-1, keepdims=True)
    return np.divide(scores, norms, out=np.zeros_like(scores, dtype=float), where=norms > 0)


def prune_steps(n_heads_total: int, step: float = PRUNE_STEP) -> list[int]:
    """Heads removed after each step: ``ceil(step x total)`` a step, up to all of them (``[0, s, 2s, ..., total]``)."""
    size = max(1, math.ceil(step * n_heads_total - 1e-9))
    counts = list(range(0, n_heads_total, size)) + [n_heads_total]
    return counts


def _recomputed_order(lm: LoadedModel, fit: Segments, counts: Sequence[int],
                      score: Segments) -> tuple[list[int], np.ndarray, np.ndarray]:
    """Michel et al.'s order, recomputed on ``fit``: ``(order, in-sample losses [step, len(fit)], held-out losses
    [step, len(score)])``. Each step removes the heads still present with the lowest layer-normalised
    importance on ``fit``, recomputed on the pruned model (pruned heads' importance counts as 0 in the
    normalisation; ties to the lower flattened index); the losses are those after each step's removals (``counts``,
    heads removed in all), on ``fit`` (the importance passes') and, under the same masks, on ``score``."""
    L, H = lm.n_layers, lm.n_heads
    total = L * H
    xi = torch.ones(L, H)
    order: list[int] = []
    inside = np.empty((len(counts), len(fit)))
    held = np.empty((len(counts), len(score)))
    for i, count in enumerate(counts):
        grads, losses = importance(lm, fit, xi)
        inside[i] = losses
        held[i] = intervention_losses(lm, score, xi[None].clone())[0].numpy()
        if i + 1 == len(counts):
            break
        scores = grads.mean(0) * xi.numpy()                      # removed heads count as 0
        norm = normalise_layers(scores).ravel()
        present = [k for k in range(total) if xi.view(-1)[k] > 0]
        chosen = sorted(present, key=lambda k: (norm[k], k))[: counts[i + 1] - count]
        order.extend(chosen)
        for k in chosen:
            xi.view(-1)[k] = 0.0
    return order, inside, held


def _order_masks(order: Sequence[int], counts: Sequence[int], n_layers: int, n_heads: int) -> torch.Tensor:
    """``[step, layer, head]``: after step ``i`` the first ``counts[i]`` heads of ``order`` (flattened) removed."""
    masks = []
    for count in counts:
        m = torch.ones(n_layers * n_heads)
        m[torch.as_tensor(list(order[:count]), dtype=torch.long)] = 0.0
        masks.append(m.view(n_layers, n_heads))
    return torch.stack(masks)


def random_order_losses(lm: LoadedModel, segments: Segments, counts: Sequence[int],
                        seeds: Sequence[int] = PRUNE_SEEDS) -> np.ndarray:
    """``[seed, step, segment]``: the losses after each step of ``counts`` heads removed in a random order per seed
    (``np.random.default_rng(seed).permutation`` of the flattened heads), all as one batch of masks."""
    L, H = lm.n_layers, lm.n_heads
    masks = torch.cat([_order_masks(np.random.default_rng(seed).permutation(L * H).tolist(), counts, L, H)
                       for seed in seeds])
    return intervention_losses(lm, segments, masks).numpy().reshape(len(seeds), len(counts), len(segments))


def folds_of(n_segments: int, n_folds: int = PRUNE_FOLDS) -> np.ndarray:
    """``[segment]``: each segment's fold, ``k % n_folds`` in corpus order (the folds interleave, so that no fold
    is one document)."""
    return np.arange(n_segments) % n_folds


def pick(segments: Segments, indices: Sequence[int]) -> Segments:
    """The segments at ``indices``, in that order."""
    idx = [int(i) for i in indices]
    return replace(segments, examples=[segments.examples[i] for i in idx],
                   labels=[segments.labels[i] for i in idx],
                   sinks={k: [v[i] for i in idx] for k, v in segments.sinks.items()},
                   tokens=[segments.tokens[i] for i in idx])


def held_out_prune_curves(lm: LoadedModel, segments: Segments, *, single: np.ndarray | None = None,
                          seeds: Sequence[int] = PRUNE_SEEDS, step: float = PRUNE_STEP,
                          n_folds: int = PRUNE_FOLDS) -> dict:
    """Michel et al. §4's pruning curve with the order fitted on other segments than those it is scored on
    (cross-fitting): the segments split into ``n_folds`` interleaved folds (:func:`folds_of`); the order of fold
    ``f`` is recomputed importance on fold ``f`` (:func:`_recomputed_order`) and scores the segments of the next
    fold, so every segment's curve comes from an order fitted without it. Beside it the same with the order of the
    measured single-head effect ``D`` (``single`` ``[layer, head, segment]``: the losses with each head removed,
    minus the base loss; the heads with the lowest ``D`` on the fold first, fixed), and the random orders on every
    segment. Returns per segment ``[step, segment]``: ``"held_out"`` (importance, held out), ``"in_sample"`` (each
    order on its own fold: what the curve would be without holding out), ``"by_delta"`` (``None`` without
    ``single``), ``"random"`` ``[seed, step, segment]``; and ``"removed"``, ``"shares"``, ``"orders"`` and
    ``"delta_orders"`` (per fold, flattened heads in removal order), ``"folds"`` ``[segment]``, ``"seeds"``."""
    L, H = lm.n_layers, lm.n_heads
    total = L * H
    counts = prune_steps(total, step)
    S = len(segments)
    if S < n_folds:
        raise ValueError(f"a held-out pruning curve needs at least {n_folds} segments (one a fold), got {S}")
    fold = folds_of(S, n_folds)
    members = [np.flatnonzero(fold == f) for f in range(n_folds)]
    parts = [pick(segments, m) for m in members]
    held = np.empty((len(counts), S))
    inside = np.empty((len(counts), S))
    by_delta = None if single is None else np.empty((len(counts), S))
    orders, delta_orders = [], []
    for f in range(n_folds):
        g = (f + 1) % n_folds                                   # the fold this fold's order scores
        order, ins, out = _recomputed_order(lm, parts[f], counts, parts[g])
        orders.append(order)
        inside[:, members[f]] = ins
        held[:, members[g]] = out
        if single is not None:
            d = np.asarray(single, dtype=np.float64)[..., members[f]].mean(-1).ravel()
            d_order = sorted(range(total), key=lambda k: (d[k], k))
            delta_orders.append(d_order)
            by_delta[:, members[g]] = intervention_losses(lm, parts[g], _order_masks(d_order, counts, L, H)).numpy()
    random = random_order_losses(lm, segments, counts, seeds)
    return {"removed": counts, "shares": [c / total for c in counts], "held_out": held, "in_sample": inside,
            "by_delta": by_delta, "random": random, "orders": orders, "delta_orders": delta_orders or None,
            "folds": fold.tolist(), "seeds": list(seeds)}


def every_head_sink_losses(lm: LoadedModel, segments: Segments, sink: str, mode: str, **kw) -> np.ndarray:
    """``[segment]``: the losses with the sink test ``mode`` on ``sink`` applied to every head of every layer at once."""
    heads = torch.ones(1, lm.n_layers, lm.n_heads, dtype=torch.bool)
    return intervention_losses(lm, segments, sink_heads=heads, sink=sink, mode=mode, **kw).numpy()[0]


def head_set_sink_losses(lm: LoadedModel, segments: Segments, sink: str, mode: str, heads, **kw) -> np.ndarray:
    """``[segment]``: the losses with the sink test ``mode`` on ``sink`` applied to the heads ``heads`` ``[layer,
    head]`` (bool) at once."""
    chosen = torch.as_tensor(np.asarray(heads, dtype=bool)).reshape(1, lm.n_layers, lm.n_heads)
    return intervention_losses(lm, segments, sink_heads=chosen, sink=sink, mode=mode, **kw).numpy()[0]


def content_positions(lm: LoadedModel, segments: Segments, draw: int, *, seed: int = 0) -> list[np.ndarray]:
    """Per segment ``[token]`` bool: one content token drawn at random (``np.random.default_rng((seed, draw))``,
    segment by segment in order), the matched control of the no-op test: a token that is no sink of
    ``segments.sinks`` ([CLS], [SEP], BOS), not "." or "," and, for an encoder, not one of the masked-LM's
    prediction positions (its input there is not the word). A segment with no such token falls back to any token
    that is no sink; one with none has no position (the control then edits nothing in it)."""
    from helpers.surface.stats import token_masks

    rng = np.random.default_rng((seed, draw))
    out = []
    for n, tokens in enumerate(segments.tokens):
        size = len(segments.examples[n])
        sink = np.zeros(size, bool)
        for masks in segments.sinks.values():
            sink |= np.asarray(masks[n], bool)[:size]
        ids = np.asarray(lm.tokenizer.convert_tokens_to_ids(tokens))
        punct = token_masks(lm.tokenizer, ids, causal=lm.causal)["punct"][:size]
        candidates = ~sink & ~punct
        if not lm.causal:
            candidates &= np.asarray(segments.labels[n]) == IGNORE
        if not candidates.any():
            candidates = ~sink
        where = np.flatnonzero(candidates)
        chosen = np.zeros(size, bool)
        if where.size:
            chosen[where[rng.integers(where.size)]] = True
        out.append(chosen)
    return out


def control_segments(lm: LoadedModel, segments: Segments, draws: int = CONTROL_DRAWS, *, seed: int = 0) -> Segments:
    """``segments`` whose ``sinks`` are the matched control's positions instead: ``{"content0": ..., ...}``, one
    random content token per segment for each of ``draws`` draws (:func:`content_positions`); the no-op test on
    ``"contentD"`` removes that token's value term, as the no-op test removes a sink's."""
    return replace(segments, sinks={f"content{d}": content_positions(lm, segments, d, seed=seed)
                                    for d in range(draws)})


def mean_contexts(lm: LoadedModel, segments: Segments, *, budget: int = ROW_TOKENS) -> torch.Tensor:
    """``[layer, head, d]`` float32: each head's mean context vector (before the output projection) over every token
    of ``segments`` (padding left out; an encoder's input as the loss sees it, with its masking), every head
    present: what mean ablation puts in place of a removed head's context (``fill`` of
    :func:`intervention_losses`)."""
    from helpers.ablation.interventions import recording_contexts
    from helpers.core.extract import model_inputs

    sums: dict[int, torch.Tensor] = {}
    count: dict[int, int] = {}
    with torch.inference_mode(), torch_threads(FIXED_THREADS):
        for chunk in passes(lm, segments, 1, budget=budget):
            inputs = model_inputs(lm, [segments.examples[n] for n, _ in chunk])
            if lm.causal:
                inputs["use_cache"] = False
            with recording_contexts(lm, inputs["attention_mask"].bool()) as rec:
                lm.model(**inputs)
            for layer, value in rec["sums"].items():
                sums[layer] = sums.get(layer, 0) + value
                count[layer] = count.get(layer, 0) + rec["count"][layer]
    return torch.stack([sums[layer] / count[layer] for layer in range(lm.n_layers)]).float()


@dataclass
class HeadEffects:
    """What :func:`head_effects` returns: ``tokens`` (per sentence, the model's token strings), ``loss`` ``[S]`` (every
    head present), ``delta`` ``[L, H]`` (mean over sentences of the loss with that head's context zeroed minus
    ``loss``), ``importance`` ``[L, H]`` (mean over sentences of ``|dL/dxi|``, not normalised) and ``sinks`` (an
    encoder's ``{"sep": {"noop", "redirect"}, "cls": ...}``, a decoder's ``{"bos": ...}``: the mean loss change with
    the test applied to every head of every layer at once); ``kind`` says what the loss is. Also readable as a
    mapping (``effects["delta"]``)."""

    tokens: list[list[str]]
    loss: np.ndarray
    delta: np.ndarray
    importance: np.ndarray
    sinks: dict[str, dict[str, float]]
    kind: str = ""
    per_segment: dict = field(default_factory=dict, repr=False)

    def __getitem__(self, key: str):
        if key not in ("tokens", "loss", "delta", "importance", "sinks", "kind"):
            raise KeyError(key)
        return getattr(self, key)

    def keys(self):
        return ("tokens", "loss", "delta", "importance", "sinks", "kind")


def head_effects(lm: LoadedModel, sentences: Sequence[Sequence[str]], seed: int = 0, *, head=None,
                 head_source: str | None = None) -> HeadEffects:
    """Single-head effects, importance and the all-heads sink tests of ``lm`` on ``sentences`` (a list of word
    lists, each encoded alone as the other sections encode words: ``[CLS] ... [SEP]``, a decoder's BOS first).

    The loss: a decoder's next-token loss; an encoder's masked-LM loss with ``head`` (default: the checkpoint's own
    masked-LM head; a model without one needs the fitted head of the gradient analysis, the surface section report's
    ``mlm_head[0]``), masking drawn once per sentence from ``seed``."""
    from helpers.core.encoding import check_words, encode_words

    check_words(sentences, "sentences", sentences=True)
    if head is None and not lm.causal:
        from helpers.core.masked_lm import pretrained_head

        head = pretrained_head(lm)
        if head is None:
            raise ValueError(f"{lm.label} has no masked-LM head of its own: pass head= (the gradient analysis's fitted "
                             "head: the surface section report's mlm_head[0])")
        head_source = head_source or "the checkpoint's own masked-LM head"
    batch = encode_words(lm.tokenizer, sentences, max_length=min(MAX_LENGTH, lm.max_positions))
    segments = prepare(lm, batch, head=head, seed=seed, head_source=head_source)
    base = base_losses(lm, segments)
    removed = single_head_losses(lm, segments)
    grads, _ = importance(lm, segments)
    sinks = {}
    for kind in segments.sinks:
        sinks[kind] = {}
        for mode in ("noop", "redirect"):
            sinks[kind][mode] = float((every_head_sink_losses(lm, segments, kind, mode) - base).mean())
    return HeadEffects(segments.tokens, base, (removed - base).mean(-1), grads.mean(0), sinks, segments.kind,
                       {"removed": removed, "importance": grads})

