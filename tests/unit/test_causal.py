"""Every section under a causal mask (a decoder: a head sees its prefix), on the maps of tiny random decoders
(GPT-2 with BOS, a GQA Llama with and without BOS; :mod:`tiny_decoders`), each against a slow loop written from the
definitions: the §3 statistics, §4.2's head scoring, the next-token gradients through the model's own LM head, the
§6 Jensen-Shannon distances, §4.3's candidates, §5's probe features, and "not applicable" claims."""
from __future__ import annotations

import copy
import dataclasses
import math

import numpy as np
import pytest
import torch

from claim_rows import claim_as
from helpers.claims import FIELDS, NOT_APPLICABLE, RULE_FIELDS, VERDICTS, Claim, not_applicable
from helpers.core.encoding import encode_ids, encode_words
from helpers.core.extract import attention_for
from helpers.core.models import load_model
from helpers.surface.stats import (
    CAUSAL_DEFINITIONS,
    ENTROPY_SMOOTHING,
    SurfaceAccumulator,
    SurfaceStats,
    batch_statistics,
    token_masks,
)

import tiny_decoders as td
from tests.references import map_batch
from tolerances import EPS64, float64_passes, round_off


def segment_statistics(attn, masks):
    """The §3 statistics of one segment: :func:`batch_statistics` of a batch of one."""
    return {k: v[0] for k, v in batch_statistics(map_batch([attn]).weights, [attn.shape[-1]], [masks]).items()}


def add(acc, attn, masks):
    """Feed one segment's map to ``acc`` as the route feeds a batch of one."""
    acc.update(map_batch([np.asarray(attn)]), [(masks,)])

WORDS = [["the", "cat", "sat", "on", "the", "mat", "."], ["a", "dog", "sat", ",", "the", "dog", "is", "big"]]


@pytest.fixture(scope="module")
def decoders(tmp_path_factory):
    root = tmp_path_factory.mktemp("causal-unit")
    gpt2, llama = td.save_gpt2(root / "gpt2"), td.save_llama(root / "llama")
    return {"gpt2": load_model(str(gpt2)), "llama": load_model(str(llama)), "llama-no-bos": load_model(str(llama), bos=False)}


KINDS = ("gpt2", "llama", "llama-no-bos")


def _sharpen(attn: np.ndarray, seed: int) -> np.ndarray:
    """A random tiny model's rows are near uniform; raise them to random powers and renormalise over the visible
    keys, so that the statistics differ between heads (still causal: zero above the diagonal)."""
    rng = np.random.default_rng(seed)
    power = rng.uniform(1, 40, size=attn.shape[:2] + (1, 1))
    A = np.tril(np.asarray(attn, dtype=np.float64) ** power * rng.uniform(0.1, 1, size=attn.shape))
    return A / A.sum(-1, keepdims=True)


def _segment(lm) -> np.ndarray:
    """One input as the segments are made: BOS (when the model keeps it) + text, no [SEP]."""
    ids = encode_words(lm.tokenizer, [WORDS[0] + WORDS[1]]).examples[0].input_ids
    return ids


# ------------------------------------------------------------------------------------ §3


def reference_causal(attn: np.ndarray) -> dict[str, np.ndarray]:
    """Slow loops over heads, rows and the keys each row sees, from the definitions (surface.stats' docstring)."""
    L, H, n, _ = attn.shape
    out = {k: np.zeros((L, H)) for k in ("self", "prev", "cls", "punct_first", "entropy")}
    for l in range(L):
        for h in range(H):
            a = attn[l, h]
            ent = 0.0
            for i in range(n):
                out["self"][l, h] += a[i, i] / n
                if i >= 1:
                    out["prev"][l, h] += a[i, i - 1] / n
                out["cls"][l, h] += a[i, 0] / n  # the first position, whatever it holds
                row = 0.0
                for j in range(i + 1):  # the keys row i sees
                    p = (1 - ENTROPY_SMOOTHING) * a[i, j] + ENTROPY_SMOOTHING / (i + 1)
                    row -= p * math.log(p)
                ent += row / n
            out["entropy"][l, h] = ent
    return out


