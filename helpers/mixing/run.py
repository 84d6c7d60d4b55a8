"""Beyond the paper, context mixing end to end: treebanks and coreference windows -> the maps of
:mod:`helpers.mixing.maps` (one batched pass per corpus, every method at once) -> word level, as for attention
(:mod:`helpers.core.wordlevel`) -> the paper's three probes per method -> one JSON per method (cached).

- §4.2: every unit (a head where the method's map has heads, ``[layer, head, T, T]``; a layer otherwise,
  ``[layer, T, T]`` read as ``[layer, 1, T, T]``) scored as a parser by the syntax chapter's scorer
  (:func:`helpers.syntax.stats.score_heads`); each relation's unit chosen on GUM dev and scored on GUM test
  with the best offset baseline and a 95 % bootstrap interval (resampling sentences).
- §4.3: antecedent selection by every unit (:func:`helpers.coref.stats.head_predictions`) on the coreference
  chapter's truncated windows (a document's first words that fit in ``max_length`` tokens) of each split's first
  documents, as many as it takes for their windows to hold ``min_mentions`` evaluated mentions (documents differ a
  lot: from 0 to 21 in a window); the unit chosen on the dev documents, scored on the test documents with an
  interval resampling documents. Value zeroing reruns only the rows §4.3 reads (the mentions' head words).
- §5: the attention-only probe (:func:`helpers.probe.stats.train_probe`, ``"attn"``) on the method's word-level
  maps, trained on GUM train, its epoch chosen on GUM dev, scored on GUM test (UAS without punctuation), once
  per seed.

Per-head value zeroing (``value_zeroing_heads``) reruns each layer heads x T times a sentence: on the CPU it is
run on ``heads_sentences`` sentences drawn at random (:func:`heads_sample`) from each of GUM dev and test (§4.2; not
on GUM train: no §5 probe) and the first ``heads_documents`` documents of each split (its JSON says how many); on an
accelerator on everything.

>>> result = run_mixing(lm, ctx, methods=("attention", "rollout"), max_sentences=50)    # doctest: +SKIP
>>> result["rollout"]["syntax"]["relations"]["all"]["held_out_accuracy"]                # doctest: +SKIP
"""
from __future__ import annotations

import math
from typing import Mapping, Sequence

import numpy as np
import torch

from helpers.context import RunContext, data_folder, refresh_requested, takes_context
from helpers.core import bootstrap
from helpers.core.encoding import MAX_LENGTH, Encoded, EncodedBatch, encode_words, word_token_counts
from helpers.core.extract import bucket, model_inputs
from helpers.core.models import LoadedModel
from helpers.core.wordlevel import batched_matrices, word_level_batch
from helpers.coref.stats import baseline_predictions, head_predictions, queries_in_window, window_words
from helpers.data.cache import artifact_path, cached_json
from helpers.data.conllu_io import Sentence
from helpers.data.corpora import corpus_files, file_digest
from helpers.data.ontogum import load_coref
from helpers.digest import code_digest
from helpers.mixing.maps import METHODS, check_methods, mixing_batch
from helpers.mixing.stats import median_interval, per_item, pooled_score
from helpers.pipeline.extraction import encode_treebank
from helpers.probe.stats import (ProbeData, encoder_layout, predict, sentence_correct, sentence_totals, train_probe,
                                 uas)
from helpers import paper
from helpers.syntax.stats import ALL, BOOTSTRAP, DIRECTIONS, HeadScores, bootstrap_interval, score_heads

HEADS_METHOD = "value_zeroing_heads"  # the costly one: a subset on the CPU
METHOD_NAMES = {"attention": "attention weights", "norms": "attention norms ||αf(x)||", "rollout": "attention rollout",
                "value_zeroing": "value zeroing (layer)", "value_zeroing_heads": "value zeroing (per head)",
                "alti": "ALTI (layer)", "alti_rollout": "ALTI rollout"}
TREEBANKS = {"train": "gum:train", "dev": "gum:dev", "test": "gum:test"}  # §5 trains on train; §4.2 and §5 choose on dev
COREF_SPLITS = ("dev", "test")  # §4.3: the unit chosen on dev, scored on test
COREF_BASELINES = ("nearest", "head match", "rule-based")
BATCH = 16       # sentences per batched pass of the maps
HEADS_BATCH = 2  # per-head value zeroing: heads x T reruns of each layer per sentence
HEADS_SEED = 0   # per-head value zeroing's sentences on the CPU are drawn with this seed (heads_sample)
DECIMALS = 4     # scores as written to JSON
ITEM_DECIMALS = 6  # per-item shares as written to JSON (what the bootstraps resample)


def unit_label(layer: int, head: int, n_heads: int) -> str:
    """1-based ``"layer-head"`` for a map with heads, ``"layer"`` (``"L4"``) for a layer map (one unit a layer)."""
    return f"{layer + 1}-{head + 1}" if n_heads > 1 else f"L{layer + 1}"


def subset_everything(lm: LoadedModel) -> bool:
    """Whether per-head value zeroing runs on every sentence: on an accelerator (not on the CPU)."""
    return lm.device.type != "cpu"


def _r(x) -> float | None:
    """A finite number rounded for JSON, ``None`` for NaN (the cache refuses NaN)."""
    return None if x is None or not math.isfinite(float(x)) else round(float(x), DECIMALS)


