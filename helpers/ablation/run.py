"""The ablation chapter's runs (definitions: book/methods.md, §Removing heads): the per-segment losses of every
intervention of :mod:`helpers.ablation.effects` on GUM test sentences, cached, and their summary (effects with
intervals, importance, all-but-one, the pruning curve, the sink tests, the paper's heads among all heads).

The run is cut into independent tasks (:func:`tasks`): the base loss, each layer's single-head removals, each
layer's all-but-one, each sink test on every head at once, each layer's per-head sink tests. They run in this process
or, with ``--workers``/``--address``, one Dask task each (:func:`helpers.pipeline.engine.map_tasks`); the same tasks
with the same batches either way, so the results are identical. Importance and the pruning curve (each step's
importance depends on the last) run in this process.

Sizes: ``max_sentences`` sentences (GUM test, those of at least :data:`MIN_WORDS` words, in corpus order) for the
single-head effects, importance, the pruning curve and the all-heads sink tests; the first ``detail_sentences`` of
them for all-but-one and the per-head sink tests. ``parts`` says which analyses run (a decoder on the CPU runs a
subset).

>>> raw = run_ablation(lm, ctx, max_sentences=32, detail_sentences=8)                 # doctest: +SKIP
>>> summary = summarise(raw, paper_heads={})                                           # doctest: +SKIP
"""
from __future__ import annotations

from dataclasses import replace
from typing import Any, Sequence

import numpy as np

from helpers.ablation import stats
from helpers.ablation.effects import (
    PRUNE_SEEDS,
    base_losses,
    every_head_sink_losses,
    importance,
    layer_losses,
    normalise_layers,
    only_masks,
    prune_curve,
    single_head_masks,
    sink_masks,
)
from helpers.ablation.loss import Segments, prepare
from helpers.context import RunContext
from helpers.core.encoding import MAX_LENGTH
from helpers.core.labels import head_label
from helpers.core.models import LoadedModel
from helpers.data.cache import cached_json
from helpers.digest import code_digest

TREEBANK = "gum:test"      # the sentences the heads are removed on (the paper's heads are chosen on dev)
MIN_WORDS = 5              # shorter sentences (headings, list items) are left out: too few tokens to predict
PARTS: tuple[str, ...] = ("single", "importance", "only", "prune", "sinks", "sink_heads")
PART_NAMES = {"single": "single-head effects", "importance": "importance", "only": "all but one",
              "prune": "pruning curve", "sinks": "sink tests on every head at once",
              "sink_heads": "sink tests per head"}
SINK_TESTS = ("noop", "redirect")
FITTED_HEAD = "the frozen head fitted for the gradient analysis, §3.2: the model has no masked-LM head"


def check_parts(parts: Sequence[str]) -> tuple[str, ...]:
    """``parts`` checked against :data:`PARTS` (a ``ValueError`` naming the choices otherwise)."""
    unknown = [p for p in parts if p not in PARTS]
    if unknown or not parts:
        raise ValueError(f"--parts {','.join(parts) or '(none)'}: choose from {', '.join(PARTS)}")
    return tuple(p for p in PARTS if p in parts)


def select_sentences(sentences, max_sentences: int | None) -> list:
    """The sentences the chapter removes heads on: those of at least :data:`MIN_WORDS` words, in corpus order, the
    first ``max_sentences`` (``None``: all)."""
    chosen = [s for s in sentences if len(s.words) >= MIN_WORDS]
    return chosen if max_sentences is None else chosen[:max_sentences]


def ablation_segments(lm: LoadedModel, ctx: RunContext, *, max_sentences: int | None, seed: int = 0,
                      max_length: int = MAX_LENGTH, head=None) -> tuple[Segments, dict]:
    """``(segments, key)``: the chapter's sentences of :data:`TREEBANK`, encoded and prepared for the loss, and the
    cache key of that data. An encoder needs ``head``: ``(module, report)``, the surface section report's ``mlm_head``
    (its own masked-LM head, else the gradient analysis's fitted one)."""
    from helpers.core.encoding import encode_words
    from helpers.data.corpora import corpus_files, file_digest, load_treebank

    sentences = select_sentences(load_treebank(TREEBANK, data_dir=ctx.data_dir, cache_root=ctx.cache_dir),
                                 max_sentences)
    if not sentences:
        raise ValueError(f"{TREEBANK}: no sentence of at least {MIN_WORDS} words to remove heads on")
    batch = encode_words(lm.tokenizer, [s.words for s in sentences], max_length=max_length, model_max=lm.max_positions)
    if not batch.examples:
        raise ValueError(f"{TREEBANK}: every chosen sentence is longer than --max-length {max_length} tokens")
    module, source, head_key = None, None, None
    if not lm.causal:
        if head is None:
            raise ValueError(f"{lm.label}: an encoder's loss needs its masked-LM head (the surface report's mlm_head)")
        module, report = head
        source = report["source"] if "own" in report.get("source", "") else FITTED_HEAD
        head_key = {k: v for k, v in report.items() if k != "cached"}
    segments = prepare(lm, batch, head=module, seed=seed, head_source=source)
    key = {"model": lm.fingerprint(), "data": file_digest(corpus_files(TREEBANK, data_dir=ctx.data_dir)),
           "batch": batch.digest(), "head": head_key, "seed": seed}
    return segments, key


