"""Paper §4.2 end to end: treebank -> cached word-level maps -> every head scored -> Table 1 rows.

Shared by the chapter and ``python -m helpers heads`` (whose JSON layout is a contract, see
:func:`heads_json`).

>>> result = run_heads(lm, "gum:test")                                   # doctest: +SKIP
>>> result.scores.table()["det"]["best_head"]                            # doctest: +SKIP
'4-7'
"""
from __future__ import annotations

from dataclasses import dataclass, field
from functools import partial

import numpy as np

from helpers import paper
from helpers.context import RunContext, takes_context
from helpers.core.encoding import MAX_LENGTH, position_labels
from helpers.core.labels import head_label, parse_head_label
from helpers.core.models import LoadedModel
from helpers.data.cache import AttentionStore
from helpers.data.conllu_io import Sentence
from helpers.pipeline.extraction import encode_treebank, maps_store
from helpers.pipeline.route import reduce_maps
from helpers.syntax.stats import (
    ALL,
    BOOTSTRAP,
    DIRECTIONS,
    HeadScorers,
    HeadScores,
    bootstrap_interval,
    gain_interval,
    gain_replicates,
    predict_heads,
    word_layout,
)

SMALL_SENTENCES = 150   # sentences per treebank in the small (test) configuration; the book reads them all
DIRECTION_ARROWS = {DIRECTIONS[0]: "dep→head", DIRECTIONS[1]: "head→dep"}  # the directions in tables and figures
FIGURE5_PANELS = 4      # Figure 5: the relations whose best head beats the baseline by most


@dataclass
class HeadsRun:
    corpus: str
    sentences: list[Sentence]
    store: AttentionStore
    scores: HeadScores
    causal: bool = False  # the maps are a decoder's (a head sees its prefix)
    variants: dict = field(default_factory=dict)  # possessive convention -> the same maps' scores under it

    @property
    def used(self) -> int:
        return len(self.store.examples)

    @property
    def skipped(self) -> int:
        return len(self.store.skipped)


@takes_context
def run_heads(lm: LoadedModel, corpus: str, ctx: RunContext | None = None, *, max_sentences: int | None = None,
              max_length: int = MAX_LENGTH, word_mode: str = "mean", possessive: str | None = None,
              variants: tuple[str, ...] = ()) -> HeadsRun:
    """Score every head of ``lm`` against the trees of ``corpus`` on its word-level maps, on the one route
    (:func:`~helpers.pipeline.route.reduce_maps`: each batch scored where the maps are, read from the cache or made by
    the model's passes, here or on the workers of a distributed ``ctx.execution``). The maps are kept in the cache
    (``keep``): Figure 5's examples read them back (``HeadsRun.store``), as do later runs on the same corpus.
    ``variants``: more conventions for possessives (each a relation, see :class:`~helpers.syntax.stats.HeadScorer`)
    scored from the same predictions, in ``HeadsRun.variants``."""
    sentences, batch, digest = encode_treebank(lm, corpus, max_sentences=max_sentences, max_length=max_length,
                                               data_dir=ctx.data_dir, cache_root=ctx.cache_dir)
    scores = reduce_maps(lm, batch, partial(HeadScorers, (possessive, *variants), lm.causal), level="word", keep=True,
                         ctx=ctx, extras=lambda ex: (sentences[ex.index],), word_mode=word_mode,
                         source_digest=digest).result()
    store = maps_store(lm, batch, word_mode=word_mode, source_digest=digest, cache_root=ctx.cache_dir)
    return HeadsRun(corpus, sentences, store, scores[0], lm.causal, dict(zip(variants, scores[1:])))


def heads_json(model: str, run: HeadsRun) -> dict:
    """The ``heads`` command's JSON (layout fixed by the CLI contract)."""
    return {"model": model, "sentences_used": run.used, "sentences_skipped": run.skipped,
            "relations": run.scores.table()}


def table1_relations(scores: HeadScores, *, n_frequent: int = 10, n_extra: int = 5, min_count: int = 50) -> list[str]:
    """Table 1's rows: ``all``, the ``n_frequent`` most frequent relations (punct excluded, as in the
    original), then the ``n_extra`` others with at least ``min_count`` words where the best head beats
    the baseline by most."""
    table = scores.table()
    counts = {r: row["count"] for r, row in table.items() if r not in (ALL, "punct")}
    frequent = sorted(counts, key=lambda r: (-counts[r], r))[:n_frequent]
    gains = {r: table[r]["accuracy"] - table[r]["baseline_accuracy"] for r in counts
             if r not in frequent and counts[r] >= min_count}
    extra = sorted(gains, key=lambda r: (-gains[r], r))[:n_extra]
    return [ALL, *frequent, *extra]


