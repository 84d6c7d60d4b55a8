"""Heads as parsers: constructed maps with known answers, a slow reference, offsets, the CLI contract."""
import json

import numpy as np
import pytest

from helpers.cli import main
from helpers.data.conllu_io import Sentence
from helpers.syntax.stats import (
    ALL,
    DIRECTIONS,
    OFFSETS,
    HeadScorer,
    bootstrap_interval,
    offset_predictions,
    predict_heads,
    score_heads,
)
from tests.references import antecedent_reference, predict_heads_reference
from tolerances import EPS64, round_off


def sentence(words, heads, rels):
    n = len(words)
    return Sentence(tuple(words), tuple(heads), tuple(rels), ("X",) * n, ("X",) * n, sent_id="s")


TREE = sentence(["the", "cat", "sat", "on", "the", "mat"], [2, 3, 0, 6, 6, 3], ["det", "nsubj", "root", "case", "det", "obl"])


def gold_maps(s, n_layers=2, n_heads=3, good=(1, 2)):
    """Random maps, except head ``good`` = (layer, head) whose dependents attend to their gold head."""
    rng = np.random.default_rng(0)
    n = len(s)
    attn = rng.dirichlet(np.ones(n + 2), size=(n_layers, n_heads, n + 2))
    attn[good] = 0.0
    for i, h in enumerate(s.heads):
        attn[good][i + 1, h if h else n + 1] = 1.0  # root word attends to [SEP]
    attn[good][0, 0] = attn[good][n + 1, n + 1] = 1.0
    return attn


def test_head_pointing_at_gold_head_scores_100():
    scores = score_heads([(0, gold_maps(TREE))], [TREE])
    table = scores.table()
    assert table[ALL]["count"] == 5  # the root word is not counted
    acc = scores.accuracy()
    for rel in ("det", "nsubj", "case", "obl", ALL):
        assert table[rel]["accuracy"] == 100.0
        assert acc[0, 1, 2, scores.relations.index(rel)] == 100.0  # dependent-to-head, head 2-3
    assert table[ALL]["best_head"] == "2-3" and table[ALL]["direction"] == "dependent-to-head"
    assert "root" not in table


def test_transposed_direction():
    n = len(TREE)
    attn = np.zeros((1, 1, n + 2, n + 2))
    for j in range(1, n + 1):  # each word spreads its attention over its own dependents
        deps = [i for i, h in enumerate(TREE.heads) if h == j]
        attn[0, 0, j, [d + 1 for d in deps] or [n + 1]] = 1.0 / max(len(deps), 1)
    row = score_heads([(0, attn)], [TREE]).table()[ALL]
    assert row["accuracy"] == 100.0 and row["direction"] == "head-to-dependent"


def test_special_tokens_self_and_ties():
    n = 4
    attn = np.full((1, 1, n + 2, n + 2), 1e-3)
    attn[..., 0] = attn[..., -1] = 1.0  # [CLS]/[SEP] dominate but are never candidates
    preds = predict_heads(attn[None], [n + 2], [n])[0].numpy()
    assert preds.shape == (2, 1, 1, n)
    np.testing.assert_array_equal(preds, predict_heads_reference(attn, n))
    assert preds[0, 0, 0].tolist() == [2, 1, 1, 1]  # ties -> earliest word; never itself


def test_offsets_on_right_branching_chain():
    n = 6
    chain = sentence(list("abcdef"), [2, 3, 4, 5, 6, 0], ["dep"] * 5 + ["root"])
    assert offset_predictions(3).tolist()[OFFSETS.index(1)] == [2, 3, 0]
    row = score_heads([(0, np.full((1, 1, n + 2, n + 2), 1 / (n + 2)))], [chain]).table()["dep"]
    assert row["baseline_offset"] == 1 and row["baseline_accuracy"] == 100.0


