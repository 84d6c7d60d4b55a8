"""Paper §5 end to end: word-level maps of GUM train/dev/test and EWT dev (of the model and its random-init
control) -> padded batches spilled to disk for the run's trainings (on an accelerator, made and held there from the
model's passes instead: :mod:`helpers.probe.device_batches`) -> probes trained with three seeds ->
Table 3 (UAS without punctuation, greedy and maximum-spanning-tree decoding).

>>> table = run_probes(lm, seeds=(0, 1, 2))                              # doctest: +SKIP
"""
from __future__ import annotations

import hashlib
import json
import time
from pathlib import Path

import numpy as np
import torch

from helpers import paper
from helpers.core.encoding import MAX_LENGTH, EncodedBatch
from helpers.context import RunContext, cache_folder, keep_maps_requested, takes_context
from helpers.core.models import LoadedModel, load_model
from helpers.data.cache import cache_key, cached_json
from helpers.data.corpora import corpus_files, file_digest
from helpers.digest import code_digest
from helpers.pipeline.extraction import encode_treebank, extract_treebank, one_pass_store
from helpers.probe.stats import (
    ProbeData,
    ResidentBatches,
    encoder_layout,
    fits_on,
    hold_resident,
    predict,
    release_resident,
    right_branching_correct,
    right_branching_uas,
    sentence_correct,
    sentence_totals,
    train_probe,
    uas,
)


def load_glove(path: str | Path) -> dict[str, np.ndarray]:
    """Vectors of a GloVe-format text file (``word v_1 ... v_d`` per line), keyed by lower-cased word."""
    vectors: dict[str, np.ndarray] = {}
    dim = None
    with open(path, encoding="utf-8") as handle:
        for number, line in enumerate(handle, start=1):
            parts = line.rstrip().split(" ")
            if len(parts) < 2:
                continue
            if dim is None:
                dim = len(parts) - 1
            if len(parts) - 1 != dim:
                raise ValueError(f"{path}:{number}: {len(parts) - 1} numbers, expected {dim} like the first line")
            try:
                vectors.setdefault(parts[0].lower(), np.asarray(parts[1:], dtype=np.float32))
            except ValueError as err:
                raise ValueError(f"{path}:{number}: not a number in the vector ({err})") from err
    if not vectors:
        raise ValueError(f"{path}: no vectors found")
    return vectors


def word_vectors(lm: LoadedModel, examples, glove: dict[str, np.ndarray] | None = None, *,
                 embeddings: np.ndarray | None = None) -> dict[int, np.ndarray]:
    """``{example index: [n_words, dim]}`` for an :class:`EncodedBatch` or a list of its examples: GloVe
    vectors (unknown words: zero) or else the model's static input embeddings averaged over each word's
    tokens (``embeddings``: that matrix, when the caller already has it)."""
    examples = examples.examples if isinstance(examples, EncodedBatch) else examples
    out = {}
    if glove is not None:
        dim = len(next(iter(glove.values())))
        for ex in examples:
            out[ex.index] = np.stack([glove.get(w.lower(), np.zeros(dim, np.float32)) for w in ex.words])
        return out
    E = input_embeddings(lm) if embeddings is None else embeddings
    for ex in examples:
        sums = np.zeros((ex.n_words + 2, E.shape[1]), np.float32)
        np.add.at(sums, ex.word_of_token, E[ex.input_ids])
        counts = np.bincount(ex.word_of_token, minlength=ex.n_words + 2)[:, None]
        out[ex.index] = (sums / np.maximum(counts, 1))[ex.lead : ex.lead + ex.n_words]
    return out


def input_embeddings(lm: LoadedModel) -> np.ndarray:
    """The model's static input (word-piece) embeddings, ``[vocab, dim]`` float32."""
    return lm.model.get_input_embeddings().weight.detach().float().cpu().numpy()


