"""Coreference: reading OntoGUM brackets, head words and types, candidates, baselines, head accuracy."""
import json

import numpy as np
import pytest

from helpers.cli import main
from helpers.context import RunContext
from helpers.data.conllu_io import read_conllu
from helpers.data.ontogum import CorefAlignmentError, Mention, build_document, read_ontogum
from helpers.coref.stats import Query, agree, baseline_predictions, head_predictions, queries_in_window, window_words
from helpers.data.corpora import Document
from tolerances import EPS64, round_off

FIX = __import__("pathlib").Path(__file__).parents[1] / "fixtures"


@pytest.fixture
def toy_doc():
    doc = Document("GUM_toy_coref", tuple(read_conllu(FIX / "coref_toy.conllu")))
    return build_document(doc, FIX / "coref_toy.conll")


def test_brackets_nested_and_errors(tmp_path):
    f = tmp_path / "x.conll"
    f.write_text("0\tA\t(3(4)\n1\tB\t_\n2\tC\t3)\n3\tD\t(5)\n")
    words, spans = read_ontogum(f)
    assert words == ["A", "B", "C", "D"] and spans == [(0, 0, "4"), (0, 2, "3"), (3, 3, "5")]
    f.write_text("0\tA\t(3\n1\tB\t_\n")
    with pytest.raises(ValueError, match="opened but never closed"):
        read_ontogum(f)
    f.write_text("0\tA\t3)\n")
    with pytest.raises(ValueError, match=r"x.conll:1: closing bracket"):
        read_ontogum(f)


def test_head_words_and_types(toy_doc):
    by_span = {(m.start, m.end): m for m in toy_doc.mentions}
    assert by_span[(2, 4)].head_word == "dog" and by_span[(2, 4)].kind == "nominal"  # "the big dog"
    assert by_span[(0, 0)].kind == "proper" and by_span[(6, 6)].kind == "pronoun"
    assert by_span[(6, 6)].gender == "Masc" and by_span[(6, 6)].person == "3"


def test_alignment_is_checked(tmp_path, toy_doc):
    bad = tmp_path / "bad.conll"
    bad.write_text((FIX / "coref_toy.conll").read_text().replace("\tMary\t", "\tMarie\t"))
    doc = Document("GUM_toy_coref", tuple(read_conllu(FIX / "coref_toy.conllu")))
    with pytest.raises(CorefAlignmentError, match="'Marie'"):
        build_document(doc, bad)


def test_queries_candidates_and_baselines(toy_doc):
    queries = {q.mention.start: q for q in queries_in_window(toy_doc, 0, len(toy_doc.words), 0)}
    assert sorted(queries) == [6, 8, 13]  # He, the dog, John (second mentions of each chain)
    he = queries[6]
    assert he.candidates == (0, 4) and he.correct == frozenset({0})
    # no exact or head match; "dog" (singular, third person, gender unknown) agrees with "He" and is nearer
    assert baseline_predictions(he, 0) == {"nearest": 4, "head match": None, "rule-based": 4}
    dog = queries[8]
    assert baseline_predictions(dog, 0) == {"nearest": 6, "head match": 4, "rule-based": 4}
    john = queries[13]
    assert baseline_predictions(john, 0)["rule-based"] == 0  # exact string match wins
    # a window that starts after John: "He" has no antecedent inside it
    assert 6 not in {q.mention.start for q in queries_in_window(toy_doc, 5, len(toy_doc.words), 1)}


def one_window(attn, queries, candidates="mentions"):
    """:func:`head_predictions` of one encoder window's map (a batch of one)."""
    size = attn.shape[-1]
    return head_predictions(attn[None], [size], [size - 2], [queries], candidates)[0]


def test_head_accuracy_on_constructed_attention(toy_doc):
    queries = queries_in_window(toy_doc, 0, len(toy_doc.words), 0)
    n = len(toy_doc.words)
    attn = np.full((1, 2, n + 2, n + 2), 1.0 / (n + 2))
    for q in queries:  # head 0 attends from each mention's head word to its antecedent's head word
        attn[0, 0, q.head + 1, max(q.correct) + 1] = 0.9
        attn[0, 1, q.head + 1, q.head] = 0.9  # head 1 attends to the previous word
    correct = one_window(attn, queries)
    assert correct[0, 0].all()
    assert correct[0, 1].sum() < len(queries)


