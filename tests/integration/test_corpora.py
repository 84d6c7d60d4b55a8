"""Corpus discovery, GUM splits and paragraphs, data-dir configuration, downloads with checksums."""
import hashlib
import json

import pytest

import helpers.data.corpora as corpora
from helpers.config import DATA_ENV, DataNotFoundError, data_dir
from helpers.data.corpora import EmptyCorpusError, gum_split_documents, load_gum, load_treebank, parse_splits

def test_splits_and_paragraphs(fake_data):
    assert parse_splits(fake_data / "gum" / "splits.md")["test"] == ["GUM_c", "GUM_reddit_x"]
    assert gum_split_documents("train", data_dir=fake_data) == ["GUM_a"]
    assert gum_split_documents("test", data_dir=fake_data) == ["GUM_c"]  # absent reddit doc left out
    assert gum_split_documents("test2", data_dir=fake_data) == ["GENTLE_d"]
    (doc,) = load_gum("dev", data_dir=fake_data)
    assert doc.doc_id == "GUM_b" and [len(p) for p in doc.paragraphs] == [2, 1]
    with pytest.raises(ValueError, match="GUM split 'valid'"):
        gum_split_documents("valid", data_dir=fake_data)


def test_treebank_specs(fake_data, toy_conllu):
    assert len(load_treebank("gum:train", data_dir=fake_data)) == 3
    assert len(load_treebank(str(toy_conllu), max_sentences=2)) == 2
    with pytest.raises(ValueError, match="corpus 'wsj'"):
        load_treebank("wsj", data_dir=fake_data)
    with pytest.raises(FileNotFoundError, match="EWT"):
        load_treebank("ewt:dev", data_dir=fake_data)


def test_parsed_files_are_cached_on_disk(toy_conllu, tmp_path, monkeypatch):
    """The disk cache of parsed files gives back exactly what the parser gives, follows the file's
    bytes, and a corrupted cache file is parsed again."""
    monkeypatch.setenv("BERT_ATTENTION_CACHE", str(tmp_path / "cache"))
    copy = tmp_path / "toy.conllu"
    copy.write_bytes(toy_conllu.read_bytes())
    fresh = corpora.read_conllu(copy)
    first = corpora._parse_with_disk_cache(copy, None)
    (stored,) = (tmp_path / "cache" / "parsed").iterdir()
    again = corpora._parse_with_disk_cache(copy, None)
    assert first == fresh and again == fresh
    assert [s.metadata for s in again] == [s.metadata for s in fresh] and again[0].source == str(copy)
    stored.write_text("{not json")
    assert corpora._parse_with_disk_cache(copy, None) == fresh
    copy.write_bytes(toy_conllu.read_bytes().replace(b"\n\n", b"\n\n", 1) + b"\n")  # other bytes, new key
    corpora._parse_with_disk_cache(copy, None)
    assert len(list((tmp_path / "cache" / "parsed").iterdir())) == 2


def test_a_parse_cut_short_is_cached_and_parsed_again_for_more(toy_conllu, tmp_path, monkeypatch):
    """``max_sentences`` reads a file only as far as it asks; the parsed-treebank entry of such a read holds those
    sentences: a later read of fewer is served by it, one of more parses the file again (as far as it asks) and
    rewrites it, and the entry of a whole read serves every request."""
    cache, path = tmp_path / "cache", tmp_path / "toy.conllu"
    path.write_bytes(toy_conllu.read_bytes())
    whole = corpora.read_conllu(path.resolve())
    parses, parse = [], corpora.read_conllu
    monkeypatch.setattr(corpora, "read_conllu", lambda p, **kw: parses.append(kw.get("max_sentences")) or parse(p, **kw))

    def load(n):
        corpora._read_cached.cache_clear()  # a new process: only the disk cache is left
        return load_treebank(str(path), max_sentences=n, cache_root=cache)

    assert load(1) == whole[:1] and parses == [1]
    (entry,) = (cache / "parsed").glob("*.json")
    assert [row["line"] for row in json.loads(entry.read_text())["sentences"]] == [1]
    assert load(1) == whole[:1] and parses == [1]
    assert load(2) == whole[:2] and parses == [1, 2]
    assert load(1) == whole[:1] and parses == [1, 2]
    assert load(None) == whole and parses == [1, 2, None]
    assert load(2) == whole[:2] and load(3) == whole and load(9) == whole and parses == [1, 2, None]
    assert corpora.parsed_entry_problem(json.loads(entry.read_text()), entry.stem, path.read_bytes()) is None


def test_empty_corpus_is_an_error(tmp_path):
    empty = tmp_path / "empty.conllu"
    empty.write_text("\n\n")
    with pytest.raises(EmptyCorpusError, match="no sentences"):
        load_treebank(str(empty))


def test_data_dir_precedence(fake_data, tmp_path, monkeypatch):
    monkeypatch.setenv(DATA_ENV, str(fake_data))
    assert data_dir() == fake_data.resolve()
    assert data_dir(tmp_path) == tmp_path.resolve()
    with pytest.raises(DataNotFoundError, match="--data-dir"):
        data_dir(tmp_path / "missing")
    monkeypatch.setenv(DATA_ENV, str(tmp_path / "missing"))
    with pytest.raises(DataNotFoundError, match=DATA_ENV):
        data_dir()


def test_download_verifies_checksums_and_resumes(tmp_path, monkeypatch):
    source = tmp_path / "upstream"
    source.mkdir()
    (source / "a.conllu").write_text("one")
    (source / "b.conllu").write_text("two")
    entries = [
        {"path": f"gum/dep/{n}", "url": (source / n).as_uri(), "optional": False,
         "sha256": hashlib.sha256((source / n).read_bytes()).hexdigest()}
        for n in ("a.conllu", "b.conllu")
    ]
    fake = {"corpora": {"gum": {"commit": "abc"}, "ewt": {"commit": "def"}}, "files": entries}
    monkeypatch.setattr(corpora, "manifest", lambda: json.loads(json.dumps(fake)))
    target = tmp_path / "data"
    assert corpora.download(target, only="gum", progress=False)["fetched"] == 2
    assert (target / "gum" / "COMMIT").read_text().strip() == "abc"
    assert corpora.download(target, only="gum", progress=False) == {"fetched": 0, "kept": 2, "optional_missing": 0}
    (source / "b.conllu").write_text("tampered")
    (target / "gum" / "dep" / "b.conllu").unlink()
    with pytest.raises(ValueError, match="checksum mismatch"):
        corpora.download(target, only="gum", progress=False)
    assert not (target / "gum" / "dep" / "b.conllu").exists()
    assert corpora.verify(target)["missing"] == ["gum/dep/b.conllu"]


def test_manifest_pins_every_shipped_file():
    info = corpora.manifest()
    paths = [e["path"] for e in info["files"]]
    assert "ud-english-ewt/en_ewt-ud-dev.conllu" in paths and "gum/splits.md" in paths
    assert all(info["corpora"]["gum"]["commit"] in e["url"] for e in info["files"] if e["path"].startswith("gum/"))


@pytest.mark.slow
def test_real_corpora_sizes(shared_data):
    assert len(gum_split_documents("dev", data_dir=shared_data)) >= 30
    assert corpora.verify(shared_data)["mismatch"] == []
    ewt = shared_data / "ud-english-ewt" / "en_ewt-ud-dev.conllu"
    n_ids = sum(line.startswith("# sent_id") for line in ewt.read_text(encoding="utf-8").splitlines())
    assert len(load_treebank("ewt:dev", data_dir=shared_data)) == n_ids