def _interval(ci, decimals: int = 2) -> list | None:
    return None if ci is None or not all(math.isfinite(c) for c in ci) else [round(float(c), decimals) for c in ci]


# ---------------------------------------------------------------------------------------------- maps


def word_maps(lm: LoadedModel, examples: Sequence[Encoded], methods: Sequence[str], *, batch_size: int = BATCH,
              compare: dict | None = None, rows: Mapping[int, Sequence[int]] | None = None) -> dict[str, dict[int, np.ndarray]]:
    """``{method: {example index: [layer, unit, word, word] float32}}`` for word-split ``examples``: the maps of
    :func:`helpers.mixing.maps.mixing_batch`, every method in one batched pass, turned into word-level maps as for
    attention (rows: mean over a word's tokens; columns: sum). A layer map ``[layer, T, T]`` gets a unit axis of
    one. With ``compare`` (a dict, filled in) and both ``value_zeroing_heads`` and ``norms`` asked for, the
    token-level rows of the two are compared (:func:`squared_norm_agreement`) before the word-level conversion.
    ``rows`` (``{example index: word positions}``, in the word-level layout, specials included): the only rows a
    caller reads; value zeroing reruns only their tokens' rows, and its other rows are 0."""
    out: dict[str, dict[int, np.ndarray]] = {m: {} for m in methods}
    for group in bucket(list(examples), batch_size=batch_size):
        inputs = model_inputs(lm, group)
        maps = mixing_batch(lm, inputs["input_ids"], inputs["attention_mask"], list(methods),
                            rows=None if rows is None else token_rows(group, rows, inputs["input_ids"].shape))
        n = inputs["input_ids"].shape[1]
        if compare is not None and HEADS_METHOD in maps and "norms" in maps:
            squared_norm_agreement(maps[HEADS_METHOD], maps["norms"], inputs["attention_mask"], compare)
        R, S = batched_matrices([ex.word_of_token for ex in group], n, mode="mean", device=inputs["input_ids"].device)
        for m in methods:
            a = maps[m].float()
            if a.dim() == 4:  # [batch, layer, T, T]: a layer map, one unit a layer
                a = a[:, :, None]
            words = word_level_batch(a, R, S).cpu().numpy()
            for b, ex in enumerate(group):
                out[m][ex.index] = np.ascontiguousarray(words[b, :, :, : ex.n_positions, : ex.n_positions])
        del maps
    return out


def token_rows(group: Sequence[Encoded], rows: Mapping[int, Sequence[int]], shape) -> torch.Tensor:
    """``[batch, token]`` bool of a right-padded batch ``shape``: the tokens of the words ``rows[example index]``
    (word-level positions)."""
    out = torch.zeros(shape, dtype=torch.bool)
    for b, ex in enumerate(group):
        out[b, : len(ex)] = torch.from_numpy(np.isin(ex.word_of_token, np.asarray(list(rows.get(ex.index, ())), int)))
    return out


def squared_norm_agreement(vz: torch.Tensor, norms: torch.Tensor, mask: torch.Tensor, acc: dict) -> None:
    """Add to ``acc`` (``{"r": [...], "same": int, "rows": int}``) the per-row comparison of per-head value zeroing
    ``vz [batch, layer, head, T, T]`` with the row-normalised squared norm map ``norms`` (book/methods.md,
    §Context-mixing maps): each visible row's Pearson r over the positions it sees (rows with a constant side are
    left out) and whether the two rows' argmax agree; per sentence (the unit its intervals resample): ``"r_unit"``
    (each r's sentence, numbered in order of arrival), ``"same_by"`` and ``"rows_by"``."""
    rs, same, rows = acc.setdefault("r", []), acc.get("same", 0), acc.get("rows", 0)
    r_unit, same_by, rows_by = acc.setdefault("r_unit", []), acc.setdefault("same_by", []), acc.setdefault("rows_by", [])
    vz, n2 = vz.double().cpu(), norms.double().cpu() ** 2
    for b in range(vz.shape[0]):
        unit, first_r, same_before, rows_before = len(same_by), len(rs), same, rows
        t = int(mask[b].sum())
        a, c = vz[b, :, :, :t, :t], n2[b, :, :, :t, :t]
        c = c / c.sum(-1, keepdim=True).clamp_min(1e-300)
        seen = (a.abs().sum((0, 1)) > 0) | (c.abs().sum((0, 1)) > 0)  # [T, T]: positions any row sees (causal: j <= i)
        for i in range(t):
            cols = seen[i].nonzero().flatten()
            if len(cols) < 2:
                continue
            x, y = a[:, :, i, cols].reshape(-1, len(cols)), c[:, :, i, cols].reshape(-1, len(cols))
            xc, yc = x - x.mean(-1, keepdim=True), y - y.mean(-1, keepdim=True)
            den = (xc.norm(dim=-1) * yc.norm(dim=-1))
            ok = den > 0
            rs.extend(((xc * yc).sum(-1)[ok] / den[ok]).tolist())
            same += int((x.argmax(-1) == y.argmax(-1)).sum())
            rows += x.shape[0]
        r_unit.extend([unit] * (len(rs) - first_r))
        same_by.append(same - same_before)
        rows_by.append(rows - rows_before)
    acc["same"], acc["rows"] = same, rows


