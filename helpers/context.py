"""The settings of one run, in one object built at an entry point: :class:`RunContext`.

The entry points (the CLI, a chapter notebook, the comparison's child process) build it once, from
their options and the environment (:meth:`RunContext.from_env`: ``$BERT_ATTENTION_DATA``,
``$BERT_ATTENTION_CACHE``, ``$BERT_ATTENTION_SMALL``, ``$BERT_ATTENTION_REFRESH``, ``$BERT_ATTENTION_DEVICE``,
and the others :meth:`RunContext.from_env` names); everything below takes it, or the explicit arguments it
fills, and never reads the environment itself.

>>> from helpers.context import RunContext
>>> ctx = RunContext.from_env()                     # doctest: +SKIP
>>> report = SECTION.run(lm, ctx)                   # doctest: +SKIP
>>> RunContext(small=True).sized(1000, 40)
40
"""
from __future__ import annotations

from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Iterator

from helpers import config

# Set while a context with ``refresh`` is active (:meth:`RunContext.active`): the cache recomputes its
# results (not the extracted maps). A context variable, so that no signature carries the switch.
_REFRESH: ContextVar[bool] = ContextVar("bert_attention_refresh", default=False)


def refresh_requested() -> bool:
    """True inside :meth:`RunContext.active` of a context with ``refresh`` (read by the results cache)."""
    return _REFRESH.get()


@dataclass(frozen=True)
class RunContext:
    """Where and how to run: the corpora (``data_dir``) and cache (``cache_dir``) folders, the small (test)
    configuration (``small``), recomputing cached results (``refresh``), progress bars (``progress``), the
    execution engine (``execution``: a :class:`helpers.pipeline.engine.Execution`, ``None`` = this
    process), the torch ``device`` models are loaded on, the book's ``model`` (``None``: the offline
    default) and the comparison's models (``compare``: SPECs as written, ``None``: the default list)."""

    data_dir: Path | None = None
    cache_dir: Path | None = None
    small: bool = False
    refresh: bool = False
    progress: bool = False
    execution: Any = None
    device: str | None = None
    model: str | None = None
    compare: str | None = None

    @classmethod
    def from_env(cls, *, data_dir=None, cache_dir=None, small: bool | None = None, refresh: bool | None = None,
                 progress: bool = False, execution: Any = None, device: str | None = None) -> "RunContext":
        """The context of an entry point: each argument given wins, the rest comes from the environment
        (read here, once: ``$BERT_ATTENTION_DATA``, ``_CACHE``, ``_SMALL``, ``_REFRESH``, ``_MODEL``,
        ``_COMPARE``, ``_DEVICE``) or the defaults of :mod:`helpers.config`. The folders are resolved now; a corpora
        folder that cannot be found is left unresolved, so that the first read of a corpus says why."""
        try:
            data = config.data_dir(data_dir)
        except config.DataNotFoundError:
            data = Path(data_dir) if data_dir is not None else None
        return cls(data_dir=data, cache_dir=config.cache_dir(cache_dir),
                   small=config.small_run() if small is None else bool(small),
                   refresh=config.refresh_results() if refresh is None else bool(refresh),
                   progress=progress, execution=execution, device=config.requested_device(device),
                   model=config.model_name(),
                   compare=config.compare_specs())

    def replace(self, **changes) -> "RunContext":
        """A copy with ``changes`` (``ctx.replace(progress=False)``)."""
        return replace(self, **changes)

    def sized(self, full, small):
        """``small`` in the small configuration, else ``full`` (a size of a chapter's run)."""
        return small if self.small else full

    @contextmanager
    def active(self) -> Iterator["RunContext"]:
        """Make the process-wide switch of this context (``refresh``) hold for the code run inside."""
        token = _REFRESH.set(self.refresh)
        try:
            yield self
        finally:
            _REFRESH.reset(token)
