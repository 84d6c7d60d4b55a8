"""Coreference data and antecedent selection (paper §4.3, Table 2).

> We compute antecedent selection accuracy: what percent of the time does the head word of a
> coreferent mention most attend to the head of one of that mention's antecedents. — §4.3

Data: OntoGUM (GUM's coreference in the OntoNotes scheme: no singletons, no predicative mentions),
aligned token by token with the GUM dependency files of the same document. A mention's **head
word** is the word of its span whose syntactic head lies outside the span (the leftmost such word
if there are several). Its **type** comes from the head's part of speech: pronoun (UPOS PRON),
proper name (PROPN), else nominal. Number and gender come from the head word's UD features; person
only from a pronoun's (UD English marks Person on pronouns alone; Stanford's sieve system, which the
paper follows, also sets person only for pronouns), so a noun's person is unknown.

Definitions the paper leaves open, fixed here (and in book/methods.md, §Antecedent selection):

- **Window.** A document is read as one sequence of whole words, ``[CLS] w_1 ... w_k [SEP]``, as
  many words as fit in 128 tokens (the paper: "we truncate documents to 128 tokens").
- **Evaluated mentions.** Every mention inside the window with at least one earlier mention of its
  chain (an antecedent) inside the window.
- **Candidates** (:data:`CANDIDATE_SETS`). ``"mentions"`` (default): the head words of every mention
  in the window whose head word comes before the current mention's head word. ``"words"``: every
  other word of the window, as §4.1's "whichever other word receives the most attention" reads
  literally. A head picks the candidate word its attention from the current head word weighs most
  (ties: earliest); it is correct if that word is the head word of an antecedent.
- **Baselines** use the mention candidates: the nearest; the nearest with the same head word (no
  such candidate counts as wrong); and four sieves (exact string match, head word match,
  number/gender/person agreement, where an unknown value agrees with anything; any mention), the
  nearest candidate of the first sieve that offers one. String and head-word matches compare
  lower-cased words.
- **Causal mask.** A decoder's window is ``BOS w_1 ... w_k`` (``w_1 ... w_k`` without BOS), no [SEP]; its head
  word sees its prefix, where every antecedent is, so the ``"mentions"`` candidates are unchanged; the
  ``"words"`` candidates are the words it sees, those before it.

Every head's choice is made for a whole batch of windows at once where their maps are
(:func:`head_predictions`: one gather and one ``argmax`` per batch of queries, on the model's device), and
only the ``[layer, head, query]`` booleans come back: :class:`AntecedentScorer`, the accumulator the one route
(:func:`helpers.pipeline.route.reduce_maps`) hands each batch of windows with their queries.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal, Sequence

import numpy as np

from helpers.data.ontogum import CorefDocument, Mention
from helpers.syntax.stats import word_layout

MENTION_TYPES: tuple[str, ...] = ("pronoun", "proper", "nominal")
CandidateSet = Literal["mentions", "words"]
CANDIDATE_SETS: tuple[str, ...] = ("mentions", "words")


# ------------------------------------------------------------------------------ evaluation


@dataclass(frozen=True)
class Query:
    """One evaluated mention in a window: its head word, candidates and correct candidates (window word indices)."""

    mention: Mention
    head: int
    candidates: tuple[int, ...]  # candidate head words, ascending
    correct: frozenset[int]
    window: int
    earlier: tuple[Mention, ...] = ()  # the candidate mentions, by head word


def window_words(word_tokens: Sequence[int], start: int, budget: int) -> int:
    """End (exclusive) of the longest run of whole words from ``start`` whose tokens fit in ``budget``."""
    total, end = 0, start
    while end < len(word_tokens) and total + word_tokens[end] <= budget:
        total += word_tokens[end]
        end += 1
    return max(end, start + 1)


def queries_in_window(doc: CorefDocument, start: int, end: int, window: int) -> list[Query]:
    """Evaluated mentions of the window ``[start, end)`` of word indices (indices made window-relative)."""
    inside = [m for m in doc.mentions if m.start >= start and m.end < end]
    out = []
    for m in inside:
        earlier = [c for c in inside if c.head < m.head]
        antecedents = [c for c in earlier if c.chain == m.chain]
        if not antecedents:
            continue
        out.append(Query(m, m.head - start, tuple(sorted({c.head - start for c in earlier})),
                         frozenset(c.head - start for c in antecedents), window, tuple(earlier)))
    return out


def agree(a: Mention, b: Mention) -> bool:
    """Number, gender and person agree; an unknown (``None``) value agrees with anything."""
    return all(x is None or y is None or x == y for x, y in
               ((a.number, b.number), (a.gender, b.gender), (a.person, b.person)))


def baseline_predictions(query: Query, start: int) -> dict[str, int | None]:
    """Predicted candidate word (window-relative) of each baseline for one query (``None``: no answer).

    ``start`` is the window's first word in the document."""
    m = query.mention
    earlier = list(query.earlier)  # sorted by head word
    nearest = lambda pool: (pool[-1].head - start) if pool else None  # noqa: E731
    same_head = [c for c in earlier if c.head_word == m.head_word]
    sieves = [[c for c in earlier if c.words == m.words], same_head, [c for c in earlier if agree(c, m)], earlier]
    rule = next((nearest(pool) for pool in sieves if pool), None)
    return {"nearest": nearest(earlier), "head match": nearest(same_head), "rule-based": rule}


