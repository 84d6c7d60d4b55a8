"""Scoring minimal pairs with a language model, with heads removed (definitions: book/methods.md, §Minimal pairs).

:func:`score_pairs` is the contract: ``score_pairs(lm, pairs, remove=(), method="full")`` returns ``{"good": [N],
"bad": [N]}``, each pair's two sentences' log-probabilities in nats (float64); a pair is right when ``good > bad``.

- A decoder, ``method="full"``: ``log P(s)``, the sum of ``log P(token | tokens before it)`` over every token of
  ``[BOS] + tokenizer(" " + text, add_special_tokens=False)`` after the BOS (every word after a space, the first
  too: lm-evaluation-harness's BLiMP convention). ``method="prefix"``: only the tokens of ``" " + word`` after
  ``[BOS] + tokenizer(" " + prefix)`` (the pair's ``one_prefix_*`` fields; a pair without them is an error).
- An encoder with its own masked-LM head: pseudo-log-likelihood, whole word left to right (PLL-word-l2r; Kauf and
  Ivanova 2023): each token of ``[CLS] + tokenizer(text) + [SEP]`` that belongs to a word is scored with itself and
  the later tokens of its word masked. ``method="prefix"``: the tokens of the word after the prefix only, in the
  input ``prefix + " " + word``.
- An encoder without one (the offline default) is not scored: :class:`NotScorable`, with the reason. A head fitted
  on the frozen encoder (the §3.2 gradient analysis) is no language model of grammar.

Removing a head is chapter 11's: its context times 0, the output bias kept (:func:`helpers.core.head_mask.head_mask`);
with ``fill`` a removed head's context is replaced by a vector instead (mean ablation).

Every text is one row (a decoder) or one row per scored token (PLL); :func:`text_scores` runs ``K`` head masks over the
rows in passes of rows sorted by length and padded to their pass's longest (as chapter 11's passes), and each mask is a
copy of the pass's rows that joins at the first layer it touches (:func:`helpers.core.head_mask.staggered`): the
layers before it run once for every copy. :func:`margin_gradients` gives ``d margin / d xi`` per pair from one
backward pass a batch.

>>> scores = score_pairs(lm, pairs, remove=[(3, 8)])                # doctest: +SKIP
>>> (scores["good"] > scores["bad"]).mean()                         # accuracy   # doctest: +SKIP
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal, Sequence

import numpy as np
import torch
from torch import nn

from helpers.core.extract import at_least_float32
from helpers.core.head_mask import first_layer, head_mask, parts_of, staggered
from helpers.core.models import LoadedModel
from helpers.core.threads import torch_threads

Method = Literal["full", "prefix"]
METHODS: tuple[str, ...] = ("full", "prefix")
PREFIX_FIELDS = ("one_prefix_prefix", "one_prefix_word_good", "one_prefix_word_bad")
# One pass's size: the tokens of its widest layer (the pass's rows, padded to its longest, times the copies that have
# joined by its last layer). An inference pass keeps one layer's activations at a time: 4,096 tokens of a 576-wide
# model with a 1,536-wide MLP are about 25 MB a tensor, while the trunk's early layers still multiply matrices of a
# few hundred rows (fewer rows waste the CPU's matrix kernels: a pass of one 12-token sentence through SmolLM2 costs
# several times its share). A backward pass keeps every layer's activations (about 9,000 floats a token a layer in
# SmolLM2: 512 tokens, 0.5 GB). An accelerator takes many times more a pass (its memory holds them, and its time goes
# into launching small passes otherwise).
ROW_BUDGET = 4096
GRAD_BUDGET = 512
ACCELERATOR_SCALE = 32
LOGIT_ROWS = 2048  # positions whose vocabulary-sized logits are computed at once (a 49k vocabulary: 400 MB)
# Torch threads of every pass on the CPU: one, a fixed count (the sums' order, and so the last digits, do not depend on
# the machine); on the shared 2-core machine two threads cost 2 to 4 times the processor time of one for the same
# passes (measured: 22 against 5 processor seconds for 67 pairs through SmolLM2), and the chapter's budget is its
# processor time.
THREADS = 1
DECODER_KIND = "next-token log-probabilities (the decoder's own head)"
PLL_KIND = "pseudo-log-likelihood, whole word left to right (PLL-word-l2r), the checkpoint's own masked-LM head"


class NotScorable(ValueError):
    """The model cannot score sentences: an encoder without a masked-LM head of its own (``reason`` says why)."""


def own_head(lm: LoadedModel) -> nn.Module | None:
    """An encoder's own masked-LM head (the checkpoint's), or ``None``; a decoder scores with its LM head: ``None``."""
    if lm.causal:
        return None
    from helpers.core.masked_lm import pretrained_head

    return pretrained_head(lm)


def not_scorable_reason(lm: LoadedModel, head: nn.Module | None = None) -> str | None:
    """Why ``lm`` cannot score a sentence (``None``: it can): an encoder with no masked-LM head of its own (or a
    random-init one). ``head``: the encoder's head when the caller has it already."""
    if lm.causal:
        return None
    if (head if head is not None else own_head(lm)) is None:
        return (f"{lm.label} is an encoder without a masked-LM head of its own, so it gives no probability to a sentence; "
                "the head fitted on its frozen states for the gradient analysis (§3.2) is no language model of "
                "grammar (its loss is close to a unigram model's), so the pairs are not scored with it")
    return None


