"""Slow, obvious reference implementations the tests compare the package's statistics against (loops, scipy), and
:func:`map_batch`, which hands host maps to an accumulator as the route hands a forward pass's
(:func:`helpers.pipeline.route.reduce_maps`). Nothing here is used by the package."""
from __future__ import annotations

import numpy as np
import torch

from helpers.core.encoding import Encoded
from helpers.core.extract import MapBatch, bucket, convert, forward_parts, model_inputs


class Example:
    """A stand-in for :class:`~helpers.core.encoding.Encoded` where only the index and the length matter."""

    def __init__(self, index: int, n: int):
        self.index, self.n = index, n

    def __len__(self) -> int:
        return self.n


def map_batch(maps, norms=None, *, indices=None, pad: float = 0.0) -> MapBatch:
    """A :class:`~helpers.core.extract.MapBatch` of host maps ``[layer, head, n, n]`` of any lengths (``norms``: the
    same examples' norm maps, or ``None``; a list of ``None``: norms alone), right-padded with ``pad`` into
    ``[batch, layer, head, P, P]`` float tensors (float64 maps stay float64), the examples indexed ``indices``
    (default ``0, 1, ...``)."""
    maps = list(maps)
    indices = list(range(len(maps))) if indices is None else list(indices)

    def padded(group):
        P = max(np.shape(m)[-1] for m in group)
        dtype = torch.float64 if any(np.asarray(m).dtype == np.float64 for m in group) else torch.float32
        out = torch.full((len(group), *np.shape(group[0])[:2], P, P), pad, dtype=dtype)
        for b, m in enumerate(group):
            n = np.shape(m)[-1]
            out[b, :, :, :n, :n] = torch.as_tensor(np.asarray(m))
        return out

    lengths = [np.shape(m)[-1] for m in maps]
    examples = [Example(i, n) for i, n in zip(indices, lengths)]
    return MapBatch(examples, padded(maps), None if norms is None else padded(list(norms)), lengths=lengths)


# ------------------------------------------------------------------------------ §6: Jensen-Shannon distances


def js_reference(attn: np.ndarray) -> np.ndarray:
    """``[head, head]``: a slow float64 loop over head pairs and rows with scipy's Jensen-Shannon (squared) of one
    map ``[layer, head, n, n]``, smoothed as helpers.cluster.stats smooths."""
    from scipy.spatial.distance import jensenshannon

    from helpers.cluster.stats import JS_SMOOTHING

    L, H, n, _ = attn.shape
    P = (1.0 - JS_SMOOTHING) * attn.reshape(L * H, n, n).astype(np.float64) + JS_SMOOTHING / n
    K = P.shape[0]
    D = np.zeros((K, K))
    for a in range(K):
        for b in range(K):
            D[a, b] = sum(jensenshannon(P[a, i], P[b, i]) ** 2 for i in range(n))
    return D


# ------------------------------------------------------------------------------ norms: shares and norm maps


def kind_shares_reference(maps: np.ndarray, masks: dict) -> np.ndarray:
    """``[kind, layer, head]``: per query row the share of its total on each kind of helpers.norms.stats.KINDS
    (a row of zeros adds 0), averaged over rows, by loops."""
    from helpers.norms.stats import KINDS

    L, H, n, _ = maps.shape
    out = np.zeros((len(KINDS), L, H))
    for k, kind in enumerate(KINDS):
        for l in range(L):
            for h in range(H):
                for i in range(n):
                    total = sum(float(maps[l, h, i, j]) for j in range(n))
                    if total > 0:
                        out[k, l, h] += sum(float(maps[l, h, i, j]) for j in range(n) if masks[kind][j]) / total / n
    return out


