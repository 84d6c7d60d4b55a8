"""The context-mixing section around the maps (helpers.mixing.run, command, section): the scoring helpers against
slow, obvious loops on small hand-made inputs, the command's errors, and the record's sizes."""
from __future__ import annotations

import itertools

import numpy as np
import pytest
import torch

from helpers.context import RunContext
from helpers.data.conllu_io import read_conllu
from helpers.mixing import run as mr
from helpers.mixing.maps import METHODS
from helpers.mixing.section import SECTION
from helpers.syntax.stats import ALL, DIRECTIONS, score_heads
from tolerances import round_off


# ------------------------------------------------------------------------------------------- §4.2


def _accuracy_loop(maps: dict, sentences, d: int, l: int, h: int, relation: str) -> float:
    """Percent of counted words of ``relation`` whose most-attended other word (specials excluded; head-to-dependent:
    the transposed map) is the gold head: the paper's rule, one word at a time."""
    hits = total = 0
    for i, s in enumerate(sentences):
        a = maps[i][l, h] if d == 0 else maps[i][l, h].T
        for w in range(len(s)):
            if s.heads[w] == 0 or (relation != ALL and s.deprels[w] != relation):
                continue
            best, pick = -np.inf, None
            for c in range(len(s)):
                if c != w and a[w + 1, c + 1] > best:
                    best, pick = a[w + 1, c + 1], c + 1
            hits += pick == s.heads[w]
            total += 1
    return 100.0 * hits / total


def test_held_out_chooses_on_dev_and_scores_on_test(toy_conllu):
    sentences = read_conllu(toy_conllu)
    rng = np.random.default_rng(0)
    layers, units = 2, 3
    maps = {k: {i: rng.random((layers, units, len(s) + 2, len(s) + 2)).astype(np.float32) for i, s in enumerate(sentences)}
            for k in ("dev", "test")}
    scored = {k: score_heads(maps[k].items(), sentences) for k in maps}
    rows = mr.held_out(scored["dev"], scored["test"], [ALL, "det"], units, n_boot=50)
    for relation in (ALL, "det"):
        # the slow reference: every unit's dev accuracy, ties to the lowest layer, head, then direction
        dev = {(l, h, d): _accuracy_loop(maps["dev"], sentences, d, l, h, relation)
               for l, h, d in itertools.product(range(layers), range(units), range(2))}
        l, h, d = max(dev, key=lambda k: (dev[k], -k[0], -k[1], -k[2]))
        row = rows[relation]
        assert row["unit"] == f"{l + 1}-{h + 1}" and row["direction"] == DIRECTIONS[d]
        assert row["held_out_accuracy"] == pytest.approx(_accuracy_loop(maps["test"], sentences, d, l, h, relation), abs=1e-4)
        lo, hi = row["held_out_ci"]
        assert lo <= row["held_out_accuracy"] <= hi


def test_unit_labels_are_one_based():
    assert mr.unit_label(0, 0, 12) == "1-1" and mr.unit_label(5, 11, 12) == "6-12"
    assert mr.unit_label(3, 0, 1) == "L4"  # a layer map: one unit a layer


# ---------------------------------------------------------------------------------- agreements


def _example(index: int, n_words: int, lead: int = 1, trail: int = 1):
    from helpers.core.encoding import Encoded

    return Encoded(index, np.zeros(n_words + lead + trail, np.int64), np.arange(n_words + lead + trail), n_words,
                   tuple("w" * n_words), lead, trail)


def test_special_shares_are_the_mean_row_share_on_the_first_and_last_position():
    rng = np.random.default_rng(1)
    maps = {0: rng.random((2, 3, 5, 5)), 1: rng.random((2, 3, 4, 4)) * 7}  # rows not normalised: the share normalises
    out = mr.special_shares(maps, [_example(0, 3), _example(1, 2)])
    for layer in range(2):
        first = last = 0.0
        for a in maps.values():
            for h in range(3):
                for i in range(a.shape[-1]):
                    first += a[layer, h, i, 0] / a[layer, h, i].sum() / (3 * a.shape[-1])
                    last += a[layer, h, i, -1] / a[layer, h, i].sum() / (3 * a.shape[-1])
        assert out["first"][layer] == pytest.approx(first / 2, abs=1e-4)
        assert out["last"][layer] == pytest.approx(last / 2, abs=1e-4)
    decoder = mr.special_shares({0: maps[0][..., :4, :4]}, [_example(0, 3, 1, 0)])
    assert decoder["last"] is None and len(decoder["first"]) == 2  # a decoder has no [SEP]


