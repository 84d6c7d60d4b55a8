"""A disk cache of extracted attention maps: sharded, float32, keyed, atomic, resumable.

:func:`extract` is the entry point chapters use. It encodes nothing itself: give it an
:class:`~helpers.encoding.EncodedBatch` and it returns an :class:`AttentionStore` that streams
``(example, attn [layer, head, n, n])`` from disk.

The cache key is a SHA-256 of the model fingerprint (every weight), the encoded data (every token
id and word alignment, so a change to a corpus file or tokenizer changes it), the source files'
digest when given, and the settings (level, word mode, length limit, token types, shard size).
Each shard is an ``.npz`` written to a temporary file and renamed into place, so an interrupted run
keeps every finished shard and resumes from the next. A shard that fails to load (truncated, bad
CRC) or whose recorded key or indices disagree is recomputed.

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
import socket
import tempfile
import time
import zipfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator

import numpy as np

from .config import cache_dir, refresh_results
from .encoding import Encoded, EncodedBatch
from .extract import Level, bucket, convert, iter_attention
from .jsontext import strict_dumps
from .models import LoadedModel
from .wordlevel import WordMode

FORMAT_VERSION = 2  # 2: shards hold float32 maps (1: float16)

# Shards keep the model's float32 weights: rounding to float16 merges near-equal weights into ties that
# move argmax-based scores (Table 1, Table 2, Figure 5); see the book's deviations page for the measured cost.
SHARD_DTYPE = np.float32
MAPS: tuple[str, ...] = ("weights", "norms")  # attention weights, or norm-based maps (helpers.norms)


class StaleCacheError(RuntimeError):
    """A cache entry does not match what was asked for and no model is at hand to recompute it."""


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
        from .norms import VERSION as norms_version

        settings["maps"] = {"kind": maps, "version": norms_version}
    return hashlib.sha256(json.dumps(settings, sort_keys=True).encode()).hexdigest()[:32]


def _umask() -> int:
    """The process's umask, read without changing it where Linux allows (``/proc/self/status``)."""
    try:
        with open("/proc/self/status", encoding="ascii") as status:
            for line in status:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    mask = os.umask(0o022)  # elsewhere: set and restore at once
    os.umask(mask)
    return mask


_TMP_SUFFIX = ".tmp"
_HOST = hashlib.sha256(socket.gethostname().encode()).hexdigest()[:8]  # tells this machine's writers from others'
STALE_TMP_SECONDS = 3600  # a temporary file of unknown owner this old is from a killed run


