"""What a build reads (helpers.plan): the passes follow the chapters' sizes, and the one pass over the
segments fills the §3, §6 and norms caches with exactly what their separate runs compute."""
from __future__ import annotations

import json

import numpy as np

from helpers.context import RunContext
from helpers.plan import book_passes
from helpers.segment_pass import segment_statistics


def test_book_passes_follow_the_chapters_sizes():
    from helpers.compare.run import REDUCED_SIZES
    from helpers.probe.run import probe_corpora
    from helpers.surface.run import SEGMENTS

    passes = book_passes(RunContext(small=False, compare="default,random:default"))
    book = {(p.input, p.backward): p for p in passes if p.spec == "default"}
    assert book["segments", False].option["n_segments"] == SEGMENTS and book["segments", True].option["n_segments"] == SEGMENTS
    assert all(book[c, False].option["max_sentences"] is None for c in probe_corpora().values())
    control = {p.input: p for p in passes if p.spec == "random:default"}
    # the control reads the probes' treebanks whole; the comparison's reduced run of the same weights adds nothing
    assert all(control[c].option["max_sentences"] is None for c in probe_corpora().values())
    assert control["segments"].option["n_segments"] == REDUCED_SIZES["n_segments"]
    assert "norms" not in control["segments"].sections  # the norms chapter analyses the book's model only
    assert len({(p.spec, p.input, p.backward) for p in passes}) == len(passes)  # each input once per model


def test_one_pass_equals_the_separate_runs(tiny_lm, shared_data, tmp_path):
    from helpers.cluster.run import run_cluster
    from helpers.norms.run import run_norms
    from helpers.surface.run import cached_surface_statistics, run_surface

    def surface_of(cache):  # §6's input: the §3 statistics of its segments (as the §3 report gives them)
        return lambda batch: cached_surface_statistics(tiny_lm, batch, ctx=RunContext(cache_dir=cache))

    n, L = 6, 48  # the tiny model has 64 positions
    separate, shared = tmp_path / "separate", tmp_path / "shared"
    alone = RunContext(data_dir=shared_data, cache_dir=separate)
    surface = run_surface(tiny_lm, alone, n_segments=n, max_length=L, gradients=False).stats.to_json()
    cluster = run_cluster(tiny_lm, surface_of(separate), alone, n_segments=n, max_length=L, n_perm=10)
    norms = run_norms(tiny_lm, alone, n_segments=n, max_length=L).stats.to_cache()
    ctx = RunContext(data_dir=shared_data, cache_dir=shared)
    assert sorted(segment_statistics(tiny_lm, ctx, n_segments=n, max_length=L)) == ["distances", "norms", "surface"]
    assert segment_statistics(tiny_lm, ctx, n_segments=n, max_length=L) == []  # all cached now: nothing recomputed
    files = sorted(p.name for p in (shared / "artifacts").glob("*.json"))
    assert len(files) == 3
    # the chapters read them back (no model pass: the cached files are not rewritten), equal to the separate runs
    before = {p: p.stat().st_mtime_ns for p in (shared / "artifacts").glob("*.json")}
    shared_stats = run_surface(tiny_lm, ctx, n_segments=n, max_length=L, gradients=False).stats
    assert json.dumps(shared_stats.to_json(), sort_keys=True) == json.dumps(surface, sort_keys=True)
    separate_stats = run_surface(tiny_lm, alone, n_segments=n, max_length=L, gradients=False).stats
    for name, values in separate_stats.per_segment.items():  # each segment's values too, in the same order
        assert np.array_equal(shared_stats.per_segment[name], values, equal_nan=True), name
    again = run_cluster(tiny_lm, surface_of(shared), ctx, n_segments=n, max_length=L, n_perm=10)
    assert again.distance.tolist() == cluster.distance.tolist() and again.tokens == cluster.tokens
    assert again.similarity == cluster.similarity  # the layer test, its interval from the segments' layer blocks
    assert json.dumps(run_norms(tiny_lm, ctx, n_segments=n, max_length=L).stats.to_cache(), sort_keys=True) == \
        json.dumps(norms, sort_keys=True)
    assert {p: p.stat().st_mtime_ns for p in (shared / "artifacts").glob("*.json")} == before
    # the pass kept each segment's norm shares too (the intervals'), read back without a model pass, as the separate run's
    kept = sorted((shared / "artifacts").glob("norm-segments-*.npz"))
    assert len(kept) == 1
    stamp = kept[0].stat().st_mtime_ns
    assert json.dumps(run_norms(tiny_lm, ctx, n_segments=n, max_length=L).stats.to_json(), sort_keys=True) == \
        json.dumps(run_norms(tiny_lm, alone, n_segments=n, max_length=L).stats.to_json(), sort_keys=True)
    assert kept[0].stat().st_mtime_ns == stamp