def test_window_words_respects_budget():
    assert window_words([1, 2, 3, 1], 0, 3) == 2 and window_words([5, 1], 0, 3) == 1


def test_coref_command_json(tiny_model_dir, toy_coref_data, tmp_path):

    data = toy_coref_data
    out = tmp_path / "coref.json"
    rc = main(["coref", "--model", str(tiny_model_dir), "--data-dir", str(data), "--json", str(out), "--quiet",
               "--max-length", "60",
               "--cache-dir", str(tmp_path / "c")])
    assert rc == 0
    result = json.loads(out.read_text())
    assert result["mentions"] == {"all": 3, "pronoun": 1, "proper": 1, "nominal": 1}
    assert np.asarray(result["per_head"]["all"]).shape == (2, 4)
    # tolerance: a percentage of small counts (relative 1e-6)
    assert result["baselines"]["rule-based"]["all"] == pytest.approx(100 * 2 / 3)
    assert result["paper"]["Head 5-4"]["all"] == 65
    words = result["every_word_candidates"]
    assert words["candidates"] == "every word of the window" and np.asarray(words["per_head"]["all"]).shape == (2, 4)
    assert words["best_head"]["chosen_on"] == "dev"
    # the head against each baseline on the same mentions, with its paired interval over documents
    gains = result["best_head"]["gain_over"]
    assert set(gains) == {"nearest", "head match", "rule-based"}
    acc = result["best_head"]["accuracy"]["all"]
    for name, g in gains.items():
        assert set(g) == {"gain", "interval", "documents"}
        # tolerance: a difference of two percentages of the same 3 mentions (float64 round-off)
        assert g["gain"] == pytest.approx(acc - result["baselines"][name]["all"], abs=1e-9)


def _mention(chain, head, kind, word, number=None, gender=None, person=None):
    return Mention(chain, head, head, head, kind, (word,), word, number, gender, person)


def test_person_is_set_for_pronouns_only(toy_doc):
    by_word = {m.head_word: m for m in toy_doc.mentions}
    assert by_word["he"].person == "3"
    assert by_word["dog"].person is None and by_word["john"].person is None  # NOUN, PROPN: unknown


def test_agreement_unknown_agrees_known_must_match():
    john = _mention("1", 0, "proper", "john", number="Sing")                    # person unknown
    they = _mention("2", 2, "pronoun", "they", number="Plur", person="3")
    me = _mention("1", 5, "pronoun", "i", number="Sing", person="1")
    she = _mention("3", 3, "pronoun", "she", number="Sing", gender="Fem", person="3")
    assert agree(john, me) and agree(me, john)          # unknown person agrees with 1st person
    assert not agree(they, me)                          # number and person differ
    assert not agree(she, me)                           # person differs
    assert agree(_mention("4", 1, "nominal", "x"), she)  # nothing known
    # the sieve: no exact or head match; "john" agrees with "I" (unknown person) although "they" is nearer
    query = Query(me, 5, (0, 2), frozenset({0}), 0, (john, they))
    assert baseline_predictions(query, 0) == {"nearest": 2, "head match": None, "rule-based": 0}
    # were a proper name third person, nothing would agree and the last sieve would pick the nearest
    third = Query(me, 5, (0, 2), frozenset({0}), 0, (_mention("1", 0, "proper", "john", number="Sing", person="3"), they))
    assert baseline_predictions(third, 0)["rule-based"] == 2


