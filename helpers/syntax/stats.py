"""Single heads as dependency parsers (paper §4.2, Table 1), scored with array operations.

> For a given attention head and word, we take whichever other word receives the most attention
> weight as that model's prediction. — Clark et al. (2019), §4.1

Rules (the CLI contract of ``python -m helpers heads``; in words: book/methods.md, §A head as a dependency parser):

- word-level maps ``[layer, head, word, word]`` with [CLS] first and [SEP] last; [CLS] and [SEP]
  are never candidates and a word never predicts itself;
- two directions per head: ``dependent-to-head`` (the word the dependent attends to most is its
  predicted head) and ``head-to-dependent`` (the transposed map: the word that attends most *to* a
  dependent is its predicted head);
- under a causal mask (a decoder's maps, ``causal``: a head sees its prefix) a word's candidates are the other
  words it can see: in ``dependent-to-head`` the words before it, in ``head-to-dependent`` the words after it
  (those that see it); a word with no candidate (the first word, the last word) predicts nothing (0) and counts
  as a miss, in the same denominator as for an encoder;
- a decoder's maps have no [SEP] (``BOS w_1 ... w_n``, or ``w_1 ... w_n`` without BOS): :func:`word_layout`
  reads the special positions from the map's size;
- ties go to the earliest word; words whose gold head is the root are not counted; ``all`` counts
  every other word (punctuation included); accuracy is in percent;
- the baseline is the best fixed relative offset for the relation, ``offset`` in
  :data:`OFFSETS` (a word at position p predicts p + offset; outside the sentence is wrong).

Ties between heads of equal accuracy go to the lowest layer, then head, then
``dependent-to-head``; between offsets, to the first in :data:`OFFSETS` (smallest distance,
previous before next).

Every head's prediction is one masked ``argmax`` per padded batch of word-level maps, on the maps' device
(:func:`predict_heads`), and only the predicted words come back to the host. :class:`HeadScorer` is the accumulator
the one route (:func:`helpers.pipeline.route.reduce_maps`) hands each batch, with each example's gold tree:

>>> scorer = reduce_maps(lm, batch, partial(HeadScorer, causal=lm.causal), level="word",      # doctest: +SKIP
...                      extras=lambda ex: (sentences[ex.index],))
>>> scorer.result().best("det")                                                               # doctest: +SKIP
"""
from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, Iterable, Iterator, NamedTuple, Sequence

import numpy as np

from helpers.core.batching import stat_chunks
from helpers.core.labels import head_label
from helpers.data.conllu_io import Sentence

DIRECTIONS: tuple[str, ...] = ("dependent-to-head", "head-to-dependent")
OFFSETS: tuple[int, ...] = (-1, 1, -2, 2, -3, 3)
ALL = "all"
POSSESSIVE_MARKERS = ("'s", "'", "’s", "’")


def word_layout(size: int, n_words: int, *, encoder: bool = False, what: str = "map") -> tuple[int, int]:
    """``(lead, trail)``: the special positions before and after the ``n_words`` words of a word-level map with
    ``size`` positions: ``(1, 1)`` for an encoder's ``[CLS] ... [SEP]``, ``(1, 0)`` for a decoder's ``BOS ...``,
    ``(0, 0)`` for a decoder's words alone (a map never has a trailing special position without a leading one).
    With ``encoder`` only the first is allowed. The one check of a map's size against its words (``what`` names
    the map in the error: a sentence id)."""
    extra = size - n_words
    if extra not in ((2,) if encoder else (0, 1, 2)):
        raise ValueError(f"{what}: map has {size} positions, expected {n_words} words + 2 ([CLS] ... [SEP])"
                         + ("" if encoder else ", + 1 (BOS ...) or + 0 (a decoder's)"))
    return min(extra, 1), max(extra - 1, 0)


