"""Beyond the paper: attention weights against attention norms (Kobayashi et al., 2020), end to end.

Segments (the surface chapter's, :func:`helpers.pipeline.segments.build_segments`) -> one streaming
pass of weights and norms -> per-head shares of [CLS], [SEP], "." / "," and other tokens under both,
and their Spearman correlation (cached) -> claims. Table 1 is re-scored on word-level norm maps
(cached like weight maps). Shared by the chapter and ``python -m helpers norms --json OUT``, whose
JSON layout is a contract (see :func:`norms_json`).

>>> report = run_norms(lm, n_segments=1000, seed=0)                   # doctest: +SKIP
>>> report.stats.layer_share("norms", "sep")                           # doctest: +SKIP
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from helpers.context import RunContext, takes_context
from helpers.core.encoding import MAX_LENGTH, EncodedBatch
from helpers.core.models import LoadedModel
from helpers.data.cache import cached_json
from helpers.digest import code_digest
from helpers.norms.stats import NormStats, norm_statistics
from helpers.pipeline.extraction import encode_treebank, one_pass_store
from helpers.pipeline.segments import SEGMENTS, build_segments
from helpers.reduce import merge_all, stage_device
from helpers.syntax.stats import HeadScorer, HeadScores, score_heads, shard_scorers


@dataclass
class NormsReport:
    model: str
    segments: dict
    stats: NormStats
    batch: EncodedBatch


def stats_key(lm: LoadedModel, batch: EncodedBatch) -> dict:
    """The cache key of the norm statistics of ``batch`` (the model, the segments and the code computing them:
    :func:`~helpers.norms.stats.norm_statistics` and every module it imports)."""
    return {"model": lm.fingerprint(), "data": batch.digest(), "token_types": lm.token_types,
            "code": code_digest(norm_statistics)}


@takes_context
def run_norms(lm: LoadedModel, ctx: RunContext | None = None, *, n_segments: int = SEGMENTS, seed: int = 0,
              max_length: int = MAX_LENGTH) -> NormsReport:
    """Shares under weights and norms and their correlation over the surface chapter's segments (cached;
    computed where ``ctx.execution`` says, :mod:`helpers.pipeline.engine`)."""
    data_dir, cache_root, progress, execution = ctx.data_dir, ctx.cache_dir, ctx.progress, ctx.execution
    batch = build_segments(lm, n_segments=n_segments, seed=seed, max_length=max_length, data_dir=data_dir,
                           cache_root=cache_root)
    stats = NormStats.from_cache(cached_json(
        "norm-stats", stats_key(lm, batch), lambda: norm_statistics(lm, batch, progress=progress, execution=execution).to_cache(),
        cache_root=cache_root))
    return NormsReport(lm.label, batch.summary(), stats, batch)


def norms_json(report: NormsReport) -> dict:
    """The ``norms`` command's JSON: ``{"model", "segments", "heads": {"L-H": ...}, "layers": {"1": ...}}``."""
    return {"model": report.model, **report.stats.to_json()}


def table1_comparison(weights: HeadScores, norms: HeadScores, relations: list[str]) -> list[dict]:
    """Per relation: the best head under weight maps and under norm maps, their accuracies and the change."""
    rows = []
    w_table, n_table = weights.table(), norms.table()
    for relation in relations:
        if relation not in w_table or relation not in n_table:
            continue
        w, n = w_table[relation], n_table[relation]
        rows.append({"relation": relation, "count": w["count"],
                     "weights_head": w["best_head"], "weights_direction": w["direction"], "weights_accuracy": w["accuracy"],
                     "norms_head": n["best_head"], "norms_direction": n["direction"], "norms_accuracy": n["accuracy"],
                     "change": round(n["accuracy"] - w["accuracy"], 4),
                     "same_head": (w["best_head"], w["direction"]) == (n["best_head"], n["direction"]),
                     "baseline_accuracy": w["baseline_accuracy"]})
    return rows


def same_predictions(weights: HeadScores, norms: HeadScores) -> np.ndarray:
    """``[direction]`` share of (head, word) predictions that weights and norms make alike (correctness equal)."""
    return (weights.word_correct == norms.word_correct).mean(axis=(1, 2, 3))


@takes_context
def run_table1_norms(lm: LoadedModel, corpus: str, ctx: RunContext | None = None, *, max_sentences: int | None = None,
                     max_length: int = MAX_LENGTH, word_mode: str = "mean") -> HeadScores:
    """Every head scored as a parser (:mod:`helpers.syntax.stats`) on word-level *norm* maps of ``corpus``, made in
    the model's pass and read once (written to the cache only with ``keep_maps``: :func:`one_pass_store`). Maps made
    by the model's pass are scored where it leaves them, a padded batch at a time (on the workers of a distributed
    ``ctx.execution``: :func:`norm_heads_shard`); cached ones are read and scored (:func:`score_heads`): the same
    scores either way."""
    data_dir, cache_root, progress = ctx.data_dir, ctx.cache_dir, ctx.progress
    sentences, batch, digest = encode_treebank(lm, corpus, max_sentences=max_sentences, max_length=max_length,
                                               data_dir=data_dir, cache_root=cache_root)
    store = one_pass_store(lm, batch, word_mode=word_mode, cache_root=cache_root, source_digest=digest,
                           progress=progress, maps="norms")
    if store.directory is not None:
        return score_heads(store, sentences, causal=lm.causal, device=stage_device(lm))
    from helpers.pipeline.engine import Execution, map_shards

    payloads = [({ex.index: sentences[ex.index] for ex in shard}, lm.causal) for shard in store.shards]
    parts = map_shards(lm, store, execution=ctx.execution or Execution(), task=norm_heads_shard, payloads=payloads,
                       batches=True, progress=progress)
    return merge_all(parts, HeadScorer(causal=lm.causal)).result()


def norm_heads_shard(stream, payload: tuple) -> HeadScorer:
    """One shard's heads scored on its word-level norm maps (a task of :func:`helpers.pipeline.engine.map_shards`):
    ``stream`` yields the shard's padded batches on the model's device, ``payload`` is ``(its sentences by example
    index, causal)`` (:func:`~helpers.syntax.stats.shard_scorers`)."""
    sentences, causal = payload
    return shard_scorers(stream, sentences, (None,), causal=causal, maps="norms")[0]
