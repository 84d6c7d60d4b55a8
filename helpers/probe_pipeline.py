"""Paper §5 end to end: cached word-level maps of GUM train/dev/test and EWT dev -> probes trained
with three seeds -> Table 3 (UAS without punctuation, greedy and maximum-spanning-tree decoding).

>>> table = run_probes(lm, seeds=(0, 1, 2))                              # doctest: +SKIP
"""
from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

import numpy as np

from . import paper
from .cache import cached_json, extract_treebank
from .argtypes import check_corpora, max_length_int, positive_int
from .cli import command, load
from .corpora import corpus_files, file_digest
from .encoding import EncodedBatch
from .models import LoadedModel, load_model
from .probes import ProbeData, predict, right_branching_uas, train_probe, uas


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


def word_vectors(lm: LoadedModel, batch: EncodedBatch, glove: dict[str, np.ndarray] | None = None) -> dict[int, np.ndarray]:
    """``{example index: [n_words, dim]}``: GloVe vectors (unknown words: zero) or else the model's static
    input embeddings averaged over each word's tokens."""
    out = {}
    if glove is not None:
        dim = len(next(iter(glove.values())))
        for ex in batch.examples:
            out[ex.index] = np.stack([glove.get(w.lower(), np.zeros(dim, np.float32)) for w in ex.words])
        return out
    E = lm.model.get_input_embeddings().weight.detach().float().cpu().numpy()
    for ex in batch.examples:
        sums = np.zeros((ex.n_words + 2, E.shape[1]), np.float32)
        np.add.at(sums, ex.word_of_token, E[ex.input_ids])
        counts = np.bincount(ex.word_of_token, minlength=ex.n_words + 2)[:, None]
        out[ex.index] = (sums / np.maximum(counts, 1))[1:-1]
    return out


def probe_data(lm: LoadedModel, spec: str, *, vectors_from: LoadedModel | None = None, glove=None,
               max_sentences: int | None = None, max_length: int = 128, data_dir=None, cache_root=None,
               progress: bool = False) -> ProbeData:
    """Maps of ``lm`` and word vectors (of ``vectors_from``, default ``lm``, or GloVe) for a corpus."""
    sentences, store = extract_treebank(lm, spec, max_sentences=max_sentences, max_length=max_length,
                                        data_dir=data_dir, cache_root=cache_root, progress=progress)
    vectors = word_vectors(vectors_from or lm, store.batch, glove)
    maps, heads, punct, vecs, names = [], [], [], [], []
    for example, attn in store.items(np.float16):
        s = sentences[example.index]
        maps.append(attn)
        heads.append(np.asarray(s.heads))
        punct.append(np.array([u == "PUNCT" or r == "punct" for u, r in zip(s.upos, s.deprels)]))
        vecs.append(vectors[example.index])
        names.append(s.sent_id)
    return ProbeData(maps, heads, punct, vecs, skipped=len(store.skipped), names=names)


def _summary(values: list[float]) -> dict:
    return {"mean": round(float(np.mean(values)), 2), "sd": round(float(np.std(values, ddof=1)), 2) if len(values) > 1 else 0.0,
            "runs": [round(v, 2) for v in values]}


VERSION = 1  # part of the cache key: bump when a probe or its training changes

SPECS = (("train", "gum:train"), ("dev", "gum:dev"), ("test", "gum:test"), ("ewt", "ewt:dev"))


def run_probes(lm: LoadedModel, *, seeds=(0, 1, 2), epochs: int = 3, glove_path: str | None = None,
               max_sentences: int | None = None, max_length: int = 128, data_dir=None, cache_root=None,
               progress: bool = False, refresh: bool = False) -> dict:
    """Every row of Table 3 on GUM test and EWT dev, mean and spread over ``seeds`` (cached on disk,
    keyed by the model, the corpus files, the word vectors and the settings)."""
    key = {"model": lm.fingerprint(), "v": VERSION, "seeds": list(seeds), "epochs": epochs,
           "max_sentences": max_sentences, "max_length": max_length,
           "glove": file_digest([Path(glove_path)]) if glove_path else None,
           "data": {name: file_digest(corpus_files(spec, root=data_dir)) for name, spec in SPECS}}
    return cached_json("probes", key, lambda: _run_probes(lm, seeds=seeds, epochs=epochs, glove_path=glove_path,
                                                         max_sentences=max_sentences, max_length=max_length,
                                                         data_dir=data_dir, cache_root=cache_root, progress=progress),
                       cache_root=cache_root, refresh=refresh)