def test_vectorised_accuracy_matches_slow_loops():
    rng = np.random.default_rng(3)
    sents, maps = [], []
    for k in range(6):
        n = int(rng.integers(3, 9))
        heads = [int(rng.integers(0, n + 1)) for _ in range(n)]
        heads = [h if h != i + 1 else 0 for i, h in enumerate(heads)]
        s = sentence([f"w{i}" for i in range(n)], heads, [str(rng.choice(["a", "b", "c"])) for _ in range(n)])
        m = rng.dirichlet(np.ones(n + 2), size=(2, 2, n + 2))
        sents.append(s)
        maps.append(m)
    scores = score_heads(enumerate(maps), sents)
    acc = scores.accuracy()
    for d, direction in enumerate(DIRECTIONS):
        for l in range(2):
            for h in range(2):
                for rel in ("a", "b", "c", ALL):
                    good = total = 0
                    for s, m in zip(sents, maps):
                        a = m[l, h] if direction == "dependent-to-head" else m[l, h].T
                        for i in range(len(s)):
                            if s.heads[i] == 0 or (rel != ALL and s.deprels[i] != rel):
                                continue
                            cand = [(a[i + 1, j + 1], -j) for j in range(len(s)) if j != i]
                            pred = -max(cand)[1] + 1
                            good += pred == s.heads[i]
                            total += 1
                    expected = 100.0 * good / total if total else 0.0
                    # tolerance: a fraction of small counts (relative 1e-6)
                    assert acc[d, l, h, scores.relations.index(rel)] == pytest.approx(expected)


def test_possessive_convention_judges_the_s_token():
    s = sentence(["the", "cat", "'s", "mat"], [2, 4, 2, 0], ["det", "nmod:poss", "case", "root"])
    n = len(s)
    attn = np.zeros((1, 1, n + 2, n + 2))
    attn[0, 0, 1, 2] = attn[0, 0, 2, 3] = attn[0, 0, 3, 4] = attn[0, 0, 4, 1] = 1.0  # "'s" attends to "mat"
    plain, paper = score_heads([(0, attn)], [s]), score_heads([(0, attn)], [s], possessive="nmod:poss")
    assert plain.table()["nmod:poss"]["accuracy"] == 0.0
    assert paper.table()["nmod:poss"]["accuracy"] == 100.0


def test_bootstrap_interval():
    correct, total = np.array([5, 3, 4, 0]), np.array([5, 5, 5, 0])
    lo, hi = bootstrap_interval(correct, total, n_boot=500)
    assert lo <= 100 * 12 / 15 <= hi and 0 <= lo < hi <= 100
    assert bootstrap_interval(total, total) == (100.0, 100.0)


def test_heads_command_contract(tiny_model_dir, toy_conllu, tmp_path):
    out = tmp_path / "heads.json"
    rc = main(["heads", "--conllu", str(toy_conllu), "--model", str(tiny_model_dir), "--max-sentences", "2",
               "--max-length", "9", "--json", str(out), "--quiet", "--cache-dir", str(tmp_path / "c")])
    assert rc == 0
    result = json.loads(out.read_text())
    assert set(result) == {"model", "sentences_used", "sentences_skipped", "relations"}
    assert (result["sentences_used"], result["sentences_skipped"]) == (2, 0)
    assert set(result["relations"]) == {"all", "det", "nsubj", "case", "obl", "punct"}
    row = result["relations"]["all"]
    assert set(row) == {"count", "best_head", "direction", "accuracy", "baseline_accuracy", "baseline_offset"}
    assert row["count"] == 6 + 3 and row["direction"] in DIRECTIONS
    assert 0 <= row["accuracy"] <= 100


def near_tie_maps(s, n_layers=2, n_heads=3, gap=1e-4, seed=0):
    """Maps where every word gives its gold head ``gap`` more weight than the word just before that head:
    distinct in float32, equal once rounded to float16 (whose ties go to the earlier, wrong word)."""
    rng = np.random.default_rng(seed)
    n = len(s)
    attn = rng.dirichlet(np.ones(n + 2), size=(n_layers, n_heads, n + 2)) * 0.2
    for i, h in enumerate(s.heads):
        rival = h - 1 if h - 1 >= 1 and h - 1 != i + 1 else None
        if h == 0 or rival is None:
            continue
        attn[..., i + 1, h] = 0.3 + gap
        attn[..., i + 1, rival] = 0.3
    return (attn / attn.sum(-1, keepdims=True)).astype(np.float32)