def predict_heads(maps, sizes: Sequence[int], n_words: Sequence[int], *, causal: bool = False, device=None):
    """Predicted head (1-based word index; 0: none) of every word of a padded batch of word-level maps, for both
    directions: ``[batch, direction, layer, head, W]``, a torch ``long`` tensor on ``device`` (default the maps'),
    ``W`` the most words (entries past an example's words are meaningless).

    ``maps`` ``[batch, layer, head, P, P]`` (a torch tensor or an array, right-padded to ``P`` positions), ``sizes``
    each map's positions, ``n_words`` its words: an encoder's ``[CLS] w_1 ... w_n [SEP]``, or a decoder's (``n + 1``
    with BOS, ``n`` without: :func:`word_layout`). Candidates past an example's words (its [SEP], the padding) are
    masked out, and a word never predicts itself; ties go to the earliest word (torch's ``max`` takes the first
    maximum). With ``causal`` a word's candidates are the words it sees (``dependent-to-head``: those before it) or
    that see it (``head-to-dependent``: those after it); a word without any predicts 0, which no gold head is.
    A sentence's map alone is a batch of one: ``predict_heads(attn[None], [attn.shape[-1]], [n])[0]``."""
    import torch

    A = torch.as_tensor(maps, device=device)
    leads = {word_layout(int(size), int(n))[0] for size, n in zip(sizes, n_words)}
    if len(leads) > 1:
        raise ValueError("one batch of word-level maps with and without a leading special position")
    lead, W = leads.pop(), int(max(n_words))
    words = A[..., lead : lead + W, lead : lead + W].to(torch.float32)  # [batch, layer, head, word, candidate]
    # a word's barred candidates, their weights set to -inf: itself, those past the example's words (its [SEP], the
    # padding, whatever it holds) and, causal, in dependent-to-head those after it (it does not see them), in
    # head-to-dependent (the transposed map) those before it (they do not see it)
    position = torch.arange(W, device=A.device)
    real = position[None, :] < torch.as_tensor(list(n_words), device=A.device)[:, None]  # [batch, candidate]
    barred = ~real[:, None, :] | torch.eye(W, dtype=torch.bool, device=A.device)[None]  # [batch, word, candidate]
    later = torch.ones(W, W, dtype=torch.bool, device=A.device).triu(1) if causal else None  # candidate after word
    found = []
    for direction, oriented in enumerate((words, words.transpose(-1, -2))):
        bar = barred if later is None else barred | (later if direction == 0 else later.T)
        masked = torch.where(bar[:, None, None], float("-inf"), oriented)  # contiguous: each row a word's candidates
        best, pred = masked.max(dim=-1)  # the first maximum: the earliest word of ties
        found.append(pred.masked_fill_(torch.isneginf(best), -1) if causal else pred)  # -1: no candidate, predicts 0
    return torch.stack(found, dim=1) + 1  # [batch, direction, layer, head, word]


def batch_predictions(batch, sentences: Sequence[Sentence], *, causal: bool = False,
                      maps: str = "weights") -> Iterator[tuple[int, Sentence, np.ndarray]]:
    """``(example index, sentence, predictions [direction, layer, head, word])`` of each example of ``batch`` (a
    :class:`~helpers.core.extract.MapBatch` of word-level maps, ``maps`` its ``weights`` or ``norms``), predicted
    where the maps are (:func:`predict_heads`) in parts cut by bytes (the argmax's working arrays: the map and its
    transpose, masked, 6 float32 copies), each map's size checked against its sentence (:func:`word_layout`)."""
    weights, sizes = getattr(batch, maps), batch.lengths.tolist()
    for size, sentence in zip(sizes, sentences):
        word_layout(size, len(sentence), encoder=not causal, what=sentence.sent_id)
    for part in stat_chunks(len(sentences), 6 * 4 * weights[0].numel(), weights.device):
        group = sentences[part]
        preds = predict_heads(weights[part], sizes[part], [len(s) for s in group], causal=causal).cpu().numpy()
        for b, (example, sentence) in enumerate(zip(batch.examples[part], group)):
            yield example.index, sentence, preds[b, ..., : len(sentence)]


def offset_predictions(n_words: int) -> np.ndarray:
    """``[offset, word]`` 1-based predictions of :data:`OFFSETS` (0 where outside the sentence)."""
    positions = np.arange(1, n_words + 1)
    preds = positions[None, :] + np.array(OFFSETS)[:, None]
    return np.where((preds >= 1) & (preds <= n_words), preds, 0)


def possessive_targets(sentence: Sentence, relation: str = "nmod:poss") -> list[tuple[int, int]]:
    """``(word, proxy)`` 0-based pairs for the paper's possessive convention.

    > head 7-6 marks 's as the dependent for the poss relation [...] (the accuracy in Table 1 counts
    > 's as correct). — §4.2

    For a ``relation`` word followed by "'s" (or "'"), the prediction *for the 's token* is judged
    against the possessor's gold head.
    """
    pairs = []
    for i, rel in enumerate(sentence.deprels):
        if rel == relation and i + 1 < len(sentence) and sentence.words[i + 1].lower() in POSSESSIVE_MARKERS:
            pairs.append((i, i + 1))
    return pairs