def scorer_kind(lm: LoadedModel) -> str:
    """What a score is, said wherever one appears."""
    return DECODER_KIND if lm.causal else PLL_KIND


# ------------------------------------------------------------------------------------------------ the rows


@dataclass
class Rows:
    """The model inputs that score a list of texts: per row its input ``ids``, the ``positions`` whose prediction is
    scored and the ``targets`` they are scored against (a decoder's position ``p`` predicts token ``p + 1``; an encoder's
    masked position predicts its own token), and ``text`` (the text whose score the row adds to). The texts are the
    pairs' good sentences, then their bad ones (``n_texts = 2N``). ``head``: an encoder's masked-LM head."""

    ids: list[np.ndarray]
    positions: list[np.ndarray]
    targets: list[np.ndarray]
    text: np.ndarray
    n_texts: int
    kind: str
    head: nn.Module | None = field(default=None, repr=False)

    def __len__(self) -> int:
        return len(self.ids)

    def subset(self, texts: np.ndarray) -> "Rows":
        """The rows of the texts ``texts`` (indices), renumbered in that order (each text's rows in their order)."""
        order = np.argsort(self.text, kind="stable")                       # rows grouped by text
        starts = np.searchsorted(self.text[order], np.arange(self.n_texts + 1))
        keep, text = [], []
        for k, t in enumerate(np.asarray(texts, dtype=np.int64)):
            mine = order[starts[t]:starts[t + 1]]
            keep.extend(int(r) for r in mine)
            text.extend([k] * len(mine))
        return Rows([self.ids[r] for r in keep], [self.positions[r] for r in keep], [self.targets[r] for r in keep],
                    np.asarray(text, dtype=np.int64), len(texts), self.kind, self.head)


def _describe(pair: dict, n: int) -> str:
    return f"pair {n} (paradigm {pair.get('UID', '?')}, pairID {pair.get('pairID', '?')})"