def _atomic_write(path: Path, write) -> None:
    """Write ``path`` through a temporary file renamed into place, so readers never see half a file.

    The temporary file is named ``<name>.<host>-<pid>.<random>.tmp``, which lets :func:`remove_stale_tmp`
    tell a killed writer's leftovers from a live one's. The file gets the mode an ordinary
    ``open()`` would give (``0o666`` less the umask), not ``mkstemp``'s private 0600, so a cache or
    report can be shared.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f"{path.name}.{_HOST}-{os.getpid()}.", suffix=_TMP_SUFFIX)
    try:
        os.fchmod(fd, 0o666 & ~_umask())
        with os.fdopen(fd, "wb") as handle:
            write(handle)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OSError):
        return True  # exists, owned by someone else
    return True


def remove_stale_tmp(directory: Path) -> int:
    """Delete temporary files left in ``directory`` by writers that were killed (SIGKILL, power loss).

    A file whose writer process (on this machine) no longer exists is removed; any file older than
    :data:`STALE_TMP_SECONDS` is removed too (written on another machine, or its process id reused).
    A live writer's recent file is kept (two runs may share a cache). Returns how many were removed.
    """
    removed = 0
    try:
        candidates = list(Path(directory).glob(f"*{_TMP_SUFFIX}"))
    except OSError:
        return 0
    for tmp in candidates:
        parts = tmp.name[: -len(_TMP_SUFFIX)].rsplit(".", 2)
        host, _, pid = parts[1].partition("-") if len(parts) == 3 else ("", "", "")
        try:
            stale = time.time() - tmp.stat().st_mtime > STALE_TMP_SECONDS  # also covers a reused pid
            if not stale and host == _HOST and pid.isdigit():
                stale = int(pid) != os.getpid() and not _pid_alive(int(pid))
            if stale:
                tmp.unlink()
                removed += 1
        except OSError:
            continue  # gone already, or not ours to delete
    return removed


def _write_json(path: Path, payload: dict) -> None:
    try:
        text = strict_dumps(payload, indent=1, sort_keys=True)
    except ValueError as err:
        raise ValueError(f"{path}: not cached: {err}") from None
    _atomic_write(path, lambda h: h.write(text.encode()))


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

    def _shard_maps(self, number: int) -> dict[int, np.ndarray]:
        if self._loaded is not None and self._loaded[0] == number:
            return self._loaded[1]
        if self.directory is None:
            maps = {ex.index: a for ex, a in _map_iterator(self.maps)(self._lm, self.shards[number], level=self.level,
                                                                      word_mode=self.word_mode, batch_size=self.stats.get("batch_size", 32))}
        else:
            maps = _read_shard(self.directory / f"shard-{number:05d}.npz", self.n_layers, self.n_heads)
        self._loaded = (number, maps)
        return maps

    def shard_maps(self, number: int) -> dict[int, np.ndarray]:
        """The maps of shard ``number`` as stored (float32 ``[layer, head, n, n]``), by example index."""
        return self._shard_maps(number)

    def __iter__(self) -> Iterator[tuple[Encoded, np.ndarray]]:
        return self.items()

    def items(self, dtype=np.float32) -> Iterator[tuple[Encoded, np.ndarray]]:
        """``(example, attn)`` pairs with maps as ``dtype`` (the stored dtype, float32: no copy; ``np.float16``
        halves the memory of maps kept by the caller)."""
        for number, shard in enumerate(self.shards):
            maps = self._shard_maps(number)
            for ex in shard:
                yield ex, convert(maps[ex.index], dtype)

    def __getitem__(self, index: int) -> np.ndarray:
        for number, shard in enumerate(self.shards):
            if any(ex.index == index for ex in shard):
                return convert(self._shard_maps(number)[index], np.float32)
        if index in self.batch.skipped:
            raise KeyError(f"example {index} was skipped: longer than {self.batch.max_length} tokens")
        raise KeyError(f"no example with index {index}")


def _map_iterator(maps: str):
    """``iter_attention`` for weight maps, :func:`helpers.norms.iter_norm_maps` for norm maps."""
    if maps not in MAPS:
        raise ValueError(f"maps {maps!r}: choose one of {', '.join(MAPS)}")
    if maps == "norms":
        from .norms import iter_norm_maps

        return iter_norm_maps
    return iter_attention


def _read_shard(path: Path, n_layers: int, n_heads: int, key: str | None = None,
                indices: list[int] | None = None) -> dict[int, np.ndarray]:
    """Load one shard (every member, so zip CRCs are checked); raise ValueError if it is unusable."""
    try:
        with np.load(path, allow_pickle=False) as npz:
            arrays = {name: npz[name] for name in ("key", "indices", "sizes", "offsets", "data")}
    except (OSError, ValueError, KeyError, zipfile.BadZipFile, EOFError) as err:
        raise ValueError(f"{path}: unreadable cache shard ({err})") from err
    if key is not None and str(arrays["key"]) != key:
        raise ValueError(f"{path}: shard belongs to another extraction (stale key)")
    if indices is not None and arrays["indices"].tolist() != list(indices):
        raise ValueError(f"{path}: shard holds other examples than expected (stale)")
    maps = {}
    for i, (index, n) in enumerate(zip(arrays["indices"].tolist(), arrays["sizes"].tolist())):
        start, stop = arrays["offsets"][i], arrays["offsets"][i + 1]
        if stop - start != n_layers * n_heads * n * n:
            raise ValueError(f"{path}: example {index} has a wrong size (corrupted)")
        maps[index] = arrays["data"][start:stop].reshape(n_layers, n_heads, n, n)
    return maps


def _write_shard(path: Path, key: str, pairs: list[tuple[Encoded, np.ndarray]], dtype=None) -> None:
    dtype = np.dtype(SHARD_DTYPE if dtype is None else dtype)
    sizes = np.array([a.shape[-1] for _, a in pairs], dtype=np.int64)
    flat = [convert(a, dtype).ravel() for _, a in pairs]
    offsets = np.concatenate([[0], np.cumsum([f.size for f in flat])]).astype(np.int64)
    payload = {
        "key": np.array(key),
        "indices": np.array([ex.index for ex, _ in pairs], dtype=np.int64),
        "sizes": sizes,
        "offsets": offsets,
        "data": np.concatenate(flat) if flat else np.zeros(0, dtype),
    }
    _atomic_write(path, lambda h: np.savez(h, **payload))


@dataclass
class ExtractionPlan:
    """What :func:`extract` found before computing: the store, its key and folder, and the shards to do.

    Shared by the local loop in :func:`extract` and the distributed engine (:mod:`helpers.engine`),
    which computes ``todo`` on its workers and then calls :func:`finish_extraction`.
    """

    store: AttentionStore
    key: str
    directory: Path
    meta: dict
    on_disk: dict | None
    todo: list[int]
    recomputed: int
    start: float

    def shard_path(self, number: int) -> Path:
        return self.directory / f"shard-{number:05d}.npz"

    def mark_incomplete(self) -> None:
        """Record that shards are being written (``meta.json`` with ``complete: false``)."""
        self.meta["complete"] = False
        _write_json(self.directory / "meta.json", self.meta)


def plan_extraction(
    lm: LoadedModel,
    batch: EncodedBatch,
    *,
    level: Level = "word",
    word_mode: WordMode = "mean",
    cache: bool = True,
    cache_root: str | os.PathLike | None = None,
    source_digest: str | None = None,
    batch_size: int = 32,
    shard_size: int = 256,
    maps: str = "weights",
) -> ExtractionPlan | AttentionStore:
    """The shards of ``batch`` and which of them the cache lacks (each present shard is read and checked).

    With ``cache=False`` returns the streaming :class:`AttentionStore` itself (nothing to plan).
    """
    if not batch.examples:
        raise ValueError(
            f"nothing to extract: all {len(batch.skipped)} inputs exceed --max-length {batch.max_length}"
            if batch.skipped else "nothing to extract: the corpus is empty"
        )
    shards = [
        sorted(group, key=lambda e: e.index)
        for group in bucket(batch.examples, batch_size=shard_size)
    ]
    _map_iterator(maps)  # an unknown kind is refused here
    store = AttentionStore(batch, None, shards, lm.n_layers, lm.n_heads, level, word_mode,
                           stats={"batch_size": batch_size}, maps=maps, _lm=lm)
    if not cache:
        return store
    key = cache_key(lm, batch, level=level, word_mode=word_mode, shard_size=shard_size, source_digest=source_digest,
                    maps=maps)
    directory = cache_dir(cache_root) / key
    store.directory = directory
    meta_path = directory / "meta.json"
    meta = {
        "format": FORMAT_VERSION, "key": key, "model": lm.label, "model_fingerprint": lm.fingerprint(),
        "level": level, "word_mode": word_mode if level == "word" else None, "n_layers": lm.n_layers,
        "n_heads": lm.n_heads, "examples": len(batch.examples), "skipped": batch.skipped,
        "max_length": batch.max_length, "shards": len(shards), "dtype": np.dtype(SHARD_DTYPE).name, "complete": False,
    }
    if maps != "weights":
        meta["maps"] = maps
    remove_stale_tmp(directory)  # leftovers of a writer killed mid-shard
    on_disk = None
    if meta_path.is_file():
        try:
            on_disk = json.loads(meta_path.read_text())
        except (OSError, ValueError):
            on_disk = None  # damaged metadata: rewritten below
    if isinstance(on_disk, dict) and on_disk.get("complete") and on_disk.get("key") == key:
        meta = dict(on_disk)
    todo, recomputed = [], 0
    for number, shard in enumerate(shards):
        path = directory / f"shard-{number:05d}.npz"
        if path.is_file():
            try:
                _read_shard(path, lm.n_layers, lm.n_heads, key, [ex.index for ex in shard])
                continue
            except ValueError:
                recomputed += 1
        todo.append(number)
    return ExtractionPlan(store, key, directory, meta, on_disk, todo, recomputed, time.perf_counter())


def compute_shard(lm: LoadedModel, plan_key: str, path: Path, shard: list[Encoded], *, level: Level,
                  word_mode: WordMode, batch_size: int, maps: str = "weights") -> list[tuple[Encoded, np.ndarray]]:
    """Extract one shard's maps (:data:`SHARD_DTYPE`, by example index) and write them atomically to ``path``."""
    pairs = list(_map_iterator(maps)(lm, shard, level=level, word_mode=word_mode,
                                     batch_size=batch_size, progress=False, dtype=SHARD_DTYPE))
    pairs.sort(key=lambda p: p[0].index)
    _write_shard(path, plan_key, pairs)
    return pairs


