"""§4.2's heads scored while their maps are made (issue 51): a shard extracted in this run is scored from the maps the
forward passes leave on the model's device (``extract(reduce=...)``), a shard found in the cache from the stored
maps; either way the scores are those of :func:`helpers.syntax.stats.score_heads` over the written store (the
reference: one scorer reading the cache in its order), and the written shards are those written without scoring."""
from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from helpers.core.encoding import encode_words
from helpers.data.conllu_io import read_conllu
from helpers.pipeline.extraction import extract
from helpers.reduce import merge_all
from helpers.syntax.stats import HeadScorer, score_heads, shard_scorers

POSSESSIVE = "nmod:poss"


@pytest.fixture
def treebank(toy_conllu, tmp_path):
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


def test_shards_scored_as_extracted_equal_the_stores_scores(tiny_lm, treebank, tmp_path):
    sentences = read_conllu(treebank)
    batch = encode_words(tiny_lm.tokenizer, [s.words for s in sentences], max_length=60)
    conventions = (None, POSSESSIVE)
    calls = []

    def reduce(number, batches):
        def seen():
            for mb in batches:
                calls.append((number, mb.weights.device.type, mb.weights.dtype, len(mb)))
                yield mb
        return shard_scorers(seen(), sentences, conventions, causal=tiny_lm.causal)

    kw = dict(level="word", batch_size=2, shard_size=4, progress=False)
    store = extract(tiny_lm, batch, cache_root=tmp_path / "scored", reduce=reduce, **kw)
    assert len(store.shards) == 3 and sorted(store.partials) == [0, 1, 2]
    assert sorted({c[0] for c in calls}) == [0, 1, 2] and sum(c[3] for c in calls) == len(sentences)
    assert {c[1:3] for c in calls} == {(tiny_lm.device.type, torch.float32)}  # where the model made them, as stored
    for k, convention in enumerate(conventions):
        merged = merge_all((store.partials[n][k] for n in range(3)), HeadScorer(possessive=convention)).result()
        same_scores(merged, score_heads(store, sentences, possessive=convention))

    # the shards written while scoring are the shards written without: the same maps, bit for bit
    plain = extract(tiny_lm, batch, cache_root=tmp_path / "plain", **kw)
    for (ex_a, a), (ex_b, b) in zip(store.items(), plain.items(), strict=True):
        assert ex_a.index == ex_b.index
        np.testing.assert_array_equal(a, b)

    # a second run finds every shard in the cache: nothing is computed, nothing reduced
    calls.clear()
    again = extract(tiny_lm, batch, cache_root=tmp_path / "scored", reduce=reduce, **kw)
    assert calls == [] and again.partials == {} and again.stats["shards_computed"] == 0


def test_shard_scorers_take_the_batches_in_any_order(tiny_lm, treebank, tmp_path):
    """A shard's passes come in length order; its sentences are still added in index order (the store's), so the
    partial is the store's, relations numbered alike."""
    from helpers.syntax.stats import map_batches

    sentences = read_conllu(treebank)
    batch = encode_words(tiny_lm.tokenizer, [s.words for s in sentences], max_length=60)
    store = extract(tiny_lm, batch, level="word", batch_size=4, shard_size=12, cache_root=tmp_path, progress=False)
    batches = list(map_batches(store.items(), budget=1))  # one map a batch
    (scorer,) = shard_scorers(reversed(batches), sentences, (None,))
    same_scores(scorer.result(), score_heads(store, sentences))


def test_run_heads_cold_and_warm_give_the_stores_scores(tiny_lm, treebank, tmp_path, monkeypatch):
    """``run_heads`` scores a cold corpus without reading its maps back from the cache, a warm one from the cache,
    with the same scores, and the possessive variant from the same predictions."""
    from helpers.context import RunContext
    from helpers.data.cache import AttentionStore
    from helpers.syntax.run import run_heads

    ctx = RunContext(cache_dir=tmp_path, progress=False)
    read = []
    shard_items = AttentionStore.shard_items
    monkeypatch.setattr(AttentionStore, "shard_items",
                        lambda self, number, *a, **k: read.append(number) or shard_items(self, number, *a, **k))
    cold = run_heads(tiny_lm, str(treebank), ctx, max_length=60, variants=(POSSESSIVE,))
    assert read == []  # scored as extracted: no shard read back
    warm = run_heads(tiny_lm, str(treebank), ctx, max_length=60, variants=(POSSESSIVE,))
    assert read == list(range(len(warm.store.shards)))  # every shard read once
    sentences = cold.sentences
    for run in (cold, warm):
        same_scores(run.scores, score_heads(run.store, sentences))
        same_scores(run.variants[POSSESSIVE], score_heads(run.store, sentences, possessive=POSSESSIVE))
    assert cold.store.partials == {} and warm.store.partials == {}  # nothing left in the store


def test_reduce_needs_cached_weight_maps(tiny_lm, toy_conllu, tmp_path):
    sentences = read_conllu(toy_conllu)
    batch = encode_words(tiny_lm.tokenizer, [s.words for s in sentences], max_length=60)
    for kw in ({"maps": "norms"}, {"cache": False}):
        with pytest.raises(ValueError, match="reduce"):
            extract(tiny_lm, batch, cache_root=tmp_path, reduce=lambda n, b: None, progress=False, **kw)


def test_norm_maps_scored_where_the_pass_leaves_them_equal_the_streamed_stores(tiny_lm, treebank, tmp_path, monkeypatch):
    """Chapter 07's Table 1 on norm maps: scored from each pass's padded word-level norm maps (one batch at a time,
    on the model's device), the scores of the streaming store read map by map, as before."""
    from helpers.context import RunContext
    from helpers.core.map_batches import iter_map_batches
    from helpers.core.norm_maps import iter_norm_maps
    from helpers.norms.run import run_table1_norms
    from helpers.pipeline.extraction import encode_treebank, plan_extraction

    sentences, batch, digest = encode_treebank(tiny_lm, str(treebank), max_length=60)
    # the batched word-level norm maps are the per-example ones, bit for bit
    by_example = {ex.index: m for ex, m in iter_norm_maps(tiny_lm, batch, level="word", batch_size=4)}
    for mb in iter_map_batches(tiny_lm, batch, batch_size=4, maps="norms", level="word"):
        assert mb.weights is None
        for ex, norms in mb.items():
            np.testing.assert_array_equal(norms.numpy(), by_example.pop(ex.index))
    assert by_example == {}
    from helpers.data.cache import AttentionStore

    made = []
    store_made = AttentionStore._made
    monkeypatch.setattr(AttentionStore, "_made", lambda self, number: made.append(number) or store_made(self, number))
    scores = run_table1_norms(tiny_lm, str(treebank), RunContext(cache_dir=tmp_path, progress=False), max_length=60)
    assert made == []  # no map went through the store's per-example host arrays
    streamed = plan_extraction(tiny_lm, batch, level="word", cache=False, maps="norms")
    same_scores(scores, score_heads(streamed, sentences))
    assert made  # the reference did
