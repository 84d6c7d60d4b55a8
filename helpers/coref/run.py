"""Paper §4.3 end to end: OntoGUM documents -> 128-token windows -> word-level maps ->
antecedent selection by every head (the predictions cached; the maps only with ``keep_maps``) and by the three
baselines -> Table 2.

>>> run = run_coref(lm, "test")                                           # doctest: +SKIP
>>> run.accuracy()["all"].shape                                           # [layer, head]
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import partial
from typing import Literal

import numpy as np

from helpers import paper
from helpers.context import RunContext, data_folder, takes_context
from helpers.core.encoding import MAX_LENGTH, encode_words, word_token_counts
from helpers.core.labels import head_label
from helpers.core.models import LoadedModel
from helpers.coref.stats import (
    CANDIDATE_SETS,
    MENTION_TYPES,
    AntecedentScorer,
    CandidateSet,
    Query,
    baseline_predictions,
    queries_in_window,
    window_words,
)
from helpers.data.corpora import file_digest
from helpers.data.ontogum import CorefDocument, load_coref
from helpers.pipeline.extraction import maps_store, shard_size_for
from helpers.pipeline.route import reduce_maps
from helpers.syntax.stats import BOOTSTRAP, bootstrap_interval, gain_interval

Setting = Literal["truncated", "windows"]
BASELINES: tuple[str, ...] = ("nearest", "head match", "rule-based")
CANDIDATE_LABELS = {"mentions": "head words of earlier mentions", "words": "every word of the window"}

# Whole-document windows per cache shard, for a 6 x 12 model (:func:`~helpers.pipeline.extraction.shard_size_for`
# scales it to the model: 32 at 12 x 12). A shard's maps are in memory while it is made and while it is read:
# at 256 windows the default's chapter peaked at 2.32 GiB and the comparison's random-init copy of it (10
# documents, after §3 in the same process) at 2.76 GiB, over the 3 GB budget (2.79 GiB); at 64, 1.62 and
# 2.41 GiB, in the same time. The run's results do not depend on the shard size (tested).
COREF_SHARD_EXAMPLES = 64
SMALL_DOCUMENTS = 4  # documents per split in the small (test) configuration; the book reads them all


def windows(doc: CorefDocument, tokenizer, *, setting: Setting = "truncated", max_length: int = MAX_LENGTH) -> list[tuple[int, int]]:
    """Word ranges ``[start, end)`` of the windows read from a document.

    ``truncated``: the document's first words that fit (the paper). ``windows``: windows that
    overlap by half, covering the whole document.
    """
    budget = max_length - tokenizer.num_special_tokens_to_add(pair=False)
    counts = word_token_counts(tokenizer, doc.words)
    spans = [(0, window_words(counts, 0, budget))]
    while setting == "windows" and spans[-1][1] < len(doc.words):
        start, end = spans[-1]
        nxt = start + max(1, (end - start) // 2)
        spans.append((nxt, window_words(counts, nxt, budget)))
    return spans


@dataclass
class CorefRun:
    """Correctness of every head ``[layer, head, query]`` and baseline ``[baseline, query]``, per query.

    ``head_correct`` picks among the head words of earlier mentions (the default candidates);
    ``word_correct`` among every other word of the window (see :mod:`helpers.coref.stats`)."""

    split: str
    setting: str
    head_correct: np.ndarray
    baseline_correct: np.ndarray
    kinds: np.ndarray
    documents: np.ndarray
    n_documents: int
    examples: list[tuple[CorefDocument, int, int, Query]]
    store: object = None  # the windows' word-level maps (an AttentionStore), indexed by window
    word_correct: np.ndarray | None = None
    lead: int = 1  # special positions before the words in the maps ([CLS], BOS; 0: a decoder without BOS)

    def example(self, layer: int, head: int, *, min_gap: int = 3, max_gap: int = 20):
        """The first evaluated mention (document order) that head ``(layer, head)`` resolves correctly with
        its nearest antecedent ``min_gap..max_gap`` words earlier, as ``(words, map, document id)``: the
        passage from that antecedent's head word to the mention's, and the head's attention over it
        (rows renormalised). ``None`` if there is none."""
        for doc, w, start, q in self.examples:
            lo = max(q.correct)
            if not min_gap <= q.head - lo <= max_gap:
                continue
            attn = self.store[w][layer, head]
            k = self.lead
            cols = np.asarray(q.candidates) + k
            if cols[attn[q.head + k, cols].argmax()] - k in q.correct:
                sub = attn[lo + k : q.head + k + 1, lo + k : q.head + k + 1]
                return doc.words[start + lo : start + q.head + 1], sub / sub.sum(-1, keepdims=True), doc.doc_id
        return None

    def _mask(self, kind: str) -> np.ndarray:
        return np.ones(len(self.kinds), bool) if kind == "all" else self.kinds == kind

    def counts(self) -> dict[str, int]:
        return {k: int(self._mask(k).sum()) for k in ("all", *MENTION_TYPES)}

    def _correct(self, candidates: CandidateSet) -> np.ndarray:
        if candidates not in CANDIDATE_SETS:
            raise ValueError(f"candidates {candidates!r}: choose one of {', '.join(CANDIDATE_SETS)}")
        return self.head_correct if candidates == "mentions" else self.word_correct

    def accuracy(self, candidates: CandidateSet = "mentions") -> dict[str, np.ndarray]:
        """``{type: [layer, head]}`` accuracy in percent, heads choosing among ``candidates``."""
        correct = self._correct(candidates)
        return {k: 100.0 * correct[..., self._mask(k)].mean(-1) if self._mask(k).any()
                else np.full(correct.shape[:2], np.nan) for k in ("all", *MENTION_TYPES)}

    def baseline_accuracy(self) -> dict[str, dict[str, float]]:
        return {name: {k: float(100.0 * self.baseline_correct[b, self._mask(k)].mean()) if self._mask(k).any() else float("nan")
                       for k in ("all", *MENTION_TYPES)} for b, name in enumerate(BASELINES)}

    def best_head(self, candidates: CandidateSet = "mentions") -> tuple[int, int]:
        acc = self.accuracy(candidates)["all"]
        layer, head = np.unravel_index(int(np.nanargmax(acc)), acc.shape)
        return int(layer), int(head)

    def head_interval(self, layer: int, head: int, kind: str = "all", *, n_boot: int = BOOTSTRAP, seed: int = 0,
                      candidates: CandidateSet = "mentions"):
        """95% bootstrap interval of one head's accuracy, resampling documents (:meth:`document_counts`)."""
        correct, _, total = self.document_counts(layer, head, kind, candidates=candidates)
        return bootstrap_interval(correct, total, n_boot=n_boot, seed=seed)

    def document_counts(self, layer: int, head: int, kind: str = "all", *,
                        candidates: CandidateSet = "mentions") -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Per document ``(head [document], baselines [document, baseline], total [document])``: the mentions of
        ``kind`` that head ``(layer, head)`` and each of :data:`BASELINES` resolve correctly, and how many there
        are: every system on the same mentions."""
        mask = self._mask(kind)
        docs = self.documents[mask]
        head_hits = np.bincount(docs, weights=self._correct(candidates)[layer, head, mask], minlength=self.n_documents)
        base = np.stack([np.bincount(docs, weights=self.baseline_correct[b, mask], minlength=self.n_documents)
                         for b in range(len(BASELINES))], axis=-1)
        return head_hits, base, np.bincount(docs, minlength=self.n_documents)

    def gain_over(self, layer: int, head: int, baseline: str, kind: str = "all", *, n_boot: int = BOOTSTRAP,
                  seed: int = 0, candidates: CandidateSet = "mentions") -> dict:
        """Head ``(layer, head)``'s accuracy minus ``baseline``'s (one of :data:`BASELINES`) on the same mentions of
        ``kind``, in points: ``{"gain", "interval", "documents"}``, the 95 % interval paired mention by mention,
        resampling the documents that hold a mention (:func:`~helpers.syntax.stats.gain_interval`: the draws of
        :meth:`head_interval`, so the two intervals come from the same replicates). NaN without a mention."""
        head_hits, base, total = self.document_counts(layer, head, kind, candidates=candidates)
        b = base[:, BASELINES.index(baseline)]
        n = int(total.sum())
        gain = 100.0 * float(head_hits.sum() - b.sum()) / n if n else float("nan")
        return {"gain": gain, "interval": gain_interval(head_hits, b, total, n_boot=n_boot, seed=seed),
                "documents": int((total > 0).sum())}


@takes_context
def run_coref(lm: LoadedModel, split: str = "test", ctx: RunContext | None = None, *, setting: Setting = "truncated",
              max_length: int = MAX_LENGTH, max_documents: int | None = None) -> CorefRun:
    """Score every head and the baselines on one GUM split (the heads on the one route, here or on the workers of a
    distributed ``ctx.execution``: :func:`_predictions_of`)."""
    data_dir, cache_root = ctx.data_dir, ctx.cache_dir
    docs = load_coref(split, data_dir=data_dir, cache_root=cache_root)[:max_documents]
    spans = [(d, s, e) for d, doc in enumerate(docs) for s, e in windows(doc, lm.tokenizer, setting=setting, max_length=max_length)]
    batch = encode_words(lm.tokenizer, [docs[d].words[s:e] for d, s, e in spans], max_length=max_length,
                         model_max=lm.max_positions)
    onto = data_folder(data_dir) / "gum" / "ontogum"
    digest = file_digest([onto / f"{doc.doc_id}.conll" for doc in docs])
    seen: set[tuple[int, int, int, str]] = set()  # a mention is evaluated in the first window holding it
    pending: dict[int, list[Query]] = {}
    for w, (d, s, e) in enumerate(spans):
        kept = []
        for q in queries_in_window(docs[d], s, e, w):
            key = (d, q.mention.start, q.mention.end, q.mention.chain)
            if key not in seen:
                seen.add(key)
                kept.append(q)
        pending[w] = kept
    shard_size = shard_size_for(lm, examples=COREF_SHARD_EXAMPLES)
    store, correct = _predictions_of(lm, batch, pending, digest=digest, shard_size=shard_size, ctx=ctx)
    heads, words = correct["heads"], correct["words"]
    base, kinds, doc_ids, examples = [], [], [], []
    for example in (ex for shard in store.shards for ex in shard):  # the store's order, as the predictions'
        w = example.index
        queries = pending.get(w, [])
        if not queries:
            continue
        d, s, _ = spans[w]
        for q in queries:
            preds = baseline_predictions(q, s)
            base.append([preds[b] is not None and preds[b] in q.correct for b in BASELINES])
            kinds.append(q.mention.kind)
            doc_ids.append(d)
            examples.append((docs[d], w, s, q))
    return CorefRun(split, setting, heads,
                    np.asarray(base, dtype=bool).T.reshape(len(BASELINES), -1), np.asarray(kinds), np.asarray(doc_ids),
                    len(docs), sorted(examples, key=lambda e: (e[1], e[3].head)), store, words,
                    0 if lm.causal and not lm.bos else 1)


def _stack(parts: list[np.ndarray], L: int, H: int) -> np.ndarray:
    """Per-window ``[layer, head, query]`` predictions side by side (``[layer, head, 0]`` when there are none)."""
    return np.concatenate(parts, axis=-1) if parts else np.zeros((L, H, 0), bool)


def _predictions_of(lm: LoadedModel, batch, pending: dict[int, list[Query]], *, digest: str, shard_size: int,
                    ctx: RunContext):
    """``(store, {"heads": [layer, head, query], "words": ...})``: every head's predictions on the windows' queries
    in the store's order, kept in the cache (:func:`~helpers.data.cache.cached_arrays`, keyed by the windows' maps
    and this code), computed on the one route (:func:`~helpers.pipeline.route.reduce_maps` with
    :class:`~helpers.coref.stats.AntecedentScorer`: the cached maps when the cache holds them, else the model's
    passes, here or on a distributed ``ctx.execution``'s workers, whose maps are written only when kept,
    ``keep_maps``). The store serves the chapter's examples: the cached maps, or the model run again on one shard
    when an example reads it (:func:`~helpers.pipeline.extraction.maps_store`)."""
    from helpers.data.cache import cache_key, cached_arrays
    from helpers.digest import code_digest

    key = cache_key(lm, batch, level="word", word_mode="mean", shard_size=shard_size, source_digest=digest)
    L, H = lm.n_layers, lm.n_heads

    def store():
        return maps_store(lm, batch, source_digest=digest, shard_size=shard_size, cache_root=ctx.cache_dir)

    def compute() -> dict[str, np.ndarray]:
        found = reduce_maps(lm, batch, partial(AntecedentScorer, lm.causal), level="word", ctx=ctx,
                            extras=lambda ex: (pending.get(ex.index, []),), source_digest=digest,
                            shard_size=shard_size).result()
        wanted = [ex.index for shard in store().shards for ex in shard if ex.index in found]  # the store's order
        return {"heads": _stack([found[i][0] for i in wanted], L, H), "words": _stack([found[i][1] for i in wanted], L, H)}

    correct = cached_arrays("coref-predictions", {"maps": key, "code": code_digest(run_coref)}, compute,
                            cache_root=ctx.cache_dir)
    return store(), correct


def table2(dev: CorefRun, test: CorefRun, *, candidate_sets: tuple[str, ...] = ("mentions",)) -> list[dict]:
    """Table 2 rows: the head chosen on dev (All accuracy) scored on test, the in-sample best head on test, for
    each of ``candidate_sets`` (rows labelled with the candidates unless only the default is asked for), then
    the baselines on test."""
    rows = []
    for candidates in candidate_sets:
        acc = test.accuracy(candidates)
        tag = "" if tuple(candidate_sets) == ("mentions",) else f", candidates: {CANDIDATE_LABELS[candidates]}"
        layer, head = dev.best_head(candidates)
        rows.append({"system": f"head {head_label(layer, head)} (chosen on dev{tag})",
                     **{k: float(acc[k][layer, head]) for k in ("all", *MENTION_TYPES)},
                     "interval": test.head_interval(layer, head, candidates=candidates)})
        in_l, in_h = test.best_head(candidates)
        rows.append({"system": f"head {head_label(in_l, in_h)} (best on test, in-sample{tag})",
                     **{k: float(acc[k][in_l, in_h]) for k in ("all", *MENTION_TYPES)},
                     "interval": test.head_interval(in_l, in_h, candidates=candidates)})
    for name, values in test.baseline_accuracy().items():
        rows.append({"system": name, **values, "interval": None})
    return rows


def coref_json(model: str, test: CorefRun, dev: CorefRun, *, select_on: str) -> dict:
    """The ``coref`` command's JSON (layout fixed by the CLI contract): every head and the baselines scored on
    ``test``, the head chosen on ``dev`` (the split ``select_on``), the paper's Table 2, and the same with every
    other word of the window as a candidate."""
    layer, head = dev.best_head()
    acc = test.accuracy()
    return {
        "model": model, "split": test.split, "setting": test.setting, "documents": test.n_documents,
        "mentions": test.counts(),
        "per_head": {k: np.round(v, 4).tolist() for k, v in acc.items()},
        "baselines": test.baseline_accuracy(),
        "best_head": {"label": head_label(layer, head), "chosen_on": select_on,
                      "accuracy": {k: float(v[layer, head]) for k, v in acc.items()},
                      "interval_all": test.head_interval(layer, head),
                      "gain_over": {name: test.gain_over(layer, head, name) for name in BASELINES}},
        "paper": {name: dict(zip(("all", *MENTION_TYPES), values)) for name, values in paper.TABLE2.items()},
        "candidates": CANDIDATE_LABELS["mentions"],
        "every_word_candidates": _candidates_json(dev, test, "words", select_on),
    }


def _candidates_json(dev: CorefRun, test: CorefRun, candidates: CandidateSet, select_on: str) -> dict:
    """Per-head accuracy and the dev-chosen head when every other word of the window is a candidate."""
    acc = test.accuracy(candidates)
    layer, head = dev.best_head(candidates)
    return {"candidates": CANDIDATE_LABELS[candidates], "per_head": {k: np.round(v, 4).tolist() for k, v in acc.items()},
            "best_head": {"label": head_label(layer, head), "chosen_on": select_on,
                          "accuracy": {k: float(v[layer, head]) for k, v in acc.items()},
                          "interval_all": test.head_interval(layer, head, candidates=candidates)}}