def spearman_reference(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``[layer, head]``: scipy's Spearman correlation of two maps ``[layer, head, n, n]`` over the query-key pairs
    of each head (NaN for a constant head)."""
    from scipy.stats import spearmanr

    L, H = a.shape[:2]
    out = np.full((L, H), np.nan)
    for l in range(L):
        for h in range(H):
            x, y = a[l, h].ravel(), b[l, h].ravel()
            if np.ptp(x) > 0 and np.ptp(y) > 0:
                out[l, h] = spearmanr(x, y).statistic
    return out


def _value_projection(lm, layer: int):
    """``(W_V [hidden, kv_head * d], b_V [kv_head * d], W_O [head * d, hidden])`` of ``layer`` in float64, read from
    the modules' weights by hand for each architecture; a missing bias is zero."""
    from helpers.core.internals import attention_parts

    kind = lm.model.config.model_type
    parts = attention_parts(lm.model, layer)
    if kind == "gpt2":  # Conv1D, weight [in, 3 * hidden]: q | k | v
        hidden = parts.value.weight.shape[0]
        WV = parts.value.weight.double()[:, 2 * hidden : 3 * hidden]
        bV = parts.value.bias.double()[2 * hidden : 3 * hidden]
        WO = parts.output.weight.double()
    else:  # torch Linear, weight [out, in]
        WV = parts.value.weight.double().T
        bV = (parts.value.bias.double() if parts.value.bias is not None
              else torch.zeros(WV.shape[1], dtype=torch.float64, device=WV.device))
        WO = parts.output.weight.double().T
    return WV, bV, WO


def _attention_input(lm, layer: int, hidden: torch.Tensor) -> torch.Tensor:
    """What the value projection of ``layer`` reads, from the residual stream ``hidden`` entering it: the stream
    itself for encoders (post-LN), its pre-attention layer norm for decoders (pre-LN: GPT-2's ``ln_1``, Llama's
    ``input_layernorm``)."""
    kind = lm.model.config.model_type
    if kind == "gpt2":
        return lm.model.h[layer].ln_1(hidden)
    if hasattr(lm.model, "layers") and hasattr(lm.model.layers[layer], "input_layernorm"):
        return lm.model.layers[layer].input_layernorm(hidden)
    return hidden


def norm_maps_reference(lm, input_ids: np.ndarray) -> np.ndarray:
    """The token-level norm maps of one input, slowly: for every layer, head, query ``i`` and key ``j``,
    ``||alpha_ij (x_j W_V^g + b_V^g) W_O^h||`` with ``x`` the attention's input in that layer (the hidden states
    entering it; a decoder's after its layer norm), ``g`` head ``h``'s key-value head (``h`` without grouped-query
    attention: with it, head ``h`` of ``H`` shares the values of group ``h * kv_heads // H``), ``W`` read from the
    modules' weights, in float64 loops."""
    example = Encoded(0, np.asarray(input_ids, dtype=np.int64))
    n = len(example)
    result = np.zeros((lm.n_layers, lm.n_heads, n, n))
    with torch.no_grad():
        out = lm.model(**model_inputs(lm, [example]), output_attentions=True, output_hidden_states=True)
        for layer in range(lm.n_layers):
            WV, bV, WO = _value_projection(lm, layer)
            x = _attention_input(lm, layer, out.hidden_states[layer]).double()[0]  # [token, hidden]
            d = WO.shape[0] // lm.n_heads
            for h in range(lm.n_heads):
                group = h * lm.n_kv_heads // lm.n_heads
                cols = slice(group * d, (group + 1) * d)
                rows = slice(h * d, (h + 1) * d)
                for j in range(n):
                    f = (x[j] @ WV[:, cols] + bV[cols]) @ WO[rows, :]
                    for i in range(n):
                        alpha = float(out.attentions[layer][0, h, i, j])
                        result[layer, h, i, j] = float(torch.linalg.vector_norm(alpha * f))
    return result


# ------------------------------------------------------------------------------ sinks: the first position


def first_position_reference(maps: np.ndarray, *, normalise: bool = False) -> np.ndarray:
    """``alpha_1`` ``[layer, head]`` of one input's map ``[layer, head, query, key]`` by loops: the mean over queries
    of the share of each row on key 0 (``normalise``: each row divided by its sum, a row of zeros adding 0)."""
    n_layers, n_heads, n, _ = maps.shape
    out = np.zeros((n_layers, n_heads))
    for layer in range(n_layers):
        for head in range(n_heads):
            total = 0.0
            for q in range(n):
                row = sum(float(maps[layer, head, q, k]) for k in range(n)) if normalise else 1.0
                total += float(maps[layer, head, q, 0]) / row if row > 0 else 0.0
            out[layer, head] = total / n
    return out


# ------------------------------------------------------------------------------ §4.1-4.3: words, heads, antecedents


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


def surface_stats(per_segment: dict[str, np.ndarray], segment_uniform, undefined: dict | None = None):
    """A :class:`~helpers.surface.stats.SurfaceStats` of constructed segments given by their values ``{statistic:
    [segment, layer, head]}`` and uniform entropies ``[segment]``: the means over segments, each counting once."""
    from helpers.surface.stats import SurfaceStats

    per = {k: np.asarray(v, dtype=np.float64) for k, v in per_segment.items()}
    uniform = np.asarray(segment_uniform, dtype=np.float64)
    return SurfaceStats({k: v.mean(0) for k, v in per.items()}, float(uniform.mean()), len(uniform),
                        dict(undefined or {}), per_segment=per, segment_uniform=uniform)


def iter_weights_and_norms(lm, batch, *, batch_size: int = 32):
    """Stream token-level ``(example, attn, norms)``, both float32 ``[layer, head, n, n]``, one pass
    (:func:`helpers.core.norm_maps.forward_weights_and_norms`) per batch of the extraction's buckets."""
    from helpers.core.encoding import EncodedBatch
    from helpers.core.norm_maps import forward_weights_and_norms

    examples = batch.examples if isinstance(batch, EncodedBatch) else list(batch)
    for group in bucket(examples, batch_size=batch_size):
        for part in forward_parts(lm, group):
            attn, norms = forward_weights_and_norms(lm, part)
            for b, ex in enumerate(part):
                n = len(ex)
                yield ex, convert(attn[b, :, :, :n, :n], np.float32), convert(norms[b, :, :, :n, :n], np.float32)
