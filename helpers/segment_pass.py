"""One pass of a model over the paper's segments for the statistics of several sections: the §3 statistics,
the §6 JS distances and the norms chapter's statistics of the same segments (:func:`segment_statistics`).

Chapter 3 calls it first (:func:`helpers.plan.chapter_segment_statistics`), and
:func:`helpers.results.all_claims` before the runs of every claim (``claims`` and the comparison's other
models), so that §6 and the norms chapter read their statistics back instead of running the model over the
same segments again.

>>> segment_statistics(lm, ctx, n_segments=1000)                  # doctest: +SKIP
['surface', 'distances', 'norms']
"""
from __future__ import annotations

from helpers.core.encoding import MAX_LENGTH


def _cached(kind: str, key: dict, cache_root):
    """The cached result ``kind`` under ``key``, or ``None`` when the cache lacks it (or refreshes it)."""
    from helpers.data.cache import NotCached, cached_json, not_cached

    try:
        return cached_json(kind, key, not_cached, cache_root=cache_root)
    except NotCached:
        return None


class SegmentAccumulator:
    """The §3 statistics, the §6 JS distances and the norms chapter's statistics of the same segments, fed from one
    pass (:func:`helpers.pipeline.route.reduce_maps` with ``maps="weights+norms"`` when the norm statistics are
    wanted): ``parts`` names the ones to compute (``surface``, ``distances``, ``norms``); ``update`` takes a forward
    pass's padded maps where the model left them, with one ``(surface_masks, norm_masks)`` per example, and hands
    each part its own."""

    def __init__(self, n_maps: int, parts: tuple[str, ...], n_layers: int | None = None):
        from helpers.cluster.stats import JSAccumulator
        from helpers.norms.stats import NormAccumulator
        from helpers.surface.stats import SurfaceAccumulator

        self.n_maps, self.parts = n_maps, parts
        new = {"surface": SurfaceAccumulator, "distances": lambda: JSAccumulator(n_maps, n_layers=n_layers),
               "norms": NormAccumulator}
        self.accs = {name: new[name]() for name in parts}

    def update(self, batch, extras: list[tuple]) -> None:
        for name, acc in self.accs.items():
            acc.update(batch, [(e[1],) if name == "norms" else (e[0],) for e in extras])

    def merge(self, other: "SegmentAccumulator") -> "SegmentAccumulator":
        for name, acc in self.accs.items():
            acc.merge(other.accs[name])
        return self

    def result(self) -> dict:
        return dict(self.accs)


def segment_statistics(lm, ctx, *, n_segments: int, seed: int = 0, max_length: int = MAX_LENGTH, norms: bool = True,
                       distances: bool = True) -> list[str]:
    """In the folders of ``ctx`` (a :class:`~helpers.context.RunContext`: its corpora and cache, its progress
    bars), fill the caches of the §3 statistics, (``distances``) the §6 JS distances and (``norms``) the norms
    chapter's statistics of the chapters' segments in one pass of the model, computing only what the cache lacks;
    returns the names computed. The chapters then read them back (:func:`helpers.surface.run.run_surface`,
    :func:`helpers.cluster.run.run_cluster`, :func:`helpers.norms.run.run_norms`): each would otherwise
    run the model over the same segments again. The results are those of the separate runs (tested)."""
    from functools import partial

    from helpers.cluster.run import distances_key
    from helpers.data.cache import cached_json
    from helpers.norms.run import keep_segments, stats_key as norms_key
    from helpers.norms.stats import kind_masks
    from helpers.pipeline.route import reduce_maps
    from helpers.pipeline.segments import build_segments
    from helpers.surface.run import cached_statistics, segment_masks, store_statistics
    from helpers.surface.run import stats_key as surface_key

    cache_root = ctx.cache_dir
    batch = build_segments(lm, n_segments=n_segments, seed=seed, max_length=max_length, data_dir=ctx.data_dir,
                           cache_root=cache_root)
    keys = {"surface": ("surface-stats", surface_key(lm, batch))}
    if distances:
        keys["distances"] = ("js-distances", distances_key(lm, batch))
    if norms:
        keys["norms"] = ("norm-stats", norms_key(lm, batch))

    def missing(name: str) -> bool:  # the §3 statistics are two files: the means and each segment's values
        kind, key = keys[name]
        if name == "surface":
            return cached_statistics(key, cache_root=cache_root) is None
        return _cached(kind, key, cache_root) is None

    parts = tuple(name for name in keys if missing(name))
    if not parts:
        return []
    with_norms = "norms" in parts

    def extras(ex) -> tuple:
        return (segment_masks(lm, ex),
                kind_masks(lm.tokenizer, ex.input_ids, causal=lm.causal) if with_norms else None)

    accs = reduce_maps(lm, batch, partial(SegmentAccumulator, lm.n_layers * lm.n_heads, parts, n_layers=lm.n_layers),
                       ctx=ctx, extras=extras, maps="weights+norms" if with_norms else "weights").result()
    values = {}
    if "surface" in accs:  # the means and each segment's values (helpers.surface.run.store_statistics)
        store_statistics(keys["surface"][1], accs["surface"].result(), cache_root=cache_root)
    if "distances" in accs:
        values["distances"] = accs["distances"].to_cache()  # with each segment's layer blocks (§6's interval)
    if "norms" in accs:
        norm_stats = accs["norms"].result()
        values["norms"] = norm_stats.to_cache()
        keep_segments(norm_stats, keys["norms"][1], cache_root)  # each segment's shares, for the intervals
    for name, value in values.items():
        kind, key = keys[name]
        cached_json(kind, key, lambda value=value: value, cache_root=cache_root)
    return list(parts)