def probe_data(lm: LoadedModel, spec: str, *, vectors_from: LoadedModel | None = None, glove=None,
               glove_digest: str | None = None, max_sentences: int | None = None, max_length: int = MAX_LENGTH,
               data_dir=None, cache_root=None, progress: bool = False, batch_size: int | None = None,
               shard_size: int = 256, spill: bool = True, write_maps: bool | None = None,
               share_vectors: ProbeData | None = None, resident_on=None) -> ProbeData:
    """Maps of ``lm`` and word vectors (of ``vectors_from``, default ``lm``, or GloVe) for a corpus.

    With ``batch_size`` and ``spill`` the padded batches are spilled to disk (built one cache shard at a
    time, reused by later runs until :func:`remove_spills`) and streamed back: memory stays flat whatever the
    corpus size. They are made from the cached word-level maps when the cache holds them, else from the
    model's pass itself, and the maps are then written to the cache only with ``write_maps`` (default: the
    context's ``keep_maps``, :func:`helpers.context.keep_maps_requested`): the batches are all the probes read.
    Without ``batch_size`` or with ``spill=False`` every map is kept in memory (and cached on disk; ``batch_size``
    is then the default size of its batches). Sentences are in cache-shard order in both forms, and batches
    never cross a shard, so both give the same batches. ``share_vectors``: the spilled data of the same corpus
    with the same word vectors (the model's, for its random-init control, whose ``vectors_from`` is the model):
    the spill then holds the maps only and reads the vectors from that one's file.

    Where the probes train on a device other than the CPU (``resident_on``, default the model's device; ``False``:
    never) and hold their batches there (:func:`helpers.probe.stats.fits_on`), batches of maps the cache does not
    hold are instead made on that device from the model's passes and held there (:mod:`helpers.probe.device_batches`:
    the same batches, no spill file, no map on the host); cached maps, and batches too large for the device, are
    spilled as on the CPU.
    """
    from helpers.probe.batches import DiskBatches, hold, load_spilled, spill as spill_batches  # not `spill`: the argument

    if batch_size is None or not spill:
        sentences, store = extract_treebank(lm, spec, max_sentences=max_sentences, max_length=max_length,
                                            data_dir=data_dir, cache_root=cache_root, progress=progress,
                                            shard_size=shard_size)
    else:
        sentences, batch, digest = encode_treebank(lm, spec, max_sentences=max_sentences, max_length=max_length,
                                                   data_dir=data_dir, cache_root=cache_root)
        # the cached maps, else the model's pass shard by shard, read only if the batches are not spilled yet
        store = one_pass_store(lm, batch, write=write_maps, cache_root=cache_root, source_digest=digest,
                               shard_size=shard_size, progress=progress)
        directory = cache_folder(cache_root) / cache_key(lm, batch, level="word", word_mode="mean",
                                                         shard_size=shard_size, source_digest=digest)
    source = vectors_from or lm
    order = [ex for shard in store.shards for ex in shard]
    position = {ex.index: p for p, ex in enumerate(order)}
    groups = [[position[ex.index] for ex in shard] for shard in store.shards]
    heads = [np.asarray(sentences[ex.index].heads) for ex in order]
    punct = [np.array([u == "PUNCT" or r == "punct" for u, r in zip(sentences[ex.index].upos, sentences[ex.index].deprels)])
             for ex in order]
    names = [sentences[ex.index].sent_id for ex in order]
    E = None if glove is not None else input_embeddings(source)

    if batch_size is None or not spill:
        vectors = word_vectors(source, order, glove, embeddings=E)
        maps = dict((ex.index, encoder_layout(attn, ex.lead, ex.trail)) for ex, attn in store.items(np.float16))
        return ProbeData([maps[ex.index] for ex in order], heads, punct, [vectors[ex.index] for ex in order],
                         skipped=len(store.skipped), names=names, groups=groups, batch_size=batch_size)

    data = ProbeData([], heads, punct, [], skipped=len(store.skipped), names=names, groups=groups,
                     batch_size=batch_size)
    if resident_on is None:  # where the probes train: the model's device
        resident_on = lm.device if torch.device(lm.device).type != "cpu" else False
    if resident_on is not False and store.directory is None:  # maps made by the passes now, not read from the cache
        made = _made_on_device(lm, store, data, groups, position, batch_size, torch.device(resident_on), source=source,
                               glove=glove, embeddings=E, share_vectors=share_vectors)
        if made is not None:
            return made
    shared = share_vectors.spilled if share_vectors is not None else None
    shared = shared if isinstance(shared, DiskBatches) else None  # (a device's held batches: no file to share)
    key = {"store": directory.name, "vectors": glove_digest if glove is not None else source.fingerprint(),
           "batch_size": batch_size, "code": code_digest(probe_data)}
    if shared is not None:
        key["vectors_in"] = shared.path.name
    key = json.dumps(key, sort_keys=True)
    path = directory / f"probe-{hashlib.sha256(key.encode()).hexdigest()[:16]}.bin"
    directory.mkdir(parents=True, exist_ok=True)
    hold(path)  # before it is read or written: another run's removal leaves it alone until this run removes it
    spilled = load_spilled(data, path, key, vectors=shared)
    if spilled is None:
        def shards():
            for number, shard in enumerate(store.shards):
                # read from the cache, or made by the model now, each map halved as it comes (never the shard at float32)
                made = {ex.index: encoder_layout(attn, ex.lead, ex.trail) for ex, attn in store.shard_items(number, np.float16)}
                half = [made.pop(ex.index) for ex in shard]
                store.release()  # a cached float32 shard goes before the batches are built
                vectors = {} if shared is not None else word_vectors(source, shard, glove, embeddings=E)
                yield [position[ex.index] for ex in shard], half, [vectors[ex.index] for ex in shard if vectors]
                del half
        spilled = spill_batches(data, shards(), path, key, batch_size, vectors=shared)
    data.spilled = spilled
    return data