def reference_accuracy(maps, sentences):
    """Slow float64 loop: dependent-to-head accuracy of every head over all counted words."""
    total = 0
    out = None
    for attn, s in zip(maps, sentences):
        A = np.asarray(attn, dtype=np.float64)
        L, H = A.shape[:2]
        out = np.zeros((L, H)) if out is None else out
        n = len(s)
        for i, gold in enumerate(s.heads):
            if gold == 0:
                continue
            total += 1
            for l in range(L):
                for h in range(H):
                    best, pred = -1.0, None
                    for j in range(1, n + 1):
                        if j != i + 1 and A[l, h, i + 1, j] > best:
                            best, pred = A[l, h, i + 1, j], j
                    out[l, h] += pred == gold
    return 100.0 * out / total


def test_argmax_scores_from_cached_maps_equal_float64_on_near_ties(tmp_path):
    from helpers.data.cache import _read_shard, _write_shard
    from helpers.core.encoding import Encoded

    sents = [TREE, sentence(["a", "big", "dog", "sat", "on", "the", "big", "mat", "today"], [3, 3, 4, 0, 8, 8, 8, 4, 4],
                            ["det", "amod", "nsubj", "root", "case", "det", "amod", "obl", "advmod"])]
    maps = [near_tie_maps(s, seed=k) for k, s in enumerate(sents)]
    rounded = [m.astype(np.float16) for m in maps]
    assert np.float16(0.3 + 1e-4) == np.float16(0.3)  # the gap vanishes in float16

    path = tmp_path / "shard-00000.npz"
    _write_shard(path, "k", [(Encoded(k, np.zeros(len(s) + 2, np.int64)), m) for k, (s, m) in enumerate(zip(sents, maps))])
    stored = _read_shard(path, 2, 3, "k", [0, 1])

    def score(ms):
        return score_heads(enumerate(ms), sents).accuracy()[0, ..., 0]  # dependent-to-head, "all"

    reference = reference_accuracy(maps, sents)
    # tolerance: percentages of the same integer counts (exact in float64): a couple of roundings of values up to 100
    np.testing.assert_allclose(score([stored[0], stored[1]]), reference, rtol=0, atol=round_off(100.0, eps=EPS64))
    assert not np.allclose(score(rounded), reference)  # float16 storage would have moved the scores

    # coreference: the same candidate argmax on the stored maps as on float64
    from helpers.data.ontogum import Mention
    from helpers.coref.stats import Query, head_predictions

    m = lambda head: Mention("c", head, head, head, "nominal", ("x",), "x")  # noqa: E731
    queries = [Query(m(i), i, tuple(range(i)), frozenset({sents[1].heads[i] - 1}), 0) for i in (4, 6, 7, 8)
               if sents[1].heads[i] - 1 < i]
    assert queries
    n = len(sents[1])
    (got,) = head_predictions(stored[1][None], [n + 2], [n], [queries])
    np.testing.assert_array_equal(got, antecedent_reference(maps[1].astype(np.float64), queries, n))


def test_cached_maps_are_the_live_float32_maps(tiny_lm, toy_conllu, tmp_path):
    from helpers.pipeline.extraction import extract
    from helpers.data.conllu_io import read_conllu
    from helpers.core.encoding import encode_words
    from helpers.core.extract import iter_attention

    sents = read_conllu(toy_conllu)
    batch = encode_words(tiny_lm.tokenizer, [s.words for s in sents])
    store = extract(tiny_lm, batch, level="word", cache_root=tmp_path, progress=False)
    live = {ex.index: a for ex, a in iter_attention(tiny_lm, batch, level="word")}
    for ex, attn in store:
        assert attn.dtype == np.float32 and np.array_equal(attn, live[ex.index])


# ------------------------------------------------------------------- merging, Table 1 rows, Figure 5


def _random_sentences(n_sentences=6, seed=3, min_words=3, max_words=9):
    rng = np.random.default_rng(seed)
    sents, maps = [], []
    for k in range(n_sentences):
        n = int(rng.integers(min_words, max_words))
        heads = [int(rng.integers(0, n + 1)) for _ in range(n)]
        heads = [h if h != i + 1 else 0 for i, h in enumerate(heads)]
        sents.append(sentence([f"w{i}" for i in range(n)], heads, [str(rng.choice(["a", "b", "c", f"r{k}"])) for _ in range(n)]))
        maps.append(rng.dirichlet(np.ones(n + 2), size=(2, 2, n + 2)))
    return sents, maps


