"""Paper §5 end to end: word-level maps of GUM train/dev/test and EWT dev (of the model and its random-init
control) down the one route, packed by the probes' accumulator (:class:`helpers.probe.stats.ProbeBatcher`) and
spilled to disk (on an accelerator, held there where they fit) -> probes trained with three seeds on batches made from
them as they are read -> Table 3 (UAS without punctuation, greedy and maximum-spanning-tree decoding).

>>> table = run_probes(lm, seeds=(0, 1, 2))                              # doctest: +SKIP
"""
from __future__ import annotations

import gc
import shutil
import tempfile
import time
from dataclasses import replace
from functools import partial
from pathlib import Path

import numpy as np
import torch

from helpers import paper
from helpers.context import RunContext, cache_folder, in_force, takes_context
from helpers.core.encoding import MAX_LENGTH, EncodedBatch
from helpers.core.heap import release_freed
from helpers.core.models import LoadedModel, load_model
from helpers.core.threads import torch_threads
from helpers.data.cache import cached_json
from helpers.data.corpora import corpus_files, file_digest
from helpers.digest import code_digest
from helpers.pipeline.extraction import encode_treebank
from helpers.pipeline.route import reduce_maps
from helpers.probe.stats import (
    ProbeBatcher,
    ProbeData,
    SpilledRows,
    fits_on,
    predict,
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
               max_sentences: int | None = None, max_length: int = MAX_LENGTH, batch_size: int | None = None,
               keep: bool = False, vectors: ProbeData | None = None, ctx: RunContext | None = None) -> ProbeData:
    """The word-level maps of ``lm`` for a corpus, down the one route (:func:`helpers.pipeline.route.reduce_maps`,
    packed by :class:`~helpers.probe.stats.ProbeBatcher`: read from the cache when it holds them, else made by the
    model's passes and written only when ``keep`` or the context's ``keep_maps`` asks), with word vectors (of
    ``vectors_from``, default ``lm``, or GloVe), gold heads and punctuation, in cache-shard order, batches of
    ``batch_size`` by default. ``vectors``: the data of the same corpus with the same word vectors (the model's, for
    its random-init control, whose ``vectors_from`` is the model), whose vectors are taken instead of made again.

    The packed maps and the word vectors are written to files in a folder of the cache as they come
    (:class:`~helpers.probe.stats.SpilledRows`, removed when the data are let go), so that memory does not grow with
    the treebank; on an accelerator they stay there instead where they take at most
    :data:`~helpers.probe.stats.RESIDENT_SHARE` of its free memory (the probes train there)."""
    ctx = in_force(ctx)
    sentences, batch, digest = encode_treebank(lm, spec, max_sentences=max_sentences, max_length=max_length,
                                               data_dir=ctx.data_dir, cache_root=ctx.cache_dir)
    source = vectors_from or lm
    dim = len(next(iter(glove.values()))) if glove is not None else source.model.get_input_embeddings().embedding_dim
    hold = _holder(lm, batch, dim)
    spill = _spill_folder(ctx) if hold == "cpu" else None
    try:
        rows, groups = reduce_maps(lm, batch, partial(ProbeBatcher, hold=hold, spill=spill), level="word", keep=keep,
                                   ctx=ctx, source_digest=digest, desc=f"{spec} maps").result()
    except BaseException:
        if spill is not None:
            shutil.rmtree(spill, ignore_errors=True)
        raise
    rows = rows.owning() if spill is not None else rows
    examples = {ex.index: ex for ex in batch.examples}
    order = [examples[index] for group in groups for index in group]
    picked = [sentences[ex.index] for ex in order]
    if vectors is not None:
        if vectors.names != [s.sent_id for s in picked]:
            raise ValueError(f"{spec}: the data whose word vectors are shared hold other sentences, or another order")
        words = vectors.vectors
    elif spill is not None:  # written as they are made, a chunk of sentences at a time
        words = SpilledRows(_spill_folder(ctx), single=True).owning()
        E = input_embeddings(source) if glove is None else None
        for start in range(0, len(order), VECTOR_CHUNK):
            made = word_vectors(source, order[start : start + VECTOR_CHUNK], glove, embeddings=E)
            for ex in order[start : start + VECTOR_CHUNK]:  # float32, as the batches copy them (the same rounding)
                words.append(made[ex.index].astype(np.float32, copy=False))
    else:
        made, where = word_vectors(source, order, glove), torch.device(hold or lm.device)
        words = [made[ex.index] if where.type == "cpu" else torch.from_numpy(made[ex.index]).to(where) for ex in order]
    starts = np.cumsum([0] + [len(group) for group in groups])
    return ProbeData([], [np.asarray(s.heads) for s in picked],
                     [np.array([u == "PUNCT" or r == "punct" for u, r in zip(s.upos, s.deprels)]) for s in picked],
                     words, skipped=len(batch.skipped), names=[s.sent_id for s in picked],
                     groups=[list(range(starts[k], starts[k + 1])) for k in range(len(groups))], batch_size=batch_size,
                     packed=rows)


