"""Benchmark: the context-mixing maps of :mod:`helpers.mixing.maps`, each method against the bare forward pass.

    python benchmarks/mixing.py [--model NAME] [--corpus gum:test] [--max-sentences 20] [--batch-size 8]

For the first ``--max-sentences`` sentences of ``--corpus``, in length buckets of ``--batch-size``: the bare forward
pass with attentions (the floor), then each method alone through :func:`helpers.mixing.maps.mixing_for` (its own
forward pass included), then all methods but per-head value zeroing together, then all together: seconds, seconds
per sentence and the ratio to the floor, and the process's peak resident memory after each stage (monotone: the
stages run from cheap to expensive, so a rise is the stage's own need). On a GPU (``$BERT_ATTENTION_DEVICE``) each
stage's peak allocated device memory too. Writes benchmarks/results/latest/mixing.json (``--record``: also a dated
recorded measurement).

Measured 2026-11-27 at commit c7c331c on the shared 2-core CPU (Intel, 1 torch thread; a load average of 12 to 19
from other jobs, so the seconds are noisy and only the ratios, taken in one run, carry), all-MiniLM-L6-v2, the
first 20 sentences of GUM test (23.6 tokens on average, 4 to 54), batches of 8, ``max_rows`` 16384 (the default):

============================  ========  ============  =========  ==============
stage                         seconds   s / sentence  x bare     peak RSS after
============================  ========  ============  =========  ==============
bare forward (the floor)      1.58      0.079         1.00       484 MiB
attention                     1.76      0.088         1.11       507 MiB
norms                         1.82      0.091         1.15       507 MiB
rollout                       1.51      0.075         0.95       507 MiB
alti                          4.90      0.245         3.10       625 MiB
alti_rollout                  2.94      0.147         1.86       625 MiB
value_zeroing                 13.1      0.653         8.25       680 MiB
value_zeroing_heads           138       6.89          87.0       976 MiB
all but value_zeroing_heads   13.6      0.680         8.59       976 MiB
all                           173       8.64          109        996 MiB
============================  ========  ============  =========  ==============

SmolLM2-135M-Instruct (``--model smollm2``, 30 layers x 9 heads, 3 key-value heads), the same 20 sentences (22.9
tokens on average, 3 to 60), same settings and day, at commit fe12991, a load average of 18 to 23 (so noisier still:
"all" came out faster than per-head value zeroing alone, which only contention explains):

============================  ========  ============  =========  ==============
stage                         seconds   s / sentence  x bare     peak RSS after
============================  ========  ============  =========  ==============
bare forward (the floor)      8.03      0.40          1.00       898 MiB
attention                     9.47      0.47          1.18       947 MiB
norms                         10.7      0.54          1.33       959 MiB
rollout                       9.96      0.50          1.24       959 MiB
alti                          17.0      0.85          2.11       1174 MiB
alti_rollout                  15.6      0.78          1.94       1174 MiB
value_zeroing                 87.6      4.38          10.9       1174 MiB
value_zeroing_heads           677       33.8          84.3       1351 MiB
all but value_zeroing_heads   58.4      2.92          7.27       1445 MiB
all                           403       20.2          50.2       1458 MiB
============================  ========  ============  =========  ==============

Per-layer value zeroing reruns each layer's FFN ``T`` times and per-head value zeroing ``heads x T`` times, so
their ratios grow with sentence length (about ``T`` and ``heads x T`` times the FFN share of a forward pass);
everything else stays within a few forward passes. An earlier run, also under load (the maps of commit fc48ae1: chunks of 2**16 rows, padding
rows and a decoder's unmoved rows rerun too) took 21x for value_zeroing, 261x per head and 1855 MiB.
"""
from __future__ import annotations

import argparse
import time

from common import LATEST, elapsed, machine, peak_rss_mib, save
from helpers import encode_words, load_model, load_treebank
from helpers.core.extract import bucket, forward_attentions
from helpers.mixing.maps import MAX_ROWS, METHODS, check_methods, mixing_for

