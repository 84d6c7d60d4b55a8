"""Benchmark: scoring every head as a parser on GUM test, against the bare forward pass.

    python benchmarks/heads.py [--model NAME] [--corpus gum:test]

Prints the bare forward pass with attentions over the corpus, extraction + word-level maps + scoring
of every head, direction and relation (no cache: on the one route, ``reduce_maps`` with ``HeadScorers``, each padded
batch scored where the model's pass makes it), scoring alone (maps in memory, ``score_heads``), the command's own path cold
(heads scored while the maps are extracted and cached) against extracting first and scoring the cached maps
(left out with ``--skip-command-path``),
and the speed-up of the vectorised scorer over a per-head, per-word Python loop (measured on a subset, scaled).
Writes benchmarks/results/heads.json.
"""
from __future__ import annotations

import argparse
import tempfile
import time
from functools import partial

import numpy as np

from common import LATEST, elapsed, save
from helpers import encode_words, iter_attention, load_model, load_treebank
from helpers.context import RunContext
from helpers.core.extract import bucket, forward_attentions
from helpers.pipeline.extraction import extract_treebank
from helpers.pipeline.route import reduce_maps
from helpers.reduce import stage_device
from helpers.syntax.run import run_heads
from helpers.syntax.stats import HeadScorers, score_heads, word_layout


def naive_score(pairs, sentences, *, causal: bool = False):
    """Per sentence, head, direction and word: a Python loop as in the original notebook (a decoder's maps: the
    words after BOS, if any, and a word's candidates those it sees, or that see it)."""
    correct = {}
    for ex, attn in pairs:
        s = sentences[ex.index]
        n = len(s)
        lead, _ = word_layout(attn.shape[-1], n)
        for d in range(2):
            for l in range(attn.shape[0]):
                for h in range(attn.shape[1]):
                    m = attn[l, h] if d == 0 else attn[l, h].T
                    for i in range(n):
                        if s.heads[i] == 0:
                            continue
                        best, pred = -1.0, 0
                        for j in range(n):
                            if causal and (j > i if d == 0 else j < i):
                                continue
                            if j != i and m[i + lead, j + lead] > best:
                                best, pred = m[i + lead, j + lead], j + 1
                        key = (d, l, h, s.deprels[i])
                        correct[key] = correct.get(key, 0) + (pred == s.heads[i])
    return correct


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default=None)
    parser.add_argument("--corpus", default="gum:test")
    parser.add_argument("--max-sentences", type=int, default=None)
    parser.add_argument("--naive-sentences", type=int, default=100)
    parser.add_argument("--skip-command-path", action="store_true",
                        help="leave out the heads command's own path, cold (two more extractions of the corpus; "
                             "the Performance page does not show it)")
    parser.add_argument("--out", default=str(LATEST / "heads.json"))
    args = parser.parse_args()

    lm = load_model(args.model)
    sentences = load_treebank(args.corpus, max_sentences=args.max_sentences)
    batch = encode_words(lm.tokenizer, [s.words for s in sentences])
    groups = bucket(batch.examples, batch_size=32)
    forward_attentions(lm, groups[0])  # warm-up

    start = time.perf_counter()
    for g in groups:
        forward_attentions(lm, g)
    t_bare = elapsed(lm, start)  # the passes, not only their launches on a GPU

    # extraction + word-level maps + scoring as the package does it: on the one route, each padded batch of the
    # model's word-level maps scored where it is made, nothing written to the (empty) cache
    with tempfile.TemporaryDirectory() as empty:
        start = time.perf_counter()
        reduce_maps(lm, batch, partial(HeadScorers, (None,), lm.causal), level="word",
                    ctx=RunContext(cache_dir=empty, progress=False),
                    extras=lambda ex: (sentences[ex.index],)).result()[0].table()
        t_full = elapsed(lm, start)
    pairs = list(iter_attention(lm, batch, level="word"))  # the maps in memory, for the scoring alone below

    start = time.perf_counter()
    score_heads(pairs, sentences, causal=lm.causal).table()
    t_score = time.perf_counter() - start

    # the command's path, cold, into empty caches: the heads scored while the treebank is extracted (the maps on the
    # model's device; the cache still written), against extracting first and scoring the cached maps (the old order)
    t_during = t_after = None
    with tempfile.TemporaryDirectory() as during, tempfile.TemporaryDirectory() as after:
        if not args.skip_command_path:
            start = time.perf_counter()
            run_heads(lm, args.corpus, RunContext(cache_dir=during, progress=False), max_sentences=args.max_sentences)
            t_during = elapsed(lm, start)
            start = time.perf_counter()
            _, store = extract_treebank(lm, args.corpus, max_sentences=args.max_sentences, cache_root=after)
            score_heads(store, sentences, causal=lm.causal, device=stage_device(lm)).table()
            t_after = elapsed(lm, start)

    subset = pairs[: args.naive_sentences]
    start = time.perf_counter()
    naive_score(subset, sentences, causal=lm.causal)
    t_naive_subset = time.perf_counter() - start
    words_all = sum(len(sentences[ex.index]) for ex, _ in pairs)
    words_sub = sum(len(sentences[ex.index]) for ex, _ in subset)
    t_naive = t_naive_subset * words_all / words_sub

    result = {
        "model": lm.label, "corpus": args.corpus, "sentences": len(pairs), "skipped": len(batch.skipped),
        "seconds_bare_forward": round(t_bare, 3), "seconds_extract_and_score": round(t_full, 3),
        "ratio_extract_and_score_over_bare": round(t_full / t_bare, 3),
        "seconds_scoring_only": round(t_score, 3),
        "seconds_naive_scoring_estimated": round(t_naive, 1), "speedup_scoring_over_naive": round(t_naive / t_score, 1),
    }
    if t_during is not None:
        result.update(seconds_heads_scored_while_extracted=round(t_during, 3),
                      seconds_heads_extracted_then_scored_from_cache=round(t_after, 3),
                      ratio_scored_while_extracted_over_from_cache=round(t_during / t_after, 3))
    print(f"model {lm.label}, {len(pairs)} sentences of {args.corpus} ({len(batch.skipped)} skipped)")
    print(f"bare forward with attentions        {t_bare:8.2f} s")
    print(f"extraction + word maps + scoring    {t_full:8.2f} s   ratio {t_full / t_bare:5.2f}x")
    print(f"scoring alone (all heads, both directions, all relations, offsets) {t_score:6.2f} s")
    if t_during is not None:
        print(f"heads command path, cold: scored while extracted {t_during:6.2f} s, extracted then scored from the "
              f"cache {t_after:6.2f} s, ratio {t_during / t_after:5.3f}")
    print(f"naive per-word loop scoring (est. from {len(subset)} sentences) {t_naive:8.1f} s   speed-up {t_naive / t_score:6.1f}x")
    save(result, args.out)


if __name__ == "__main__":
    main()