def load_or_compute_shard(lm: LoadedModel, plan_key: str, path: Path, shard: list[Encoded], *, level: Level,
                          word_mode: WordMode, batch_size: int,
                          maps: str = "weights") -> tuple[dict[int, np.ndarray], bool]:
    """``(maps by example index, computed)``: the shard at ``path`` if it is valid, else extracted and written."""
    try:
        return _read_shard(path, lm.n_layers, lm.n_heads, plan_key, [ex.index for ex in shard]), False
    except ValueError:
        pairs = compute_shard(lm, plan_key, path, shard, level=level, word_mode=word_mode, batch_size=batch_size,
                              maps=maps)
        return {ex.index: a for ex, a in pairs}, True


def finish_extraction(plan: ExtractionPlan, computed: int) -> AttentionStore:
    """Check every shard is on disk, mark ``meta.json`` complete and fill the store's counts."""
    store, shards = plan.store, plan.store.shards
    missing = [k for k in range(len(shards)) if not plan.shard_path(k).is_file()]
    if missing:
        raise OSError(f"{plan.directory}: cache shards keep disappearing while being written "
                      f"({len(missing)} missing); is another process clearing the cache?")
    plan.meta["complete"] = True
    if computed or plan.meta != plan.on_disk:  # after every computation, and whenever the file is damaged or missing
        _write_json(plan.directory / "meta.json", plan.meta)
    store.stats.update({
        "shards": len(shards), "shards_computed": computed, "shards_reused": len(shards) - len(plan.todo),
        "shards_recomputed": plan.recomputed, "seconds": round(time.perf_counter() - plan.start, 3),
    })
    store._lm = None
    return store