def subset(segments: Segments, n: int) -> Segments:
    """The first ``n`` segments."""
    return replace(segments, examples=segments.examples[:n], labels=segments.labels[:n],
                   sinks={k: v[:n] for k, v in segments.sinks.items()}, tokens=segments.tokens[:n])


def tasks(n_layers: int, n_heads: int, parts: Sequence[str], sink_kinds: Sequence[str]) -> list[tuple]:
    """The run's independent tasks, in order: ``("base",)``, ``("single", layer)``, ``("only", layer)``,
    ``("sinks", kind, test)``, ``("sink_heads", kind, test, layer)`` (those of ``parts``)."""
    out: list[tuple] = [("base",)]
    if "single" in parts:
        out += [("single", l) for l in range(n_layers)]
    if "only" in parts and n_heads > 1:
        out += [("only", l) for l in range(n_layers)]
    if "sinks" in parts:
        out += [("sinks", kind, test) for kind in sink_kinds for test in SINK_TESTS]
    if "sink_heads" in parts:
        out += [("sink_heads", kind, test, l) for kind in sink_kinds for test in SINK_TESTS for l in range(n_layers)]
    return out


def run_task(lm: LoadedModel, shared: dict[str, Segments], task: tuple) -> np.ndarray:
    """One task's losses, ``[K, segment]`` (float64): the base (``K = 1``), a layer's heads removed one at a time or
    kept alone (``K = heads``), a sink test on every head (``K = 1``) or on each of a layer's heads."""
    L, H = lm.n_layers, lm.n_heads
    kind = task[0]
    if kind == "base":
        return base_losses(lm, shared["main"])[None]
    if kind == "single":
        return layer_losses(lm, shared["main"], single_head_masks(L, H), task[1])
    if kind == "only":
        return layer_losses(lm, shared["detail"], only_masks(L, H), task[1])
    if kind == "sinks":
        return every_head_sink_losses(lm, shared["main"], task[1], task[2])[None]
    if kind == "sink_heads":
        return layer_losses(lm, shared["detail"], sink_masks(L, H), task[3], sink=task[1], mode=task[2])
    raise ValueError(f"unknown ablation task {task!r}")


def run_ablation(lm: LoadedModel, ctx: RunContext, *, max_sentences: int | None, detail_sentences: int | None,
                 parts: Sequence[str] = PARTS, seed: int = 0, max_length: int = MAX_LENGTH,
                 prune_seeds: Sequence[int] = PRUNE_SEEDS, head=None) -> dict:
    """Every part's per-segment losses (cached): ``{"model", "loss", "loss_head" (an encoder's head: where it comes
    from and, fitted, its held-out and unigram losses), "treebank", "segments", "detail_segments",
    "tokens", "parts", "base" [S], "single" [L][H][S], "importance" [S][L][H], "only" [L][H][S2], "prune",
    "sinks": {kind: {test: {"all": [S], "per_head": [L][H][S2]}}}}`` (a part not run: ``None``). ``head``: an
    encoder's masked-LM head, as :func:`ablation_segments` takes it."""
    parts = check_parts(parts)
    segments, key = ablation_segments(lm, ctx, max_sentences=max_sentences, seed=seed, max_length=max_length,
                                      head=head)
    n_detail = len(segments) if detail_sentences is None else min(detail_sentences, len(segments))
    settings = {"parts": list(parts), "detail": n_detail, "prune_seeds": list(prune_seeds), "max_length": max_length}

    def compute() -> dict:
        return _compute(lm, ctx, segments, n_detail, parts, tuple(prune_seeds))

    out = cached_json("ablation", {**key, **settings, "code": code_digest(run_ablation)}, compute,
                      cache_root=ctx.cache_dir)
    # the JSON's order is the same computed or read back (a cached file's keys are sorted, a cached head's report
    # comes in any order): the sinks in the segments' order, the head's report sorted
    if out["sinks"] is not None:
        out = {**out, "sinks": {kind: {test: out["sinks"][kind][test] for test in SINK_TESTS}
                                for kind in segments.sinks}}
    head_report = None if head is None else {k: v for k, v in sorted(head[1].items()) if k != "cached"}
    return {"model": lm.label, "loss": segments.kind, "loss_head": head_report, "treebank": TREEBANK,
            "segments": len(segments),
            "detail_segments": n_detail, "tokens": int(sum(len(e) for e in segments.examples)),
            "n_layers": lm.n_layers, "n_heads": lm.n_heads, "parts": list(parts), **out}


