"""§4.2's heads, and chapter 07's on norm maps, scored on the one route (:func:`helpers.pipeline.route.reduce_maps`):
each shard's batches scored where the maps are, made by the model's passes (cold) or read from the cache (warm), the
partials merged in shard order. Either way the scores are those of one :class:`HeadScorer` per shard of the written
(or streamed) store, fed its maps in the store's order, merged in shard order (the reference), relations numbered
alike; and the written shards are those written without scoring."""
from __future__ import annotations

import json
from functools import partial

import numpy as np

from helpers.context import RunContext
from helpers.data.conllu_io import read_conllu
from helpers.pipeline.extraction import encode_treebank, extract, plan_extraction
from helpers.pipeline.route import reduce_maps
from helpers.reduce import merge_all
from helpers.syntax.stats import HeadScorer, HeadScorers, map_batches

POSSESSIVE = "nmod:poss"


def twelve(toy_conllu, tmp_path):
    """The toy treebank four times over (12 sentences, new ids): several shards of a few sentences each."""
    text = toy_conllu.read_text()
    path = tmp_path / "twelve.conllu"
    path.write_text("".join(text.replace("# sent_id = ", f"# sent_id = r{k}-") for k in range(4)))
    return path


def same_scores(a, b) -> None:
    assert a.relations == b.relations
    assert a.n_sentences == b.n_sentences
    for name in ("word_relation", "word_sentence", "word_correct", "offset_correct"):
        np.testing.assert_array_equal(getattr(a, name), getattr(b, name))
    assert json.dumps(a.table()) == json.dumps(b.table())


def shard_items(store, number):
    """``(example, attn)`` of a cached store's shard ``number``, in the shard's order."""
    maps = store.shard_maps(number)
    return [(ex, maps[ex.index]) for ex in store.shards[number]]


def shardwise(store, sentences, **kw):
    """The reference: a scorer per shard of ``store``, fed its maps in the store's order, merged in shard order."""
    parts = []
    for number in range(len(store.shards)):
        part = HeadScorer(**kw)
        for batch in map_batches(shard_items(store, number), budget=1):  # one map a batch
            part.update(batch, [(sentences[ex.index],) for ex in batch.examples])
        parts.append(part)
    return merge_all(parts, HeadScorer(**kw)).result()


def test_heads_on_the_route_cold_and_warm_equal_the_stores_shards(tiny_lm, toy_conllu, tmp_path):
    sentences, batch, digest = encode_treebank(tiny_lm, str(twelve(toy_conllu, tmp_path)), max_length=60)
    ctx = RunContext(cache_dir=tmp_path / "route", progress=False)
    new = partial(HeadScorers, (None, POSSESSIVE), tiny_lm.causal)
    kw = dict(level="word", keep=True, ctx=ctx, extras=lambda ex: (sentences[ex.index],), source_digest=digest,
              batch_size=2, shard_size=4)
    cold = reduce_maps(tiny_lm, batch, new, **kw).result()  # the maps made by the passes, and written (keep)
    store = extract(tiny_lm, batch, cache_root=tmp_path / "route", source_digest=digest, batch_size=2, shard_size=4,
                    progress=False)
    assert len(store.shards) == 3 and store.stats["shards_computed"] == 0  # the route wrote every shard
    warm = reduce_maps(tiny_lm, batch, new, **kw).result()  # the maps read back
    for k, convention in enumerate((None, POSSESSIVE)):
        reference = shardwise(store, sentences, possessive=convention)
        same_scores(cold[k], reference)
        same_scores(warm[k], reference)

    # the shards written while scoring are the shards written without: the same maps, bit for bit
    plain = extract(tiny_lm, batch, cache_root=tmp_path / "plain", source_digest=digest, batch_size=2, shard_size=4,
                    progress=False)
    for (ex_a, a), (ex_b, b) in zip(store.items(), plain.items(), strict=True):
        assert ex_a.index == ex_b.index
        np.testing.assert_array_equal(a, b)