def extract(
    lm: LoadedModel,
    batch: EncodedBatch,
    *,
    level: Level = "word",
    word_mode: WordMode = "mean",
    cache: bool = True,
    cache_root: str | os.PathLike | None = None,
    source_digest: str | None = None,
    batch_size: int = 32,
    shard_size: int = 256,
    progress: bool = True,
    maps: str = "weights",
) -> AttentionStore:
    """Extract (or reload) the maps of ``batch``; returns a streaming :class:`AttentionStore`.

    ``maps="norms"`` stores norm-based maps ``||alpha_ij f(x_j)||`` (:mod:`helpers.norms`) instead of weights.
    With ``cache=False`` nothing is written and iterating the store runs the model shard by shard.
    """
    from tqdm.auto import tqdm

    plan = plan_extraction(lm, batch, level=level, word_mode=word_mode, cache=cache, cache_root=cache_root,
                           source_digest=source_digest, batch_size=batch_size, shard_size=shard_size, maps=maps)
    if isinstance(plan, AttentionStore):
        return plan
    shards = plan.store.shards

    def compute(numbers: list[int]) -> None:
        plan.mark_incomplete()
        bar = tqdm(total=sum(len(shards[k]) for k in numbers), desc=f"{level}-level {'attention' if maps == 'weights' else maps}",
                   unit="ex", disable=not progress)
        try:
            for number in numbers:
                pairs = compute_shard(lm, plan.key, plan.shard_path(number), shards[number], level=level,
                                      word_mode=word_mode, batch_size=batch_size, maps=maps)
                bar.update(len(pairs))
        finally:
            bar.close()

    computed = 0
    missing = plan.todo
    for _ in range(3):  # shards deleted while this run wrote others (the cache was cleared) are redone
        if not missing:
            break
        compute(missing)
        computed += len(missing)
        missing = [k for k in range(len(shards)) if not plan.shard_path(k).is_file()]
    return finish_extraction(plan, computed)