@dataclass
class HeadScores:
    """Word-level correctness of every head, direction and offset over a corpus.

    ``word_correct`` is ``[direction, layer, head, word]`` over the counted words (gold head not the
    root); ``word_relation`` indexes ``relations``; ``word_sentence`` is each word's sentence.
    """

    relations: list[str]
    word_relation: np.ndarray
    word_sentence: np.ndarray
    word_correct: np.ndarray
    offset_correct: np.ndarray  # [offset, word]
    n_sentences: int

    @cached_property
    def _onehot(self) -> np.ndarray:
        """``[word, relation]`` membership (every word is also in ``all``)."""
        onehot = np.zeros((len(self.word_relation), len(self.relations)), dtype=np.float32)
        onehot[np.arange(len(self.word_relation)), self.word_relation] = 1.0
        onehot[:, self.relations.index(ALL)] = 1.0
        return onehot

    @cached_property
    def counts(self) -> dict[str, int]:
        totals = self._onehot.sum(0)
        return {r: int(c) for r, c in zip(self.relations, totals)}

    def _percent(self, correct: np.ndarray) -> np.ndarray:
        """Percent correct per relation from ``[..., word]`` booleans (one matrix product)."""
        totals = np.maximum(self._onehot.sum(0), 1).astype(np.float64)
        return 100.0 * (correct.astype(np.float32) @ self._onehot).astype(np.float64) / totals

    @cached_property
    def _accuracy(self) -> np.ndarray:
        return self._percent(self.word_correct)

    def accuracy(self) -> np.ndarray:
        """``[direction, layer, head, relation]`` accuracy in percent (one matrix product)."""
        return self._accuracy

    @cached_property
    def _baseline(self) -> np.ndarray:
        return self._percent(self.offset_correct)

    def baseline_accuracy(self) -> np.ndarray:
        """``[offset, relation]`` accuracy in percent."""
        return self._baseline

    def best(self, relation: str, accuracy: np.ndarray | None = None) -> dict:
        """Best head and best offset baseline for ``relation`` (ties as in the module docstring)."""
        r = self.relations.index(relation)
        acc = self.accuracy() if accuracy is None else accuracy
        per = acc[..., r]  # [direction, layer, head]
        # order: layer, head, direction -> move direction last before argmax (first max wins)
        flat = np.moveaxis(per, 0, -1).ravel()
        layer, head, direction = np.unravel_index(int(np.argmax(flat)), np.moveaxis(per, 0, -1).shape)
        base = self.baseline_accuracy()[:, r]
        k = int(np.argmax(base))
        return {"count": self.counts[relation], "best_head": head_label(layer, head),
                "direction": DIRECTIONS[direction], "accuracy": round(float(per[direction, layer, head]), 4),
                "baseline_accuracy": round(float(base[k]), 4), "baseline_offset": int(OFFSETS[k]),
                "_index": (int(direction), int(layer), int(head))}

    def table(self) -> dict[str, dict]:
        """Every relation with at least one counted word: the ``relations`` object of the CLI JSON."""
        acc = self.accuracy()
        out = {}
        for relation, count in self.counts.items():
            if count:
                row = self.best(relation, acc)
                row.pop("_index")
                out[relation] = row
        return out

    def _mask(self, relation: str) -> np.ndarray:
        """``[word]``: the counted words of ``relation`` (every counted word for ``all``)."""
        return np.ones(len(self.word_relation), bool) if relation == ALL else (
            self.word_relation == self.relations.index(relation))

    def head_correct(self, relation: str, index: tuple[int, int, int]) -> tuple[np.ndarray, np.ndarray]:
        """Per-sentence ``(correct, total)`` of one ``(direction, layer, head)`` on ``relation``."""
        mask = self._mask(relation)
        d, l, h = index
        correct = np.bincount(self.word_sentence[mask], weights=self.word_correct[d, l, h, mask],
                              minlength=self.n_sentences)
        total = np.bincount(self.word_sentence[mask], minlength=self.n_sentences)
        return correct, total

    def offset_correct_by_sentence(self, relation: str, offset: int) -> tuple[np.ndarray, np.ndarray]:
        """Per-sentence ``(correct, total)`` of the fixed-offset baseline ``offset`` (one of :data:`OFFSETS`) on
        ``relation``: the same words as :meth:`head_correct`, so that a head and the baseline pair sentence by
        sentence."""
        mask = self._mask(relation)
        k = OFFSETS.index(offset)
        correct = np.bincount(self.word_sentence[mask], weights=self.offset_correct[k, mask],
                              minlength=self.n_sentences)
        total = np.bincount(self.word_sentence[mask], minlength=self.n_sentences)
        return correct, total

    def every_head_correct(self, relation: str) -> tuple[np.ndarray, np.ndarray]:
        """``(correct [sentence, candidate], total [sentence])``: per sentence, the words of ``relation`` each
        head-direction gets right, the candidates in :meth:`best`'s order (``(layer * n_heads + head) * 2 +
        direction``: its first maximum is :meth:`best`'s head), float32."""
        from scipy.sparse import csr_matrix

        mask = self._mask(relation)
        sentences = self.word_sentence[mask]
        per_word = np.moveaxis(self.word_correct[..., mask], 0, -2)  # [layer, head, direction, word]
        per_word = per_word.reshape(-1, int(mask.sum())).T.astype(np.float32)  # [word, candidate]
        member = csr_matrix((np.ones(len(sentences), np.float32), (sentences, np.arange(len(sentences)))),
                            shape=(self.n_sentences, len(sentences)))
        return np.asarray(member @ per_word), np.bincount(sentences, minlength=self.n_sentences)