def table1_rows(scores: HeadScores) -> list[dict]:
    """Table 1 as rows: for each relation of :func:`table1_relations`, our best head (1-based label,
    direction, accuracy, best offset baseline) beside the paper's row for the closest Stanford relation
    (:func:`helpers.paper.table1_row`; empty where there is none)."""
    table = scores.table()
    rows = []
    for rel in table1_relations(scores):
        ours, ref = table[rel], paper.table1_row(rel)
        sd, row = ref if ref else ("", None)
        rows.append({
            "relation": rel, "count": ours["count"], "head": ours["best_head"],
            "direction": DIRECTION_ARROWS[ours["direction"]], "accuracy": round(ours["accuracy"], 1),
            "baseline": f"{ours['baseline_accuracy']:.1f} ({ours['baseline_offset']:+d})",
            "paper relation": sd, "paper head": row.head if row else "",
            "paper accuracy": str(row.accuracy) if row else None,
            "paper baseline": f"{row.baseline} ({row.offset:+d})" if row else "",
        })
    return rows


def held_out_rows(dev: HeadScores, test: HeadScores, relations: list[str], *, n_boot: int = BOOTSTRAP,
                  seed: int = 0) -> list[dict]:
    """For each relation: the best head chosen on ``dev``, its accuracy on ``test`` with a bootstrap
    interval, and the in-sample best head on ``test`` (what the paper reports), also with an interval; the best
    fixed-offset baseline on ``test`` (``baseline_accuracy``, ``baseline_offset``, its interval ``baseline_ci``) and
    the chosen head's gain over it on the same words (``gain``, percentage points, with its paired interval
    ``gain_ci``: :func:`~helpers.syntax.stats.gain_interval`, the same draws of the ``sentences`` holding a word of
    the relation as ``held_out_ci``)."""
    dev_acc, test_acc = dev.accuracy(), test.accuracy()
    rows = []
    for relation in relations:
        if relation not in dev.relations or relation not in test.relations:
            continue
        chosen = dev.best(relation, dev_acc)
        in_sample = test.best(relation, test_acc)
        d, l, h = chosen["_index"]
        r = test.relations.index(relation)
        held = float(test_acc[d, l, h, r])
        correct, total = test.head_correct(relation, chosen["_index"])
        base, _ = test.offset_correct_by_sentence(relation, in_sample["baseline_offset"])
        words = int(total.sum())
        rows.append({
            "relation": relation, "count": test.counts[relation],
            "in_sample_head": in_sample["best_head"], "in_sample_direction": in_sample["direction"],
            "in_sample_accuracy": in_sample["accuracy"],
            "in_sample_ci": bootstrap_interval(*test.head_correct(relation, in_sample["_index"]), n_boot=n_boot, seed=seed),
            "dev_head": head_label(l, h), "dev_direction": DIRECTIONS[d], "dev_accuracy": chosen["accuracy"],
            "held_out_accuracy": round(held, 4),
            "held_out_ci": bootstrap_interval(correct, total, n_boot=n_boot, seed=seed),
            "baseline_accuracy": in_sample["baseline_accuracy"], "baseline_offset": in_sample["baseline_offset"],
            "baseline_ci": bootstrap_interval(base, total, n_boot=n_boot, seed=seed),
            "gain": 100.0 * float(correct.sum() - base.sum()) / words if words else float("nan"),
            "gain_ci": gain_interval(correct, base, total, n_boot=n_boot, seed=seed),
            "sentences": int((total > 0).sum()),
        })
    return rows


def chosen_index(row: dict) -> tuple[int, int, int]:
    """``(direction, layer, head)`` (0-based) of the head a :func:`held_out_rows` row chose on dev."""
    return (DIRECTIONS.index(row["dev_direction"]), *parse_head_label(row["dev_head"]))


def held_out_gain_replicates(test: HeadScores, held: list[dict], relations: list[str], *, n_boot: int = BOOTSTRAP,
                             seed: int = 0) -> tuple[np.ndarray, int]:
    """``(gains [n_boot, relation], sentences)``: the gain of each of ``relations``' held-out heads (the rows of
    ``held``, :func:`held_out_rows`) over its baseline, in percentage points, in each replicate of one resampling
    of every scored sentence of ``test`` (those with a counted word) at once: replicates of statements over several
    relations (how many of them have a specialised head). NaN where a replicate holds no word of a relation."""
    from helpers.core.bootstrap import counts

    rows = {r["relation"]: r for r in held}
    _, scored = test.head_correct(ALL, (0, 0, 0))
    keep = scored > 0
    c = counts(int(keep.sum()), n_boot=n_boot, seed=seed)
    gains = np.full((n_boot, len(relations)), np.nan)
    for k, relation in enumerate(relations):
        row = rows[relation]
        correct, total = test.head_correct(relation, chosen_index(row))
        base, _ = test.offset_correct_by_sentence(relation, row["baseline_offset"])
        gains[:, k] = gain_replicates(correct[keep], base[keep], total[keep], c)
    return gains, int(keep.sum())