def test_claims_pass_over_the_segments_once(tiny_lm, toy_data, tmp_path, monkeypatch):
    """``all_claims`` (the ``claims`` and ``compare`` commands) fills the §3 statistics and the §6 distances in one
    pass of the model over §3's segments, as chapter 3 does, instead of one per section: the model reads one
    pass's worth of segment tokens less than with a pass per section, and the claims are the same."""
    from helpers import results
    from helpers.pipeline.segments import build_segments

    sizes = dict(n_segments=3, max_sentences=100, max_documents=4, seeds=(0,), epochs=1, n_perm=20, max_length=60)
    tokens = []

    def count(module, args, kwargs):  # the real (unpadded) tokens of each forward pass of the model
        mask = kwargs.get("attention_mask")
        tokens.append(int(mask.sum()) if mask is not None else kwargs.get("input_ids", args[0] if args else None).numel())

    hook = tiny_lm.model.register_forward_pre_hook(count, with_kwargs=True)
    try:
        ctx = RunContext(data_dir=toy_data, cache_dir=tmp_path / "one")
        assert sorted(results.shared_segment_pass(tiny_lm, ctx, ["surface", "cluster"], **sizes)) == ["distances", "surface"]
        assert results.shared_segment_pass(tiny_lm, ctx, ["surface", "cluster"], **sizes) == []  # cached: no pass
        assert results.shared_segment_pass(tiny_lm, ctx.replace(cache_dir=tmp_path / "x"), ["surface", "syntax"], **sizes) == []
        assert results.shared_segment_pass(tiny_lm, ctx.replace(cache_dir=tmp_path / "x", refresh=True),
                                           ["surface", "cluster"], **sizes) == []
        tokens.clear()
        one = results.all_claims(tiny_lm, ctx.replace(cache_dir=tmp_path / "shared"), **sizes)
        shared_tokens = sum(tokens)
        tokens.clear()
        monkeypatch.setattr(results, "shared_segment_pass", lambda *args, **kwargs: [])
        separate = results.all_claims(tiny_lm, ctx.replace(cache_dir=tmp_path / "separate"), **sizes)
        separate_tokens = sum(tokens)
    finally:
        hook.remove()
    segments = build_segments(tiny_lm, n_segments=3, max_length=60, data_dir=toy_data)
    assert separate_tokens - shared_tokens == sum(len(ex.input_ids) for ex in segments.examples) > 0
    assert [c.to_json() for c in one] == [c.to_json() for c in separate]


def test_the_sinks_chapters_decoder_is_in_the_plan(tmp_path):
    """A trained decoder beside the book's encoder (the sinks chapter's, here named by the context) adds its passes at
    the small configuration's sizes, for the sinks section and the three it reads only, and its segments without BOS;
    none of its passes is a probe's or a random-init control's. Without such a decoder the plan has none."""
    from helpers.results import section
    from helpers.sinks.decoder import random_decoder_dir

    ctx = RunContext(small=False, cache_dir=tmp_path, decoder="some-decoder", compare="default")
    passes = [p for p in book_passes(ctx) if p.spec == "some-decoder"]
    small = {name: section(name).sizes.small for name in ("surface", "syntax", "coref", "sinks")}
    by_input = {(p.input, p.backward): p for p in passes}
    assert by_input["segments", False].option["n_segments"] == small["surface"]["n_segments"] == small["sinks"]["n_segments"]
    assert set(by_input["segments", False].sections) == {"3", "sinks"} and ("segments", True) in by_input
    assert by_input["segments (no BOS)", False].sections == ("sinks",)
    assert by_input["segments (no BOS)", False].option["n_segments"] == small["sinks"]["n_segments"]
    assert {p.option["max_sentences"] for p in passes if p.input.endswith((":dev", ":test", ":train"))} == \
        {small["syntax"]["max_sentences"]}
    assert all(p.option["max_documents"] == small["coref"]["max_documents"] for p in passes if "coreference" in p.input)
    assert not any("5" in p.sections or "6" in p.sections or "norms" in p.sections for p in passes)
    assert not any(p.spec.startswith("random:") for p in book_passes(ctx) if "decoder" in p.spec)
    assert not any(p.input == "segments (no BOS)" for p in book_passes(RunContext(small=False, cache_dir=tmp_path,
                                                                                  compare="default")))
    # the book's own model, when a decoder, has its run without BOS; an encoder has none
    from helpers.plan import is_decoder

    folder = random_decoder_dir(tmp_path)
    assert is_decoder(str(folder), ctx) and not is_decoder("default", ctx)
    # a decoder reads no masked-LM segments (its §3 gradients use its own language-model head)
    from helpers import load_model
    from helpers.plan import encode_pass

    decoder = load_model(str(folder), cache_root=tmp_path)
    assert encode_pass(decoder, by_input["masked-LM segments (train)", False], ctx) is None
    own = RunContext(small=False, cache_dir=tmp_path, model=str(folder))
    assert [p.input for p in book_passes(own.replace(compare=str(folder)))].count("segments (no BOS)") == 1