def candidate_words(query: Query, n_words: int, candidates: CandidateSet = "mentions", *,
                    causal: bool = False) -> np.ndarray:
    """Window-relative candidate words of a query, ascending: earlier mentions' head words, or every other word
    (``causal``: every word before the head word, the words it sees)."""
    if candidates not in CANDIDATE_SETS:
        raise ValueError(f"candidates {candidates!r}: choose one of {', '.join(CANDIDATE_SETS)}")
    if candidates == "mentions":
        return np.asarray(query.candidates, dtype=np.int64)
    return np.array([w for w in range(query.head if causal else n_words) if w != query.head], dtype=np.int64)


def head_predictions(maps, sizes: Sequence[int], n_words: Sequence[int], queries: Sequence[Sequence[Query]],
                     candidates: CandidateSet = "mentions", *, causal: bool = False, device=None) -> list[np.ndarray]:
    """``[layer, head, query]`` correctness of every head on each window's ``queries``: does the most-attended
    candidate word (from the query's head word; ``candidates`` as in :func:`candidate_words`) belong to an
    antecedent? One padded batch of windows at once, on ``device`` (default the maps'): ``maps``
    ``[batch, layer, head, P, P]`` (word-level, right-padded; an encoder's ``[CLS]`` first, or a decoder's, ``BOS``
    and the words or the words alone: :func:`~helpers.syntax.stats.word_layout`), ``sizes`` ``[batch]`` each map's
    positions, ``n_words`` its words. Every query of the batch is one row of a gather: its head word's row, its
    candidates' columns (padded, masked to ``-inf``, so padding never wins), the first maximum taken (the earliest
    candidate), looked up in the query's correct candidates; a query without candidates (the first word, causal)
    is a miss. Returns one boolean array per window; only those come back to the host. Queries are cut by
    :func:`helpers.core.batching.stat_chunks`."""
    import torch

    from helpers.core.batching import stat_chunks

    A = torch.as_tensor(maps, device=device)
    B, L, H, P = A.shape[:4]
    rows, cols, correct, owner = [], [], [], []
    for b, (size, n, window) in enumerate(zip(sizes, n_words, queries)):
        lead, _ = word_layout(int(size), int(n))
        for query in window:
            words = candidate_words(query, int(n), candidates, causal=causal)
            rows.append(query.head + lead)
            cols.append(words + lead)
            correct.append(np.isin(words, list(query.correct)))
            owner.append(b)
    out = [np.zeros((L, H, len(window)), dtype=bool) for window in queries]
    if not rows:
        return out
    C = max(1, max(len(c) for c in cols))
    col = np.zeros((len(rows), C), dtype=np.int64)
    valid = np.zeros((len(rows), C), dtype=bool)
    hit = np.zeros((len(rows), C), dtype=bool)
    for q, (c, ok) in enumerate(zip(cols, correct)):
        col[q, : len(c)], valid[q, : len(c)], hit[q, : len(c)] = c, True, ok
    found = np.zeros((len(rows), L, H), dtype=bool)
    device = A.device
    for part in stat_chunks(len(rows), 3 * L * H * max(P, C) * 4, device):
        owners = torch.as_tensor(owner[part], device=device)
        row_maps = A[owners, :, :, torch.as_tensor(rows[part], device=device)]  # [query, layer, head, P]
        index = torch.as_tensor(col[part], device=device)[:, None, None, :].expand(-1, L, H, -1)
        scores = row_maps.gather(-1, index).masked_fill(~torch.as_tensor(valid[part], device=device)[:, None, None],
                                                        float("-inf"))
        chosen = scores.argmax(-1)  # [query, layer, head]: the earliest of the highest (none valid: 0, not a hit)
        hits = torch.as_tensor(hit[part], device=device).gather(1, chosen.reshape(len(chosen), -1))
        found[part] = hits.reshape(-1, L, H).cpu().numpy()
    start = 0
    for b, window in enumerate(queries):
        out[b] = found[start : start + len(window)].transpose(1, 2, 0).copy()
        start += len(window)
    return out


@dataclass
class AntecedentScorer:
    """Every head's antecedent choices on the windows' queries, with the head words of earlier mentions and then
    every word as candidates (:func:`head_predictions`): the accumulator of :func:`helpers.pipeline.route.reduce_maps`
    (``update`` a padded batch of word-level maps with one ``(queries,)`` per window, ``merge``, ``result``).
    ``result()`` is ``{window index: (mentions [layer, head, query], words [layer, head, query])}`` for the windows
    with queries; ``causal``: a decoder's maps."""

    causal: bool = False
    found: dict = field(default_factory=dict)

    def update(self, batch, extras: Sequence[tuple]) -> None:
        queries = [extra[0] if extra else [] for extra in extras]
        if not any(queries):
            return
        sizes, n_words = batch.lengths.tolist(), [ex.n_words for ex in batch.examples]
        mentions, words = (head_predictions(batch.weights, sizes, n_words, queries, candidates, causal=self.causal)
                           for candidates in CANDIDATE_SETS)
        for b, ex in enumerate(batch.examples):
            if queries[b]:
                self.found[ex.index] = (mentions[b], words[b])

    def merge(self, other: "AntecedentScorer") -> "AntecedentScorer":
        self.found.update(other.found)
        return self

    def result(self) -> dict[int, tuple[np.ndarray, np.ndarray]]:
        return self.found