def direction_replicates(dev: HeadScores, relations: list[str], *, n_boot: int = BOOTSTRAP,
                         seed: int = 0) -> tuple[np.ndarray, int]:
    """``(dependent_to_head [n_boot, relation], sentences)``: whether the best head-direction of each of
    ``relations`` on ``dev`` (:meth:`~helpers.syntax.stats.HeadScores.best`, ties as there) is
    ``dependent-to-head``, chosen again in each replicate of one resampling of every scored sentence of ``dev`` (a
    replicate without a word of the relation: ``False``)."""
    from helpers.core.bootstrap import counts

    _, scored = dev.head_correct(ALL, (0, 0, 0))
    keep = scored > 0
    c = counts(int(keep.sum()), n_boot=n_boot, seed=seed).astype(np.float32)  # whole draw counts: exact in float32
    out = np.zeros((n_boot, len(relations)), dtype=bool)
    for k, relation in enumerate(relations):
        correct, total = dev.every_head_correct(relation)  # [sentence, (layer, head, direction)], [sentence]
        best = (c @ correct[keep]).argmax(axis=1)  # the same denominator for every head: the most words right
        # a replicate without a word of the relation chooses no head: the statement does not hold for it there
        out[:, k] = (best % len(DIRECTIONS) == DIRECTIONS.index("dependent-to-head")) & (c @ total[keep] > 0)
    return out, int(keep.sum())


def accuracy_frame(scores: HeadScores, relations: list[str]):
    """Long table ``relation, direction, layer, head, label, accuracy`` for heat maps (1-based)."""
    import pandas as pd

    acc = scores.accuracy()
    rows = []
    for relation in relations:
        r = scores.relations.index(relation)
        for d, direction in enumerate(DIRECTIONS):
            for l in range(acc.shape[1]):
                for h in range(acc.shape[2]):
                    rows.append({"relation": relation, "direction": direction, "layer": l + 1, "head": h + 1,
                                 "label": head_label(l, h), "accuracy": round(float(acc[d, l, h, r]), 2)})
    return pd.DataFrame(rows)


def example_sentence(run: HeadsRun, relation: str, index: tuple[int, int, int], *, min_words: int = 8,
                     max_words: int = 20) -> int | None:
    """First sentence of ``min_words..max_words`` words, not skipped, with at least one ``relation`` word,
    where head ``index`` predicts every such word correctly (Figure 5's examples, chosen by rule)."""
    used = {ex.index for ex in run.store.examples}
    d, l, h = index
    for i, sent in enumerate(run.sentences):
        if i not in used or not min_words <= len(sent) <= max_words or relation not in sent.deprels:
            continue
        attn = run.store[i][None, l : l + 1, h : h + 1]  # the head's map alone, a batch of one
        preds = predict_heads(attn, [attn.shape[-1]], [len(sent)], causal=run.causal)[0, d, 0, 0].numpy()
        words = [k for k, rel in enumerate(sent.deprels) if rel == relation and sent.heads[k] != 0]
        if words and all(preds[k] == sent.heads[k] for k in words):
            return i
    return None


@dataclass
class HeadExample:
    """One head drawn on one sentence (Figure 5): ``attn`` is the head's word-level map ``[word, word]`` with
    [CLS] first and [SEP] last (a decoder's: BOS first, when it has one, and nothing after the words), oriented so
    that rows attend (transposed for ``head-to-dependent``); ``words`` labels every position; ``dependents`` are
    the positions in ``words`` of the relation's dependents and ``special`` those of [CLS], [SEP] or BOS."""

    relation: str
    head: str
    direction: str
    sentence: int
    words: list[str]
    attn: np.ndarray
    dependents: list[int]
    special: tuple[int, ...] = ()

    @property
    def title(self) -> str:
        return f"{self.relation}: head {self.head} ({DIRECTION_ARROWS[self.direction]})"


def strongest_relations(scores: HeadScores, n: int = FIGURE5_PANELS) -> list[str]:
    """The ``n`` relations of Table 1 (not ``all``) where the best head beats the offset baseline by most."""
    table = scores.table()
    gains = {r: table[r]["accuracy"] - table[r]["baseline_accuracy"] for r in table1_relations(scores) if r != ALL}
    return sorted(gains, key=gains.get, reverse=True)[:n]


def figure5_examples(run: HeadsRun, n: int = FIGURE5_PANELS) -> list[HeadExample]:
    """Figure 5's examples, chosen by rule: for each of the :func:`strongest_relations`, its best head on
    :func:`example_sentence` (relations with no such sentence are left out)."""
    out = []
    for rel in strongest_relations(run.scores, n):
        best = run.scores.best(rel)
        d, l, h = best["_index"]
        i = example_sentence(run, rel, best["_index"])
        if i is None:
            continue
        sent = run.sentences[i]
        attn = run.store[i][l, h]
        size = attn.shape[-1]
        lead, trail = word_layout(size, len(sent))
        words = position_labels(sent.words, lead=lead, trail=trail, first="BOS" if run.causal else "[CLS]")
        out.append(HeadExample(rel, best["best_head"], best["direction"], i, words, attn if d == 0 else attn.T,
                               [k + lead for k, r in enumerate(sent.deprels) if r == rel],
                               (*range(lead), *range(size - trail, size))))
    return out