@pytest.mark.parametrize("kind", KINDS)
def test_surface_statistics_on_a_causal_map_against_a_slow_loop(decoders, kind):
    lm = decoders[kind]
    ids = _segment(lm)
    (attn,) = attention_for(lm, encode_ids([ids]), level="token")
    assert np.all(np.triu(attn, 1) == 0)  # a causal map
    attn = _sharpen(attn, seed=len(kind))
    masks = token_masks(lm.tokenizer, ids, causal=True)
    assert masks["cls"].tolist() == [True] + [False] * (len(ids) - 1) and not masks["sep"].any()
    if kind == "gpt2":  # its BOS and EOS share an id: without the causal masks BOS would count as [SEP] too
        plain = token_masks(lm.tokenizer, ids)
        assert plain["sep"][0] and plain["cls"][0]
    got = segment_statistics(attn, masks)
    want = reference_causal(attn)
    n = len(ids)
    for name in ("self", "prev", "cls"):  # float64 sums of n terms of at most 1 on both sides
        np.testing.assert_allclose(got[name], want[name], rtol=0, atol=round_off(1.0, n, eps=EPS64))
    # float64 sums of n * n terms p log p, each at most log n in size
    np.testing.assert_allclose(got["entropy"], want["entropy"], rtol=0, atol=round_off(math.log(n), n * n, eps=EPS64))
    for name in CAUSAL_DEFINITIONS:  # absent ([SEP]) or undefined (next, the first position's row): NaN, never 0
        assert np.isnan(got[name]).all(), name
    # entropy against the visible prefix: uniform attention over it has exactly the uniform entropy
    uniform = np.tril(np.ones((1, 1, n, n))) / np.arange(1, n + 1)[:, None]
    acc = SurfaceAccumulator()
    add(acc, uniform, masks)
    stats = acc.result()
    expected_uniform = np.mean([math.log(i + 1) for i in range(n)])
    assert stats.uniform_entropy == pytest.approx(expected_uniform, abs=round_off(math.log(n), n, eps=EPS64))
    # the entropy of the smoothed uniform rows is exactly log(i + 1): n * n float64 terms
    assert stats.per_head["entropy"][0, 0] == pytest.approx(expected_uniform, abs=round_off(math.log(n), n * n, eps=EPS64))
    assert stats.uniform_entropy < math.log(n)  # not log n: the prefix is shorter


def test_causal_statistics_json_leaves_out_what_is_undefined_with_its_reason(decoders):
    lm = decoders["llama"]
    ids = _segment(lm)
    (attn,) = attention_for(lm, encode_ids([ids]), level="token")
    acc = SurfaceAccumulator()
    add(acc, attn, token_masks(lm.tokenizer, ids, causal=True))
    stats = acc.result()
    payload = stats.to_json()
    assert payload["undefined"] == CAUSAL_DEFINITIONS and set(CAUSAL_DEFINITIONS).isdisjoint(payload["per_head"])
    back = SurfaceStats.from_json(payload)
    assert back.causal and np.isnan(back.per_head["sep"]).all() and back.heads_above("next") == []
    np.testing.assert_array_equal(back.per_head["prev"], np.asarray(payload["per_head"]["prev"]))
    with pytest.raises(ValueError, match="causal and a bidirectional"):
        add(acc, attn, {k: v for k, v in token_masks(lm.tokenizer, ids, causal=True).items() if k != "causal"})


# ------------------------------------------------------------------------------------ §4.2


