"""Where things live and what runs them: the data directory, the cache directory, the small-run switch and
the torch device; the one module that reads the environment (the CLI reads it for its error messages too).

Every location can be set three ways, strongest first: an explicit argument (the CLI's
``--data-dir`` / ``--cache-dir``), an environment variable, then a default. The entry points (the CLI, a
chapter, the comparison) read these once into a :class:`helpers.context.RunContext` and pass that down.

>>> import os
>>> from unittest import mock
>>> from helpers.config import DATA_ENV, PROJECT_ROOT, data_dir
>>> with mock.patch.dict(os.environ, {DATA_ENV: ""}):      # nothing set: the default, beside the project
...     os.path.relpath(data_dir(must_exist=False), PROJECT_ROOT)
'../shared/data'
"""
from __future__ import annotations

import os
from pathlib import Path

DATA_ENV = "BERT_ATTENTION_DATA"
CACHE_ENV = "BERT_ATTENTION_CACHE"
SMALL_ENV = "BERT_ATTENTION_SMALL"
REFRESH_ENV = "BERT_ATTENTION_REFRESH"  # recompute cached results (not the extracted maps): benchmarks
MODEL_ENV = "BERT_ATTENTION_MODEL"      # the book's model (a name, a folder or an installed extra)
COMPARE_ENV = "BERT_ATTENTION_COMPARE"  # comma-separated SPECs: the models of the chapter "Comparing models"
DEVICE_ENV = "BERT_ATTENTION_DEVICE"    # the torch device models are loaded on (a command's --device wins)
NO_BOS_ENV = "BERT_ATTENTION_NO_BOS"   # a decoder's inputs without its BOS token (a command's --no-bos wins)
KEEP_MAPS_ENV = "BERT_ATTENTION_KEEP_MAPS"  # keep every map in the cache, also those only one pass reads
DTYPE_ENV = "BERT_ATTENTION_DTYPE"      # the dtype models' weights are loaded in (a command's --dtype wins)
DECODER_ENV = "BERT_ATTENTION_DECODER"  # the decoder of the chapter on attention sinks (default: smollm2 if installed)
ASSETS_ENV = "BOOK_ASSETS_DIR"          # where the book's JavaScript libraries were installed (npm)

PROJECT_ROOT = Path(__file__).resolve().parents[1]


class DataNotFoundError(FileNotFoundError):
    """The corpora directory could not be located."""


def _default_data_candidates() -> list[Path]:
    """``../shared/data`` beside the project root, then beside the working directory or a parent."""
    candidates = [PROJECT_ROOT.parent / "shared" / "data"]
    here = Path.cwd().resolve()
    for parent in [here, *here.parents]:
        candidates.append(parent.parent / "shared" / "data")
    return candidates


def data_dir(override: str | os.PathLike | None = None, *, must_exist: bool = True) -> Path:
    """The corpora directory: ``override``, else ``$BERT_ATTENTION_DATA``, else ``../shared/data``.

    Raises :class:`DataNotFoundError` (saying how to fix it) when ``must_exist`` and nothing is found.
    """
    if override is not None:
        path = Path(override).expanduser().resolve()
        if must_exist and not path.is_dir():
            raise DataNotFoundError(
                f"--data-dir {override!s}: no such directory. Point it at the folder that holds "
                "gum/ and ud-english-ewt/, or create it with `python -m helpers download --data-dir DIR`."
            )
        return path
    env = os.environ.get(DATA_ENV)
    if env:
        path = Path(env).expanduser().resolve()
        if must_exist and not path.is_dir():
            raise DataNotFoundError(
                f"${DATA_ENV}={env}: no such directory. Fix the variable, or run "
                f"`python -m helpers download --data-dir {env}` to fetch the corpora there."
            )
        return path
    for candidate in _default_data_candidates():
        if candidate.is_dir():
            return candidate.resolve()
    if not must_exist:
        return _default_data_candidates()[0]
    raise DataNotFoundError(
        "No corpora found: pass --data-dir DIR, set $" + DATA_ENV + ", or place them in "
        f"{_default_data_candidates()[0]}. With internet, `python -m helpers download --data-dir DIR` "
        "fetches GUM, UD English EWT and BLiMP at pinned versions and checks their checksums."
    )


def cache_dir(override: str | os.PathLike | None = None) -> Path:
    """The extraction cache: ``override``, else ``$BERT_ATTENTION_CACHE``, else ``~/.cache/bert-attention``."""
    if override is not None:
        return Path(override).expanduser().resolve()
    env = os.environ.get(CACHE_ENV)
    if env:
        return Path(env).expanduser().resolve()
    base = os.environ.get("XDG_CACHE_HOME") or (Path.home() / ".cache")
    return Path(base).expanduser().resolve() / "bert-attention"


def _switch(name: str) -> bool:
    return os.environ.get(name, "").strip() not in ("", "0", "false", "False")


def env_text(name: str) -> str | None:
    """The environment variable ``name``, stripped (``None`` when unset or blank)."""
    return os.environ.get(name, "").strip() or None


def model_name() -> str | None:
    """``$BERT_ATTENTION_MODEL`` (``None``: the offline default)."""
    return env_text(MODEL_ENV)


def decoder_name() -> str | None:
    """``$BERT_ATTENTION_DECODER`` (``None``: the sinks chapter's default, :func:`helpers.sinks.chapter.chapter_decoder`)."""
    return env_text(DECODER_ENV)


