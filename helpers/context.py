"""The settings of one run, in one object built at an entry point: :class:`RunContext`.

The entry points (the CLI, a chapter notebook, the comparison's child process) build it once, from
their options and the environment (:meth:`RunContext.from_env`: ``$BERT_ATTENTION_DATA``,
``$BERT_ATTENTION_CACHE``, ``$BERT_ATTENTION_SMALL``, ``$BERT_ATTENTION_REFRESH``, ``$BERT_ATTENTION_DEVICE``,
``$BERT_ATTENTION_DTYPE`` and the others :meth:`RunContext.from_env` names); everything below takes it, or the explicit arguments it
fills, and never reads the environment itself: this module and the CLI are the only callers of
:mod:`helpers.config`'s readers (``tests/unit/test_sections.py`` checks it).

A folder, device or model left unnamed below an entry point (``cache_root=None``, ``data_dir=None``,
``device=None``) is the one of the context in force (:func:`current`: the one a
:meth:`RunContext.active` block made active; the CLI and every section's run make theirs active), and
outside any (a library call such as ``helpers.load_treebank("gum:dev")``) what :meth:`RunContext.from_env`
would read: :func:`cache_folder`, :func:`data_folder`, :func:`device_for`, :func:`dtype_for`, :func:`model_for`,
:func:`hub_offline` and :func:`assets_folder` resolve them, here.

>>> from helpers.context import RunContext
>>> ctx = RunContext.from_env()                     # doctest: +SKIP
>>> report = SECTION.run(lm, ctx)                   # doctest: +SKIP
>>> RunContext(small=True).sized(1000, 40)
40
"""
from __future__ import annotations

import functools
import inspect
import os
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Iterator

from helpers import config

# Set while a context is active (:meth:`RunContext.active`): the context in force, read by :func:`current`
# (and its ``refresh`` by the results cache). A context variable, so that no signature carries it.
_ACTIVE: ContextVar["RunContext | None"] = ContextVar("bert_attention_context", default=None)


def current() -> "RunContext | None":
    """The context made active by the innermost :meth:`RunContext.active` here, ``None`` outside any."""
    return _ACTIVE.get()


def in_force(ctx: "RunContext | None" = None) -> "RunContext":
    """``ctx``; ``None``: the context in force (:func:`current`), else, outside any (a library call such as
    ``run_heads(lm, "gum:test")``), the environment's (:meth:`RunContext.from_env`)."""
    if ctx is not None:
        return ctx
    return current() or RunContext.from_env()


def takes_context(function):
    """A section's run (``run_surface(lm, ctx=None, *, ...)``, ``run_heads`` ...): its ``ctx`` argument resolved
    (:func:`in_force`) and made active while it runs, so that its folders, device, engine and progress bars, and the
    context's ``refresh`` and ``keep_maps`` below it, are that context's."""
    signature = inspect.signature(function)

    @functools.wraps(function)
    def run(*args, **kwargs):
        bound = signature.bind(*args, **kwargs)
        ctx = bound.arguments["ctx"] = in_force(bound.arguments.get("ctx"))
        with ctx.active():
            return function(*bound.args, **bound.kwargs)

    return run


def refresh_requested() -> bool:
    """True inside :meth:`RunContext.active` of a context with ``refresh`` (read by the results cache)."""
    ctx = current()
    return ctx is not None and ctx.refresh


def _in_force(field: str):
    """The active context's ``field``, ``None`` when there is none or it leaves the field unset."""
    ctx = current()
    return None if ctx is None else getattr(ctx, field)


def cache_folder(cache_root: str | os.PathLike | None = None) -> Path:
    """``cache_root`` as an absolute folder; ``None``: the cache folder of the context in force, else the
    environment's (``$BERT_ATTENTION_CACHE``, else ``~/.cache/bert-attention``)."""
    if cache_root is None:
        cache_root = _in_force("cache_dir")
    return config.cache_dir(cache_root)


def data_folder(data_dir: str | os.PathLike | None = None, *, must_exist: bool = True) -> Path:
    """``data_dir`` (checked to exist when ``must_exist``); ``None``: the corpora folder of the context in
    force, else the environment's (``$BERT_ATTENTION_DATA``, else ``../shared/data``; raises
    :class:`helpers.config.DataNotFoundError` saying how to fix it)."""
    if data_dir is None:
        data_dir = _in_force("data_dir")
    return config.data_dir(data_dir, must_exist=must_exist)


def device_for(device=None):
    """``device``; ``None``: the device of the context in force, else ``$BERT_ATTENTION_DEVICE`` (checked,
    the error naming the variable), else ``None`` (CPU)."""
    if device is None:
        device = _in_force("device")
    return config.requested_device(device)


def dtype_for(dtype: str | None = None) -> str:
    """The dtype a model's weights are loaded in: ``dtype`` when given (checked); else the context in force's, else
    ``$BERT_ATTENTION_DTYPE`` (checked, the error naming the variable), else ``"float32"``."""
    if dtype is None:
        dtype = _in_force("dtype")
    return config.requested_dtype(dtype) or config.DTYPES[0]


