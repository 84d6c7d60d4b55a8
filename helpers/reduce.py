"""One reduction for every streaming statistic: accumulators share one protocol, one loop runs them.

An *accumulator* (:class:`Accumulator`) takes one example at a time with ``update(*maps, *extras)``,
absorbs another accumulator's partial with ``merge(other)`` (in place, returning itself) and gives its
statistic with ``result()``: :class:`~helpers.surface.stats.SurfaceAccumulator`,
:class:`~helpers.cluster.stats.JSAccumulator`, :class:`~helpers.norms.stats.NormAccumulator` and
:class:`~helpers.syntax.stats.HeadScorer`.

:func:`reduce_shards` is the one loop of the statistics over segments (``surface``, ``cluster``,
``norms``): the segments are cut into the cache's shards, each shard's maps are made and fed to a fresh
accumulator (:func:`reduce_stream`, here or on a Dask worker: :func:`helpers.pipeline.engine.map_shards`),
and the partials are merged in shard order (:func:`merge_all`), so both engines give the same numbers.

An accumulator with ``update_batch(batch, extras)`` (the segment pass's: surface, JS, norms) is handed each
forward pass whole, a :class:`~helpers.core.extract.MapBatch` of padded maps ``[batch, layer, head, query, key]``
left on the model's device with the inputs' lengths; it computes there, many examples at a time, and keeps only
per-head values, added in the examples' order (so its sums are those of ``update`` fed one example at a time,
which stays as the reference). Its working arrays are cut by bytes (:func:`stat_chunks`), not by a count.

>>> from helpers.surface.stats import SurfaceAccumulator, token_masks
>>> acc = reduce_shards(lm, batch, SurfaceAccumulator,                               # doctest: +SKIP
...                     extras=lambda ex: (token_masks(lm.tokenizer, ex.input_ids),))
>>> stats = acc.result()                                                             # doctest: +SKIP
"""
from __future__ import annotations

from typing import Any, Callable, Iterable, Iterator, Protocol, TypeVar, runtime_checkable

from helpers.core.batching import CPU_STAT_BYTES, DEVICE_STAT_BYTES, length_groups, stat_chunks  # noqa: F401 (re-exported)


@runtime_checkable
class Accumulator(Protocol):
    """``update`` one example, ``merge`` another partial (in place, returns ``self``), ``result``."""

    def update(self, *args: Any, **kwargs: Any) -> None: ...

    def merge(self, other: Any) -> Any: ...

    def result(self) -> Any: ...


A = TypeVar("A", bound=Accumulator)



def stage_device(lm) -> str | None:
    """Where the accumulators of ``lm``'s maps compute (the JS distances, the norm statistics): ``lm``'s device
    when it is an accelerator (``cuda`` ...), ``None`` on the CPU, where they keep their NumPy/CPU path."""
    device = getattr(lm, "device", None)
    return None if device is None or str(device).split(":")[0] == "cpu" else str(device)


def merge_all(parts: Iterable[A], into: A) -> A:
    """``into`` with every partial of ``parts`` merged in order (the order fixes the float sums)."""
    for part in parts:
        into.merge(part)
    return into


def batched(acc) -> bool:
    """Whether ``acc`` reduces a whole :class:`~helpers.core.extract.MapBatch` at once (``update_batch``)."""
    return callable(getattr(acc, "update_batch", None))


def reduce_stream(stream: Iterator, payload: tuple) -> Accumulator:
    """One shard's partial (a task of :func:`~helpers.pipeline.engine.map_shards`): ``payload`` is
    ``(new, extras)``; a ``new()`` accumulator is updated with each ``(example, *maps)`` of ``stream``,
    followed by ``extras[example.index]`` (a tuple; ``extras`` ``None``: nothing more). A stream of
    :class:`~helpers.core.extract.MapBatch` es goes whole to a batched accumulator's
    ``update_batch(batch, extras)`` (``extras`` one tuple per example, in the batch's order), else example
    by example to ``update`` as host arrays."""
    from helpers.core.extract import MapBatch, convert

    new, extras = payload
    acc = new()

    def extra(example) -> tuple:
        return () if extras is None else extras[example.index]

    for item in stream:
        if not isinstance(item, MapBatch):
            example, *maps = item
            acc.update(*maps, *extra(example))
        elif batched(acc):
            acc.update_batch(item, [extra(ex) for ex in item.examples])
        else:
            for example, *maps in item.items():
                acc.update(*(convert(m, "float32") for m in maps), *extra(example))
    return acc


def reduce_shards(lm, batch, new: Callable[[], A], *, extras: Callable[[Any], tuple] | None = None,
                  maps: str | None = None, batch_size: int = 32, execution=None, progress: bool = False) -> A:
    """Every token-level map of ``batch`` fed to accumulators, one per cache shard, merged in shard order.

    ``new`` makes an empty accumulator (a class, or a ``functools.partial`` of one: it travels to Dask
    workers); ``extras(example)`` gives what ``update`` takes after the maps (computed here, in the
    driver); ``maps`` is ``"weights"`` (default), ``"norms"`` or ``"weights+norms"``; ``execution`` says
    where the shards run (:class:`~helpers.pipeline.engine.Execution`, default this process). Nothing
    is cached: the caller caches the result."""
    from helpers.pipeline.engine import Execution, map_shards
    from helpers.pipeline.extraction import plan_extraction

    store = plan_extraction(lm, batch, level="token", cache=False, batch_size=batch_size)
    payloads = [(new, None if extras is None else {ex.index: extras(ex) for ex in shard}) for shard in store.shards]
    parts = map_shards(lm, store, execution=execution or Execution(), task=reduce_stream, payloads=payloads,
                       maps=maps, batches=batched(new()), progress=progress)
    return merge_all(parts, new())
