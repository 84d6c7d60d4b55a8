"""Loading models as GPU users do (issue 51): ``--dtype`` (weights in half precision, maps float32), random models
built where they will run (on the CPU: the same weights as ever), config-only folders for ``--random-init all``
(and its probe control), and fingerprints remembered by the weight files' own digests."""
from __future__ import annotations

import json
import os
import shutil

import numpy as np
import pytest
import torch

from helpers.core import weight_digests
from helpers.core.encoding import encode_words
from helpers.core.errors import ModelNotAvailableError
from helpers.core.extract import attention_for
from helpers.core.models import LoadedModel, check_model, load_model, random_init_model

import tiny_decoders as td
from tolerances import EPS16, round_off

EPS_BF16 = 2.0 ** -7  # bfloat16 keeps 8 significant bits, 7 of them stored
WORDS = [["the", "cat", "sat", "on", "the", "mat", "."], ["a", "dog", "sat", ",", "the", "dog", "is", "big"]]


@pytest.fixture(scope="module")
def llama_dir(tmp_path_factory):
    return td.save_llama(tmp_path_factory.mktemp("loading-llama"))


def config_only(source, target):
    """``source``'s folder without its weights: config.json and the tokenizer's files only."""
    target.mkdir()
    for path in source.iterdir():
        if not path.name.startswith(("model.", "pytorch_model", "generation_config")):
            shutil.copy(path, target / path.name)
    return target


# ------------------------------------------------------------------------- random models on their device


@pytest.mark.parametrize("kind", ["bert", "llama"])
def test_a_random_model_built_on_the_cpu_has_the_weights_it_always_had(kind, tiny_model_dir, llama_dir):
    """The construction before issue 51, written out: seed, then ``from_config`` on the CPU, with nothing else."""
    from transformers import AutoConfig, AutoModel, AutoModelForCausalLM

    folder = str(tiny_model_dir if kind == "bert" else llama_dir)
    config = AutoConfig.from_pretrained(folder)
    config._attn_implementation = "eager"
    torch.manual_seed(7)
    before = (AutoModelForCausalLM if kind == "llama" else AutoModel).from_config(config, attn_implementation="eager")
    now = random_init_model(folder, seed=7, keep_embeddings=False, causal=kind == "llama", device="cpu")
    a, b = before.state_dict(), now.state_dict()
    assert a.keys() == b.keys()
    for name in a:
        assert a[name].dtype == b[name].dtype == torch.float32 and torch.equal(a[name], b[name]), name
    assert before.config.to_diff_dict() == now.config.to_diff_dict()  # part of the fingerprint


def test_a_random_model_is_built_under_its_device(tiny_model_dir, monkeypatch):
    """The weights are made where they run: ``from_config`` runs under ``torch.device(device)`` (checked on the CPU,
    where the device is the one a CUDA run would name)."""
    from transformers import AutoModel

    seen = []
    original = AutoModel.from_config

    def spy(*args, **kwargs):
        seen.append(torch.empty(0).device)  # the default device in force while the model is built
        return original(*args, **kwargs)

    monkeypatch.setattr(AutoModel, "from_config", spy)
    random_init_model(str(tiny_model_dir), keep_embeddings=False, device="meta")
    assert seen == [torch.device("meta")]


# --------------------------------------------------------------------------------------------- --dtype


@pytest.mark.parametrize("kind", ["bert", "llama"])
@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
def test_half_precision_weights_give_float32_distributions(kind, dtype, tiny_model_dir, llama_dir):
    """Weights in half precision, maps float32: each row is a softmax accumulated in float32 and rounded once to the
    weights' dtype (relative error at most ``eps / 2`` per weight, so at most that much in the row's sum), then
    summed in float32."""
    lm = load_model(str(tiny_model_dir if kind == "bert" else llama_dir), dtype=dtype)
    assert lm.dtype == dtype and {p.dtype for p in lm.model.parameters()} == {getattr(torch, dtype)}
    eps = EPS_BF16 if dtype == "bfloat16" else EPS16
    batch = encode_words(lm.tokenizer, WORDS)
    for attn in attention_for(lm, batch, level="token"):
        assert attn.dtype == np.float32
        n = attn.shape[-1]
        np.testing.assert_allclose(attn.sum(-1), 1.0, rtol=0, atol=round_off(1.0, eps=eps) + round_off(1.0, n))


