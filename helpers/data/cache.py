"""A disk cache of extracted attention maps: sharded, float32, keyed, atomic, resumable.

:func:`extract` is the entry point chapters use. It encodes nothing itself: give it an
:class:`~helpers.core.encoding.EncodedBatch` and it returns an :class:`AttentionStore` that streams
``(example, attn [layer, head, n, n])`` from disk.

The cache key is a SHA-256 of the model fingerprint (every weight), the encoded data (every token
id and word alignment, so a change to a corpus file or tokenizer changes it), the source files'
digest when given, the settings (level, word mode, length limit, token types, shard size) and the
shards' layout (:data:`FORMAT_VERSION`); norm maps add the digest of their code.
Each shard is an ``.npz`` written to a temporary file and renamed into place, so an interrupted run
keeps every finished shard and resumes from the next. A shard that fails to load (truncated, bad
CRC), whose recorded key or indices disagree, or whose maps are not finite, are negative or (attention
weights) have rows that do not sum to 1 is recomputed (:func:`shard_values_problem`).

>>> from helpers import load_model, encode_words, extract
>>> lm = load_model()
>>> batch = encode_words(lm.tokenizer, [["A", "cat", "sat", "."]])
>>> store = extract(lm, batch, level="word")
>>> for example, attn in store:
...     pass
"""
from __future__ import annotations

import hashlib
import json
import os
import shutil
import zipfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator

import numpy as np

from helpers.context import cache_folder, refresh_requested
from helpers.core.encoding import Encoded, EncodedBatch
from helpers.core.extract import Level, convert
from helpers.core.map_batches import iter_map_batches, iter_norm_maps
from helpers.core.models import LoadedModel
from helpers.core.wordlevel import WordMode
from helpers.data.files import (
    _TMP_SUFFIX,
    atomic_write,
    is_stale_tmp,
    remove_stale_tmp,
    require_writable,
    strict_dumps,
    temporary_files,
    write_text,
)

# The layout of the map shards (2: float32 maps; 1: float16). Maps are keyed by the model and the data, not by
# the code (an edit elsewhere must not extract them again), so a shard written in an older layout would be read
# as it is by newer code: this number, bumped when the layout changes, is what keeps it out. Results computed
# from the maps need none: their keys carry the digest of their code (helpers.digest), which covers this module.
FORMAT_VERSION = 2

# Shards keep the model's float32 weights: rounding to float16 merges near-equal weights into ties that
# move argmax-based scores (Table 1, Table 2, Figure 5); see the book's deviations page for the measured cost.
SHARD_DTYPE = np.float32
MAPS: tuple[str, ...] = ("weights", "norms")  # attention weights, or norm-based maps (helpers.norms.stats)


def cache_key(
    lm: LoadedModel,
    batch: EncodedBatch,
    *,
    level: Level,
    word_mode: WordMode,
    shard_size: int,
    source_digest: str | None = None,
    maps: str = "weights",
) -> str:
    """Hex key naming one extraction: model weights, encoded data, source files and settings."""
    settings = {
        "format": FORMAT_VERSION,
        "model": lm.fingerprint(),
        "data": batch.digest(),
        "sources": source_digest,
        "level": level,
        "word_mode": word_mode if level == "word" else None,
        "max_length": batch.max_length,
        "token_types": lm.token_types,
        "shard_size": shard_size,
    }
    if maps != "weights":  # weight maps keep the keys they always had
        from helpers.digest import code_digest

        settings["maps"] = {"kind": maps, "code": code_digest(iter_norm_maps)}  # the norm maps' definition
    return hashlib.sha256(json.dumps(settings, sort_keys=True).encode()).hexdigest()[:32]


def write_cache_json(path: Path, payload: dict) -> None:
    try:
        text = strict_dumps(payload, indent=1, sort_keys=True)
    except ValueError as err:
        raise ValueError(f"{path}: not cached: {err}") from None
    write_text(path, text)


