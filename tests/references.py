"""Slow, obvious reference implementations (loops over every index) that the package's array code is tested
against on small inputs. Nothing in ``helpers/`` imports them."""
from __future__ import annotations

import numpy as np


def word_level_reference(attn: np.ndarray, word_of_token, *, mode: str = "mean") -> np.ndarray:
    """:func:`helpers.core.wordlevel.word_level` as loops: attention *to* a word is the sum over its tokens, *from* a
    word the mean over its tokens (``mode="first"``: its first token's), ``[layer, head, word, word]`` (float64)."""
    word_of_token = list(int(w) for w in word_of_token)
    n_words = max(word_of_token) + 1
    n_layers, n_heads = attn.shape[:2]
    tokens_of = [[t for t, w in enumerate(word_of_token) if w == word] for word in range(n_words)]
    out = np.zeros((n_layers, n_heads, n_words, n_words))
    for layer in range(n_layers):
        for head in range(n_heads):
            for wi in range(n_words):
                rows = tokens_of[wi] if mode == "mean" else tokens_of[wi][:1]
                for wj in range(n_words):
                    total = 0.0
                    for ti in rows:
                        for tj in tokens_of[wj]:
                            total += float(attn[layer, head, ti, tj])
                    out[layer, head, wi, wj] = total / len(rows)
    return out


def _lead(size: int, n_words: int) -> int:
    """Special positions before the words: [CLS] or BOS (1) unless the map holds the words alone (0)."""
    return 0 if size == n_words else 1


def predict_heads_reference(attn: np.ndarray, n_words: int, *, causal: bool = False) -> np.ndarray:
    """:func:`helpers.syntax.stats.predict_heads` of one sentence's map ``[layer, head, size, size]`` as loops:
    ``[direction, layer, head, word]``, each word's most-attended other word (1-based; the earliest of ties; in
    ``head-to-dependent`` the word that attends most to it), among those it sees (``causal``: before it; or that
    see it: after it); 0 without a candidate. Compared in float32, as the package compares."""
    A = np.asarray(attn, dtype=np.float32)
    L, H, size = A.shape[0], A.shape[1], A.shape[-1]
    k = _lead(size, n_words)
    out = np.zeros((2, L, H, n_words), dtype=np.int64)
    for d in range(2):
        for l in range(L):
            for h in range(H):
                for i in range(n_words):
                    best, choice = None, 0
                    for j in range(n_words):
                        if j == i or (causal and (j > i if d == 0 else j < i)):
                            continue
                        weight = A[l, h, i + k, j + k] if d == 0 else A[l, h, j + k, i + k]
                        if best is None or weight > best:
                            best, choice = weight, j + 1
                    out[d, l, h, i] = choice
    return out


def antecedent_reference(attn: np.ndarray, queries, n_words: int, candidates: str = "mentions", *,
                         causal: bool = False) -> np.ndarray:
    """:func:`helpers.coref.stats.head_predictions` of one window's map as loops: ``[layer, head, query]``, whether
    the candidate word the query's head word attends to most (the earliest of ties) is an antecedent's head word.
    Candidates: the query's (earlier mentions' head words), or every other word (``causal``: every word before it);
    none: a miss. Compared in the map's own dtype."""
    A = np.asarray(attn)
    L, H, size = A.shape[0], A.shape[1], A.shape[-1]
    k = _lead(size, n_words)
    out = np.zeros((L, H, len(queries)), dtype=bool)
    for q, query in enumerate(queries):
        if candidates == "mentions":
            pool = list(query.candidates)
        else:
            pool = [w for w in range(query.head if causal else n_words) if w != query.head]
        for l in range(L):
            for h in range(H):
                best, choice = None, None
                for w in pool:
                    if best is None or A[l, h, query.head + k, w + k] > best:
                        best, choice = A[l, h, query.head + k, w + k], w
                out[l, h, q] = choice is not None and choice in query.correct
    return out
