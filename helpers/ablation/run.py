"""The ablation chapter's runs (definitions: book/methods.md, §Removing heads): the per-segment losses of every
intervention of :mod:`helpers.ablation.effects` on GUM test sentences, cached, and their summary (effects with
intervals, importance, all-but-one, the pruning curve, the sink tests, the paper's heads among all heads).

The run is cut into independent tasks (:func:`tasks`): the base loss, each layer's single-head removals, each
layer's all-but-one, each sink test on every head at once, each layer's per-head sink tests, the matched control
(a random content token's value term removed) and the sink tests on each sink's heads, each layer's mean ablations,
every head removed. They run in this process or, with ``--workers``/``--address``, one Dask task each
(:func:`helpers.pipeline.engine.map_tasks`); the same tasks with the same batches either way, so the results are
identical (the control's positions and the heads' mean contexts are drawn and computed here and handed to the
tasks). Importance and the held-out pruning curves (each step's importance depends on the last) run in this
process, and so does the unigram loss (the loss's scale).

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
import torch

from helpers.ablation import stats
from helpers.ablation.effects import (
    CONTROL_DRAWS,
    PRUNE_FOLDS,
    PRUNE_SEEDS,
    base_losses,
    control_segments,
    every_head_sink_losses,
    head_set_sink_losses,
    held_out_prune_curves,
    importance,
    intervention_losses,
    layer_losses,
    mean_contexts,
    normalise_layers,
    only_masks,
    single_head_masks,
    sink_masks,
)
from helpers.ablation.loss import IGNORE, Segments, prepare
from helpers.context import RunContext
from helpers.core.encoding import MAX_LENGTH
from helpers.core.labels import head_label
from helpers.core.models import LoadedModel
from helpers.data.cache import cached_json
from helpers.digest import code_digest

TREEBANK = "gum:test"      # the sentences the heads are removed on (the paper's heads are chosen on dev)
MIN_WORDS = 5              # shorter sentences (headings, list items) are left out: too few tokens to predict
PARTS: tuple[str, ...] = ("single", "importance", "only", "prune", "sinks", "sink_heads", "mean")
PART_NAMES = {"single": "single-head effects", "importance": "importance", "only": "all but one",
              "prune": "pruning curve", "sinks": "sink tests on every head at once and on the sink's heads",
              "sink_heads": "sink tests per head", "mean": "mean ablation of single heads"}
SINK_TESTS = ("noop", "redirect")
CONTROL = "control"        # the no-op test's matched control: a random content token's value term removed
SINK_NAMES = {"sep": "[SEP]", "cls": "[CLS]", "bos": "BOS"}
UNIGRAM_TREEBANK = "gum:dev"  # the token frequencies of the unigram loss (the loss's scale), from other sentences
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


def tasks(n_layers: int, n_heads: int, parts: Sequence[str], sink_kinds: Sequence[str], *,
          sink_sets: Sequence[str] = (), draws: int = 0) -> list[tuple]:
    """The run's independent tasks, in order: ``("base",)``, ``("single", layer)``, ``("only", layer)``,
    ``("sinks", kind, test)``, ``("sink_heads", kind, test, layer)`` (those of ``parts``); then, where asked,
    ``("control", draw)`` (the matched control on every head at once), ``("sink_set", kind, test)`` and
    ``("sink_set_control", kind, draw)`` (the tests on the heads of ``sink_sets``' kinds that put more than
    :data:`~helpers.surface.stats.SINK_SHARE` on that sink), ``("mean", layer)`` and ``("all_removed",)`` (every
    head removed: the loss's scale)."""
    out: list[tuple] = [("base",)]
    if "single" in parts:
        out += [("single", l) for l in range(n_layers)]
    if "only" in parts and n_heads > 1:
        out += [("only", l) for l in range(n_layers)]
    if "sinks" in parts:
        out += [("sinks", kind, test) for kind in sink_kinds for test in SINK_TESTS]
    if "sink_heads" in parts:
        out += [("sink_heads", kind, test, l) for kind in sink_kinds for test in SINK_TESTS for l in range(n_layers)]
    if "sinks" in parts:
        out += [("control", d) for d in range(draws)]
        out += [("sink_set", kind, test) for kind in sink_sets for test in SINK_TESTS]
        out += [("sink_set_control", kind, d) for kind in sink_sets for d in range(draws)]
    if "mean" in parts:
        out += [("mean", l) for l in range(n_layers)]
    out.append(("all_removed",))
    return out


def run_task(lm: LoadedModel, shared: dict, task: tuple) -> np.ndarray:
    """One task's losses, ``[K, segment]`` (float64): the base (``K = 1``), a layer's heads removed one at a time or
    kept alone (``K = heads``), a sink test on every head (``K = 1``) or on each of a layer's heads, the matched
    control or a sink test on a set of heads (``K = 1``), a layer's heads replaced by their mean one at a time
    (``K = heads``), every head removed (``K = 1``)."""
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
    if kind == "control":
        return every_head_sink_losses(lm, shared["control"], f"content{task[1]}", "noop")[None]
    if kind == "sink_set":
        return head_set_sink_losses(lm, shared["main"], task[1], task[2], shared["sink_sets"][task[1]])[None]
    if kind == "sink_set_control":
        return head_set_sink_losses(lm, shared["control"], f"content{task[2]}", "noop",
                                    shared["sink_sets"][task[1]])[None]
    if kind == "mean":
        return layer_losses(lm, shared["main"], single_head_masks(L, H), task[1], fill=shared["fill"])
    if kind == "all_removed":
        return intervention_losses(lm, shared["main"], torch.zeros(1, L, H)).numpy()
    raise ValueError(f"unknown ablation task {task!r}")


def run_ablation(lm: LoadedModel, ctx: RunContext, *, max_sentences: int | None, detail_sentences: int | None,
                 parts: Sequence[str] = PARTS, seed: int = 0, max_length: int = MAX_LENGTH, head=None,
                 sink_heads: dict[str, Any] | None = None, draws: int = CONTROL_DRAWS) -> dict:
    """Every part's per-segment losses (cached): ``{"model", "loss", "loss_head" (an encoder's head: where it comes
    from and, fitted, its held-out and unigram losses), "treebank", "segments", "detail_segments",
    "tokens", "parts", "base" [S], "single" [L][H][S], "importance" [S][L][H], "only" [L][H][S2], "prune",
    "sinks": {kind: {test: {"all": [S], "per_head": [L][H][S2]}}}, "control" (the matched control on every head at
    once: ``{"all": [draw][S]}``), "sink_sets" ({kind: {"heads" [L][H] bool, "noop" [S], "redirect" [S], "control"
    [draw][S]}}: the tests on ``sink_heads``' heads at once), "mean" [L][H][S] (mean ablation), "all_removed" [S],
    "unigram" [S] (the unigram loss of the same predictions, frequencies from :data:`UNIGRAM_TREEBANK`)}`` (a part
    not run: ``None``). ``head``: an encoder's masked-LM head, as :func:`ablation_segments` takes it.
    ``sink_heads``: ``{kind: [layer][head] bool}``, the heads that put more than
    :data:`~helpers.surface.stats.SINK_SHARE` of their attention on that sink (``None``: not known, no such tests);
    ``draws``: the matched control's random content tokens per segment."""
    parts = check_parts(parts)
    segments, key = ablation_segments(lm, ctx, max_sentences=max_sentences, seed=seed, max_length=max_length,
                                      head=head)
    n_detail = len(segments) if detail_sentences is None else min(detail_sentences, len(segments))
    sets = {k: np.asarray(v, dtype=bool).tolist() for k, v in (sink_heads or {}).items()
            if k in segments.sinks and np.asarray(v, dtype=bool).any()}
    settings = {"parts": list(parts), "detail": n_detail, "prune_seeds": list(PRUNE_SEEDS), "max_length": max_length,
                "sink_heads": sets, "draws": draws, "unigram": _unigram_key(ctx)}

    def compute() -> dict:
        return _compute(lm, ctx, segments, n_detail, parts, sets, draws, seed)

    out = cached_json("ablation", {**key, **settings, "code": code_digest(run_ablation)}, compute,
                      cache_root=ctx.cache_dir)
    # the JSON's order is the same computed or read back (a cached file's keys are sorted, a cached head's report
    # comes in any order): the sinks in the segments' order, the head's report sorted
    if out["sinks"] is not None:
        out = {**out, "sinks": {kind: {test: out["sinks"][kind][test] for test in SINK_TESTS}
                                for kind in segments.sinks}}
    if out.get("sink_sets"):
        out = {**out, "sink_sets": {kind: {k: out["sink_sets"][kind][k] for k in ("heads", *SINK_TESTS, CONTROL)}
                                    for kind in segments.sinks if kind in out["sink_sets"]}}
    head_report = None if head is None else {k: v for k, v in sorted(head[1].items()) if k != "cached"}
    return {"model": lm.label, "loss": segments.kind, "loss_head": head_report, "treebank": TREEBANK,
            "segments": len(segments),
            "detail_segments": n_detail, "tokens": int(sum(len(e) for e in segments.examples)),
            "n_layers": lm.n_layers, "n_heads": lm.n_heads, "parts": list(parts), "draws": draws, **out}


def _unigram_key(ctx: RunContext) -> str | None:
    """The digest of :data:`UNIGRAM_TREEBANK`'s files (``None`` where the corpus cannot be found)."""
    from helpers.data.corpora import corpus_files, file_digest

    try:
        return file_digest(corpus_files(UNIGRAM_TREEBANK, data_dir=ctx.data_dir))
    except (OSError, ValueError):
        return None


def unigram_losses(lm: LoadedModel, ctx: RunContext, segments: Segments) -> list[float] | None:
    """``[segment]``: the loss of predicting each segment's targets (the same positions and tokens as the model's
    loss) from token frequencies alone: add-one smoothed counts of the tokens of :data:`UNIGRAM_TREEBANK`'s
    sentences, encoded as the chapter encodes its own, over the tokenizer's vocabulary. What a model that ignores
    its input scores: the scale beside the loss's changes. ``None`` where that corpus cannot be read."""
    from helpers.core.encoding import encode_words
    from helpers.data.corpora import load_treebank

    try:
        sentences = load_treebank(UNIGRAM_TREEBANK, data_dir=ctx.data_dir, cache_root=ctx.cache_dir)
    except (OSError, ValueError):
        return None
    batch = encode_words(lm.tokenizer, [s.words for s in sentences], max_length=lm.max_positions,
                         model_max=lm.max_positions)
    ids = [e.input_ids for e in batch.examples]
    size = max(len(lm.tokenizer), 1 + max((int(np.max(i)) for i in ids if len(i)), default=0),
               1 + max(int(np.max(lab)) for lab in segments.labels))
    counts = np.bincount(np.concatenate(ids) if ids else np.zeros(0, np.int64), minlength=size).astype(np.float64)
    log_p = np.log((counts + 1.0) / (counts.sum() + size))
    out = []
    for lab in segments.labels:
        targets = np.asarray(lab)[np.asarray(lab) != IGNORE]
        out.append(float(-log_p[targets].mean()) if targets.size else 0.0)  # as the model's loss: 0 with no target
    return out


def _compute(lm: LoadedModel, ctx: RunContext, segments: Segments, n_detail: int, parts: tuple[str, ...],
             sets: dict[str, list], draws: int, seed: int) -> dict:
    from helpers.pipeline.engine import map_tasks

    L, H = lm.n_layers, lm.n_heads
    sink_kinds = tuple(segments.sinks)
    todo = tasks(L, H, parts, sink_kinds, sink_sets=tuple(sets), draws=draws)
    shared = {"main": segments, "detail": subset(segments, n_detail),
              "sink_sets": {k: np.asarray(v, dtype=bool) for k, v in sets.items()}}
    if "sinks" in parts and draws:
        shared["control"] = control_segments(lm, segments, draws, seed=seed)
    if "mean" in parts:
        shared["fill"] = mean_contexts(lm, segments)
    results = dict(zip(todo, map_tasks(lm, execution=ctx.execution, task=run_task, shared=shared, payloads=todo,
                                       desc="ablation", progress=ctx.progress)))
    base = results[("base",)][0]
    out: dict[str, Any] = {"base": base.tolist(), "single": None, "importance": None, "only": None, "prune": None,
                           "sinks": None, "control": None, "sink_sets": None, "mean": None,
                           "all_removed": results[("all_removed",)][0].tolist(),
                           "unigram": unigram_losses(lm, ctx, segments)}

    def by_layer(*task) -> np.ndarray:  # [layer, head, segment]: the tasks of each layer, in order
        return np.concatenate([results[(*task, l)] for l in range(L)]).reshape(L, H, -1)

    single = None
    if "single" in parts:
        single = by_layer("single")
        out["single"] = single.tolist()
    if "mean" in parts:
        out["mean"] = by_layer("mean").tolist()
    if "only" in parts and H > 1:
        out["only"] = by_layer("only").tolist()
    if "importance" in parts:
        grads, _ = importance(lm, segments)
        out["importance"] = grads.tolist()
    if "prune" in parts and len(segments) >= PRUNE_FOLDS:
        curves = held_out_prune_curves(lm, segments, single=None if single is None else single - base)
        out["prune"] = {k: v.tolist() if isinstance(v, np.ndarray) else v for k, v in curves.items()}
    if "sinks" in parts or "sink_heads" in parts:
        out["sinks"] = {
            kind: {test: {"all": results[("sinks", kind, test)][0].tolist() if "sinks" in parts else None,
                          "per_head": by_layer("sink_heads", kind, test).tolist() if "sink_heads" in parts else None}
                   for test in SINK_TESTS}
            for kind in sink_kinds}
    if "sinks" in parts and draws:
        out["control"] = {"all": [results[("control", d)][0].tolist() for d in range(draws)]}
        out["sink_sets"] = {kind: {"heads": heads, **{test: results[("sink_set", kind, test)][0].tolist()
                                                      for test in SINK_TESTS},
                                   CONTROL: [results[("sink_set_control", kind, d)][0].tolist() for d in range(draws)]}
                            for kind, heads in sets.items()}
    return out


# ------------------------------------------------------------------------------------ the paper's heads


def paper_heads(surface=None, syntax=None, coref=None) -> dict[str, list[tuple[int, int]]]:
    """The heads the paper's probes single out, 0-based ``(layer, head)`` per kind, found by those sections' own runs
    (their reports) on their own data: ``"syntax"`` (§4.2: the best head of each of Table 1's relations, chosen on GUM
    dev: the report's ``best_heads()``), ``"coref"`` (§4.3: the best antecedent-selection head, chosen on OntoGUM dev),
    ``"positional"`` (§3.1: over half their attention on the previous or next token), ``"broad"`` (§3.3: mean entropy
    above the paper's share of the uniform entropy, :data:`helpers.surface.stats.BROAD_ENTROPY_FRACTION`) and
    ``"specialised"`` (those of ``"syntax"`` that beat the offset baseline by the syntax chapter's margin: the
    report's ``specialised_heads()``, the heads the chapter's claim is judged on). A report not given leaves its
    kinds out."""
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
    if syntax is not None:  # §4.2's best heads that beat the offset baseline by the syntax chapter's margin
        out["specialised"] = stats.distinct(parse_head_label(h) for h in syntax.specialised_heads())
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
              n_perm: int = stats.PERMUTATIONS, seed: int = 0, shares: dict | None = None) -> dict:
    """The chapter's numbers from :func:`run_ablation`'s losses and :func:`paper_heads`: ``base_loss``, ``delta`` and
    ``delta_interval`` ``[L][H]`` (and ``delta_relative``), ``importance`` and ``importance_normalised``, ``only``,
    ``only_layer_min``, ``prune`` (shares, importance-order losses, random mean and range), ``sinks`` (per sink and
    test: every head at once, mean change and interval; per head ``[L][H]``), ``spearman`` (importance against
    removal) and ``paper_heads`` (per kind: heads, percentiles, permutation p-values); then ``detail_base_loss`` (the
    full model's mean loss on the detail segments, what their changes are relative to), ``delta_significant``
    (Michel et al.'s count: the heads whose interval excludes 0), ``delta_mean`` (mean ablation),
    ``loss_scale`` (the unigram loss and every head removed, on the same segments), ``sinks_control`` (the matched
    control on every head at once), ``sink_sets`` (the tests on each sink's heads, with the control and Spearman's
    rho of a head's share against its own no-op effect) and ``sink_premise`` (each sink's largest layer share, whether
    it is a sink, and the model's measured sink), from ``shares`` (:func:`sink_shares`; ``None``: not read). A part
    not run: ``None``. Every relative change is over the full model's loss on the same segments."""
    from helpers.core import bootstrap

    base = np.asarray(raw["base"])
    mean_base = float(base.mean())
    n_detail = int(raw.get("detail_segments") or len(base))
    out: dict[str, Any] = {"base_loss": mean_base, "delta": None, "delta_interval": None, "delta_relative": None,
                           "importance": None, "importance_normalised": None, "only": None, "only_layer_min": None,
                           "prune": None, "sinks": None, "spearman": None, "paper_heads": None,
                           "detail_base_loss": float(base[:n_detail].mean()), "delta_significant": None,
                           "delta_mean": None, "delta_mean_interval": None, "delta_mean_relative": None,
                           "loss_scale": None, "sinks_control": None, "sink_sets": None, "sink_premise": None}
    c = bootstrap.counts(len(base), n_boot=n_boot, seed=seed)

    def relative(change: np.ndarray, on: np.ndarray = base) -> dict:
        """A per-segment change's mean, and over the same segments' base loss, with their intervals."""
        cc = c if len(on) == len(base) else bootstrap.counts(len(on), n_boot=n_boot, seed=seed)
        return {"change": float(change.mean()),
                "interval": list(bootstrap.percentile_interval(bootstrap.mean_replicates(change, cc))),
                "relative": float(change.sum() / on.sum()),
                "relative_interval": list(bootstrap.percentile_interval(bootstrap.ratio_replicates(change, on, cc)))}

    diff = imp = None
    if raw.get("single") is not None:
        diff = np.asarray(raw["single"]) - base                              # [L, H, S]
        delta = diff.mean(-1)
        out["delta"] = delta.tolist()
        interval = stats.bootstrap_mean_interval(diff, n_boot=n_boot, seed=seed)
        out["delta_interval"] = interval.tolist()
        out["delta_relative"] = (delta / mean_base).tolist()
        out["delta_significant"] = {"raise": int((interval[..., 0] > 0).sum()),
                                    "lower": int((interval[..., 1] < 0).sum()), "heads": int(delta.size)}
    if raw.get("mean") is not None:
        mean_diff = np.asarray(raw["mean"]) - base
        out["delta_mean"] = mean_diff.mean(-1).tolist()
        out["delta_mean_interval"] = stats.bootstrap_mean_interval(mean_diff, n_boot=n_boot, seed=seed).tolist()
        out["delta_mean_relative"] = (mean_diff.mean(-1) / mean_base).tolist()
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
        random = np.asarray(p["random"])                                     # [seed, step, S]
        means = random.mean(-1)                                              # [seed, step]
        curve = np.asarray(p["held_out"]).mean(-1)
        out["prune"] = {"shares": p["shares"], "removed": p["removed"], "importance": curve.tolist(),
                        "order": [head_label(*divmod(k, raw["n_heads"])) for k in p["orders"][0]],
                        "random_mean": means.mean(0).tolist(), "random_min": means.min(0).tolist(),
                        "random_max": means.max(0).tolist(), "seeds": p["seeds"],
                        "in_sample": np.asarray(p["in_sample"]).mean(-1).tolist(),
                        "by_delta": None if p["by_delta"] is None else np.asarray(p["by_delta"]).mean(-1).tolist(),
                        "orders": [[head_label(*divmod(k, raw["n_heads"])) for k in o] for o in p["orders"]],
                        "folds": p["folds"]}
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
    if raw.get("control") is not None:
        out["sinks_control"] = relative((np.asarray(raw["control"]["all"]) - base).mean(0))
    if diff is not None and imp is not None:
        rho, interval = stats.spearman_interval(imp, diff, n_boot=n_boot, seed=seed)
        out["spearman"] = {"rho": rho, "interval": list(interval)}
    if heads:
        out["paper_heads"] = paper_heads_summary(heads, None if diff is None else diff.mean(-1),
                                                 None if imp is None else imp.mean(-1), n_perm=n_perm, seed=seed,
                                                 diff=diff, n_boot=n_boot)
    scale = {"base": mean_base, "unigram": None, "every_head_removed": None}
    if raw.get("unigram") is not None:
        scale["unigram"] = float(np.mean(raw["unigram"]))
    if raw.get("all_removed") is not None:
        scale["every_head_removed"] = float(np.mean(raw["all_removed"]))
    out["loss_scale"] = scale
    if shares:
        out["sink_premise"] = sink_premises(shares)
    if raw.get("sink_sets"):
        out["sink_sets"] = {}
        for kind, tests in raw["sink_sets"].items():
            chosen = np.asarray(tests["heads"], dtype=bool)
            entry = {"heads": [head_label(l, h) for l, h in zip(*np.nonzero(chosen))]}
            noop = np.asarray(tests["noop"]) - base
            control = (np.asarray(tests[CONTROL]) - base).mean(0)            # the mean over the draws, per segment
            for test in SINK_TESTS:
                entry[test] = relative(np.asarray(tests[test]) - base)
            entry[CONTROL] = relative(control)
            entry["control_minus_noop"] = relative(control - noop)
            entry["spearman"] = None
            per_head = ((raw.get("sinks") or {}).get(kind) or {}).get("noop", {}).get("per_head")
            if per_head is not None and shares and kind in shares:
                change = np.asarray(per_head) - base[: np.shape(per_head)[-1]]   # [L, H, S2]
                share = np.asarray(shares[kind], dtype=np.float64)
                x = np.repeat(share[chosen][:, None], change.shape[-1], axis=1)
                rho, interval = stats.spearman_interval(x, change[chosen], n_boot=n_boot, seed=seed)
                entry["spearman"] = {"rho": rho, "interval": list(interval), "heads": int(chosen.sum()),
                                     "segments": int(change.shape[-1])}
            out["sink_sets"][kind] = entry
    return out