def _run_probes(lm: LoadedModel, *, seeds, epochs, glove_path, max_sentences, max_length, data_dir, cache_root,
                progress) -> dict:
    start = time.perf_counter()
    glove = load_glove(glove_path) if glove_path else None
    kw = dict(max_sentences=max_sentences, max_length=max_length, data_dir=data_dir, cache_root=cache_root,
              progress=progress, glove=glove)
    sets = {name: probe_data(lm, spec, **kw) for name, spec in SPECS}
    control = load_model(lm.source if lm.name != lm.source or lm.random_init else lm.name, random_init=True, seed=0)
    random_sets = {name: probe_data(control, spec, vectors_from=lm, **kw) for name, spec in SPECS}
    for group in (sets, random_sets):  # padded batches built once; per-sentence maps dropped (memory)
        for name, data in group.items():
            data.release_maps(32 if name == "train" else 64)
    t_data = time.perf_counter() - start
    rows: dict[str, dict] = {"Right-branching": {
        "test": _summary([right_branching_uas(sets["test"])]), "ewt": _summary([right_branching_uas(sets["ewt"])])}}
    configs = [("Distances + words", "distances+words", sets, False), ("Random-init Attn + words", "attn+words", random_sets, False),
               ("Attn", "attn", sets, False), ("Attn + words", "attn+words", sets, False),
               ("Attn + words (original misalignment)", "attn+words", sets, True)]
    t_train = time.perf_counter()
    for label, kind, data, misaligned in configs:
        results = {"dev": [], "test": [], "test_mst": [], "ewt": [], "epochs": []}
        for seed in (seeds[:1] if misaligned else seeds):  # the bug's effect: one seed is enough
            model, info = train_probe(kind, data["train"], data["dev"], seed=seed, epochs=epochs, misaligned=misaligned)
            results["dev"].append(max(info["dev_uas"]))
            results["epochs"].append(info["best_epoch"])
            test_logits = predict(model, data["test"], misaligned=misaligned)
            results["test"].append(uas(test_logits, data["test"]))
            results["test_mst"].append(uas(test_logits, data["test"], decode="mst"))
            results["ewt"].append(uas(predict(model, data["ewt"], misaligned=misaligned), data["ewt"]))
        rows[label] = {k: (_summary(v) if k != "epochs" else v) for k, v in results.items()}
    return {
        "model": lm.label, "word_vectors": f"GloVe file {glove_path}" if glove_path else f"{lm.label} static input embeddings",
        "sentences": {k: len(v) for k, v in sets.items()}, "skipped": {k: v.skipped for k, v in sets.items()},
        "seeds": list(seeds), "epochs": epochs, "rows": rows,
        "seconds": {"data": round(t_data, 1), "training": round(time.perf_counter() - t_train, 1),
                    "total": round(time.perf_counter() - start, 1)},
        "paper": dict(paper.TABLE3),
    }


def _probe_args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--glove", default=None, metavar="FILE", help="GloVe-format word vectors (default: the model's input embeddings)")
    parser.add_argument("--seeds", type=positive_int, default=3, help="number of seeds (0, 1, ...), at least 1")
    parser.add_argument("--epochs", type=positive_int, default=3)
    parser.add_argument("--max-sentences", type=positive_int, default=None, help="first N sentences of each corpus (for quick runs)")
    parser.add_argument("--max-length", type=max_length_int, default=128, help="longer sentences are skipped and counted")
    parser.set_defaults(check_inputs=lambda a: check_corpora(a, *(spec for _, spec in SPECS)))


@command("probe", "paper §5: attention probing classifiers, Table 3 (UAS without punctuation)", _probe_args)
def cmd_probe(args: argparse.Namespace) -> dict:
    lm = load(args)
    return run_probes(lm, seeds=tuple(range(args.seeds)), epochs=args.epochs, glove_path=args.glove,
                      max_sentences=args.max_sentences, max_length=args.max_length, data_dir=args.data_dir,
                      cache_root=args.cache_dir,
                      progress=not args.quiet)
