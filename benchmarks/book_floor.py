"""Benchmark: the compute floor of a full book build — the bare model passes over exactly what it reads.

    python benchmarks/book_floor.py [--model SPEC] [--small] [--record] [--out FILE]

The list of passes comes from :func:`helpers.plan.book_passes`, which reads the sections' sizes, the
probes' corpora and the comparison's models and sizes from the code that runs the chapters (one place,
not a copy): for the book's model (``--model``, default ``$BERT_ATTENTION_MODEL``, else the offline
default) the paper's 1,000 segments, the masked-LM head's segments, GUM train/dev/test, EWT dev and the
coreference windows; for its random-init control the probes' treebanks; for each other model of the
chapter "Comparing models" the same at its reduced sizes. Each input is encoded as its run encodes it
(not timed), then timed as

- a bare forward pass with attention probabilities, in length-sorted batches of 32 cut as extraction
  cuts them (:func:`helpers.core.extract.forward_parts`), for inputs whose maps are read;
- a bare forward pass without attentions for the masked-LM head's segments (only their last hidden
  states are used);
- forward and backward passes (``loss = sum of the last hidden states``, attention probabilities kept
  for their gradients) in the gradient pass's batches, for the §3 gradient segments.

The floor is their sum; beside each pass's seconds its processor time (user + system of this process, every
thread counted), whose sum is the floor's work (``cpu_seconds_floor``). The models are on ``$BERT_ATTENTION_DEVICE`` when it is set (``cuda``: the
GPU's floor, its queued work waited for before each time is taken), else on the CPU. Loading each model
is timed apart (a build loads models too, but it is not a pass over the data). Prints the floor in seconds and writes JSON (``--record`` keeps it dated in
``benchmarks/results/`` for the Performance page).
"""
from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import torch

from common import LATEST, device_record, elapsed, machine, run_device, save

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def forward_seconds(lm, examples, *, attentions: bool) -> float:
    from helpers.core.extract import bucket, forward_attentions, forward_parts, model_inputs

    start = time.perf_counter()
    for group in bucket(examples, batch_size=32):
        for part in forward_parts(lm, group):
            if attentions:
                forward_attentions(lm, part)
            else:
                with torch.inference_mode():
                    lm.model(**model_inputs(lm, part))
    return elapsed(lm, start)


def backward_seconds(lm, examples) -> float:
    from helpers.core.extract import bucket, model_inputs
    from helpers.surface.gradients import gradient_batch_size

    start = time.perf_counter()
    for group in bucket(examples, batch_size=gradient_batch_size(lm)):
        out = lm.model(**model_inputs(lm, group), output_attentions=True)
        for a in out.attentions:
            a.retain_grad()
        out.last_hidden_state.sum().backward()
        lm.model.zero_grad(set_to_none=True)
    return elapsed(lm, start)


def floor(model: str | None, *, small: bool, data_dir=None, cache_root=None, progress: bool = True) -> dict:
    """Time every pass of :func:`helpers.plan.book_passes` for the book's model ``model``."""
    if model:
        os.environ["BERT_ATTENTION_MODEL"] = model
    from helpers.compare.run import book_spec, parse_spec
    from helpers.context import RunContext
    from helpers.core.models import load_model
    from helpers.plan import book_passes, encode_pass

    ctx = RunContext.from_env(small=small, data_dir=data_dir, cache_dir=cache_root)  # an entry point: reads it once
    passes = book_passes(ctx)
    rows, loading, encoding = [], {}, 0.0
    models: dict[str, object] = {}
    for p in passes:
        if p.spec not in models:
            models.clear()  # one model in memory at a time (passes are grouped by model)
            name, random_init = parse_spec(p.spec)
            start = time.perf_counter()
            models[p.spec] = load_model(name, random_init=random_init, cache_root=cache_root)
            loading[p.spec] = round(time.perf_counter() - start, 2)
        lm = models[p.spec]
        start = time.perf_counter()
        batch = encode_pass(lm, p, ctx)
        encoding += time.perf_counter() - start
        if batch is None:
            continue
        examples = batch.examples
        cpu = time.process_time()
        if p.backward:
            seconds = backward_seconds(lm, examples)
        else:
            seconds = forward_seconds(lm, examples, attentions=not p.input.startswith("masked-LM"))
        cpu = time.process_time() - cpu
        row = {**p.to_json(), "examples": len(examples), "tokens": int(sum(len(e) for e in examples)),
               "seconds": round(seconds, 2), "cpu_seconds": round(cpu, 2)}
        rows.append(row)
        if progress:
            print(f"  {p.spec:>18s}  {p.input:32s} {'backward' if p.backward else 'forward ':8s} "
                  f"{len(examples):6d} inputs {row['tokens']:9,d} tokens {seconds:8.1f} s", flush=True)
    total = round(sum(r["seconds"] for r in rows), 1)
    return {"model_spec": book_spec(ctx), "small": small, "threads": torch.get_num_threads(), "device": run_device(),
            "passes": rows,
            "seconds_floor": total, "cpu_seconds_floor": round(sum(r["cpu_seconds"] for r in rows), 1),
            "seconds_forward": round(sum(r["seconds"] for r in rows if not r["backward"]), 1),
            "seconds_backward": round(sum(r["seconds"] for r in rows if r["backward"]), 1),
            "seconds_loading": loading, "seconds_encoding": round(encoding, 1)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default=None, help="the book's model (default: $BERT_ATTENTION_MODEL, else the offline default)")
    parser.add_argument("--small", action="store_true", help="the tests' small configuration (BERT_ATTENTION_SMALL)")
    parser.add_argument("--data-dir", default=None)
    parser.add_argument("--cache-dir", default=None, help="where installed extras (mpnet-base) and parsed corpora are")
    parser.add_argument("--record", action="store_true", help="keep a dated recorded measurement in benchmarks/results/")
    parser.add_argument("--out", default=str(LATEST / "book_floor.json"))
    args = parser.parse_args()
    started = machine()
    result = floor(args.model, small=args.small, data_dir=args.data_dir, cache_root=args.cache_dir)
    print(f"floor of a {'small' if args.small else 'full'} build for {result['model_spec']}: "
          f"{result['seconds_floor']:.1f} s ({result['seconds_forward']:.1f} s forward, "
          f"{result['seconds_backward']:.1f} s backward; loading models {sum(result['seconds_loading'].values()):.1f} s); "
          f"processor time of the passes {result['cpu_seconds_floor']:.1f} s")
    save(result, args.out, record=device_record("book_floor") if args.record else None, model=result["model_spec"], started=started)


if __name__ == "__main__":
    main()
