"""Reading CoNLL-U treebanks into :class:`Sentence` records, with errors that name file and line.

The ``conllu`` library parses each sentence; before that, every line is checked here so that a
malformed file fails with ``path:line: what is wrong`` rather than deep inside a parser.

>>> from helpers.data.conllu_io import read_conllu
>>> sents = read_conllu("en_ewt-ud-dev.conllu")          # doctest: +SKIP
>>> sents[0].words[:3], sents[0].heads[:3]               # doctest: +SKIP
(('From', 'the', 'AP'), (3, 3, 4))
"""
from __future__ import annotations

import numbers
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator

import conllu

from helpers.core.encoding import printable

_ID_INT = re.compile(r"^[1-9][0-9]*$")
_ID_RANGE = re.compile(r"^[1-9][0-9]*-[1-9][0-9]*$")
_ID_EMPTY = re.compile(r"^[0-9]+\.[1-9][0-9]*$")
_HEAD = re.compile(r"^(0|[1-9][0-9]*)$")
_SENT_ID = re.compile(r"^#\s*sent_id\s*=\s*(.*)$")


class ConllError(ValueError):
    """Malformed CoNLL-U input; the message starts with ``path:line:``."""


@dataclass(frozen=True)
class Sentence:
    """One UD sentence, syntactic words only (multiword-token ranges and empty nodes dropped).

    ``heads`` are 1-based word indices with 0 for the root, as in CoNLL-U. ``new_par`` is True when
    the sentence opens a paragraph (``# newpar``) or a document. ``line`` is the 1-based line of the
    sentence's first line in ``source``.
    """

    words: tuple[str, ...]
    heads: tuple[int, ...]
    deprels: tuple[str, ...]
    upos: tuple[str, ...]
    xpos: tuple[str, ...]
    misc: tuple[str, ...] = ()
    feats: tuple[str, ...] = ()
    sent_id: str = ""
    doc_id: str = ""
    new_par: bool = False
    source: str = ""
    line: int = 0
    metadata: dict = field(default_factory=dict, compare=False, repr=False)

    def __len__(self) -> int:
        return len(self.words)

    @property
    def text(self) -> str:
        return self.metadata.get("text") or " ".join(self.words)


def _blocks(path: Path) -> Iterator[tuple[int, list[str]]]:
    """Yield ``(first line number, lines)`` for each blank-line-separated sentence block.

    The file must be UTF-8 (a leading byte-order mark is allowed and dropped); a line that does
    not decode raises :class:`ConllError` naming its line and column.
    """
    block: list[str] = []
    start = 0
    with open(path, "rb") as handle:
        for number, raw in enumerate(handle, start=1):
            try:
                text = raw.decode("utf-8")
            except UnicodeDecodeError as err:
                column = len(raw[: err.start].decode("utf-8", errors="replace")) + 1
                raise ConllError(
                    f"{path}:{number}: not UTF-8 (byte 0x{raw[err.start]:02x} at column {column}); CoNLL-U "
                    "files are UTF-8: re-encode it, e.g. `iconv -f latin1 -t utf-8`"
                ) from None
            if number == 1:
                text = text.removeprefix("\ufeff")
            line = text.rstrip("\n").rstrip("\r")
            if line.strip() == "":
                if block:
                    yield start, block
                block = []
                continue
            if not block:
                start = number
            block.append(line)
    if block:
        yield start, block


def _check_block(path: Path, start: int, lines: list[str]) -> None:
    """Raise :class:`ConllError` at the first offending line of one sentence block."""
    expected = 1
    n_words = 0
    heads: list[tuple[int, int]] = []
    deprels: list[str] = []
    sent_id = ""
    for offset, line in enumerate(lines):
        number = start + offset
        if line.startswith("#"):
            match = _SENT_ID.match(line)
            sent_id = match.group(1).strip() if match else sent_id
            continue
        cols = line.split("\t")
        if len(cols) != 10:
            raise ConllError(
                f"{path}:{number}: expected 10 tab-separated columns, found {len(cols)}: {line[:80]!r}"
            )
        tid, head = cols[0], cols[6]
        if _ID_RANGE.match(tid) or _ID_EMPTY.match(tid):
            continue
        if not _ID_INT.match(tid):
            raise ConllError(f"{path}:{number}: bad token ID {tid!r} (want 1, 2, ... or 3-4 or 5.1)")
        if int(tid) != expected:
            raise ConllError(f"{path}:{number}: token ID {tid} out of order (expected {expected})")
        if not _HEAD.match(head):
            raise ConllError(f"{path}:{number}: HEAD {head!r} of word {tid} is not an integer")
        heads.append((number, int(head)))
        deprels.append(cols[7])
        expected += 1
        n_words += 1
    if n_words == 0:
        raise ConllError(f"{path}:{start}: sentence block has no word lines")
    for number, head in heads:
        if head > n_words:
            raise ConllError(f"{path}:{number}: HEAD {head} points past the sentence's {n_words} words")
    problem = tree_problem([h for _, h in heads], deprels)
    if problem:
        where = f"sentence {printable(sent_id, limit=80)}" if sent_id else "sentence"
        raise ConllError(f"{path}:{start}: {where} is not a tree: {problem}")


