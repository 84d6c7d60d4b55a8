"""Paper §3 end to end: segments -> one streaming pass of statistics -> gradients -> claims.

Used by the chapter notebook and by ``python -m helpers surface --json OUT`` alike, so both report
the same numbers. Results are cached on disk, keyed by the model's weights, the encoded segments,
the settings and the code that computes them (:func:`helpers.digest.code_digest`: this module and
everything it imports).

>>> report = run_surface(lm, n_segments=1000, seed=0)                  # doctest: +SKIP
>>> report.stats.heads_above("prev")                                    # doctest: +SKIP
['2-3', '3-5']
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from torch import nn

from helpers.context import RunContext, takes_context
from helpers.core.encoding import MAX_LENGTH, EncodedBatch
from helpers.core.models import LoadedModel
from helpers.data.cache import NotCached, cached_arrays, cached_json, not_cached
from helpers.data.segments import SegmentSource, segment_tokens
from helpers.digest import code_digest
from helpers.pipeline.route import reduce_maps
from helpers.pipeline.segments import (
    DEFAULT_SOURCE,
    SEGMENTS,
    SMALL_SEGMENTS,
    build_segments,
    segments_key,
)
from helpers.surface.gradients import KINDS, gradient_importance
from helpers.surface.mlm import mlm_head
from helpers.surface.stats import (
    SPECIALIST_THRESHOLD,
    SurfaceAccumulator,
    SurfaceStats,
    self_attention,
    token_masks,
)

# What ``mlm_head`` says for a decoder: its gradients come from its own language-model head, nothing fitted.
LM_HEAD_SOURCE = {"source": "the model's own language-model head (next-token loss; nothing fitted)"}

# SEGMENTS, SMALL_SEGMENTS (the chapters' segments) come from helpers.pipeline.segments, shared with §6 and norms


@dataclass
class SurfaceReport:
    model: str
    segments: dict
    stats: SurfaceStats
    gradients: dict | None
    mlm: dict | None
    batch: EncodedBatch
    segments_from: str = DEFAULT_SOURCE

    def to_json(self) -> dict:
        s = self.stats
        return {
            "model": self.model, "segments": self.segments, "segments_from": self.segments_from,
            "segment_tokens": segment_tokens(self.batch), **s.to_json(),
            "layer_means": {k: s.layer_means(k).round(6).tolist() for k in s.per_head if k not in s.undefined},
            "prev_heads": s.heads_above("prev"), "next_heads": None if "next" in s.undefined else s.heads_above("next"),
            "threshold": SPECIALIST_THRESHOLD, "gradients": gradients_json(self.gradients), "mlm_head": self.mlm,
        }


def gradients_json(grads: dict | None) -> dict | None:
    """The gradients as the JSON shows them: the means per layer, without each segment's values
    (``per_segment``, kept in the cache beside them)."""
    return None if grads is None else {k: v for k, v in grads.items() if k != "per_segment"}


def _store(kind: str, key: dict, parts: tuple[dict, dict[str, np.ndarray]], cache_root) -> tuple[dict, dict]:
    """Store ``parts`` = ``(value, arrays)`` under ``key``, whatever the cache holds: the JSON ``value``
    (:func:`~helpers.data.cache.cached_json`, ``kind``) and, beside it, each segment's values (``arrays``, an ``.npz``:
    :func:`~helpers.data.cache.cached_arrays`, ``kind + "-segments"``); returns ``parts``."""
    value, arrays = parts
    cached_arrays(f"{kind}-segments", key, lambda: arrays, cache_root=cache_root, refresh=True)
    cached_json(kind, key, lambda: value, cache_root=cache_root, refresh=True)
    return value, arrays


def _cached_with_segments(kind: str, key: dict, compute, *, cache_root) -> tuple[dict, dict[str, np.ndarray]]:
    """``(value, arrays)`` stored under ``key`` (:func:`_store`); ``compute()`` gives both, once, when the cache
    lacks either (or a refresh is asked)."""
    try:
        return (cached_json(kind, key, not_cached, cache_root=cache_root),
                cached_arrays(f"{kind}-segments", key, not_cached, cache_root=cache_root))
    except NotCached:
        return _store(kind, key, compute(), cache_root)


def _statistics_parts(stats: SurfaceStats) -> tuple[dict, dict[str, np.ndarray]]:
    return stats.to_json(), stats.segment_arrays()


def _statistics_from(parts: tuple[dict, dict[str, np.ndarray]]) -> SurfaceStats:
    value, arrays = parts
    return SurfaceStats.from_json(value).with_segments(arrays)


def cached_statistics(key: dict, *, cache_root=None) -> SurfaceStats | None:
    """The §3 statistics cached under ``key`` (:func:`stats_key`), with each segment's values; ``None`` when the
    cache lacks either (what :func:`helpers.segment_pass.segment_statistics` checks before its pass)."""
    try:
        return _statistics_from(_cached_with_segments("surface-stats", key, not_cached, cache_root=cache_root))
    except NotCached:
        return None


def store_statistics(key: dict, stats: SurfaceStats, *, cache_root=None) -> SurfaceStats:
    """Store ``stats`` (with each segment's values) under ``key`` (:func:`stats_key`), whatever the cache holds;
    returns them as a later read gives them (the means rounded as the JSON keeps them)."""
    return _statistics_from(_store("surface-stats", key, _statistics_parts(stats), cache_root))


def surface_statistics(lm: LoadedModel, batch: EncodedBatch, ctx: RunContext | None = None) -> SurfaceStats:
    """Every §3 statistic in one streaming pass (:func:`helpers.pipeline.route.reduce_maps`): no map of the corpus
    is held in memory; where the shards run is ``ctx.execution`` (default the context in force's), the same
    numbers either way."""
    return reduce_maps(lm, batch, SurfaceAccumulator, ctx=ctx, extras=lambda ex: (segment_masks(lm, ex),)).result()


def segment_masks(lm: LoadedModel, example) -> dict[str, np.ndarray]:
    """The :func:`~helpers.surface.stats.token_masks` of one segment, with its index in the batch (``"segment"``),
    by which :class:`~helpers.surface.stats.SurfaceAccumulator` orders each segment's values."""
    return {**token_masks(lm.tokenizer, example.input_ids, causal=lm.causal), "segment": int(example.index)}


def stats_key(lm: LoadedModel, batch: EncodedBatch, segments_from: SegmentSource = DEFAULT_SOURCE) -> dict:
    """The cache key of the §3 statistics of ``batch`` (the model, the segments and the code computing them:
    :func:`surface_statistics` and every module it imports)."""
    return {"model": lm.fingerprint(), "data": batch.digest(), "token_types": lm.token_types,
            "code": code_digest(surface_statistics), **segments_key(segments_from)}


def cached_surface_statistics(lm: LoadedModel, batch: EncodedBatch, *, segments_from: SegmentSource = DEFAULT_SOURCE,
                              ctx: RunContext | None = None) -> SurfaceStats:
    """:func:`surface_statistics`, cached on disk (in ``ctx``'s cache, keyed by the model's weights, the encoded
    segments and their construction; not by where they were computed: both engines give the same result): the
    means as JSON and each segment's values beside them (an ``.npz``), read back together."""
    cache_root = None if ctx is None else ctx.cache_dir
    return _statistics_from(_cached_with_segments(
        "surface-stats", stats_key(lm, batch, segments_from),
        lambda: _statistics_parts(surface_statistics(lm, batch, ctx)), cache_root=cache_root))


@takes_context
def run_surface(lm: LoadedModel, ctx: RunContext | None = None, *, n_segments: int = SEGMENTS, seed: int = 0,
                max_length: int = MAX_LENGTH, segments_from: SegmentSource = DEFAULT_SOURCE, gradients: bool = True,
                gradient_segments: int | None = None) -> SurfaceReport:
    """Statistics (cached), the masked-LM head and gradient importance (cached) for one model.

    The context's ``execution`` says where the statistics run (:mod:`helpers.pipeline.engine`); the masked-LM head and
    the gradients always run in this process.

    The analysed segments come from GUM train (``segments_from``: see :mod:`helpers.data.segments`); the
    masked-LM head of a model without one is fitted on other GUM train segments (seed + 1) and
    evaluated on GUM dev segments."""
    cache_root, progress = ctx.cache_dir, ctx.progress
    seg = dict(max_length=max_length, segments_from=segments_from, data_dir=ctx.data_dir, cache_root=cache_root)
    batch = build_segments(lm, n_segments=n_segments, seed=seed, **seg)
    key = stats_key(lm, batch, segments_from)
    stats = cached_surface_statistics(lm, batch, segments_from=segments_from, ctx=ctx)
    grads = mlm = None
    if gradients:
        if lm.causal:  # the model's own next-token loss: nothing is fitted
            head, mlm = None, dict(LM_HEAD_SOURCE)
        else:
            head, mlm = gradient_head(lm, ctx, n_segments=n_segments, seed=seed, max_length=max_length,
                                      segments_from=segments_from)
        grad_batch = batch if gradient_segments is None else EncodedBatch(
            batch.examples[:gradient_segments], [], batch.max_length)
        fitted = {k: v for k, v in mlm.items() if k != "cached"}
        grads = cached_gradients({**key, "grad": grad_batch.digest(), "head": fitted, "seed": seed,
                                  "grad_code": code_digest(gradient_importance)},
                                 lambda: gradient_importance(lm, head, grad_batch, seed=seed, progress=progress),
                                 cache_root=cache_root)
    return SurfaceReport(lm.label, batch.summary(), stats, grads, mlm, batch, segments_from)


def cached_gradients(key: dict, compute, *, cache_root=None) -> dict:
    """The gradients (:func:`~helpers.surface.gradients.gradient_importance`, ``compute()``) cached under ``key``:
    the means per layer as JSON and each segment's values (``per_segment``) beside them, read back together as
    ``{..., "per_segment": {kind: [segment, layer]}}`` (a decoder's ``"sep"``: ``None``)."""
    def parts() -> tuple[dict, dict[str, np.ndarray]]:
        grads = compute()
        return gradients_json(grads), {k: v for k, v in grads["per_segment"].items() if v is not None}

    value, arrays = _cached_with_segments("surface-gradients", key, parts, cache_root=cache_root)
    return {**value, "per_segment": {k: (np.asarray(arrays[k], dtype=np.float64) if k in arrays else None)
                                     for k in KINDS}}


def gradient_head(lm: LoadedModel, ctx: RunContext, *, n_segments: int = SEGMENTS, seed: int = 0,
                  max_length: int = MAX_LENGTH, segments_from: SegmentSource = DEFAULT_SOURCE) -> tuple[nn.Module, dict]:
    """``(head, report)``: the masked-LM head of an encoder's gradient analysis (§3.2): the checkpoint's own, else a
    head fitted on GUM train segments (seed + 1) and evaluated on GUM dev segments, cached (what
    :func:`run_surface` scores the gradients with; the ablation chapter's loss reuses it frozen)."""
    seg = dict(max_length=max_length, segments_from=segments_from, data_dir=ctx.data_dir, cache_root=ctx.cache_dir)
    train = build_segments(lm, n_segments=n_segments, seed=seed + 1, **seg)
    heldout = build_segments(lm, split="dev", n_segments=max(n_segments // 5, 20), seed=seed + 1, **seg)
    return mlm_head(lm, train, heldout, seed=seed, cache_root=ctx.cache_dir)


def sep_self_attention(stats: SurfaceStats) -> tuple[float, int]:
    """``(attention from [SEP] to [SEP], layers)``: the mean over the half of the layers (at least one)
    with the most attention to [SEP] (:func:`~helpers.surface.stats.self_attention` of ``"sep"``)."""
    return self_attention(stats, "sep")


# Figure 1's patterns: each panel's name and the statistic whose highest head it draws.
FIGURE1_PATTERNS = {"attends broadly": "entropy", "attends to the next token": "next", "attends to [SEP]": "sep",
                    "attends to periods and commas": "punct"}


def figure1_heads(stats: SurfaceStats) -> dict[str, tuple[int, int]]:
    """Figure 1's four example heads, chosen by rule: the head with the highest value of each pattern (the
    patterns a causal map does not have, ``next`` and [SEP], are left out: :func:`figure1_undefined`)."""
    return {name: stats.best_head(k) for name, k in FIGURE1_PATTERNS.items() if k not in stats.undefined}


def figure1_undefined(stats: SurfaceStats) -> dict[str, str]:
    """Figure 1's patterns that ``stats`` does not have (a decoder's), each with the statistic's reason."""
    return {name: stats.undefined[k] for name, k in FIGURE1_PATTERNS.items() if k in stats.undefined}


def example_segment(lm: LoadedModel, batch: EncodedBatch, *, min_tokens: int = 30, max_tokens: int = 50) -> int:
    """Position in ``batch.examples`` of the first segment of ``min_tokens..max_tokens`` tokens that holds
    both a period and a comma (Figure 1's example, chosen by rule)."""
    for position, ex in enumerate(batch.examples):
        tokens = set(lm.tokenizer.convert_ids_to_tokens(ex.input_ids.tolist()))
        if min_tokens <= len(ex) <= max_tokens and {".", ","} <= {t.lstrip("Ġ") for t in tokens}:
            return position
    return int(np.argmin([abs(len(ex) - max_tokens) for ex in batch.examples]))


# ------------------------------------------------------------------------------------- CLI
