"""Turning words or texts into model inputs, with each token's word index and over-long inputs counted.

An :class:`Encoded` example carries ``input_ids`` (special tokens included) and, for pre-split
words, ``word_of_token``: for every token, the index of its word in the paper's word-level layout
``[CLS], w_1, ..., w_n, [SEP]``, i.e. 0 for the leading special token, ``1..n`` for the words and
``n + 1`` for the final special token. Alignment comes from the fast tokenizer's ``word_ids()``,
so it works for WordPiece and byte-level BPE alike.

A decoder's inputs are ``BOS w_1 ... w_n`` (no final special token: ``trail`` is 0), the BOS position
playing [CLS]'s role; without BOS (``--no-bos``) they are ``w_1 ... w_n`` (``lead`` is 0) and the words
take positions ``0..n-1``. Positions are always contiguous: leading special ``0``, words from ``lead``.

>>> from helpers import load_model
>>> from helpers.core.encoding import encode_words
>>> lm = load_model()
>>> batch = encode_words(lm.tokenizer, [["The", "unaffable", "cat"]], max_length=128)
>>> batch.examples[0].word_of_token.tolist()
[0, 1, 2, 2, 2, 3, 4]
"""
from __future__ import annotations

import hashlib
import numbers
from dataclasses import dataclass, field
from typing import Sequence

import numpy as np

# The paper's longest input in tokens, special tokens included: the default of every run (longer inputs are skipped).
MAX_LENGTH = 128


@dataclass(frozen=True)
class Encoded:
    """One model input.

    ``index`` is the example's position in the caller's list; ``input_ids`` ``[n_tokens]``;
    ``word_of_token`` ``[n_tokens]`` (``None`` for token-level inputs); ``n_words`` counts the words
    without the special positions; ``lead`` and ``trail`` count the special positions before and after the
    words at word level (1 and 1 for ``[CLS] ... [SEP]``; a decoder's: 1 and 0 with BOS, 0 and 0 without).
    """

    index: int
    input_ids: np.ndarray
    word_of_token: np.ndarray | None = None
    n_words: int = 0
    words: tuple[str, ...] = ()
    lead: int = 1
    trail: int = 1

    def __len__(self) -> int:
        return int(self.input_ids.shape[0])

    @property
    def n_positions(self) -> int:
        """Rows of this example's map: tokens at token level, ``lead + n_words + trail`` at word level (``n_words + 2``
        for an encoder's ``[CLS] ... [SEP]``)."""
        return self.lead + self.n_words + self.trail if self.word_of_token is not None else len(self)


@dataclass
class EncodedBatch:
    """Examples that fit the length limit, and the indices of those that did not.

    ``skipped`` lists the caller's indices of inputs longer than ``max_length`` tokens (special
    tokens included); they are counted, never truncated. ``unknown_words`` counts words the
    tokenizer turned into no token at all (e.g. a lone zero-width character), which are encoded as
    the tokenizer's unknown token so that every word keeps a row and a column.
    """

    examples: list[Encoded]
    skipped: list[int] = field(default_factory=list)
    max_length: int = MAX_LENGTH
    unknown_words: int = 0

    def __len__(self) -> int:
        return len(self.examples)

    def digest(self) -> str:
        """SHA-256 of every example's ids and alignment (the data part of cache keys)."""
        h = hashlib.sha256()
        h.update(f"max_length={self.max_length};skipped={self.skipped}".encode())
        for ex in self.examples:
            h.update(np.int64(ex.index).tobytes())
            h.update(ex.input_ids.astype(np.int64).tobytes())
            if ex.word_of_token is not None:
                h.update(b"w")
                h.update(ex.word_of_token.astype(np.int64).tobytes())
        return h.hexdigest()

    def summary(self) -> dict:
        lengths = [len(e) for e in self.examples]
        return {
            "examples": len(self.examples) + len(self.skipped),
            "used": len(self.examples),
            "skipped_over_length": len(self.skipped),
            "max_length": self.max_length,
            "mean_tokens": float(np.mean(lengths)) if lengths else 0.0,
            "unknown_words": self.unknown_words,
        }


def printable(text, *, limit: int | None = None) -> str:
    r"""``text`` fit for a one-line message on a terminal: every character that does not print (control
    characters such as ESC, bidirectional overrides such as U+202E, line separators) written as its
    escape, and, with ``limit``, cut to that many characters, saying how long it was.

    >>> printable("s1\u202e\x1b[31m")
    's1\\u202e\\x1b[31m'
    >>> printable("x" * 500, limit=8)
    'xxxxxxxx... (500 characters)'
    """
    text = str(text)
    cut = text if limit is None or len(text) <= limit else text[:limit]
    if not cut.isprintable():
        cut = "".join(c if c.isprintable() else c.encode("unicode_escape").decode("ascii") for c in cut)
    return cut if limit is None or len(text) <= limit else f"{cut}... ({len(text)} characters)"