def test_squared_norm_agreement_against_a_loop():
    rng = np.random.default_rng(2)
    b, L, H, T = 2, 2, 3, 5
    norms = torch.from_numpy(rng.random((b, L, H, T, T)))
    mask = torch.tensor([[1] * T, [1] * (T - 1) + [0]])
    norms[1, ..., T - 1, :] = 0
    norms[1, ..., :, T - 1] = 0
    squared = norms ** 2 / (norms ** 2).sum(-1, keepdim=True).clamp_min(1e-300)
    exact = {}
    mr.squared_norm_agreement(squared, norms, mask, exact)
    # r = 1 up to float64 round-off of sums over the T positions (norms, products, the square root)
    assert np.allclose(exact["r"], 1.0, rtol=0, atol=round_off(1.0, 4 * T, eps=np.finfo(np.float64).eps))
    assert exact["same"] == exact["rows"]
    assert exact["rows"] == L * H * (T + T - 1)
    vz = torch.from_numpy(rng.random((b, L, H, T, T)))
    got = {}
    mr.squared_norm_agreement(vz, norms, mask, got)
    want, same = [], 0
    for k in range(b):
        t = int(mask[k].sum())
        for l, h, i in itertools.product(range(L), range(H), range(t)):
            x, y = vz[k, l, h, i, :t].numpy(), squared[k, l, h, i, :t].numpy()
            want.append(np.corrcoef(x, y)[0, 1])
            same += int(x.argmax() == y.argmax())
    assert np.allclose(sorted(got["r"]), sorted(want), rtol=0, atol=round_off(1.0, 4 * T, eps=np.finfo(np.float64).eps))
    assert got["same"] == same
    # per sentence, the unit the intervals resample: each r's sentence, and each sentence's rows and agreements
    assert got["r_unit"] == [0] * (L * H * T) + [1] * (L * H * (T - 1))
    assert got["rows_by"] == [L * H * T, L * H * (T - 1)] and sum(got["same_by"]) == same
    mr.squared_norm_agreement(vz, norms, mask, got)  # a second batch: its sentences numbered on
    assert got["r_unit"][-1] == 3 and len(got["rows_by"]) == 4


def test_squared_norm_summary_resamples_sentences():
    from helpers.core.bootstrap import counts

    rng = np.random.default_rng(3)
    acc = {"r": rng.random(40).tolist(), "r_unit": sorted(rng.integers(0, 5, 40).tolist()),
           "same_by": [3, 4, 1, 0, 6], "rows_by": [8, 8, 2, 3, 9], "same": 14, "rows": 30}
    out = mr.squared_norm_summary(acc)
    assert out["sentences"] == 5 and out["rows"] == 30
    assert out["median_r"] == pytest.approx(np.median(acc["r"]), abs=5e-5)
    assert out["same_argmax"] == pytest.approx(14 / 30, abs=5e-5)
    r, unit = np.asarray(acc["r"]), np.asarray(acc["r_unit"])
    medians, shares = [], []
    for c in counts(5):  # one replicate at a time: the sentences drawn, their rows repeated
        medians.append(np.median(np.concatenate([r[unit == u].repeat(int(k)) for u, k in enumerate(c)])))
        shares.append((c * acc["same_by"]).sum() / (c * acc["rows_by"]).sum())
    assert out["median_r_interval"] == pytest.approx(np.percentile(medians, [2.5, 97.5]), abs=5e-5)
    assert out["same_argmax_interval"] == pytest.approx(np.percentile(shares, [2.5, 97.5]), abs=5e-5)
    empty = mr.squared_norm_summary({})
    assert empty["median_r"] is None and empty["median_r_interval"] is None and empty["same_argmax_interval"] is None