@dataclass
class AttentionStore:
    """Extracted maps of one corpus and settings, streamed from disk shard by shard.

    Iterate for ``(example, attn)`` pairs (float32 ``[layer, head, n, n]``, length-bucket order), or
    index by the caller's example index: ``store[i]``. ``skipped`` lists inputs over the length
    limit; ``summary()`` gives counts for reports.
    """

    batch: EncodedBatch
    directory: Path | None
    shards: list[list[Encoded]]
    n_layers: int
    n_heads: int
    level: str
    word_mode: str
    stats: dict = field(default_factory=dict)
    maps: str = "weights"
    _lm: LoadedModel | None = field(default=None, repr=False)
    _loaded: tuple[int, dict] | None = field(default=None, repr=False)

    @property
    def examples(self) -> list[Encoded]:
        return self.batch.examples

    @property
    def skipped(self) -> list[int]:
        return self.batch.skipped

    def __len__(self) -> int:
        return len(self.batch.examples)

    def summary(self) -> dict:
        return {**self.batch.summary(), **self.stats, "level": self.level,
                "word_mode": self.word_mode if self.level == "word" else None,
                "cache": str(self.directory) if self.directory else None}

    def shard_maps(self, number: int) -> dict[int, np.ndarray]:
        """The maps of shard ``number`` as stored (float32 ``[layer, head, n, n]``), by example index
        (kept until another shard is read or :meth:`release`)."""
        if self._loaded is not None and self._loaded[0] == number:
            return self._loaded[1]
        self._loaded = None  # one shard in memory at a time: the old one goes before the next is read
        if self.directory is None:
            passes = iter_map_batches(self._lm, self.shards[number], batch_size=self.stats.get("batch_size", 32),
                                      maps=self.maps, level=self.level, word_mode=self.word_mode)
            maps = {ex.index: convert(a, np.float32) for part in passes for ex, a in part.items()}
        else:
            maps = _read_shard(self.directory / f"shard-{number:05d}.npz", self.n_layers, self.n_heads, maps=self.maps)
        self._loaded = (number, maps)
        return maps

    def release(self) -> None:
        """Forget the shard kept by :meth:`shard_maps` or indexing (its memory goes once the caller's
        references do)."""
        self._loaded = None

    def __iter__(self) -> Iterator[tuple[Encoded, np.ndarray]]:
        return self.items()

    def items(self, dtype=np.float32) -> Iterator[tuple[Encoded, np.ndarray]]:
        """``(example, attn)`` pairs with maps as ``dtype`` (the stored dtype, float32: no copy; ``np.float16``
        halves the memory of maps kept by the caller).

        One shard's maps are in memory at a time, and none once the iteration ends. The maps of a shard
        are views of one buffer, so the last map of each shard is yielded as a copy: a caller still
        holding it (a loop variable) while the next shard is read does not keep the whole shard alive.
        """
        try:
            for number, shard in enumerate(self.shards):
                maps = self.shard_maps(number)
                for position, ex in enumerate(shard):
                    attn = convert(maps[ex.index], dtype)
                    if position == len(shard) - 1 and attn.base is not None:
                        attn = attn.copy()
                    yield ex, attn
                del maps
        finally:
            self.release()

    def __getitem__(self, index: int) -> np.ndarray:
        for number, shard in enumerate(self.shards):
            if any(ex.index == index for ex in shard):
                return convert(self.shard_maps(number)[index], np.float32)
        if index in self.batch.skipped:
            raise KeyError(f"example {index} was skipped: longer than {self.batch.max_length} tokens")
        raise KeyError(f"no example with index {index}")


# Rows of attention weights sum to 1 in exact arithmetic; stored float32 rows (softmax in float32, word rows
# averaged over tokens) are off by a few units of 1e-6 at 512 keys. A model loaded in bfloat16 (--dtype) hands
# over each weight rounded to 8 significant bits, relative error up to 2**-8, so its rows are off by up to 2**-8
# (0.0039; float16's 2**-11); this is twice that. A row further than this from 1 is damage.
ROW_SUM_TOLERANCE = 2.0 ** -7


def shard_values_problem(data: np.ndarray, sizes: np.ndarray, maps_per_example: int, kind: str | None) -> str | None:
    """What is wrong with the values of a shard's flat ``data`` (examples of ``sizes[i]`` positions, each
    ``maps_per_example`` maps of ``[n, n]``), or ``None``. Every kind of map is finite and non-negative;
    attention weights (``kind="weights"``) also have rows that sum to 1 within :data:`ROW_SUM_TOLERANCE`.
    Norm maps (``"norms"``) are not weights, and ``None`` (kind unknown) checks only what every map obeys.

    One pass each for the minimum, the maximum and the row sums (``np.add.reduceat``), with no copy of ``data``.
    """
    if data.size == 0:
        return None
    low, high = data.min(), data.max()
    if not (np.isfinite(low) and np.isfinite(high)):
        return "holds values that are not finite (NaN or infinity)"
    if low < 0:
        return f"holds negative values (down to {float(low):.3g})"
    if kind == "weights":
        sizes = np.asarray(sizes, dtype=np.int64)
        row_lengths = np.repeat(sizes, maps_per_example * sizes)
        if int(row_lengths.sum()) != data.size:
            return "holds more or fewer values than its examples' maps"
        starts = np.zeros(len(row_lengths), dtype=np.int64)
        np.cumsum(row_lengths[:-1], out=starts[1:])
        worst = float(np.abs(np.add.reduceat(data, starts) - 1).max())
        if worst > ROW_SUM_TOLERANCE:
            return f"holds attention rows that do not sum to 1 (off by up to {worst:.3g})"
    return None