def test_merged_scorers_equal_one_scorer_in_order():
    """HeadScorer.merge: shards' partials merged in order == one scorer fed every sentence (relations too)."""
    sents, maps = _random_sentences()
    from helpers.syntax.stats import map_batches

    def scorer(indices):
        part = HeadScorer()
        for batch in map_batches([(k, maps[k]) for k in indices], budget=1):  # one sentence a batch
            part.update(batch, [(sents[ex.index],) for ex in batch.examples])
        return part

    whole = scorer(range(6))
    merged = HeadScorer()
    for chunk in ((1, 0), (), (4, 2, 3), (5,)):  # a shard's batches in any order: its sentences by index
        assert merged.merge(scorer(chunk)) is merged
    a, b = whole.result(), merged.result()
    assert b.relations == a.relations and b.n_sentences == a.n_sentences == 6
    np.testing.assert_array_equal(b.word_correct, a.word_correct)
    np.testing.assert_array_equal(b.word_relation, a.word_relation)
    np.testing.assert_array_equal(b.word_sentence, a.word_sentence)
    assert json.dumps(b.table()) == json.dumps(a.table())
    with pytest.raises(ValueError, match="possessive"):
        HeadScorer().merge(HeadScorer(possessive="nmod:poss"))


def test_table1_rows_are_the_chapters_table(tiny_lm, toy_conllu):
    """The rows the syntax chapter used to build in a cell, now built once in the package."""
    from helpers import paper
    from helpers.syntax.run import run_heads, table1_relations, table1_rows

    run = run_heads(tiny_lm, str(toy_conllu), max_length=60)
    table = run.scores.table()
    expected = []
    for rel in table1_relations(run.scores):  # the chapter's cell, as it was
        ours, ref = table[rel], paper.table1_row(rel)
        expected.append({
            "relation": rel, "count": ours["count"], "head": ours["best_head"],
            "direction": "dep→head" if ours["direction"] == DIRECTIONS[0] else "head→dep",
            "accuracy": round(ours["accuracy"], 1),
            "baseline": f"{ours['baseline_accuracy']:.1f} ({ours['baseline_offset']:+d})",
            "paper relation": ref[0] if ref else "", "paper head": ref[1][0] if ref else "",
            "paper accuracy": str(ref[1][1]) if ref else None,
            "paper baseline": f"{ref[1][2]} ({ref[1][3]:+d})" if ref else "",
        })
    assert table1_rows(run.scores) == expected
    det = next(r for r in expected if r["relation"] == "det")
    assert (det["paper head"], det["paper accuracy"], det["paper baseline"]) == ("8-11", "94.3", "51.7 (+1)")


def _scored_run(sents, maps, *, causal: bool = False):
    """A :class:`HeadsRun` over in-memory word maps, scored by :class:`HeadScorer` (Figure 5's input)."""
    from helpers.syntax.run import HeadsRun

    class Store:
        examples = [type("E", (), {"index": k})() for k in range(len(sents))]
        skipped: list = []

        def __getitem__(self, i):
            return maps[i]

    return HeadsRun("toy", sents, Store(), score_heads(enumerate(maps), sents, causal=causal), causal=causal)


