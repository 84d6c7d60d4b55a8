"""Beyond the paper: attention weights against attention norms (Kobayashi et al., 2020), end to end.

Segments (the surface chapter's, :func:`helpers.pipeline.segments.build_segments`) -> one streaming
pass of weights and norms -> per-head shares of [CLS], [SEP], "." / "," and other tokens under both,
and their Spearman correlation (cached), each segment's shares kept beside them for bootstrap intervals
(:func:`cached_norm_statistics`) -> claims. Table 1 is re-scored on word-level norm maps
(cached like weight maps). Shared by the chapter and ``python -m helpers norms --json OUT``, whose
JSON layout is a contract (see :func:`norms_json`).

>>> report = run_norms(lm, n_segments=1000, seed=0)                   # doctest: +SKIP
>>> report.stats.layer_share("norms", "sep")                           # doctest: +SKIP
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import partial

import numpy as np

from helpers.context import RunContext, takes_context
from helpers.core import bootstrap
from helpers.core.encoding import MAX_LENGTH, EncodedBatch
from helpers.core.models import LoadedModel
from helpers.data.cache import cached_arrays, cached_json
from helpers.digest import code_digest
from helpers.norms.stats import NormAccumulator, NormSegments, NormStats, kind_masks
from helpers.pipeline.extraction import encode_treebank
from helpers.pipeline.route import reduce_maps
from helpers.pipeline.segments import SEGMENTS, build_segments
from helpers.syntax.stats import HeadScorer, HeadScores


@dataclass
class NormsReport:
    model: str
    segments: dict
    stats: NormStats
    batch: EncodedBatch


def norm_statistics(lm: LoadedModel, batch: EncodedBatch, ctx: RunContext | None = None) -> NormStats:
    """Every statistic of :class:`~helpers.norms.stats.NormAccumulator` in one streaming pass of weights and norms
    (:func:`helpers.pipeline.route.reduce_maps`: no corpus of maps in memory; where, ``ctx.execution`` says)."""
    return reduce_maps(lm, batch, NormAccumulator, maps="weights+norms", ctx=ctx,
                       extras=lambda ex: (kind_masks(lm.tokenizer, ex.input_ids, causal=lm.causal),)).result()


def stats_key(lm: LoadedModel, batch: EncodedBatch) -> dict:
    """The cache key of the norm statistics of ``batch`` (the model, the segments and the code computing them:
    :func:`norm_statistics` and every module it imports)."""
    return {"model": lm.fingerprint(), "data": batch.digest(), "token_types": lm.token_types,
            "code": code_digest(norm_statistics)}


@takes_context
def run_norms(lm: LoadedModel, ctx: RunContext | None = None, *, n_segments: int = SEGMENTS, seed: int = 0,
              max_length: int = MAX_LENGTH) -> NormsReport:
    """Shares under weights and norms and their correlation over the surface chapter's segments (cached;
    computed where ``ctx.execution`` says, :mod:`helpers.pipeline.engine`)."""
    batch = build_segments(lm, n_segments=n_segments, seed=seed, max_length=max_length, data_dir=ctx.data_dir,
                           cache_root=ctx.cache_dir)
    stats = cached_norm_statistics(lm, batch, cache_root=ctx.cache_dir, compute=lambda: norm_statistics(lm, batch, ctx))
    return NormsReport(lm.label, batch.summary(), stats, batch)


SEGMENTS_KIND = "norm-segments"  # the cache's name for each segment's shares (an .npz beside "norm-stats")


def keep_segments(stats: NormStats, key: dict, cache_root=None) -> None:
    """Write ``stats``' per-segment shares (:class:`~helpers.norms.stats.NormSegments`) to the cache under ``key``
    (the key of its ``norm-stats``), as :func:`cached_norm_statistics` reads them: what the shared segment pass
    (:mod:`helpers.segment_pass`) calls beside writing the means."""
    cached_arrays(SEGMENTS_KIND, key, stats.segments.to_arrays, cache_root=cache_root, refresh=True)


def cached_norm_statistics(lm: LoadedModel, batch: EncodedBatch, *, compute, cache_root=None) -> NormStats:
    """The norm statistics of ``batch`` from the cache (the means, ``norm-stats``, JSON; each segment's shares,
    :data:`SEGMENTS_KIND`, an ``.npz`` of float32: 32 bytes a segment and head), else ``compute()``'s
    (a :class:`~helpers.norms.stats.NormStats`), both kept: a cache missing either computes both again. The
    segments are attached as float32 either way, so a cold and a warm run give the same intervals."""
    key = stats_key(lm, batch)
    made: dict = {}

    def fresh() -> NormStats:
        if "stats" not in made:
            made["stats"] = compute()
        return made["stats"]

    arrays = cached_arrays(SEGMENTS_KIND, key, lambda: fresh().segments.to_arrays(), cache_root=cache_root)
    stats = NormStats.from_cache(cached_json("norm-stats", key, lambda: fresh().to_cache(), cache_root=cache_root))
    stats.segments = NormSegments.from_arrays(arrays)
    return stats


def norms_json(report: NormsReport) -> dict:
    """The ``norms`` command's JSON: ``{"model", "segments", "heads": {"L-H": ...}, "layers": {"1": ...}}``."""
    return {"model": report.model, **report.stats.to_json()}


