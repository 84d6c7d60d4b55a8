"""``python -m helpers ablate`` on the tiny random BERT and the tiny decoders, on the toy corpora: the JSON layout
of docs/command_line.md (an encoder's sinks [SEP] and [CLS], a decoder's BOS and its ``"causal"``), a model with one
head per layer, one-line errors with exit status 2 (bad sizes, a corpus with no usable sentence, a model whose
attention cannot be masked), and the same JSON from a two-worker Dask cluster as from this process."""
from __future__ import annotations

import importlib.util
import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from helpers.ablation.interventions import NotMaskable
from helpers.ablation.run import MIN_WORDS, PARTS
from helpers.ablation.section import JSON_KEYS, SECTION
from helpers.claims import check_row
from helpers.cli import main

import tiny_decoders as td

TESTS = Path(__file__).resolve().parents[1]
L, H = 2, 4  # the tiny BERT's layers and heads (tests/conftest.py)
SIZES = ["--max-sentences", "3", "--detail-sentences", "2", "--max-length", "60", "--permutations", "200"]
CLAIM_IDS = ["ablation-single-heads", "ablation-one-head-layers", "ablation-pruning", "ablation-paper-heads",
             "ablation-sink-noop", "ablation-sink-noop-measured", "ablation-importance-ranks"]
PAPER_KINDS = {"syntax", "coref", "positional", "broad", "specialised", "all"}
PAPER_ENTRY = ["heads", "delta_percentiles", "delta_mean_percentile", "delta_p", "importance_percentiles",
               "importance_mean_percentile", "importance_p", "delta_expected_percentile", "delta_gain",
               "delta_gain_interval", "delta_p_layers"]
PRUNE_KEYS = ["shares", "removed", "importance", "order", "random_mean", "random_min", "random_max", "seeds",
              "in_sample", "by_delta", "orders", "folds"]


