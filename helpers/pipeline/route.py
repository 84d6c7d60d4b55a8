"""The one route from attention maps to statistics: :func:`reduce_maps`.

::

    corpus (EncodedBatch) --plan--> cache shards (256 examples, the cache's layout)
        each shard: its maps as padded MapBatch es on the model's device
                    (read from the cache, or made by the model's passes and written only when kept)
                    --> acc.update(batch, extras)              one accumulator per shard, here or on a Dask worker
        partials merged in shard order --> acc.result() --> the section's record --> the chapter

A section hands down what it needs once: a picklable zero-argument ``make_accumulator`` (a class or a
``functools.partial``: the protocol of :class:`helpers.reduce.Accumulator`) and ``extras(example) -> tuple`` (its
token masks ...), computed here, in the driver; the route imports no section. To add a statistic over maps, write
one accumulator (``update(batch, extras)``, ``merge(other)``, ``result()``) in the section's ``stats.py`` and name it
in the section's run: ``reduce_maps(lm, batch, MyAccumulator).result()``.

The per-shard function (:func:`~helpers.pipeline.shards.reduce_shard`, with which ``extract`` writes shards too)
is the same in this process and on a Dask worker (:func:`helpers.pipeline.engine.map_tasks`, the one task runner),
and the passes, so the maps and the order in which an accumulator sees them, are the same whether a shard is read or
made: the results are identical either way.

>>> acc = reduce_maps(lm, batch, SurfaceAccumulator, extras=lambda ex: (masks_of(ex),))   # doctest: +SKIP
>>> stats = acc.result()                                                                   # doctest: +SKIP
"""
from __future__ import annotations

from typing import Any, Callable

from helpers.context import in_force
from helpers.core.encoding import Encoded, EncodedBatch
from helpers.core.extract import bucket
from helpers.data.cache import cache_key
from helpers.pipeline.engine import map_tasks
from helpers.pipeline.extraction import SHARD_SIZE, finish_extraction, is_extracted, plan_extraction
from helpers.pipeline.shards import ShardJob, reduce_shard
from helpers.reduce import merge_all

MAPS: tuple[str, ...] = ("weights", "norms", "weights+norms")  # what a batch holds; the cache keeps weights or norms


def reduce_maps(lm, corpus: EncodedBatch, make_accumulator: Callable[[], Any], *, level: str = "token",
                maps: str = "weights", keep: bool = False, ctx=None, extras: Callable[[Encoded], tuple] | None = None,
                word_mode: str = "mean", source_digest: str | None = None, batch_size: int = 32,
                desc: str | None = None, shard_size: int = SHARD_SIZE):
    """Every map of ``corpus`` reduced by accumulators, one per cache shard (``shard_size`` examples), merged in
    shard order; returns the merged accumulator (call ``.result()``).

    ``maps``: ``"weights"``, ``"norms"`` or ``"weights+norms"`` (one pass gives both; never cached); ``level``:
    ``"token"`` or ``"word"`` (with ``word_mode``). A shard is read from the cache when the extraction is there
    (:func:`~helpers.pipeline.extraction.is_extracted`), else made by the model's passes and written only when
    ``keep`` or the ``keep_maps`` of ``ctx`` (a :class:`~helpers.context.RunContext`, default the one in force)
    says so (weights or norms). Each batch goes to ``acc.update(batch, [extras(ex) for ex in batch.examples])``
    (``extras`` computed here, once per example; ``None``: empty tuples). With a distributed ``ctx.execution`` each
    shard is a task on a worker that holds the model; the results are identical to a local run's."""
    ctx = in_force(ctx)
    job, shards, finish = _plan(lm, corpus, make_accumulator, level=level, maps=maps,
                                keep=keep or ctx.keep_maps, cache_root=ctx.cache_dir, word_mode=word_mode,
                                source_digest=source_digest, batch_size=batch_size, shard_size=shard_size)
    payloads = [(number, shard, None if extras is None else {ex.index: tuple(extras(ex)) for ex in shard})
                for number, shard in enumerate(shards)]
    parts = map_tasks(lm, execution=ctx.execution, task=reduce_shard, shared=job, payloads=payloads, name="shard",
                      desc=desc or _describe(level, maps), progress=ctx.progress, sizes=[len(s) for s in shards])
    finish()
    return merge_all(parts, make_accumulator())


def _describe(level: str, maps: str) -> str:
    return f"{level}-level {'attention' if maps == 'weights' else maps}"


class _Finish:
    """Called once every shard is done: marks a written extraction complete (:func:`finish_extraction`)."""

    def __init__(self, plan=None):
        self.plan = plan

    def __call__(self):
        return None if self.plan is None else finish_extraction(self.plan, len(self.plan.todo))


def _plan(lm, corpus, make, *, level, maps, keep, cache_root, word_mode, source_digest, batch_size,
          shard_size=SHARD_SIZE):
    """``(job, shards, finish)``: the shards of ``corpus`` (the cache's layout) and, when the maps are cached
    (kept, or already extracted), the cache's plan: shards missing or damaged are made and written by their tasks."""
    if maps not in MAPS:
        raise ValueError(f"maps {maps!r}: choose one of {', '.join(MAPS)}")
    if level == "word" and maps == "weights+norms":
        raise ValueError(f"maps {maps!r}: word-level batches hold weights or norms")
    cached = maps != "weights+norms" and (keep or is_extracted(
        cache_key(lm, corpus, level=level, word_mode=word_mode, shard_size=shard_size, source_digest=source_digest,
                  maps=maps), cache_root))
    job = ShardJob(level, word_mode, maps, batch_size, make)
    if not cached:
        if not corpus.examples:
            plan_extraction(lm, corpus, cache=False)  # says why there is nothing to reduce
        return job, [sorted(g, key=lambda e: e.index) for g in bucket(corpus.examples, batch_size=shard_size)], _Finish()
    plan = plan_extraction(lm, corpus, level=level, word_mode=word_mode, cache_root=cache_root,
                           source_digest=source_digest, batch_size=batch_size, shard_size=shard_size, maps=maps)
    if plan.todo:
        plan.mark_incomplete()
    job = ShardJob(level, word_mode, maps, batch_size, make, plan.key, str(plan.directory))
    return job, plan.store.shards, _Finish(plan)