def _shard_kind(path: Path, key: str) -> str | None:
    """The kind of maps in the shard at ``path`` (whose key is ``key``), read from its folder's ``meta.json``:
    ``"weights"`` (no ``maps`` field), ``"norms"``, or ``None`` when the metadata is missing, damaged or
    belongs to another extraction."""
    try:
        meta = json.loads((path.parent / "meta.json").read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(meta, dict) or meta.get("key") != key:
        return None
    kind = meta.get("maps", "weights")
    return kind if kind in MAPS else None


def _read_shard(path: Path, n_layers: int, n_heads: int, key: str | None = None,
                indices: list[int] | None = None, maps: str | None = None) -> dict[int, np.ndarray]:
    """Load one shard (every member, so zip CRCs are checked); raise ValueError if it is unusable.

    Besides its key, examples and sizes, its values are checked (:func:`shard_values_problem`): maps
    that are not finite, negative, or (attention weights) whose rows do not sum to 1 are damage. ``maps``
    is the kind stored (default: read from the folder's ``meta.json``, see :func:`_shard_kind`)."""
    try:
        with np.load(path, allow_pickle=False) as npz:
            arrays = {name: npz[name] for name in ("key", "indices", "sizes", "offsets", "data")}
    except (OSError, ValueError, KeyError, zipfile.BadZipFile, EOFError) as err:
        raise ValueError(f"{path}: unreadable cache shard ({err})") from err
    if key is not None and str(arrays["key"]) != key:
        raise ValueError(f"{path}: shard belongs to another extraction (stale key)")
    if indices is not None and arrays["indices"].tolist() != list(indices):
        raise ValueError(f"{path}: shard holds other examples than expected (stale)")
    data, sizes, offsets = arrays["data"], arrays["sizes"], arrays["offsets"]
    if (data.ndim != 1 or data.dtype.kind != "f" or sizes.ndim != 1 or offsets.shape != (len(sizes) + 1,)
            or len(arrays["indices"]) != len(sizes)):
        raise ValueError(f"{path}: cache shard has a damaged layout")
    by_index = {}
    for i, (index, n) in enumerate(zip(arrays["indices"].tolist(), sizes.tolist())):
        start, stop = offsets[i], offsets[i + 1]
        if stop - start != n_layers * n_heads * n * n or start < 0 or stop > data.size:
            raise ValueError(f"{path}: example {index} has a wrong size (corrupted)")
        by_index[index] = data[start:stop].reshape(n_layers, n_heads, n, n)
    if offsets[0] != 0 or offsets[-1] != data.size:
        raise ValueError(f"{path}: cache shard has a damaged layout")
    kind = maps if maps is not None else _shard_kind(path, str(arrays["key"]))
    problem = shard_values_problem(data, sizes, n_layers * n_heads, kind)
    if problem:
        raise ValueError(f"{path}: cache shard {problem} (damaged)")
    return by_index


def _write_shard(path: Path, key: str, pairs: list[tuple[Encoded, np.ndarray]], dtype=None) -> None:
    """One shard as an ``.npz`` (what ``np.savez`` writes: ``key``, ``indices``, ``sizes``, ``offsets``
    and the flat ``data``), with ``data`` streamed map by map into the archive instead of concatenated
    first, so writing a shard does not hold its maps twice."""
    dtype = np.dtype(SHARD_DTYPE if dtype is None else dtype)
    sizes = np.array([a.shape[-1] for _, a in pairs], dtype=np.int64)
    offsets = np.concatenate([[0], np.cumsum([int(np.prod(a.shape)) for _, a in pairs])]).astype(np.int64)
    small = {"key": np.array(key), "indices": np.array([ex.index for ex, _ in pairs], dtype=np.int64),
             "sizes": sizes, "offsets": offsets}
    atomic_write(path, lambda handle: _savez_streamed(handle, small, "data", [a for _, a in pairs], dtype,
                                                      length=int(offsets[-1])))


def _savez_streamed(handle, arrays: dict[str, np.ndarray], name: str, parts: list, dtype, *, length: int) -> None:
    """``np.savez(handle, **arrays, name=<the parts flattened and concatenated, as dtype>)`` without building
    the concatenation (``length``: its number of elements): each part is made contiguous (a map is often a
    view of a padded batch) and written in turn, so one part's copy at most is held."""
    from numpy.lib import format as npy

    with zipfile.ZipFile(handle, mode="w", compression=zipfile.ZIP_STORED, allowZip64=True) as archive:
        for member, value in arrays.items():
            with archive.open(member + ".npy", "w", force_zip64=True) as out:
                npy.write_array(out, np.asanyarray(value), allow_pickle=False)
        with archive.open(name + ".npy", "w", force_zip64=True) as out:
            header = {"descr": npy.dtype_to_descr(dtype), "fortran_order": False, "shape": (length,)}
            npy.write_array_header_1_0(out, header)
            for part in parts:
                out.write(np.ascontiguousarray(convert(part, dtype)).data)


def _folder_bytes(directory: Path, pattern: str = "*", *, finished: bool = False) -> int:
    """Bytes of the files of ``directory`` matching ``pattern``; with ``finished``, temporary files of
    writers are not counted."""
    total = 0
    for path in directory.glob(pattern):
        if finished and path.name.endswith(_TMP_SUFFIX):
            continue
        try:
            total += path.stat().st_size if path.is_file() else 0
        except OSError:
            continue  # removed meanwhile
    return total


def cache_entries(cache_root: str | os.PathLike | None = None, *, remove_stale: bool = False) -> list[dict]:
    """Metadata of every extraction in the cache, with its size on disk in bytes (finished files only).

    ``remove_stale=True`` first deletes temporary files left by killed writers (:func:`remove_stale_tmp`).
    """
    root = cache_folder(cache_root)
    entries = []
    if not root.is_dir():
        return entries
    if remove_stale:
        for folder in ("artifacts", "parsed", "results"):
            remove_stale_tmp(root / folder)
    for meta_path in sorted(root.glob("*/meta.json")):
        if remove_stale:
            remove_stale_tmp(meta_path.parent)
        try:
            meta = json.loads(meta_path.read_text())
            if not isinstance(meta, dict):
                raise ValueError("not an object")
        except (OSError, ValueError):
            meta = {"key": meta_path.parent.name, "corrupted": True}
        meta["bytes"] = _folder_bytes(meta_path.parent, finished=True)
        entries.append(meta)
    return entries


USAGE_KINDS = ("maps", "probe_batches", "results", "models")


def cache_usage(cache_root: str | os.PathLike | None = None) -> dict[str, int]:
    """Bytes on disk of the cache by kind, temporary files of writers included (they take the space too).

    ``maps``: each extraction's shards of attention maps and its ``meta.json``; ``probe_batches``: the
    probe batches spilled beside them, or alone in the folder of maps never written (``probe-*``);
    ``results``: everything else (statistics, fitted heads,
    parsed corpora, results of the commands); ``models``: installed optional models (``install-model``);
    ``total``: the sum. The first two are the bulk, and are what :func:`prune` removes. Links are not followed.
    """
    root = cache_folder(cache_root)
    usage = dict.fromkeys(USAGE_KINDS, 0)
    if not root.is_dir():
        return {**usage, "total": 0}
    for top in root.iterdir():
        if top.is_symlink():
            continue
        if top.is_file():
            usage["results"] += top.stat().st_size
            continue
        extraction = _is_extraction(top)
        for folder, _, files in os.walk(top):
            for name in files:
                try:
                    size = os.lstat(os.path.join(folder, name)).st_size
                except OSError:
                    continue  # removed meanwhile
                if top.name == "models":
                    usage["models"] += size
                elif extraction:
                    usage["probe_batches" if name.startswith("probe-") else "maps"] += size
                else:
                    usage["results"] += size
    return {**usage, "total": sum(usage.values())}


def _is_extraction(folder: Path) -> bool:
    """A folder of the cache named by an extraction's key: its ``meta.json``, shards of one being written, or only
    the probe batches spilled from its maps (made in the model's pass, the maps never written)."""
    return not folder.is_symlink() and folder.is_dir() and (
        (folder / "meta.json").is_file() or any(folder.glob("shard-*")) or any(folder.glob("probe-*")))


def _stale_or_gone(tmp: Path) -> bool:
    try:
        return is_stale_tmp(tmp)
    except OSError:
        return True


def prune(cache_root: str | os.PathLike | None = None, *, keep_maps: bool = False, dry_run: bool = False) -> dict:
    """Remove the bulk of the cache, the attention maps and the probe batches spilled beside them (with
    ``keep_maps``, the spilled batches only), and keep the rest: statistics and results, fitted heads,
    parsed corpora, installed models. What is removed is computed again when an analysis needs it.

    An extraction with a live writer (a recent temporary file of a running process in its folder) is left
    whole and listed in ``in_use``; a killed writer's leftovers do not protect it. Returns the cache's
    usage by kind before (:func:`cache_usage`), the bytes removed (with ``dry_run``, that would be removed,
    and nothing is) and the extractions touched, by key.
    """
    root = cache_folder(cache_root)
    before = cache_usage(root)
    freed, pruned, in_use = 0, [], []
    folders = sorted(f for f in root.iterdir() if _is_extraction(f)) if root.is_dir() else []
    for folder in folders:
        if any(not _stale_or_gone(tmp) for tmp in temporary_files(folder)):
            in_use.append(folder.name)
            continue
        pattern = "probe-*" if keep_maps else "*"
        size = _folder_bytes(folder, pattern)
        if size == 0:
            continue
        if not dry_run:
            if keep_maps:
                for path in folder.glob(pattern):
                    path.unlink(missing_ok=True)
            else:
                shutil.rmtree(folder, ignore_errors=True)
        freed += size
        pruned.append(folder.name)
    return {"dir": str(root), "before": before, "bytes_removed": freed, "dry_run": dry_run,
            "kept": "maps and results" if keep_maps else "results", "extractions_pruned": pruned,
            "extractions_in_use": in_use}


# ----------------------------------------------------------------------------- small artifacts


def artifact_path(kind: str, key: dict, suffix: str, cache_root: str | os.PathLike | None = None) -> Path:
    """Where a derived artifact (statistics, a fitted head ...) keyed by ``key`` lives in the cache."""
    digest = hashlib.sha256(json.dumps(key, sort_keys=True, default=str).encode())
    return cache_folder(cache_root) / "artifacts" / f"{kind}-{digest.hexdigest()[:24]}{suffix}"


class NotCached(Exception):
    """What :func:`not_cached` raises: the cache lacks the entry a read that must not compute asked for."""


def not_cached():
    """The ``compute`` of a read that must not compute (:func:`cached_json`, :func:`cached_arrays`): raises
    :class:`NotCached` where the cache lacks the entry (or refreshes it)."""
    raise NotCached


def _refuse_constant(name: str):
    raise ValueError(f"{name} is not JSON")


def cached_json(kind: str, key: dict, compute, *, cache_root: str | os.PathLike | None = None,
                refresh: bool = False) -> dict:
    """``compute()`` once per ``key`` and keep its JSON result; a corrupted file is recomputed.

    The stored file records its key, so a file that does not match (stale) is recomputed too. A
    value holding NaN or Infinity is refused (``ValueError``, nothing stored), and a stored file
    holding one (written by an older version) counts as corrupted. With ``refresh``, or inside the
    :meth:`~helpers.context.RunContext.active` block of a context with ``refresh`` (the entry points:
    ``$BERT_ATTENTION_REFRESH``), the result is recomputed and stored again.
    """
    path = artifact_path(kind, key, ".json", cache_root)
    if path.is_file() and not (refresh or refresh_requested()):
        try:
            stored = json.loads(path.read_text(), parse_constant=_refuse_constant)
            if stored.get("key") == json.loads(json.dumps(key, default=str)):
                return stored["value"]
        except (OSError, ValueError, AttributeError):
            pass
    require_writable(path.parent)  # before the work: a read-only cache is refused now, not after computing
    value = compute()
    remove_stale_tmp(path.parent)
    write_cache_json(path, {"key": json.loads(json.dumps(key, default=str)), "value": value})
    return value


def cached_arrays(kind: str, key: dict, compute, *, cache_root: str | os.PathLike | None = None,
                  refresh: bool = False) -> dict[str, np.ndarray]:
    """:func:`cached_json` for NumPy arrays: ``compute()`` (``{name: array}``) once per ``key``, kept as an
    ``.npz`` (written atomically, holding its key); a damaged or stale file is recomputed, as with ``refresh``
    or inside the :meth:`~helpers.context.RunContext.active` block of a context with ``refresh``. What a pass
    keeps of the maps it reads when the maps themselves are not kept (the coreference heads' predictions)."""
    path = artifact_path(kind, key, ".npz", cache_root)
    text = json.dumps(key, sort_keys=True, default=str)
    if path.is_file() and not (refresh or refresh_requested()):
        try:
            with np.load(path, allow_pickle=False) as npz:
                if str(npz["__key__"]) == text:
                    return {name: npz[name] for name in npz.files if name != "__key__"}
        except (OSError, ValueError, KeyError, zipfile.BadZipFile, EOFError):
            pass
    require_writable(path.parent)
    value = compute()
    remove_stale_tmp(path.parent)
    atomic_write(path, lambda handle: np.savez(handle, __key__=np.array(text), **value))
    return value