def _made_on_device(lm: LoadedModel, store, data: ProbeData, groups, position: dict[int, int], batch_size: int,
                    device: torch.device, *, source: LoadedModel, glove, embeddings, share_vectors) -> ProbeData | None:
    """``data`` with its batches made on ``device`` from the model's passes over the streaming ``store`` and held
    there (:func:`helpers.probe.device_batches.device_batches`), or ``None`` where they would not fit
    (:func:`helpers.probe.stats.fits_on`: they are spilled then). The held batches are the data's
    ``spilled`` batches (what :func:`helpers.probe.stats.prepared` gives) and those
    :func:`helpers.probe.stats.batches_on` keeps for ``device``."""
    from helpers.probe.device_batches import device_batches, held_bytes, shard_shapes

    dim = len(next(iter(glove.values()))) if glove is not None else int(embeddings.shape[1])
    batches = shard_shapes(data, groups, batch_size)
    if not fits_on(device, held_bytes(data, batches, lm.n_layers * lm.n_heads, dim)):
        return None
    shared = getattr(share_vectors, "spilled", None)
    shared = shared.held if isinstance(shared, ResidentBatches) and shared.device == device else None
    data.n_maps, data.dim_ = lm.n_layers * lm.n_heads, dim
    data.spilled = device_batches(lm, store, data, batches, position, batch_size, device, shared=shared,
                                  vectors=lambda shard: word_vectors(source, shard, glove, embeddings=embeddings))
    hold_resident(data, batch_size, data.spilled)
    return data


def remove_spills(sets) -> int:
    """Remove the spilled batches of the :class:`ProbeData` in ``sets`` (an iterable) from the cache, and the
    folder that held them when nothing else is left in it; the bytes removed. What the probes' run does once
    its table is computed (unless maps are kept, ``keep_maps``): the batches serve its trainings only, and a
    later run with other settings spills them again. Batches another process still reads (the same probes run
    twice at once) stay for it to remove (:func:`helpers.probe.batches.remove`)."""
    from helpers.probe.batches import remove

    freed = 0
    for data in sets:
        release_resident(data)  # and the copies of its batches held on a device (probes.batches_on)
        spilled = getattr(data, "spilled", None)
        if isinstance(spilled, ResidentBatches):  # made on the device, never spilled (helpers.probe.device_batches)
            data.spilled = None
            continue
        if spilled is None:
            continue
        freed += remove(spilled.path)  # unless another run still reads it (the last one removes it)
        try:
            spilled.path.parent.rmdir()  # only when empty: cached maps beside them stay
        except OSError:
            pass
    return freed


