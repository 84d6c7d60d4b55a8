"""Choosing example sentences by rule, never by a bare index.

>>> from helpers.data.examples import first_with_split_word
>>> i = first_with_split_word(sentences, lm.tokenizer, min_words=8, max_words=14)   # doctest: +SKIP
"""
from __future__ import annotations

from typing import Sequence

from helpers.data.conllu_io import Sentence


def first_with_split_word(sentences: Sequence[Sentence], tokenizer, *, min_words: int = 8, max_words: int = 14,
                          min_pieces: int = 2) -> int:
    """Index of the first sentence with ``min_words..max_words`` words, one of them split into at least
    ``min_pieces`` tokens, and no unknown token."""
    for index, sent in enumerate(sentences):
        if not min_words <= len(sent) <= max_words:
            continue
        enc = tokenizer(list(sent.words), is_split_into_words=True, add_special_tokens=False)
        if tokenizer.unk_token_id in enc["input_ids"]:
            continue
        ids = [w for w in enc.word_ids() if w is not None]
        if max(ids.count(w) for w in set(ids)) >= min_pieces:
            return index
    raise ValueError(f"no sentence of {min_words}-{max_words} words has a word split into {min_pieces}+ tokens")