def reference_predictions(attn: np.ndarray, lead: int, n: int) -> np.ndarray:
    """``[direction, layer, head, word]``: loops over the candidates each word has under a causal mask."""
    L, H = attn.shape[:2]
    out = np.zeros((2, L, H, n), dtype=int)
    for l in range(L):
        for h in range(H):
            W = attn[l, h, lead : lead + n, lead : lead + n]
            for i in range(n):
                for d, candidates in enumerate((range(0, i), range(i + 1, n))):  # the words i sees; those that see i
                    best, best_k = -1.0, -1
                    for k in candidates:
                        score = W[i, k] if d == 0 else W[k, i]
                        if score > best:
                            best, best_k = score, k
                    out[d, l, h, i] = best_k + 1  # 0: no candidate, no prediction
    return out


@pytest.mark.parametrize("kind", KINDS)
def test_head_scoring_under_a_causal_mask_against_a_slow_loop(decoders, kind):
    from helpers.data.conllu_io import Sentence
    from helpers.syntax.stats import predict_heads, score_heads

    lm = decoders[kind]
    batch = encode_words(lm.tokenizer, WORDS)
    maps = attention_for(lm, batch, level="word")
    rng = np.random.default_rng(1)
    items, sentences, hits, total = [], {}, 0, 0
    for ex, attn in zip(batch.examples, maps):
        attn = _sharpen(attn, seed=ex.index).astype(np.float32)  # the maps' precision, where the scoring picks
        n = ex.n_words
        assert attn.shape[-1] == n + ex.lead and ex.lead == (0 if kind == "llama-no-bos" else 1)
        got = predict_heads(attn[None], [attn.shape[-1]], [n], causal=True)[0].numpy()
        want = reference_predictions(attn, ex.lead, n)
        np.testing.assert_array_equal(got, want)
        assert (got[0, ..., 0] == 0).all() and (got[1, ..., n - 1] == 0).all()  # first / last word: no candidate
        heads = [int(h) for h in rng.integers(0, n + 1, size=n)]
        heads[0] = 2  # the first word's gold head is the second word: dependent-to-head must miss it
        heads[3] = 0
        sentence = Sentence(tuple(ex.words), tuple(heads), ("dep",) * n, ("X",) * n, ("X",) * n, sent_id=f"s{ex.index}")
        items.append((ex, attn))
        sentences[ex.index] = sentence
        counted = np.array(heads) != 0
        hits = hits + ((want == np.array(heads)) & counted).sum(-1)
        total += int(counted.sum())
    scores = score_heads(items, sentences, causal=True)
    assert scores.counts["all"] == total  # the same denominator as an encoder's: every word not attached to ROOT
    np.testing.assert_allclose(scores.accuracy()[..., scores.relations.index("all")], 100.0 * hits / total, rtol=1e-12)


def test_head_scoring_rejects_a_decoder_map_without_causal():
    from helpers.data.conllu_io import Sentence
    from helpers.syntax.stats import score_heads

    sentence = Sentence(("a", "b", "c"), (2, 0, 2), ("dep",) * 3, ("X",) * 3, ("X",) * 3, sent_id="s")
    with pytest.raises(ValueError, match="s: map has 4 positions, expected 3 words \\+ 2"):
        score_heads([(0, np.full((1, 1, 4, 4), 0.25))], [sentence])
    assert score_heads([(0, np.full((1, 1, 4, 4), 0.25))], [sentence], causal=True).counts["all"] == 2


# ------------------------------------------------------------------------------------ §3.2 gradients


def _float64(lm):
    whole = copy.deepcopy(lm.language_model).double()
    return dataclasses.replace(lm, model=whole.base_model, language_model=whole, _fingerprint=None)