# --------------------------------------------------------------------------------------------- §4.2


def held_out(dev: HeadScores, test: HeadScores, relations: Sequence[str], n_units: int, *, n_boot: int = BOOTSTRAP,
             seed: int = 0) -> dict[str, dict]:
    """Per relation: the unit chosen on ``dev`` (ties as in :meth:`HeadScores.best`), its accuracy on ``test`` with
    a 95 % bootstrap interval over sentences, and the best offset baseline on ``test``."""
    dev_acc, test_acc = dev.accuracy(), test.accuracy()
    out = {}
    for relation in relations:
        if relation not in dev.relations or relation not in test.relations or not test.counts.get(relation):
            continue
        chosen = dev.best(relation, dev_acc)
        d, l, h = chosen["_index"]
        base = test.best(relation, test_acc)
        held = float(test_acc[d, l, h, test.relations.index(relation)])
        out[relation] = {
            "count": test.counts[relation], "unit": unit_label(l, h, n_units), "direction": DIRECTIONS[d],
            "dev_accuracy": _r(chosen["accuracy"]), "held_out_accuracy": _r(held),
            "held_out_ci": _interval(bootstrap_interval(*test.head_correct(relation, (d, l, h)), n_boot=n_boot, seed=seed)),
            "baseline_accuracy": _r(base["baseline_accuracy"]), "baseline_offset": base["baseline_offset"],
        }
    return out


def syntax_relations(scores: HeadScores) -> list[str]:
    """``all``, then the UD relations that have a row in the paper's Table 1 (:data:`helpers.paper.UD_TO_SD`) and
    words in ``scores``, in that table's order."""
    return [ALL, *(r for r in paper.UD_TO_SD if r != ALL and scores.counts.get(r))]


def score_syntax(maps_dev: dict, maps_test: dict, dev: list[Sentence], test: list[Sentence], *, causal: bool) -> dict:
    """§4.2 for one method: :func:`held_out` on the word-level maps of GUM dev and test (``{index: map}``), and
    ``"per_sentence"``: the correct and counted words of each GUM test sentence (``"units"``: its index) under the
    unit chosen on dev for all relations (:func:`helpers.mixing.stats.per_item`), for paired comparisons."""
    scored = {}
    for name, maps, sentences in (("dev", maps_dev, dev), ("test", maps_test, test)):
        scored[name] = score_heads(maps.items(), sentences, causal=causal)
    n_units = next(iter(maps_test.values())).shape[1]
    out = {"sentences": {"dev": len(maps_dev), "test": len(maps_test)},
           "relations": held_out(scored["dev"], scored["test"], syntax_relations(scored["test"]), n_units)}
    if ALL in out["relations"]:
        chosen = scored["dev"].best(ALL)["_index"]
        correct, total = scored["test"].head_correct(ALL, chosen)
        out["per_sentence"] = per_item(np.arange(len(total)), correct, total)
    return out


# --------------------------------------------------------------------------------------------- §4.3


def coref_windows(lm: LoadedModel, split: str, *, max_documents: int | None, max_length: int,
                  min_mentions: int | None = None, data_dir=None, cache_root=None) -> tuple[EncodedBatch, dict[int, list], str]:
    """``(windows, {window: queries}, digest)``: each document's first window (the coreference chapter's
    ``truncated`` setting: its first words that fit in ``max_length`` tokens), encoded, with its evaluated mentions
    (:func:`helpers.coref.stats.queries_in_window`), and the digest of the OntoGUM files read. The documents are the
    split's first, in order: at most ``max_documents`` (``None``: no limit), and with ``min_mentions`` no more than
    it takes for their windows to hold that many evaluated mentions (``None``: no such stop).

    >>> batch, queries, _ = coref_windows(lm, "test", max_documents=None, max_length=128, min_mentions=150)  # doctest: +SKIP
    >>> sum(len(q) for q in queries.values()) >= 150                                                           # doctest: +SKIP
    True
    """
    budget = max_length - lm.tokenizer.num_special_tokens_to_add(pair=False)
    docs, ends, queries = [], [], {}
    for doc in load_coref(split, data_dir=data_dir, cache_root=cache_root)[:max_documents]:
        if min_mentions is not None and sum(map(len, queries.values())) >= min_mentions:
            break
        end = window_words(word_token_counts(lm.tokenizer, doc.words), 0, budget)
        queries[len(docs)] = queries_in_window(doc, 0, end, len(docs))
        docs.append(doc)
        ends.append(end)
    batch = encode_words(lm.tokenizer, [doc.words[:end] for doc, end in zip(docs, ends)], max_length=max_length,
                         model_max=lm.max_positions)
    onto = data_folder(data_dir) / "gum" / "ontogum"
    return batch, queries, file_digest([onto / f"{doc.doc_id}.conll" for doc in docs])


