"""Benchmark: scoring BLiMP's minimal pairs (:mod:`helpers.minimal_pairs.scoring`), against the bare forward passes over
the same rows, with heads removed against the same passes once per removal.

    python benchmarks/pairs.py [--model smollm2] [--pairs 3] [--phenomena A,B] [--removals 9] [--device cpu|cuda]
                               [--repeats 3] [--record]

On the first ``--pairs`` pairs of each chosen BLiMP paradigm (default: all 67), encoded as the chapter encodes them
(:func:`helpers.minimal_pairs.scoring.encode`, a decoder's rows cut to what the two sentences of a pair do not share,
:func:`~helpers.minimal_pairs.scoring.margin_rows`), two ways of computing the same numbers:

- **scored**: :func:`~helpers.minimal_pairs.scoring.text_scores`, every pair's two sentences (the chapter's
  grammar), in its passes (rows in length order, padded to their pass's longest, one torch thread on the CPU);
- **floor**: the same passes through the whole causal language model (``lm.language_model(...).logits``: every
  position projected onto the vocabulary) with no hook and no bookkeeping: what a user's loop over batches costs at
  least. Goal: scored / floor <= 1.2 (processor seconds).

With heads removed (``--removals K``: the first ``K`` heads of the layer in the middle of the model and of the last
layer, half each, one at a time), **scored** is one call with ``K`` masks (each a copy of the rows joining at its
layer: the layers before it run once) and **floor** the bare passes ``K`` times over. Every removal's scores must agree
with a run of that mask alone within :data:`AGREE_RTOL` of the largest score.

The two run ``--repeats`` times each, interleaved, so they share the machine's load; the fastest run of each is kept
and every run's wall and processor seconds are in the JSON. Pairs per second are the pairs over the wall seconds.
Memory: the process's peak resident memory after each stage, and on a GPU each stage's peak allocated device memory.
Writes benchmarks/results/latest/pairs.json; ``--record``: also ``results/pairs-MACHINE-DATE.json`` (named by the
GPU's name or the CPU's model name). On the 2-core CPU the book's sizes are what the chapter runs; on a GPU
``--pairs 1000`` scores the whole of BLiMP (67,000 pairs), the goal being under a minute.
"""
from __future__ import annotations

import argparse
import re
import sys
import time

import numpy as np
import torch

from common import LATEST, elapsed, machine, peak_rss_mib, save
from helpers import load_model
from helpers.config import check_device
from helpers.data.blimp import load_pairs, select_paradigms
from helpers.minimal_pairs import scoring
from helpers.minimal_pairs.scoring import THREADS, encode, margin_rows, passes, removal_mask, text_scores
from helpers.core.threads import torch_threads

AGREE_RTOL = 1e-5  # a removal's scores in one call with others against alone: float32 round-off of other batches


def stopwatch(lm):
    """A function giving ``(wall seconds, processor seconds)`` since this call (the device's queue waited for)."""
    wall, cpu = time.perf_counter(), time.process_time()
    return lambda: (elapsed(lm, wall), time.process_time() - cpu)