def test_the_dtype_is_in_the_fingerprint_label_and_card_only_when_not_float32(tiny_model_dir):
    f32, bf16 = load_model(str(tiny_model_dir)), load_model(str(tiny_model_dir), dtype="bfloat16")
    assert f32.dtype == "float32" and "dtype" not in f32.card() and "bfloat16" not in f32.description
    assert bf16.card()["dtype"] == "bfloat16" and bf16.label == f"{f32.name} (bfloat16 weights)"
    assert "bfloat16 weights" in bf16.description and bf16.card()["name"] == bf16.label
    control = load_model(str(tiny_model_dir), dtype="bfloat16", random_init="all", seed=2)
    assert control.label == f"{f32.name} (random init of all weights, seed 2; bfloat16 weights)"
    assert bf16.fingerprint() != f32.fingerprint()
    assert load_model(str(tiny_model_dir), dtype="float32").fingerprint() == f32.fingerprint()


def test_the_dtype_comes_from_the_context_and_its_variable(tiny_model_dir, monkeypatch):
    from helpers.context import RunContext

    monkeypatch.setenv("BERT_ATTENTION_DTYPE", "bfloat16")
    ctx = RunContext.from_env()
    assert ctx.dtype == "bfloat16" and RunContext.from_env(dtype="float32").dtype == "float32"
    with ctx.active():
        assert load_model(str(tiny_model_dir)).dtype == "bfloat16"
    monkeypatch.setenv("BERT_ATTENTION_DTYPE", "double")
    with pytest.raises(ValueError, match=r"^\$BERT_ATTENTION_DTYPE: 'double' is not a weights dtype"):
        RunContext.from_env()
    with pytest.raises(ValueError, match="^dtype: 'half' is not a weights dtype; choose one of float32, bfloat16"):
        load_model(str(tiny_model_dir), dtype="half")


def test_cli_dtype_option_and_its_float16_note(tiny_model_dir, tmp_path, capsys):
    from helpers.cli import build_parser, main

    assert build_parser().parse_args(["info"]).dtype is None
    assert main(["info", "--dtype", "double"]) == 2
    code = main(["info", "--model", str(tiny_model_dir), "--dtype", "float16", "--cache-dir", str(tmp_path / "c"),
                 "--data-dir", str(tmp_path), "--json", str(tmp_path / "info.json")])
    assert code == 0
    assert "note: --dtype float16 on the CPU is slow" in capsys.readouterr().err
    assert json.loads((tmp_path / "info.json").read_text())["model"]["dtype"] == "float16"


def test_gradients_of_a_bfloat16_model(tiny_model_dir):
    """The §3.2 gradients run on half-precision weights with the float32 fitted head (the hidden states are cast)."""
    from helpers.surface.gradients import gradient_importance
    from helpers.surface.mlm import fit_head

    lm = load_model(str(tiny_model_dir), dtype="bfloat16")
    batch = encode_words(lm.tokenizer, WORDS * 3)
    head, _ = fit_head(lm, batch, batch, seed=0, epochs=1)
    got = gradient_importance(lm, head, batch, seed=0, batch_size=4)
    assert all(len(got[k]) == lm.n_layers and np.all(np.isfinite(got[k])) for k in ("sep", "punct", "other"))


# ------------------------------------------------------------------- config-only folders, --random-init all


def test_a_config_only_folder_loads_all_random_and_is_refused_otherwise(tiny_model_dir, llama_dir, tmp_path):
    for source in (tiny_model_dir, llama_dir):
        folder = config_only(source, tmp_path / source.name)
        lm = load_model(str(folder), random_init="all", seed=3)
        assert lm.random_init == "all" and check_model(str(folder), random_init="all") > 0
        for random_init in (False, "paper"):
            with pytest.raises(ModelNotAvailableError) as err:
                check_model(str(folder), random_init=random_init)
            message = str(err.value)
            assert "\n" not in message and str(folder) in message and "no weights file" in message
            assert "--random-init all works without weights" in message


def test_the_probes_control_of_an_all_random_model_is_all_random(tiny_model_dir, tmp_path):
    from helpers.probe.run import control_model

    folder = config_only(tiny_model_dir, tmp_path / "no-weights")
    lm = load_model(str(folder), random_init="all", seed=0, dtype="bfloat16")
    control = control_model(lm)
    assert control.random_init == "all" and control.dtype == "bfloat16"
    assert control.fingerprint() == lm.fingerprint()  # seed 0 both: the same model (the probes train it once)
    trained = load_model(str(tiny_model_dir))
    assert control_model(trained).random_init == "paper"


def test_the_cli_refuses_a_config_only_folder_at_once(tiny_model_dir, tmp_path, capsys):
    from helpers.cli import main

    folder = config_only(tiny_model_dir, tmp_path / "no-weights")
    code = main(["info", "--model", str(folder), "--cache-dir", str(tmp_path / "c"), "--data-dir", str(tmp_path)])
    err = capsys.readouterr().err
    assert code == 2 and len(err.strip().splitlines()) == 1 and "--random-init all works without weights" in err