def score_coref(maps_dev: dict, maps_test: dict, windows: dict, *, causal: bool, n_boot: int = BOOTSTRAP) -> dict:
    """§4.3 for one method: the unit with the best antecedent selection on the dev windows, scored on the test
    windows with a 95 % bootstrap interval over documents (``windows``: ``{split: (batch, queries)}``), and
    ``"per_document"``: each test window's correct and evaluated mentions under that unit (``"units"``: the
    window), for paired comparisons."""
    correct = {}
    for split, maps in (("dev", maps_dev), ("test", maps_test)):
        batch, queries = windows[split]
        n_words = {ex.index: ex.n_words for ex in batch.examples}
        parts, docs = [], []
        for w in sorted(maps):
            if queries.get(w):
                parts += head_predictions(maps[w][None], [maps[w].shape[-1]], [n_words[w]], [queries[w]], causal=causal)
                docs += [w] * len(queries[w])
        correct[split] = (np.concatenate(parts, axis=-1) if parts else None, np.asarray(docs, dtype=int))
    (dev, _), (test, test_docs) = correct["dev"], correct["test"]
    if dev is None or test is None:
        return {"documents": {s: len(m) for s, m in (("dev", maps_dev), ("test", maps_test))}, "mentions": 0,
                "unit": None, "accuracy": None, "interval": None}
    acc_dev = dev.mean(-1)
    l, h = np.unravel_index(int(np.argmax(acc_dev)), acc_dev.shape)
    n_docs = int(test_docs.max()) + 1
    hits = np.bincount(test_docs, weights=test[l, h], minlength=n_docs)
    total = np.bincount(test_docs, minlength=n_docs)
    return {"documents": {"dev": len(maps_dev), "test": len(maps_test)}, "mentions": int(test.shape[-1]),
            "unit": unit_label(int(l), int(h), dev.shape[1]), "dev_accuracy": _r(100 * acc_dev[l, h]),
            "accuracy": _r(100 * test[l, h].mean()),
            "interval": _interval(bootstrap_interval(hits, total, n_boot=n_boot)),
            "per_document": per_item(np.arange(n_docs), hits, total)}


def coref_baselines(queries: dict[int, list]) -> dict[str, float | None]:
    """The coreference chapter's baselines on the windows' queries (accuracy in percent)."""
    hits = {b: [] for b in COREF_BASELINES}
    for w in sorted(queries):
        for q in queries[w]:
            preds = baseline_predictions(q, 0)
            for b in COREF_BASELINES:
                hits[b].append(preds[b] is not None and preds[b] in q.correct)
    return {b: _r(100 * np.mean(v)) if v else None for b, v in hits.items()}


# ---------------------------------------------------------------------------------------------- §5


def probe_data(maps: dict[int, np.ndarray], examples: Sequence[Encoded], sentences: list[Sentence]) -> ProbeData:
    """The probes' in-memory data for the examples with maps: each map in the encoder's layout
    (:func:`helpers.probe.stats.encoder_layout`), float16 as the probes store maps, gold heads, punctuation, and
    no word vectors (the attention-only probe reads none)."""
    kept = [ex for ex in examples if ex.index in maps]
    sents = [sentences[ex.index] for ex in kept]
    return ProbeData([encoder_layout(maps[ex.index], ex.lead, ex.trail).astype(np.float16) for ex in kept],
                     [np.asarray(s.heads) for s in sents],
                     [np.array([u == "PUNCT" or r == "punct" for u, r in zip(s.upos, s.deprels)]) for s in sents],
                     [np.zeros((len(s), 0), np.float32) for s in sents], names=[s.sent_id for s in sents])


def score_probe(train: ProbeData, dev: ProbeData, test: ProbeData, *, seeds: Sequence[int], epochs: int,
                device=None) -> dict:
    """§5 for one method: the attention-only probe trained once per seed, its epoch chosen on ``dev``; test UAS
    (punctuation excluded) per seed, their mean and standard deviation, the mean's 95 % ``"interval"`` (test
    sentences resampled within each seed, the seeds pooled: :func:`helpers.mixing.stats.pooled_score`) and
    ``"per_sentence"``: each test sentence's correct and counted words per seed (``"correct"`` ``[seed][sentence]``;
    ``"units"``: the sentences' ids), for paired comparisons."""
    runs, dev_runs, correct = [], [], []
    for seed in seeds:
        model, info = train_probe("attn", train, dev, seed=seed, epochs=epochs, device=device)
        logits = predict(model, test, device=device)
        runs.append(uas(logits, test))
        correct.append(sentence_correct(logits, test))
        dev_runs.append(max(info["dev_uas"]))
    names = test.names if len(test.names) == len(test) else list(range(len(test)))
    totals = sentence_totals(test)  # the same words counted for every seed
    items = [per_item(names, c, totals) for c in correct]
    per_sentence = {**items[0], "correct": [i["correct"] for i in items]}
    _, interval = pooled_score(per_sentence)
    return {"sentences": {"train": len(train), "dev": len(dev), "test": len(test)}, "seeds": list(seeds),
            "epochs": epochs, "dev": [round(v, 2) for v in dev_runs], "runs": [round(v, 2) for v in runs],
            "mean": round(float(np.mean(runs)), 2),
            "sd": round(float(np.std(runs, ddof=1)), 2) if len(runs) > 1 else 0.0,
            "interval": _interval(interval), "per_sentence": per_sentence}


# ------------------------------------------------------------------------------------- the sinks


def rows_normalised(a: np.ndarray) -> np.ndarray:
    """``a`` in float64 with each row (last axis) divided by its sum; a row summing to 0 stays 0."""
    a = a.astype(np.float64)
    total = a.sum(-1, keepdims=True)
    return np.divide(a, total, out=np.zeros_like(a), where=total > 0)