def test_figure5_examples_follow_the_rule():
    """The strongest relations' best heads on the first sentence they parse fully (the chapter's former cell)."""
    from helpers.syntax.run import example_sentence, figure5_examples, strongest_relations, table1_relations

    sents, maps = _random_sentences(n_sentences=12, seed=5, min_words=8, max_words=14)
    for m, s in zip(maps, sents):  # head 2-2 (dependent-to-head) points every word at its gold head
        m[1, 1] = 0.0
        for i, h in enumerate(s.heads):
            m[1, 1, i + 1, h if h else len(s) + 1] = 1.0
    run = _scored_run(sents, maps)
    # the planted head is found: 2-2, dependent-to-head, parses every relation perfectly and is the best head overall
    np.testing.assert_array_equal(run.scores.accuracy()[DIRECTIONS.index("dependent-to-head"), 1, 1], 100.0)
    assert (run.scores.best(ALL)["best_head"], run.scores.best(ALL)["direction"]) == ("2-2", "dependent-to-head")
    table = run.scores.table()
    gains = {r: table[r]["accuracy"] - table[r]["baseline_accuracy"] for r in table1_relations(run.scores) if r != ALL}
    assert strongest_relations(run.scores, 3) == sorted(gains, key=gains.get, reverse=True)[:3]
    got = figure5_examples(run, 3)
    assert got and all((ex.head, ex.direction) == ("2-2", "dependent-to-head") for ex in got)  # the planted head
    for ex in got:  # what the cell computed
        best = run.scores.best(ex.relation)
        d, l, h = best["_index"]
        i = example_sentence(run, ex.relation, best["_index"])
        assert ex.sentence == i and ex.head == best["best_head"] and ex.direction == DIRECTIONS[d]
        np.testing.assert_array_equal(ex.attn, maps[i][l, h] if d == 0 else maps[i][l, h].T)
        assert ex.words == ["[CLS]", *sents[i].words, "[SEP]"]
        assert ex.dependents == [k + 1 for k, r in enumerate(sents[i].deprels) if r == ex.relation]
        assert ex.title == f"{ex.relation}: head {best['best_head']} ({'dep→head' if d == 0 else 'head→dep'})"
    assert all(ex.special == (0, len(ex.words) - 1) for ex in got)  # [CLS] and [SEP]


@pytest.mark.parametrize("lead", [1, 0], ids=["bos", "no-bos"])
def test_figure5_examples_on_a_decoders_maps(lead):
    """A decoder's maps (BOS and the words, or the words alone; nothing after them) under its causal mask: a planted
    head 2-2 that points every word at its gold head (each head precedes its dependent here) is found, and the
    panels label BOS (or nothing) before the words and nothing after; the dependents and the positions hidden as
    special follow that layout, so the last word is drawn (hiding the last position would hide it)."""
    from helpers.presentation.views import attention_lines
    from helpers.syntax.run import figure5_examples

    rng = np.random.default_rng(11)
    sents, maps = [], []
    for k in range(12):
        n = int(rng.integers(8, 14))
        heads = [0] + [int(rng.integers(1, i + 1)) for i in range(1, n)]  # word i + 1's head is among words 1..i
        sents.append(sentence([f"w{i}" for i in range(n)], heads, [str(rng.choice(["a", "b", f"r{k}"])) for _ in range(n)]))
        m = np.tril(rng.dirichlet(np.ones(n + lead), size=(2, 2, n + lead)))  # a query sees its prefix
        m /= m.sum(-1, keepdims=True)
        m[1, 1] = 0.0
        for i, h in enumerate(heads):
            m[1, 1, i + lead, h - 1 + lead if h else 0] = 1.0  # the root word: BOS, or (no BOS) itself
        maps.append(m)
    got = figure5_examples(_scored_run(sents, maps, causal=True), 3)
    assert got and all((ex.head, ex.direction) == ("2-2", "dependent-to-head") for ex in got)
    for ex in got:
        words = sents[ex.sentence].words
        assert ex.words == ["BOS"] * lead + list(words) and len(ex.words) == ex.attn.shape[-1]
        assert ex.dependents == [k + lead for k, r in enumerate(sents[ex.sentence].deprels) if r == ex.relation]
        assert ex.special == tuple(range(lead))

    def drawn(chart) -> set[tuple[int, int]]:
        spec = chart.to_dict()
        data = spec["layer"][0]["data"]
        return {(r["i"], r["j"]) for r in (spec["datasets"][data["name"]] if "name" in data else data["values"])}

    a = np.tril(np.full((4, 4), 1.0))  # BOS and three words; the last word attends to itself (and its prefix)
    a /= a.sum(-1, keepdims=True)
    labels = ["BOS"] * lead + ["w0", "w1", "w2", "w3"][: 4 - lead]
    lines = drawn(attention_lines(a, labels, hide_special=True, special=tuple(range(lead))))
    assert (3, 3) in lines and not any(j < lead for _, j in lines)  # the last word stays; BOS (if any) is hidden
    assert (3, 3) not in drawn(attention_lines(a, labels, hide_special=True))  # the encoder's default hides it


