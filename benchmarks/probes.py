"""Benchmark: training steps of the probes (paper §5) against plain-autograd formulations.

    python benchmarks/probes.py [--sentences 2000] [--corpus gum:train] [--layers 6 --heads 12 --dim 384]

Times one epoch (forward, backward, Adam step over length-bucketed batches of 32 sentences) of

- Distances + words: the fused hidden layer (:class:`helpers.probe.probes.PairTanhScores`) against the
  same network written with plain autograd (``out(tanh(dep + cand + dist))``);
- Attn + words: one batched product over the features (transposed halves) against a batched
  product plus an ``einsum`` for the candidate term;

and an epoch of forward passes alone (the floor for the library's step). The sentences have the
lengths of the corpus; the maps are random (time does not depend on the values), so no model runs.
Both formulations start from the same weights and must give the same loss (checked). Writes
benchmarks/results/probes.json.
"""
from __future__ import annotations

import argparse
import copy
import time

import numpy as np
import torch
from torch import nn

from common import RESULTS, save
from helpers.data.corpora import load_treebank
from helpers.probe.probes import (
    AttentionProbe,
    DistanceProbe,
    ProbeData,
    build_probe,
    distance_features,
    distance_parts,
    prepared,
)


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
        gold.append(rng.integers(0, n + 1, size=n))
        punct.append(np.zeros(n, bool))
        vectors.append(rng.normal(size=(n, dim)).astype(np.float32))
    return ProbeData(maps, gold, punct, vectors)


def epoch(model: nn.Module, batches, *, train: bool = True) -> tuple[float, float]:
    """(seconds, summed loss) of one pass over ``batches``."""
    optim = torch.optim.Adam(model.parameters(), lr=1e-3)
    total = 0.0
    start = time.perf_counter()
    for batch in batches:
        with torch.set_grad_enabled(train):
            logits = model(batch)
            loss = nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), batch.heads.reshape(-1),
                                               ignore_index=-100, reduction="sum") / len(batch.indices)
        if train:
            optim.zero_grad()
            loss.backward()
            optim.step()
        total += float(loss.detach())
    return time.perf_counter() - start, total


def compare(name: str, fast: nn.Module, plain: nn.Module, batches, repeats: int = 2) -> dict:
    plain.load_state_dict(fast.state_dict())  # the same weights, the plain forward
    epoch(copy.deepcopy(fast), batches[:5])  # warm-up (allocator, thread pool)
    # best of `repeats` fresh epochs each, from the same weights
    fast_runs = [epoch(copy.deepcopy(fast), batches) for _ in range(repeats)]
    plain_runs = [epoch(copy.deepcopy(plain), batches) for _ in range(repeats)]
    (t_fast, loss_fast), (t_plain, loss_plain) = min(fast_runs), min(plain_runs)
    t_forward = min(epoch(fast, batches, train=False)[0] for _ in range(repeats))
    if not np.isclose(loss_fast, loss_plain, rtol=1e-4):
        raise AssertionError(f"{name}: losses differ ({loss_fast} vs {loss_plain})")
    row = {"seconds_epoch": round(t_fast, 3), "seconds_epoch_plain_autograd": round(t_plain, 3),
           "seconds_forward_only": round(t_forward, 3), "speedup_over_plain": round(t_plain / t_fast, 2),
           "ratio_training_over_forward": round(t_fast / t_forward, 2)}
    print(f"{name}: epoch {t_fast:.2f} s, plain autograd {t_plain:.2f} s ({row['speedup_over_plain']}x), "
          f"forward only {t_forward:.2f} s")
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--corpus", default="gum:train", help="sentence lengths come from this corpus")
    parser.add_argument("--sentences", type=int, default=2000)
    parser.add_argument("--layers", type=int, default=6)
    parser.add_argument("--heads", type=int, default=12)
    parser.add_argument("--dim", type=int, default=384, help="word-vector size")
    parser.add_argument("--out", default=str(RESULTS / "probes.json"))
    args = parser.parse_args()

    torch.manual_seed(0)
    lengths = [len(s) for s in load_treebank(args.corpus, max_sentences=args.sentences)]
    data = synthetic(lengths, args.layers, args.heads, args.dim)
    batches = prepared(data, 32)
    data.maps = []
    result = {
        "corpus": args.corpus, "sentences": len(lengths), "mean_words": round(float(np.mean(lengths)), 1),
        "maps": args.layers * args.heads, "dim": args.dim, "threads": torch.get_num_threads(),
        "distances+words": compare("Distances + words", build_probe("distances+words", data),
                                   PlainDistanceProbe(data.dim), batches),
        "attn+words": compare("Attn + words", build_probe("attn+words", data),
                              PlainAttentionProbe(2 * data.n_maps, data.dim, with_words=True), batches),
    }
    save(result, args.out)


if __name__ == "__main__":
    main()