def special_shares(maps: dict[int, np.ndarray], examples: Sequence[Encoded]) -> dict[str, list | None]:
    """``{"first": [layer], "last": [layer]}``: the mean share of each row (rows normalised; every unit and every
    visible row) that goes to the first special position ([CLS], BOS) and to the last ([SEP]); ``None`` where the
    input has no such position (a decoder's [SEP], a decoder without BOS)."""
    first, last, n = None, None, 0
    for ex in examples:
        if ex.index not in maps:
            continue
        a = rows_normalised(maps[ex.index])
        f = a[..., 0].mean((1, 2)) if ex.lead else None
        s = a[..., -1].mean((1, 2)) if ex.trail else None
        first = f if first is None else (first + f if f is not None else first)
        last = s if last is None else (last + s if s is not None else last)
        n += 1
    return {"first": None if first is None else [round(float(v) / n, DECIMALS) for v in first],
            "last": None if last is None else [round(float(v) / n, DECIMALS) for v in last]}


def sentence_sink_shares(maps: dict[int, np.ndarray], examples: Sequence[Encoded]) -> dict[str, list]:
    """``{"units": [example index], "share": [...]}``: each sentence's share of :func:`special_shares` summed over
    the special positions, each position's share averaged over layers (rows normalised; every unit and visible
    row); their mean over sentences is :func:`helpers.mixing.claims.sink_share` of :func:`special_shares`' output
    (up to its rounding). The unit that the sinks' ratio resamples."""
    units, shares = [], []
    for ex in examples:
        if ex.index not in maps:
            continue
        a = rows_normalised(maps[ex.index])
        share = (a[..., 0].mean((1, 2)).mean() if ex.lead else 0.0) + (a[..., -1].mean((1, 2)).mean() if ex.trail else 0.0)
        units.append(int(ex.index))
        shares.append(round(float(share), ITEM_DECIMALS))
    return {"units": units, "share": shares}


# ------------------------------------------------------------------------------------------ the run


def _limited(batch: EncodedBatch, n: int | None) -> list[Encoded]:
    """The examples of ``batch`` among its first ``n`` inputs (all when ``n`` is ``None``)."""
    return [ex for ex in batch.examples if n is None or ex.index < n]


def heads_sample(batch: EncodedBatch, n: int, *, seed: int = HEADS_SEED) -> list[Encoded]:
    """Per-head value zeroing's sentences on the CPU: ``n`` examples of ``batch`` (a whole treebank, encoded) drawn
    at random without replacement with ``seed``, in corpus order (all of them where it holds no more than ``n``).

    Drawn from the whole split, not its first sentences: a sentence costs heads x T^2 reruns of each layer, and the
    first sentences of GUM dev (one academic text) are among its longest (the first 30: 2,150 tokens squared on
    average, the split's 680 for MiniLM), one document where a draw spans the split's genres."""
    if n >= len(batch.examples):
        return list(batch.examples)
    picked = np.random.default_rng(seed).choice(len(batch.examples), size=n, replace=False)
    return [batch.examples[i] for i in sorted(picked)]


def mention_rows(batch: EncodedBatch, queries: Mapping[int, Sequence]) -> dict[int, list[int]]:
    """``{window: word positions}``: the rows §4.3 reads of each window's word-level map (specials included, as
    :func:`helpers.coref.stats.head_predictions` indexes it), its queries' head words."""
    return {ex.index: sorted({q.head + ex.lead for q in queries.get(ex.index, ())}) for ex in batch.examples}


