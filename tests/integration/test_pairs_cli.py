"""``python -m helpers pairs`` on tiny random models (the GPT-2 and Llama of tiny_decoders, a BERT with its masked-LM
head, conftest's BERT without one) over a tiny BLiMP (tests/blimp_fixture.py) beside the toy corpora: the JSON layout
of docs/command_line.md, every claim row checked against its rule, the encoder without a head "not applicable", one-line
errors with exit status 2 (an unknown paradigm, an empty selection, a malformed line), and the same JSON from a
two-worker Dask cluster as from this process."""
from __future__ import annotations

import importlib.util
import json
import shutil
from pathlib import Path

import numpy as np
import pytest

import tiny_decoders as td
from blimp_fixture import PARADIGMS, write_blimp
from helpers.claims import check_row
from helpers.cli import main
from helpers.minimal_pairs.claims import CLAIMS
from helpers.minimal_pairs.section import JSON_KEYS

TESTS = Path(__file__).resolve().parents[1]
SIZES = ["--pairs", "3", "--head-pairs", "2", "--draws", "2", "--max-length", "60"]
CLAIM_IDS = [c[0] for c in CLAIMS.values()]
PHENOMENA = list(dict.fromkeys(t for t, _ in PARADIGMS.values()))


def _pairs(model, data, cache, out, *extra) -> dict:
    argv = ["pairs", "--model", str(model), "--data-dir", str(data), "--cache-dir", str(cache), *SIZES, *extra,
            "--quiet", "--json", str(out)]
    assert main(argv) == 0, argv
    return json.loads(out.read_text())


def _fails(capsys, argv) -> str:
    """The one error line of a command that exits with status 2."""
    capsys.readouterr()
    assert main([*argv, "--quiet", "--json", "-"]) == 2, argv
    captured = capsys.readouterr()
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1 and not captured.out, captured.err
    return lines[0]


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    """conftest's toy corpora (GUM dev for §4.2, OntoGUM dev for §4.3) and the tiny BLiMP, in one folder."""
    spec = importlib.util.spec_from_file_location("pairs_cli_conftest", TESTS / "conftest.py")
    conftest = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(conftest)
    return write_blimp(conftest.write_toy_data(tmp_path_factory.mktemp("pairs")))


@pytest.fixture(scope="module")
def models(tmp_path_factory, tiny_model_dir):
    from transformers import BertConfig, BertForMaskedLM, BertTokenizerFast

    root = tmp_path_factory.mktemp("pair-cli-models")
    bert = root / "bert-mlm"
    tokenizer = BertTokenizerFast.from_pretrained(str(tiny_model_dir))
    BertForMaskedLM(BertConfig(vocab_size=len(tokenizer), hidden_size=16, num_hidden_layers=2, num_attention_heads=4,
                               intermediate_size=32, max_position_embeddings=64)).save_pretrained(bert)
    tokenizer.save_pretrained(bert)
    return {"gpt2": td.save_gpt2(root / "gpt2"), "llama": td.save_llama(root / "llama"), "bert": bert,
            "bare": tiny_model_dir}


@pytest.fixture(scope="module")
def llama(models, data, tmp_path_factory):
    """``(JSON, cache, file)``: the tiny Llama's run with the paper's heads, computed afresh."""
    root = tmp_path_factory.mktemp("pairs-llama")
    return _pairs(models["llama"], data, root / "cache", root / "a.json"), root / "cache", root / "a.json"


def _check_grammar(grammar: dict, n_pairs: int) -> None:
    assert [p["paradigm"] for p in grammar["paradigms"]] == sorted(PARADIGMS)
    assert [t["phenomenon"] for t in grammar["phenomena"]] == sorted({t for t, _ in PARADIGMS.values()})
    for entry in [*grammar["paradigms"], *grammar["phenomena"], grammar["overall"]]:
        assert entry["n"] == n_pairs * entry["paradigms"]
        lo, hi = entry["accuracy_interval"]
        assert 0 <= lo <= entry["accuracy"] <= hi <= 100
        lo, hi = entry["margin_interval"]
        assert lo <= entry["margin"] <= hi
        assert set(entry["published"]) == {"ngram", "lstm", "txl", "gpt2", "human"}
    assert grammar["overall"]["published"]["human"] == pytest.approx(90.0)


