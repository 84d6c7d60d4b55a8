"""``python -m helpers mixing`` on a tiny random BERT and the toy corpora: its JSON layout, the weights' row equal to
the syntax and coreference chapters' own scorers on the same inputs (an independent path: their maps come from the
extraction pipeline), and each method cached on its own (a later run of fewer methods computes nothing)."""
from __future__ import annotations

import json

import pytest

from helpers.cli import main
from helpers.context import RunContext

SIZES = ["--max-sentences", "100", "--train-sentences", "100", "--max-documents", "2", "--seeds", "2", "--epochs", "1",
         "--max-length", "60", "--heads-sentences", "1", "--heads-documents", "1"]


def _run(argv, out, cache) -> dict:
    assert main([*argv, "--quiet", "--json", str(out), "--cache-dir", str(cache)]) == 0, argv
    return json.loads(out.read_text())


def test_mixing_command_scores_each_method(tiny_model_dir, toy_data, tmp_path, monkeypatch):
    common = ["--model", str(tiny_model_dir), "--data-dir", str(toy_data)]
    out = _run(["mixing", "--methods", "attention,rollout,value_zeroing_heads,norms", *SIZES, *common],
               tmp_path / "m.json", tmp_path / "c")
    assert set(out) == {"model", "methods", "settings", "scores", "paper"}
    assert out["methods"] == ["attention", "norms", "rollout", "value_zeroing_heads"]
    assert out["settings"]["seeds"] == [0, 1] and out["settings"]["max_sentences"] == 100
    weights, rollout, heads = (out["scores"][m] for m in ("attention", "rollout", "value_zeroing_heads"))
    assert weights["unit"] == "head" and rollout["unit"] == "layer"
    assert rollout["syntax"]["relations"]["all"]["unit"].startswith("L")
    assert len(weights["probe"]["runs"]) == 2 and weights["probe"]["sentences"]["train"] > 0
    assert heads["subset"] == {"everything": False, "sentences": 1, "documents": 1}  # the CPU: its subset
    assert heads["syntax"]["sentences"] == {"dev": 1, "test": 1}
    assert weights["inputs"]["test"]["read"] == weights["syntax"]["sentences"]["test"] + weights["inputs"]["test"]["skipped"]
    assert heads["squared_norms"]["rows"] > 0 and -1 <= heads["squared_norms"]["median_r"] <= 1
    assert len(weights["special_share"]["first"]) == len(weights["special_share"]["last"]) == 2  # the tiny BERT's layers
    # what the claims' paired intervals read: per-item counts that add up to each score, and the probe's interval
    per = weights["syntax"]["per_sentence"]
    assert 100 * sum(per["correct"]) / sum(per["total"]) == pytest.approx(weights["syntax"]["relations"]["all"]["held_out_accuracy"], abs=1e-4)
    assert per["units"] == rollout["syntax"]["per_sentence"]["units"]  # the same test sentences: pairs
    docs = weights["coref"]["per_document"]
    assert 100 * sum(docs["correct"]) / sum(docs["total"]) == pytest.approx(weights["coref"]["accuracy"], abs=1e-4)
    probe = weights["probe"]["per_sentence"]
    for s, run in enumerate(weights["probe"]["runs"]):
        assert 100 * sum(probe["correct"][s]) / sum(probe["total"]) == pytest.approx(run, abs=0.005)
    lo, hi = weights["probe"]["interval"]
    assert lo <= weights["probe"]["mean"] <= hi
    shares = weights["special_share_sentences"]
    assert len(shares["units"]) == weights["syntax"]["sentences"]["test"]
    assert heads["squared_norms"]["sentences"] == 1 and len(heads["squared_norms"]["median_r_interval"]) == 2

    # the weights' row is the syntax chapter's held-out row and the coreference chapter's dev-chosen head, on the
    # same sentences and documents, from their own records (maps from the extraction pipeline, not the mixing pass)
    from helpers import load_model
    from helpers.results import section

    lm = load_model(str(tiny_model_dir))
    ctx = RunContext(data_dir=toy_data, cache_dir=tmp_path / "c2")
    syntax = section("syntax").run(lm, ctx, max_sentences=100, max_length=60)
    held = {r["relation"]: r for r in syntax.held_out}["all"]
    ours = weights["syntax"]["relations"]["all"]
    assert ours["unit"] == held["dev_head"] and ours["direction"] == held["dev_direction"]
    assert ours["held_out_accuracy"] == pytest.approx(held["held_out_accuracy"], abs=1e-4)
    assert ours["held_out_ci"] == pytest.approx(held["held_out_ci"], abs=0.01)
    coref = section("coref").run(lm, ctx, max_documents=2, max_length=60)
    layer, head = coref.dev.best_head()
    assert weights["coref"]["unit"] == f"{layer + 1}-{head + 1}"
    assert weights["coref"]["accuracy"] == pytest.approx(float(coref.test.accuracy()["all"][layer, head]), abs=1e-4)
    assert weights["coref"]["mentions"] == coref.test.counts()["all"]

    # each method is cached on its own: fewer methods later compute nothing
    import helpers.mixing.run as mixing_run

    monkeypatch.setattr(mixing_run, "mixing_batch", lambda *a, **k: pytest.fail("recomputed a cached method"))
    again = _run(["mixing", "--methods", "rollout", *SIZES, *common], tmp_path / "m2.json", tmp_path / "c")
    assert again["scores"]["rollout"] == rollout
