"""Benchmark: training epochs of the probes (paper §5) from their held batches, against making the batches alone
and against plain-autograd formulations; and the ``probe`` command cold against its floor.

    python benchmarks/probes.py [--sentences 2000] [--corpus gum:train] [--layers 6 --heads 12 --dim 384]
    python benchmarks/probes.py --skip-formulations --skip-naive --command [--baseline-tree DIR]

The sentences have the lengths of the corpus; the maps are random (time does not depend on the values),
so no model runs. They are packed and their padded batches made as ``probe`` makes them
(:class:`helpers.probe.stats.HeldBatches`), and we time

- making every batch once, no probe: the floor of an epoch that reads the features;
- one training epoch of each probe (forward, backward, Adam step over the batches, as
  :func:`helpers.probe.stats.train_probe` does), and an epoch of forward passes alone;
- Distances + words against the same network written with plain autograd over padded batches
  (``out(tanh(dep + cand + dist))``), and Attn + words against a batched product plus an ``einsum``.

Both formulations start from the same weights and must give the same loss (checked). Writes
benchmarks/results/probes.json, with the ratio of each epoch to making the batches.

Then, on ``--device`` (default the CPU; ``cuda`` on a GPU), each probe's training epoch as
:func:`helpers.probe.stats.train_probe` runs it there (the batches of :func:`helpers.probe.stats.batches_on`) against

- a naive per-sentence reference: the same epoch with a Python loop over each batch's sentences, each sentence
  alone at its own length (the same loss and Adam steps; checked);
- the bare forward pass over the same batches (no gradient): the floor of the arithmetic;

with the wall time, processor time and peak memory of each (the device's peak allocated memory on a GPU; on
the CPU the process's peak resident memory, which only grows, so the first phase to need more shows it).
Printed as the ratios ``batched / naive`` and ``batched / forward`` (of wall and of processor seconds).

The naive loop takes minutes at the default sizes, so the Performance page does not run this second part
(``--skip-naive``): it shows the newest recording of it instead, made with

    python benchmarks/probes.py --skip-formulations --threads 1 --record

and kept as ``results/probes-LAYERSxHEADS-DATE.json`` (``probes_cuda-...`` for a run with ``--device cuda``,
beside the CPU's, never in its place).

With ``--command``, the ``probe`` command as a user runs it, cold (an empty cache: the model's and its control's
passes over every treebank, then the 13 trainings of Table 3; ``--command-sentences`` caps each treebank), each run
a process of its own with OpenMP on one thread (``--threads``, default 1), against a floor process that loads the
model and its random-init control, encodes GUM train and runs the bare forward pass with attentions of each over it
(two bare passes over GUM train); with ``--baseline-tree DIR`` the same command from another checkout beside (an
older commit's worktree), in the same run. Each process's wall and processor seconds (every process and thread it
waited for) and the peak memory of its largest process, and the ratios to the floor (issue 63's goal: ``probe``
within 3 times the floor).
"""
from __future__ import annotations

import argparse
import copy
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import torch
from torch import nn

from common import LATEST, machine, measure, peak_rss_mib, save
from helpers.data.corpora import load_treebank
from helpers.probe.stats import (
    HIDDEN_UNITS,
    AttentionProbe,
    Batch,
    DistanceProbe,
    ProbeData,
    _for_model,
    batches_on,
    build_probe,
    distance_parts,
    prepared,
    probe_loss,
    stream,
)

ROOT = Path(__file__).resolve().parent.parent


class PlainDistanceProbe(DistanceProbe):
    """The same parameters, the hidden layer left to autograd."""

    def forward(self, batch, misaligned: bool = False):
        n = batch.heads.shape[1]
        v = batch.word_vectors(misaligned)
        v_cand = torch.cat([torch.zeros_like(v[:, :1]), v], dim=1)
        lengths = batch.mask.sum(1).float()
        indicators, distances = distance_parts(n)
        h = (self.dep(v)[:, :, None] + self.cand(v_cand)[:, None] + self.dist(indicators)[None]
             + self.dist(distances)[None] / lengths[:, None, None, None])
        return self.out(torch.tanh(h)).squeeze(-1).masked_fill(~batch.cand_mask, -1e9)


