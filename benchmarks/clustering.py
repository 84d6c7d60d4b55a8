"""Benchmark: batched Jensen-Shannon head distances against per-head loops, and 1,000 segments.

    python benchmarks/clustering.py [--model NAME] [--segments 1000] [--loop-segments 3]

Prints the per-segment time of the batched computation (float32 and float64) against
(a) a per-head loop in float64 numpy (each head against all others, vectorised over the others) and
(b) the original code's per-head loop (float16 numpy, smoothing recomputed in every iteration; with
``--original-heads N`` timed over N of its iterations, each the same work, and scaled to every head),
then the time for all segments: JS alone and the forward passes alone. Writes benchmarks/results/clustering.json.
"""
from __future__ import annotations

import argparse
import time

import numpy as np
import torch

from common import LATEST, save
from helpers import iter_attention, load_model
from helpers.cluster.stats import JSAccumulator, batch_js
from helpers.core.extract import MapBatch
from helpers.pipeline.segments import build_segments


def per_head_loop(attn: np.ndarray) -> np.ndarray:
    L, H, n, _ = attn.shape
    K = L * H
    P = 0.999 * attn.reshape(K, n, n).astype(np.float64) + 0.001 / n
    S = (P * np.log(P)).sum((1, 2))
    D = np.zeros((K, K))
    for a in range(K):
        M = 0.5 * (P[a][None] + P)
        D[a] = 0.5 * (S[a] + S) - (M * np.log(M)).sum((1, 2))
    return D


def original_loop(attn: np.ndarray, heads: int | None = None) -> np.ndarray:
    """The original code's distances of every head to every head (``[head, head]``): one iteration per head, each
    smoothing all ``K`` maps again. ``heads``: only the first rows (iterations), for timing a part of the loop."""
    L, H, n, _ = attn.shape
    K = L * H
    a16 = attn.astype(np.float16)
    D = np.zeros((K, K))
    for a in range(K if heads is None else min(heads, K)):
        P = 0.999 * a16.reshape(K, n, n) + np.float16(0.001 / n)
        M = (P[a][None] + P) / 2
        D[a] = (0.5 * (P[a][None] * np.log(P[a][None] / M) + P * np.log(P / M))).sum((1, 2))
    return D


def timed(fn, items) -> float:
    start = time.perf_counter()
    for x in items:
        fn(x)
    return (time.perf_counter() - start) / len(items)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default=None)
    parser.add_argument("--segments", type=int, default=1000)
    parser.add_argument("--loop-segments", type=int, default=3)
    parser.add_argument("--original-heads", type=int, default=None,
                        help="time the original code's loop over this many of its iterations (one per head, each the "
                             "same work) and scale to every head (default: every head)")
    parser.add_argument("--out", default=str(LATEST / "clustering.json"))
    args = parser.parse_args()

    lm = load_model(args.model)
    batch = build_segments(lm, n_segments=args.segments)
    start = time.perf_counter()
    pairs = list(iter_attention(lm, batch, level="token"))
    maps = [a for _, a in pairs]
    t_forward = time.perf_counter() - start
    lengths = np.array([m.shape[-1] for m in maps])
    typical = [maps[i] for i in np.argsort(np.abs(lengths - np.median(lengths)))[: args.loop_segments]]

    def segment_js(a, dtype):  # one segment's [head, head] distances
        return batch_js(torch.as_tensor(a)[None], [a.shape[-1]], dtype=dtype)[0]

    t32 = timed(lambda a: segment_js(a, dtype=torch.float32), typical)
    t64 = timed(lambda a: segment_js(a, dtype=torch.float64), typical)
    t_loop = timed(per_head_loop, typical)
    heads = lm.n_layers * lm.n_heads
    timed_heads = heads if args.original_heads is None else max(1, min(args.original_heads, heads))
    t_orig = timed(lambda a: original_loop(a, timed_heads), typical[:1]) * heads / timed_heads

    acc = JSAccumulator(lm.n_layers * lm.n_heads)
    start = time.perf_counter()
    for ex, m in pairs:  # one segment at a time, as the CPU's route computes them
        acc.update(MapBatch([ex], torch.as_tensor(m)[None]), [()])
    t_all = time.perf_counter() - start

    result = {
        "model": lm.label, "segments": len(maps), "median_tokens": float(np.median(lengths)),
        "per_segment_seconds": {"batched_float32": t32, "batched_float64": t64, "per_head_loop_float64": t_loop,
                                "original_per_head_loop_float16": t_orig},
        "original_loop_heads_timed": timed_heads, "original_loop_heads": heads,
        "speedup_vs_per_head_loop": round(t_loop / t32, 1), "speedup_vs_original_loop": round(t_orig / t32, 1),
        "seconds_js_all_segments": round(t_all, 2), "seconds_forward_all_segments": round(t_forward, 2),
    }
    print(f"model {lm.label}: {len(maps)} segments, median {np.median(lengths):.0f} tokens, {lm.n_layers * lm.n_heads} heads")
    print(f"per segment: batched float32 {t32 * 1e3:7.1f} ms, float64 {t64 * 1e3:7.1f} ms")
    print(f"             per-head loop (float64 numpy)      {t_loop * 1e3:8.1f} ms  -> speed-up {t_loop / t32:6.1f}x")
    print(f"             original per-head loop (float16)   {t_orig * 1e3:8.1f} ms  -> speed-up {t_orig / t32:6.1f}x")
    print(f"all {len(maps)} segments: JS {t_all:.1f} s, forward passes {t_forward:.1f} s")
    save(result, args.out)


if __name__ == "__main__":
    main()
