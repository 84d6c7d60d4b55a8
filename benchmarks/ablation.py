"""Benchmark: every single-head ablation of :mod:`helpers.ablation.effects`, batched, against the bare forward
passes it cannot go below and against the one-at-a-time hook loop a user would write.

    python benchmarks/ablation.py [--model NAME] [--segments 16] [--device cpu|cuda] [--threads 2,1] [--repeats 3]
                                  [--record]

On the first ``--segments`` sentences of GUM test of at least five words (the chapter's rule,
:func:`helpers.ablation.run.select_sentences`), encoded and masked as the chapter does
(:func:`helpers.ablation.loss.prepare`, seed 0), three ways of computing the same ``layers x heads x segments``
losses:

- **batched**: :func:`helpers.ablation.effects.single_head_losses`, one batch per layer: that layer's ``heads``
  interventions over the ``N`` segments as ``heads x N`` rows (the passes of :func:`helpers.ablation.effects.passes`),
  one head mask per row through the pre-hooks of :func:`helpers.ablation.interventions.intervene`, the layers before
  it run once per segment (``intervene``'s ``shared``);
- **floor**: ``K = layers x heads`` bare forward passes over the segments: the passes of ``K x N`` rows through the
  model and the same loss (:func:`helpers.ablation.loss.row_losses`) with no hook and no layer shared (target:
  batched / floor <= 1.2; sharing the earlier layers takes the batched path below 1);
- **one at a time**: for each head, a forward pre-hook on its layer's output projection that zeroes that head's
  slice of the context, then each segment alone through the model and the same loss (the goal: batched at least
  3x faster on a GPU, not slower on the CPU).

All three run at each torch thread count of ``--threads``: by default on the CPU the library's fixed count
(:data:`helpers.core.threads.FIXED_THREADS`, 2, which ``single_head_losses`` always uses and which is also torch's
default on a 2-core machine, so the loop a user writes there) and 1 (the batched path then with
``effects.FIXED_THREADS`` set to 1 for the run). One thread is the loop's best case on a loaded machine: its
passes are so small that two threads spend most of each operation waiting for each other. On a GPU the fixed count
alone. Every loss of every way and count must agree with the first count's loop within :data:`AGREE_RTOL` of the
largest loss (float32 round-off: a row is computed in another order when padded beside others); the maximum
absolute difference is printed, and the script exits with status 1 beyond.

The encoder's masked-LM loss needs a head: this model has none of its own, and timing does not depend on the head's
values, so a :class:`helpers.surface.mlm.FittedMLMHead` over the model's input embeddings with fixed random weights
(``torch.manual_seed(0)``) scores all three (the chapter's fitted head has the same shape and cost, but fitting it
takes minutes on a cold cache). A decoder uses its own head.

Floor and batched run ``--repeats`` times, interleaved (floor, batched, floor, ...), so they share the machine's load;
the fastest run of each is kept, and every run's wall and processor seconds are in the JSON. The one-at-a-time loop
runs once. Processor seconds (user + system of this process, all threads) are printed beside wall seconds: on a
shared machine wall time is inflated by other jobs, processor time much less (though a thread spinning while it
waits for the other counts). Memory: the process's peak resident memory after each stage (monotone), and on a GPU
each stage's peak allocated device memory; the goal is 3 GB. Nothing is written to disk but the JSON. Writes
benchmarks/results/latest/ablation.json; ``--record``: also ``results/ablation-MACHINE-DATE.json`` (named by the
GPU's name or the CPU's model name).
"""
from __future__ import annotations

import argparse
import re
import sys
import time
from contextlib import contextmanager
from typing import Iterator

import numpy as np
import torch

from common import LATEST, elapsed, machine, peak_rss_mib, save
from helpers import encode_words, load_model, load_treebank
from helpers.ablation import effects
from helpers.ablation.effects import passes, single_head_losses
from helpers.ablation.loss import prepare, row_losses
from helpers.ablation.run import TREEBANK, select_sentences
from helpers.config import check_device
from helpers.core.encoding import MAX_LENGTH
from helpers.core.internals import attention_parts
from helpers.core.threads import FIXED_THREADS, torch_threads
from helpers.surface.mlm import FittedMLMHead