VECTOR_CHUNK = 256  # sentences whose word vectors are made at a time when they are spilled


def _spill_folder(ctx: RunContext) -> str:
    """A new folder in the cache for rows spilled to disk (:class:`~helpers.probe.stats.SpilledRows`; removed when
    they are let go)."""
    (root := cache_folder(ctx.cache_dir)).mkdir(parents=True, exist_ok=True)
    return tempfile.mkdtemp(prefix="probe-spill-", dir=root)


def _holder(lm: LoadedModel, batch: EncodedBatch, dim: int):
    """Where :class:`~helpers.probe.stats.ProbeBatcher` keeps the packed maps of ``batch``: on an accelerator, there
    where they fit (:func:`~helpers.probe.stats.fits_on`: ``None``, where the route's maps are); else ``"cpu"``:
    spilled to disk (:class:`~helpers.probe.stats.SpilledRows`), so that the host's memory does not grow with the
    treebank."""
    device = torch.device(lm.device)
    if device.type == "cpu":
        return "cpu"
    K = lm.n_layers * lm.n_heads
    nbytes = sum((ex.n_words ** 2 + 4 * ex.n_words) * K * 2 + ex.n_words * dim * 4 for ex in batch.examples)
    return None if fits_on(device, nbytes) else "cpu"


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

    ``corpora`` (see :func:`probe_corpora`) names the training, development and test treebanks. The maps are
    packed, once each at half precision, and spilled to disk (:func:`probe_data`), the model's and its control's
    never together; their padded batches are made as they are read. Only the model's maps of the evaluation treebanks stay in the
    cache (every map with ``keep_maps``)."""
    data_dir = ctx.data_dir
    corpora = corpora or probe_corpora()
    key = {"model": lm.fingerprint(), "code": code_digest(_run_probes), "seeds": list(seeds), "epochs": epochs,
           "max_sentences": max_sentences, "max_length": max_length,
           "glove": file_digest([Path(glove_path)]) if glove_path else None,
           "data": {name: file_digest(corpus_files(spec, data_dir=data_dir)) for name, spec in corpora.items()}}
    if corpora != probe_corpora():
        key["specs"] = corpora
    return cached_json("probes", key, lambda: _run_probes(lm, ctx, seeds=seeds, epochs=epochs, glove_path=glove_path,
                                                         max_sentences=max_sentences, max_length=max_length,
                                                         corpora=corpora, workers=workers),
                       cache_root=ctx.cache_dir, refresh=refresh)


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
WORKERS = 2  # trainings at a time (torch on one thread each): the 2-core machine's cores; each holds one batch
#              buffer, so memory grows with this number
# Sentences times epochs of the training treebank from which the trainings run in spawned processes rather than in
# threads of this process, which take turns to run Python between their many small operations. Measured
# (benchmarks/probes.py --command, cold, on the 2-core machine): at GUM train's 10,224 x 3 the trainings took 151 s in
# processes against 200 s in threads; at 1,000 x 3 both 43 s, the processes' start costing 8 processor s more; at
# the tests' 300 x 2 threads 16 s against 20 s.
SPAWN_FROM = 6000


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


_WORKER_SETS: dict = {}  # a training process's data (train_all's initializer)


def _worker_init(sets) -> None:
    torch.set_num_threads(1)
    _WORKER_SETS.update(sets)


def _worker_train(job, tests, epochs) -> dict:
    scores = train_one(job, _WORKER_SETS, tests, epochs)  # on the CPU (train_all spawns none for another device)
    release_freed()  # the training's batches and predictions, freed: the next training here runs beside another
    return scores


def train_all(jobs, sets: dict[str, dict[str, ProbeData]], tests: list[str], *, epochs: int, workers: int | None = None,
              progress: bool = False, device=None) -> dict[tuple[str, int], dict]:
    """:func:`train_one` for every job, ``{(label, seed): scores}``. With ``workers`` > 1 (default :data:`WORKERS`, at
    most the cores available) that many trainings run at once: in spawned processes, the data sent once to each
    (spilled maps and vectors are file names and offsets, read there), when the training treebank is large enough to
    pay for starting them (:data:`SPAWN_FROM`), else in threads of this process. Torch computes on one thread in
    each, so a training's result does not depend on where it runs or how many run beside it (tested). A script that
    calls this needs the ``if __name__ == "__main__":`` guard of spawned processes. On a ``device`` other than the
    CPU (the model's, e.g. ``cuda``) the trainings run one at a time in this process, there."""
    import os
    from concurrent.futures import ThreadPoolExecutor, as_completed
    from concurrent.futures.process import BrokenProcessPool

    from tqdm.auto import tqdm

    workers = min(WORKERS if workers is None else workers, len(os.sched_getaffinity(0)), len(jobs))
    if device is not None and torch.device(device).type != "cpu":
        workers = 1  # one accelerator: the trainings take turns on it
    size = max((len(data["train"]) for data in sets.values() if data), default=0) * epochs
    if workers > 1 and size >= SPAWN_FROM:
        import multiprocessing
        from concurrent.futures import ProcessPoolExecutor

        release_freed()  # what this process's passes freed, before the training processes come beside it
        pool = ProcessPoolExecutor(max_workers=workers, mp_context=multiprocessing.get_context("spawn"),
                                   initializer=_worker_init, initargs=(sets,))
        task = partial(_worker_train, tests=tests, epochs=epochs)
    else:
        pool = ThreadPoolExecutor(max_workers=max(workers, 1))
        task = partial(train_one, sets=sets, tests=tests, epochs=epochs, device=device)
    bar = tqdm(total=len(jobs), desc="probe trainings", unit="probe", disable=not progress)
    out = {}
    with torch_threads(1), pool:
        futures = {pool.submit(task, job): job for job in jobs}
        try:
            for future in as_completed(futures):
                job = futures[future]
                out[(job[0], job[4])] = future.result()
                bar.update()
        except BrokenProcessPool as exc:
            raise RuntimeError(f"a probe training process died ({exc}); out of memory? Run with fewer workers "
                               "(run_probes(..., workers=1))") from exc
    bar.close()
    return out


def _run_probes(lm: LoadedModel, ctx: RunContext, *, seeds, epochs, glove_path, max_sentences, max_length, corpora,
                workers=None) -> dict:
    start = time.perf_counter()
    glove = load_glove(glove_path) if glove_path else None
    kw = dict(max_sentences=max_sentences, max_length=max_length, glove=glove, ctx=ctx)
    size = {name: TRAIN_BATCH if name == "train" else EVAL_BATCH for name in corpora}
    # The model's maps of the evaluation treebanks are §4.2's too (chapter 5 goes first and writes them, see
    # scripts/execute_book.py); the training treebank's and the control's feed these probes only: they come down the
    # route from the model's pass, and are written only when kept (keep_maps).
    sets = {name: probe_data(lm, spec, batch_size=size[name], keep=name != "train", **kw)
            for name, spec in corpora.items()}
    control = control_model(lm)
    control_is_model = control.fingerprint() == lm.fingerprint()  # lm is itself a random-init model
    tests = [name for name in corpora if name not in ("train", "dev")]
    rows: dict[str, dict] = {"Right-branching": {name: _summary([right_branching_uas(sets[name])]) for name in tests}}
    jobs = training_jobs(seeds)
    twins = twin_jobs(jobs) if control_is_model else {}
    jobs = [job for job in jobs if (job[0], job[4]) not in twins]
    # Two phases, so that the model's maps and its control's are never held together: the trainings on the model's
    # maps; then, those maps let go, the control's (from its pass, with the model's word vectors) and the trainings on
    # them. Each phase starts its most expensive trainings first; no score depends on the order.
    random_sets = sets if control_is_model else None
    phases = ([jobs] if control_is_model else
              [[job for job in jobs if job[2] == "maps"], [job for job in jobs if job[2] == "random"]])
    t_data, t_train, scores = time.perf_counter() - start, 0.0, {}
    for phase in phases:
        if random_sets is None and any(job[2] == "random" for job in phase):
            t = time.perf_counter()
            sets = {name: replace(data, packed=None) for name, data in sets.items()}  # served the first phase only
            gc.collect()  # their batches refer back to them: their spilled maps go now, before the control's come
            random_sets = {name: probe_data(control, spec, vectors_from=lm, batch_size=size[name], vectors=sets[name],
                                            **kw) for name, spec in corpora.items()}
            t_data += time.perf_counter() - t
        t = time.perf_counter()
        scores.update(train_all(phase, {"maps": sets, "random": random_sets}, tests, epochs=epochs, workers=workers,
                                progress=ctx.progress, device=lm.device))
        t_train += time.perf_counter() - t
    control = random_sets = None  # their maps go
    scores.update({job: scores[twin] for job, twin in twins.items()})
    # Per sentence, in each test set's order (the model's and its control's data hold the same sentences in the
    # same order: probe_data checks it), the words each probe gets right with each seed: what the claims' bootstrap
    # resamples.
    per_sentence = {"totals": {name: sentence_totals(sets[name]).tolist() for name in tests},
                    "correct": {"Right-branching": {name: [right_branching_correct(sets[name]).tolist()] for name in tests}}}
    for label, _, _, misaligned in CONFIGS:
        runs = [scores[(label, seed)] for seed in (seeds[:1] if misaligned else seeds)]
        results = {"dev": [r["dev"] for r in runs], "test": [r["test"] for r in runs], "test_mst": [r["test_mst"] for r in runs],
                   **{name: [r[name] for r in runs] for name in tests if name != "test"}}
        rows[label] = {**{k: _summary(v) for k, v in results.items()}, "epochs": [r["epoch"] for r in runs]}
        per_sentence["correct"][label] = {name: [r["correct"][name] for r in runs] for name in tests}
    result = {
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
    sets = None
    gc.collect()  # the spilled maps and vectors go now (their batches refer back to them), not at the next collection
    return result
