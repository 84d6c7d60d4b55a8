"""Paper-style unlabelled segments for the surface analyses (paper §3, "Setup").

The paper fed BERT 1,000 Wikipedia segments ``[CLS] paragraph-1 [SEP] paragraph-2 [SEP]`` of at
most 128 tokens. We build the same from GUM: every pair of consecutive paragraphs of a document is
a candidate; ``n`` pairs are drawn with a seeded generator; a pair that is too long is truncated
one token at a time from its longer side, at the front or the back with probability 1/2 each (the
rule BERT's pre-training data and the authors' ``preprocess_unlabeled.py`` use). No token is
masked, and every token-type id is 0.

>>> from helpers import load_model
>>> from helpers.segments import paper_segments
>>> from helpers.corpora import load_gum
>>> lm = load_model()
>>> segs = paper_segments(load_gum("train"), lm.tokenizer, n=1000, seed=0)     # doctest: +SKIP
"""
from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Sequence

from .corpora import Document
from .encoding import EncodedBatch, encode_ids


@dataclass(frozen=True)
class Segment:
    """Two consecutive paragraphs as token ids (no special tokens), and where they came from."""

    doc_id: str
    paragraph: int
    ids_a: tuple[int, ...]
    ids_b: tuple[int, ...]


def _paragraph_ids(tokenizer, paragraph) -> list[int]:
    words = [w for sent in paragraph for w in sent.words]
    return tokenizer(words, is_split_into_words=True, add_special_tokens=False, verbose=False)["input_ids"]


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
    """Drop tokens from the longer side (front or back, coin flip) until ``len(a) + len(b) <= budget``."""
    a, b = list(a), list(b)
    while len(a) + len(b) > budget:
        longer = a if len(a) >= len(b) else b
        if rng.random() < 0.5:
            del longer[0]
        else:
            longer.pop()
    return a, b


def paper_segments(
    documents: Sequence[Document], tokenizer, *, n: int = 1000, max_length: int = 128, seed: int = 0
) -> list[Segment]:
    """Draw ``n`` segments of two consecutive paragraphs (fewer if the corpus has fewer pairs)."""
    if n < 1:
        raise ValueError(f"--segments {n}: must be at least 1")
    budget = max_length - tokenizer.num_special_tokens_to_add(pair=True)
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


def encode_segments(tokenizer, segments: Sequence[Segment], *, max_length: int = 128) -> EncodedBatch:
    """Model inputs ``[CLS] A [SEP] B [SEP]`` (or the tokenizer's own pair template)."""
    before, between, after = pair_template(tokenizer)
    return encode_ids(
        [before + list(s.ids_a) + between + list(s.ids_b) + after for s in segments], max_length=max_length
    )

