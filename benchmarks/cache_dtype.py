"""Benchmark: float16 against float32 shards in the attention cache (disk, memory, time, argmax scores).

    python benchmarks/cache_dtype.py [--model NAME] [--corpus gum:dev] [--coref-split dev]

For each shard dtype, into a fresh cache: word-level extraction of the corpus (seconds, bytes on disk,
bytes per shard, the largest shard held in memory while streaming), reading every map back and scoring
every head as a parser (seconds), and the coreference run of ``--coref-split``. Then how far the
argmax-based scores of float16 maps are from float32: Table 1 per-head accuracies and the coreference
per-head accuracies. The alternative, scoring heads from the float32 maps before rounding, is timed
as extraction without the cache plus scoring. Writes benchmarks/results/cache_dtype.json.
"""
from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import numpy as np

from common import LATEST, save
import helpers.data.cache as cache_mod
from helpers.pipeline.extraction import extract_treebank
from helpers import load_model
from helpers.context import RunContext
from helpers.coref.run import run_coref
from helpers.core.extract import iter_attention
from helpers.core.labels import head_label
from helpers.syntax.stats import score_heads


def one(lm, corpus, coref_split, dtype) -> dict:
    cache_mod.SHARD_DTYPE = dtype
    with tempfile.TemporaryDirectory() as root:
        start = time.perf_counter()
        sentences, store = extract_treebank(lm, corpus, cache_root=root)
        extract_s = time.perf_counter() - start
        files = sorted(Path(store.directory).glob("shard-*.npz"))
        largest = 0
        start = time.perf_counter()
        scores = score_heads(store, sentences)
        read_score_s = time.perf_counter() - start
        for number in range(len(store.shards)):
            largest = max(largest, sum(a.nbytes for a in store.shard_maps(number).values()))
        start = time.perf_counter()
        coref = run_coref(lm, coref_split, RunContext(cache_dir=root))
        coref_s = time.perf_counter() - start
        return {"dtype": np.dtype(dtype).name, "extract_s": round(extract_s, 2), "read_and_score_s": round(read_score_s, 2),
                "coref_s": round(coref_s, 2), "bytes": sum(f.stat().st_size for f in files), "shards": len(files),
                "bytes_per_shard": round(float(np.mean([f.stat().st_size for f in files]))),
                "largest_shard_in_memory": largest,
                "_table1": scores.accuracy(), "_relations": scores.relations, "_coref": coref.accuracy()["all"]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default=None)
    parser.add_argument("--corpus", default="gum:dev")
    parser.add_argument("--coref-split", default="dev")
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--out", default=str(LATEST / "cache_dtype.json"))
    args = parser.parse_args()
    lm = load_model(args.model)
    runs = {}
    for repeat in range(args.repeats):  # alternate the two, keep the fastest of each (the machine is shared)
        for name, dtype in (("float16", np.float16), ("float32", np.float32)):
            r = one(lm, args.corpus, args.coref_split, dtype)
            if name in runs:
                for k in ("extract_s", "read_and_score_s", "coref_s"):
                    r[k] = min(r[k], runs[name][k])
            runs[name] = r
    cache_mod.SHARD_DTYPE = np.float32
    relations = runs["float32"].pop("_relations")
    # the alternative: score every head from the live float32 maps, before any rounding
    from helpers.data.corpora import load_treebank
    from helpers.core.encoding import encode_words
    sentences = load_treebank(args.corpus)
    batch = encode_words(lm.tokenizer, [s.words for s in sentences], model_max=lm.max_positions)
    start = time.perf_counter()
    live_scores = score_heads(iter_attention(lm, batch, level="word"), sentences)
    # relations are numbered in order of first appearance: align them with the cached run's
    live = live_scores.accuracy()[..., [live_scores.relations.index(r) for r in relations]]
    live_s = time.perf_counter() - start
    t16, t32 = runs["float16"].pop("_table1"), runs["float32"].pop("_table1")
    assert runs["float16"].pop("_relations") == relations
    c16, c32 = runs["float16"].pop("_coref"), runs["float32"].pop("_coref")
    worst = np.unravel_index(int(np.argmax(np.abs(c16 - c32))), c16.shape)
    result = {
        "model": lm.label, "corpus": args.corpus, "coref_split": args.coref_split, "runs": runs,
        "score_before_rounding_s": round(live_s, 2),
        "float32_cache_vs_live_max_abs_diff_points": round(float(np.abs(t32 - live).max()), 3),
        "float32_cache_vs_live_cells_changed": int((np.abs(t32 - live) > 1e-9).sum()),
        "table1_max_abs_diff_points": round(float(np.abs(t16 - t32).max()), 3),
        "table1_head_relation_cells_changed": int((np.abs(t16 - t32) > 1e-9).sum()), "table1_cells": int(t16.size),
        "coref_max_abs_diff_points": round(float(np.abs(c16 - c32).max()), 3),
        "coref_worst_head": head_label(*worst), "coref_worst_head_float16": round(float(c16[worst]), 2),
        "coref_worst_head_float32": round(float(c32[worst]), 2),
        "coref_best_head_float16": head_label(*np.unravel_index(int(np.argmax(c16)), c16.shape)),
        "coref_best_head_float32": head_label(*np.unravel_index(int(np.argmax(c32)), c32.shape)),
    }
    for name, r in runs.items():
        print(f"{name}: extract {r['extract_s']} s, {r['bytes'] / 2**20:.1f} MiB on disk ({r['shards']} shards, "
              f"{r['bytes_per_shard'] / 2**20:.2f} MiB each), largest shard in memory {r['largest_shard_in_memory'] / 2**20:.1f} MiB, "
              f"read+score {r['read_and_score_s']} s, coref {r['coref_s']} s")
    print({k: v for k, v in result.items() if k != "runs"})
    save(result, args.out)


if __name__ == "__main__":
    main()