def test_sentence_sink_shares_average_to_the_chapters_share():
    from helpers.mixing.claims import sink_share

    rng = np.random.default_rng(4)
    maps = {0: rng.random((2, 3, 5, 5)), 2: rng.random((2, 3, 4, 4)) * 7, 3: rng.random((2, 3, 6, 6))}
    examples = [_example(0, 3), _example(1, 4), _example(2, 2), _example(3, 4)]  # example 1 has no map
    per = mr.sentence_sink_shares(maps, examples)
    assert per["units"] == [0, 2, 3]
    for u, share in zip(per["units"], per["share"]):  # the loop: each row's share on [CLS] and [SEP], averaged
        a = maps[u]
        rows = [a[l, h, i] / a[l, h, i].sum() for l in range(2) for h in range(3) for i in range(a.shape[-1])]
        assert share == pytest.approx(np.mean([row[0] + row[-1] for row in rows]), abs=1e-6)
    whole = sink_share({"special_share": mr.special_shares(maps, examples)})
    assert np.mean(per["share"]) == pytest.approx(whole, abs=2e-4)  # special_shares rounds each layer to 4 decimals
    decoder = mr.sentence_sink_shares({0: maps[0][..., :4, :4]}, [_example(0, 3, 1, 0)])  # BOS only
    a = maps[0][..., :4, :4]
    assert decoder["share"][0] == pytest.approx((a[..., 0] / a.sum(-1)).mean(), abs=1e-6)


def test_score_syntax_keeps_the_chosen_units_counts_per_sentence(toy_conllu):
    from helpers.core.bootstrap import counts, percentile_interval, ratio_replicates

    sentences = read_conllu(toy_conllu)
    rng = np.random.default_rng(6)
    maps = {k: {i: rng.random((2, 3, len(s) + 2, len(s) + 2)).astype(np.float32) for i, s in enumerate(sentences)}
            for k in ("dev", "test")}
    out = mr.score_syntax(maps["dev"], maps["test"], sentences, sentences, causal=False)
    row, per = out["relations"][ALL], out["per_sentence"]
    assert per["units"] == [i for i, s in enumerate(sentences) if any(h != 0 for h in s.heads)]
    assert per["total"] == [sum(h != 0 for h in sentences[i].heads) for i in per["units"]]
    correct, total = np.asarray(per["correct"], float), np.asarray(per["total"], float)
    assert 100 * correct.sum() / total.sum() == pytest.approx(row["held_out_accuracy"], abs=5e-5)
    c = counts(len(total))
    assert percentile_interval(100 * ratio_replicates(correct, total, c)) == pytest.approx(row["held_out_ci"], abs=5e-3)


# ------------------------------------------------------------------------------------ the command


def _parse(argv):
    from helpers.cli import build_parser

    return build_parser().parse_args(["mixing", *argv])


def test_an_unknown_method_is_one_line_naming_the_choices(capsys):
    with pytest.raises(SystemExit) as exit_:
        _parse(["--methods", "alti,rollouts"])
    err = capsys.readouterr().err.strip()
    assert exit_.value.code == 2 and "\n" not in err
    assert "rollouts" in err and all(m in err for m in METHODS)
    with pytest.raises(SystemExit) as exit_:
        _parse(["--methods", ","])
    assert exit_.value.code == 2 and "none given" in capsys.readouterr().err


@pytest.mark.parametrize("option, value", [("--max-sentences", "0"), ("--seeds", "0"), ("--epochs", "x"),
                                           ("--heads-sentences", "-1")])
def test_bad_sizes_exit_2(option, value, capsys):
    with pytest.raises(SystemExit) as exit_:
        _parse([option, value])
    assert exit_.value.code == 2 and option in capsys.readouterr().err


def test_methods_keep_the_tables_order():
    assert _parse(["--methods", "alti, attention,alti"]).methods == ("attention", "alti")
    assert _parse(["--heads-sentences", "0"]).heads_sentences == 0  # 0: per-head value zeroing on nothing on the CPU


def test_the_record_sizes():
    full, small = SECTION.settings(RunContext(small=False)), SECTION.settings(RunContext(small=True))
    assert full["methods"] == small["methods"] == METHODS and full["seeds"] == small["seeds"] == (0, 1, 2)
    for k in ("max_sentences", "train_sentences", "heads_sentences", "epochs"):
        assert small[k] <= full[k], k
    # the book's §4.3 reads documents until 150 evaluated mentions (an interval over documents with width), per-head
    # value zeroing 30 sentences a split; the small configuration one document, whatever its mentions
    assert full["max_documents"] is None and full["min_mentions"] == 150 and full["heads_sentences"] == 30
    assert small["max_documents"] == 1 and small["min_mentions"] is None
    assert SECTION.paper is None and SECTION.inputs == ()