def check_words(words, name: str = "words", *, sentences: bool = False) -> None:
    """Refuse a bare string (or bytes) where a list of words is expected (``sentences``: a list of sentences, each a
    list of words): a string is iterable, so each of its characters would become a word. The one check every
    public function taking words makes; raises a one-line ``TypeError`` naming the argument ``name`` and showing
    the fix.

    >>> check_words(["The", "cat", "sat"])
    >>> check_words("The cat sat")
    Traceback (most recent call last):
    TypeError: words: expected a list of words, got a str; split it first: 'The cat sat'.split()
    """
    if isinstance(words, (str, bytes)):
        shown = repr(words) if isinstance(words, str) and len(words) <= 40 and words.isprintable() else "'a b'"
        expected, fix = (("a list of sentences, each a list of words", f"[{shown}.split()]") if sentences
                         else ("a list of words", f"{shown}.split()"))
        raise TypeError(f"{name}: expected {expected}, got a {type(words).__name__}; split it first: {fix}")


def _check_sentences(sentences) -> None:
    """``sentences`` is a list of sentences, each a list (or tuple) of words (str): a sentence given as one string
    would be read letter by letter, so it is refused (:func:`check_words`)."""
    check_words(sentences, "sentences", sentences=True)
    if not isinstance(sentences, (Sequence, np.ndarray)):
        raise TypeError(f"sentences: a list of sentences, each a list of words (str), not {type(sentences).__name__}")
    for k, words in enumerate(sentences):
        check_words(words, f"sentences[{k}]")
        if not isinstance(words, (Sequence, np.ndarray)) or not all(isinstance(w, str) for w in words):
            shown = printable(repr(words), limit=60)
            raise TypeError(f"sentences[{k}]: a list of words (str), not {shown}")


def _check_max_length(max_length: int) -> None:
    if isinstance(max_length, bool) or not isinstance(max_length, numbers.Integral):
        raise TypeError(f"max_length={printable(repr(max_length), limit=60)}: a whole number of tokens")
    if max_length < 3:
        raise ValueError(f"--max-length {max_length}: must be at least 3 (two special tokens and one word)")


def encode_words(
    tokenizer,
    sentences: Sequence[Sequence[str]],
    *,
    max_length: int = MAX_LENGTH,
    model_max: int | None = None,
) -> EncodedBatch:
    """Encode pre-split sentences as ``[CLS] w_1 ... w_n [SEP]`` with a token-to-word alignment.

    Sentences longer than ``max_length`` tokens are skipped and their indices recorded.
    ``model_max`` (the model's position limit) caps ``max_length`` with a clear error.
    """
    _check_max_length(max_length)
    if model_max is not None and max_length > model_max:
        raise ValueError(f"--max-length {max_length} exceeds the model's limit of {model_max} positions")
    _check_sentences(sentences)
    unk = tokenizer.unk_token or "[UNK]"
    examples: list[Encoded] = []
    skipped: list[int] = []
    unknown = 0
    chunk = 512
    for start in range(0, len(sentences), chunk):
        part = [list(s) for s in sentences[start : start + chunk]]
        for k, words in enumerate(part):
            if not words:
                raise ValueError(f"sentence {start + k} has no words")
        enc = tokenizer(part, is_split_into_words=True, add_special_tokens=True)
        for k, words in enumerate(part):
            index = start + k
            ids = enc["input_ids"][k]
            wids = enc.word_ids(k)
            seen = {w for w in wids if w is not None}
            if len(seen) != len(words):
                # words that produced no token (zero-width characters ...): encode them as unknown
                fixed = [w if i in seen else unk for i, w in enumerate(words)]
                unknown += len(words) - len(seen)
                single = tokenizer(fixed, is_split_into_words=True, add_special_tokens=True)
                ids, wids = single["input_ids"], single.word_ids()
            if len(ids) > max_length:
                skipped.append(index)
                continue
            lead, trail = int(wids[0] is None), int(wids[-1] is None)
            examples.append(
                Encoded(
                    index=index,
                    input_ids=np.asarray(ids, dtype=np.int64),
                    word_of_token=_word_positions(wids, len(words)),
                    n_words=len(words),
                    words=tuple(words),
                    lead=lead,
                    trail=trail,
                )
            )
    return EncodedBatch(examples, skipped, max_length, unknown)


def _word_positions(word_ids: list[int | None], n_words: int) -> np.ndarray:
    """Map ``word_ids()`` (None for specials) to the layout ``[CLS]=0, words 1..n, [SEP]=n+1``.

    Leading special tokens map to 0, trailing ones to ``n + 1``. Without a leading special token (a decoder
    without BOS) the words take ``0..n-1``, so positions stay contiguous.
    """
    lead = int(bool(word_ids) and word_ids[0] is None)
    out = np.empty(len(word_ids), dtype=np.int64)
    seen_word = False
    for t, w in enumerate(word_ids):
        if w is None:
            out[t] = n_words + lead if seen_word else 0
        else:
            seen_word = True
            out[t] = w + lead
    return out