def sink_premises(shares: dict) -> dict:
    """``{"measured": kind, kind: {"layer_max", "reason"}}`` from each head's share on each sink (:func:`sink_shares`):
    each sink's largest layer-mean share, the reason a claim about it as a sink is not applicable (``None`` where it
    is a sink: :func:`helpers.surface.stats.sink_premise`), and the model's measured sink
    (:func:`helpers.surface.stats.measured_sink`)."""
    from helpers.surface.stats import measured_sink, sink_premise

    layers = {k: np.asarray(v, dtype=np.float64).mean(1) for k, v in shares.items()}
    out: dict[str, Any] = {"measured": measured_sink(layers, tuple(layers))}
    for kind, values in layers.items():
        reason = sink_premise(layers, kind)
        if reason is not None:  # the token's name as this chapter says it (a decoder's first position: BOS)
            reason = f"{SINK_NAMES.get(kind, kind)} {reason.split(' ', 1)[1]}"
        out[kind] = {"layer_max": float(np.nanmax(values)), "reason": reason}
    return out


def paper_heads_summary(heads: dict[str, list[tuple[int, int]]], delta: np.ndarray | None,
                        importance_: np.ndarray | None, *, n_perm: int = stats.PERMUTATIONS, seed: int = 0,
                        diff: np.ndarray | None = None, n_boot: int = stats.BOOTSTRAP) -> dict:
    """Per kind (and ``"all"``, their union): ``heads`` (labels), the ``delta`` and ``importance`` percentiles of each
    head among all heads, their mean, and the permutation p-values of the set's mean against random sets of the
    same size; then, for the single-head effect, the test against random sets drawn from the same layers:
    ``delta_expected_percentile`` (such a set's expected mean percentile), ``delta_gain`` (the set's mean percentile
    minus it), ``delta_gain_interval`` (resampling segments: ``diff`` ``[layer, head, segment]``, each head's
    per-segment loss change; both ends recomputed from each replicate's percentiles) and ``delta_p_layers``
    (:func:`~helpers.ablation.stats.layer_matched_p` of the mean percentile)."""
    from helpers.core import bootstrap

    kinds = dict(heads)
    union = stats.distinct(h for hs in heads.values() for h in hs)
    if union:
        kinds["all"] = union
    replicates = None
    if diff is not None:
        c = bootstrap.counts(diff.shape[-1], n_boot=n_boot, seed=seed)
        replicates = stats.percentiles_replicates(bootstrap.mean_replicates(np.moveaxis(diff, -1, 0), c))  # [B, L, H]
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
        entry.update(dict.fromkeys(("delta_expected_percentile", "delta_gain", "delta_gain_interval",
                                    "delta_p_layers")))
        if delta is not None and hs:
            pct = stats.percentiles(delta)
            expected = stats.layer_expected_mean(pct, hs)
            entry["delta_expected_percentile"] = expected
            entry["delta_gain"] = entry["delta_mean_percentile"] - expected
            entry["delta_p_layers"] = stats.layer_matched_p(pct, hs, n_perm=n_perm, seed=seed)
            if replicates is not None:
                rows = np.array([[r[l, h] for l, h in hs] for r in replicates]).mean(1)
                layer_means = replicates.mean(2)                               # [n_boot, L]
                expect = np.array([[m[l] for l, _ in hs] for m in layer_means]).mean(1)
                entry["delta_gain_interval"] = list(bootstrap.percentile_interval(rows - expect))
        out[kind] = entry
    return out