class PlainAttentionProbe(AttentionProbe):
    """The same parameters, the candidate term as an ``einsum`` over the features."""

    def forward(self, batch, misaligned: bool = False):
        F = batch.features
        b, n, c1, k = F.shape
        root = batch.root_parts @ self.root
        v = batch.word_vectors(misaligned)
        a, c = self.dep(v), self.cand(v)
        words = torch.bmm(F[:, :, 1:].reshape(b * n, c1 - 1, k), a.reshape(b * n, k, 1)).reshape(b, n, c1 - 1)
        words = words + torch.einsum("bijk,bjk->bij", F[:, :, 1:], c)
        logits = torch.cat([(root * a).sum(-1, keepdim=True), words], dim=-1)
        return logits.masked_fill(~batch.cand_mask, -1e9)


def synthetic(lengths: list[int], layers: int, heads: int, dim: int, seed: int = 0) -> ProbeData:
    rng = np.random.default_rng(seed)
    maps, gold, punct, vectors = [], [], [], []
    for n in lengths:
        rows = rng.random((layers, heads, n + 2, n + 2), dtype=np.float32)
        maps.append((rows / rows.sum(-1, keepdims=True)).astype(np.float16))
        # a head among ROOT (0) and the other words (word i is candidate i + 1): never the word itself, which the
        # probes mask out (a gold head there would add a constant 1e9 to the loss and hide any difference in it)
        head = rng.integers(0, n, size=n)
        gold.append(head + (head > np.arange(n)))
        punct.append(np.zeros(n, bool))
        vectors.append(rng.normal(size=(n, dim)).astype(np.float32))
    return ProbeData(maps, gold, punct, vectors)


def plain_loss(model: nn.Module, batch) -> torch.Tensor:
    logits = model(batch)
    return nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), batch.heads.reshape(-1),
                                       ignore_index=-100, reduction="sum") / len(batch.indices)


def epoch(model: nn.Module, batches, *, train: bool = True, fused: bool = True) -> tuple[float, float]:
    """(seconds, summed loss) of one pass over ``batches`` (streamed as the library trains: ``fused`` uses
    the library's training loss, else the cross-entropy of the model's logits)."""
    optim = torch.optim.Adam(model.parameters(), lr=1e-3)
    total = 0.0
    batches = _for_model(batches, model)
    start = time.perf_counter()
    for batch in stream(batches, range(len(batches))):
        with torch.set_grad_enabled(train):
            loss = probe_loss(model, batch) if (fused and train) else plain_loss(model, batch)
        if train:
            optim.zero_grad()
            loss.backward()
            optim.step()
        total += float(loss.detach())
    return time.perf_counter() - start, total


def making_seconds(batches) -> float:
    """Seconds to make every batch of ``batches`` once, no probe (best of three)."""
    times = []
    for _ in range(3):
        start = time.perf_counter()
        for _ in stream(batches, range(len(batches))):
            pass
        times.append(time.perf_counter() - start)
    return min(times)


def compare(name: str, fast: nn.Module, plain: nn.Module | None, batches, making: float, repeats: int = 2) -> dict:
    epoch(copy.deepcopy(fast), batches)  # warm-up (allocator, thread pool, page cache)
    # best of `repeats` fresh epochs each, from the same weights
    t_fast, loss_fast = min(epoch(copy.deepcopy(fast), batches) for _ in range(repeats))
    t_forward = min(epoch(fast, batches, train=False)[0] for _ in range(repeats))
    row = {"seconds_epoch": round(t_fast, 3), "seconds_forward_only": round(t_forward, 3),
           "ratio_training_over_forward": round(t_fast / t_forward, 2),
           "ratio_epoch_over_batches": round(t_fast / making, 2)}
    text = f"{name}: epoch {t_fast:.2f} s ({row['ratio_epoch_over_batches']}x making its batches)"
    if plain is not None:
        plain.load_state_dict(fast.state_dict())  # the same weights, the plain forward
        t_plain, loss_plain = min(epoch(copy.deepcopy(plain), batches, fused=False) for _ in range(repeats))
        if not np.isclose(loss_fast, loss_plain, rtol=1e-4):
            raise AssertionError(f"{name}: losses differ ({loss_fast} vs {loss_plain})")
        row.update(seconds_epoch_plain_autograd=round(t_plain, 3), speedup_over_plain=round(t_plain / t_fast, 2))
        text += f", plain autograd {t_plain:.2f} s ({row['speedup_over_plain']}x)"
    print(text + f", forward only {t_forward:.2f} s")
    return row