def tree_problem(heads: list[int], deprels: list[str] | None = None) -> str | None:
    """Why the HEAD column does not form a tree (as the UD validator requires), or ``None``.

    ``heads[k]`` is the head of word ``k + 1`` (0 for the root). Exactly one word has HEAD 0, no
    word is its own head, every word reaches the root (no cycles), and DEPREL ``root`` goes with
    HEAD 0 only (``_`` deprels are not checked).

    >>> tree_problem([2, 0, 2]) is None
    True
    >>> tree_problem([0, 3, 2])
    'words 2 -> 3 -> 2 form a HEAD cycle'
    """
    n = len(heads)
    for word, head in enumerate(heads, start=1):
        if head == word:
            return f"word {word} is its own HEAD"
    roots = [word for word, head in enumerate(heads, start=1) if head == 0]
    if len(roots) > 1:
        return f"{len(roots)} words have HEAD 0 (words {', '.join(map(str, roots))}); a sentence has one root"
    state = [0] * (n + 1)  # 0 unvisited, 1 on the current path, 2 reaches the root
    state[0] = 2
    for first in range(1, n + 1):
        path = []
        word = first
        while state[word] == 0:
            state[word] = 1
            path.append(word)
            word = heads[word - 1]
        if state[word] == 1:  # came back to the current path: a cycle
            cycle = path[path.index(word):] + [word]
            missing = "" if roots else "no word has HEAD 0 and "
            return f"{missing}words {' -> '.join(map(str, cycle))} form a HEAD cycle"
        for w in path:
            state[w] = 2
    if not roots:
        return "no word has HEAD 0"
    if deprels is not None:
        for word, (head, rel) in enumerate(zip(heads, deprels), start=1):
            is_root = rel.split(":")[0].lower() == "root"
            if rel != "_" and is_root != (head == 0):
                return (f"word {word} has DEPREL {rel!r} but HEAD {head}" if is_root
                        else f"word {word} has HEAD 0 but DEPREL {rel!r} (want root)")
    return None


def check_conllu_file(path: Path, shown: str | None = None) -> None:
    """Raise naming ``path`` (or ``shown``) unless it is a regular file that can be read: missing
    (``FileNotFoundError``), a directory (``IsADirectoryError``), or a pipe, device, socket, link loop
    or broken link (``OSError``)."""
    from helpers.data.files import input_file_problem

    problem = input_file_problem(path)
    if problem is None:
        return
    shown = printable(shown if shown is not None else str(path))
    if problem == "no such file":
        raise FileNotFoundError(f"{shown}: no such CoNLL-U file")
    if problem == "is a directory":
        raise IsADirectoryError(f"{shown}: is a directory, not a CoNLL-U file")
    raise OSError(f"{shown}: {problem}; give a CoNLL-U file")


def read_conllu(path: str | Path, *, doc_id: str | None = None, max_sentences: int | None = None) -> list[Sentence]:
    """Read every sentence of a CoNLL-U file, or its first ``max_sentences``.

    Args:
        path: the file.
        doc_id: document id to record when the file has no ``# newdoc id`` comments.
        max_sentences: read only the first this many sentences (``None``: all); the rest of the file is neither
            read nor checked, so a malformed sentence after them is no error. The sentences read are those a
            whole read gives first (a sentence depends on the ones before it only).

    Raises:
        ConllError: malformed input (within the sentences read), naming the file and line.
        FileNotFoundError: no such file.
    """
    if not isinstance(path, (str, os.PathLike)):
        raise TypeError(f"read_conllu: the path of a CoNLL-U file, not {printable(repr(path), limit=60)}")
    if max_sentences is not None and (isinstance(max_sentences, bool)
                                      or not isinstance(max_sentences, numbers.Integral) or max_sentences < 1):
        raise ValueError(f"max_sentences={printable(repr(max_sentences), limit=60)}: a whole number from 1, or None")
    path = Path(path)
    check_conllu_file(path)
    sentences: list[Sentence] = []
    current_doc = doc_id or path.stem
    for start, lines in _blocks(path):
        _check_block(path, start, lines)
        try:
            (tokens,) = conllu.parse("\n".join(lines) + "\n\n")
        except Exception as err:  # conllu raises several types; give the location instead
            raise ConllError(f"{path}:{start}: cannot parse sentence: {printable(err, limit=200)}") from err
        meta = dict(tokens.metadata)
        new_doc = "newdoc id" in meta or "newdoc" in meta
        if new_doc:
            current_doc = meta.get("newdoc id") or current_doc
        words = [t for t in tokens if isinstance(t["id"], int)]
        sentences.append(
            Sentence(
                words=tuple(t["form"] for t in words),
                heads=tuple(int(t["head"]) for t in words),
                deprels=tuple(t["deprel"] for t in words),
                upos=tuple(t["upos"] or "_" for t in words),
                xpos=tuple(t["xpos"] or "_" for t in words),
                misc=tuple(_misc_string(t["misc"]) for t in words),
                feats=tuple(_misc_string(t["feats"]) for t in words),
                sent_id=meta.get("sent_id", f"{path.stem}-{len(sentences) + 1}"),
                doc_id=current_doc,
                new_par=new_doc or "newpar" in meta or "newpar id" in meta or not sentences,
                source=str(path),
                line=start,
                metadata=meta,
            )
        )
        if len(sentences) == max_sentences:
            break  # the lines after this sentence's block are never read
    return sentences


def _misc_string(value) -> str:
    """Render a parsed FEATS/MISC field back to its CoNLL-U text (``_`` when empty)."""
    if not value:
        return "_"
    return "|".join(k if v is None else f"{k}={v}" for k, v in value.items())