@pytest.mark.parametrize("kind", ["gpt2", "llama"])
def test_decoder_json_layout(kind, models, data, tmp_path, llama):
    out = llama[0] if kind == "llama" else _pairs(models[kind], data, tmp_path / "cache", tmp_path / "p.json")
    assert list(out) == [*JSON_KEYS, "causal"]
    assert out["applicable"] is True and out["reason"] is None and "next-token" in out["scorer"]
    assert out["corpus"]["paradigms"] == sorted(PARADIGMS) and out["corpus"]["commit"] == "0" * 40
    assert out["settings"]["pairs"] == 3 and out["settings"]["head_pairs"] == 2 and out["settings"]["everything"] is False
    _check_grammar(out["grammar"], 3)
    heads = out["heads"]
    assert set(heads) == {"relations", "coref", "groups"} and "det" in heads["relations"] and heads["coref"]
    rows, cells = out["matrix"]["rows"], out["matrix"]["cells"]
    assert out["matrix"]["phenomena"] == [g["phenomenon"] for g in out["grammar"]["phenomena"]]
    assert len(cells) == len(rows) and all(len(line) == len(PHENOMENA) for line in cells)
    for line in cells:
        for phenomenon, cell in zip(out["matrix"]["phenomena"], line):
            assert cell["n"] == 2 * sum(1 for term, _ in PARADIGMS.values() if term == phenomenon)
            assert cell["margin_interval"][0] <= cell["margin"] <= cell["margin_interval"][1]
    for group, entry in out["groups"].items():
        assert entry["missing"] is None and entry["heads"] == heads["groups"][group]
        assert entry["same_layer"]["sets"] and len(entry["same_layer"]["sets"]) <= 2
        ranking = entry["ranking"]
        assert np.asarray(ranking["importance"]).shape == (2, 4) and np.all(np.asarray(ranking["importance"]) >= 0)
        assert {t["head"] for t in ranking["top"]} >= set(entry["heads"])
        assert sorted(t["rank"] for t in ranking["top"]) == list(range(1, len(ranking["top"]) + 1))
        for pct in ranking["percentiles"].values():
            assert 0 < pct["interval"][0] <= pct["interval"][1] <= 100 and 0 < pct["value"] <= 100
        assert entry["mean_ablation"]["reference_positions"] > 0
    assert [c["id"] for c in out["claims"]] == CLAIM_IDS
    for row in out["claims"]:
        check_row(row)
        assert row["verdict"] == "not applicable" or (row["resampled"] == "pairs" and row["rule"] == "combined")
    assert out["causal"]["definition"].startswith("a sentence's score is the sum")


def test_a_cached_rerun_writes_the_same_bytes(llama, models, data, tmp_path):
    _, cache, first = llama
    _pairs(models["llama"], data, cache, tmp_path / "again.json")
    assert (tmp_path / "again.json").read_bytes() == first.read_bytes()


def test_an_encoder_without_its_own_head_is_not_graded(models, data, tmp_path):
    out = _pairs(models["bare"], data, tmp_path / "cache", tmp_path / "p.json")
    assert list(out) == list(JSON_KEYS) and out["applicable"] is False
    assert "without a masked-LM head of its own" in out["reason"]
    assert out["grammar"] is None and out["matrix"] is None and out["groups"] is None
    assert [c["verdict"] for c in out["claims"]] == ["not applicable"] * 3
    assert all(c["reason"] == out["reason"] for c in out["claims"])


def test_an_encoder_with_its_own_head_scores_by_pll(models, data, tmp_path):
    out = _pairs(models["bert"], data, tmp_path / "cache", tmp_path / "p.json", "--no-heads")
    assert out["applicable"] is True and out["scorer"].startswith("pseudo-log-likelihood, whole word left to right")
    _check_grammar(out["grammar"], 3)
    assert out["heads"] is None and out["settings"]["heads"] is False
    assert {c["reason"] for c in out["claims"]} == {"the paper's heads were not looked up (--no-heads)"}


def test_selection_by_name(models, data, tmp_path):
    out = _pairs(models["gpt2"], data, tmp_path / "cache", tmp_path / "p.json", "--no-heads", "--phenomena",
                 "binding", "--paradigms", "adjunct_island")
    assert out["corpus"]["paradigms"] == ["adjunct_island", "principle_A_case_1"]
    assert [t["phenomenon"] for t in out["grammar"]["phenomena"]] == ["binding", "island_effects"]


