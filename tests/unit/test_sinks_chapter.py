"""The chapter on attention sinks: its rules on both sides of every boundary, its bootstrap replicates against slow
loops over the same draws, its claims on constructed shares (premises, NaN and missing values not applicable), its
tables and per-layer series against obvious computations written here, the choice of its decoder, and its section's
run on a tiny random decoder (the shares without BOS from a model loaded again without BOS, checked against a slow
loop over its maps)."""
from __future__ import annotations

import numpy as np
import pytest

from helpers.claims import INCONCLUSIVE, NOT_APPLICABLE, NOT_REPRODUCED, PARTLY, REPRODUCED, Undefined, check_row
from helpers.presentation import chapters
from helpers.sinks import claims as sc
from helpers.sinks.stats import SegmentShares
from helpers.surface.stats import SINK_SHARE

import tiny_decoders as td
from tolerances import EPS64, round_off


@pytest.fixture(scope="module")
def llama_dir(tmp_path_factory):
    return td.save_llama(tmp_path_factory.mktemp("llama"))

# ------------------------------------------------------------------------------------ rules

EPS = 1e-9  # a step just across a boundary


def test_upper_layers_rule_on_both_sides():
    """A share rule: the share of replicates whose upper-layer sink rate exceeds UPPER_RATE."""
    assert sc.judge_upper(0.95, 0.6).verdict == REPRODUCED and sc.judge_upper(0.95 - EPS, 0.6).verdict == INCONCLUSIVE
    assert sc.judge_upper(0.05 + EPS, 0.4).verdict == INCONCLUSIVE and sc.judge_upper(0.05, 0.4).verdict == NOT_REPRODUCED
    assert sc.judge_upper(0.5, 0.4).estimate == 0.4 and sc.judge_upper(0.5, 0.4).rule == "share"


def test_noop_rule_on_both_sides():
    """An effect on the ratio: null 1, level NOOP_RATIO; an interval holding 1 is never "partly"."""
    n = sc.NOOP_RATIO
    v = lambda r, lo, hi: sc.judge_noop(r, (lo, hi)).verdict  # noqa: E731
    assert v(n, n - 0.1, 1 - EPS) == REPRODUCED and v(n + EPS, n - 0.1, 1 - EPS) == PARTLY
    assert v(0.9, n, 1.0) == INCONCLUSIVE and v(0.9, n + EPS, 1.0) == NOT_REPRODUCED
    with pytest.raises(Undefined):
        sc.judge_noop(float("nan"), (0.1, 0.2))


def test_kept_rule_on_both_sides():
    """An effect on the kept share: null 0 (no sink left without BOS), level KEPT_RATIO."""
    k = sc.KEPT_RATIO
    v = lambda kept, lo, hi: sc.judge_kept(kept, (lo, hi)).verdict  # noqa: E731
    assert v(k, EPS, 1.0) == REPRODUCED and v(k - EPS, EPS, 1.0) == PARTLY
    assert v(0.5, 0.0, k) == INCONCLUSIVE and v(0.3, 0.0, k - EPS) == NOT_REPRODUCED


def test_layer_ranges_are_one_based_runs():
    assert sc.layer_ranges([3, 4, 5, 9]) == "4-6, 10"
    assert sc.layer_ranges([0]) == "1" and sc.layer_ranges([]) == "none"


def test_upper_layers_are_the_upper_half():
    assert sc.upper_layers(30).tolist() == list(range(15, 30))
    assert sc.upper_layers(5).tolist() == [2, 3, 4]


# ------------------------------------------------------------------------------------ intervals


