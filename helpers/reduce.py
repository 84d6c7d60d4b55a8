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

>>> from helpers.surface.stats import SurfaceAccumulator, token_masks
>>> acc = reduce_shards(lm, batch, SurfaceAccumulator,                               # doctest: +SKIP
...                     extras=lambda ex: (token_masks(lm.tokenizer, ex.input_ids),))
>>> stats = acc.result()                                                             # doctest: +SKIP
"""
from __future__ import annotations

from typing import Any, Callable, Iterable, Iterator, Protocol, TypeVar, runtime_checkable


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


def reduce_stream(stream: Iterator, payload: tuple) -> Accumulator:
    """One shard's partial (a task of :func:`~helpers.pipeline.engine.map_shards`): ``payload`` is
    ``(new, extras)``; a ``new()`` accumulator is updated with each ``(example, *maps)`` of ``stream``,
    followed by ``extras[example.index]`` (a tuple; ``extras`` ``None``: nothing more)."""
    new, extras = payload
    acc = new()
    for example, *maps in stream:
        acc.update(*maps, *(() if extras is None else extras[example.index]))
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
                       maps=maps, progress=progress)
    return merge_all(parts, new())