def score_methods(lm: LoadedModel, methods: Sequence[str], *, max_sentences: int | None, max_documents: int | None,
                  train_sentences: int | None, heads_sentences: int, heads_documents: int, seeds: Sequence[int],
                  epochs: int, max_length: int = MAX_LENGTH, min_mentions: int | None = None, data_dir=None,
                  cache_root=None, progress: bool = False) -> dict[str, dict]:
    """Every score of :mod:`helpers.mixing.run` for each of ``methods`` (one pass over each corpus for all of
    them; per-head value zeroing on its subset, see :func:`subset_everything`)."""
    from tqdm.auto import tqdm

    everything = subset_everything(lm)
    plain = [m for m in methods if m != HEADS_METHOD]
    limits = {"train": train_sentences, "dev": max_sentences, "test": max_sentences}
    data, maps = {}, {m: {} for m in methods}
    heads_data = {}  # CPU: per-head value zeroing's own sentences, {"dev" / "test": (sentences, examples)}
    compare: dict = {}
    steps = [("treebank", n) for n in TREEBANKS] + [("coref", s) for s in COREF_SPLITS]
    for kind, name in tqdm(steps, desc="context-mixing maps", disable=not progress):
        rows = None
        if kind == "treebank":
            sentences, batch, _ = encode_treebank(lm, TREEBANKS[name], max_sentences=limits[name], max_length=max_length,
                                                  data_dir=data_dir, cache_root=cache_root)
            data[name] = (sentences, batch)
            subset = batch.examples
            if not everything and HEADS_METHOD in methods:
                subset = []  # CPU: no probe training, so nothing of GUM train
                if name != "train" and heads_sentences:
                    whole, pool, _ = encode_treebank(lm, TREEBANKS[name], max_sentences=None, max_length=max_length,
                                                     data_dir=data_dir, cache_root=cache_root)
                    subset = heads_sample(pool, heads_sentences)
                    heads_data[name] = (whole, subset)  # sentences indexed as in the whole split
        else:
            batch, queries, _ = coref_windows(lm, name, max_documents=max_documents, max_length=max_length,
                                              min_mentions=min_mentions, data_dir=data_dir, cache_root=cache_root)
            data["coref-" + name] = (batch, queries)
            subset = batch.examples if everything else _limited(batch, heads_documents)
            rows = mention_rows(batch, queries)  # all §4.3 reads: value zeroing reruns these rows alone
        key = f"{kind}-{name}"
        if plain:
            for m, found in word_maps(lm, batch.examples, plain, rows=rows).items():
                maps[m][key] = found
        if HEADS_METHOD in methods:
            asked = [HEADS_METHOD, "norms"] if kind == "treebank" and name == "test" else [HEADS_METHOD]
            found = word_maps(lm, subset, asked, batch_size=HEADS_BATCH, compare=compare,
                              rows=rows) if subset else {HEADS_METHOD: {}}
            maps[HEADS_METHOD][key] = found[HEADS_METHOD]
    (train_s, train_b), (dev_s, dev_b), (test_s, test_b) = data["train"], data["dev"], data["test"]
    scored_on = {"dev": (dev_s, dev_b.examples), "test": (test_s, test_b.examples)}  # §4.2's sentences and examples
    inputs = {name: {"read": len(data[name][1].examples) + len(data[name][1].skipped), "skipped": len(data[name][1].skipped)}
              for name in TREEBANKS}  # skipped: longer than max_length tokens
    inputs.update({f"documents_{s}": {"read": len(data["coref-" + s][0].examples) + len(data["coref-" + s][0].skipped),
                                      "skipped": len(data["coref-" + s][0].skipped),
                                      "mentions": sum(map(len, data["coref-" + s][1].values())),
                                      "min_mentions": min_mentions} for s in COREF_SPLITS})
    windows = {s: data["coref-" + s] for s in COREF_SPLITS}
    baselines = coref_baselines(windows["test"][1])
    out = {}
    for m in methods:
        got = maps[m]
        result = {"method": m, "name": METHOD_NAMES[m], "inputs": inputs}
        if got["treebank-test"] and got["treebank-dev"]:
            on = heads_data if m == HEADS_METHOD and heads_data else scored_on
            result["unit"] = "head" if next(iter(got["treebank-test"].values())).shape[1] > 1 else "layer"
            result["syntax"] = score_syntax(got["treebank-dev"], got["treebank-test"], on["dev"][0], on["test"][0],
                                            causal=lm.causal)
            result["special_share"] = special_shares(got["treebank-test"], on["test"][1])
            result["special_share_sentences"] = sentence_sink_shares(got["treebank-test"], on["test"][1])
        result["coref"] = {**score_coref(got["coref-dev"], got["coref-test"], windows, causal=lm.causal),
                           "baselines": baselines}
        if got["treebank-train"] and got["treebank-dev"] and got["treebank-test"]:
            result["probe"] = score_probe(probe_data(got["treebank-train"], train_b.examples, train_s),
                                          probe_data(got["treebank-dev"], dev_b.examples, dev_s),
                                          probe_data(got["treebank-test"], test_b.examples, test_s),
                                          seeds=seeds, epochs=epochs, device=lm.device)
        if m == HEADS_METHOD:
            result["subset"] = {"everything": everything, "sentences": None if everything else heads_sentences,
                                "documents": None if everything else heads_documents}
            result["squared_norms"] = squared_norm_summary(compare)
        out[m] = result
    return out


def squared_norm_summary(acc: dict) -> dict:
    """The JSON of :func:`squared_norm_agreement`'s ``acc``: rows compared, the median row r and the share of rows
    with the same argmax, each with its 95 % interval over the sentences compared (resampled; the median of each
    replicated sample: :func:`helpers.mixing.stats.median_interval`; the share a ratio of sums), and how many
    sentences. ``None`` where no row was compared."""
    r = np.asarray(acc.get("r", []), dtype=np.float64)
    same, rows = np.asarray(acc.get("same_by", []), np.float64), np.asarray(acc.get("rows_by", []), np.float64)
    n = len(rows)
    out = {"rows": int(acc.get("rows", 0)), "median_r": _r(np.median(r)) if len(r) else None,
           "same_argmax": _r(acc["same"] / acc["rows"]) if acc.get("rows") else None, "sentences": n,
           "median_r_interval": None, "same_argmax_interval": None}
    if len(r):
        out["median_r_interval"] = _interval(median_interval(r, acc["r_unit"], n), DECIMALS)
    if acc.get("rows"):
        c = bootstrap.counts(n)
        out["same_argmax_interval"] = _interval(bootstrap.percentile_interval(bootstrap.ratio_replicates(same, rows, c)),
                                                DECIMALS)
    return out


def mixing_key(lm: LoadedModel, method: str, settings: dict, data_dir=None) -> dict:
    """The cache key of one method's scores: the model, the method, the settings that change them (per-head value
    zeroing: also its subset, and whether it ran on everything), the corpora's files and this code (with
    :mod:`helpers.mixing.maps`, which it imports)."""
    s = dict(settings)
    if method == HEADS_METHOD:
        s["everything"] = subset_everything(lm)
    else:
        s.pop("heads_sentences", None)
        s.pop("heads_documents", None)
    return {"model": lm.fingerprint(), "method": method, "settings": s,
            "data": {name: file_digest(corpus_files(spec, data_dir=data_dir)) for name, spec in TREEBANKS.items()},
            "code": code_digest(score_methods)}


