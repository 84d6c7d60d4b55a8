"""Extraction of a corpus into the cache: plan the shards, compute the missing ones (here or on the
distributed engine: the one route's shard task, :func:`helpers.pipeline.shards.reduce_shard`), and stream the maps
back (:class:`~helpers.data.cache.AttentionStore`).

>>> store = extract(lm, batch, level="word")          # cached on disk, keyed by model, data and settings  # doctest: +SKIP
>>> sentences, store = extract_treebank(lm, "gum:test")                                                # doctest: +SKIP
"""
from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from helpers.context import cache_folder
from helpers.core.encoding import MAX_LENGTH, EncodedBatch
from helpers.core.extract import Level, bucket
from helpers.core.models import LoadedModel
from helpers.core.wordlevel import WordMode
from helpers.data import cache as store_format
from helpers.data.cache import (
    FORMAT_VERSION,
    AttentionStore,
    _read_shard,
    cache_key,
    write_cache_json,
)
from helpers.data.files import remove_stale_tmp, require_writable


@dataclass
class ExtractionPlan:
    """What :func:`extract` found before computing: the store, its key and folder, and the shards to do.

    Shared by :func:`extract` and the one route (:mod:`helpers.pipeline.route`), whose shard task makes and writes
    ``todo`` (here, or on Dask workers) before :func:`finish_extraction`.
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
        write_cache_json(self.directory / "meta.json", self.meta)


SHARD_SIZE = 256  # examples per cache shard (the default model's: 6 x 12 maps each)


def shard_size_for(lm: LoadedModel, *, examples: int = SHARD_SIZE, batch_size: int = 32) -> int:
    """Examples per shard holding as many maps as ``examples`` examples of a 6-layer, 12-head model (a
    multiple of ``batch_size``, at least one batch, at most ``examples``): with the default 256, 256 for the
    default model and 128 for a 12 x 12 one. A shard's maps are in memory while it is made and while it is
    read. The batches are the same at any size (all cut the same length order every ``batch_size``
    examples), so the maps are too; only the order in which a store yields its examples changes, which is
    why only consumers whose results do not depend on that order (coreference: per-example predictions and
    integer counts; see :data:`helpers.coref.run.COREF_SHARD_EXAMPLES`) use it, and the other stores keep
    :data:`SHARD_SIZE` (their float sums, and so their last digits, follow the order)."""
    per_example = lm.n_layers * lm.n_heads
    fitted = examples * 6 * 12 // per_example
    return max(batch_size, min(examples, fitted // batch_size * batch_size))


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
    shard_size: int = SHARD_SIZE,
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
    if maps not in store_format.MAPS:
        raise ValueError(f"maps {maps!r}: choose one of {', '.join(store_format.MAPS)}")
    store = AttentionStore(batch, None, shards, lm.n_layers, lm.n_heads, level, word_mode,
                           stats={"batch_size": batch_size}, maps=maps, _lm=lm)
    if not cache:
        return store
    key = cache_key(lm, batch, level=level, word_mode=word_mode, shard_size=shard_size, source_digest=source_digest,
                    maps=maps)
    directory = cache_folder(cache_root) / key
    store.directory = directory
    meta_path = directory / "meta.json"
    meta = {
        "format": FORMAT_VERSION, "key": key, "model": lm.label, "model_fingerprint": lm.fingerprint(),
        "level": level, "word_mode": word_mode if level == "word" else None, "n_layers": lm.n_layers,
        "n_heads": lm.n_heads, "examples": len(batch.examples), "skipped": batch.skipped,
        "max_length": batch.max_length, "shards": len(shards), "dtype": np.dtype(store_format.SHARD_DTYPE).name, "complete": False,
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
                _read_shard(path, lm.n_layers, lm.n_heads, key, [ex.index for ex in shard], maps=maps)
                continue
            except ValueError:
                recomputed += 1
        todo.append(number)
    if todo:
        require_writable(directory)  # shards to write: a read-only cache is refused before the model runs
    return ExtractionPlan(store, key, directory, meta, on_disk, todo, recomputed, time.perf_counter())


def is_extracted(key: str, cache_root: str | os.PathLike | None = None) -> bool:
    """Whether the cache holds the finished extraction ``key`` (:func:`~helpers.data.cache.cache_key`): its
    ``meta.json`` says it is complete (its shards are checked when it is read). Passes that write maps only
    when asked (the probes, the coreference windows, the norm maps) read them when they are there."""
    try:
        meta = json.loads((cache_folder(cache_root) / key / "meta.json").read_text())
    except (OSError, ValueError):
        return False
    return isinstance(meta, dict) and meta.get("key") == key and bool(meta.get("complete"))


def finish_extraction(plan: ExtractionPlan, computed: int) -> AttentionStore:
    """Check every shard is on disk, mark ``meta.json`` complete and fill the store's counts."""
    store, shards = plan.store, plan.store.shards
    missing = [k for k in range(len(shards)) if not plan.shard_path(k).is_file()]
    if missing:
        raise OSError(f"{plan.directory}: cache shards keep disappearing while being written "
                      f"({len(missing)} missing); is another process clearing the cache?")
    plan.meta["complete"] = True
    if computed or plan.meta != plan.on_disk:  # after every computation, and whenever the file is damaged or missing
        write_cache_json(plan.directory / "meta.json", plan.meta)
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
    shard_size: int = SHARD_SIZE,
    progress: bool = True,
    maps: str = "weights",
    execution=None,
) -> AttentionStore:
    """Extract (or reload) the maps of ``batch``; returns a streaming :class:`AttentionStore`.

    ``maps="norms"`` stores norm-based maps ``||alpha_ij f(x_j)||`` (:mod:`helpers.norms.stats`) instead of weights.
    With ``cache=False`` nothing is written and iterating the store runs the model shard by shard. The missing
    shards are made in this process, or on the cluster of a distributed ``execution``
    (:class:`~helpers.pipeline.engine.Execution`), whose workers write them into the cache.
    """
    from helpers.pipeline.engine import map_tasks
    from helpers.pipeline.shards import ShardJob, reduce_shard

    plan = plan_extraction(lm, batch, level=level, word_mode=word_mode, cache=cache, cache_root=cache_root,
                           source_digest=source_digest, batch_size=batch_size, shard_size=shard_size, maps=maps)
    if isinstance(plan, AttentionStore):
        return plan
    shards = plan.store.shards
    job = ShardJob(level, word_mode, maps, batch_size, None, plan.key, str(plan.directory))  # made and written only
    computed = 0
    missing = plan.todo
    for _ in range(3):  # shards deleted while this run wrote others (the cache was cleared) are redone
        if not missing:
            break
        plan.mark_incomplete()
        # the route's shard task, one shard at a time: its maps are dropped as soon as it is written (held while the
        # next shard was made, two shards of whole-document windows took the coreference chapter over 3 GB)
        map_tasks(lm, execution=execution, task=reduce_shard, shared=job, payloads=[(k, shards[k], None) for k in missing],
                  desc=f"{level}-level {'attention' if maps == 'weights' else maps}", progress=progress,
                  sizes=[len(shards[k]) for k in missing], name="shard")
        computed += len(missing)
        missing = [k for k in range(len(shards)) if not plan.shard_path(k).is_file()]
    return finish_extraction(plan, computed)