CHEAP_FIRST = ("attention", "norms", "rollout", "alti", "alti_rollout", "value_zeroing", "value_zeroing_heads")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default=None)
    parser.add_argument("--corpus", default="gum:test")
    parser.add_argument("--max-sentences", type=int, default=20)
    parser.add_argument("--batch-size", type=int, default=8)
    parser.add_argument("--methods", default=",".join(METHODS), help="comma-separated subset of " + ", ".join(METHODS))
    parser.add_argument("--max-rows", type=int, default=MAX_ROWS)
    parser.add_argument("--repeats", type=int, default=1, help="runs of each stage; the fastest is kept")
    parser.add_argument("--out", default=str(LATEST / "mixing.json"))
    parser.add_argument("--record", action="store_true")
    args = parser.parse_args()
    methods = check_methods(args.methods.split(","))
    started = machine()

    import torch

    lm = load_model(args.model)  # on $BERT_ATTENTION_DEVICE when set
    sentences = load_treebank(args.corpus, max_sentences=args.max_sentences)
    batch = encode_words(lm.tokenizer, [s.words for s in sentences], model_max=lm.max_positions)
    examples = batch.examples
    groups = bucket(examples, batch_size=args.batch_size)
    n = len(examples)
    tokens = [len(e) for e in examples]
    cuda = lm.device.type == "cuda"

    forward_attentions(lm, groups[0])  # warm-up
    mixing_for(lm, groups[0][:1], methods, max_rows=args.max_rows)

    def timed(run) -> tuple[float, float | None]:
        best = float("inf")
        peak = None
        for _ in range(args.repeats):
            if cuda:
                torch.cuda.reset_peak_memory_stats(lm.device)
            start = time.perf_counter()
            for g in groups:
                run(g)
            best = min(best, elapsed(lm, start))
            if cuda:
                peak = torch.cuda.max_memory_allocated(lm.device) / 2 ** 20
        return best, peak

    stages: dict[str, dict] = {}
    floor, peak = timed(lambda g: forward_attentions(lm, g))
    stages["bare forward"] = {"seconds": round(floor, 3), "peak_rss_mib_after": round(peak_rss_mib(), 1)}
    if peak is not None:
        stages["bare forward"]["peak_cuda_mib"] = round(peak, 1)
    plan = [(m, (m,)) for m in CHEAP_FIRST if m in methods]
    if len(methods) > 1:
        without = tuple(m for m in methods if m != "value_zeroing_heads")
        if without != methods and len(without) > 1:
            plan.append(("all but value_zeroing_heads", without))
        plan.append(("all", methods))
    for name, chosen in plan:
        seconds, peak = timed(lambda g, chosen=chosen: mixing_for(lm, g, chosen, max_rows=args.max_rows))
        stages[name] = {"seconds": round(seconds, 3), "ratio_to_bare": round(seconds / floor, 2),
                        "peak_rss_mib_after": round(peak_rss_mib(), 1)}
        if peak is not None:
            stages[name]["peak_cuda_mib"] = round(peak, 1)
        print(f"{name}: {seconds:.2f} s, {seconds / floor:.2f}x the bare forward pass", flush=True)  # progress
    for s in stages.values():
        s["seconds_per_sentence"] = round(s["seconds"] / n, 4)

    print(f"model {lm.label} on {lm.device}, {n} sentences of {args.corpus} ({len(batch.skipped)} skipped), "
          f"{sum(tokens) / n:.1f} tokens on average ({min(tokens)} to {max(tokens)}), batches of {args.batch_size}, "
          f"max_rows {args.max_rows}")
    print(f"{'stage':30s} {'seconds':>9s} {'s/sentence':>11s} {'x bare':>7s} {'peak RSS MiB':>13s}")
    for name, s in stages.items():
        print(f"{name:30s} {s['seconds']:9.3f} {s['seconds_per_sentence']:11.4f} {s.get('ratio_to_bare', 1.0):7.2f} "
              f"{s['peak_rss_mib_after']:13.0f}" + (f"  cuda {s['peak_cuda_mib']:.0f} MiB" if "peak_cuda_mib" in s else ""))
    result = {"model": lm.label, "device": str(lm.device), "corpus": args.corpus, "sentences": n,
              "skipped": len(batch.skipped), "mean_tokens": round(sum(tokens) / n, 1), "max_tokens": max(tokens),
              "batch_size": args.batch_size, "max_rows": args.max_rows, "repeats": args.repeats,
              "torch_threads": torch.get_num_threads(), "stages": stages}
    save(result, args.out, record="mixing" if args.record else None, model=args.model or "default", started=started)


if __name__ == "__main__":
    main()