def _ablate(model, data, cache, out, *extra) -> dict:
    argv = ["ablate", "--model", str(model), "--data-dir", str(data), "--cache-dir", str(cache), *SIZES, *extra,
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
    """conftest's toy corpora (``write_toy_data``), once for the module: loaded from its file, since ``from conftest
    import`` finds whichever conftest module was imported first under that name."""
    spec = importlib.util.spec_from_file_location("ablation_cli_conftest", TESTS / "conftest.py")
    conftest = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(conftest)
    return conftest.write_toy_data(tmp_path_factory.mktemp("ablate"))


def _save_toy_tokenizer(tiny_model_dir, directory) -> int:
    """The tiny BERT's toy WordPiece tokenizer saved into ``directory``; returns its vocabulary's size."""
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(tiny_model_dir)
    tokenizer.save_pretrained(directory)
    return len(tokenizer)


@pytest.fixture(scope="module")
def encoder(tiny_model_dir, data, tmp_path_factory):
    """``(JSON, cache, file)``: the tiny BERT's ablate run with the paper's heads, computed afresh."""
    root = tmp_path_factory.mktemp("ablate-encoder")
    return _ablate(tiny_model_dir, data, root / "cache", root / "a.json"), root / "cache", root / "a.json"


def _shape(x) -> tuple:
    return np.asarray(x).shape


def _check_common(out: dict, n_layers: int, n_heads: int) -> None:
    """What every model's JSON holds: sizes, per-head arrays ``[layer][head]``, the pruning curve, the summaries."""
    per_head = (n_layers, n_heads)
    assert out["treebank"] == "gum:test" and out["segments"] == 3 and out["detail_segments"] == 2
    assert out["tokens"] > 0 and out["parts"] == list(PARTS) and (out["n_layers"], out["n_heads"]) == per_head
    assert "0-based" in out["head_index"]
    base = out["base_loss"]
    assert base > 0
    for key in ("delta", "delta_relative", "importance", "importance_normalised"):
        assert _shape(out[key]) == per_head, key
    assert _shape(out["delta_interval"]) == (*per_head, 2)
    lo, hi = np.moveaxis(np.asarray(out["delta_interval"]), -1, 0)
    assert np.all(lo <= np.asarray(out["delta"])) and np.all(np.asarray(out["delta"]) <= hi)
    np.testing.assert_allclose(out["delta_relative"], np.asarray(out["delta"]) / base, rtol=1e-12)
    norms = np.linalg.norm(out["importance_normalised"], axis=1)
    np.testing.assert_allclose(norms, 1.0, rtol=1e-12)  # each layer's row over its l2 norm
    assert np.all(np.asarray(out["importance"]) >= 0)

    prune = out["prune"]
    assert list(prune) == PRUNE_KEYS  # the layout of before, extended (issue 61: the held-out curves)
    total = n_layers * n_heads
    assert prune["removed"][0] == 0 and prune["removed"][-1] == total and prune["seeds"] == [0, 1, 2]
    assert prune["shares"] == [k / total for k in prune["removed"]]
    labels = {f"{l + 1}-{h + 1}" for l in range(n_layers) for h in range(n_heads)}
    assert sorted(prune["order"]) == sorted(labels)  # every head once, 1-based labels, in removal order
    curves = [prune[k] for k in ("importance", "random_mean", "random_min", "random_max", "in_sample", "by_delta")]
    assert all(len(c) == len(prune["removed"]) for c in curves)
    assert prune["folds"] == [k % 2 for k in range(out["segments"])] and len(prune["orders"]) == 2
    assert prune["order"] == prune["orders"][0] and all(sorted(o) == sorted(labels) for o in prune["orders"])
    assert prune["by_delta"][0] == pytest.approx(base, rel=1e-5) and prune["in_sample"][0] == pytest.approx(base, rel=1e-5)
    assert np.all(np.asarray(prune["random_min"]) <= np.asarray(prune["random_mean"]) + 1e-12)
    assert np.all(np.asarray(prune["random_mean"]) <= np.asarray(prune["random_max"]) + 1e-12)
    # nothing removed is the full model, in every order (other batches of the same rows: float32 passes)
    assert prune["importance"][0] == pytest.approx(base, rel=1e-5)
    assert prune["random_min"][0] == prune["random_max"][0] == pytest.approx(base, rel=1e-5)

    for kind, tests in out["sinks"].items():
        assert list(tests) == ["noop", "redirect"], kind
        for test in tests.values():
            assert list(test) == ["all", "all_interval", "per_head"]
            assert isinstance(test["all"], float) and _shape(test["per_head"]) == per_head
            assert test["all_interval"][0] <= test["all"] <= test["all_interval"][1]
    assert list(out["spearman"]) == ["rho", "interval"] and -1 <= out["spearman"]["rho"] <= 1
    assert [c["id"] for c in out["claims"]] == CLAIM_IDS
    for row in out["claims"]:
        check_row(row)  # every verdict follows from its row's own fields
    assert out["settings"]["n_perm"] == 200 and out["settings"]["everything"] is False

    # issue 61: every relative change over the same sentences' loss; Michel's count; the loss's scale; mean ablation
    assert out["detail_base_loss"] > 0
    sig = out["delta_significant"]
    assert sig["heads"] == n_layers * n_heads and sig["raise"] == int(np.sum(lo > 0)) and sig["lower"] == int(np.sum(hi < 0))
    scale = out["loss_scale"]
    assert scale["base"] == base and scale["unigram"] > 0
    assert scale["every_head_removed"] == pytest.approx(prune["random_mean"][-1], rel=1e-5)  # the curves' last point
    for key in ("delta_mean", "delta_mean_relative"):
        assert _shape(out[key]) == per_head, key
    assert _shape(out["delta_mean_interval"]) == (*per_head, 2)
    control = out["sinks_control"]
    assert list(control) == ["change", "interval", "relative", "relative_interval"]
    assert control["interval"][0] <= control["change"] <= control["interval"][1]
    assert control["relative_interval"][0] <= control["relative"] <= control["relative_interval"][1]


def _check_paper_heads(out: dict) -> None:
    heads = out["paper_heads"]
    assert set(heads) <= PAPER_KINDS and "all" in heads and "syntax" in heads and "coref" in heads
    union = set()
    for kind, entry in heads.items():
        assert list(entry) == PAPER_ENTRY, kind
        if kind != "all":
            union |= set(entry["heads"])
        if entry["heads"]:
            assert len(entry["delta_percentiles"]) == len(entry["heads"])
            assert entry["delta_mean_percentile"] == pytest.approx(np.mean(entry["delta_percentiles"]))
            assert 0 < entry["delta_p"] <= 1 and 0 < entry["importance_p"] <= 1
        else:  # a kind with no head (none over half its attention on a neighbour, say): nothing to rank
            assert all(entry[k] is None for k in PAPER_ENTRY[1:])
    assert sorted(heads["all"]["heads"]) == sorted(union)
    assert len(heads["coref"]["heads"]) == 1
    assert set(heads["specialised"]["heads"]) <= set(heads["syntax"]["heads"])
    row = {c["id"]: c for c in out["claims"]}["ablation-paper-heads"]
    if heads["specialised"]["heads"]:  # judged on the heads past the syntax chapter's margin
        assert row["value"] == heads["specialised"]["delta_mean_percentile"]
        assert row["p_value"] == heads["specialised"]["delta_p_layers"]
    else:
        assert row["verdict"] == "not applicable" and "margin" in row["reason"]


def test_encoder_json_layout(encoder):
    out, _, _ = encoder
    assert list(out) == list(JSON_KEYS)  # an encoder's: no "causal"
    _check_common(out, L, H)
    assert "masked-LM loss" in out["loss"] and out["loss_head"]["source"]  # the tiny BERT has no head: fitted
    assert set(out["sinks"]) == {"sep", "cls"} and set(out["sink_share"]) == {"sep", "cls"}
    assert all(_shape(v) == (L, H) for v in out["sink_share"].values())
    assert _shape(out["only"]) == (L, H)
    np.testing.assert_array_equal(out["only_layer_min"], np.min(out["only"], axis=1))
    _check_paper_heads(out)
    assert out["settings"]["paper_heads"] is True
    # the tiny random BERT parks no attention on [SEP] or [CLS]: the sink claims say so, with the measured share
    premise = out["sink_premise"]
    assert set(premise) == {"measured", "sep", "cls"} and premise["measured"] in ("sep", "cls")
    assert all(premise[k]["reason"] is not None for k in ("sep", "cls")), premise  # at most 0.25 of any layer's
    rows = {c["id"]: c for c in out["claims"]}
    sep, measured = rows["ablation-sink-noop"], rows["ablation-sink-noop-measured"]
    assert sep["verdict"] == "not applicable" and sep["reason"] == premise["sep"]["reason"]
    assert f"{premise['sep']['layer_max']:.2f}" in sep["reason"]
    assert measured["verdict"] == "not applicable"
    assert ("measured sink is [SEP]" if premise["measured"] == "sep" else "is not a sink") in measured["reason"]
    applicable = {"ablation-single-heads", "ablation-one-head-layers", "ablation-pruning", "ablation-importance-ranks"}
    assert all(rows[i].get("reason") is None for i in applicable)  # these apply to any 2 x 4 encoder


def test_a_cached_rerun_writes_the_same_bytes(encoder, tiny_model_dir, data, tmp_path):
    """Everything read back from the cache (the losses, the fitted head): the same JSON, byte for byte. Before, a
    cached file's sorted keys put [CLS]'s sink tests before [SEP]'s, and the cached head's report came in another
    order."""
    _, cache, first = encoder
    _ablate(tiny_model_dir, data, cache, tmp_path / "again.json")
    assert (tmp_path / "again.json").read_bytes() == first.read_bytes()


@pytest.mark.parametrize("name, save, paper", [("gpt2", td.save_gpt2, True), ("llama", td.save_llama, False)])
def test_decoder_json_layout(name, save, paper, data, tmp_path):
    """A decoder's loss is its own next-token loss; its sink is BOS; its JSON adds the section's ``"causal"``. The
    Llama shares key-value heads (the sink tests read each query head's group)."""
    model = save(tmp_path / name)
    out = _ablate(model, data, tmp_path / "cache", tmp_path / "d.json", *([] if paper else ["--no-paper-heads"]))
    assert list(out) == [*JSON_KEYS, "causal"]
    assert out["causal"]["definition"] == SECTION.causal and out["causal"]["bos"] is True
    _check_common(out, 2, 4)
    assert out["loss"].startswith("next-token loss") and out["loss_head"] is None
    assert set(out["sinks"]) == {"bos"}
    rows = {c["id"]: c for c in out["claims"]}
    assert rows["ablation-sink-noop"]["verdict"] == "not applicable" and "no [SEP]" in rows["ablation-sink-noop"]["reason"]
    measured = rows["ablation-sink-noop-measured"]
    if paper:
        assert set(out["sink_share"]) == {"bos"} and _shape(out["sink_share"]["bos"]) == (2, 4)
        _check_paper_heads(out)
        premise = out["sink_premise"]
        assert premise["measured"] == "bos" and "BOS" in measured["claim"]
        if premise["bos"]["reason"] is None and out["sink_sets"]:        # BOS a sink, with heads over the share
            assert measured["rule"] == "combined" and len(measured["parts"]) == 3
            entry = out["sink_sets"]["bos"]
            assert measured["value"] == pytest.approx(100 * entry["noop"]["relative"])
        else:
            assert measured["verdict"] == "not applicable"
    else:
        assert out["paper_heads"] is None and out["sink_share"] is None
        assert out["sink_premise"] is None and out["sink_sets"] is None
        assert measured["verdict"] == "not applicable" and "--no-paper-heads" in measured["reason"]


def test_one_head_per_layer_has_no_all_but_one(tiny_model_dir, data, tmp_path):
    """A 2-layer BERT with one head per layer: all but one has nothing to remove; the claim says so, nothing fails."""
    import torch
    from transformers import BertConfig, BertModel

    model = tmp_path / "one-head"
    vocab = _save_toy_tokenizer(tiny_model_dir, model)
    config = BertConfig(vocab_size=vocab, hidden_size=16, num_hidden_layers=2, num_attention_heads=1,
                        intermediate_size=32, max_position_embeddings=64)
    torch.manual_seed(0)
    BertModel(config).save_pretrained(model)
    out = _ablate(model, data, tmp_path / "cache", tmp_path / "o.json", "--no-paper-heads")
    _check_common(out, 2, 1)
    assert out["only"] is None and out["only_layer_min"] is None
    row = {c["id"]: c for c in out["claims"]}["ablation-one-head-layers"]
    assert row["verdict"] == "not applicable" and "one head per layer" in row["reason"]


@pytest.mark.parametrize("argv, message", [
    (["--max-sentences", "0"], "--max-sentences"),
    (["--max-sentences", "-1"], "--max-sentences"),
    (["--detail-sentences", "0"], "--detail-sentences"),
    (["--parts", "nonsense"], "choose from single, importance"),
])
def test_bad_options_are_one_line(argv, message, tiny_model_dir, data, capsys):
    line = _fails(capsys, ["ablate", "--model", str(tiny_model_dir), "--data-dir", str(data), *argv])
    assert message in line


def test_a_corpus_without_a_usable_sentence_is_one_line(tiny_model_dir, tmp_path, capsys):
    """GUM test of sentences shorter than MIN_WORDS words only (the layout of ../shared/data: train unlisted)."""
    dep = tmp_path / "gum" / "dep"
    dep.mkdir(parents=True)
    for name in ("GUM_a", "GUM_b"):
        shutil.copy(TESTS / "fixtures" / "toy.conllu", dep / f"{name}.conllu")
    short = ["The", "cat", "sat", "."][: MIN_WORDS - 1]
    rows = "".join(f"{i}\t{w}\t{w.lower()}\tX\tX\t_\t{0 if i == 1 else 1}\t{'root' if i == 1 else 'dep'}\t_\t_\n"
                   for i, w in enumerate(short, start=1))
    (dep / "GUM_c.conllu").write_text("".join(f"# sent_id = s{k}\n# text = {' '.join(short)}\n{rows}\n"
                                              for k in range(3)))
    (tmp_path / "gum" / "splits.md").write_text("## dev\n\n  * GUM_b\n\n## test\n\n  * GUM_c\n")
    line = _fails(capsys, ["ablate", "--model", str(tiny_model_dir), "--data-dir", str(tmp_path),
                           "--cache-dir", str(tmp_path / "cache"), "--max-length", "60", "--no-paper-heads"])
    assert line == f"error: gum:test: no sentence of at least {MIN_WORDS} words to remove heads on"


def _albert(vocab: int = 40, **extra):
    import torch
    from transformers import AlbertConfig, AlbertModel

    config = AlbertConfig(vocab_size=vocab, embedding_size=16, hidden_size=16, num_hidden_layers=2,
                          num_attention_heads=4, intermediate_size=32, max_position_embeddings=64, **extra)
    torch.manual_seed(0)
    return AlbertModel(config)


def test_an_unknown_architecture_is_not_maskable():
    """ALBERT's modules are not among those helpers.core.internals knows: masking a head or editing its weights
    raises NotMaskable naming the model type in one line (the head mask raised a bare NotImplementedError before)."""
    import torch

    from helpers.ablation.interventions import SinkTest, intervene

    model = _albert(attn_implementation="eager").eval()
    with pytest.raises(NotMaskable, match="'albert'") as err:
        with intervene(model, xi=torch.ones(1, 2, 4)):
            pass
    assert "\n" not in str(err.value)
    test = SinkTest(torch.zeros(1, 3, dtype=torch.bool), torch.ones(1, 2, 4, dtype=torch.bool), "noop")
    with pytest.raises(NotMaskable, match="'albert'"):
        with intervene(model, sink=test):
            pass


def test_a_model_that_cannot_be_masked_is_one_line(tiny_model_dir, data, tmp_path, capsys):
    """On the command line, NotMaskable is one error line with exit status 2, not a traceback."""
    model = tmp_path / "albert"
    _albert(_save_toy_tokenizer(tiny_model_dir, model)).save_pretrained(model)
    line = _fails(capsys, ["ablate", "--model", str(model), "--data-dir", str(data), "--cache-dir",
                           str(tmp_path / "cache"), *SIZES, "--no-paper-heads", "--parts", "single"])
    assert line.startswith("error: model type 'albert'")


def test_weights_the_attention_function_never_sees_are_one_line(encoder, tiny_model_dir, data, tmp_path, capsys,
                                                               monkeypatch):
    """A model whose attention does not go through the function the sink tests register (here: that function
    replaced by one that never marks a layer seen): the sink test is refused in one line, exit status 2."""
    import sys

    from helpers.ablation import interventions

    def unseen(module, query, key, value, attention_mask, *args, **kwargs):
        eager = getattr(sys.modules[type(module).__module__], "eager_attention_forward")
        return eager(module, query, key, value, attention_mask, *args, **kwargs)

    monkeypatch.setattr(interventions, "_interface_attention", unseen)
    _, cache, _ = encoder  # its fitted masked-LM head is cached; the sink tests alone are a new run
    line = _fails(capsys, ["ablate", "--model", str(tiny_model_dir), "--data-dir", str(data), "--cache-dir",
                           str(cache), *SIZES, "--no-paper-heads", "--parts", "sinks"])
    assert line.startswith("error: model type 'bert': its attention weights could not be edited")


def test_two_workers_same_json_as_local(encoder, tiny_model_dir, data, tmp_path):
    """Every task (the base loss, each layer's removals, each sink test) on a two-worker Dask cluster, computed there
    afresh (its own cache): the JSON is byte for byte the local one (the same tasks on the same batches; importance
    and the pruning curve run in this process either way). Without the paper's heads: their chapters' runs on a
    cluster would take minutes here."""
    pytest.importorskip("distributed", reason="Dask distributed is not installed (pip install -r "
                                              "requirements-distributed.txt)")
    import dask

    _, cache, _ = encoder  # the local run's losses, cached by the module's encoder run
    local = tmp_path / "local.json"
    _ablate(tiny_model_dir, data, cache, local, "--no-paper-heads")
    # a loaded machine is not taken for an unreachable cluster (as tests/integration/test_distributed.py)
    with dask.config.set({"distributed.comm.timeouts.connect": "300s"}):
        dist = _ablate(tiny_model_dir, data, tmp_path / "cache-dask", tmp_path / "dask.json", "--no-paper-heads",
                       "--workers", "2")
    assert (tmp_path / "dask.json").read_bytes() == local.read_bytes()
    assert dist["paper_heads"] is None and dist["sink_share"] is None
    assert {c["id"]: c for c in dist["claims"]}["ablation-paper-heads"]["verdict"] == "not applicable"


def test_two_workers_same_losses_with_a_sinks_heads(data, tmp_path):
    """The tasks the command reaches only with the paper's heads read (the sink tests on a sink's heads and their
    matched control), with the heads given, and mean ablation: ``run_ablation`` on a two-worker Dask cluster returns
    the losses of this process, byte for byte (the control's positions and the mean contexts are drawn and computed
    here, then handed to the workers)."""
    pytest.importorskip("distributed", reason="Dask distributed is not installed (pip install -r "
                                              "requirements-distributed.txt)")
    import dask

    from helpers.ablation.run import run_ablation
    from helpers.context import RunContext
    from helpers.core.models import load_model
    from helpers.pipeline.engine import Execution

    lm = load_model(str(td.save_gpt2(tmp_path / "gpt2")))
    heads = {"bos": [[True, False, True, False], [False, False, False, True]]}

    def run(cache, execution=None) -> dict:
        ctx = RunContext.from_env(data_dir=data, cache_dir=cache, small=False, execution=execution)
        return run_ablation(lm, ctx, max_sentences=3, detail_sentences=2, max_length=60, sink_heads=heads,
                            parts=("sinks", "mean"), draws=2)

    local = run(tmp_path / "local")
    with dask.config.set({"distributed.comm.timeouts.connect": "300s"}):
        dist = run(tmp_path / "dask", Execution.resolve(engine=None, workers=2, address=None))
    assert json.dumps(dist) == json.dumps(local)
    sets = local["sink_sets"]["bos"]
    assert sets["heads"] == heads["bos"] and _shape(sets["control"]) == (2, 3) and _shape(sets["noop"]) == (3,)
    assert _shape(local["control"]["all"]) == (2, 3) and _shape(local["mean"]) == (2, 4, 3)
