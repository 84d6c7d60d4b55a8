"""Benchmark: word-level extraction against the bare forward pass and a naive per-head conversion.

    python benchmarks/extraction.py [--model NAME] [--corpus gum:test] [--sentences 300] [--repeats 3]

Prints, on the same length-bucketed batches:
- extraction + word-level conversion time / bare model forward pass with attentions (goal <= 1.2x);
- batched conversion speed-up over a naive per-head, per-word loop conversion (goal >= 20x);
- peak resident memory.
Writes the figures to benchmarks/results/extraction.json.
"""
from __future__ import annotations

import argparse
import platform
import statistics
import time

import numpy as np
import torch

from common import LATEST, elapsed, peak_rss_mib, save
from helpers import encode_words, load_model, load_treebank
from helpers.core.extract import batch_maps, bucket, convert, forward_attentions
from helpers.core.wordlevel import batched_matrices, word_level_batch


def naive_word_level(attn: np.ndarray, word_of_token: np.ndarray) -> np.ndarray:
    """The original code's approach: a Python loop over heads, merging columns then rows word by word."""
    n_words = int(word_of_token.max()) + 1
    groups = [np.flatnonzero(word_of_token == w) for w in range(n_words)]
    out = np.empty(attn.shape[:2] + (n_words, n_words), dtype=np.float32)
    for layer in range(attn.shape[0]):
        for head in range(attn.shape[1]):
            a = attn[layer, head]
            cols = np.stack([a[:, g].sum(axis=1) for g in groups], axis=1)
            out[layer, head] = np.stack([cols[g].mean(axis=0) for g in groups], axis=0)
    return out


def best_of(repeats: int, fn, lm) -> float:
    """The fastest of ``repeats`` runs of ``fn``, each timed until ``lm``'s device has finished (:func:`common.elapsed`)."""
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(elapsed(lm, start))
    return min(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default=None)
    parser.add_argument("--corpus", default="gum:test")
    parser.add_argument("--sentences", type=int, default=300)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--out", default=str(LATEST / "extraction.json"))
    args = parser.parse_args()

    lm = load_model(args.model)
    sentences = load_treebank(args.corpus, max_sentences=args.sentences)
    batch = encode_words(lm.tokenizer, [s.words for s in sentences])
    groups = bucket(batch.examples, batch_size=args.batch_size)

    def bare():
        for group in groups:
            forward_attentions(lm, group)

    def ours():
        for group in groups:
            for attn in batch_maps(lm, group, level="word"):
                convert(attn, np.float32)  # what iter_attention hands out

    bare()  # warm-up
    t_bare = best_of(args.repeats, bare, lm)
    t_ours = best_of(args.repeats, ours, lm)

    # conversion alone, on token maps computed once
    token_maps = [(g, forward_attentions(lm, g)) for g in groups]

    def batched_conversion():
        for g, attn in token_maps:
            R, S = batched_matrices([e.word_of_token for e in g], attn.shape[-1])
            word_level_batch(attn, R, S)

    def naive_conversion():
        for g, attn in token_maps:
            a = attn.cpu().numpy()  # the model's device: the naive loop reads NumPy
            for b, ex in enumerate(g):
                naive_word_level(a[b, :, :, : len(ex), : len(ex)], ex.word_of_token)

    with torch.inference_mode():
        t_conv = best_of(args.repeats, batched_conversion, lm)
    t_naive = best_of(1, naive_conversion, lm)
    peak_mib = peak_rss_mib()

    result = {
        "model": lm.label, "corpus": args.corpus, "sentences": len(batch.examples),
        "skipped": len(batch.skipped), "batch_size": args.batch_size,
        "mean_tokens": round(statistics.mean(len(e) for e in batch.examples), 1),
        "threads": torch.get_num_threads(), "machine": platform.processor() or platform.machine(),
        "seconds_bare_forward": round(t_bare, 4), "seconds_extraction_word_level": round(t_ours, 4),
        "ratio_extraction_over_bare": round(t_ours / t_bare, 3),
        "seconds_conversion_batched": round(t_conv, 4), "seconds_conversion_naive_loop": round(t_naive, 4),
        "speedup_conversion_over_naive": round(t_naive / t_conv, 1),
        "peak_rss_mib": round(peak_mib, 1),
    }
    print(f"model {result['model']}, {result['sentences']} sentences of {args.corpus} "
          f"(mean {result['mean_tokens']} tokens), batch {args.batch_size}, {result['threads']} threads")
    print(f"bare forward with attentions     {t_bare:8.3f} s")
    print(f"extraction + word-level maps     {t_ours:8.3f} s   ratio {t_ours / t_bare:5.2f}x  (goal <= 1.2x)")
    print(f"conversion, batched matmul       {t_conv:8.3f} s")
    print(f"conversion, naive per-head loop  {t_naive:8.3f} s   speed-up {t_naive / t_conv:6.1f}x (goal >= 20x)")
    print(f"peak resident memory             {peak_mib:8.1f} MiB")
    save(result, args.out)


if __name__ == "__main__":
    main()