def _summary(values: list[float]) -> dict:
    return {"mean": round(float(np.mean(values)), 2), "sd": round(float(np.std(values, ddof=1)), 2) if len(values) > 1 else 0.0,
            "runs": [round(v, 2) for v in values]}


SPECS = (("train", "gum:train"), ("dev", "gum:dev"), ("test", "gum:test"), ("ewt", "ewt:dev"))
TRAIN_BATCH, EVAL_BATCH = 32, 64  # sentences per batch (training; evaluation)

SEEDS, EPOCHS = (0, 1, 2), 3          # the chapter's seeds and epochs
SMALL_SENTENCES, SMALL_EPOCHS = 300, 2  # the small (test) configuration


def probe_corpora(train: str | None = None, dev: str | None = None, tests: list[str] | tuple[str, ...] | None = None
                  ) -> dict[str, str]:
    """``{"train": spec, "dev": spec, <test name>: spec, ...}``: the paper's GUM/EWT default, or the given
    corpus names / CoNLL-U files. The default's test sets are named ``test`` (GUM test) and ``ewt`` (EWT
    dev); given test sets are named ``test`` (the first), then ``test2``, ``test3`` ..."""
    default = dict(SPECS)
    out = {"train": train or default["train"], "dev": dev or default["dev"]}
    if not tests:
        out.update(test=default["test"], ewt=default["ewt"])
    else:
        out.update({("test" if k == 0 else f"test{k + 1}"): spec for k, spec in enumerate(tests)})
    return out


@takes_context
def run_probes(lm: LoadedModel, ctx: RunContext | None = None, *, seeds=(0, 1, 2), epochs: int = 3,
               glove_path: str | None = None, max_sentences: int | None = None, max_length: int = MAX_LENGTH,
               refresh: bool = False, corpora: dict[str, str] | None = None, workers: int | None = None) -> dict:
    """Every row of Table 3 on each test set (default: GUM test and EWT dev), mean and spread over ``seeds``
    (cached on disk, keyed by the model, the corpus files, the word vectors, the settings and the code that
    computes them: :func:`helpers.digest.code_digest` of this module, which follows its imports).

    ``corpora`` (see :func:`probe_corpora`) names the training, development and test treebanks.
    Memory does not grow with the corpora: batches are spilled to disk and streamed (see
    :mod:`helpers.probe.batches`), and removed once the table is computed; only the model's maps of the
    evaluation treebanks stay in the cache (every map with ``keep_maps``, the batches too). On an accelerator the
    batches are held there; those of maps the cache lacks are made there from the model's passes, never spilled
    (:func:`probe_data`)."""
    data_dir, cache_root, progress = ctx.data_dir, ctx.cache_dir, ctx.progress
    corpora = corpora or probe_corpora()
    key = {"model": lm.fingerprint(), "code": code_digest(_run_probes), "seeds": list(seeds), "epochs": epochs,
           "max_sentences": max_sentences, "max_length": max_length,
           "glove": file_digest([Path(glove_path)]) if glove_path else None,
           "data": {name: file_digest(corpus_files(spec, data_dir=data_dir)) for name, spec in corpora.items()}}
    if corpora != probe_corpora():
        key["specs"] = corpora
    return cached_json("probes", key, lambda: _run_probes(lm, seeds=seeds, epochs=epochs, glove_path=glove_path,
                                                         max_sentences=max_sentences, max_length=max_length,
                                                         data_dir=data_dir, cache_root=cache_root, progress=progress,
                                                         corpora=corpora, workers=workers),
                       cache_root=cache_root, refresh=refresh)


