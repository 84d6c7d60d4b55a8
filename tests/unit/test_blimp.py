"""Reading BLiMP (:mod:`helpers.data.blimp`) from tiny files written here, shaped like the published ones (no data of
BLiMP's own is copied into the tests), and the pinned download entries of the manifest."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from helpers.data import blimp, corpora


def _pair(uid: str, term: str, n: int, prefix: bool = False) -> dict:
    row = {"sentence_good": f"The cat {n} sleeps.", "sentence_bad": f"The cat {n} sleep.", "field": "morphology",
           "linguistics_term": term, "UID": uid, "simple_LM_method": True, "one_prefix_method": prefix,
           "two_prefix_method": False, "lexically_identical": False, "pairID": str(n)}
    if prefix:
        row.update(one_prefix_prefix=f"The cat {n}", one_prefix_word_good="sleeps", one_prefix_word_bad="sleep")
    return row


PARADIGMS = {"agree_a": "agreement", "agree_b": "agreement", "island_x": "islands", "s_sel": "s-selection"}


def write_blimp(root: Path, *, pairs: int = 3) -> Path:
    """A data folder with ``blimp/data/*.jsonl`` (:data:`PARADIGMS`, ``pairs`` each) and the two summary files."""
    data = root / "data"
    (data / "blimp" / "data").mkdir(parents=True)
    (data / "blimp" / "results").mkdir()
    for uid, term in PARADIGMS.items():
        lines = [json.dumps(_pair(uid, term, n, prefix=uid == "agree_a")) for n in range(pairs)]
        (data / "blimp" / "data" / f"{uid}.jsonl").write_text("\n".join(lines) + "\n")
    summary = [{"UID": uid, "linguistics_term": term, "ngram": 0.5, "lstm": 0.6, "txl": 0.7, "gpt2": 0.8 + 0.01 * k}
               for k, (uid, term) in enumerate(PARADIGMS.items())]
    summary.append({"UID": "overall", "linguistics_term": "overall", "ngram": 0.5, "lstm": 0.6, "txl": 0.7, "gpt2": 0.8})
    (data / "blimp" / "results" / "models_summary.jsonl").write_text("\n".join(json.dumps(r) for r in summary) + "\n")
    csv = '"Condition","accepted","total_mean","count"\n' + "".join(
        f'"{uid}",5,0.9{k},100\n' for k, uid in enumerate([*PARADIGMS, "not_in_the_data"]))
    (data / "blimp" / "results" / "human_validation_summary.csv").write_text(csv)
    return data


@pytest.fixture
def data(tmp_path) -> Path:
    return write_blimp(tmp_path)


def test_paradigms_are_read_in_order_with_their_phenomena(data):
    assert blimp.phenomena_of(data) == dict(sorted(PARADIGMS.items()))
    pairs = blimp.load_pairs(["island_x", "agree_a"], max_pairs=2, data_dir=data)
    assert [(p["UID"], p["pairID"]) for p in pairs] == [("island_x", "0"), ("island_x", "1"), ("agree_a", "0"),
                                                        ("agree_a", "1")]
    assert pairs[2]["one_prefix_word_good"] == "sleeps" and len(blimp.load_pairs(["agree_b"], data_dir=data)) == 3


def test_selection_by_paradigm_and_phenomenon(data):
    assert blimp.select_paradigms(data_dir=data) == sorted(PARADIGMS)
    assert blimp.select_paradigms(phenomena=["agreement"], data_dir=data) == ["agree_a", "agree_b"]
    assert blimp.select_paradigms(paradigms=["s_sel"], phenomena=["islands"], data_dir=data) == ["island_x", "s_sel"]
    with pytest.raises(blimp.BlimpError, match="--paradigms agree_c: no such BLiMP paradigm; did you mean agree_b, agree_a"):
        blimp.select_paradigms(paradigms=["agree_c"], data_dir=data)
    with pytest.raises(blimp.BlimpError, match="--phenomena syntax: no such BLiMP phenomenon"):
        blimp.select_paradigms(phenomena=["syntax"], data_dir=data)
    with pytest.raises(blimp.BlimpError, match="--paradigms and --phenomena: the selection is empty"):
        blimp.select_paradigms(paradigms=[], phenomena=[], data_dir=data)


@pytest.mark.parametrize("line, what", [
    ("{not json", "not a JSON object"),
    ("[1, 2]", "not a JSON object but list"),
    (json.dumps({k: v for k, v in _pair("agree_b", "agreement", 9).items() if k != "sentence_bad"}), "no sentence_bad"),
    (json.dumps({**_pair("agree_b", "agreement", 9), "UID": "agree_a"}), "UID 'agree_a' in the file of paradigm 'agree_b'"),
    (json.dumps({**_pair("agree_b", "agreement", 9), "one_prefix_method": True}), "one_prefix_method is true but"),
    (json.dumps({**_pair("agree_b", "agreement", 9), "sentence_good": " "}), "an empty sentence"),
])
def test_a_malformed_line_is_named(data, line, what):
    path = data / "blimp" / "data" / "agree_b.jsonl"
    path.write_text(path.read_text() + line + "\n")
    assert len(blimp.read_paradigm(path, max_pairs=3)) == 3  # only the lines needed are read
    with pytest.raises(blimp.BlimpError) as err:
        blimp.read_paradigm(path)
    assert str(err.value).startswith(f"{path}:4: ") and what in str(err.value) and "download --only blimp" in str(err.value)
    assert "\n" not in str(err.value)


def test_missing_data_says_how_to_get_it(tmp_path):
    (tmp_path / "empty").mkdir()
    with pytest.raises(FileNotFoundError, match="BLiMP not found; run `python -m helpers download --only blimp`"):
        blimp.paradigm_files(tmp_path / "empty")


def test_published_results_are_the_paradigms_rows(data):
    out = blimp.published(data)
    assert set(out["models"]) == set(PARADIGMS) and out["models"]["agree_b"]["gpt2"] == pytest.approx(0.81)
    assert out["human"]["agree_a"] == pytest.approx(0.90) and "not_in_the_data" in out["human"]
    (data / "blimp" / "results" / "models_summary.jsonl").write_text('{"UID": "x", "gpt2": "high"}\n')
    with pytest.raises(blimp.BlimpError, match=r"models_summary.jsonl:1: not a row of UID"):
        blimp.published(data)


def test_manifest_pins_blimp_at_its_commit():
    """The 67 paradigms and the two summary files, each at the pinned commit (upstream's summaries live under
    raw_results/summary/), checksummed; ``download --only blimp`` fetches exactly them."""
    info = corpora.manifest()
    commit = info["corpora"]["blimp"]["commit"]
    entries = [e for e in info["files"] if e["path"].startswith("blimp/")]
    assert len([e for e in entries if e["path"].startswith("blimp/data/")]) == 67
    assert {e["path"] for e in entries} >= {"blimp/results/models_summary.jsonl",
                                             "blimp/results/human_validation_summary.csv"}
    for e in entries:
        assert e["url"].startswith(f"https://raw.githubusercontent.com/alexwarstadt/blimp/{commit}/")
        assert len(e["sha256"]) == 64 and not e["optional"]
    assert next(e for e in entries if e["path"].endswith("models_summary.jsonl"))["url"].endswith(
        "/raw_results/summary/models_summary.jsonl")


def test_download_of_blimp_alone(tmp_path, monkeypatch):
    import hashlib

    source = tmp_path / "upstream"
    source.mkdir()
    (source / "p.jsonl").write_text(json.dumps(_pair("p", "t", 0)) + "\n")
    entry = {"path": "blimp/data/p.jsonl", "url": (source / "p.jsonl").as_uri(), "optional": False,
             "sha256": hashlib.sha256((source / "p.jsonl").read_bytes()).hexdigest()}
    gum = {**entry, "path": "gum/dep/x.conllu"}
    fake = {"corpora": {"gum": {"commit": "a"}, "ewt": {"commit": "b"}, "blimp": {"commit": "c"}}, "files": [gum, entry]}
    monkeypatch.setattr(corpora, "manifest", lambda: json.loads(json.dumps(fake)))
    target = tmp_path / "data"
    assert corpora.download(target, only="blimp", progress=False)["fetched"] == 1
    assert (target / "blimp" / "COMMIT").read_text().strip() == "c" and not (target / "gum").exists()
    assert blimp.load_pairs(["p"], data_dir=target)[0]["UID"] == "p"


def test_the_real_data_as_published(shared_data):
    """The mirrored data, where this machine has it: 67 paradigms of 1,000 pairs in 13 phenomena (``s-selection``
    among them), every line readable, and the published results for each paradigm."""
    try:
        table = blimp.phenomena_of(shared_data)
    except FileNotFoundError as err:
        pytest.skip(str(err))
    assert len(table) == 67 and len(set(table.values())) == 13 and "s-selection" in table.values()
    assert corpora.verify(shared_data)["mismatch"] == []
    pairs = blimp.load_pairs(list(table), data_dir=shared_data)
    assert len(pairs) == 67_000
    out = blimp.published(shared_data)
    assert set(table) <= set(out["models"]) and set(table) <= set(out["human"])