@pytest.mark.parametrize("kind", ("gpt2", "llama-no-bos"))
def test_next_token_gradients_against_autograd_on_one_input(decoders, kind):
    """The model's own LM head, nothing fitted: mean next-token cross-entropy per segment, |dL/d alpha| averaged over
    heads and the queries that see each key, then over the keys of each kind; against one segment at a time."""
    from helpers.surface.gradients import gradient_importance

    lm = _float64(decoders[kind])
    batch = encode_words(lm.tokenizer, WORDS)
    got = gradient_importance(lm, None, batch, batch_size=2)
    assert got["sep"] is None and got["segments"] == len(WORDS)
    sums = {k: np.zeros(lm.n_layers) for k in ("punct", "cls", "other")}
    counts = dict.fromkeys(sums, 0)
    rows = {}  # each segment's [layer] per kind, by its index (NaN for a kind it lacks)
    for ex in batch.examples:
        ids = torch.from_numpy(ex.input_ids)[None]
        with torch.enable_grad():
            out = lm.language_model(input_ids=ids, output_attentions=True)
            logits = out.logits[0]
            loss = sum(-torch.log_softmax(logits[t], -1)[ids[0, t + 1]] for t in range(len(ex) - 1)) / (len(ex) - 1)
            grads = torch.autograd.grad(loss, out.attentions)
        masks = token_masks(lm.tokenizer, ex.input_ids, causal=True)
        kinds = {"punct": masks["punct"] & ~masks["cls"], "cls": masks["cls"], "other": ~(masks["punct"] | masks["cls"])}
        rows[ex.index] = {name: np.full(lm.n_layers, np.nan) for name in kinds}
        for name, mask in kinds.items():
            if not mask.any():
                continue
            counts[name] += 1
            for layer, g in enumerate(grads):
                g = g[0].abs().numpy()  # [head, query, key]
                per_key = [np.mean([g[h, i, j] for h in range(g.shape[0]) for i in range(j, len(ex))])
                           for j in range(len(ex)) if mask[j]]
                sums[name][layer] += np.mean(per_key)
                rows[ex.index][name][layer] = np.mean(per_key)
    assert got["per_segment"]["sep"] is None
    for name in sums:
        want = sums[name] / counts[name]
        assert np.all(want > 0)
        # float64 passes of one segment against batches of two, averaged in another order
        np.testing.assert_allclose(got[name], want, rtol=0, atol=float64_passes(want))
        each = np.array([rows[i][name] for i in sorted(rows)])  # [segment, layer], by index
        # as above, one segment's mean
        np.testing.assert_allclose(got["per_segment"][name], each, rtol=0, atol=float64_passes(np.nan_to_num(each)))


# ------------------------------------------------------------------------------------ §6, §4.3, §5


def test_js_distances_on_causal_maps_count_only_the_visible_keys(decoders):
    """Keys a query cannot see weigh the same smoothed 0 in both heads: they add nothing to JS, which is the sum
    over rows of the divergence over the visible keys."""
    from helpers.cluster.stats import JS_SMOOTHING, batch_js

    lm = decoders["llama"]
    (attn,) = attention_for(lm, encode_ids([_segment(lm)]), level="token")
    attn = _sharpen(attn, seed=7)
    L, H, n, _ = attn.shape
    P = (1 - JS_SMOOTHING) * attn.reshape(L * H, n, n) + JS_SMOOTHING / n
    want = np.zeros((L * H, L * H))
    for a in range(L * H):
        for b in range(L * H):
            for i in range(n):
                p, q = P[a, i, : i + 1], P[b, i, : i + 1]  # the visible keys only
                m = (p + q) / 2
                want[a, b] += 0.5 * (p * np.log(p / m)).sum() + 0.5 * (q * np.log(q / m)).sum()
    got = batch_js(torch.as_tensor(attn)[None], [n], dtype=torch.float64)[0].numpy()
    np.testing.assert_allclose(got, want, rtol=0, atol=float64_passes(n * np.log(2)))