# ----------------------------------------------------------------------- fingerprints by the files' digests


@pytest.fixture
def hashing(monkeypatch):
    """Counts of the weight files read for hashing (by name) and of the fingerprints computed from the parameters."""
    counts = {"files": [], "parameters": 0}
    read, compute = weight_digests._sha256_of_file, LoadedModel._weights_hash

    def spy_read(path):
        counts["files"].append(path.name)
        return read(path)

    def spy_compute(self):
        counts["parameters"] += 1
        return compute(self)

    monkeypatch.setattr(weight_digests, "_sha256_of_file", spy_read)
    monkeypatch.setattr(LoadedModel, "_weights_hash", spy_compute)
    return counts


def _model_copy(source, target):
    shutil.copytree(source, target)
    return target


def test_a_second_load_reads_no_weights_and_gives_the_same_fingerprint(tiny_model_dir, tmp_path, hashing):
    import hashlib

    folder, cache = _model_copy(tiny_model_dir, tmp_path / "model"), tmp_path / "cache"
    first = load_model(str(folder), cache_root=cache)
    value = first.fingerprint()
    assert hashing["parameters"] == 1 and "model.safetensors" in hashing["files"]
    assert value == first._weights_hash()  # what the parameters give
    hashing.update(files=[], parameters=0)
    assert load_model(str(folder), cache_root=cache).fingerprint() == value
    assert hashing == {"files": [], "parameters": 0}
    entry = next((cache / "fingerprints" / "files").glob("*.json"))
    kept = {json.loads(path.read_text())["path"]: json.loads(path.read_text())["sha256"]
            for path in (cache / "fingerprints" / "files").glob("*.json")}
    weights = folder / "model.safetensors"
    assert kept[str(weights)] == hashlib.sha256(weights.read_bytes()).hexdigest()
    assert entry.is_file()


def test_a_changed_file_is_hashed_again(tiny_model_dir, tmp_path, hashing):
    folder, cache = _model_copy(tiny_model_dir, tmp_path / "model"), tmp_path / "cache"
    value = load_model(str(folder), cache_root=cache).fingerprint()
    weights = folder / "model.safetensors"
    stat = weights.stat()
    os.utime(weights, ns=(stat.st_atime_ns, stat.st_mtime_ns + 10**9))  # touched: the same bytes, a new time
    hashing.update(files=[], parameters=0)
    assert load_model(str(folder), cache_root=cache).fingerprint() == value
    assert hashing == {"files": ["model.safetensors"], "parameters": 0}  # the same digest: the fingerprint is kept
    from safetensors.torch import load_file, save_file

    tensors = load_file(str(weights))
    name = sorted(tensors)[0]
    tensors[name] = tensors[name] + 1.0  # other weights: another size or time, another digest, another fingerprint
    save_file(tensors, str(weights), metadata={"format": "pt"})
    hashing.update(files=[], parameters=0)
    changed = load_model(str(folder), cache_root=cache)
    assert changed.fingerprint() != value and hashing["files"] == ["model.safetensors"] and hashing["parameters"] == 1


def test_a_damaged_entry_is_ignored_and_written_again(tiny_model_dir, tmp_path, hashing):
    folder, cache = _model_copy(tiny_model_dir, tmp_path / "model"), tmp_path / "cache"
    value = load_model(str(folder), cache_root=cache).fingerprint()
    entries = sorted((cache / "fingerprints").glob("*.json")) + sorted((cache / "fingerprints" / "files").glob("*.json"))
    good = {path: path.read_text() for path in entries}
    for path in entries:
        path.write_text('{"sha256": "not a digest", "fingerprint": 42')  # cut short: not JSON
    hashing.update(files=[], parameters=0)
    assert load_model(str(folder), cache_root=cache).fingerprint() == value
    assert "model.safetensors" in hashing["files"] and hashing["parameters"] == 1
    assert {path: path.read_text() for path in entries} == good  # rewritten as they were


def test_weights_changed_after_loading_are_hashed(tiny_model_dir, tmp_path, hashing):
    """The remembered value stands for the weights as loaded only: a float64 copy or an in-place edit is hashed."""
    import dataclasses

    lm = load_model(str(tiny_model_dir), cache_root=tmp_path)
    value = lm.fingerprint()
    wide = dataclasses.replace(lm, model=lm.model.double(), _fingerprint=None)
    assert wide.fingerprint() != value
    hashing.update(parameters=0)
    edited = load_model(str(tiny_model_dir), cache_root=tmp_path)
    with torch.no_grad():
        next(edited.model.parameters()).mul_(2.0)
    assert edited.fingerprint() != value and hashing["parameters"] == 1