def test_list_loads_no_model(data, tmp_path, capsys):
    capsys.readouterr()
    assert main(["pairs", "--list", "--data-dir", str(data), "--cache-dir", str(tmp_path), "--json", "-"]) == 0
    listed = json.loads(capsys.readouterr().out)
    assert listed == {"paradigms": {p: PARADIGMS[p][0] for p in sorted(PARADIGMS)}}


def test_errors_are_one_line(models, data, tmp_path, capsys):
    base = ["pairs", "--model", str(models["gpt2"]), "--data-dir", str(data), "--cache-dir", str(tmp_path / "c")]
    line = _fails(capsys, [*base, "--paradigms", "adjunct_islands"])
    assert line == "error: --paradigms adjunct_islands: no such BLiMP paradigm; did you mean adjunct_island?"
    assert "--paradigms: the selection is empty" in _fails(capsys, [*base, "--paradigms", ","])
    assert "--phenomena syntax: no such BLiMP phenomenon" in _fails(capsys, [*base, "--phenomena", "syntax"])
    assert _fails(capsys, [*base, "--no-bos"]).startswith("error: --no-bos: a decoder scores BLiMP's sentences after")
    bad = tmp_path / "bad"
    shutil.copytree(data, bad)
    path = bad / "blimp" / "data" / "adjunct_island.jsonl"
    path.write_text(path.read_text() + "{oops\n")
    line = _fails(capsys, [*base[:-4], "--data-dir", str(bad), "--cache-dir", str(tmp_path / "c")])
    assert line.startswith(f"error: {path}:4: not a JSON object") and "download --only blimp" in line
    # only the lines a run reads are checked: the first two pairs of each paradigm stop before the bad line
    assert main([*base[:-4], "--data-dir", str(bad), "--cache-dir", str(tmp_path / "c"), "--pairs", "2",
                 "--head-pairs", "1", "--no-heads", "--quiet", "--json", str(tmp_path / "ok.json")]) == 0


def test_two_workers_same_json_as_local(llama, models, data, tmp_path):
    """Every task (the grammar per phenomenon, the matrix per phenomenon, each group's controls and gradients, then
    the top heads and mean ablation) on a two-worker Dask cluster, recomputed there (the §4.2 and §4.3 results read
    from a copy of the local cache, the pairs' scores removed from it): the JSON is byte for byte the local one."""
    pytest.importorskip("distributed", reason="Dask distributed is not installed (pip install -r "
                                              "requirements-distributed.txt)")
    import dask

    _, cache, local = llama
    copy = tmp_path / "cache"
    shutil.copytree(cache, copy)
    removed = list((copy / "artifacts").glob("minimal_pairs-*"))
    assert removed
    for path in removed:
        path.unlink()
    with dask.config.set({"distributed.comm.timeouts.connect": "300s"}):
        _pairs(models["llama"], data, copy, tmp_path / "dask.json", "--workers", "2")
    assert (tmp_path / "dask.json").read_bytes() == local.read_bytes()


def test_tasks_run_apart_give_the_same_json(llama, models, data, tmp_path, monkeypatch):
    """Where Dask is not installed, what the cluster changes: every task's shared data and payload cross a pickle (as
    they reach a worker) and the tasks run in another order, each on its own; the JSON is byte for byte the local
    one (no task reads another's state)."""
    import pickle

    from helpers.pipeline import engine

    def apart(lm, *, execution, task, shared, payloads, desc="tasks", progress=False):
        held = pickle.loads(pickle.dumps(shared))
        out = {k: task(lm, held, pickle.loads(pickle.dumps(p))) for k, p in reversed(list(enumerate(payloads)))}
        return [out[k] for k in range(len(payloads))]

    _, cache, local = llama
    copy = tmp_path / "cache"
    shutil.copytree(cache, copy)
    for path in (copy / "artifacts").glob("minimal_pairs-*"):
        path.unlink()
    monkeypatch.setattr(engine, "map_tasks", apart)
    _pairs(models["llama"], data, copy, tmp_path / "apart.json")
    assert (tmp_path / "apart.json").read_bytes() == local.read_bytes()