def maps_store(lm: LoadedModel, batch: EncodedBatch, *, level: Level = "word", word_mode: WordMode = "mean",
               maps: str = "weights", source_digest: str | None = None, shard_size: int = SHARD_SIZE,
               cache_root: str | os.PathLike | None = None) -> AttentionStore:
    """The maps of ``batch`` for reading examples back after :func:`helpers.pipeline.route.reduce_maps` reduced them
    (a chapter's figures): the cached extraction when the cache holds it (:func:`is_extracted`; each shard checked
    when it is read), else the streaming store, which runs the model on a shard when one of its examples is read.
    Nothing is read or computed here."""
    store = plan_extraction(lm, batch, level=level, word_mode=word_mode, cache=False, shard_size=shard_size, maps=maps)
    key = cache_key(lm, batch, level=level, word_mode=word_mode, shard_size=shard_size, source_digest=source_digest,
                    maps=maps)
    if is_extracted(key, cache_root):
        store.directory = cache_folder(cache_root) / key
    return store


def encode_treebank(lm: LoadedModel, spec: str, *, max_sentences: int | None = None, max_length: int = MAX_LENGTH,
                    data_dir=None, cache_root: str | os.PathLike | None = None):
    """``(sentences, batch, source_digest)``: a treebank's sentences, encoded, and its files' digest."""
    from helpers.core.encoding import encode_words
    from helpers.data.corpora import corpus_files, file_digest, load_treebank

    sentences = load_treebank(spec, data_dir=data_dir, max_sentences=max_sentences, cache_root=cache_root)
    batch = encode_words(lm.tokenizer, [s.words for s in sentences], max_length=max_length, model_max=lm.max_positions)
    return sentences, batch, file_digest(corpus_files(spec, data_dir=data_dir))


def extract_treebank(lm: LoadedModel, spec: str, *, max_sentences: int | None = None, max_length: int = MAX_LENGTH,
                     word_mode: WordMode = "mean", data_dir=None, cache_root: str | os.PathLike | None = None,
                     progress: bool = False, shard_size: int = SHARD_SIZE, maps: str = "weights"):
    """``(sentences, store)``: a treebank's sentences and their word-level maps (cached, keyed on the files);
    ``maps="norms"`` for norm-based maps."""
    sentences, batch, digest = encode_treebank(lm, spec, max_sentences=max_sentences, max_length=max_length,
                                               data_dir=data_dir, cache_root=cache_root)
    store = extract(lm, batch, level="word", word_mode=word_mode, cache_root=cache_root, progress=progress,
                    source_digest=digest, shard_size=shard_size, maps=maps)
    return sentences, store
