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

Definitions the paper leaves open, fixed here:

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
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, Sequence

import numpy as np

from .conllu_io import Sentence
from .corpora import Document

MENTION_TYPES: tuple[str, ...] = ("pronoun", "proper", "nominal")
CandidateSet = Literal["mentions", "words"]
CANDIDATE_SETS: tuple[str, ...] = ("mentions", "words")
_BRACKET = re.compile(r"\((\d+)\)|\((\d+)|(\d+)\)")


class CorefAlignmentError(ValueError):
    """OntoGUM tokens do not line up with the dependency file's words."""


@dataclass(frozen=True)
class Mention:
    """A mention: word span ``[start, end]`` (inclusive, document word indices), chain id, head word."""

    chain: str
    start: int
    end: int
    head: int
    kind: str
    words: tuple[str, ...]
    head_word: str
    number: str | None = None
    gender: str | None = None
    person: str | None = None


@dataclass
class CorefDocument:
    """A document's words, its sentences (for the tree) and its mentions in order of head word."""

    doc_id: str
    words: list[str]
    mentions: list[Mention]


def read_ontogum(path: str | Path) -> tuple[list[str], list[tuple[int, int, str]]]:
    """Words and mention spans ``(start, end, chain)`` of an OntoGUM ``.conll`` file.

    Raises :class:`ValueError` naming the file and line on a malformed line or unbalanced bracket.
    """
    path = Path(path)
    words: list[str] = []
    open_spans: dict[str, list[int]] = {}
    spans: list[tuple[int, int, str]] = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip() or line.startswith("#"):
            continue
        cols = line.split("\t")
        if len(cols) < 3:
            raise ValueError(f"{path}:{number}: expected 3 tab-separated columns (index, word, coreference)")
        index = len(words)
        words.append(cols[1])
        mark = cols[-1].strip()
        if mark in ("_", "-", ""):
            continue
        for single, opening, closing in _BRACKET.findall(mark):
            if single:
                spans.append((index, index, single))
            elif opening:
                open_spans.setdefault(opening, []).append(index)
            else:
                if not open_spans.get(closing):
                    raise ValueError(f"{path}:{number}: closing bracket for entity {closing} that was never opened")
                spans.append((open_spans[closing].pop(), index, closing))
    left = [k for k, v in open_spans.items() if v]
    if left:
        raise ValueError(f"{path}: entities {left[:5]} opened but never closed")
    return words, sorted(spans)


def _features(sentence: Sentence, k: int) -> dict[str, str]:
    feats = sentence.feats[k] if sentence.feats else "_"
    return dict(f.split("=", 1) for f in feats.split("|") if "=" in f)


def mention_kind(upos: str) -> str:
    return "pronoun" if upos == "PRON" else ("proper" if upos == "PROPN" else "nominal")


def mention_person(upos: str, feats: dict[str, str]) -> str | None:
    """Grammatical person of a mention's head word: set for pronouns only (``None``: unknown, agrees with anything)."""
    return feats.get("Person") if upos == "PRON" else None


def build_document(doc: Document, ontogum_path: str | Path) -> CorefDocument:
    """Align OntoGUM mentions with the dependency trees of the same GUM document."""
    onto_words, spans = read_ontogum(ontogum_path)
    words, heads, where = [], [], []
    for s in doc.sentences:
        offset = len(words)
        for k, w in enumerate(s.words):
            words.append(w)
            heads.append(offset + s.heads[k] - 1 if s.heads[k] else -1)
            where.append((s, k))
    if len(onto_words) != len(words):
        raise CorefAlignmentError(f"{ontogum_path}: {len(onto_words)} tokens, but {doc.doc_id} has {len(words)} words")
    for i, (a, b) in enumerate(zip(onto_words, words)):
        if a and a != b:
            raise CorefAlignmentError(f"{ontogum_path}: token {i} is {a!r} but word {i} of {doc.doc_id} is {b!r}")
    mentions = []
    for start, end, chain in spans:
        inside = range(start, end + 1)
        outside = [i for i in inside if not start <= heads[i] <= end]
        head = outside[0] if outside else end
        sent, k = where[head]
        feats = _features(sent, k)
        mentions.append(Mention(chain, start, end, head, mention_kind(sent.upos[k]),
                                tuple(w.lower() for w in words[start : end + 1]), words[head].lower(),
                                feats.get("Number"), feats.get("Gender"), mention_person(sent.upos[k], feats)))
    mentions.sort(key=lambda m: (m.head, m.start, m.end))
    return CorefDocument(doc.doc_id, words, mentions)


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


def candidate_words(query: Query, n_words: int, candidates: CandidateSet = "mentions") -> np.ndarray:
    """Window-relative candidate words of a query, ascending: earlier mentions' head words, or every other word."""
    if candidates not in CANDIDATE_SETS:
        raise ValueError(f"candidates {candidates!r}: choose one of {', '.join(CANDIDATE_SETS)}")
    if candidates == "mentions":
        return np.asarray(query.candidates, dtype=np.int64)
    return np.array([w for w in range(n_words) if w != query.head], dtype=np.int64)


def head_predictions(attn: np.ndarray, queries: Sequence[Query], candidates: CandidateSet = "mentions") -> np.ndarray:
    """``[layer, head, query]`` correctness of every head: does the most-attended candidate word
    (from the query's head word) belong to an antecedent? ``attn`` is the window's word-level map
    ``[layer, head, word + 2, word + 2]`` ([CLS] first); ``candidates`` as in :func:`candidate_words`."""
    L, H = attn.shape[:2]
    out = np.zeros((L, H, len(queries)), dtype=bool)
    for q, query in enumerate(queries):
        cols = candidate_words(query, attn.shape[-1] - 2, candidates) + 1
        scores = attn[:, :, query.head + 1, cols]  # [layer, head, candidate]
        chosen = cols[scores.argmax(-1)] - 1
        out[:, :, q] = np.isin(chosen, list(query.correct))
    return out