def test_a_hub_snapshot_is_named_by_its_blobs(tmp_path):
    """A file of a Hugging Face snapshot is a link to ``blobs/<sha256>``: that name is its digest, nothing is read."""
    blobs, snapshot = tmp_path / "blobs", tmp_path / "snapshots" / "abc"
    blobs.mkdir()
    snapshot.mkdir(parents=True)
    digest = "ab" * 32
    (blobs / digest).write_bytes(b"weights")
    (snapshot / "model.safetensors").symlink_to(blobs / digest)
    assert weight_digests.file_sha256(snapshot / "model.safetensors", cache_root=tmp_path / "cache") == digest
    assert not (tmp_path / "cache").exists()


def test_the_cache_takes_a_bfloat16_models_rows_and_still_finds_damage():
    """A bfloat16 model's rows (softmax rounded to bfloat16, up to 2**-8 off in their sums) pass the shard check;
    rows scaled by 2 (damage) do not."""
    from helpers.data.cache import shard_values_problem

    generator = torch.Generator().manual_seed(0)
    sizes = np.array([5, 64, 128])
    rows = [torch.softmax(4 * torch.randn(2 * n, n, generator=generator), -1).to(torch.bfloat16).float()
            for n in sizes]  # 2 maps of [n, n] per example
    uniform = torch.full((2 * 255, 255), 1 / 255).to(torch.bfloat16).float()  # each 1/255 rounded up: 0.0039 over
    sizes, rows = np.append(sizes, 255), rows + [uniform]
    data = torch.cat([r.reshape(-1) for r in rows]).numpy()
    assert shard_values_problem(data, sizes, 2, "weights") is None
    assert "do not sum to 1" in shard_values_problem(2 * data, sizes, 2, "weights")



# ------------------------------------------------------------------ random-init fingerprints by their recipe


def _refuse_hashing(self):
    raise AssertionError("the weights were hashed")


def test_a_random_init_fingerprint_is_its_recipe_not_its_weights(tiny_model_dir, tmp_path, monkeypatch):
    """Two loads of one control give one fingerprint without hashing a weight; the seed, the kind, the config, the
    dtype and the kept embeddings' file each give another."""
    from safetensors.torch import load_file, save_file

    cache = tmp_path / "cache"
    first = load_model(str(tiny_model_dir), random_init="paper", seed=3, cache_root=cache)
    again = load_model(str(tiny_model_dir), random_init="paper", seed=3, cache_root=cache)
    assert all(torch.equal(a, b) for a, b in zip(first.model.state_dict().values(), again.model.state_dict().values()))
    wider = _model_copy(tiny_model_dir, tmp_path / "wider-init")
    config = json.loads((wider / "config.json").read_text())
    (wider / "config.json").write_text(json.dumps({**config, "initializer_range": 0.05}))
    embeddings = _model_copy(tiny_model_dir, tmp_path / "other-embeddings")
    tensors = load_file(str(embeddings / "model.safetensors"))
    name = next(n for n in tensors if "word_embeddings" in n)
    tensors[name] = tensors[name] + 1.0
    save_file(tensors, str(embeddings / "model.safetensors"), metadata={"format": "pt"})

    monkeypatch.setattr(LoadedModel, "_weights_hash", _refuse_hashing)
    value = first.fingerprint()
    assert again.fingerprint() == value and len(value) == 64
    others = [load_model(str(tiny_model_dir), random_init="paper", seed=4, cache_root=cache),
              load_model(str(tiny_model_dir), random_init="all", seed=3, cache_root=cache),
              load_model(str(wider), random_init="paper", seed=3, cache_root=cache),
              load_model(str(tiny_model_dir), random_init="paper", seed=3, cache_root=cache, dtype="bfloat16"),
              load_model(str(embeddings), random_init="paper", seed=3, cache_root=cache)]
    fingerprints = [lm.fingerprint() for lm in others]
    assert len({value, *fingerprints}) == 1 + len(others)


def test_a_random_init_model_changed_after_loading_is_hashed(tiny_model_dir, tmp_path, hashing):
    """The recipe stands for the weights as built only: an in-place edit since is hashed (its own fingerprint)."""
    value = load_model(str(tiny_model_dir), random_init="paper", seed=3, cache_root=tmp_path).fingerprint()
    assert hashing["parameters"] == 0
    edited = load_model(str(tiny_model_dir), random_init="paper", seed=3, cache_root=tmp_path)
    with torch.no_grad():
        next(edited.model.parameters()).mul_(2.0)
    assert edited.fingerprint() != value and hashing["parameters"] == 1