@dataclass
class HeadScorer:
    """Every head's predictions (:func:`predict_heads`) scored against gold trees: the accumulator of
    :func:`helpers.pipeline.route.reduce_maps` (``update`` a padded batch of word-level maps with one
    ``(sentence,)`` per example, ``merge``, ``result``: :class:`helpers.reduce.Accumulator`).

    The sentences one scorer saw are kept in example-index order, whatever the order of its batches (a shard's
    passes come by length), and relations are numbered by first appearance in that order; partials merged in shard
    order (:meth:`merge`) are the shards read one after the other. ``maps``: the batches' maps scored, ``"weights"``
    or ``"norms"``; ``causal``: a decoder's maps (:func:`predict_heads`). With ``possessive`` set, words of that
    relation followed by "'s" are judged by the prediction for the "'s" token (the paper's convention, a labelled
    variant).
    """

    possessive: str | None = None
    causal: bool = False
    maps: str = "weights"
    relations: list[str] = field(default_factory=lambda: [ALL])
    n_sentences: int = 0
    _pending: dict = field(default_factory=dict)  # example index -> its scores, until they are put in order
    _rel: list[np.ndarray] = field(default_factory=list)
    _sent: list[np.ndarray] = field(default_factory=list)
    _correct: list[np.ndarray] = field(default_factory=list)
    _offset: list[np.ndarray] = field(default_factory=list)
    _index_of: dict = field(default_factory=lambda: {ALL: 0})

    def update(self, batch, extras: Sequence[tuple]) -> None:
        """Score a :class:`~helpers.core.extract.MapBatch` of word-level maps; ``extras[b]`` is ``(sentence,)`` of
        its ``b``-th example. Only the predicted heads come back to the host."""
        sentences = [extra[0] for extra in extras]
        for index, sentence, preds in batch_predictions(batch, sentences, causal=self.causal, maps=self.maps):
            self.add_predictions(preds, sentence, index)

    def add_predictions(self, preds: np.ndarray, sentence: Sentence, index: int) -> None:
        """Score one sentence's predictions ``[direction, layer, head, word]`` (left unchanged) against its tree;
        ``index`` identifies the sentence (bootstraps resample by it) and orders it."""
        n = len(sentence)
        gold = np.asarray(sentence.heads)
        offsets = offset_predictions(n)
        if self.possessive:
            preds = preds.copy()
            for word, proxy in possessive_targets(sentence, self.possessive):
                preds[..., word] = preds[..., proxy]
                offsets[:, word] = offsets[:, proxy]
        counted = gold != 0
        self._pending[index] = (sentence.deprels, counted, (preds == gold)[..., counted], (offsets == gold)[:, counted])

    def _in_order(self) -> None:
        """Move the pending sentences, in index order, to the scores, numbering new relations as they appear."""
        index_of = self._index_of
        for index in sorted(self._pending):
            deprels, counted, correct, offset = self._pending.pop(index)
            for rel in deprels:
                if rel not in index_of:
                    index_of[rel] = len(self.relations)
                    self.relations.append(rel)
            self._rel.append(np.array([index_of[r] for r in deprels])[counted])
            self._sent.append(np.full(int(counted.sum()), index))
            self._correct.append(correct)
            self._offset.append(offset)
            self.n_sentences = max(self.n_sentences, index + 1)

    def merge(self, other: "HeadScorer") -> "HeadScorer":
        """Append ``other``'s sentences (e.g. a later shard's partial) to this scorer, in place; returns it.

        Relations are numbered by first appearance, as one scorer fed both in this order would number
        them, so merging the shards' partials in shard order gives exactly the one-pass scores."""
        if other.possessive != self.possessive:
            raise ValueError(f"cannot merge scores with possessive={other.possessive!r} into possessive={self.possessive!r}")
        if other.causal != self.causal:
            raise ValueError("cannot merge the scores of causal and bidirectional maps")
        self._in_order()
        other._in_order()
        for rel in other.relations:
            if rel not in self._index_of:
                self._index_of[rel] = len(self.relations)
                self.relations.append(rel)
        mapping = np.array([self._index_of[rel] for rel in other.relations])
        self._rel.extend(mapping[r] for r in other._rel)
        self._sent.extend(other._sent)
        self._correct.extend(other._correct)
        self._offset.extend(other._offset)
        self.n_sentences = max(self.n_sentences, other.n_sentences)
        return self

    def result(self) -> HeadScores:
        self._in_order()
        if not self._rel:
            raise ValueError("no sentences were scored")
        return HeadScores(list(self.relations), np.concatenate(self._rel), np.concatenate(self._sent),
                          np.concatenate(self._correct, axis=-1), np.concatenate(self._offset, axis=-1), self.n_sentences)


