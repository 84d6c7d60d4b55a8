"""Paper-style unlabelled segments for the surface and clustering analyses (paper §3 and §6, "Setup").

The paper fed BERT 1,000 Wikipedia segments ``[CLS] A [SEP] B [SEP]`` of at most 128 tokens, built
by the authors' ``preprocess_unlabeled.py`` (after BERT's ``create_pretraining_data.py``). Two
constructions are offered, named by :data:`SEGMENT_SOURCES`:

``"documents"`` (default; the authors' construction, :func:`document_segments`)
    The sentences of a document are tokenised and accumulated into a chunk until it holds at least
    ``max_length - specials`` tokens (125 for BERT), or the document ends. The chunk is split
    between two sentences at a point drawn uniformly from ``1 .. len(chunk) - 1`` (a one-sentence
    chunk has no second part: as in the original, the rest of that document is then skipped); the
    pair is truncated one token at a time from its longer side (ties: the second), at the front or
    the back with probability 1/2 each. Nearly every segment is the full length.
``"paragraphs"`` (:func:`paragraph_segments`)
    Our earlier construction: a seeded draw of pairs of consecutive paragraphs, truncated the same
    way. GUM paragraphs are short, so these segments are short (a third under 32 tokens).

Both are seeded and deterministic. The original stopped after the first 1,000 segments of its file
and shuffled them; GUM train yields about 1,400, so we visit the documents in a seeded random order
(every genre is represented), stop at ``n`` and shuffle. No token is masked, and every token-type id
is 0 (:mod:`helpers.core.extract`). The construction in words: book/methods.md, §Segments.

>>> from helpers import load_model
>>> from helpers.data.segments import paper_segments
>>> from helpers.data.corpora import load_gum
>>> lm = load_model()
>>> segs = paper_segments(load_gum("train"), lm.tokenizer, n=1000, seed=0)     # doctest: +SKIP
"""
from __future__ import annotations

import numbers
import random
from dataclasses import dataclass
from typing import Literal, Sequence

import numpy as np

from helpers.core.encoding import MAX_LENGTH, EncodedBatch, encode_ids
from helpers.data.corpora import Document

SEGMENTS = 1000  # the paper's 1,000 segments (§3): the chapters' and the commands' default

SegmentSource = Literal["documents", "paragraphs"]
SEGMENT_SOURCES: tuple[str, ...] = ("documents", "paragraphs")


@dataclass(frozen=True)
class Segment:
    """The two parts of a segment as token ids (no special tokens), and where they came from.

    ``paragraph`` is the index of the first paragraph (paragraph pairs) or of the chunk's first
    sentence (document chunks) within document ``doc_id``.
    """

    doc_id: str
    paragraph: int
    ids_a: tuple[int, ...]
    ids_b: tuple[int, ...]


def _word_ids(tokenizer, words: Sequence[str]) -> list[int]:
    if not words:
        return []
    return tokenizer(list(words), is_split_into_words=True, add_special_tokens=False, verbose=False)["input_ids"]


def _paragraph_ids(tokenizer, paragraph) -> list[int]:
    return _word_ids(tokenizer, [w for sent in paragraph for w in sent.words])


def pair_template(tokenizer) -> tuple[list[int], list[int], list[int]]:
    """Special ids ``(before A, between A and B, after B)`` of the tokenizer's pair template.

    Found by encoding a pair of one-token texts, so it is right for BERT (``[CLS] A [SEP] B [SEP]``),
    RoBERTa (``<s> A </s></s> B </s>``) and other models alike.
    """
    ids = tokenizer("a", "b", add_special_tokens=True)["input_ids"]
    a_id = tokenizer("a", add_special_tokens=False)["input_ids"]
    b_id = tokenizer("b", add_special_tokens=False)["input_ids"]
    ia = ids.index(a_id[-1])
    ib = len(ids) - 1 - ids[::-1].index(b_id[-1])
    return ids[: ia - len(a_id) + 1], ids[ia + 1 : ib - len(b_id) + 1], ids[ib + 1 :]


def truncate_pair(a: list[int], b: list[int], budget: int, rng: random.Random) -> tuple[list[int], list[int]]:
    """Drop tokens from the longer side (ties: ``b``; front or back, coin flip) until ``len(a) + len(b) <= budget``.

    The rule of BERT's ``truncate_seq_pair`` and the authors' ``preprocess_unlabeled.py``.
    """
    a, b = list(a), list(b)
    while len(a) + len(b) > budget:
        longer = a if len(a) > len(b) else b
        if rng.random() < 0.5:
            del longer[0]
        else:
            longer.pop()
    return a, b