def _per_segment(weights: np.ndarray, n_segments: int = 10, spread: float = 0.02, seed: int = 0) -> SegmentShares:
    """``n_segments`` inputs whose alpha_1 lies within ``spread`` of ``weights`` ``[layer, head]`` (norms a tenth
    of them), centred on it (each segment above, the next as far below)."""
    rng = np.random.default_rng(seed)
    noise = rng.uniform(-spread, spread, size=(n_segments // 2, *weights.shape))
    w = weights + np.concatenate([noise, -noise])
    return SegmentShares(np.arange(n_segments), w.astype(np.float32), (w / 10).astype(np.float32))


def test_rate_ratio_and_kept_replicates_against_a_slow_loop():
    """SegmentShares' replicates (draw counts, one product) against slow loops over the same draws: each replicate's
    mean alpha_1 per head, its sink rate, its ratio of summed norms to summed weights, and the kept share of two runs
    drawn together."""
    from helpers.sinks.stats import kept_replicates

    rng = np.random.default_rng(2)
    S, n_boot, seed = 8, 200, 3
    w = rng.random((S, 3, 4)).astype(np.float32)
    seg = SegmentShares(np.arange(S), w, (w * rng.random(w.shape)).astype(np.float32), n_boot=n_boot, seed=seed)
    bare = SegmentShares(np.arange(S), (w * 0.8).astype(np.float32), w, n_boot=n_boot, seed=seed)
    draws = np.random.default_rng(seed).integers(0, S, size=(n_boot, S))  # the draws of bootstrap.counts
    means = np.array([seg.weights[d].astype(np.float64).mean(0) for d in draws])
    # tolerance: means of S float64 terms below 1 summed in another order; rates compared away from the threshold
    np.testing.assert_allclose(seg.mean_replicates(), means, rtol=0, atol=4 * S * EPS64)
    rates = np.array([np.mean([m[l, h] > 0.5 for l in range(1, 3) for h in range(4)]) for m in means])
    near = np.abs(means - 0.5).min() < 1e-9  # no mean at the threshold: the rates are exact
    assert not near and seg.rate_replicates(0.5, [1, 2]).tolist() == rates.tolist()
    ratios = [sum(float(seg.norms[i, l, h]) for i in d for l in (0, 2) for h in range(4)) /
              sum(float(seg.weights[i, l, h]) for i in d for l in (0, 2) for h in range(4)) for d in draws]
    np.testing.assert_allclose(seg.ratio_interval([0, 2]), np.percentile(ratios, [2.5, 97.5]),
                               rtol=4 * 8 * S * EPS64, atol=0)  # as above, relative, over 8 heads
    kept = []
    for d in draws:
        with_bos = np.mean(seg.weights[d].astype(np.float64).mean(0) > 0.5)
        without = np.mean(bare.weights[d].astype(np.float64).mean(0) > 0.5)
        kept.append(without / with_bos if with_bos > 0 else np.nan)
    np.testing.assert_array_equal(kept_replicates(seg, bare, 0.5), np.array(kept))  # exact: the same counts
    shifted = SegmentShares(np.arange(2, S + 2), bare.weights, bare.norms)  # the runs share segments 2 .. S-1 only
    a, b = seg.paired(shifted)
    assert a.index.tolist() == b.index.tolist() == list(range(2, S))
    np.testing.assert_array_equal(b.weights, bare.weights[: S - 2])


def test_accumulator_keeps_each_input_in_index_order():
    from helpers.sinks.stats import FirstPositionAccumulator, first_position_shares
    from tests.references import map_batch

    rng = np.random.default_rng(1)
    maps = [rng.dirichlet(np.ones(n), size=(2, 3, n)) for n in (4, 6, 5, 3, 6)]  # [layer, head, query, key]
    norms = [m * rng.random(m.shape[-1]) for m in maps]

    def fed(acc, order):
        acc.update(map_batch([maps[i] for i in order], [norms[i] for i in order], indices=order), [()] * len(order))
        return acc

    one = fed(fed(FirstPositionAccumulator(), [3, 0]), [4, 1, 2])
    merged = FirstPositionAccumulator().merge(fed(FirstPositionAccumulator(), [1, 4])).merge(
        fed(FirstPositionAccumulator(), [0, 2, 3]))
    alone = [fed(FirstPositionAccumulator(), [i]).segments() for i in range(5)]
    for acc in (one, merged):
        seg = acc.segments()
        assert seg.index.tolist() == [0, 1, 2, 3, 4]
        for i in range(5):  # each input's shares, whichever batch it came in (float64 kept as float32)
            np.testing.assert_allclose(seg.weights[i], alone[i].weights[0], rtol=0, atol=round_off(1.0))
            np.testing.assert_allclose(seg.norms[i], alone[i].norms[0], rtol=0, atol=round_off(1.0))
    shares = first_position_shares(map_batch([maps[0]]).weights, [4])[0].numpy()
    np.testing.assert_array_equal(alone[0].weights[0], shares.astype(np.float32))
    # tolerance: the same 5 float64 terms summed in another grouping
    np.testing.assert_allclose(merged.result()["weights"], one.result()["weights"], rtol=0, atol=4 * 5 * EPS64)


# ------------------------------------------------------------------------------------ claims


def _shares(n_layers=4, n_heads=3):
    """Lower half: no sinks; upper half: every head a sink (alpha_1 0.8), norms a tenth of the weights."""
    weights = np.full((n_layers, n_heads), 0.05)
    weights[n_layers // 2:] = 0.8
    return weights, weights / 10


def test_claims_on_constructed_shares():
    weights, norms = _shares()
    seg = _per_segment(weights)
    grads = {"cls": [1.0, 1.0, 0.1, 0.2], "other": [1.0, 1.0, 1.0, 1.0],
             "per_segment": {"cls": np.tile([1.0, 1.0, 0.1, 0.2], (10, 1)) * np.linspace(0.9, 1.1, 10)[:, None],
                             "other": np.ones((10, 4))}}
    no_bos = weights.copy()
    no_bos[3] = 0.1  # one layer loses its sinks: rate 3/12 of 6/12
    bare = _per_segment(no_bos, seed=1)
    rows = {c.id: c for c in sc.claims(weights, norms, grads, no_bos, causal=True, segments=seg, no_bos_segments=bare)}
    assert list(rows) == ["sink-upper-layers", "sink-noop-norms", "sink-noop-gradients", "sink-without-bos"]
    for c in rows.values():
        check_row(c.to_json())
        assert c.resampled == "segments" and c.n == 10
    assert rows["sink-upper-layers"].value == 1.0 and rows["sink-upper-layers"].verdict == REPRODUCED
    assert rows["sink-upper-layers"].to_json()["share"] == 1.0
    assert sc.sink_layers_of(weights).tolist() == [2, 3]  # layer means 0.8 > SINK_SHARE
    assert rows["sink-noop-norms"].value == pytest.approx(0.1) and rows["sink-noop-norms"].verdict == REPRODUCED
    assert rows["sink-noop-gradients"].value == pytest.approx(0.15) and "layers 3-4" in rows["sink-noop-gradients"].ours
    assert rows["sink-noop-gradients"].verdict == REPRODUCED
    kept = rows["sink-without-bos"]
    assert kept.value == pytest.approx(0.25) and kept.to_json()["estimate"] == pytest.approx(0.5)
    assert kept.verdict == PARTLY  # half the rate kept, every replicate above 0: short of KEPT_RATIO


def test_claims_without_a_sink_say_so_without_nan():
    weights = np.full((4, 3), SINK_SHARE / 2)
    seg = _per_segment(weights, spread=0.01)
    grads = {"cls": [1] * 4, "other": [1] * 4, "per_segment": {"cls": np.ones((10, 4)), "other": np.ones((10, 4))}}
    rows = {c.id: c for c in sc.claims(weights, weights, grads, weights, causal=True, segments=seg, no_bos_segments=seg)}
    for name in ("sink-noop-norms", "sink-noop-gradients"):
        assert rows[name].value is None and rows[name].verdict == NOT_APPLICABLE
        assert "no sink layer" in rows[name].reason and f"{SINK_SHARE / 2:.2f}" in rows[name].reason
    assert rows["sink-upper-layers"].verdict == NOT_REPRODUCED  # no replicate has a sink head
    assert rows["sink-without-bos"].verdict == NOT_APPLICABLE and "no sink head with BOS" in rows["sink-without-bos"].reason
    for c in rows.values():
        check_row(c.to_json())
        assert "nan" not in c.ours.lower()


def test_claims_without_per_segment_values_are_not_applicable():
    weights, norms = _shares()
    seg = _per_segment(weights)
    means = {"cls": [1.0, 1.0, 0.1, 0.2], "other": [1.0] * 4}
    rows = {c.id: c for c in sc.claims(weights, norms, means, weights, causal=True, segments=seg, no_bos_segments=None)}
    assert rows["sink-noop-gradients"].verdict == NOT_APPLICABLE and "no per-segment gradients" in rows["sink-noop-gradients"].reason
    assert rows["sink-without-bos"].verdict == NOT_APPLICABLE and "without BOS" in rows["sink-without-bos"].reason
    bare = {c.id: c for c in sc.claims(weights, norms, None, None, causal=True)}
    assert all(c.verdict == NOT_APPLICABLE and "no per-segment" in c.reason for c in bare.values())


def test_an_encoder_has_no_claim_without_bos():
    weights, norms = _shares()
    rows = {c.id: c for c in sc.claims(weights, norms, None, None, causal=False, segments=_per_segment(weights))}
    assert "sink-noop-gradients" not in rows and rows["sink-without-bos"].verdict == NOT_APPLICABLE


# ------------------------------------------------------------------------------------ the chapter's tables


def test_where_attention_goes_per_layer():
    rng = np.random.default_rng(0)
    per_head = {k: rng.random((3, 4)) for k in ("cls", "prev", "punct")}
    per_head["entropy"] = np.array([[4.0, 1.0, 1.0, 1.0], [4.0, 4.0, 1.0, 1.0], [0.0, 0.0, 0.0, 0.0]])
    out = chapters.where_attention_goes(per_head, uniform_entropy=5.0, broad_fraction=0.8)
    for name, key in (("first position", "cls"), ("previous token", "prev"), (". or ,", "punct")):
        assert out[name].tolist() == pytest.approx([sum(row) / 4 for row in per_head[key].tolist()])
    assert out["broad heads (share of heads)"].tolist() == [0.25, 0.5, 0.0]  # entropy >= 4.0


def test_sink_layer_lines():
    weights = np.array([[0.1, 0.5], [0.4, 0.2]])
    out = chapters.sink_layer_lines(weights, weights / 2, np.array([[0.0, 0.31], [0.0, 0.0]]), 0.3)
    assert out["alpha_1 (weights)"].tolist() == pytest.approx([0.3, 0.3])
    assert out["alpha_1 (norms)"].tolist() == pytest.approx([0.15, 0.15])
    assert out["sink rate"].tolist() == [0.5, 0.5] and out["sink rate without BOS"].tolist() == [0.5, 0.0]
    assert "sink rate without BOS" not in chapters.sink_layer_lines(weights, weights, None, 0.3)


def test_sink_comparison_rows():
    dec = np.array([[0.1, 0.1], [0.9, 0.2], [0.9, 0.9], [0.5, 0.4]])
    enc = np.array([[0.2, 0.0], [0.1, 0.1]])
    sep = np.array([[0.1, 0.1], [0.6, 0.4]])
    frame = chapters.sink_comparison([{"name": "dec", "first": "BOS", "weights": dec, "sep": None},
                                      {"name": "enc", "first": "[CLS]", "weights": enc, "sep": sep}], 0.3)
    d, e = frame.loc["dec"], frame.loc["enc"]
    assert d["sink rate"] == round(5 / 8, 2) and d["sink rate, upper half"] == 1.0
    assert d["largest layer-mean alpha_1"] == "0.90 (layer 3)" and d["largest layer-mean [SEP] share"] == "—"
    assert e["layers x heads"] == "2 x 2" and e["sink rate"] == 0.0 and e["largest layer-mean [SEP] share"] == "0.50 (layer 2)"


def test_decoder_heads_table_drops_the_papers_columns_and_adds_coreference():
    rows = [{"relation": "nsubj", "count": 10, "head": "3-2", "direction": "dep→head", "accuracy": 55.0,
             "baseline": "40.0 (+1)", "paper relation": "nsubj", "paper head": "8-2", "paper accuracy": "58.5",
             "paper baseline": "45.5 (+1)"}]
    frame = chapters.decoder_heads_table(rows, ((1, 0), 42.04, 30.0))
    assert list(frame.columns) == ["count", "head", "direction", "accuracy", "baseline"]
    assert frame.loc["coreference (antecedent)", "head"] == "2-1" and frame.loc["coreference (antecedent)", "accuracy"] == 42.0


# ------------------------------------------------------------------------------------ the decoder and the run


def test_the_decoder_is_the_named_one_else_random_and_labelled(tmp_path, llama_dir):
    from helpers.context import RunContext
    from helpers.sinks.decoder import RANDOM_HEADS, RANDOM_LAYERS, RANDOM_NAME, chapter_decoder, install_hint

    named = chapter_decoder(RunContext(cache_dir=tmp_path, decoder=str(llama_dir)))
    assert not named.random and named.lm.causal and "BERT_ATTENTION_DECODER" in named.why
    fallback = chapter_decoder(RunContext(cache_dir=tmp_path))  # nothing named, smollm2 not installed here
    assert fallback.random and install_hint() in fallback.why and "random" in fallback.why
    assert fallback.lm.label == RANDOM_NAME and str(tmp_path) not in fallback.lm.description.split(";")[0]
    assert (fallback.lm.n_layers, fallback.lm.n_heads, fallback.lm.causal, fallback.lm.bos) == (RANDOM_LAYERS, RANDOM_HEADS, True, True)
    again = chapter_decoder(RunContext(cache_dir=tmp_path))  # built once, then read back: the same weights
    assert again.lm.fingerprint() == fallback.lm.fingerprint()
    assert chapter_decoder(RunContext(cache_dir=tmp_path), book_model=named.lm).lm is named.lm
    from helpers.core.models import load_model

    bare = load_model(str(llama_dir), bos=False)  # a book's decoder without BOS: the chapter takes it with BOS
    chosen = chapter_decoder(RunContext(cache_dir=tmp_path), book_model=bare).lm
    assert chosen.bos is True and chosen.fingerprint() != bare.fingerprint()


def test_a_decoder_beside_the_books_encoder_runs_at_the_small_sizes(tmp_path, llama_dir):
    """The chapter's decoder runs in the book's context when it is the book's model (its chapters' sizes and cache),
    else at the small configuration's sizes (a 30-layer decoder at full size would add about an hour to the default
    book); the page says which, with the numbers the sections read in that context."""
    from helpers.context import RunContext
    from helpers.results import section
    from helpers.sinks.decoder import chapter_decoder, decoder_context
    from helpers.sinks.section import SECTION

    full = RunContext(cache_dir=tmp_path, small=False)
    beside = chapter_decoder(RunContext(cache_dir=tmp_path, decoder=str(llama_dir)))
    assert not beside.book_model and decoder_context(full, book_model=beside.book_model).small is True
    from helpers.core.models import load_model

    own = chapter_decoder(full, book_model=load_model(str(llama_dir)))
    assert own.book_model and decoder_context(full, book_model=own.book_model) is full
    small = RunContext(cache_dir=tmp_path, small=True)
    assert decoder_context(small, book_model=False) is small
    reduced = decoder_context(full, book_model=False)
    note = chapters.decoder_sizes_note(SECTION, reduced, full)
    want = (SECTION.settings(reduced)["n_segments"], section("syntax").settings(reduced)["max_sentences"],
            section("coref").settings(reduced)["max_documents"])
    assert all(f" {n} " in note for n in want) and "reduced sizes" in note
    assert "as the chapters run" in chapters.decoder_sizes_note(SECTION, full, full)
    assert "small test configuration" in chapters.decoder_sizes_note(SECTION, small, small)


def test_section_run_without_bos_against_a_slow_loop(llama_dir, toy_data, tmp_path):
    import torch

    from helpers.context import RunContext
    from helpers.core.models import load_model
    from helpers.results import input_reports
    from helpers.sinks.section import SECTION
    from tests.references import first_position_reference

    ctx = RunContext(data_dir=toy_data, cache_dir=tmp_path, small=True)
    lm = load_model(str(llama_dir), bos=True)
    report = SECTION.run(lm, ctx, inputs=input_reports(SECTION, lm, ctx, n_segments=3), n_segments=3)
    # the same segments: alpha_1 is §3's attention to the first position (its "cls" under the causal mask)
    assert [e.input_ids.tolist() for e in report.sinks.batch.examples] == [e.input_ids.tolist() for e in report.surface.batch.examples]
    np.testing.assert_allclose(report.sinks.weights, report.surface.stats.per_head["cls"], rtol=1e-5, atol=1e-7)
    bare = report.no_bos
    assert bare.bos is False and report.sinks.bos is True
    assert [ex.input_ids.tolist() for ex in bare.batch.examples] == [ex.input_ids.tolist()[1:] for ex in report.sinks.batch.examples]
    plain = load_model(str(llama_dir), bos=False)
    maps = []
    for ex in bare.batch.examples:
        with torch.no_grad():
            out = plain.model(input_ids=torch.as_tensor(ex.input_ids)[None], output_attentions=True)
        maps.append(first_position_reference(torch.stack(out.attentions, 1)[0].numpy()))
    np.testing.assert_allclose(bare.weights, np.mean(maps, 0), rtol=1e-4, atol=1e-6)  # float32 maps, float64 loop
    ids = [c.id for c in SECTION.claims(report)]
    assert ids == ["sink-upper-layers", "sink-noop-norms", "sink-noop-gradients", "sink-without-bos"]
    bare_report = SECTION.run(plain, ctx, inputs=input_reports(SECTION, plain, ctx, n_segments=3), n_segments=3)
    assert bare_report.no_bos.weights.tolist() == bare.weights.tolist()  # --no-bos: the run is its own no-BOS run
    assert "sink-without-bos" not in [c.id for c in SECTION.claims(bare_report)]  # nothing to set it against
