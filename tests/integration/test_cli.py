"""The command line: JSON output, skipped counts, and one-line errors naming the culprit."""
import json
import os
from pathlib import Path

from helpers.cli import main


def test_extract_writes_json(tiny_model_dir, toy_conllu, tmp_path, capsys):
    out = tmp_path / "x.json"
    conllu = tmp_path / "toy.conllu"  # a path not parsed before in this process
    conllu.write_bytes(toy_conllu.read_bytes())
    before = os.environ.get("BERT_ATTENTION_CACHE")
    default_parsed = Path(before) / "parsed"  # the cache the environment names (the suite's isolated one)
    parsed_before = set(default_parsed.glob("*.json"))
    rc = main(["extract", "--conllu", str(conllu), "--model", str(tiny_model_dir), "--max-length", "8",
               "--json", str(out), "--quiet", "--cache-dir", str(tmp_path / "c")])
    assert rc == 0
    assert len(list((tmp_path / "c" / "parsed").glob("*.json"))) == 1  # --cache-dir holds every cache
    assert os.environ.get("BERT_ATTENTION_CACHE") == before  # passed down as cache_root, not through the environment
    assert set(default_parsed.glob("*.json")) == parsed_before
    result = json.loads(out.read_text())
    assert result["examples"] == 3 and result["used"] == 1 and result["skipped_over_length"] == 2
    assert result["skipped_indices"] == [0, 2] and result["level"] == "word"
    assert "2 input(s) longer than 8 tokens were skipped" in capsys.readouterr().err


def test_malformed_file_is_one_line_error(tiny_model_dir, tmp_path, capsys):
    bad = tmp_path / "bad.conllu"
    bad.write_text("1\tA\ta\tDET\tDT\t_\t0\troot\t_\t_\n2\tdog\n")
    rc = main(["extract", "--conllu", str(bad), "--model", str(tiny_model_dir), "--quiet"])
    assert rc == 2
    assert f"{bad}:2:" in capsys.readouterr().err


def test_unknown_model_offline(capsys, toy_conllu):
    rc = main(["extract", "--conllu", str(toy_conllu), "--model", "nobody/nothing", "--quiet"])
    assert rc == 2 and "all-MiniLM-L6-v2" in capsys.readouterr().err


def test_info_without_model(tmp_path, capsys):
    rc = main(["info", "--no-model", "--data-dir", str(tmp_path), "--cache-dir", str(tmp_path / "c")])
    assert rc == 0
    result = json.loads(capsys.readouterr().out)
    assert "model" not in result and "error" in result["data"]


def test_coref_max_documents(tiny_model_dir, toy_coref_data, tmp_path, capsys):
    """--max-documents N scores only the first N documents of each split; N must be positive."""
    gum = toy_coref_data / "gum"
    for folder, suffix in (("dep", ".conllu"), ("ontogum", ".conll")):  # a second test document
        (gum / folder / f"GUM_toy2_coref{suffix}").write_bytes((gum / folder / f"GUM_toy_coref{suffix}").read_bytes())
    splits = gum / "splits.md"
    splits.write_text(splits.read_text().replace("  * GUM_toy_coref\n", "  * GUM_toy_coref\n  * GUM_toy2_coref\n"))

    def documents(*extra: str) -> int:
        out = tmp_path / "coref.json"
        rc = main(["coref", "--model", str(tiny_model_dir), "--data-dir", str(toy_coref_data), "--max-length", "60",
                   "--quiet", "--json", str(out), "--cache-dir", str(tmp_path / "c"), *extra])
        assert rc == 0
        return json.loads(out.read_text())["documents"]

    assert documents() == 2 and documents("--max-documents", "1") == 1
    capsys.readouterr()
    assert main(["coref", "--model", str(tiny_model_dir), "--max-documents", "0"]) == 2  # argparse's error status
    assert "--max-documents" in capsys.readouterr().err


CYCLE = "1\tA\ta\tDET\tDT\t_\t2\tdet\t_\t_\n2\tdog\tdog\tNOUN\tNN\t_\t1\troot\t_\t_\n"  # no root: words 1 -> 2 -> 1


def test_heads_reads_only_the_sentences_asked_for(tiny_model_dir, toy_conllu, tmp_path, capsys):
    """``heads --max-sentences N`` reads the file's first N sentences only: a malformed sentence after them is no
    error; asked for more, the same file (its cut-short parse cached) fails in one line naming file and line."""
    path, cache = tmp_path / "tail.conllu", tmp_path / "c"
    path.write_bytes(toy_conllu.read_bytes() + b"\n" + CYCLE.encode())
    common = ["--model", str(tiny_model_dir), "--max-length", "32", "--quiet", "--cache-dir", str(cache)]
    out = tmp_path / "h.json"
    assert main(["heads", "--conllu", str(path), "--max-sentences", "3", "--json", str(out), *common]) == 0
    result = json.loads(out.read_text())
    assert result["sentences_used"] + result["sentences_skipped"] == 3
    capsys.readouterr()
    assert main(["heads", "--conllu", str(path), "--max-sentences", "4", "--json", str(out), *common]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and f"{path}:32: sentence is not a tree" in err


def test_heads_names_a_malformed_sentence_among_those_asked_for(tiny_model_dir, toy_conllu, tmp_path, capsys):
    blocks = toy_conllu.read_text(encoding="utf-8").split("\n\n")
    path = tmp_path / "second.conllu"
    path.write_text("\n\n".join([blocks[0], CYCLE.rstrip("\n"), *blocks[1:]]), encoding="utf-8")
    assert main(["heads", "--conllu", str(path), "--max-sentences", "2", "--model", str(tiny_model_dir), "--quiet",
                 "--cache-dir", str(tmp_path / "c")]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and f"{path}:13: sentence is not a tree" in err