def pair_texts(pairs: Sequence[dict], method: str = "full") -> list[tuple[str, str | None]]:
    """``(text, None)`` (``method="full"``) or ``(prefix, word)`` (``"prefix"``) for every good sentence, then every bad
    one. A pair without its one-prefix fields under ``"prefix"`` raises ``ValueError`` naming it."""
    if method not in METHODS:
        raise ValueError(f"method {method!r}: choose one of {', '.join(METHODS)}")
    if not pairs:
        raise ValueError("pairs: no pair to score")
    good, bad = [], []
    for n, pair in enumerate(pairs):
        if not isinstance(pair, dict):
            raise ValueError(f"pairs[{n}]: a BLiMP row (a dict with sentence_good and sentence_bad), not "
                             f"{type(pair).__name__}")
        if method == "full":
            for key in ("sentence_good", "sentence_bad"):
                if not isinstance(pair.get(key), str) or not pair[key].strip():
                    raise ValueError(f"{_describe(pair, n)}: no {key}")
            good.append((pair["sentence_good"], None))
            bad.append((pair["sentence_bad"], None))
        else:
            missing = [k for k in PREFIX_FIELDS if not isinstance(pair.get(k), str) or not pair[k].strip()]
            if missing:
                raise ValueError(f"{_describe(pair, n)}: no {', '.join(missing)} (one_prefix_method is "
                                 f"{pair.get('one_prefix_method')!r}): method='prefix' scores only pairs that differ "
                                 "in one word after a shared prefix; use method='full', or pairs of paradigms with "
                                 "one_prefix_method")
            good.append((pair["one_prefix_prefix"], pair["one_prefix_word_good"]))
            bad.append((pair["one_prefix_prefix"], pair["one_prefix_word_bad"]))
    return good + bad


def _bos(lm: LoadedModel) -> int:
    tok = lm.tokenizer
    bos = tok.bos_token_id if tok.bos_token_id is not None else tok.eos_token_id
    if bos is None:
        raise ValueError(f"{lm.label}: the tokenizer has neither a BOS nor an EOS token to start a sentence with")
    return int(bos)


def _decoder_rows(lm: LoadedModel, texts: Sequence[tuple[str, str | None]]) -> list[tuple]:
    """``(ids, positions, targets)`` of every ``(context, continuation)``: ``[BOS] + tokens(" " + context)``, every
    token after the BOS scored; with a ``continuation``, ``+ tokens(" " + continuation)``, only those scored. The
    tokenizer is called once for all (a fast tokenizer's batch: the whole of BLiMP in about a second)."""
    tok = lm.tokenizer
    bos = _bos(lm)
    heads = tok([" " + c for c, _ in texts], add_special_tokens=False)["input_ids"]
    tails = [w for _, w in texts if w is not None]
    tail_ids = iter(tok([" " + w for w in tails], add_special_tokens=False)["input_ids"] if tails else [])
    out = []
    for (context, continuation), head in zip(texts, heads):
        tail = [] if continuation is None else list(next(tail_ids))
        ids = np.asarray([bos, *head, *tail], dtype=np.int64)
        first = 1 if continuation is None else 1 + len(head)
        if len(ids) <= first:
            raise ValueError(f"{context!r} {continuation!r}: no token to score")
        out.append((ids, np.arange(first - 1, len(ids) - 1), ids[first:]))
    return out