# ------------------------------------------------------------------------------ paired intervals (§4.2's claims)


def random_scores(n_sentences=12, n_layers=2, n_heads=3, seed=0):
    """A :class:`HeadScores` of random correctness: words of three relations in ``n_sentences`` sentences (the
    third sentence has no counted word, as a skipped one), every head-direction and offset right at random."""
    from helpers.syntax.stats import HeadScores

    rng = np.random.default_rng(seed)
    sizes = rng.integers(1, 7, n_sentences)
    sizes[2] = 0
    word_sentence = np.repeat(np.arange(n_sentences), sizes)
    W = len(word_sentence)
    word_relation = rng.integers(1, 4, W)  # 0 is "all"
    word_correct = rng.random((2, n_layers, n_heads, W)) < rng.random((2, n_layers, n_heads, 1))
    offset_correct = rng.random((len(OFFSETS), W)) < 0.4
    return HeadScores([ALL, "det", "obj", "amod"], word_relation, word_sentence, word_correct, offset_correct, n_sentences)


def loop_counts(scores, relation, predicate):
    """Per sentence: the words of ``relation`` and those for which ``predicate(word)`` holds (a loop over words)."""
    correct, total = np.zeros(scores.n_sentences), np.zeros(scores.n_sentences)
    for w, s in enumerate(scores.word_sentence):
        if relation == ALL or scores.relations[scores.word_relation[w]] == relation:
            total[s] += 1
            correct[s] += bool(predicate(w))
    return correct, total


def loop_percentiles(values):
    return tuple(float(x) for x in np.percentile(values, [2.5, 97.5]))


@pytest.mark.parametrize("seed", [0, 3])
def test_gain_interval_pairs_sentences_against_a_loop(seed):
    from helpers.syntax.stats import gain_interval

    rng = np.random.default_rng(seed)
    total = rng.integers(0, 6, 15)
    correct, base = rng.binomial(total, 0.7), rng.binomial(total, 0.4)
    got = gain_interval(correct, base, total, n_boot=300, seed=seed)
    kept = np.flatnonzero(total > 0)  # the sentences with a word, drawn as bootstrap_interval draws them
    draws = np.random.default_rng(seed).integers(0, len(kept), size=(300, len(kept)))
    gains, accs = [], []
    for row in draws:
        i = kept[row]
        gains.append(100.0 * (correct[i].sum() - base[i].sum()) / total[i].sum())
        accs.append(100.0 * correct[i].sum() / total[i].sum())
    # tolerance: sums of whole numbers (exact), one division, the same percentile: float64 round-off of values <= 100
    np.testing.assert_allclose(got, loop_percentiles(gains), rtol=0, atol=round_off(100.0, 4, eps=EPS64))
    # the head's own interval comes from the same draws (the replicates pair)
    np.testing.assert_allclose(bootstrap_interval(correct, total, n_boot=300, seed=seed), loop_percentiles(accs),
                               rtol=0, atol=round_off(100.0, 4, eps=EPS64))
    assert np.isnan(gain_interval(correct * 0, base * 0, total * 0)).all()  # no word: no interval