def test_coref_candidates_under_a_causal_mask(decoders):
    from helpers.coref.stats import Query, candidate_words, head_predictions

    lm = decoders["llama-no-bos"]
    batch = encode_words(lm.tokenizer, [WORDS[1]])
    (attn,) = attention_for(lm, batch, level="word")
    attn = _sharpen(attn, seed=3)
    n = len(WORDS[1])
    query = Query(mention=None, head=5, candidates=(1,), correct=frozenset({1}), window=0)
    assert candidate_words(query, n, "words", causal=True).tolist() == [0, 1, 2, 3, 4]
    (got,) = head_predictions(attn[None], [n], [n], [[query]], "words", causal=True)
    want = attn[:, :, 5, :5].argmax(-1) == 1  # no BOS: word k at position k
    np.testing.assert_array_equal(got[..., 0], want)
    first = Query(mention=None, head=0, candidates=(), correct=frozenset({3}), window=0)  # sees no word: a miss
    assert not head_predictions(attn[None], [n], [n], [[first]], "words", causal=True)[0].any()


@pytest.mark.parametrize("kind", ("llama", "llama-no-bos"))
def test_probe_features_of_a_decoder(decoders, kind):
    from helpers.probe.stats import ProbeData, encoder_layout, make_batch

    lm = decoders[kind]
    batch = encode_words(lm.tokenizer, WORDS)
    maps = attention_for(lm, batch, level="word")
    data = ProbeData([encoder_layout(m, ex.lead, ex.trail).astype(np.float16) for ex, m in zip(batch.examples, maps)],
                     [np.zeros(ex.n_words, int) for ex in batch.examples],
                     [np.zeros(ex.n_words, bool) for ex in batch.examples],
                     [np.zeros((ex.n_words, 2), np.float32) for ex in batch.examples])
    K = lm.n_layers * lm.n_heads
    b = make_batch(data, [0])
    n = batch.examples[0].n_words
    lead = batch.examples[0].lead
    A = maps[0].reshape(K, *maps[0].shape[-2:]).astype(np.float16).astype(np.float32)
    for i in range(n):
        for j in range(n):  # candidate word j (column j + 1; 0 is ROOT)
            f = b.features[0, i, j + 1].numpy()
            np.testing.assert_array_equal(f[:K], A[:, lead + i, lead + j])  # i attends to j: zero for j after i
            np.testing.assert_array_equal(f[K:], A[:, lead + j, lead + i])  # j attends to i
            if j > i:
                assert not f[:K].any()
    root = b.root_parts[0, :n].numpy()  # [word, 2K, (cls, sep)]
    assert not root[..., 1].any()  # no [SEP]
    np.testing.assert_array_equal(root[:, :K, 0], A[:, lead:, 0].T if lead else np.zeros((n, K)))  # BOS, or none


# ------------------------------------------------------------------------------------ claims


def test_not_applicable_claims_say_why_and_keep_the_encoder_layout():
    c = not_applicable("next-token-heads", "§3.1", "heads ... next token", "5", "no query sees the next token")
    assert c.verdict == NOT_APPLICABLE and NOT_APPLICABLE not in VERDICTS and c.value is None
    assert c.to_json()["reason"] == "no query sees the next token" and c.to_json()["ours"].startswith("not applicable")
    plain = claim_as("x", "§3.1", "reproduced")
    assert list(plain.to_json()) == [*FIELDS, *RULE_FIELDS]  # the rule's fields, null for a claim without one
    assert all(c.to_json()[k] is None for k in RULE_FIELDS)  # a claim not applicable carries its rule's fields as null
    with pytest.raises(ValueError, match="says why"):
        Claim("x", "§3.1", "c", "p", "o", None, NOT_APPLICABLE)
    with pytest.raises(ValueError, match="says why"):
        Claim("x", "§3.1", "c", "p", "o", 1.0, "reproduced", "a reason", judged=plain.judged)