def test_every_word_candidates_against_a_loop(toy_doc):
    queries = queries_in_window(toy_doc, 0, len(toy_doc.words), 0)
    n = len(toy_doc.words)
    rng = np.random.default_rng(0)
    attn = rng.random((2, 3, n + 2, n + 2))
    attn[0, 0] = 0.0
    for q in queries:  # head (0, 0): antecedent gets 0.5, a non-mention word after the mention gets 0.6
        attn[0, 0, q.head + 1, max(q.correct) + 1] = 0.5
        attn[0, 0, q.head + 1, min(q.head + 1, n - 1) + 1] = 0.6
    mentions = one_window(attn, queries)
    words = one_window(attn, queries, candidates="words")
    assert mentions[0, 0].all() and not words[0, 0].any()
    for l in range(2):
        for h in range(3):
            for k, q in enumerate(queries):
                best, pick = -1.0, None
                for w in range(n):  # every other word of the window, earliest on ties
                    if w != q.head and attn[l, h, q.head + 1, w + 1] > best:
                        best, pick = attn[l, h, q.head + 1, w + 1], w
                assert words[l, h, k] == (pick in q.correct)
    with pytest.raises(ValueError, match="candidates 'all'"):
        one_window(attn, queries, candidates="all")


def test_shard_size_holds_the_default_models_maps_per_shard():
    """Larger models get smaller shards (memory), always whole batches; the default model keeps the size
    asked for; the coreference windows are cut into shards of COREF_SHARD_EXAMPLES for the default."""
    from types import SimpleNamespace

    from helpers.coref.run import COREF_SHARD_EXAMPLES
    from helpers.pipeline.extraction import SHARD_SIZE, shard_size_for

    def size(layers, heads, **kw):
        return shard_size_for(SimpleNamespace(n_layers=layers, n_heads=heads), **kw)

    assert size(6, 12) == SHARD_SIZE == 256 and size(2, 4) == 256  # the default and the tests' tiny model
    assert size(12, 12) == 128 and size(24, 16) == 32 and size(48, 64) == 32
    assert all(size(layers, heads) % 32 == 0 for layers in range(1, 40) for heads in range(1, 40))
    assert COREF_SHARD_EXAMPLES == 64
    assert size(6, 12, examples=64) == 64 and size(2, 4, examples=64) == 64 and size(12, 12, examples=64) == 32
    assert size(24, 16, examples=64) == 32  # never less than one batch
    assert all(32 <= size(layers, heads, examples=64) <= 64 and size(layers, heads, examples=64) % 32 == 0
               for layers in range(1, 40) for heads in range(1, 40))


def test_coreference_run_does_not_depend_on_the_shard_size(tiny_lm, toy_coref_data, tmp_path, monkeypatch):
    """The coreference run's results are per window (predictions, integer counts), so the order in which
    the store yields the windows, which follows the shard size, changes none of them: what lets
    ``shard_size_for`` cut a base-size model's windows into smaller shards."""
    import helpers.coref.run as coref_run

    runs = []
    for size in (256, 1):
        monkeypatch.setattr(coref_run, "shard_size_for", lambda lm, size=size, **kw: size)
        ctx = RunContext(data_dir=toy_coref_data, cache_dir=tmp_path / f"cache{size}")
        run = coref_run.run_coref(tiny_lm, "test", ctx, setting="windows", max_length=10)
        runs.append(run)
    one, many = runs
    assert len(one.store.shards) == 1 < len(many.store.shards) == len(many.store.batch.examples)
    assert [ex.index for shard in one.store.shards for ex in shard] != [ex.index for shard in many.store.shards for ex in shard]
    for name in ("head_correct", "baseline_correct", "word_correct", "kinds", "documents"):
        np.testing.assert_array_equal(getattr(one, name), getattr(many, name), err_msg=name)
    assert one.accuracy()["all"].tolist() == many.accuracy()["all"].tolist()
    assert json.dumps(one.baseline_accuracy(), sort_keys=True) == json.dumps(many.baseline_accuracy(), sort_keys=True)  # NaN where a kind has no mention
    assert one.head_interval(0, 0) == many.head_interval(0, 0)
    assert [(e[1], e[2], e[3].mention.start) for e in one.examples] == [(e[1], e[2], e[3].mention.start) for e in many.examples]