@dataclass
class HeadScorers:
    """One :class:`HeadScorer` per possessive convention of ``conventions`` (``None``: none), all fed the same
    predictions (one ``argmax`` per batch for all of them): an accumulator whose ``result()`` is their
    :class:`HeadScores`, in the order of ``conventions``."""

    conventions: tuple[str | None, ...] = (None,)
    causal: bool = False
    maps: str = "weights"
    scorers: list[HeadScorer] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.scorers = self.scorers or [HeadScorer(c, self.causal, self.maps) for c in self.conventions]

    def update(self, batch, extras: Sequence[tuple]) -> None:
        for index, sentence, preds in batch_predictions(batch, [extra[0] for extra in extras], causal=self.causal,
                                                        maps=self.maps):
            for scorer in self.scorers:
                scorer.add_predictions(preds, sentence, index)

    def merge(self, other: "HeadScorers") -> "HeadScorers":
        for mine, theirs in zip(self.scorers, other.scorers, strict=True):
            mine.merge(theirs)
        return self

    def result(self) -> list[HeadScores]:
        return [scorer.result() for scorer in self.scorers]


class Indexed(NamedTuple):
    """A map's example when only its index is known (:func:`map_batches` of ``(index, map)`` pairs)."""

    index: int


def score_heads(items: Iterable[tuple[Any, np.ndarray]], sentences: Sequence[Sentence], *,
                possessive: str | None = None, causal: bool = False, device=None) -> HeadScores:
    """Every head scored against ``sentences`` (indexed by example index) on word-level maps in memory:
    ``items`` are ``(example or its index, attn [layer, head, n, n])`` (a store, or ``maps.items()`` of a dict by
    index), scored in padded batches (:func:`map_batches`) on ``device`` (default the CPU) by one
    :class:`HeadScorer` (``causal``: a decoder's maps; ``possessive``: its convention), the sentences in index
    order."""
    scorer = HeadScorer(possessive=possessive, causal=causal)
    for batch in map_batches(items, device=device):
        scorer.update(batch, [(sentences[ex.index],) for ex in batch.examples])
    return scorer.result()


# Bytes of one padded batch of word-level maps that :func:`map_batches` stacks (float32): the default model's 32
# sentences of 40 words take 6 x 12 x 42 x 42 x 4 x 32 = 16 MiB; a 16 x 32-head model's fewer.
HEADS_BATCH_BYTES = 32 * 2**20
HEADS_BATCH_MAPS = 32  # maps of one batch at most, as a forward pass's: in length order, little padding