def pll_rows(lm: LoadedModel, context: str, continuation: str | None) -> list[tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """PLL-word-l2r's rows of one text (Kauf and Ivanova 2023): for each scored token, the input
    ``[CLS] + tokens(text) + [SEP]`` with that token and the later tokens of its word masked, scored at that token.
    A word is what the tokenizer's ``word_ids`` say; special tokens are not scored. With a ``continuation``, the text
    is ``context + " " + continuation`` and only the continuation's tokens are scored."""
    tok = lm.tokenizer
    if tok.mask_token_id is None:
        raise NotScorable(f"{lm.label}: the tokenizer has no mask token, so no pseudo-log-likelihood")
    text = context if continuation is None else f"{context} {continuation}"
    start = 0 if continuation is None else len(context) + 1
    enc = tok(text, return_offsets_mapping=True)
    ids = np.asarray(enc["input_ids"], dtype=np.int64)
    words = enc.word_ids()
    offsets = enc["offset_mapping"]
    rows = []
    for t, word in enumerate(words):
        if word is None or offsets[t][0] < start:   # a special token, or one of the prefix
            continue
        masked = ids.copy()
        masked[t] = tok.mask_token_id
        for later in range(t + 1, len(ids)):
            if words[later] == word:
                masked[later] = tok.mask_token_id
        rows.append((masked, np.array([t]), ids[t:t + 1].copy()))
    if not rows:
        raise ValueError(f"{text!r}: no token to score")
    return rows


def encode(lm: LoadedModel, pairs: Sequence[dict], method: str = "full", *, head: nn.Module | None = None) -> Rows:
    """The :class:`Rows` that score ``pairs`` by ``method``: texts ``0..N-1`` the good sentences, ``N..2N-1`` the bad.
    An encoder needs its own masked-LM head (``head``, else loaded: :func:`own_head`); without one it raises
    :class:`NotScorable`."""
    texts = pair_texts(pairs, method)
    if not lm.causal:
        head = head if head is not None else own_head(lm)
        reason = not_scorable_reason(lm, head)
        if reason:
            raise NotScorable(reason)
    ids, positions, targets, text = [], [], [], []
    rows_of = _decoder_rows(lm, texts) if lm.causal else None
    for n, (context, continuation) in enumerate(texts):
        made = [rows_of[n]] if lm.causal else pll_rows(lm, context, continuation)
        for row in made:
            if len(row[0]) > lm.max_positions:
                raise ValueError(f"{context!r}: {len(row[0])} tokens, more than the model's {lm.max_positions}")
            ids.append(row[0])
            positions.append(row[1])
            targets.append(row[2])
            text.append(n)
    return Rows(ids, positions, targets, np.asarray(text, dtype=np.int64), len(texts), scorer_kind(lm),
                None if lm.causal else head)


def margin_rows(rows: Rows) -> Rows:
    """A decoder's :class:`Rows` (one row a text, pair ``k``'s good text ``k`` and bad text ``k + N``) with only the
    tokens from the first where the pair's two inputs differ scored. Under a causal mask a token's log-probability
    depends on it and the tokens before it, so the tokens of the two sentences' common start have the same
    log-probability in both and cancel in the margin: each pair's margin (and so whether it is right) is that of the
    whole sentences, for less of the vocabulary-sized projection. The scores are then no sentence's log-probability
    (:func:`score_pairs` gives those). An encoder's rows (pseudo-log-likelihood: every token sees the whole sentence)
    are returned unchanged."""
    n = rows.n_texts // 2
    if rows.head is not None or len(rows) != rows.n_texts or not np.array_equal(rows.text, np.arange(rows.n_texts)):
        return rows
    positions, targets = list(rows.positions), list(rows.targets)
    for k in range(n):
        good, bad = rows.ids[k], rows.ids[k + n]
        width = min(len(good), len(bad))
        differ = np.flatnonzero(good[:width] != bad[:width])
        common = int(differ[0]) if differ.size else width           # tokens before it are the same in both
        for r in (k, k + n):
            keep = rows.positions[r] + 1 >= common                   # position p scores token p + 1
            positions[r], targets[r] = rows.positions[r][keep], rows.targets[r][keep]
    return Rows(rows.ids, positions, targets, rows.text, rows.n_texts, rows.kind, rows.head)


# ------------------------------------------------------------------------------------------------ passes


def budget_for(lm: LoadedModel, budget: int) -> int:
    """``budget`` on the CPU; :data:`ACCELERATOR_SCALE` times it on an accelerator."""
    return budget if lm.device.type == "cpu" else budget * ACCELERATOR_SCALE


def passes(lm: LoadedModel, rows: Rows, starts: Sequence[int] = (), *, budget: int = ROW_BUDGET) -> list[list[int]]:
    """The passes over ``rows``: lists of row indices in length order, each as many rows as fit ``budget`` tokens at
    its widest layer (its rows padded to its longest, times one plus the copies, ``starts`` being each copy's first
    layer: by the last layer all have joined), at least one."""
    copies = 1 + len(starts)
    order = sorted(range(len(rows)), key=lambda r: (len(rows.ids[r]), r))
    out: list[list[int]] = []
    for r in order:  # lengths only grow: a row fits while the pass, padded to this row's length, stays in budget
        fits = max(1, budget // (len(rows.ids[r]) * copies))
        if out and len(out[-1]) < fits:
            out[-1].append(r)
        else:
            out.append([r])
    return out


def _inputs(lm: LoadedModel, rows: Rows, chosen: Sequence[int]) -> dict[str, torch.Tensor]:
    pad = lm.tokenizer.pad_token_id if lm.tokenizer.pad_token_id is not None else 0
    width = max(len(rows.ids[r]) for r in chosen)
    ids = torch.full((len(chosen), width), pad, dtype=torch.long)
    mask = torch.zeros((len(chosen), width), dtype=torch.long)
    for b, r in enumerate(chosen):
        ids[b, : len(rows.ids[r])] = torch.from_numpy(rows.ids[r])
        mask[b, : len(rows.ids[r])] = 1
    out = {"input_ids": ids.to(lm.device), "attention_mask": mask.to(lm.device)}
    if "token_type_ids" in getattr(lm.tokenizer, "model_input_names", ()):
        out["token_type_ids"] = torch.zeros_like(out["input_ids"])
    if lm.causal:
        out["use_cache"] = False
    return out


def _projector(lm: LoadedModel, head: nn.Module | None):
    if lm.causal:
        out = lm.language_model.get_output_embeddings()
        return lambda h: nn.functional.linear(h, out.weight.to(h.dtype), None if out.bias is None else out.bias.to(h.dtype))
    head = head.to(lm.device)
    dtype = next(head.parameters()).dtype
    return lambda h: head(h.to(dtype)).to(h.dtype)


def _row_scores(lm: LoadedModel, rows: Rows, chosen: Sequence[int], hidden: torch.Tensor, blocks: Sequence[int]
                ) -> torch.Tensor:
    """``[len(blocks), len(chosen)]``: each row's summed log-probability of its targets in each block of ``hidden``
    (``[block x rows, token, hidden]``, block ``b`` at rows ``b * len(chosen) ...``), float64."""
    n = len(chosen)
    row_of = torch.cat([torch.full((len(rows.positions[r]),), b, dtype=torch.long) for b, r in enumerate(chosen)])
    pos = torch.from_numpy(np.concatenate([rows.positions[r] for r in chosen])).long()
    tgt = torch.from_numpy(np.concatenate([rows.targets[r] for r in chosen])).long().to(hidden.device)
    project = _projector(lm, rows.head)
    out = []
    if not len(tgt):  # nothing scored in these rows (a pair of equal sentences, cut to what differs)
        return torch.zeros(len(blocks), n, dtype=torch.float64, device=hidden.device)
    for b in blocks:
        states = hidden[(row_of + b * n).to(hidden.device), pos.to(hidden.device)]          # [scored, hidden]
        logp = torch.cat([torch.log_softmax(project(states[i:i + LOGIT_ROWS]), -1)
                          .gather(-1, tgt[i:i + LOGIT_ROWS, None])[:, 0] for i in range(0, len(tgt), LOGIT_ROWS)])
        out.append(torch.zeros(n, dtype=torch.float64, device=hidden.device).index_add(
            0, row_of.to(hidden.device), logp.double()))
    return torch.stack(out)


def first_layers(masks: torch.Tensor) -> list[int]:
    """Each mask's first layer other than all ones (``[K, layer, head]`` -> ``[K]``; the number of layers for an
    all-ones mask)."""
    return [first_layer(m[None], None) for m in masks]


def text_scores(lm: LoadedModel, rows: Rows, masks: torch.Tensor | None = None, *, fill: torch.Tensor | None = None,
                budget: int = ROW_BUDGET, capture=None) -> np.ndarray:
    """``[K, text]``: each text's score (summed log-probability, nats, float64) under each of the ``K`` head masks
    ``masks`` ``[K, layer, head]`` (``None``: one all-ones mask). ``fill`` ``[layer, head, d]``: a removed head's context
    becomes this instead of 0 (mean ablation). ``capture``: a :class:`ContextSums` that adds up the contexts of the
    rows it marks in the all-ones pass (every pass runs the rows unmasked first: the trunk).

    The masks' copies of each pass's rows join at their first layer (:func:`~helpers.core.head_mask.staggered`); a mask
    of all ones is the trunk itself."""
    L, H = lm.n_layers, lm.n_heads
    masks = torch.ones(1, L, H) if masks is None else masks.detach().float().cpu()
    if masks.dim() != 3 or tuple(masks.shape[1:]) != (L, H):
        raise ValueError(f"masks: expected [K, {L}, {H}], got {list(masks.shape)}")
    starts = first_layers(masks)
    copies = sorted((k for k in range(len(masks)) if starts[k] < L), key=lambda k: (starts[k], k))
    block_of = {k: 1 + i for i, k in enumerate(copies)}
    for k in range(len(masks)):
        block_of.setdefault(k, 0)
    out = np.zeros((len(masks), rows.n_texts))
    if fill is not None:
        fill = fill.to(lm.device)
    with torch.inference_mode(), torch_threads(THREADS):
        for chosen in passes(lm, rows, [starts[k] for k in copies], budget=budget_for(lm, budget)):
            n = len(chosen)
            xi = torch.cat([torch.ones(1, L, H), masks[copies]]).repeat_interleave(n, dim=0).to(lm.device)
            with staggered(lm.model, n, [starts[k] for k in copies]), \
                    head_mask(lm.model, xi, min([starts[k] for k in copies], default=L), fill=fill), \
                    (capture.collect(lm, rows, chosen) if capture is not None else _nothing()):
                hidden = at_least_float32(lm.model(**_inputs(lm, rows, chosen)).last_hidden_state)
            blocks = sorted(set(block_of.values()))
            scores = _row_scores(lm, rows, chosen, hidden, blocks).cpu().numpy()     # [block, row]
            texts = rows.text[chosen]
            for k in range(len(masks)):
                np.add.at(out[k], texts, scores[blocks.index(block_of[k])])
    return out


class _nothing:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


class ContextSums:
    """The sums of chosen heads' contexts over the positions of marked rows (their non-padding tokens), and how many
    positions: what mean ablation replaces a head's context with, once divided (:meth:`means`). ``heads``: 0-based
    ``(layer, head)``; ``marked``: per text, whether its rows count."""

    def __init__(self, lm: LoadedModel, heads: Sequence[tuple[int, int]], marked: np.ndarray):
        self.heads = [(int(l), int(h)) for l, h in heads]
        self.marked = np.asarray(marked, dtype=bool)
        self.n_heads = lm.n_heads
        self.sums: dict[tuple[int, int], torch.Tensor] = {}
        self.count = 0

    def collect(self, lm: LoadedModel, rows: Rows, chosen: Sequence[int]):
        """A context manager: hooks on the output projections of the heads' layers that add the trunk rows' contexts
        (the first ``len(chosen)`` rows) at their non-padding positions, for the marked texts' rows."""
        from contextlib import contextmanager

        keep = torch.zeros(len(chosen), max(len(rows.ids[r]) for r in chosen), dtype=torch.bool)
        for b, r in enumerate(chosen):
            if self.marked[rows.text[r]]:
                keep[b, : len(rows.ids[r])] = True
        layers = sorted({l for l, _ in self.heads})

        @contextmanager
        def hooks():
            handles = []

            def hook_for(layer: int):
                def hook(_module, args):
                    z = args[0][: len(chosen)]
                    shaped = z.reshape(*z.shape[:-1], self.n_heads, -1)                       # [row, token, head, d]
                    picked = shaped[keep.to(z.device)].double()                               # [position, head, d]
                    for l, h in self.heads:
                        if l == layer:
                            total = picked[:, h].sum(0).cpu()
                            self.sums[(l, h)] = self.sums[(l, h)] + total if (l, h) in self.sums else total
                return hook

            try:
                for layer in layers:
                    handles.append(parts_of(lm.model, layer).output.register_forward_pre_hook(hook_for(layer)))
                yield
            finally:
                for handle in handles:
                    handle.remove()
            self.count += int(keep.sum())

        return hooks()

    def means(self, n_layers: int, n_heads: int, d: int) -> torch.Tensor:
        """``[layer, head, d]``: each chosen head's mean context (0 for the others), float32."""
        out = torch.zeros(n_layers, n_heads, d)
        for (l, h), total in self.sums.items():
            out[l, h] = (total / max(self.count, 1)).float()
        return out


def head_dim(lm: LoadedModel) -> int:
    """The size of one head's context (``hidden / heads``, or the config's ``head_dim``)."""
    config = lm.model.config
    return int(getattr(config, "head_dim", None) or config.hidden_size // config.num_attention_heads)


def margin_gradients(lm: LoadedModel, rows: Rows, *, budget: int = GRAD_BUDGET) -> tuple[np.ndarray, np.ndarray]:
    """``(d margin / d xi [pair, layer, head], scores [text])`` at ``xi = 1``, float64: the first-order change of each
    pair's margin (good minus bad) in each head's mask, from one backward pass a batch (each row its own leaf ``xi``;
    a pair's gradient is its good rows' minus its bad rows')."""
    L, H = lm.n_layers, lm.n_heads
    N = rows.n_texts // 2
    grads = np.zeros((rows.n_texts, L, H))
    scores = np.zeros(rows.n_texts)
    dtype = at_least_float32(torch.ones(0, dtype=next(lm.model.parameters()).dtype)).dtype  # the gradient's precision
    with torch_threads(THREADS):
        for chosen in passes(lm, rows, budget=budget_for(lm, budget)):
            leaf = torch.ones(len(chosen), L, H, device=lm.device, dtype=dtype, requires_grad=True)
            with torch.enable_grad(), head_mask(lm.model, leaf):
                hidden = at_least_float32(lm.model(**_inputs(lm, rows, chosen)).last_hidden_state)
                row = _row_scores(lm, rows, chosen, hidden, [0])[0]
                (g,) = torch.autograd.grad(row.sum(), leaf)
            texts = rows.text[chosen]
            np.add.at(grads, texts, g.double().cpu().numpy())
            np.add.at(scores, texts, row.detach().cpu().numpy())
    return grads[:N] - grads[N:], scores


# ------------------------------------------------------------------------------------------------ the contract


def removal_mask(n_layers: int, n_heads: int, remove: Sequence[tuple[int, int]] = (), *,
                 name: str = "remove") -> torch.Tensor:
    """``[layer, head]``: 0 at each 0-based ``(layer, head)`` of ``remove``, 1 elsewhere (checked: ``name`` in the
    error)."""
    xi = torch.ones(n_layers, n_heads)
    for item in remove:
        try:
            layer, head = (int(x) for x in item)
        except (TypeError, ValueError):
            raise ValueError(f"{name}: {item!r} is not a (layer, head) pair of 0-based integers") from None
        if not (0 <= layer < n_layers and 0 <= head < n_heads):
            raise ValueError(f"{name}: ({layer}, {head}) is outside the model's layers 0..{n_layers - 1} and heads "
                             f"0..{n_heads - 1} (0-based)")
        xi[layer, head] = 0.0
    return xi


def score_pairs(lm: LoadedModel, pairs: Sequence[dict], remove: Sequence[tuple[int, int]] = (), method: Method = "full",
                *, head: nn.Module | None = None) -> dict[str, np.ndarray]:
    """``{"good": [N], "bad": [N]}``: the log-probability (nats, float64) of each pair's good and bad sentence by
    ``method`` (``"full"`` or ``"prefix"``, see the module's docstring), with the heads ``remove`` (0-based ``(layer,
    head)``) removed: their contexts times 0, the output bias kept. ``pairs``: BLiMP rows (dicts as in the files).
    An encoder scores by PLL-word-l2r with its own masked-LM head (``head``: passed when already loaded); an encoder
    without one raises :class:`NotScorable` with the reason.

    >>> s = score_pairs(lm, [{"sentence_good": "The cat sleeps.", "sentence_bad": "The cat sleep."}])  # doctest: +SKIP
    >>> bool(s["good"][0] > s["bad"][0])                                                             # doctest: +SKIP
    True
    """
    rows = encode(lm, pairs, method, head=head)
    xi = removal_mask(lm.n_layers, lm.n_heads, remove)
    scores = text_scores(lm, rows, xi[None])[0]
    n = len(pairs)
    return {"good": scores[:n], "bad": scores[n:]}