@takes_context
def run_mixing(lm: LoadedModel, ctx: RunContext | None = None, *, methods: Sequence[str] = METHODS,
               max_sentences: int | None = None, max_documents: int | None = None, train_sentences: int | None = None,
               heads_sentences: int = 20, heads_documents: int = 1, seeds: Sequence[int] = (0, 1, 2), epochs: int = 3,
               max_length: int = MAX_LENGTH, min_mentions: int | None = None) -> dict[str, dict]:
    """``{method: scores}`` (:func:`score_methods`), each method's cached on its own (JSON keyed by
    :func:`mixing_key`): the methods not yet cached are computed together, in one pass over each corpus."""
    methods = check_methods(methods)
    settings = {"max_sentences": max_sentences, "max_documents": max_documents, "train_sentences": train_sentences,
                "heads_sentences": heads_sentences, "heads_documents": heads_documents, "seeds": list(seeds),
                "epochs": epochs, "max_length": max_length, "min_mentions": min_mentions}
    keys = {m: mixing_key(lm, m, settings, ctx.data_dir) for m in methods}
    computed: dict[str, dict] = {}

    def compute(method: str) -> dict:
        if method not in computed:
            todo = [m for m in methods if m not in computed and (
                m == method or refresh_requested() or not artifact_path("mixing", keys[m], ".json", ctx.cache_dir).is_file())]
            computed.update(score_methods(lm, todo, max_sentences=max_sentences, max_documents=max_documents,
                                          train_sentences=train_sentences, heads_sentences=heads_sentences,
                                          heads_documents=heads_documents, seeds=seeds, epochs=epochs,
                                          max_length=max_length, min_mentions=min_mentions, data_dir=ctx.data_dir,
                                          cache_root=ctx.cache_dir, progress=ctx.progress))
        return computed[method]

    return {m: cached_json("mixing", keys[m], lambda m=m: compute(m), cache_root=ctx.cache_dir) for m in methods}


# ------------------------------------------------------------------------------- the chapter's views


def summary_rows(results: dict[str, dict]) -> list[dict]:
    """The chapter's table: one row per method (§4.2 "all relations" held out, the relations whose unit beats the
    offset baseline by :data:`SPECIALISED_MARGIN` points, §4.3 antecedent selection, §5 attention-only probe: the
    mean over seeds with its interval and the seeds' sd), each score with its 95 % interval, then the paper's
    weights-based numbers (BERT-base, WSJ / CoNLL-2012: :mod:`helpers.paper`)."""
    rows = []
    for m, r in results.items():
        rel = r.get("syntax", {}).get("relations", {})
        a, c, p = rel.get(ALL), r.get("coref", {}), r.get("probe")
        rows.append({
            "method": METHOD_NAMES[m], "unit": r.get("unit", "—"),
            "§4.2 all (held out)": _scored(a["held_out_accuracy"], a["held_out_ci"], a["unit"]) if a else None,
            "§4.2 baseline": f"{a['baseline_accuracy']:.1f}" if a else None,
            "§4.2 specialised": f"{specialised(rel)} of {len(rel) - 1}" if rel else None,
            "§4.3 antecedent": _scored(c["accuracy"], c["interval"], c["unit"]) if c.get("accuracy") is not None else None,
            "§5 Attn probe UAS": _scored(p["mean"], p.get("interval"), f"sd {p['sd']:.1f}") if p else None,
        })
    row, coref = paper.TABLE1[ALL], paper.TABLE2[paper.COREF_HEAD_ROW]
    rows.append({"method": "paper: attention weights (BERT-base)", "unit": "head",
                 "§4.2 all (held out)": f"{row.accuracy} ({row.head}, in-sample)", "§4.2 baseline": f"{row.baseline}",
                 "§4.2 specialised": None, "§4.3 antecedent": f"{coref.all} ({paper.COREF_HEAD.value})",
                 "§5 Attn probe UAS": f"{paper.TABLE3['Attn']}"})
    return rows


SPECIALISED_MARGIN = 15  # points over the offset baseline that make a unit relation-specific (as in §4.2's claims)


def specialised(relations: dict[str, dict]) -> int:
    """How many relations (not ``all``) have a held-out unit at least :data:`SPECIALISED_MARGIN` points above the
    best offset baseline."""
    return sum(1 for k, v in relations.items() if k != ALL and v["held_out_accuracy"] is not None
               and v["held_out_accuracy"] - v["baseline_accuracy"] >= SPECIALISED_MARGIN)


def _scored(value, interval, unit) -> str:
    text = f"{value:.1f}" + (f" [{interval[0]:.1f}, {interval[1]:.1f}]" if interval else "")
    return f"{text} ({unit})"