def map_batches(items, *, device=None, budget: int = HEADS_BATCH_BYTES, size: int = HEADS_BATCH_MAPS):
    """:class:`~helpers.core.extract.MapBatch` es of the ``(example, attn [layer, head, n, n])`` of ``items`` (a store;
    an example may be given by its index alone, :class:`Indexed`): right-padded ``weights`` ``[batch, layer, head, P,
    P]`` (float32) of at most ``size`` maps and ``budget`` bytes (at least one map each) on ``device`` (default the
    CPU), ``lengths`` each map's size ``n``. Each window of ``8 * size`` consecutive maps is batched by size (little
    padding), so the batches do not keep the maps' order."""
    import torch

    from helpers.core.extract import MapBatch

    def stacked(group):
        P = max(a.shape[-1] for _, a in group)
        L, H = group[0][1].shape[:2]
        out = torch.zeros(len(group), L, H, P, P, dtype=torch.float32)
        for b, (_, a) in enumerate(group):
            n = a.shape[-1]
            out[b, :, :, :n, :n] = torch.as_tensor(np.asarray(a, dtype=np.float32))
        return MapBatch([ex if hasattr(ex, "index") else Indexed(int(ex)) for ex, _ in group],
                        out if device is None else out.to(device), lengths=[a.shape[-1] for _, a in group])

    def batches(window):
        group: list = []
        for example, attn in sorted(window, key=lambda pair: pair[1].shape[-1]):
            P = attn.shape[-1]  # the largest so far
            if group and (len(group) == size or (len(group) + 1) * attn.shape[0] * attn.shape[1] * P * P * 4 > budget):
                yield stacked(group)
                group = []
            group.append((example, attn))
        if group:
            yield stacked(group)

    window: list = []
    for pair in items:
        window.append(pair)
        if len(window) == 8 * size:
            yield from batches(window)
            window = []
    yield from batches(window)


BOOTSTRAP = 1000  # resamples of every bootstrap interval (§4.2's heads, §4.3's head)


def bootstrap_interval(correct: np.ndarray, total: np.ndarray, *, n_boot: int = BOOTSTRAP, seed: int = 0,
                       level: float = 0.95) -> tuple[float, float]:
    """Percentile bootstrap interval (percent) of ``sum(correct) / sum(total)``, resampling sentences."""
    keep = total > 0
    correct, total = correct[keep], total[keep]
    if total.sum() == 0:
        return (float("nan"), float("nan"))
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, len(total), size=(n_boot, len(total)))
    acc = 100.0 * correct[idx].sum(1) / np.maximum(total[idx].sum(1), 1)
    lo, hi = np.percentile(acc, [100 * (1 - level) / 2, 100 * (1 + level) / 2])
    return float(lo), float(hi)


def gain_replicates(correct: np.ndarray, baseline: np.ndarray, total: np.ndarray, c: np.ndarray) -> np.ndarray:
    """``[n_boot, ...]``: a head's accuracy minus its baseline's (percentage points), ``100 (sum(correct) -
    sum(baseline)) / sum(total)`` over the units of each replicate of ``c`` (:func:`helpers.core.bootstrap.counts`
    over the units: sentences, documents), both sides on the same units (a paired comparison); ``correct``,
    ``baseline`` and ``total`` are ``[unit, ...]``. NaN where a replicate has no word."""
    from helpers.core.bootstrap import ratio_replicates

    diff = np.asarray(correct, dtype=np.float64) - np.asarray(baseline, dtype=np.float64)
    return 100.0 * ratio_replicates(diff, np.asarray(total, dtype=np.float64), c)


def gain_interval(correct: np.ndarray, baseline: np.ndarray, total: np.ndarray, *, n_boot: int = BOOTSTRAP,
                  seed: int = 0, level: float = 0.95) -> tuple[float, float]:
    """Percentile bootstrap interval (percentage points) of ``100 (sum(correct) - sum(baseline)) / sum(total)``:
    a head against its baseline on the same words, the units (sentences; §4.3: documents) resampled once for both
    sides. The units are those with a word (``total > 0``), drawn as :func:`bootstrap_interval` draws them, so the
    gain's replicates pair with the head's own interval replicate by replicate. ``(nan, nan)`` without a word.

    >>> gain_interval(np.array([3, 2]), np.array([3, 2]), np.array([4, 4]))   # the same words right: no gain
    (0.0, 0.0)
    """
    from helpers.core.bootstrap import counts, percentile_interval

    keep = np.asarray(total) > 0
    if not keep.any():
        return (float("nan"), float("nan"))
    c = counts(int(keep.sum()), n_boot=n_boot, seed=seed)
    return percentile_interval(gain_replicates(np.asarray(correct)[keep], np.asarray(baseline)[keep],
                                               np.asarray(total)[keep], c), level=level)