def control_model(lm: LoadedModel, seed: int = 0) -> LoadedModel:
    """The random-init control of ``lm``: the same architecture and tokenizer, random weights, loaded from
    where ``lm`` was (an optional extra installed under ``--cache-dir`` too), on its device, in its dtype. The
    paper's control keeps the pre-trained embeddings; an ``all``-random model's control is ``all``-random too
    (its folder may hold no weights at all)."""
    return load_model(lm.spec, random_init="all" if lm.random_init == "all" else True, seed=seed, device=lm.device,
                      cache_root=lm.cache_root, dtype=lm.dtype)


# Table 3's probe rows: (label, probe kind, data: the model's maps or its random-init control's, the original
# code's misalignment). The misaligned row trains one seed only (the bug's effect is what it shows).
CONFIGS = (("Distances + words", "distances+words", "maps", False), ("Random-init Attn + words", "attn+words", "random", False),
           ("Attn", "attn", "maps", False), ("Attn + words", "attn+words", "maps", False),
           ("Attn + words (original misalignment)", "attn+words", "maps", True))
# Relative cost of an epoch (measured by benchmarks/probes.py): the longest trainings are started first.
_COST = {"distances+words": 3, "attn+words": 2, "attn": 1}
WORKERS = 2  # trainings at a time (processes of one thread each): the 2-core machine's cores; each holds
#              one batch buffer, so memory grows with this number


def training_jobs(seeds) -> list[tuple[str, str, str, bool, int]]:
    """Every training of Table 3, ``(label, kind, data, misaligned, seed)``, the most expensive first."""
    jobs = [(label, kind, data, misaligned, seed) for label, kind, data, misaligned in CONFIGS
            for seed in (seeds[:1] if misaligned else seeds)]
    return sorted(jobs, key=lambda job: -_COST[job[1]])  # stable: the table's order within a cost


def twin_jobs(jobs) -> dict[tuple[str, int], tuple[str, int]]:
    """``{(label, seed): (label, seed) of its twin}`` for the jobs that train exactly what another job trains
    when the control's data are the model's own (a random-init model's control is that model: same
    architecture, same seed, same weights): the same probe, misalignment and seed on the same data give the
    same scores, so each such job takes its twin's (the one on the model's own data, ``"maps"``) instead of
    training again."""
    first: dict[tuple, tuple[str, int]] = {}
    twins = {}
    for label, kind, which, misaligned, seed in sorted(jobs, key=lambda job: job[2] != "maps"):  # own data first
        key = (kind, misaligned, seed)
        if key in first:
            twins[(label, seed)] = first[key]
        else:
            first[key] = (label, seed)
    return twins


def train_one(job, sets: dict[str, dict[str, ProbeData]], tests: list[str], epochs: int, device=None) -> dict:
    """Train one probe (``job`` from :func:`training_jobs`) on ``device`` (default the CPU) and score it:
    ``{"dev": best dev UAS, "epoch": best epoch, <test>: UAS, "test_mst": UAS of GUM test with MST decoding,
    "correct": {<test>: [sentence] words right (greedy; :func:`~helpers.probe.stats.sentence_correct`)}}``."""
    _, kind, which, misaligned, seed = job
    data = sets[which]
    model, info = train_probe(kind, data["train"], data["dev"], seed=seed, epochs=epochs, misaligned=misaligned,
                              device=device)
    out = {"dev": max(info["dev_uas"]), "epoch": info["best_epoch"], "correct": {}}
    for name in tests:
        logits = predict(model, data[name], misaligned=misaligned, device=device)
        correct = sentence_correct(logits, data[name])
        out[name] = 100.0 * int(correct.sum()) / max(int(sentence_totals(data[name]).sum()), 1)  # uas(logits, ...)
        out["correct"][name] = correct.tolist()
        if name == "test":
            out["test_mst"] = uas(logits, data[name], decode="mst")
    return out


_WORKER_SETS: dict = {}


def _worker_init(sets) -> None:
    torch.set_num_threads(1)
    _WORKER_SETS.update(sets)