def model_for(name: str | None = None) -> str | None:
    """``name`` when given; else the book's model of the context in force, else ``$BERT_ATTENTION_MODEL``,
    else ``None`` (the offline default)."""
    if name is not None and str(name).strip():
        return str(name)
    return _in_force("model") or config.model_name()


def bos_for(bos: bool | None = None) -> bool:
    """``bos`` when given; else whether the context in force (else ``$BERT_ATTENTION_NO_BOS``) keeps a decoder's
    BOS token at the start of its inputs (default: it does)."""
    if bos is not None:
        return bool(bos)
    no_bos = _in_force("no_bos")
    return not (config.no_bos() if no_bos is None else no_bos)


def hub_offline() -> bool:
    """Whether the Hugging Face hub is forbidden: the context in force says, else ``$HF_HUB_OFFLINE`` or
    ``$TRANSFORMERS_OFFLINE``."""
    offline = _in_force("offline")
    return config.hub_offline() if offline is None else offline


def assets_folder() -> Path:
    """Where the book's JavaScript libraries were installed: the context in force says, else
    ``$BOOK_ASSETS_DIR``, else ``.book_assets`` in the repository."""
    return _in_force("assets_dir") or config.assets_dir()


@dataclass(frozen=True)
class RunContext:
    """Where and how to run: the corpora (``data_dir``) and cache (``cache_dir``) folders, the small (test)
    configuration (``small``), recomputing cached results (``refresh``), progress bars (``progress``), the
    execution engine (``execution``: a :class:`helpers.pipeline.engine.Execution`, ``None`` = this
    process), the torch ``device`` models are loaded on and the ``dtype`` of their weights (``None``: float32), the book's ``model`` (``None``: the offline
    default), the comparison's models (``compare``: SPECs as written, ``None``: the default list), whether
    the Hugging Face hub is forbidden (``offline``), where the book's JavaScript libraries are
    (``assets_dir``), whether maps that only one pass reads are kept in the cache too (``keep_maps``; they
    are computed in that pass and not written otherwise; never part of a result's cache key), whether a
    decoder's inputs go without their BOS token (``no_bos``) and the decoder of the chapter on attention
    sinks (``decoder``: a model spec, ``None``: its default). A field left ``None`` is the environment's
    (see the module's docstring)."""

    data_dir: Path | None = None
    cache_dir: Path | None = None
    small: bool = False
    refresh: bool = False
    progress: bool = False
    execution: Any = None
    device: str | None = None
    dtype: str | None = None
    model: str | None = None
    compare: str | None = None
    offline: bool | None = None
    assets_dir: Path | None = None
    no_bos: bool | None = None
    keep_maps: bool = False
    decoder: str | None = None

    @classmethod
    def from_env(cls, *, data_dir=None, cache_dir=None, small: bool | None = None, refresh: bool | None = None,
                 progress: bool = False, execution: Any = None, device: str | None = None,
                 no_bos: bool | None = None, keep_maps: bool | None = None,
                 dtype: str | None = None) -> "RunContext":
        """The context of an entry point: each argument given wins, the rest comes from the environment
        (read here, once: ``$BERT_ATTENTION_DATA``, ``_CACHE``, ``_SMALL``, ``_REFRESH``, ``_MODEL``,
        ``_COMPARE``, ``_DEVICE``, ``_DTYPE``, ``_NO_BOS``, ``_KEEP_MAPS``, ``_DECODER``, ``$HF_HUB_OFFLINE``, ``$BOOK_ASSETS_DIR``) or the defaults of
        :mod:`helpers.config`. The folders are resolved now; a corpora folder that cannot be found is left
        unresolved, so that the first read of a corpus says why."""
        try:
            data = config.data_dir(data_dir)
        except config.DataNotFoundError:
            data = Path(data_dir) if data_dir is not None else None
        return cls(data_dir=data, cache_dir=config.cache_dir(cache_dir),
                   small=config.small_run() if small is None else bool(small),
                   refresh=config.refresh_results() if refresh is None else bool(refresh),
                   progress=progress, execution=execution, device=config.requested_device(device),
                   dtype=config.requested_dtype(dtype),
                   model=config.model_name(), compare=config.compare_specs(), offline=config.hub_offline(),
                   assets_dir=config.assets_dir(), no_bos=config.no_bos() if no_bos is None else bool(no_bos),
                   keep_maps=config.keep_maps() if keep_maps is None else bool(keep_maps),
                   decoder=config.decoder_name())

    def replace(self, **changes) -> "RunContext":
        """A copy with ``changes`` (``ctx.replace(progress=False)``)."""
        return replace(self, **changes)

    def sized(self, full, small):
        """``small`` in the small configuration, else ``full`` (a size of a chapter's run)."""
        return small if self.small else full

    @contextmanager
    def active(self) -> Iterator["RunContext"]:
        """Make this context the one in force for the code run inside: its folders, device and model are
        what that code leaves unnamed, and its ``refresh`` holds for the results cache."""
        token = _ACTIVE.set(self)
        try:
            yield self
        finally:
            _ACTIVE.reset(token)
