"""Token-level to word-level attention maps (paper §4.1), for all layers and heads at once.

The paper: "For attention *to* a split-up word, we sum up the attention weights over its tokens.
For attention *from* a split-up word, we take the mean of the attention weights over its tokens."
With a 0/1 token-to-word matrix ``S [token, word]`` and a row matrix ``R [word, token]``
(``R[w, t] = 1/|w|`` for *mean*, or 1 at the word's first token for *first*), the word map is

    W = R · A · S        for every layer and head: [layer, head, word, word]

Rows of ``W`` still sum to 1 because rows of ``R`` sum to 1 and ``S`` adds columns.

The authors' released code called the conversion with ``mode="first"`` although the paper says
mean; *mean* is our default and *first* a switch (see the book's deviations page; the definition:
book/methods.md, §From tokens to words).

>>> import numpy as np
>>> from helpers.core.wordlevel import word_level
>>> attn = np.full((1, 1, 4, 4), 0.25)        # [layer, head, query, key], 4 tokens
>>> word_level(attn, np.array([0, 1, 1, 2])).shape   # [CLS], one word of two tokens, [SEP]
(1, 1, 3, 3)
"""
from __future__ import annotations

from typing import Literal

import numpy as np
import torch

WordMode = Literal["mean", "first"]
WORD_MODES: tuple[str, ...] = ("mean", "first")


def conversion_matrices(word_of_token: np.ndarray, *, mode: WordMode = "mean") -> tuple[np.ndarray, np.ndarray]:
    """``(R [word, token], S [token, word])`` for one example.

    ``word_of_token[t]`` is token ``t``'s word position (see :mod:`helpers.core.encoding`).
    """
    if mode not in WORD_MODES:
        raise ValueError(f"word mode {mode!r}: choose one of {', '.join(WORD_MODES)}")
    word_of_token = np.asarray(word_of_token)
    n_tok = word_of_token.shape[0]
    n_words = int(word_of_token.max()) + 1
    S = np.zeros((n_tok, n_words), dtype=np.float32)
    S[np.arange(n_tok), word_of_token] = 1.0
    if mode == "mean":
        R = S.T / S.sum(axis=0)[:, None]
    else:
        R = np.zeros((n_words, n_tok), dtype=np.float32)
        first = np.full(n_words, -1)
        for t in range(n_tok - 1, -1, -1):
            first[word_of_token[t]] = t
        R[np.arange(n_words), first] = 1.0
    return R.astype(np.float32), S


def word_level(attn: np.ndarray, word_of_token: np.ndarray, *, mode: WordMode = "mean") -> np.ndarray:
    """Word-level maps ``[layer, head, word, word]`` (float32) from token-level ``attn [layer, head, token, token]``:
    :func:`word_level_batch` of a batch of one."""
    R, S = conversion_matrices(word_of_token, mode=mode)
    A = torch.as_tensor(np.asarray(attn, dtype=np.float32))
    return word_level_batch(A[None], torch.from_numpy(R)[None], torch.from_numpy(S)[None])[0].numpy()


def batched_matrices(
    alignments: list[np.ndarray], n_tokens: int, *, mode: WordMode = "mean", device=None
) -> tuple[torch.Tensor, torch.Tensor]:
    """Padded ``R [batch, word, token]`` and ``S [batch, token, word]`` for a padded batch.

    Padding rows and columns are zero, so padded positions of the attention batch drop out.
    """
    n_words = max(int(a.max()) + 1 for a in alignments)
    R = torch.zeros(len(alignments), n_words, n_tokens)
    S = torch.zeros(len(alignments), n_tokens, n_words)
    for b, align in enumerate(alignments):
        r, s = conversion_matrices(align, mode=mode)
        R[b, : r.shape[0], : r.shape[1]] = torch.from_numpy(r)
        S[b, : s.shape[0], : s.shape[1]] = torch.from_numpy(s)
    return R.to(device), S.to(device)


def word_level_batch(attn: torch.Tensor, R: torch.Tensor, S: torch.Tensor) -> torch.Tensor:
    """``[batch, layer, head, word, word]`` from ``attn [batch, layer, head, token, token]``.

    Two batched matrix products over every layer and head at once (no per-head loop). ``R`` and ``S`` are
    moved to ``attn``'s device (no copy where they are already there).
    """
    R, S = R.to(attn.device), S.to(attn.device)
    return torch.matmul(torch.matmul(R[:, None, None], attn), S[:, None, None])