def sentences_of(batch: Batch) -> list[Batch]:
    """Each sentence of ``batch`` alone, cut to its own length (a batch of one, no padding)."""
    out = []
    for b, m in enumerate(batch.mask.sum(1).tolist()):
        cut = {name: getattr(batch, name)[b : b + 1, :m] for name in ("heads", "punct", "vectors", "mask")}
        out.append(Batch(features=batch.features[b : b + 1, :m, : m + 1], root_parts=batch.root_parts[b : b + 1, :m],
                         cand_mask=batch.cand_mask[b : b + 1, :m, : m + 1], indices=(batch.indices[b],), **cut))
    return out


def synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def device_epoch(model: nn.Module, batches, device: torch.device, how: str) -> tuple[float, float, float, float]:
    """(seconds, summed loss, peak MiB, processor seconds) of one epoch on ``device``: ``how`` is ``batched`` (the
    library's training step per batch), ``naive`` (a Python loop over each batch's sentences, each alone: the sum of
    their losses over the batch's sentences, one Adam step per batch) or ``forward`` (the batched forward pass, no
    gradient). The processor seconds are this process's (every thread's user and system time): on a shared machine
    with ``--threads 1`` they are the epoch's work, where its wall time also counts the waits for a core."""
    optim = torch.optim.Adam(model.parameters(), lr=1e-3)
    batches = _for_model(batches, model)
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)
    total = torch.zeros((), device=device)
    synchronize(device)
    start, cpu = time.perf_counter(), time.process_time()
    for batch in stream(batches, range(len(batches))):
        batch = batch.to(device)
        if how == "forward":
            with torch.no_grad():
                total += probe_loss(model, batch).detach()
            continue
        if how == "batched":
            loss = probe_loss(model, batch)
        else:
            loss = sum(probe_loss(model, one) for one in sentences_of(batch)) / len(batch.indices)
        optim.zero_grad()
        loss.backward()
        optim.step()
        total += loss.detach()
    synchronize(device)
    seconds, cpu = time.perf_counter() - start, time.process_time() - cpu
    peak = torch.cuda.max_memory_allocated(device) / 2 ** 20 if device.type == "cuda" else peak_rss_mib()
    return seconds, float(total), peak, cpu


def against_naive(name: str, model: nn.Module, batches, device: torch.device, repeats: int = 2) -> dict:
    """The batched epoch against the naive per-sentence one and the bare forward pass (best of ``repeats`` each,
    after a warm-up; every run from the same weights): wall and processor seconds (each the best of the runs),
    summed loss and peak memory."""
    model = model.to(device)
    device_epoch(copy.deepcopy(model), batches, device, "batched")  # warm-up
    row = {}
    for how in ("batched", "naive", "forward"):
        runs = [device_epoch(copy.deepcopy(model), batches, device, how) for _ in range(repeats)]
        seconds, loss, peak, _ = min(runs)
        row[how] = {"seconds": round(seconds, 3), "cpu_seconds": round(min(r[3] for r in runs), 3), "loss": loss,
                    "peak_mib": round(peak, 1)}
    if not np.isclose(row["batched"]["loss"], row["naive"]["loss"], rtol=1e-4):
        raise AssertionError(f"{name}: batched and per-sentence losses differ ({row['batched']['loss']} vs "
                             f"{row['naive']['loss']})")
    b, n, f = (row[how]["seconds"] for how in ("batched", "naive", "forward"))
    cb, cn, cf = (row[how]["cpu_seconds"] for how in ("batched", "naive", "forward"))
    row.update(ratio_batched_over_naive=round(b / n, 3), ratio_batched_over_forward=round(b / f, 2),
               ratio_batched_over_naive_cpu=round(cb / cn, 3), ratio_batched_over_forward_cpu=round(cb / cf, 2))
    print(f"{name} on {device}: epoch {b:.3f} s batched, {n:.3f} s naive per sentence ({b / n:.2f}x), "
          f"forward only {f:.3f} s ({b / f:.2f}x); processor s {cb:.3f} / {cn:.3f} / {cf:.3f}; "
          f"peak {row['batched']['peak_mib']:.0f} / {row['naive']['peak_mib']:.0f} / {row['forward']['peak_mib']:.0f} MiB")
    return row