def device_name() -> str | None:
    """``$BERT_ATTENTION_DEVICE`` as written (``None``: CPU); :func:`requested_device` checks it."""
    return env_text(DEVICE_ENV)


def check_device(text: str, *, instead: str = "--device cpu") -> str:
    """``text`` when it names a torch device this machine has (``cpu``, ``cuda``, ``cuda:1``, ``mps``,
    ``xpu``), else a :class:`ValueError` saying why and suggesting ``instead``."""
    import torch

    try:
        dev = torch.device(text)
    except (RuntimeError, ValueError, TypeError):
        raise ValueError(f"{text!r} is not a torch device; use cpu, cuda, cuda:N or mps") from None
    if dev.type == "cpu":
        return text
    if dev.type == "cuda":
        if not torch.cuda.is_available():
            raise ValueError(f"{text!r}: CUDA is not available on this machine (torch {torch.__version__}); use {instead}")
        count = torch.cuda.device_count()
        if dev.index is not None and dev.index >= count:
            raise ValueError(f"{text!r}: this machine has {count} CUDA device(s), numbered from 0")
        return text
    if dev.type == "mps":
        if not torch.backends.mps.is_available():
            raise ValueError(f"{text!r}: Apple MPS is not available on this machine; use {instead}")
        return text
    if dev.type == "xpu":
        if not (hasattr(torch, "xpu") and torch.xpu.is_available()):
            raise ValueError(f"{text!r}: no Intel XPU on this machine; use {instead}")
        return text
    raise ValueError(f"{text!r}: device type {dev.type!r} is not supported; use cpu, cuda or mps")


def requested_device(device=None):
    """The device asked for: ``device`` when given (a command's ``--device`` wins), else
    ``$BERT_ATTENTION_DEVICE`` checked by :func:`check_device` (an error names the variable), else ``None``
    (CPU). The whole book runs on a GPU with ``BERT_ATTENTION_DEVICE=cuda bash scripts/build_book.sh``."""
    if device is not None:
        return device
    text = device_name()
    if text is None:
        return None
    try:
        return check_device(text, instead=f"{DEVICE_ENV}=cpu or unset it")
    except ValueError as err:
        raise ValueError(f"${DEVICE_ENV}: {err}") from None


# The dtypes a model's weights may be loaded in (``--dtype``); the first is the default.
DTYPES: tuple[str, ...] = ("float32", "bfloat16", "float16")


def check_dtype(text: str) -> str:
    """``text`` when it is one of :data:`DTYPES`, else a :class:`ValueError` listing them."""
    if text not in DTYPES:
        raise ValueError(f"{text!r} is not a weights dtype; choose one of {', '.join(DTYPES)}")
    return text


def requested_dtype(dtype: str | None = None) -> str | None:
    """The weights dtype asked for: ``dtype`` when given (a command's ``--dtype`` wins), else
    ``$BERT_ATTENTION_DTYPE`` checked by :func:`check_dtype` (an error names the variable), else ``None``
    (float32)."""
    if dtype is not None:
        return check_dtype(str(dtype))
    text = env_text(DTYPE_ENV)
    if text is None:
        return None
    try:
        return check_dtype(text)
    except ValueError as err:
        raise ValueError(f"${DTYPE_ENV}: {err}") from None


def compare_specs() -> str | None:
    """``$BERT_ATTENTION_COMPARE``, the comparison's SPECs as written (``None``: the default list)."""
    return env_text(COMPARE_ENV)


def hub_offline() -> bool:
    """True when ``$HF_HUB_OFFLINE`` or ``$TRANSFORMERS_OFFLINE`` forbids the Hugging Face hub."""
    return any(os.environ.get(name, "").strip() not in ("", "0") for name in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE"))


def assets_dir() -> Path:
    """``$BOOK_ASSETS_DIR`` if set, else ``.book_assets`` in the repository (the book's npm packages)."""
    return Path(os.environ.get(ASSETS_ENV, PROJECT_ROOT / ".book_assets"))


def small_run() -> bool:
    """True when ``$BERT_ATTENTION_SMALL`` is set to a non-empty, non-zero value.

    Chapters shrink their corpus sizes under this switch so notebook tests finish quickly (read once, into
    :attr:`helpers.context.RunContext.small`).
    """
    return _switch(SMALL_ENV)


def no_bos() -> bool:
    """True when ``$BERT_ATTENTION_NO_BOS`` is set to a non-empty, non-zero value: a decoder's inputs start with
    their first word, not with the tokenizer's BOS token (read once, into :attr:`helpers.context.RunContext.no_bos`)."""
    return _switch(NO_BOS_ENV)


def keep_maps() -> bool:
    """True when ``$BERT_ATTENTION_KEEP_MAPS`` is set: every extraction's maps are written to the cache and kept,
    also the maps that only one pass reads (the probes' training maps, the coreference windows, the norm maps),
    which are otherwise computed in that pass and never written (read once, into
    :attr:`helpers.context.RunContext.keep_maps`)."""
    return _switch(KEEP_MAPS_ENV)


def refresh_results() -> bool:
    """True when ``$BERT_ATTENTION_REFRESH`` is set: cached results are recomputed from the cached maps
    (the memory benchmark measures the analyses this way, without re-extracting; read once, into
    :attr:`helpers.context.RunContext.refresh`)."""
    return _switch(REFRESH_ENV)
