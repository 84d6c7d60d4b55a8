"""Paper §6 end to end: segments -> JS distances (one streaming pass) -> MDS -> behaviour labels.

Shared by the chapter and ``python -m helpers cluster --json OUT``.

>>> result = run_cluster(lm, n_segments=1000)                              # doctest: +SKIP
>>> result.distance.shape                                                  # [head, head]
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import partial
from typing import Callable

import numpy as np

from helpers.context import RunContext, takes_context
from helpers.cluster.stats import (
    PERMUTATIONS,
    JSAccumulator,
    embed_mds,
    hierarchical_order,
    layer_ratio_interval,
    layer_similarity,
)
from helpers.core.encoding import MAX_LENGTH, EncodedBatch
from helpers.core.labels import head_label
from helpers.core.models import LoadedModel
from helpers.data.cache import cached_json
from helpers.data.segments import SegmentSource, segment_tokens
from helpers.digest import code_digest
from helpers.pipeline.route import reduce_maps
from helpers.pipeline.segments import (
    DEFAULT_SOURCE,
    SEGMENTS,
    build_segments,
    segments_key,
)
from helpers.surface.stats import BROAD_ENTROPY_FRACTION, SurfaceStats

# Behaviour rules, applied in this order with later matches overriding earlier ones (the original's
# order). Thresholds are the original's; "broadly" is relative to the uniform entropy, so that it
# also holds for shorter segments: the original's 3.8 nats is 0.78 of log(128) (BROAD_ENTROPY_FRACTION,
# defined with the surface statistics: the one "broad attention" threshold of the book).
NEXT_THRESHOLD = 0.5
PREV_THRESHOLD = 0.5
CLS_THRESHOLD = 0.6
SEP_THRESHOLD = 0.6
PUNCT_THRESHOLD = 0.6
# The thresholds above by the statistic they apply to, in the rules' order: what the JSON's "thresholds"
# holds and the chapter states.
THRESHOLDS = {"next": NEXT_THRESHOLD, "prev": PREV_THRESHOLD, "broad_entropy_fraction": BROAD_ENTROPY_FRACTION,
              "cls": CLS_THRESHOLD, "sep": SEP_THRESHOLD, "punct": PUNCT_THRESHOLD}
NO_BEHAVIOUR = "none of these"


def behaviours(stats: SurfaceStats) -> list[str]:
    """One label per head (flattened ``layer * n_heads + head``) from the surface statistics."""
    ph = stats.per_head
    rules = [
        (ph["next"] > NEXT_THRESHOLD, "attends to next"),
        (ph["prev"] > PREV_THRESHOLD, "attends to previous"),
        (ph["entropy"] > BROAD_ENTROPY_FRACTION * stats.uniform_entropy, "attends broadly"),
        (ph["cls"] > CLS_THRESHOLD, "attends to [CLS]"),
        (ph["sep"] > SEP_THRESHOLD, "attends to [SEP]"),
        (ph["punct"] > PUNCT_THRESHOLD, "attends to . and ,"),
    ]
    labels = np.full(ph["next"].shape, NO_BEHAVIOUR, dtype=object)
    for mask, name in rules:
        labels[mask] = name
    return labels.ravel().tolist()


@dataclass
class ClusterResult:
    model: str
    distance: np.ndarray
    coordinates: np.ndarray
    behaviours: list[str]
    stats: SurfaceStats
    n_layers: int
    n_heads: int
    segments: int
    tokens: int
    similarity: dict
    order: np.ndarray
    segment_tokens: dict | None = None
    segments_from: str = DEFAULT_SOURCE

    @property
    def labels(self) -> list[str]:
        return [head_label(k // self.n_heads, k % self.n_heads) for k in range(self.n_layers * self.n_heads)]

    def to_json(self, linguistic: dict[str, str] | None = None) -> dict:
        return {
            "model": self.model, "segments": self.segments, "tokens": self.tokens,
            "segments_from": self.segments_from, "segment_tokens": self.segment_tokens,
            "head_index": "layer * n_heads + head (0-based); labels are 1-based layer-head",
            "n_layers": self.n_layers, "n_heads": self.n_heads, "labels": self.labels,
            "distance": np.round(self.distance, 6).tolist(), "coordinates": np.round(self.coordinates, 6).tolist(),
            "behaviours": self.behaviours, "linguistic": linguistic or {},
            "layer_similarity": self.similarity, "hierarchical_order": self.order.tolist(),
            "thresholds": dict(THRESHOLDS),
        }


def linguistic_heads(specialised: dict[str, list[str]], coref_head: tuple[int, int]) -> dict[str, str]:
    """``{"L-H": description}`` for heads found in the syntax and coreference chapters, chosen on GUM dev:
    ``specialised`` maps heads to the relations they specialise in (the §4.2 report's
    ``specialised_heads()``), ``coref_head`` is the best coreference head ``(layer, head)`` (0-based, the
    §4.3 report's ``dev.best_head()``)."""
    labels = {head: "syntax: " + ", ".join(rels) for head, rels in specialised.items()}
    key = head_label(*coref_head)
    labels[key] = labels[key] + "; coreference" if key in labels else "coreference"
    return labels


def js_distances(lm: LoadedModel, batch, ctx: RunContext | None = None) -> JSAccumulator:
    """The :class:`~helpers.cluster.stats.JSAccumulator` of every segment of ``batch``: ``result()`` the ``[head, head]``
    JS summed over every query token of every segment, its ``tokens`` and each segment's layer blocks, streamed
    shard by shard (:func:`helpers.pipeline.route.reduce_maps`; where, ``ctx.execution`` says)."""
    return reduce_maps(lm, batch, partial(JSAccumulator, lm.n_layers * lm.n_heads, n_layers=lm.n_layers), ctx=ctx)


def distances_key(lm: LoadedModel, batch, segments_from: SegmentSource = DEFAULT_SOURCE) -> dict:
    """The cache key of the JS distances of ``batch`` (the model, the segments and the code computing them:
    :func:`js_distances` and every module it imports)."""
    return {"model": lm.fingerprint(), "data": batch.digest(), "code": code_digest(js_distances),
            **segments_key(segments_from)}


@takes_context
def run_cluster(lm: LoadedModel, surface: Callable[[EncodedBatch], SurfaceStats], ctx: RunContext | None = None, *,
                n_segments: int = SEGMENTS, seed: int = 0, max_length: int = MAX_LENGTH,
                segments_from: SegmentSource = DEFAULT_SOURCE, n_perm: int = PERMUTATIONS) -> ClusterResult:
    """Distances (cached, keyed by the model, the segments and the code of :func:`js_distances`), MDS
    coordinates, behaviour labels and the layer-similarity test.

    ``surface(batch)`` gives §3's statistics of the same segments (the §3 report's, an input of this
    section: see :mod:`helpers.cluster.section`), from which the behaviours come. ``ctx.execution`` says where
    the distances run (:mod:`helpers.pipeline.engine`); MDS and the permutation test run here."""
    batch = build_segments(lm, n_segments=n_segments, seed=seed, max_length=max_length, segments_from=segments_from,
                           data_dir=ctx.data_dir, cache_root=ctx.cache_dir)
    key = distances_key(lm, batch, segments_from)
    stored = cached_json("js-distances", key, lambda: js_distances(lm, batch, ctx).to_cache(), cache_root=ctx.cache_dir)
    D = np.asarray(stored["distance"])
    stats = surface(batch)  # §3's statistics of the same segments
    order, _ = hierarchical_order(D)
    return ClusterResult(lm.label, D, embed_mds(D, seed=seed), behaviours(stats), stats, lm.n_layers, lm.n_heads,
                         len(batch.examples), stored["tokens"],
                         similarity(D, np.asarray(stored["layer_blocks"]), lm.n_heads, n_perm=n_perm, seed=seed),
                         order, segment_tokens(batch), segments_from)


def similarity(D: np.ndarray, blocks: np.ndarray, n_heads: int, *, n_perm: int = PERMUTATIONS, seed: int = 0) -> dict:
    """:func:`~helpers.cluster.stats.layer_similarity` of the summed distances ``D [head, head]`` (the ratio and its
    permutation test), with the ratio's 95 % interval over resampled segments (``ratio_interval``, from each
    segment's ``blocks [segment, layer, layer]``: :func:`~helpers.cluster.stats.layer_ratio_interval`) and how many
    segments were resampled (``segments_resampled``)."""
    out = layer_similarity(D, n_heads, n_perm=n_perm, seed=seed)
    out["ratio_interval"] = list(layer_ratio_interval(blocks, n_heads, seed=seed))
    out["segments_resampled"] = int(len(blocks))
    return out
