"""CoNLL-U reading: fields, paragraphs, and errors that name the file and line."""
import dataclasses

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


def _unsourced(sentences):
    """The sentences without the file they were read from (two files with the same sentences compare equal)."""
    return [dataclasses.replace(s, source="") for s in sentences]


CYCLE = "1\tA\ta\tDET\tDT\t_\t2\tdet\t_\t_\n2\tdog\tdog\tNOUN\tNN\t_\t1\troot\t_\t_\n"  # words 1 -> 2 -> 1


def test_only_the_sentences_asked_for_are_read(toy_conllu, tmp_path):
    """With ``max_sentences`` the file is read up to the last sentence asked for: the sentences a whole read gives
    first, and a malformed sentence (or a line that is not UTF-8) after them is no error."""
    whole = _unsourced(read_conllu(toy_conllu))
    path = tmp_path / "tail.conllu"
    path.write_bytes(toy_conllu.read_bytes() + b"\n" + CYCLE.encode() + b"\n\xff\xfe\n")
    for n in (1, 2, 3):
        assert _unsourced(read_conllu(path, max_sentences=n)) == whole[:n]
    with pytest.raises(ConllError) as err:
        read_conllu(path, max_sentences=4)
    message = str(err.value)
    assert message.startswith(f"{path}:32: sentence is not a tree") and "\n" not in message


def test_a_malformed_sentence_within_those_asked_for_names_file_and_line(toy_conllu, tmp_path):
    blocks = toy_conllu.read_text(encoding="utf-8").split("\n\n")
    path = _write(tmp_path, "\n\n".join([blocks[0], CYCLE.rstrip("\n"), *blocks[1:]]))
    with pytest.raises(ConllError, match=rf"^{path}:13: sentence is not a tree: .*words 1 -> 2 -> 1 form a HEAD cycle$"):
        read_conllu(path, max_sentences=2)
    assert _unsourced(read_conllu(path, max_sentences=1)) == _unsourced(read_conllu(toy_conllu, max_sentences=1))


@pytest.mark.parametrize("n", [0, -1, 1.5, True, "2"])
def test_max_sentences_is_a_whole_number_from_one(toy_conllu, n):
    with pytest.raises(ValueError, match="max_sentences="):
        read_conllu(toy_conllu, max_sentences=n)