def _compute(lm: LoadedModel, ctx: RunContext, segments: Segments, n_detail: int, parts: tuple[str, ...],
             prune_seeds: tuple[int, ...]) -> dict:
    from helpers.pipeline.engine import map_tasks

    L, H = lm.n_layers, lm.n_heads
    sink_kinds = tuple(segments.sinks)
    todo = tasks(L, H, parts, sink_kinds)
    shared = {"main": segments, "detail": subset(segments, n_detail)}
    results = dict(zip(todo, map_tasks(lm, execution=ctx.execution, task=run_task, shared=shared, payloads=todo,
                                       desc="ablation", progress=ctx.progress)))
    base = results[("base",)][0]
    out: dict[str, Any] = {"base": base.tolist(), "single": None, "importance": None, "only": None, "prune": None,
                           "sinks": None}
    if "single" in parts:
        out["single"] = np.concatenate([results[("single", l)] for l in range(L)]).reshape(L, H, -1).tolist()
    if "only" in parts and H > 1:
        out["only"] = np.concatenate([results[("only", l)] for l in range(L)]).reshape(L, H, -1).tolist()
    if "importance" in parts:
        grads, _ = importance(lm, segments)
        out["importance"] = grads.tolist()
    if "prune" in parts:
        out["prune"] = prune_curve(lm, segments, seeds=prune_seeds)
    if "sinks" in parts or "sink_heads" in parts:
        out["sinks"] = {
            kind: {test: {"all": results[("sinks", kind, test)][0].tolist() if "sinks" in parts else None,
                          "per_head": np.concatenate([results[("sink_heads", kind, test, l)] for l in range(L)])
                          .reshape(L, H, -1).tolist() if "sink_heads" in parts else None}
                   for test in SINK_TESTS}
            for kind in sink_kinds}
    return out


# ------------------------------------------------------------------------------------ the paper's heads


def paper_heads(surface=None, syntax=None, coref=None) -> dict[str, list[tuple[int, int]]]:
    """The heads the paper's probes single out, 0-based ``(layer, head)`` per kind, found by those sections' own runs
    (their reports) on their own data: ``"syntax"`` (§4.2: the best head of each of Table 1's relations, chosen on GUM
    dev: the report's ``best_heads()``), ``"coref"`` (§4.3: the best antecedent-selection head, chosen on OntoGUM dev),
    ``"positional"`` (§3.1: over half their attention on the previous or next token), ``"broad"`` (§3.3: mean entropy
    above the paper's share of the uniform entropy, :data:`helpers.surface.stats.BROAD_ENTROPY_FRACTION`). A report
    not given leaves its kinds out."""
    from helpers.core.labels import parse_head_label

    out: dict[str, list[tuple[int, int]]] = {}
    if syntax is not None:
        out["syntax"] = stats.distinct(parse_head_label(h) for h in syntax.best_heads().values())
    if coref is not None:
        out["coref"] = [tuple(int(x) for x in coref.dev.best_head())]
    if surface is not None:
        from helpers.surface.stats import BROAD_ENTROPY_FRACTION

        s = surface.stats
        positional = [parse_head_label(h) for k in ("prev", "next") if k not in s.undefined for h in s.heads_above(k)]
        out["positional"] = stats.distinct(positional)
        out["broad"] = stats.distinct(parse_head_label(h) for h in
                                      s.heads_above("entropy", BROAD_ENTROPY_FRACTION * s.uniform_entropy))
    return out


def sink_shares(surface) -> dict[str, list[list[float]]]:
    """Each head's mean share of attention on each sink ``[layer][head]``, the §3 statistics of the surface chapter
    (an encoder's ``"sep"`` and ``"cls"``; a decoder's first position ``"bos"``)."""
    s = surface.stats
    if s.causal:
        return {"bos": np.round(s.per_head["cls"], 6).tolist()}
    return {k: np.round(s.per_head[k], 6).tolist() for k in ("sep", "cls")}


# ------------------------------------------------------------------------------------ summary


