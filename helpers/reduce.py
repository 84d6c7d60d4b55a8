"""The accumulators' protocol: what every statistic over maps speaks on the one route
(:func:`helpers.pipeline.route.reduce_maps`).

An *accumulator* takes a forward pass's maps at a time with ``update(batch, extras)`` (a
:class:`~helpers.core.extract.MapBatch`: padded maps ``[batch, layer, head, query, key]`` on the model's device with
the inputs' lengths; ``extras`` one tuple per example, what the section handed down), absorbs another shard's
partial with ``merge(other)`` (in place, returning itself) and gives its statistic with ``result()``. It is made by a
picklable zero-argument callable (a class, or a ``functools.partial`` of one), so it travels to Dask workers:
:class:`~helpers.surface.stats.SurfaceAccumulator`, :class:`~helpers.cluster.stats.JSAccumulator`,
:class:`~helpers.norms.stats.NormAccumulator`, :class:`~helpers.sinks.stats.FirstPositionAccumulator`.
"""
from __future__ import annotations

from typing import Any, Iterable, Protocol, TypeVar, runtime_checkable


@runtime_checkable
class Accumulator(Protocol):
    """``update`` a batch of maps with its extras, ``merge`` another partial (in place, returns ``self``),
    ``result``."""

    def update(self, batch: Any, extras: list[tuple]) -> None: ...

    def merge(self, other: Any) -> Any: ...

    def result(self) -> Any: ...


A = TypeVar("A", bound=Accumulator)


def stage_device(lm) -> str | None:
    """Where the statistics of ``lm``'s cached maps compute when they are read back (the heads' scores): ``lm``'s
    device when it is an accelerator (``cuda`` ...), ``None`` on the CPU."""
    device = getattr(lm, "device", None)
    return None if device is None or str(device).split(":")[0] == "cpu" else str(device)


def merge_all(parts: Iterable[A], into: A) -> A:
    """``into`` with every partial of ``parts`` merged in order (the order fixes the float sums)."""
    for part in parts:
        into.merge(part)
    return into