AGREE_RTOL = 1e-5        # batched against one at a time: |difference| <= this x the largest loss (float32 round-off)
MEMORY_GOAL_GIB = 3e9 / 2 ** 30  # 3 GB
RANDOM_HEAD = "a FittedMLMHead with fixed random weights (seed 0): timing does not depend on its values"


def stopwatch(lm):
    """A function giving ``(wall seconds, processor seconds)`` since this call (the device's queue waited for)."""
    wall, cpu = time.perf_counter(), time.process_time()
    return lambda: (elapsed(lm, wall), time.process_time() - cpu)


@contextmanager
def library_threads(n: int) -> Iterator[None]:
    """:func:`helpers.ablation.effects.single_head_losses` on ``n`` torch threads instead of
    :data:`~helpers.core.threads.FIXED_THREADS` inside the block (the module's constant, read at each call)."""
    before = effects.FIXED_THREADS
    effects.FIXED_THREADS = n
    try:
        yield
    finally:
        effects.FIXED_THREADS = before


def floor(lm, segments, K: int, threads: int) -> None:
    """The batched path's passes with no hook: ``K`` bare forward passes (and the loss) over ``segments``."""
    with torch.inference_mode(), torch_threads(threads):
        for chunk in passes(lm, segments, K):
            row_losses(lm, segments, [n for n, _ in chunk])


def batched(lm, segments, threads: int) -> np.ndarray:
    """``[layer, head, segment]``: :func:`~helpers.ablation.effects.single_head_losses` on ``threads`` threads."""
    with library_threads(threads):
        return single_head_losses(lm, segments)


def one_at_a_time(lm, segments, threads: int) -> np.ndarray:
    """``[layer, head, segment]``: for each head, a pre-hook zeroing its context on the output projection, then each
    segment alone (as a user would write it), on ``threads`` torch threads."""
    L, H = lm.n_layers, lm.n_heads
    out = np.empty((L, H, len(segments)))
    with torch.inference_mode(), torch_threads(threads):
        for layer in range(L):
            for head in range(H):
                def zero_head(_module, args, head=head):
                    z = args[0].clone()
                    d = z.shape[-1] // H
                    z[..., head * d:(head + 1) * d] = 0
                    return (z, *args[1:])
                handle = attention_parts(lm.model, layer).output.register_forward_pre_hook(zero_head)
                try:
                    for n in range(len(segments)):
                        out[layer, head, n] = row_losses(lm, segments, [n]).item()
                finally:
                    handle.remove()
    return out