def test_surface_claims_on_causal_statistics(decoders):
    from helpers.claims import check_row
    from helpers.surface.claims import claims
    from helpers.surface.run import SurfaceReport
    from helpers.surface.stats import sink_layers

    lm = decoders["llama"]
    ids = _segment(lm)
    (attn,) = attention_for(lm, encode_ids([ids]), level="token")
    acc = SurfaceAccumulator()
    for _ in range(2):  # two segments (the same): enough to resample
        add(acc, _sharpen(attn, 2), token_masks(lm.tokenizer, ids, causal=True))
    stats = acc.result()
    per = {"sep": None, "punct": np.ones((2, 2)), "cls": np.full((2, 2), 0.1), "other": np.ones((2, 2))}
    grads = {"sep": None, "punct": [1.0, 1.0], "cls": [0.1, 0.1], "other": [1.0, 1.0], "segments": 2, "per_segment": per}
    report = SurfaceReport("tiny", {}, stats, grads, None, encode_ids([ids]))
    rows = {c.id: c for c in claims(report, n_boot=20)}
    na = {"next-token-heads", "sep-attention-middle-layers", "sep-self-attention", "cls-broad-last-layer",
          "sep-gradient-small", "sink-self-attention"}
    first_is_sink = len(sink_layers(stats.layer_means("cls"))) > 0
    assert {k for k, c in rows.items() if c.verdict == NOT_APPLICABLE} == na | (set() if first_is_sink else
                                                                               {"sink-gradient-small"})
    assert all(rows[k].reason for k in na) and rows["next-token-heads"].reason == CAUSAL_DEFINITIONS["next"]
    assert rows["sink-self-attention"].reason == CAUSAL_DEFINITIONS["cls_cls"]  # the first position sees only itself
    assert "(the first position)" in rows["sink-gradient-small"].claim
    for c in rows.values():
        check_row(c.to_json())


def test_compare_findings_leave_a_not_applicable_model_out():
    from helpers.compare import run as cmp
    from helpers.compare.findings import findings

    def result(spec, random_init, verdicts):
        claims = [not_applicable(cid, "§3.2", "c", "p", "no [SEP]") if v == NOT_APPLICABLE
                  else claim_as(cid, "§3.2", v, None) for cid, v in verdicts.items()]
        return cmp.ModelResult(spec, {"name": spec, "layers": 2, "heads": 2, "random_init": random_init}, claims)

    encoder = result("bert", False, {"sep": "reproduced", "next": "not reproduced"})
    decoder = result("gpt2", False, {"sep": NOT_APPLICABLE, "next": NOT_APPLICABLE})
    control = result("random:gpt2", True, {"sep": NOT_APPLICABLE, "next": NOT_APPLICABLE})
    # not "model_dependent" (the decoder did not fail it) and not "random_too" (the control did not pass it)
    got = findings([encoder, decoder, control])
    assert (got.shared, got.model_dependent, got.none, got.not_applicable) == (["sep"], [], ["next"], [])
    assert got.random_too == got.random_own_verdict == got.random_learned == [] and got.tests == []


def test_antecedent_scorer_scores_a_decoders_windows_as_the_reference(decoders):
    """The accumulator of §4.3 (its ``causal`` says the maps are a decoder's) gives each window's predictions, with
    mentions and then every word it sees as candidates, those of the loops; windows without queries are left out."""
    from helpers.coref.stats import AntecedentScorer, Query
    from helpers.syntax.stats import map_batches
    from tests.references import antecedent_reference

    lm = decoders["llama"]
    batch = encode_words(lm.tokenizer, WORDS)
    maps = [_sharpen(m, seed=k) for k, m in enumerate(attention_for(lm, batch, level="word"))]
    first, second = batch.examples[0].index, batch.examples[1].index
    queries = {first: [Query(mention=None, head=4, candidates=(1, 3), correct=frozenset({1}), window=0)], second: []}
    acc = AntecedentScorer(causal=True)
    for mb in map_batches(zip(batch.examples, maps)):
        acc.update(mb, [(queries.get(ex.index, []),) for ex in mb.examples])
    got = AntecedentScorer(causal=True).merge(acc).result()
    n = batch.examples[0].n_words
    want = [antecedent_reference(maps[0].astype(np.float32), queries[first], n, c, causal=True)
            for c in ("mentions", "words")]
    assert list(got) == [first] and all(np.array_equal(g, w) for g, w in zip(got[first], want))