def test_coref_windows_stop_once_their_mentions_reach_the_rule(tiny_lm, toy_data, monkeypatch):
    """Documents are read in order until their windows hold ``min_mentions`` evaluated mentions, never past
    ``max_documents``; without a rule, every document up to ``max_documents``."""
    from helpers.data.ontogum import load_coref

    one = load_coref("test", data_dir=toy_data)[0]
    monkeypatch.setattr(mr, "load_coref", lambda split, **kw: [one] * 5)  # five documents of the toy's mentions
    _, queries, _ = mr.coref_windows(tiny_lm, "test", max_documents=None, max_length=60, data_dir=toy_data)
    each = len(queries[0])
    assert len(queries) == 5 and each > 0 and all(len(q) == each for q in queries.values())
    for wanted, documents in ((1, 1), (each, 1), (each + 1, 2), (3 * each, 3), (100 * each, 5)):
        batch, queries, _ = mr.coref_windows(tiny_lm, "test", max_documents=None, max_length=60, min_mentions=wanted,
                                             data_dir=toy_data)
        assert len(queries) == len(batch.examples) == documents, wanted
    _, queries, _ = mr.coref_windows(tiny_lm, "test", max_documents=2, max_length=60, min_mentions=100 * each,
                                     data_dir=toy_data)
    assert len(queries) == 2


def test_value_zeroing_reads_the_mentions_head_words_rows():
    from helpers.coref.stats import Query

    def query(head):
        return Query(None, head, (), frozenset(), 0)

    batch = mr.EncodedBatch([_example(0, 5), _example(1, 4, 1, 0)])
    rows = mr.mention_rows(batch, {0: [query(3), query(1), query(3)], 1: [query(2)]})
    assert rows == {0: [2, 4], 1: [3]}  # word positions, [CLS] / BOS first; each head word once
    tokens = mr.token_rows(batch.examples, rows, (2, 7))
    assert tokens[0].tolist() == [False, False, True, False, True, False, False]  # one token a word here
    assert tokens[1].tolist() == [False, False, False, True, False, False, False]  # padding never asked


@pytest.mark.parametrize("documents, sentences, said", [
    (0, 30, "on 30 sentences drawn at random (seed 0) from each of GUM dev and test (30 and 29 scored; no probe trained) "
            "and no coreference document,"),
    (2, 1, "on 1 sentence drawn at random (seed 0) from each of GUM dev and test (1 and 1 scored; no probe trained) "
           "and the first 2 documents of each coreference split,")])
def test_the_sizes_note_names_per_head_value_zeroings_subset(documents, sentences, said):
    from helpers.mixing.run import HEADS_METHOD, sizes_note

    heads = {"subset": {"everything": False, "sentences": sentences, "documents": documents},
             "syntax": {"sentences": {"dev": sentences, "test": sentences - (sentences > 1)}}}
    note = sizes_note({HEADS_METHOD: heads})
    assert note.startswith("Scored on per-head value zeroing") and said in note


@pytest.mark.parametrize("rule, said", [
    (None, "the first documents of the dev and test coreference splits (1 and 1, with 2 and 0 evaluated mentions; "),
    (150, "the first documents of the dev and test coreference splits, as many as it takes for their first windows "
          "to hold 150 evaluated mentions (16 and 17, with 153 and 155 evaluated mentions; ")])
def test_the_sizes_note_names_the_coreference_documents_and_their_mentions(rule, said):
    documents = {"dev": (1, 2), "test": (1, 0)} if rule is None else {"dev": (16, 153), "test": (17, 155)}
    inputs = {"train": {"read": 100, "skipped": 0}, "dev": {"read": 50, "skipped": 0}, "test": {"read": 50, "skipped": 1},
              **{f"documents_{s}": {"read": n, "skipped": 0, "mentions": m, "min_mentions": rule}
                 for s, (n, m) in documents.items()}}
    note = mr.sizes_note({"attention": {"inputs": inputs}})
    assert said in note and "GUM dev and test (50 and 50 (1 left out: longer than the length limit);" in note


def test_per_head_sentences_are_drawn_from_the_whole_split_by_the_seed():
    batch = mr.EncodedBatch([_example(i, 3) for i in range(100)])
    drawn = mr.heads_sample(batch, 30)
    indices = [ex.index for ex in drawn]
    assert len(set(indices)) == 30 and indices == sorted(indices) and max(indices) >= 50  # not the first 30
    assert indices == [ex.index for ex in mr.heads_sample(batch, 30)]  # the seed fixes them
    assert indices != [ex.index for ex in mr.heads_sample(batch, 30, seed=1)]
    assert len(mr.heads_sample(batch, 200)) == 100