def test_run_heads_keeps_the_maps_for_figure_5(tiny_lm, toy_conllu, tmp_path):
    """``run_heads`` writes the maps it scores (Figure 5 reads examples back from them) and scores a warm run from
    them, with the same scores, the possessive variant from the same predictions."""
    from helpers.syntax.run import run_heads

    corpus = str(twelve(toy_conllu, tmp_path))
    ctx = RunContext(cache_dir=tmp_path, progress=False)
    cold = run_heads(tiny_lm, corpus, ctx, max_length=60, variants=(POSSESSIVE,))
    assert cold.store.directory is not None and list(cold.store.directory.glob("shard-*.npz"))
    warm = run_heads(tiny_lm, corpus, ctx, max_length=60, variants=(POSSESSIVE,))
    sentences = read_conllu(corpus)
    for run in (cold, warm):
        same_scores(run.scores, shardwise(run.store, sentences))
        same_scores(run.variants[POSSESSIVE], shardwise(run.store, sentences, possessive=POSSESSIVE))
        assert run.used == len(sentences) and run.skipped == 0
    np.testing.assert_array_equal(warm.store[3], cold.store[3])


def test_merged_in_another_order_the_relations_are_numbered_otherwise(tiny_lm, toy_conllu, tmp_path):
    """The shard order is what makes the merged partials one scorer's: relations are numbered by first appearance."""
    sentences, batch, digest = encode_treebank(tiny_lm, str(twelve(toy_conllu, tmp_path)), max_length=60)
    store = extract(tiny_lm, batch, cache_root=tmp_path, source_digest=digest, batch_size=2, shard_size=4,
                    progress=False)

    def shard(number):
        part = HeadScorer()
        for b in map_batches(shard_items(store, number)):
            part.update(b, [(sentences[ex.index],) for ex in b.examples])
        return part

    forward = merge_all([shard(n) for n in range(3)], HeadScorer()).result()
    backward = merge_all([shard(n) for n in (2, 1, 0)], HeadScorer()).result()
    assert forward.relations != backward.relations and set(forward.relations) == set(backward.relations)


def test_norm_maps_scored_on_the_route_equal_the_streamed_stores(tiny_lm, toy_conllu, tmp_path):
    """Chapter 07's Table 1 on norm maps: scored from each pass's padded word-level norm maps (one batch at a time,
    on the model's device), the scores of the streaming store's norm maps read shard by shard; with ``keep_maps``
    the norm maps are written, and a warm run reads them, with the same scores."""
    from helpers.core.map_batches import iter_map_batches
    from helpers.core.map_batches import iter_norm_maps
    from helpers.data.cache import cache_usage
    from helpers.norms.run import run_table1_norms

    corpus = str(twelve(toy_conllu, tmp_path))
    sentences, batch, _ = encode_treebank(tiny_lm, corpus, max_length=60)
    # the batched word-level norm maps are the per-example ones, bit for bit
    by_example = {ex.index: m for ex, m in iter_norm_maps(tiny_lm, batch, level="word", batch_size=4)}
    for mb in iter_map_batches(tiny_lm, batch, batch_size=4, maps="norms", level="word"):
        assert mb.weights is None
        for ex, norms in mb.items():
            np.testing.assert_array_equal(norms.numpy(), by_example.pop(ex.index))
    assert by_example == {}

    streamed = plan_extraction(tiny_lm, batch, level="word", cache=False, maps="norms")
    reference = shardwise(streamed, sentences)
    scores = run_table1_norms(tiny_lm, corpus, RunContext(cache_dir=tmp_path / "a", progress=False), max_length=60)
    assert cache_usage(tmp_path / "a")["maps"] == 0  # read once, written only when kept
    same_scores(scores, reference)
    kept = RunContext(cache_dir=tmp_path / "b", progress=False, keep_maps=True)
    for _ in range(2):  # made and written, then read back
        same_scores(run_table1_norms(tiny_lm, corpus, kept, max_length=60), reference)
    assert cache_usage(tmp_path / "b")["maps"] > 0


def test_heads_coref_and_norm_heads_reduce_through_the_route():
    """§4.2's heads, §4.3's antecedents and chapter 07's norm-map Table 1 each name an accumulator and call
    reduce_maps; their accumulators speak the protocol (update a batch with extras, merge, result)."""
    import ast
    from pathlib import Path

    from helpers.coref.stats import AntecedentScorer
    from helpers.reduce import Accumulator

    package = Path(__file__).resolve().parents[2] / "helpers"
    for path in ("syntax/run.py", "coref/run.py", "norms/run.py"):
        calls = {n.func.id for n in ast.walk(ast.parse((package / path).read_text()))
                 if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)}
        assert "reduce_maps" in calls, path
    for make in (HeadScorer, partial(HeadScorers, (None, POSSESSIVE), False), AntecedentScorer):
        acc = make()
        assert isinstance(acc, Accumulator) and acc.merge(make()) is acc