def chunk_document(sentences: Sequence[Sequence[int]], budget: int, rng: random.Random,
                   doc_id: str = "") -> list[Segment]:
    """The authors' ``prep_document`` on one document given as tokenised sentences (token ids, no specials).

    Sentences are accumulated until the chunk holds ``>= budget`` tokens or the document ends; the
    chunk is split before sentence ``randint(1, len(chunk) - 1)`` (1 for a one-sentence chunk), the
    pair truncated by :func:`truncate_pair`. An empty side ends the document, as in the original.
    Empty sentences are left out first (the original skipped lines without tokens).
    """
    sentences = [list(s) for s in sentences if len(s)]
    out, chunk, first, length = [], [], 0, 0
    for i, sent in enumerate(sentences):
        if not chunk:
            first = i
        chunk.append(sent)
        length += len(sent)
        if i == len(sentences) - 1 or length >= budget:
            a_end = rng.randint(1, len(chunk) - 1) if len(chunk) >= 2 else 1
            a = [t for s in chunk[:a_end] for t in s]
            b = [t for s in chunk[a_end:] for t in s]
            a, b = truncate_pair(a, b, budget, rng)
            if not a or not b:
                break
            out.append(Segment(doc_id, first, tuple(a), tuple(b)))
            chunk, length = [], 0
    return out


def document_segments(documents: Sequence[Document], tokenizer, *, n: int, budget: int, seed: int) -> list[Segment]:
    """The authors' construction (module docstring): documents in a seeded order, ``n`` segments of at most
    ``budget`` tokens besides the specials, shuffled."""
    rng = random.Random(seed)
    order = list(documents)
    rng.shuffle(order)
    segments: list[Segment] = []
    for doc in order:
        ids = [_word_ids(tokenizer, s.words) for s in doc.sentences]
        segments.extend(chunk_document(ids, budget, rng, doc.doc_id))
        if len(segments) >= n:
            break
    if not segments:
        raise ValueError("no document yields a segment of two sentences: cannot build segments")
    segments = segments[:n]
    rng.shuffle(segments)
    return segments


def paragraph_segments(documents: Sequence[Document], tokenizer, *, n: int, budget: int, seed: int) -> list[Segment]:
    """Draw ``n`` segments of two consecutive paragraphs (fewer if the corpus has fewer pairs), of at most
    ``budget`` tokens besides the specials."""
    candidates = []
    for doc in documents:
        paras = [p for p in doc.paragraphs if p]
        for k in range(len(paras) - 1):
            candidates.append((doc.doc_id, k, paras[k], paras[k + 1]))
    if not candidates:
        raise ValueError("no document has two paragraphs: cannot build segments")
    rng = random.Random(seed)
    chosen = rng.sample(candidates, min(n, len(candidates)))
    segments = []
    for doc_id, k, first, second in chosen:
        a, b = truncate_pair(_paragraph_ids(tokenizer, first), _paragraph_ids(tokenizer, second), budget, rng)
        if a and b:
            segments.append(Segment(doc_id, k, tuple(a), tuple(b)))
    return segments


def paper_segments(
    documents: Sequence[Document], tokenizer, *, n: int = SEGMENTS, max_length: int = MAX_LENGTH, seed: int = 0,
    source: SegmentSource = "documents",
) -> list[Segment]:
    """``n`` segments built by ``source`` (``"documents"``: the authors' construction; ``"paragraphs"``)."""
    if not isinstance(source, str) or source not in SEGMENT_SOURCES:
        raise ValueError(f"--segments-from {source!r:.60}: choose one of {', '.join(SEGMENT_SOURCES)}")
    for name, value in (("n", n), ("max_length", max_length), ("seed", seed)):
        if isinstance(value, bool) or not isinstance(value, numbers.Integral):
            raise TypeError(f"{name}={value!r:.60}: a whole number")
    if isinstance(documents, (str, bytes)) or not isinstance(documents, Sequence):
        raise TypeError(f"documents: a list of GUM documents (helpers.load_gum), not {type(documents).__name__}")
    if n < 1:
        raise ValueError(f"--segments {n}: must be at least 1")
    budget = max_length - tokenizer.num_special_tokens_to_add(pair=True)
    if budget < 2:
        raise ValueError(f"--max-length {max_length}: too short for a two-part segment")
    build = document_segments if source == "documents" else paragraph_segments
    return build(documents, tokenizer, n=n, budget=budget, seed=seed)


def encode_segments(tokenizer, segments: Sequence[Segment], *, max_length: int = MAX_LENGTH) -> EncodedBatch:
    """Model inputs ``[CLS] A [SEP] B [SEP]`` (or the tokenizer's own pair template)."""
    before, between, after = pair_template(tokenizer)
    return encode_ids(
        [before + list(s.ids_a) + between + list(s.ids_b) + after for s in segments], max_length=max_length
    )


def split_position(tokenizer, segment: Segment) -> int:
    """Index, in the encoded input, of the first token of the segment's second part."""
    before, between, _ = pair_template(tokenizer)
    return len(before) + len(segment.ids_a) + len(between)


def segment_tokens(batch: EncodedBatch) -> dict:
    """``{"count", "mean", "median", "min", "max"}`` of the encoded segments' lengths in tokens (specials included)."""
    lengths = np.array([len(e) for e in batch.examples])
    if not len(lengths):
        return {"count": 0, "mean": 0.0, "median": 0.0, "min": 0, "max": 0}
    return {"count": int(len(lengths)), "mean": round(float(lengths.mean()), 3), "median": float(np.median(lengths)),
            "min": int(lengths.min()), "max": int(lengths.max())}
