"""Paper §4.2 end to end: treebank -> cached word-level maps -> every head scored -> Table 1 rows.

Shared by the chapter and ``python -m helpers heads`` (whose JSON layout is a contract, see
:func:`heads_json`).

>>> result = run_heads(lm, "gum:test")                                   # doctest: +SKIP
>>> result.scores.table()["det"]["best_head"]                            # doctest: +SKIP
'4-7'
"""
from __future__ import annotations

import os
from dataclasses import dataclass

import numpy as np

from helpers.core.labels import head_label
from helpers.core.models import LoadedModel
from helpers.data.cache import AttentionStore
from helpers.data.conllu_io import Sentence
from helpers.pipeline.engine import Execution
from helpers.pipeline.extraction import extract_treebank
from helpers.syntax.stats import (
    ALL,
    DIRECTIONS,
    HeadScorer,
    HeadScores,
    bootstrap_interval,
    predict_heads,
    score_heads,
)

SMALL_SENTENCES = 150   # sentences per treebank in the small (test) configuration; the book reads them all


@dataclass
class HeadsRun:
    corpus: str
    sentences: list[Sentence]
    store: AttentionStore
    scores: HeadScores

    @property
    def used(self) -> int:
        return len(self.store.examples)

    @property
    def skipped(self) -> int:
        return len(self.store.skipped)


def run_heads(lm: LoadedModel, corpus: str, *, max_sentences: int | None = None, max_length: int = 128,
              word_mode: str = "mean", possessive: str | None = None, data_dir=None,
              cache_root: str | os.PathLike | None = None, progress: bool = False,
              execution: Execution | None = None) -> HeadsRun:
    """Extract (or reload) word-level maps of ``corpus`` and score every head against its trees.

    With a distributed ``execution`` each cache shard is extracted and scored on a worker
    (:func:`heads_shard`) and the partial scores are merged here in shard order (:func:`merge_heads`):
    the same result as the local run."""
    if execution is not None and execution.distributed:
        from helpers.pipeline.engine import run_shards
        from helpers.pipeline.extraction import encode_treebank, plan_extraction

        sentences, batch, digest = encode_treebank(lm, corpus, max_sentences=max_sentences, max_length=max_length,
                                                   data_dir=data_dir, cache_root=cache_root)
        plan = plan_extraction(lm, batch, level="word", word_mode=word_mode, cache_root=cache_root,
                               source_digest=digest)
        payloads = [([sentences[ex.index] for ex in shard], possessive) for shard in plan.store.shards]
        store, partials = run_shards(lm, plan, execution=execution, task=heads_shard, payloads=payloads,
                                     progress=progress)
        return HeadsRun(corpus, sentences, store, merge_heads(partials, possessive=possessive))
    sentences, store = extract_treebank(lm, corpus, max_sentences=max_sentences, max_length=max_length,
                                        word_mode=word_mode, data_dir=data_dir, cache_root=cache_root, progress=progress)
    return HeadsRun(corpus, sentences, store, score_heads(store, sentences, possessive=possessive))


def heads_shard(items: list, payload: tuple) -> HeadScorer:
    """Partial scores of one shard (a distributed task): ``items`` are its ``(example, attn)`` pairs in
    order, ``payload`` is ``(sentences of those examples, possessive)``."""
    sentences, possessive = payload
    scorer = HeadScorer(possessive=possessive)
    for (example, attn), sentence in zip(items, sentences):
        scorer.add(attn, sentence, index=example.index)
    return scorer


def merge_heads(parts: list[HeadScorer], *, possessive: str | None = None) -> HeadScores:
    """Shards' partial scores merged in shard order: relations numbered by first appearance, as one
    scorer fed the shards in that order would number them, so the result equals :func:`score_heads`."""
    total = HeadScorer(possessive=possessive)
    for part in parts:
        for rel in part.relations:
            if rel not in total._index_of:
                total._index_of[rel] = len(total.relations)
                total.relations.append(rel)
        mapping = np.array([total._index_of[rel] for rel in part.relations])
        total._rel.extend(mapping[r] for r in part._rel)
        total._sent.extend(part._sent)
        total._correct.extend(part._correct)
        total._offset.extend(part._offset)
        total.n_sentences = max(total.n_sentences, part.n_sentences)
    return total.result()


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


def held_out_rows(dev: HeadScores, test: HeadScores, relations: list[str], *, n_boot: int = 1000,
                  seed: int = 0) -> list[dict]:
    """For each relation: the best head chosen on ``dev``, its accuracy on ``test`` with a bootstrap
    interval, and the in-sample best head on ``test`` (what the paper reports), also with an interval."""
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
        rows.append({
            "relation": relation, "count": test.counts[relation],
            "in_sample_head": in_sample["best_head"], "in_sample_direction": in_sample["direction"],
            "in_sample_accuracy": in_sample["accuracy"],
            "in_sample_ci": bootstrap_interval(*test.head_correct(relation, in_sample["_index"]), n_boot=n_boot, seed=seed),
            "dev_head": head_label(l, h), "dev_direction": DIRECTIONS[d], "dev_accuracy": chosen["accuracy"],
            "held_out_accuracy": round(held, 4),
            "held_out_ci": bootstrap_interval(*test.head_correct(relation, chosen["_index"]), n_boot=n_boot, seed=seed),
            "baseline_accuracy": in_sample["baseline_accuracy"], "baseline_offset": in_sample["baseline_offset"],
        })
    return rows


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
        preds = predict_heads(run.store[i])[d, l, h]
        words = [k for k, rel in enumerate(sent.deprels) if rel == relation and sent.heads[k] != 0]
        if words and all(preds[k] == sent.heads[k] for k in words):
            return i
    return None


# ------------------------------------------------------------------------------------- CLI