def test_held_out_rows_pair_the_head_and_its_baseline_on_the_same_words():
    from helpers.syntax.run import chosen_index, held_out_rows

    dev, test = random_scores(seed=1), random_scores(seed=2)
    rows = {r["relation"]: r for r in held_out_rows(dev, test, [ALL, "det", "obj"], n_boot=200, seed=5)}
    for relation, row in rows.items():
        d, l, h = chosen_index(row)
        assert (row["dev_head"], row["dev_direction"]) == (f"{l + 1}-{h + 1}", DIRECTIONS[d])
        k = OFFSETS.index(row["baseline_offset"])
        head, total = loop_counts(test, relation, lambda w: test.word_correct[d, l, h, w])
        base, _ = loop_counts(test, relation, lambda w: test.offset_correct[k, w])
        # tolerance: percentages of whole-number counts (float64 round-off of values <= 100)
        assert row["gain"] == pytest.approx(100.0 * (head.sum() - base.sum()) / total.sum(), abs=round_off(100.0, eps=EPS64))
        assert row["gain"] == pytest.approx(row["held_out_accuracy"] - row["baseline_accuracy"], abs=1e-4)  # 4 decimals
        kept = np.flatnonzero(total > 0)
        assert row["sentences"] == len(kept)
        draws = np.random.default_rng(5).integers(0, len(kept), size=(200, len(kept)))
        gains = [100.0 * (head[kept[i]].sum() - base[kept[i]].sum()) / total[kept[i]].sum() for i in draws]
        np.testing.assert_allclose(row["gain_ci"], loop_percentiles(gains), rtol=0, atol=round_off(100.0, 4, eps=EPS64))
        baseline = [100.0 * base[kept[i]].sum() / total[kept[i]].sum() for i in draws]
        np.testing.assert_allclose(row["baseline_ci"], loop_percentiles(baseline), rtol=0,
                                   atol=round_off(100.0, 4, eps=EPS64))


def test_statement_replicates_against_a_loop_over_resampled_sentences():
    """§4.2's statements over relations: every relation's held-out gain in one joint resampling of the test
    sentences, and the best head-direction chosen again on each resampling of dev, against loops over words."""
    from helpers.core.bootstrap import counts
    from helpers.syntax.run import chosen_index, direction_replicates, held_out_gain_replicates, held_out_rows

    dev, test = random_scores(seed=1), random_scores(seed=2)
    relations = ["det", "obj", "amod"]
    held = held_out_rows(dev, test, relations, n_boot=10)
    gains, n = held_out_gain_replicates(test, held, relations, n_boot=40, seed=7)
    scored = np.flatnonzero(np.bincount(test.word_sentence, minlength=test.n_sentences) > 0)
    assert n == len(scored) == test.n_sentences - 1
    c = counts(len(scored), n_boot=40, seed=7)
    for k, row in enumerate(held):
        d, l, h = chosen_index(row)
        o = OFFSETS.index(row["baseline_offset"])
        for b in range(40):
            weight = dict(zip(scored, c[b]))  # how often each scored sentence is drawn
            right = wrong = words = 0.0
            for w, s in enumerate(test.word_sentence):
                if test.relations[test.word_relation[w]] == row["relation"]:
                    right += weight[s] * test.word_correct[d, l, h, w]
                    wrong += weight[s] * test.offset_correct[o, w]
                    words += weight[s]
            want = 100.0 * (right - wrong) / words if words else np.nan
            np.testing.assert_allclose(gains[b, k], want, rtol=0, atol=round_off(100.0, 4, eps=EPS64))

    dep, n_dev = direction_replicates(dev, relations, n_boot=30, seed=4)
    scored = np.flatnonzero(np.bincount(dev.word_sentence, minlength=dev.n_sentences) > 0)
    assert n_dev == len(scored)
    c = counts(len(scored), n_boot=30, seed=4)
    L, H = dev.word_correct.shape[1:3]
    for k, relation in enumerate(relations):
        for b in range(30):
            weight = dict(zip(scored, c[b]))
            best, choice, words = -1.0, None, 0.0
            for l in range(L):  # best()'s order: layer, head, then direction; the first maximum wins
                for h in range(H):
                    for d in range(2):
                        right = sum(weight[s] * dev.word_correct[d, l, h, w] for w, s in enumerate(dev.word_sentence)
                                    if dev.relations[dev.word_relation[w]] == relation)
                        if right > best:
                            best, choice = right, d
            words = sum(weight[s] for w, s in enumerate(dev.word_sentence) if dev.relations[dev.word_relation[w]] == relation)
            assert dep[b, k] == (words > 0 and choice == 0), (relation, b)
    # with every sentence drawn once, the choice is the table's
    ones = dev.every_head_correct("det")[0].sum(0)
    d, l, h = dev.best("det")["_index"]
    assert int(np.argmax(ones)) == (l * H + h) * 2 + d