def table1_comparison(weights: HeadScores, norms: HeadScores, relations: list[str], *, n_boot: int = bootstrap.BOOTSTRAP,
                      seed: int = 0) -> list[dict]:
    """Per relation: the best head under weight maps and under norm maps (each chosen on these words, as the
    paper's Table 1 chose), their accuracies and the change in points, with the change's 95 % interval
    (``change_interval``): a paired comparison on the same words, the sentences resampled
    (:func:`paired_change`; ``sentences``: how many)."""
    rows = []
    w_table, n_table = weights.table(), norms.table()
    draws = bootstrap.counts(weights.n_sentences, n_boot=n_boot, seed=seed)  # the same draws for every relation
    for relation in relations:
        if relation not in w_table or relation not in n_table:
            continue
        w, n = w_table[relation], n_table[relation]
        interval = paired_change(weights, norms, relation, weights.best(relation)["_index"],
                                 norms.best(relation)["_index"], counts=draws)
        rows.append({"relation": relation, "count": w["count"],
                     "weights_head": w["best_head"], "weights_direction": w["direction"], "weights_accuracy": w["accuracy"],
                     "norms_head": n["best_head"], "norms_direction": n["direction"], "norms_accuracy": n["accuracy"],
                     "change": round(n["accuracy"] - w["accuracy"], 4),
                     "same_head": (w["best_head"], w["direction"]) == (n["best_head"], n["direction"]),
                     "baseline_accuracy": w["baseline_accuracy"],
                     "change_interval": [round(float(x), 4) for x in interval], "sentences": weights.n_sentences})
    return rows


def paired_change(weights: HeadScores, norms: HeadScores, relation: str, weights_index: tuple, norms_index: tuple, *,
                  n_boot: int = bootstrap.BOOTSTRAP, seed: int = 0, counts: np.ndarray | None = None) -> tuple[float, float]:
    """The 95 % interval of the change in accuracy (points) on ``relation`` from the weight maps' head
    ``weights_index`` to the norm maps' head ``norms_index`` (each ``(direction, layer, head)``), paired: both
    heads are scored on the same words, and each replicate draws the sentences once for both,
    ``100 * (sum correct_norms - sum correct_weights) / sum words`` over the drawn sentences. Both scores must come
    from the same words (the same treebank and sentences), else ``ValueError``. ``counts``: the draws
    (:func:`helpers.core.bootstrap.counts` over the sentences), made here from ``n_boot`` and ``seed`` when not given."""
    def labels(scores: HeadScores) -> np.ndarray:  # each word's relation by name (shards may number them apart)
        return np.asarray(scores.relations, dtype=object)[scores.word_relation]

    if not (np.array_equal(weights.word_sentence, norms.word_sentence)
            and np.array_equal(labels(weights), labels(norms))):
        raise ValueError("paired_change: the weight and norm scores are not of the same words (score both maps on "
                         "the same treebank and sentences)")
    c_w, total = weights.head_correct(relation, weights_index)
    c_n, _ = norms.head_correct(relation, norms_index)
    c = bootstrap.counts(len(total), n_boot=n_boot, seed=seed) if counts is None else counts
    with np.errstate(invalid="ignore", divide="ignore"):
        diff = 100.0 * (bootstrap.sums(c_n, c) - bootstrap.sums(c_w, c)) / bootstrap.sums(total, c)
    return bootstrap.percentile_interval(diff)


def same_predictions(weights: HeadScores, norms: HeadScores) -> np.ndarray:
    """``[direction]`` share of (head, word) predictions that weights and norms make alike (correctness equal)."""
    return (weights.word_correct == norms.word_correct).mean(axis=(1, 2, 3))


@takes_context
def run_table1_norms(lm: LoadedModel, corpus: str, ctx: RunContext | None = None, *, max_sentences: int | None = None,
                     max_length: int = MAX_LENGTH, word_mode: str = "mean") -> HeadScores:
    """Every head scored as a parser (:class:`~helpers.syntax.stats.HeadScorer`) on word-level *norm* maps of
    ``corpus``, on the one route (:func:`~helpers.pipeline.route.reduce_maps`: the cached maps when the cache holds
    them, else the model's passes, here or on a distributed ``ctx.execution``'s workers, whose maps are written only
    with ``keep_maps``)."""
    sentences, batch, digest = encode_treebank(lm, corpus, max_sentences=max_sentences, max_length=max_length,
                                               data_dir=ctx.data_dir, cache_root=ctx.cache_dir)
    return reduce_maps(lm, batch, partial(HeadScorer, causal=lm.causal, maps="norms"), level="word", maps="norms",
                       ctx=ctx, extras=lambda ex: (sentences[ex.index],), word_mode=word_mode,
                       source_digest=digest).result()