def summarise(raw: dict, heads: dict[str, list[tuple[int, int]]], *, n_boot: int = stats.BOOTSTRAP,
              n_perm: int = stats.PERMUTATIONS, seed: int = 0) -> dict:
    """The chapter's numbers from :func:`run_ablation`'s losses and :func:`paper_heads`: ``base_loss``, ``delta`` and
    ``delta_interval`` ``[L][H]`` (and ``delta_relative``), ``importance`` and ``importance_normalised``, ``only``,
    ``only_layer_min``, ``prune`` (shares, importance-order losses, random mean and range), ``sinks`` (per sink and
    test: every head at once, mean change and interval; per head ``[L][H]``), ``spearman`` (importance against
    removal) and ``paper_heads`` (per kind: heads, percentiles, permutation p-values). A part not run: ``None``."""
    base = np.asarray(raw["base"])
    mean_base = float(base.mean())
    out: dict[str, Any] = {"base_loss": mean_base, "delta": None, "delta_interval": None, "delta_relative": None,
                           "importance": None, "importance_normalised": None, "only": None, "only_layer_min": None,
                           "prune": None, "sinks": None, "spearman": None, "paper_heads": None}
    diff = imp = None
    if raw.get("single") is not None:
        diff = np.asarray(raw["single"]) - base                              # [L, H, S]
        delta = diff.mean(-1)
        out["delta"] = delta.tolist()
        out["delta_interval"] = stats.bootstrap_mean_interval(diff, n_boot=n_boot, seed=seed).tolist()
        out["delta_relative"] = (delta / mean_base).tolist()
    if raw.get("importance") is not None:
        imp = np.moveaxis(np.asarray(raw["importance"]), 0, -1)              # [L, H, S]
        out["importance"] = imp.mean(-1).tolist()
        out["importance_normalised"] = normalise_layers(imp.mean(-1)).tolist()
    if raw.get("only") is not None:
        n = np.asarray(raw["only"]).shape[-1]
        only = (np.asarray(raw["only"]) - base[:n]).mean(-1)
        out["only"] = only.tolist()
        out["only_layer_min"] = only.min(1).tolist()
    if raw.get("prune") is not None:
        p = raw["prune"]
        random = np.asarray(p["random"])
        out["prune"] = {"shares": p["shares"], "removed": p["removed"], "importance": p["importance"],
                        "order": [head_label(*divmod(k, raw["n_heads"])) for k in p["order"]],
                        "random_mean": random.mean(0).tolist(), "random_min": random.min(0).tolist(),
                        "random_max": random.max(0).tolist(), "seeds": p["seeds"]}
    if raw.get("sinks") is not None:
        out["sinks"] = {}
        for kind, tests in raw["sinks"].items():
            out["sinks"][kind] = {}
            for test, losses in tests.items():
                entry: dict[str, Any] = {"all": None, "all_interval": None, "per_head": None}
                if losses["all"] is not None:
                    change = np.asarray(losses["all"]) - base
                    entry["all"] = float(change.mean())
                    entry["all_interval"] = stats.bootstrap_mean_interval(change, n_boot=n_boot, seed=seed).tolist()
                if losses["per_head"] is not None:
                    per = np.asarray(losses["per_head"])
                    entry["per_head"] = (per - base[: per.shape[-1]]).mean(-1).tolist()
                out["sinks"][kind][test] = entry
    if diff is not None and imp is not None:
        rho, interval = stats.spearman_interval(imp, diff, n_boot=n_boot, seed=seed)
        out["spearman"] = {"rho": rho, "interval": list(interval)}
    if heads:
        out["paper_heads"] = paper_heads_summary(heads, None if diff is None else diff.mean(-1),
                                                 None if imp is None else imp.mean(-1), n_perm=n_perm, seed=seed)
    return out


def paper_heads_summary(heads: dict[str, list[tuple[int, int]]], delta: np.ndarray | None,
                        importance_: np.ndarray | None, *, n_perm: int = stats.PERMUTATIONS, seed: int = 0) -> dict:
    """Per kind (and ``"all"``, their union): ``heads`` (labels), the ``delta`` and ``importance`` percentiles of each
    head among all heads, their mean, and the permutation p-values of the set's mean against random sets of the
    same size."""
    kinds = dict(heads)
    union = stats.distinct(h for hs in heads.values() for h in hs)
    if union:
        kinds["all"] = union
    out = {}
    for kind, hs in kinds.items():
        entry: dict[str, Any] = {"heads": [head_label(l, h) for l, h in hs]}
        for name, scores in (("delta", delta), ("importance", importance_)):
            if scores is None or not hs:
                entry[f"{name}_percentiles"], entry[f"{name}_mean_percentile"], entry[f"{name}_p"] = None, None, None
                continue
            pct = stats.percentiles(scores)
            entry[f"{name}_percentiles"] = [float(pct[l, h]) for l, h in hs]
            entry[f"{name}_mean_percentile"] = float(np.mean(entry[f"{name}_percentiles"]))
            entry[f"{name}_p"] = stats.permutation_p(scores, hs, n_perm=n_perm, seed=seed)
        out[kind] = entry
    return out