def word_token_counts(tokenizer, words: list[str]) -> list[int]:
    """``[word]``: how many tokens ``tokenizer`` makes of each word of ``words`` (no special tokens), at least 1 (a
    word with no token is encoded as the unknown token, as :func:`encode_words` does)."""
    enc = tokenizer(words, is_split_into_words=True, add_special_tokens=False, verbose=False)
    counts = np.bincount([w for w in enc.word_ids() if w is not None], minlength=len(words))
    return np.maximum(counts, 1).tolist()


def check_positions(batch: EncodedBatch, model_max: int) -> None:
    """Raise ``ValueError`` when an input of ``batch`` is longer than the model's ``model_max`` positions:
    ``--max-length`` above the model's limit let such inputs through (segments are built up to
    ``--max-length``), and the model would fail on them deep inside its embeddings."""
    longest = max((len(ex) for ex in batch.examples), default=0)
    if longest > model_max:
        raise ValueError(f"--max-length {batch.max_length} exceeds the model's limit of {model_max} positions "
                         f"(inputs of up to {longest} tokens were built); use --max-length {model_max} or less")


def encode_ids(
    sequences: Sequence[Sequence[int]], *, max_length: int = MAX_LENGTH
) -> EncodedBatch:
    """Wrap already-built token id sequences (special tokens included) for token-level extraction."""
    if isinstance(sequences, (str, bytes)) or not isinstance(sequences, (Sequence, np.ndarray)):
        raise TypeError(f"sequences: a list of token id lists, not {type(sequences).__name__}")
    examples, skipped = [], []
    for index, ids in enumerate(sequences):
        if len(ids) > max_length:
            skipped.append(index)
            continue
        examples.append(Encoded(index=index, input_ids=np.asarray(ids, dtype=np.int64)))
    return EncodedBatch(examples, skipped, max_length)


def encode_texts(tokenizer, texts: Sequence[str], *, max_length: int = MAX_LENGTH) -> EncodedBatch:
    """Encode raw texts as ``[CLS] text [SEP]`` for token-level extraction (over-long ones skipped)."""
    _check_max_length(max_length)
    if isinstance(texts, str) or not isinstance(texts, Sequence) or not all(isinstance(t, str) for t in texts):
        raise TypeError("texts: a list of texts (str)" + ("; one text is [text]" if isinstance(texts, str) else ""))
    enc = tokenizer(list(texts), add_special_tokens=True)
    return encode_ids(enc["input_ids"], max_length=max_length)


def split_word_fraction(batch: EncodedBatch) -> float:
    """Fraction of words the tokenizer split into two or more tokens (the paper: ~8% for BERT on WSJ)."""
    words = split = 0
    for ex in batch.examples:
        if ex.word_of_token is None:
            continue
        counts = np.bincount(ex.word_of_token, minlength=ex.n_words + 2)[1 : ex.n_words + 1]
        words += ex.n_words
        split += int((counts > 1).sum())
    return split / words if words else 0.0


def position_labels(words: Sequence[str], *, lead: int, trail: int, first: str = "[CLS]",
                    last: str = "[SEP]") -> list[str]:
    """The label of every position of a word-level map: ``lead`` special positions named ``first`` (an encoder's
    [CLS], a decoder's BOS), the words, ``trail`` named ``last`` (an encoder's [SEP]; a decoder has none).

    >>> position_labels(["The", "cat"], lead=1, trail=1)
    ['[CLS]', 'The', 'cat', '[SEP]']
    >>> position_labels(["The", "cat"], lead=1, trail=0, first="<s>")
    ['<s>', 'The', 'cat']
    """
    check_words(words)
    return [first] * lead + list(words) + [last] * trail


def special_token_ids(tokenizer) -> dict[str, int]:
    """The ids of the two special tokens the analyses name, found by their role, never by spelling:
    ``cls`` (the leading token: ``[CLS]`` in BERT, ``<s>`` in RoBERTa and MPNet) and ``sep`` (the
    separator/closing token: ``[SEP]``, ``</s>``). Tokenizers without CLS/SEP roles fall back to their
    BOS/EOS tokens.

    >>> special_token_ids(lm.tokenizer)                    # BERT             # doctest: +SKIP
    {'cls': 101, 'sep': 102}
    """
    cls = tokenizer.cls_token_id if tokenizer.cls_token_id is not None else tokenizer.bos_token_id
    sep = tokenizer.sep_token_id if tokenizer.sep_token_id is not None else tokenizer.eos_token_id
    if cls is None or sep is None:
        raise ValueError(f"{type(tokenizer).__name__}: no CLS/BOS or SEP/EOS token; the analyses need a leading "
                         "and a separating special token (a BERT-family tokenizer)")
    return {"cls": int(cls), "sep": int(sep)}