FLOOR = """
import sys
from helpers import load_model
from helpers.core.extract import bucket, forward_attentions, forward_parts
from helpers.pipeline.extraction import encode_treebank
from helpers.probe.run import control_model
lm = load_model(None)
control = control_model(lm)
limit = int(sys.argv[3]) if len(sys.argv) > 3 else None
_, batch, _ = encode_treebank(lm, "gum:train", max_sentences=limit, data_dir=sys.argv[1], cache_root=sys.argv[2])
for model in (lm, control):
    for group in bucket(batch.examples, batch_size=32):
        for part in forward_parts(model, group):
            forward_attentions(model, part)
"""


def command_runs(tmp: Path, *, data_dir: str, threads: int, sentences: int | None, baseline: str | None) -> dict:
    """The ``probe`` command cold (and from ``baseline``'s checkout) against the floor process (:data:`FLOOR`), each a
    process of its own: :func:`common.measure` of each, the ratios to the floor, and whether the baseline's JSON
    is the command's, timing aside."""
    import json

    (tmp / "floor.py").write_text(FLOOR)
    limit = [] if sentences is None else [str(sentences)]
    probe = ["-m", "helpers", "probe", "--data-dir", data_dir, "--quiet"] + (
        [] if sentences is None else ["--max-sentences", str(sentences)])
    runs = {"floor": (ROOT, [str(tmp / "floor.py"), data_dir, str(tmp / "cache-floor"), *limit]),
            "probe": (ROOT, [*probe, "--cache-dir", str(tmp / "cache-probe"), "--json", str(tmp / "probe.json")])}
    if baseline:
        runs["baseline probe"] = (Path(baseline).resolve(), [*probe, "--cache-dir", str(tmp / "cache-baseline"),
                                                             "--json", str(tmp / "baseline.json")])
    env = {"HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": str(threads), "OMP_WAIT_POLICY": "PASSIVE"}
    out = {"threads": threads, "sentences": sentences}
    for name, (tree, argv) in runs.items():
        result = measure([sys.executable, *argv], {**os.environ, **env, "PYTHONPATH": str(tree)}, cwd=tree)
        if result["exit_status"] != 0:
            sys.exit(f"{name}: exit {result['exit_status']}: {result.get('error')}")
        out[name] = {"tree": str(tree), "seconds": result["seconds"], "cpu_seconds": result["cpu_seconds"],
                     "peak_rss_mib": round(result["peak_rss_bytes"] / 2 ** 20)}
        print(f"{name:15s} wall {result['seconds']:7.1f} s  processor {result['cpu_seconds']:7.1f} s  peak "
              f"{out[name]['peak_rss_mib']:6d} MiB", flush=True)
    for name in runs:
        if name != "floor":
            for what in ("seconds", "cpu_seconds"):
                out[f"ratio_{name.replace(' ', '_')}_over_floor_{what}"] = round(out[name][what] / out["floor"][what], 2)
            print(f"{name}: {out[name]['seconds'] / out['floor']['seconds']:.2f} x the floor's wall, "
                  f"{out[name]['cpu_seconds'] / out['floor']['cpu_seconds']:.2f} x its processor time (goal <= 3)")
    if baseline:
        timing = ("seconds",)
        mine, theirs = (json.loads((tmp / f).read_text()) for f in ("probe.json", "baseline.json"))
        out["same_json_as_baseline"] = ({k: v for k, v in mine.items() if k not in timing}
                                        == {k: v for k, v in theirs.items() if k not in timing})
        print(f"the baseline's JSON, timing aside, is {'the same' if out['same_json_as_baseline'] else 'DIFFERENT'}")
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--corpus", default="gum:train", help="sentence lengths come from this corpus")
    parser.add_argument("--sentences", type=int, default=2000)
    parser.add_argument("--layers", type=int, default=6)
    parser.add_argument("--heads", type=int, default=12)
    parser.add_argument("--dim", type=int, default=384, help="word-vector size")
    parser.add_argument("--device", default="cpu", help="where the trainings against the naive loop run (cpu, cuda)")
    parser.add_argument("--skip-formulations", action="store_true",
                        help="only the trainings against the naive loop (not the plain-autograd formulations)")
    parser.add_argument("--skip-naive", action="store_true",
                        help="only the formulations (not the trainings on --device against the naive loop, which take "
                             "minutes: the Performance page shows a recording of them)")
    parser.add_argument("--command", action="store_true",
                        help="also the probe command cold against two bare passes over GUM train (minutes at full size)")
    parser.add_argument("--command-sentences", type=int, default=None,
                        help="the command's --max-sentences (default: every sentence, the book's size)")
    parser.add_argument("--baseline-tree", default=None, help="with --command: another checkout whose probe command "
                                                              "runs beside")
    parser.add_argument("--data-dir", default=os.environ.get("BERT_ATTENTION_DATA", str(ROOT.parent / "shared" / "data")),
                        help="with --command: the corpora (default $BERT_ATTENTION_DATA, else ../shared/data)")
    parser.add_argument("--threads", type=int, default=None,
                        help="torch's intra-op threads (default: torch's own choice, usually the cores; the command's "
                             "processes: 1)")
    parser.add_argument("--out", default=str(LATEST / "probes.json"))
    parser.add_argument("--record", action="store_true", help="also keep a dated recorded measurement in benchmarks/results/")
    args = parser.parse_args()
    if args.skip_formulations and args.skip_naive and not args.command:
        parser.error("--skip-formulations and --skip-naive together leave nothing to measure (add --command)")
    if args.threads is not None:
        torch.set_num_threads(args.threads)
    started = machine()

    torch.manual_seed(0)
    lengths = [len(s) for s in load_treebank(args.corpus, max_sentences=args.sentences)]
    data = synthetic(lengths, args.layers, args.heads, args.dim)
    data.groups = [list(range(i, min(i + 256, len(lengths)))) for i in range(0, len(lengths), 256)]  # cache shards
    data.batch_size = 32
    batches = prepared(data)
    making = making_seconds(batches)
    print(f"making every batch ({data.nbytes() / 2 ** 20:.0f} MiB of packed maps and vectors): {making:.3f} s")
    result = {
        "corpus": args.corpus, "sentences": len(lengths), "mean_words": round(float(np.mean(lengths)), 1),
        "maps": args.layers * args.heads, "dim": args.dim, "hidden_units": HIDDEN_UNITS, "threads": torch.get_num_threads(),
        "held_mib": round(data.nbytes() / 2 ** 20, 1), "seconds_batches": round(making, 3),
    }
    if not args.skip_formulations:
        result.update({
            "distances+words": compare("Distances + words", build_probe("distances+words", data),
                                       PlainDistanceProbe(data.dim), batches, making),
            "attn": compare("Attn", build_probe("attn", data), None, batches, making),
            "attn+words": compare("Attn + words", build_probe("attn+words", data),
                                  PlainAttentionProbe(2 * data.n_maps, data.dim, with_words=True), batches, making),
        })
    device = torch.device(args.device)
    if not args.skip_naive:
        start = time.perf_counter()
        held = batches_on(data, None, device)  # on a device, the packed maps moved there once, for every training
        synchronize(device)
        result["device"] = {"name": str(device) if device.type != "cuda" else torch.cuda.get_device_name(device),
                            "seconds_batches_on_device": round(time.perf_counter() - start, 3)}
        for kind, name in (("attn", "Attn"), ("attn+words", "Attn + words"), ("distances+words", "Distances + words")):
            torch.manual_seed(0)
            result["device"][kind] = against_naive(name, build_probe(kind, data), held, device)
    if args.command:
        result["peak_rss_mib"] = round(peak_rss_mib(), 1)  # this process's, before the commands run
        with tempfile.TemporaryDirectory() as tmp:
            result["command"] = command_runs(Path(tmp), data_dir=args.data_dir, threads=args.threads or 1,
                                             sentences=args.command_sentences, baseline=args.baseline_tree)
    record = ("probes" if device.type == "cpu" else f"probes_{device.type}") if args.record else None
    save(result, args.out, record=record, model=f"{args.layers}x{args.heads}", started=started)


if __name__ == "__main__":
    main()
