"""Surface-level statistics of attention (paper §3: Figures 2 and 4, and the counts of §3.1).

Definitions follow the authors' ``General_Analysis`` notebook (book/methods.md, §Surface statistics): every
statistic is computed per segment and then averaged over segments with equal weight. For one
segment of ``n`` tokens and one head with map ``A [query, key]``:

=============  =========================================================  =================
statistic      numerator                                                  denominator
=============  =========================================================  =================
``self``       sum_i A[i, i]                                              n
``next``       sum_i A[i, i+1]  (attention to the *next* token)           n
``prev``       sum_i A[i, i-1]  (attention to the *previous* token)       n
``cls``        sum_i A[i, j] over j = [CLS]                                n
``sep``        sum_i A[i, j] over j = any [SEP]                            n
``punct``      sum_i A[i, j] over j = "." or ","                           n
``sep_sep``    sum over i = [SEP], j = [SEP]                               number of [SEP]
``rest_sep``   sum over i != [SEP], j = [SEP]                              n - number of [SEP]
``entropy``    mean_i H(A'[i])                                             (a mean)
``entropy_cls``  H(A'[0]), the row of [CLS]                                (one row)
``cls_cls``    sum_j A[0, j] over j = [CLS]  ([CLS] to itself)              (one row)
=============  =========================================================  =================

Every row counts, including [CLS], [SEP] and the edge rows that have no neighbour (they add 0 to
``next``/``prev`` but stay in ``n``), as in the original. Entropy is in nats of the smoothed row
``A' = 0.9999 A + 0.0001 / n``; the original computed this in float16, where 0.9999 rounds to 1.0;
we compute in float64 with 0.9999 as written. ``uniform_entropy`` is the mean over segments of
``log n``, the entropy of uniform attention. ``cls_cls`` (the row of [CLS] on [CLS] itself) is ours: the
counterpart of ``sep_sep`` for a model whose sink is [CLS] (the paper has none).

The accumulator keeps each segment's values too (:attr:`SurfaceStats.per_segment`), so that every §3 statistic
can be bootstrapped over segments (:class:`SegmentReplicates`).

Under a causal mask (a decoder: query ``i`` sees keys ``0..i``, its prefix; :data:`CAUSAL_DEFINITIONS`) the
first position (BOS, or the first word's first token without it) takes [CLS]'s place in ``cls``; ``sep``,
``sep_sep`` and ``rest_sep`` are absent (no [SEP]), ``next`` is undefined (no query sees its next token) and
``entropy_cls`` and ``cls_cls`` too (the first position sees only itself): they are NaN in memory and left out of
the JSON, each with its reason under ``undefined``. Entropy is set against the uniform over the visible prefix: row ``i``
is smoothed over its ``i + 1`` visible keys, ``A' = 0.9999 A + 0.0001 / (i + 1)``, and ``uniform_entropy`` is
the mean over segments of the mean over rows of ``log(i + 1)``.

>>> acc = reduce_maps(lm, batch, SurfaceAccumulator,                  # doctest: +SKIP
...                   extras=lambda ex: (token_masks(lm.tokenizer, ex.input_ids),))
>>> stats = acc.result()                                             # doctest: +SKIP
>>> stats.per_head["next"].shape                                     # [layer, head]   # doctest: +SKIP
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field, replace

import numpy as np
import torch

from helpers import paper
from helpers.core import bootstrap
from helpers.core.batching import length_groups, stat_chunks
from helpers.core.encoding import special_token_ids
from helpers.core.labels import head_label

STATISTICS: tuple[str, ...] = (  # in the table's order, the order of every dict of them
    "self", "next", "prev", "cls", "sep", "punct", "sep_sep", "rest_sep", "entropy", "entropy_cls", "cls_cls",
)
ENTROPY_SMOOTHING = 1e-4  # A' = (1 - s) A + s / n, as in the original notebook
SPECIALIST_THRESHOLD = paper.POSITION_SHARE.value  # §3.1: "put >50% of their attention on the previous / next token"
# "Attends broadly": entropy above this fraction of the uniform entropy (log n). The authors' code calls a
# head broad above 3.8 nats on (mostly) 128-token segments, 0.78 of log 128; as a fraction it also holds
# for shorter segments. The one threshold of "broad attention": §3.3's [CLS] claim and §6's behaviours.
BROAD_ENTROPY_FRACTION = paper.BROAD_ENTROPY.value / math.log(paper.SEGMENT_TOKENS.value)
# A token kind is an attention "sink" in the layers where its layer-mean share of attention exceeds this
# (the surface chapter's [CLS] gradients and the norms chapter's no-op test).
SINK_SHARE = 0.25
# The statistics a causal map does not have, each with its reason (the ``undefined`` of the JSON).
CAUSAL_DEFINITIONS: dict[str, str] = {
    "sep": "absent: a decoder's input has no [SEP]",
    "sep_sep": "absent: a decoder's input has no [SEP]",
    "rest_sep": "absent: a decoder's input has no [SEP]",
    "next": "undefined: under a causal mask no query sees the next token",
    "entropy_cls": "undefined: under a causal mask the first position sees only itself",
    "cls_cls": "undefined: under a causal mask the first position sees only itself",
}


def token_masks(tokenizer, input_ids: np.ndarray, *, causal: bool = False) -> dict[str, np.ndarray]:
    """Boolean masks over one input's tokens: ``cls``, ``sep`` and ``punct`` (exactly "." or ",").

    Byte-level BPE vocabularies write a period after a space as "Ġ."; both spellings count. For a ``causal``
    input (a decoder's) ``cls`` is the first position (BOS, or the first word's first token without it),
    ``sep`` is empty (a decoder's inputs have none, even where its BOS and EOS share an id, as GPT-2's) and
    the masks say so (``"causal"``: True), which :func:`batch_statistics` reads.
    """
    ids = np.asarray(input_ids)
    tokens = tokenizer.convert_ids_to_tokens(ids.tolist())
    punct = np.array([t.lstrip("Ġ▁") in (".", ",") and len(t.lstrip("Ġ▁")) == 1 for t in tokens], dtype=bool)
    if causal:
        return {"cls": np.arange(len(ids)) == 0, "sep": np.zeros(len(ids), bool), "punct": punct,
                "causal": np.True_}
    special = special_token_ids(tokenizer)  # by role: [CLS]/[SEP] in BERT, <s>/</s> in RoBERTa and MPNet
    return {
        "cls": ids == special["cls"],
        "sep": ids == special["sep"],
        "punct": punct,
    }


def uniform_entropy(n: int, *, causal: bool = False) -> float:
    """The entropy of uniform attention over one segment of ``n`` tokens: ``log n``; under a causal mask the
    mean over rows of ``log(i + 1)`` (row ``i`` sees ``i + 1`` keys)."""
    return float(np.log(np.arange(1, n + 1)).mean()) if causal else float(np.log(n))


def batch_statistics(maps, lengths, masks: list[dict[str, np.ndarray]]) -> dict[str, np.ndarray]:
    """Every statistic of :data:`STATISTICS` for each segment of a padded batch, each ``[batch, layer, head]``
    (float64 host arrays: all that leaves the maps' device), in the order of :data:`STATISTICS` (the JSON's).

    ``maps`` ``[batch, layer, head, query, key]`` (a torch tensor, right-padded, on its device, or an array),
    ``lengths`` ``[batch]`` (rows and columns from ``n`` on are padding and enter no sum), ``masks`` one
    :func:`token_masks` per example. Computed in float64 where the maps are, the examples of one length together
    (their ``[:n, :n]`` corners), cut by :func:`helpers.core.batching.stat_chunks`. Masks of causal inputs
    (:func:`token_masks` with ``causal``) give the causal definitions (the module's docstring)."""
    A_all = torch.as_tensor(maps)
    B, L, H = A_all.shape[:3]
    causal = {bool(m.get("causal", False)) for m in masks}
    if len(causal) > 1:
        raise ValueError("a causal and a bidirectional segment in one batch")
    causal = causal.pop() if causal else False
    out = {name: np.full((B, L, H), np.nan) for name in STATISTICS}
    for n, positions in length_groups(lengths):
        for part in stat_chunks(len(positions), 5 * L * H * n * n * 8, A_all.device):  # A, smoothed, its log, ...
            idx = positions[part]
            if len(idx) == 1:  # a view, then its one copy (the statistics smooth it in place)
                A = A_all[idx[0] : idx[0] + 1, :, :, :n, :n].to(torch.float64, copy=True)  # [G, L, H, n, n]
            else:
                A = A_all[torch.as_tensor(idx, device=A_all.device), :, :, :n, :n].to(torch.float64)
            for name, value in _group_statistics(A, [masks[b] for b in idx], causal).items():
                out[name][idx] = value.cpu().numpy()
    return out


def _group_statistics(A: torch.Tensor, masks: list[dict], causal: bool) -> dict[str, torch.Tensor]:
    """The statistics of ``G`` segments of one length ``n``, ``A [G, layer, head, n, n]`` float64, smoothed in place
    for the entropy once the rest is read (those a causal map does not have left out: they stay NaN)."""
    n = A.shape[-1]
    keys = torch.as_tensor(np.stack([np.stack([np.asarray(m[k], bool) for k in ("cls", "sep", "punct")], -1)
                                     for m in masks]), device=A.device)  # [G, n, kind]
    n_sep = keys[..., 1].sum(-1).to(A.dtype)  # [G]
    if not causal and bool((n_sep == 0).any()):
        raise ValueError("segment has no [SEP] token: surface statistics need the [CLS] A [SEP] B [SEP] layout")
    to = A @ keys.to(A.dtype)[:, None, None]  # [G, layer, head, query, kind]: each row's weight on each kind
    values = {
        "self": A.diagonal(0, -2, -1).sum(-1) / n,
        "prev": A.diagonal(-1, -2, -1).sum(-1) / n,
        "cls": to[..., 0].sum(-1) / n,
        "punct": to[..., 2].sum(-1) / n,
    }
    if not causal:
        values["next"] = A.diagonal(1, -2, -1).sum(-1) / n
    smoothed = A.mul_(1.0 - ENTROPY_SMOOTHING)  # A' = (1 - s) A + s / n, in A's place
    if causal:  # row i sees keys 0..i, smoothed over those; log(1) = 0 outside
        smoothed.add_(ENTROPY_SMOOTHING / torch.arange(1, n + 1, dtype=A.dtype, device=A.device)[:, None])
        smoothed.masked_fill_(~torch.ones(n, n, dtype=torch.bool, device=A.device).tril(), 1.0)
    else:
        smoothed.add_(ENTROPY_SMOOTHING / n)
    entropy = smoothed.log().mul_(smoothed).sum(-1).neg_()  # [G, layer, head, query]
    values["entropy"] = entropy.mean(-1)
    if causal:
        return values
    sep = keys[:, None, None, :, 1].to(A.dtype)  # [G, 1, 1, query]
    row = keys[..., 0].to(torch.int8).argmax(-1)[:, None, None, None].expand(*entropy.shape[:3], 1)  # the first [CLS]
    return {
        **values,
        "sep": to[..., 1].sum(-1) / n,
        "sep_sep": (to[..., 1] * sep).sum(-1) / n_sep[:, None, None],
        "rest_sep": (to[..., 1] * (1 - sep)).sum(-1) / (n - n_sep).clamp(min=1)[:, None, None],
        "entropy_cls": entropy.gather(-1, row).squeeze(-1),
        "cls_cls": to[..., 0].gather(-1, row).squeeze(-1),
    }


@dataclass
class SurfaceStats:
    """Per-head averages ``[layer, head]`` over ``n_segments`` segments, and the uniform entropy; ``undefined``
    names the statistics a causal map does not have, with the reason (their ``per_head`` is NaN; empty for an
    encoder). ``per_segment`` holds each segment's values ``{statistic: [segment, layer, head]}`` and
    ``segment_uniform`` each segment's uniform entropy ``[segment]`` (segments in the order of their index in
    the batch), what the claims' intervals resample (:class:`SegmentReplicates`); ``None`` when only the means
    are known (:meth:`from_json`: the JSON keeps the means; :meth:`with_segments` adds the cached arrays)."""

    per_head: dict[str, np.ndarray]
    uniform_entropy: float
    n_segments: int
    undefined: dict[str, str] = field(default_factory=dict)
    per_segment: dict[str, np.ndarray] | None = field(default=None, repr=False)
    segment_uniform: np.ndarray | None = field(default=None, repr=False)

    @property
    def causal(self) -> bool:
        """Whether these are the statistics of causal maps (a decoder's)."""
        return bool(self.undefined)

    @property
    def shown(self) -> dict[str, np.ndarray]:
        """``per_head`` without the :attr:`undefined` statistics (what a figure draws: absent, not NaN)."""
        return {k: v for k, v in self.per_head.items() if k not in self.undefined}

    def heads_above(self, statistic: str, threshold: float = SPECIALIST_THRESHOLD) -> list[str]:
        """1-based labels of heads whose ``statistic`` exceeds ``threshold``, by layer then head."""
        layers, heads = np.nonzero(self.per_head[statistic] > threshold)
        return [head_label(l, h) for l, h in zip(layers, heads)]

    def best_head(self, statistic: str) -> tuple[int, int]:
        """0-based ``(layer, head)`` with the largest ``statistic``."""
        values = self.per_head[statistic]
        layer, head = np.unravel_index(int(np.argmax(values)), values.shape)
        return int(layer), int(head)

    def layer_means(self, statistic: str) -> np.ndarray:
        """``[layer]`` mean over heads."""
        return self.per_head[statistic].mean(axis=1)

    def to_json(self) -> dict:
        """``per_head``, ``uniform_entropy`` and ``n_segments``; for causal maps the undefined statistics are
        left out of ``per_head`` and named, with their reasons, under ``undefined``."""
        out = {"per_head": {k: v.round(6).tolist() for k, v in self.per_head.items() if k not in self.undefined},
               "uniform_entropy": round(float(self.uniform_entropy), 6), "n_segments": self.n_segments}
        return {**out, "undefined": dict(self.undefined)} if self.undefined else out

    @classmethod
    def from_json(cls, payload: dict) -> "SurfaceStats":
        per_head = {k: np.asarray(v) for k, v in payload["per_head"].items()}
        undefined = dict(payload.get("undefined", {}))
        shape = next(iter(per_head.values())).shape
        per_head.update({k: np.full(shape, np.nan) for k in undefined})
        return cls(per_head, payload["uniform_entropy"], payload["n_segments"], undefined)

    SEGMENT_UNIFORM = "__uniform__"  # the name of ``segment_uniform`` among :meth:`segment_arrays`

    def segment_arrays(self) -> dict[str, np.ndarray]:
        """Each segment's values as arrays for an ``.npz`` (:func:`helpers.data.cache.cached_arrays`): every
        defined statistic ``[segment, layer, head]`` and the uniform entropies under :data:`SEGMENT_UNIFORM`."""
        if self.per_segment is None:
            raise ValueError("these statistics keep no per-segment values (made from the JSON of the means)")
        return {**{k: v for k, v in self.per_segment.items() if k not in self.undefined},
                self.SEGMENT_UNIFORM: np.asarray(self.segment_uniform)}

    def with_segments(self, arrays: dict[str, np.ndarray]) -> "SurfaceStats":
        """These statistics with each segment's values (:meth:`segment_arrays`), checked against ``n_segments``
        and ``per_head``'s shape; the undefined statistics NaN, as in ``per_head``."""
        arrays = dict(arrays)
        uniform = np.asarray(arrays.pop(self.SEGMENT_UNIFORM), dtype=np.float64)
        shape = (self.n_segments, *next(iter(self.per_head.values())).shape)
        per = {k: np.asarray(v, dtype=np.float64) for k, v in arrays.items()}
        per.update({k: np.full(shape, np.nan) for k in self.undefined})
        bad = sorted(k for k, v in per.items() if v.shape != shape) + sorted(set(self.per_head) - set(per))
        if bad or uniform.shape != (self.n_segments,):
            raise ValueError(f"per-segment statistics {bad or ['uniform entropy']} do not fit {self.n_segments} "
                             f"segments of shape {shape[1:]}: recompute them (a stale cache entry)")
        return replace(self, per_segment=per, segment_uniform=uniform)


@dataclass
class SurfaceAccumulator:
    """Streaming mean of :func:`batch_statistics` (``update`` a batch of maps at a time, ``merge`` partials, then
    ``result``: the protocol of :class:`helpers.reduce.Accumulator`), keeping each segment's values too.

    A segment's masks may carry its index in the batch (``masks["segment"]``, what the passes add): the result then
    orders the per-segment values by it, whatever order the shards and their passes fed them in; without it they
    stay in the order fed. The sums, and so the means, are those of the order fed (merged in shard order)."""

    sums: dict[str, np.ndarray] = field(default_factory=dict)
    log_n: float = 0.0
    count: int = 0
    causal: bool = False  # set by the first causal segment (its masks say so)
    segments: dict[str, list] = field(default_factory=dict)   # each segment's [layer, head] per statistic, as fed
    log_ns: list = field(default_factory=list)                # each segment's uniform entropy, as fed
    order: list = field(default_factory=list)                 # each segment's index (masks["segment"]) or None

    def update(self, batch, extras: list[tuple]) -> None:
        """Add a :class:`~helpers.core.extract.MapBatch` of segments (its ``weights``, on their device) with one
        ``(token_masks,)`` per example: :func:`batch_statistics`, then each segment's values added in the batch's
        order."""
        masks = [e[0] for e in extras]
        causal = {bool(m.get("causal", False)) for m in masks} | ({self.causal} if self.count else set())
        if len(causal) > 1:
            raise ValueError("a causal and a bidirectional segment in one accumulator")
        values = batch_statistics(batch.weights, batch.lengths, masks)
        for b, n in enumerate(batch.lengths.tolist()):
            self.causal = causal = bool(masks[b].get("causal", False))
            for name, value in values.items():
                self.sums[name] = self.sums.get(name, 0.0) + value[b]
                self.segments.setdefault(name, []).append(value[b])
            log_n = uniform_entropy(n, causal=causal)
            self.log_n += log_n
            self.log_ns.append(log_n)
            self.order.append(masks[b].get("segment"))
            self.count += 1

    def merge(self, other: "SurfaceAccumulator") -> "SurfaceAccumulator":
        """Add ``other``'s segments (e.g. another shard's partial, see :func:`helpers.pipeline.route.reduce_maps`)
        to this accumulator, in place; returns it. Merging shards' partials in one fixed order gives the
        same sums however the shards were computed."""
        if self.count and other.count and other.causal != self.causal:
            raise ValueError("cannot merge the statistics of causal and bidirectional maps")
        self.causal = self.causal or other.causal
        for name, value in other.sums.items():
            self.sums[name] = self.sums.get(name, 0.0) + value
        for name, values in other.segments.items():
            self.segments.setdefault(name, []).extend(values)
        self.log_n += other.log_n
        self.log_ns.extend(other.log_ns)
        self.order.extend(other.order)
        self.count += other.count
        return self

    def result(self) -> SurfaceStats:
        if self.count == 0:
            raise ValueError("no segments were added")
        known = [i for i in self.order if i is not None]
        if known and len(known) < len(self.order):
            raise ValueError("some segments carry their index (masks['segment']) and some do not")
        if len(set(known)) < len(known):
            raise ValueError("a segment index (masks['segment']) was added twice")
        rank = np.argsort(np.asarray(known), kind="stable") if known else np.arange(self.count)
        return SurfaceStats({k: v / self.count for k, v in self.sums.items()}, self.log_n / self.count, self.count,
                            dict(CAUSAL_DEFINITIONS) if self.causal else {},
                            per_segment={k: np.stack(v)[rank] for k, v in self.segments.items()},
                            segment_uniform=np.asarray(self.log_ns, dtype=np.float64)[rank])


def sink_layers(layer_share: np.ndarray, threshold: float = SINK_SHARE) -> np.ndarray:
    """0-based layers whose layer-mean share of attention (``[layer]``) exceeds ``threshold`` (may be none)."""
    return np.flatnonzero(np.asarray(layer_share) > threshold)


SINK_NAMES = {"cls": "[CLS]", "sep": "[SEP]"}  # the special tokens a sink premise is about (a decoder's "cls": BOS)


def sink_premise(layer_shares: dict[str, np.ndarray], kind: str, *, threshold: float = SINK_SHARE,
                 name: str | None = None) -> str | None:
    """The premise of a claim about a role of the token ``kind`` (``"sep"``, ``"cls"``) as a sink: ``None`` when it
    holds (some layer gives more than ``threshold`` of its attention to ``kind``, ``layer_shares[kind]`` ``[layer]``
    being each layer's mean share), else the reason the claim is not applicable, with the measured share. ``name``:
    the token in words (default :data:`SINK_NAMES`; a decoder's ``"cls"`` is its first position).

    >>> print(sink_premise({"sep": np.array([0.01, 0.02])}, "sep"))
    [SEP] is not a sink of this model: it takes at most 0.02 of any layer's attention (a sink takes more than 0.25)
    """
    shares = np.asarray(layer_shares[kind], dtype=np.float64)
    top = float(np.nanmax(shares)) if shares.size else float("nan")
    if top > threshold:
        return None
    return (f"{name or SINK_NAMES.get(kind, kind)} is not a sink of this model: it takes at most {top:.2f} of any "
            f"layer's attention (a sink takes more than {threshold:g})")


def measured_sink(layer_shares: dict[str, np.ndarray], kinds=("cls", "sep")) -> str:
    """The special token of ``kinds`` this model parks most attention on: the one whose largest layer-mean share
    (``layer_shares[kind]`` ``[layer]``) is largest (a decoder has only ``"cls"``, its first position: pass
    ``kinds=("cls",)``). Whether it is a sink at all is :func:`sink_premise`'s to say."""
    present = [k for k in kinds if k in layer_shares and np.isfinite(np.asarray(layer_shares[k])).any()]
    if not present:
        raise ValueError(f"measured_sink: none of {kinds} has shares")
    return max(present, key=lambda k: float(np.nanmax(layer_shares[k])))


def gradient_ratio(grads: dict, kind: str, layers: np.ndarray) -> float:
    """Mean ``|dL/d alpha|`` for attention to ``kind`` over that to other tokens, in 0-based ``layers``
    (``grads``: ``{kind: [layer]}`` as :func:`helpers.surface.gradients.gradient_importance` returns);
    NaN when ``layers`` is empty."""
    layers = np.asarray(layers, dtype=int)
    if len(layers) == 0:
        return float("nan")
    with np.errstate(divide="ignore", invalid="ignore"):  # no gradient for other tokens: inf or NaN, not applicable
        return float(np.mean(np.asarray(grads[kind])[layers]) / np.mean(np.asarray(grads["other"])[layers]))


def gradient_ratio_interval(grads: dict, kind: str, layers: np.ndarray, *, n_boot: int | None = None,
                            seed: int = 0) -> tuple[float, float]:
    """The 95 % interval of :func:`gradient_ratio` over the segments resampled (:mod:`helpers.core.bootstrap`):
    ``grads["per_segment"]`` holds ``{kind: [segment, layer]}``, each segment's mean ``|dL/d alpha|`` (the gradients
    of :func:`helpers.surface.gradients.gradient_importance` average them, segments counting equally). NaN ends
    when ``layers`` is empty, the kind is absent (``None``: a decoder's [SEP]) or no per-segment values were kept.

    >>> per = {"sep": np.array([[1.0], [3.0]]), "other": np.array([[2.0], [2.0]])}
    >>> lo, hi = gradient_ratio_interval({"per_segment": per}, "sep", np.array([0]), n_boot=200)
    >>> bool(0.5 <= lo <= 1.0 <= hi <= 1.5)
    True
    """
    per = grads.get("per_segment") or {}
    layers = np.asarray(layers, dtype=int)
    if len(layers) == 0 or per.get(kind) is None or per.get("other") is None:
        return float("nan"), float("nan")
    num = np.asarray(per[kind], dtype=np.float64)[:, layers].mean(-1)    # [segment]: the mean over the layers
    den = np.asarray(per["other"], dtype=np.float64)[:, layers].mean(-1)
    c = bootstrap.counts(len(num), seed=seed, **({} if n_boot is None else {"n_boot": n_boot}))
    return bootstrap.percentile_interval(bootstrap.ratio_replicates(num, den, c))


# ------------------------------------------------------------------ intervals: the segments resampled


class SegmentReplicates:
    """Bootstrap replicates of the §3 statistics over segments (:mod:`helpers.core.bootstrap`): each replicate
    draws ``n_segments`` segments with replacement (:func:`~helpers.core.bootstrap.counts`, ``n_boot`` replicates,
    ``seed``) and recomputes a statistic from the drawn segments' values (``stats.per_segment``), every segment
    counting once per draw, as in the means. Replicates are ``[n_boot, ...]``; each array is computed once.

    >>> boot = SegmentReplicates(stats)                       # doctest: +SKIP
    >>> boot.layer_means("sep").shape    # [n_boot, layer]       # doctest: +SKIP
    (1000, 6)
    """

    def __init__(self, stats: SurfaceStats, *, n_boot: int | None = None, seed: int = 0):
        if stats.per_segment is None:
            raise ValueError("the §3 intervals need each segment's statistics (SurfaceStats.per_segment): read the "
                             "statistics with helpers.surface.run.cached_surface_statistics, which keeps them")
        self.stats = stats
        self.n_boot = bootstrap.BOOTSTRAP if n_boot is None else n_boot
        self.counts = bootstrap.counts(stats.n_segments, n_boot=self.n_boot, seed=seed)  # [n_boot, segment]
        self._heads: dict[str, np.ndarray] = {}

    def head_means(self, statistic: str) -> np.ndarray:
        """``[n_boot, layer, head]``: each replicate's mean over its drawn segments."""
        if statistic not in self._heads:
            self._heads[statistic] = bootstrap.mean_replicates(self.stats.per_segment[statistic], self.counts)
        return self._heads[statistic]

    def layer_means(self, statistic: str) -> np.ndarray:
        """``[n_boot, layer]``: each replicate's mean over heads (as :meth:`SurfaceStats.layer_means`)."""
        return self.head_means(statistic).mean(-1)

    def uniform_entropy(self) -> np.ndarray:
        """``[n_boot]``: each replicate's mean uniform entropy (``log n``, or its causal form)."""
        return bootstrap.mean_replicates(self.stats.segment_uniform, self.counts)


def share_some_head_above(boot: SegmentReplicates, statistic: str, threshold: float = SPECIALIST_THRESHOLD) -> float:
    """The share of replicates in which some head's mean ``statistic`` exceeds ``threshold`` (§3.1: "some head
    puts more than half of its attention on the previous token")."""
    return bootstrap.share_holding((boot.head_means(statistic) > threshold).any(axis=(1, 2)))


def share_some_layer_above(boot: SegmentReplicates, statistic: str, threshold: float) -> float:
    """The share of replicates in which some layer's mean ``statistic`` (over its heads) exceeds ``threshold``."""
    return bootstrap.share_holding((boot.layer_means(statistic) > threshold).any(axis=1))


def share_broadest_layer(boot: SegmentReplicates, layer: int = 0) -> float:
    """The share of replicates in which the 0-based ``layer`` has the highest mean entropy of all layers."""
    return bootstrap.share_holding(boot.layer_means("entropy").argmax(axis=1) == layer)


SELF_STATISTIC = {"sep": "sep_sep", "cls": "cls_cls"}  # a sink kind's attention from itself to itself


def top_layers(layer_shares: np.ndarray) -> np.ndarray:
    """0-based indices of the half of the layers (at least one) with the largest ``layer_shares`` ``[layer]``,
    largest first."""
    shares = np.asarray(layer_shares)
    return np.argsort(shares)[::-1][: max(1, len(shares) // 2)]


def self_attention(stats: SurfaceStats, kind: str) -> tuple[float, int]:
    """``(share, layers)``: the attention of the token ``kind`` (``"sep"``, ``"cls"``) to its own kind
    (:data:`SELF_STATISTIC`: [SEP] to any [SEP], [CLS] to itself), the mean over the half of the layers (at least
    one) that give ``kind`` the most attention (:func:`top_layers`), and how many layers that is."""
    top = top_layers(stats.layer_means(kind))
    return float(stats.per_head[SELF_STATISTIC[kind]][top].mean()), len(top)


def self_attention_replicates(boot: SegmentReplicates, kind: str) -> np.ndarray:
    """``[n_boot]``: :func:`self_attention` in each replicate, its layers chosen again in each (the choice of the
    layers is part of the statistic)."""
    shares, own = boot.layer_means(kind), boot.layer_means(SELF_STATISTIC[kind])
    k = max(1, shares.shape[1] // 2)
    top = np.argsort(shares, axis=1)[:, ::-1][:, :k]
    return np.take_along_axis(own, top, axis=1).mean(axis=1)


def cls_entropy_fraction(stats: SurfaceStats) -> float:
    """The last layer's mean entropy from [CLS] as a fraction of the uniform entropy (§3.3: "attends broadly")."""
    return float(stats.layer_means("entropy_cls")[-1] / stats.uniform_entropy)


def cls_entropy_fraction_replicates(boot: SegmentReplicates) -> np.ndarray:
    """``[n_boot]``: :func:`cls_entropy_fraction` in each replicate (a ratio of the drawn segments' sums)."""
    last = boot.stats.per_segment["entropy_cls"][:, -1].mean(-1)  # [segment]: the last layer, mean over heads
    return bootstrap.ratio_replicates(last, boot.stats.segment_uniform, boot.counts)