def test_coreference_predictions_are_kept_and_the_maps_only_on_request(tiny_lm, toy_coref_data, tmp_path, monkeypatch):
    """The heads' predictions are cached, not the windows' maps (unless kept): a second run reads the
    predictions without running the model, and equals a run over cached maps (keep_maps); an example the
    chapter draws runs the model again on its shard and is the one the cached maps give."""
    import helpers.coref.run as coref_run
    import helpers.pipeline.shards as shards_module
    from helpers.data.cache import cache_usage

    kw = dict(setting="windows", max_length=10)
    a = RunContext(data_dir=toy_coref_data, cache_dir=tmp_path / "a")
    first = coref_run.run_coref(tiny_lm, "test", a, **kw)
    usage = cache_usage(tmp_path / "a")
    assert usage["maps"] == 0 and list((tmp_path / "a" / "artifacts").glob("coref-predictions-*.npz"))
    with RunContext(data_dir=toy_coref_data, cache_dir=tmp_path / "b", keep_maps=True).active():
        kept = coref_run.run_coref(tiny_lm, "test", **kw)  # in the context in force
    assert cache_usage(tmp_path / "b")["maps"] > 0

    def no_model(*args, **kwargs):
        raise AssertionError("the model ran: the cached predictions were not read")

    with monkeypatch.context() as patch:
        patch.setattr(shards_module, "iter_map_batches", no_model)  # the route's passes
        again = coref_run.run_coref(tiny_lm, "test", a, **kw)
    for run in (again, kept):
        for name in ("head_correct", "baseline_correct", "word_correct", "kinds", "documents"):
            np.testing.assert_array_equal(getattr(first, name), getattr(run, name), err_msg=name)
    drawn = 0
    for layer in range(tiny_lm.n_layers):
        for head in range(tiny_lm.n_heads):
            a, b = again.example(layer, head, min_gap=0, max_gap=100), kept.example(layer, head, min_gap=0, max_gap=100)
            assert (a is None) == (b is None)
            if a is not None:
                drawn += 1
                assert a[0] == b[0] and a[2] == b[2]
                np.testing.assert_array_equal(a[1], b[1])  # the model's maps made again equal the cached ones
    assert drawn > 0


@pytest.mark.parametrize("seed", [0, 1])
def test_gain_over_pairs_mentions_and_resamples_documents_against_a_loop(seed):
    """The head against a baseline on the same mentions: documents resampled once for both (a loop over
    mentions), the draws those of ``head_interval``."""
    from helpers.coref.run import BASELINES, CorefRun

    rng = np.random.default_rng(seed)
    n_docs, n = 9, 70
    documents = np.sort(rng.integers(0, n_docs, n))
    documents[documents == 4] = 5  # a document without an evaluated mention is not resampled
    kinds = rng.choice(["pronoun", "proper", "nominal"], n)
    heads = rng.random((2, 3, n)) < 0.6
    base = rng.random((len(BASELINES), n)) < np.array([0.2, 0.5, 0.7])[:, None]
    run = CorefRun("test", "windows", heads, base, kinds, documents, n_docs, [])
    for name in ("head match", "rule-based"):
        got = run.gain_over(1, 2, name, n_boot=250, seed=seed)
        b = BASELINES.index(name)
        hits, wins, total = np.zeros(n_docs), np.zeros(n_docs), np.zeros(n_docs)
        for q in range(n):
            hits[documents[q]] += heads[1, 2, q]
            wins[documents[q]] += base[b, q]
            total[documents[q]] += 1
        # tolerance: percentages of whole-number counts, float64 round-off of values <= 100
        tol = round_off(100.0, 4, eps=EPS64)
        assert got["gain"] == pytest.approx(100.0 * (heads[1, 2].mean() - base[b].mean()), abs=tol)
        kept = np.flatnonzero(total > 0)
        assert got["documents"] == len(kept) == n_docs - 1
        draws = np.random.default_rng(seed).integers(0, len(kept), size=(250, len(kept)))
        gains = [100.0 * (hits[kept[i]].sum() - wins[kept[i]].sum()) / total[kept[i]].sum() for i in draws]
        accs = [100.0 * hits[kept[i]].sum() / total[kept[i]].sum() for i in draws]
        np.testing.assert_allclose(got["interval"], np.percentile(gains, [2.5, 97.5]), rtol=0, atol=tol)
        np.testing.assert_allclose(run.head_interval(1, 2, n_boot=250, seed=seed), np.percentile(accs, [2.5, 97.5]),
                                   rtol=0, atol=tol)  # the same draws: the two intervals pair