def measure(lm, segments, K: int, threads: int, repeats: int) -> tuple[dict, dict, list[np.ndarray]]:
    """``(stages, ratios, [losses of each way])`` on ``threads`` torch threads: the floor and the batched path
    ``repeats`` times each, interleaved (the fastest run kept, every run listed), then the loop once."""
    cuda = lm.device.type == "cuda"

    def stage(name: str, run) -> tuple[dict, object]:
        if cuda:
            torch.cuda.reset_peak_memory_stats(lm.device)
        read = stopwatch(lm)
        value = run()
        wall, cpu = read()
        row = {"seconds": wall, "cpu_seconds": cpu, "peak_rss_mib_after": round(peak_rss_mib(), 1)}
        if cuda:
            row["peak_cuda_mib"] = round(torch.cuda.max_memory_allocated(lm.device) / 2 ** 20, 1)
        print(f"  {threads} thread{'s' * (threads > 1)}, {name}: {wall:.2f} s wall, {cpu:.2f} s processor", flush=True)
        return row, value

    runs: dict[str, list[dict]] = {"floor": [], "batched": []}
    losses = []
    for _ in range(repeats):
        row, _ = stage("floor", lambda: floor(lm, segments, K, threads))
        runs["floor"].append(row)
        row, value = stage("batched", lambda: batched(lm, segments, threads))
        runs["batched"].append(row)
    losses.append(value)
    stages = {}
    for name, rows in runs.items():
        stages[name] = {**min(rows, key=lambda r: r["seconds"]),
                        "runs": [{"seconds": round(r["seconds"], 3), "cpu_seconds": round(r["cpu_seconds"], 3)}
                                 for r in rows]}
    stages["one at a time"], value = stage("one at a time", lambda: one_at_a_time(lm, segments, threads))
    losses.append(value)
    fl, ba, na = stages["floor"], stages["batched"], stages["one at a time"]
    ratios = {"batched_over_floor": ba["seconds"] / fl["seconds"],
              "batched_over_floor_cpu": ba["cpu_seconds"] / fl["cpu_seconds"],
              "batched_over_floor_pairs": [b["seconds"] / f["seconds"] for f, b in zip(runs["floor"], runs["batched"])],
              "one_at_a_time_over_batched": na["seconds"] / ba["seconds"],
              "one_at_a_time_over_batched_cpu": na["cpu_seconds"] / ba["cpu_seconds"]}
    return stages, ratios, losses


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default=None, help="default: all-MiniLM-L6-v2")
    parser.add_argument("--segments", type=int, default=16, help="GUM test sentences of at least 5 words (default 16)")
    parser.add_argument("--max-length", type=int, default=MAX_LENGTH)
    parser.add_argument("--device", default="cpu", help="cpu (default), cuda, cuda:N")
    parser.add_argument("--threads", default=None,
                        help=f"comma-separated torch thread counts to measure at (default on the CPU {FIXED_THREADS},1: "
                             f"the library's fixed count and one; on a GPU {FIXED_THREADS})")
    parser.add_argument("--repeats", type=int, default=3, help="runs of the floor and of the batched path; the fastest kept")
    parser.add_argument("--out", default=str(LATEST / "ablation.json"))
    parser.add_argument("--record", action="store_true")
    args = parser.parse_args()
    try:
        device = check_device(args.device)
    except ValueError as err:
        parser.error(f"--device: {err}")
    cuda = torch.device(device).type == "cuda"
    if args.threads is None:
        threads = [FIXED_THREADS] + ([1] if not cuda and FIXED_THREADS > 1 else [])
    else:
        try:
            threads = [int(t) for t in args.threads.split(",")]
        except ValueError:
            threads = []
        if not threads or min(threads) < 1:
            parser.error(f"--threads {args.threads}: give positive whole numbers separated by commas, e.g. 2,1")
    started = machine()

    lm = load_model(args.model, device=device)
    sentences = select_sentences(load_treebank(TREEBANK), args.segments)
    batch = encode_words(lm.tokenizer, [s.words for s in sentences], max_length=args.max_length,
                         model_max=lm.max_positions)
    head, head_source = None, None
    if not lm.causal:
        torch.manual_seed(0)
        head, head_source = FittedMLMHead(lm.model.get_input_embeddings().weight.detach().float()).eval(), RANDOM_HEAD
    segments = prepare(lm, batch, head=head, seed=0, head_source=head_source)
    L, H, N = lm.n_layers, lm.n_heads, len(segments)
    K = L * H
    tokens = [len(e) for e in segments.examples]
    plan = passes(lm, segments, K)
    width = [max(len(segments.examples[n]) for n, _ in p) for p in plan]
    padding = sum(w * len(p) for w, p in zip(width, plan)) / (K * sum(tokens)) - 1
    print(f"model {lm.label} ({L} x {H} = {K} heads) on {lm.device}, {N} segment{'s' * (N > 1)} of {TREEBANK} "
          f"({sum(tokens) / N:.1f} tokens on average, {min(tokens)} to {max(tokens)}), {K} x {N} = {K * N} rows in "
          f"{len(plan)} passes ({100 * padding:.1f} % padding tokens); loss: {segments.kind}", flush=True)

    small = prepare(lm, batch.examples[:1], head=head, seed=0, head_source=head_source)
    for t in threads:  # warm-up: allocator, thread pools, kernels
        batched(lm, small, t)
        floor(lm, small, K, t)

    measured, losses = {}, []
    for t in threads:
        stages, ratios, found = measure(lm, segments, K, t, args.repeats)
        measured[str(t)] = {"stages": stages, "ratios": ratios}
        losses += found
    reference = losses[1]  # the first thread count's one-at-a-time losses
    difference = max(float(np.abs(x - reference).max()) for x in losses)
    tolerance = AGREE_RTOL * float(np.abs(reference).max())
    agree = difference <= tolerance

    base = measured[str(threads[0])]["stages"]["floor"]
    print(f"{'threads':>7s}  {'stage':14s} {'wall s':>8s} {'cpu s':>8s} {'ms / row':>9s} {'x floor':>8s} "
          f"{'x 1st floor':>11s} {'peak RSS MiB':>13s}")
    for t, m in measured.items():
        fl = m["stages"]["floor"]
        for name, s in m["stages"].items():
            print(f"{t:>7s}  {name:14s} {s['seconds']:8.2f} {s['cpu_seconds']:8.2f} {1e3 * s['seconds'] / (K * N):9.2f} "
                  f"{s['seconds'] / fl['seconds']:8.2f} {s['seconds'] / base['seconds']:11.2f} "
                  f"{s['peak_rss_mib_after']:13.0f}" + (f"  cuda {s['peak_cuda_mib']:.0f} MiB" if cuda else ""))
    for t, m in measured.items():
        r = m["ratios"]
        print(f"{t} thread{'s' * (int(t) > 1)}: batched / floor {r['batched_over_floor']:.2f} wall (best of "
              f"{args.repeats} each; side by side {', '.join(f'{p:.2f}' for p in r['batched_over_floor_pairs'])}), "
              f"{r['batched_over_floor_cpu']:.2f} processor (target <= 1.2); one at a time / batched "
              f"{r['one_at_a_time_over_batched']:.2f} wall, {r['one_at_a_time_over_batched_cpu']:.2f} processor "
              f"(goal >= 3 on a GPU, >= 1 on the CPU)")
    peak = peak_rss_mib()
    peak_cuda = max(s["peak_cuda_mib"] for m in measured.values() for s in m["stages"].values()) if cuda else None
    print(f"peak resident memory {peak / 1024:.2f} GiB" + (f", CUDA max allocated {peak_cuda / 1024:.2f} GiB" if cuda else "")
          + f" (goal {MEMORY_GOAL_GIB:.2f} GiB = 3 GB)")
    print(f"batched against one at a time: max |difference| {difference:.3g} ({'within' if agree else 'BEYOND'} "
          f"{tolerance:.3g} = {AGREE_RTOL:g} x the largest loss {np.abs(reference).max():.3f})")

    for m in measured.values():
        for s in m["stages"].values():
            s["seconds"], s["cpu_seconds"] = round(s["seconds"], 3), round(s["cpu_seconds"], 3)
        m["ratios"] = {k: [round(x, 3) for x in v] if isinstance(v, list) else round(v, 3) for k, v in m["ratios"].items()}
    name = torch.cuda.get_device_name(lm.device) if cuda else started["cpu"]
    result = {"model": lm.label, "device": str(lm.device), "device_name": name, "layers": L, "heads": H,
              "interventions": K, "corpus": TREEBANK, "segments": N, "mean_tokens": round(sum(tokens) / N, 1),
              "min_tokens": min(tokens), "max_tokens": max(tokens), "rows": K * N, "passes": len(plan),
              "rows_per_pass": [len(p) for p in plan], "padding_share": round(padding, 4), "loss": segments.kind,
              "head": "the model's own" if lm.causal else RANDOM_HEAD, "repeats": args.repeats,
              "threads": measured, "max_abs_difference": difference, "tolerance": tolerance, "agree": agree,
              "peak_rss_mib": round(peak, 1), "peak_cuda_mib": peak_cuda}
    save(result, args.out, record="ablation" if args.record else None, model=args.model or "default",
         started=started, name_by=re.sub(r"[^A-Za-z0-9]+", "_", name or "unknown").strip("_"))
    sys.exit(0 if agree else 1)


if __name__ == "__main__":
    main()