def relation_rows(results: dict[str, dict]) -> list[dict]:
    """Per relation, each method's held-out accuracy (and its unit), beside the offset baseline and the paper's
    best head (Table 1, the closest Stanford relation)."""
    first = next((r for r in results.values() if r.get("syntax")), None)
    if first is None:
        return []
    rows = []
    for rel, base in first["syntax"]["relations"].items():
        ref = paper.table1_row(rel)
        row = {"relation": rel, "count": base["count"], "baseline": f"{base['baseline_accuracy']:.1f} ({base['baseline_offset']:+d})"}
        for m, r in results.items():
            v = r.get("syntax", {}).get("relations", {}).get(rel)
            row[m] = f"{v['held_out_accuracy']:.1f} ({v['unit']})" if v else None
        row["paper (weights)"] = f"{ref[1].accuracy} ({ref[1].head})" if ref else None
        rows.append(row)
    return rows


def example_sentence(sentences: list[Sentence], batch: EncodedBatch, *, min_words: int = 6, max_words: int = 12) -> Encoded:
    """The example of the chapter's figures, by rule: the first GUM test sentence (not skipped) of ``min_words`` to
    ``max_words`` words, else the first one."""
    for ex in batch.examples:
        if min_words <= len(sentences[ex.index]) <= max_words:
            return ex
    return batch.examples[0]


def example_maps(lm: LoadedModel, results: dict[str, dict], example: Encoded) -> dict[str, dict]:
    """``{method: {"unit", "words", "map" [word, word]}}``: each method's unit chosen on dev for all relations
    (:func:`held_out`), drawn on ``example`` (its word-level map; a head-to-dependent unit's map as the model
    computes it, rows attending)."""
    methods = [m for m in results if results[m].get("syntax")]
    maps = word_maps(lm, [example], methods, batch_size=1)
    words = (["BOS"] if lm.causal else ["[CLS]"])[: example.lead] + list(example.words) + ["[SEP]"][: example.trail]
    out = {}
    for m in methods:
        unit = results[m]["syntax"]["relations"][ALL]["unit"]
        layer, _, head = unit.lstrip("L").partition("-")
        out[m] = {"unit": unit, "words": words, "map": maps[m][example.index][int(layer) - 1, int(head or 1) - 1]}
    return out



def sizes_note(results: dict[str, dict]) -> str:
    """The sentence that says what the scores were computed on (from the results themselves): sentences of GUM dev,
    test and train, coreference documents, and per-head value zeroing's subset."""
    plain = next((r for m, r in results.items() if m != HEADS_METHOD and r.get("inputs")), None)
    parts = []
    if plain is not None:
        i = plain["inputs"]

        def read(name: str) -> str:
            left = f" ({i[name]['skipped']} left out: longer than the length limit)" if i[name]["skipped"] else ""
            return f"{i[name]['read']}{left}"

        dev, test = i["documents_dev"], i["documents_test"]
        rule = (f", as many as it takes for their first windows to hold {dev['min_mentions']} evaluated mentions"
                if dev.get("min_mentions") else "")
        mentions = f", with {dev['mentions']} and {test['mentions']} evaluated mentions" if "mentions" in dev else ""
        parts.append(f"the first sentences of GUM dev and test ({read('dev')} and {read('test')}; §4.2, and §5's "
                     f"development and test sets), the first {read('train')} sentences of GUM train (§5's training "
                     f"set) and the first documents of the dev and test coreference splits{rule} "
                     f"({read('documents_dev')} and {read('documents_test')}{mentions}; §4.3, each document's first "
                     "window)")
    heads = results.get(HEADS_METHOD)
    if heads is not None:
        sub = heads["subset"]
        if sub["everything"]:
            parts.append("per-head value zeroing on all of them (the model ran on an accelerator)")
        else:
            s = heads.get("syntax", {}).get("sentences", {"dev": 0, "test": 0})
            documents = (f"the first {sub['documents']} documents of each coreference split" if sub["documents"]
                         else "no coreference document")
            parts.append(f"per-head value zeroing, which reruns every layer heads × tokens times a sentence, on the CPU "
                         f"only on {sub['sentences']} sentence{'s' * (sub['sentences'] != 1)} drawn at random (seed "
                         f"{HEADS_SEED}) from each of GUM dev and test ({s['dev']} and {s['test']} scored; no probe "
                         f"trained) and {documents}, so its scores are of other, fewer inputs than the other rows' and "
                         "are not compared with them")
    return "Scored on " + "; ".join(parts) + "." if parts else "Nothing was scored."


def sink_lines(results: dict[str, dict]) -> dict[str, list | None]:
    """Per method ``[layer]``: the mean share of a row on the special positions (first and last;
    :func:`special_shares`), for the chapter's figure."""
    out = {}
    for m, r in results.items():
        share = r.get("special_share")
        if share:
            parts = [np.asarray(share[k]) for k in ("first", "last") if share.get(k) is not None]
            out[METHOD_NAMES[m]] = (sum(parts)).tolist() if parts else None
    return out


def methods_note(results: dict[str, dict]) -> str:
    """The sentence that names the methods scored (a decoder on the CPU runs fewer: :mod:`helpers.mixing.section`)."""
    left = [METHOD_NAMES[m] for m in METHODS if m not in results]
    return (f"Scored: {', '.join(METHOD_NAMES[m] for m in results)}"
            + (f"; not run here: {', '.join(left)} (value zeroing reruns every layer once per token, ALTI forms a vector "
               "per pair of tokens: minutes for a deep decoder on the CPU; an accelerator runs them all)." if left else "."))
