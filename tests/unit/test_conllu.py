"""CoNLL-U reading: fields, paragraphs, and errors that name the file and line."""
import pytest

from helpers.data.conllu_io import ConllError, read_conllu


def test_reads_words_heads_paragraphs(toy_conllu):
    sents = read_conllu(toy_conllu)
    assert [len(s) for s in sents] == [7, 4, 6]
    assert sents[0].words[:3] == ("The", "cat", "sat")
    assert sents[0].heads == (2, 3, 0, 6, 6, 3, 3)
    assert sents[2].words == ("The", "unaffable", "cat", "'s", "mat", ".")  # multiword range dropped
    assert sents[2].deprels[2] == "nmod:poss"
    assert [s.new_par for s in sents] == [True, False, True]
    assert {s.doc_id for s in sents} == {"toy_doc"}
    assert sents[1].line == 13 and sents[1].sent_id == "toy-2"


def _write(tmp_path, body):
    path = tmp_path / "bad.conllu"
    path.write_text(body, encoding="utf-8")
    return path


GOOD = "1\tA\ta\tDET\tDT\t_\t2\tdet\t_\t_\n2\tdog\tdog\tNOUN\tNN\t_\t0\troot\t_\t_\n"


@pytest.mark.parametrize(
    "body, line, fragment",
    [
        ("# c\n" + GOOD + "\n1\tA\ta\tDET\n", 5, "10 tab-separated columns"),
        (GOOD.replace("\t2\tdet", "\tx\tdet"), 1, "HEAD 'x'"),
        (GOOD.replace("\t2\tdet", "\t9\tdet"), 1, "points past"),
        (GOOD.replace("2\tdog", "3\tdog"), 2, "out of order"),
        (GOOD.replace("1\tA", "one\tA"), 1, "bad token ID"),
    ],
)
def test_malformed_input_names_file_and_line(tmp_path, body, line, fragment):
    path = _write(tmp_path, body)
    with pytest.raises(ConllError) as err:
        read_conllu(path)
    assert f"{path}:{line}:" in str(err.value)
    assert fragment in str(err.value)


def test_missing_file(tmp_path):
    with pytest.raises(FileNotFoundError, match="nope.conllu"):
        read_conllu(tmp_path / "nope.conllu")