def _finished_bytes(directory: Path) -> int:
    """Bytes of the finished files in ``directory`` (temporary files of writers are not counted)."""
    total = 0
    for path in directory.iterdir():
        if path.name.endswith(_TMP_SUFFIX):
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
    root = cache_dir(cache_root)
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
        meta["bytes"] = _finished_bytes(meta_path.parent)
        entries.append(meta)
    return entries


# ----------------------------------------------------------------------------- small artifacts


def artifact_path(kind: str, key: dict, suffix: str, cache_root: str | os.PathLike | None = None) -> Path:
    """Where a derived artifact (statistics, a fitted head ...) keyed by ``key`` lives in the cache."""
    digest = hashlib.sha256(json.dumps({"format": FORMAT_VERSION, **key}, sort_keys=True, default=str).encode())
    return cache_dir(cache_root) / "artifacts" / f"{kind}-{digest.hexdigest()[:24]}{suffix}"


def _refuse_constant(name: str):
    raise ValueError(f"{name} is not JSON")


def cached_json(kind: str, key: dict, compute, *, cache_root: str | os.PathLike | None = None,
                refresh: bool = False) -> dict:
    """``compute()`` once per ``key`` and keep its JSON result; a corrupted file is recomputed.

    The stored file records its key, so a file that does not match (stale) is recomputed too. A
    value holding NaN or Infinity is refused (``ValueError``, nothing stored), and a stored file
    holding one (written by an older version) counts as corrupted.
    """
    path = artifact_path(kind, key, ".json", cache_root)
    if path.is_file() and not (refresh or refresh_results()):
        try:
            stored = json.loads(path.read_text(), parse_constant=_refuse_constant)
            if stored.get("key") == json.loads(json.dumps(key, default=str)):
                return stored["value"]
        except (OSError, ValueError, AttributeError):
            pass
    value = compute()
    remove_stale_tmp(path.parent)
    _write_json(path, {"key": json.loads(json.dumps(key, default=str)), "value": value})
    return value


def encode_treebank(lm: LoadedModel, spec: str, *, max_sentences: int | None = None, max_length: int = 128,
                    data_dir=None):
    """``(sentences, batch, source_digest)``: a treebank's sentences, encoded, and its files' digest."""
    from .corpora import corpus_files, file_digest, load_treebank
    from .encoding import encode_words

    sentences = load_treebank(spec, root=data_dir, max_sentences=max_sentences)
    batch = encode_words(lm.tokenizer, [s.words for s in sentences], max_length=max_length, model_max=lm.max_positions)
    return sentences, batch, file_digest(corpus_files(spec, root=data_dir))


def extract_treebank(lm: LoadedModel, spec: str, *, max_sentences: int | None = None, max_length: int = 128,
                     word_mode: WordMode = "mean", data_dir=None, cache_root: str | os.PathLike | None = None,
                     progress: bool = False, shard_size: int = 256, maps: str = "weights"):
    """``(sentences, store)``: a treebank's sentences and their word-level maps (cached, keyed on the files);
    ``maps="norms"`` for norm-based maps."""
    sentences, batch, digest = encode_treebank(lm, spec, max_sentences=max_sentences, max_length=max_length,
                                               data_dir=data_dir)
    store = extract(lm, batch, level="word", word_mode=word_mode, cache_root=cache_root, progress=progress,
                    source_digest=digest, shard_size=shard_size, maps=maps)
    return sentences, store