def _worker_train(job, tests, epochs, device=None) -> dict:
    return train_one(job, _WORKER_SETS, tests, epochs, device)


def train_all(jobs, sets: dict[str, dict[str, ProbeData]], tests: list[str], *, epochs: int, workers: int | None = None,
              progress: bool = False, device=None) -> dict[tuple[str, int], dict]:
    """:func:`train_one` for every job, ``{(label, seed): scores}``. With ``workers`` > 1 (default
    :data:`WORKERS`, at most the cores available) the trainings run in that many spawned processes of one
    thread each, the datasets sent once to each (spilled data are a file name and an index); a training's
    result does not depend on where it runs (seeded, and the same on one thread or several: tested). On a
    ``device`` other than the CPU (the model's, e.g. ``cuda``) they run one at a time in this process, there."""
    import os

    from tqdm.auto import tqdm

    workers = min(WORKERS if workers is None else workers, len(os.sched_getaffinity(0)), len(jobs))
    if device is not None and torch.device(device).type != "cpu":
        workers = 1  # one accelerator: the trainings take turns on it
    bar = tqdm(total=len(jobs), desc="probe trainings", unit="probe", disable=not progress)
    out = {}
    if workers <= 1:
        for job in jobs:
            out[(job[0], job[4])] = train_one(job, sets, tests, epochs, device)
            bar.update()
        bar.close()
        return out
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor, as_completed
    from concurrent.futures.process import BrokenProcessPool

    with ProcessPoolExecutor(max_workers=workers, mp_context=multiprocessing.get_context("spawn"),
                             initializer=_worker_init, initargs=(sets,)) as pool:
        futures = {pool.submit(_worker_train, job, tests, epochs, device): job for job in jobs}
        try:
            for future in as_completed(futures):
                job = futures[future]
                out[(job[0], job[4])] = future.result()
                bar.update()
        except BrokenProcessPool as exc:
            raise RuntimeError(f"a probe training process died ({exc}); out of memory? Run with fewer workers "
                               "(run_probes(..., workers=1)): the extracted maps and spilled batches stay cached") from exc
    bar.close()
    return out