def floor(lm, rows, K: int) -> None:
    """The bare passes: ``K`` times each of :func:`~helpers.minimal_pairs.scoring.passes`' batches through the causal
    LM, every position's logits, no hook."""
    with torch.inference_mode(), torch_threads(THREADS):
        for _ in range(K):
            for chosen in passes(lm, rows, budget=scoring.budget_for(lm, scoring.ROW_BUDGET)):
                inputs = scoring._inputs(lm, rows, chosen)
                lm.language_model(**inputs).logits


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="smollm2", help="default: smollm2 (the chapter's decoder)")
    parser.add_argument("--pairs", type=int, default=3, help="the first N pairs of each paradigm (default 3, the book's)")
    parser.add_argument("--phenomena", default=None, help="comma-separated BLiMP phenomena (default: every paradigm)")
    parser.add_argument("--removals", type=int, default=8, help="single heads removed in the second stage (default 8)")
    parser.add_argument("--device", default="cpu", help="cpu (default), cuda, cuda:N")
    parser.add_argument("--repeats", type=int, default=3, help="runs of each way; the fastest kept")
    parser.add_argument("--out", default=str(LATEST / "pairs.json"))
    parser.add_argument("--record", action="store_true")
    args = parser.parse_args()
    try:
        device = check_device(args.device)
    except ValueError as err:
        parser.error(f"--device: {err}")
    cuda = torch.device(device).type == "cuda"
    started = machine()

    lm = load_model(args.model, device=device)
    names = select_paradigms(phenomena=args.phenomena.split(",") if args.phenomena else None)
    pairs = load_pairs(names, max_pairs=args.pairs)
    rows = margin_rows(encode(lm, pairs))
    L, H, N = lm.n_layers, lm.n_heads, len(pairs)
    layers = [L // 2] * (args.removals // 2) + [L - 1] * (args.removals - args.removals // 2)
    heads = [(layer, k % H) for k, layer in enumerate(layers)]
    masks = torch.stack([removal_mask(L, H, [h]) for h in heads])
    tokens = [len(ids) for ids in rows.ids]
    plan = passes(lm, rows, budget=scoring.budget_for(lm, scoring.ROW_BUDGET))
    print(f"model {lm.label} ({L} x {H}) on {lm.device}, {N} pairs of {len(names)} paradigms, {len(rows)} rows "
          f"({np.mean(tokens):.1f} tokens on average, {min(tokens)} to {max(tokens)}) in {len(plan)} passes; "
          f"removals: {', '.join(f'{l + 1}-{h + 1}' for l, h in heads)}", flush=True)
    small = margin_rows(encode(lm, pairs[:2]))
    text_scores(lm, small, masks[:2])  # warm-up: allocator, thread pools, kernels
    floor(lm, small, 1)

    def stage(name: str, run) -> tuple[dict, object]:
        if cuda:
            torch.cuda.reset_peak_memory_stats(lm.device)
        read = stopwatch(lm)
        value = run()
        wall, cpu = read()
        row = {"seconds": wall, "cpu_seconds": cpu, "pairs_per_second": N / wall,
               "peak_rss_mib_after": round(peak_rss_mib(), 1)}
        if cuda:
            row["peak_cuda_mib"] = round(torch.cuda.max_memory_allocated(lm.device) / 2 ** 20, 1)
        print(f"  {name}: {wall:.2f} s wall, {cpu:.2f} s processor, {N / wall:.1f} pairs/s", flush=True)
        return row, value

    runs: dict[str, list[dict]] = {k: [] for k in ("scored", "floor", "removals scored", "removals floor")}
    together = None
    for _ in range(args.repeats):
        row, _ = stage("floor", lambda: floor(lm, rows, 1))
        runs["floor"].append(row)
        row, _ = stage("scored", lambda: text_scores(lm, rows))
        runs["scored"].append(row)
        row, _ = stage(f"removals floor ({len(heads)} x)", lambda: floor(lm, rows, len(heads)))
        runs["removals floor"].append(row)
        row, together = stage(f"removals scored ({len(heads)} masks)", lambda: text_scores(lm, rows, masks))
        runs["removals scored"].append(row)
    alone = np.stack([text_scores(lm, rows, m[None])[0] for m in masks])
    difference = float(np.abs(together - alone).max())
    tolerance = AGREE_RTOL * float(np.abs(alone).max())
    agree = difference <= tolerance

    stages = {}
    for name, rs in runs.items():
        best = min(rs, key=lambda r: r["seconds"])
        stages[name] = {**{k: round(v, 3) if isinstance(v, float) else v for k, v in best.items()},
                        "runs": [{"seconds": round(r["seconds"], 3), "cpu_seconds": round(r["cpu_seconds"], 3)}
                                 for r in rs]}
    ratios = {"scored_over_floor": stages["scored"]["seconds"] / stages["floor"]["seconds"],
              "scored_over_floor_cpu": stages["scored"]["cpu_seconds"] / stages["floor"]["cpu_seconds"],
              "removals_over_floor": stages["removals scored"]["seconds"] / stages["removals floor"]["seconds"],
              "removals_over_floor_cpu": stages["removals scored"]["cpu_seconds"]
              / stages["removals floor"]["cpu_seconds"]}
    print(f"scored / floor {ratios['scored_over_floor']:.2f} wall, {ratios['scored_over_floor_cpu']:.2f} processor "
          f"(goal <= 1.2); {len(heads)} removals / {len(heads)} bare passes {ratios['removals_over_floor']:.2f} wall, "
          f"{ratios['removals_over_floor_cpu']:.2f} processor")
    print(f"{stages['scored']['pairs_per_second']:.1f} pairs/s scored; peak resident memory {peak_rss_mib() / 1024:.2f} GiB")
    print(f"removals together against alone: max |difference| {difference:.3g} ({'within' if agree else 'BEYOND'} "
          f"{tolerance:.3g})")
    name = torch.cuda.get_device_name(lm.device) if cuda else started["cpu"]
    result = {"model": lm.label, "device": str(lm.device), "device_name": name, "layers": L, "heads": H,
              "paradigms": len(names), "pairs": N, "rows": len(rows), "passes": len(plan),
              "mean_tokens": round(float(np.mean(tokens)), 1), "removals": [f"{l + 1}-{h + 1}" for l, h in heads],
              "threads": THREADS if not cuda else None, "repeats": args.repeats, "stages": stages,
              "ratios": {k: round(v, 3) for k, v in ratios.items()}, "max_abs_difference": difference,
              "tolerance": tolerance, "agree": agree, "peak_rss_mib": round(peak_rss_mib(), 1),
              "peak_cuda_mib": max(s["peak_cuda_mib"] for s in stages.values()) if cuda else None}
    save(result, args.out, record="pairs" if args.record else None, model=args.model,
         started=started, name_by=re.sub(r"[^A-Za-z0-9]+", "_", name or "unknown").strip("_"))
    sys.exit(0 if agree else 1)


if __name__ == "__main__":
    main()