def _run_probes(lm: LoadedModel, *, seeds, epochs, glove_path, max_sentences, max_length, data_dir, cache_root,
                progress, corpora, workers=None) -> dict:
    start = time.perf_counter()
    glove = load_glove(glove_path) if glove_path else None
    kw = dict(max_sentences=max_sentences, max_length=max_length, data_dir=data_dir, cache_root=cache_root,
              progress=progress, glove=glove, glove_digest=file_digest([Path(glove_path)]) if glove_path else None)
    size = {name: TRAIN_BATCH if name == "train" else EVAL_BATCH for name in corpora}
    keep = keep_maps_requested()
    # The model's maps of the evaluation treebanks are §4.2's too (chapter 5 goes first and writes them, see
    # scripts/execute_book.py); the training treebank's and the control's feed these probes only: their batches
    # are made in the model's pass, and the maps are written only when kept (keep_maps).
    sets = {name: probe_data(lm, spec, batch_size=size[name], write_maps=keep or name != "train", **kw)
            for name, spec in corpora.items()}
    control = control_model(lm)
    control_is_model = control.fingerprint() == lm.fingerprint()  # lm is itself a random-init model
    tests = [name for name in corpora if name not in ("train", "dev")]
    rows: dict[str, dict] = {"Right-branching": {name: _summary([right_branching_uas(sets[name])]) for name in tests}}
    jobs = training_jobs(seeds)
    twins = twin_jobs(jobs) if control_is_model else {}
    jobs = [job for job in jobs if (job[0], job[4]) not in twins]

    def control_sets(shared: bool) -> dict:
        # the same sentences in the same batches with the model's word vectors: read from the model's file while
        # its batches stay (``shared``), else held in the control's own
        return {name: probe_data(control, spec, vectors_from=lm, batch_size=size[name], write_maps=keep,
                                 share_vectors=sets[name] if shared else None, **kw) for name, spec in corpora.items()}

    # Unless batches are kept, two phases, so that the model's batches and its control's are never on disk together:
    # the trainings on the model's maps; then, its batches removed, the control's batches (made from its pass) and
    # the trainings on them. Each phase starts its most expensive trainings first; no score depends on the order.
    split = not keep and not control_is_model
    random_sets = sets if control_is_model else (None if split else control_sets(shared=True))
    phases = ([[job for job in jobs if job[2] == "maps"], [job for job in jobs if job[2] == "random"]] if split
              else [jobs])
    t_data, t_train, scores = time.perf_counter() - start, 0.0, {}
    for phase in phases:
        if random_sets is None and any(job[2] == "random" for job in phase):
            t = time.perf_counter()
            remove_spills(sets.values())  # the model's batches served the first phase only
            random_sets = control_sets(shared=False)
            t_data += time.perf_counter() - t
        t = time.perf_counter()
        scores.update(train_all(phase, {"maps": sets, "random": random_sets}, tests, epochs=epochs, workers=workers,
                                progress=progress, device=lm.device))
        t_train += time.perf_counter() - t
    control = None  # its batches are on disk now: the model goes
    scores.update({job: scores[twin] for job, twin in twins.items()})
    # Per sentence, in each test set's order (the model's and its control's data hold the same sentences in the
    # same order: checked), the words each probe gets right with each seed: what the claims' bootstrap resamples.
    for name in tests:
        if random_sets is not None and random_sets[name].names != sets[name].names:
            raise RuntimeError(f"the random-init control's {name} sentences are not the model's, in its order: its "
                               "per-sentence scores cannot be paired with the model's")
    per_sentence = {"totals": {name: sentence_totals(sets[name]).tolist() for name in tests},
                    "correct": {"Right-branching": {name: [right_branching_correct(sets[name]).tolist()] for name in tests}}}
    for label, _, _, misaligned in CONFIGS:
        runs = [scores[(label, seed)] for seed in (seeds[:1] if misaligned else seeds)]
        results = {"dev": [r["dev"] for r in runs], "test": [r["test"] for r in runs], "test_mst": [r["test_mst"] for r in runs],
                   **{name: [r[name] for r in runs] for name in tests if name != "test"}}
        rows[label] = {**{k: _summary(v) for k, v in results.items()}, "epochs": [r["epoch"] for r in runs]}
        per_sentence["correct"][label] = {name: [r["correct"][name] for r in runs] for name in tests}
    if not keep:  # the batches served these trainings only (another run's settings spill them again)
        remove_spills([*sets.values(), *(random_sets or {}).values()])
    return {
        "model": lm.label, "word_vectors": f"GloVe file {glove_path}" if glove_path else f"{lm.label} static input embeddings",
        "corpora": corpora,
        "sentences": {k: len(v) for k, v in sets.items()}, "skipped": {k: v.skipped for k, v in sets.items()},
        "seeds": list(seeds), "epochs": epochs, "rows": rows,
        # {"totals": {test: [sentence]}, "correct": {probe: {test: [[sentence] per seed]}}}: words counted and right
        "per_sentence": per_sentence,
        "control_is_model": control_is_model, "trainings": len(jobs),
        "seconds": {"data": round(t_data, 1), "training": round(t_train, 1),
                    "total": round(time.perf_counter() - start, 1)},
        "paper": dict(paper.TABLE3),
    }


def seed_interval(runs: list[float], level: float = 0.95) -> tuple[float, float] | None:
    """Student-t interval of the mean over seeds (``None`` with fewer than two runs: unknown). The claims no longer
    read it: their intervals resample the test sentences within each seed too (:mod:`helpers.probe.claims`)."""
    from scipy import stats

    if len(runs) < 2:
        return None
    mean, sem = float(np.mean(runs)), float(np.std(runs, ddof=1) / np.sqrt(len(runs)))
    half = float(stats.t.ppf((1 + level) / 2, len(runs) - 1)) * sem
    return (mean - half, mean + half)
