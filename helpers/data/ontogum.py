"""OntoGUM coreference (OntoNotes-style brackets) read beside the GUM dependency trees: mentions,
their head words, kind and person, per document.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from helpers.data.conllu_io import Sentence
from helpers.context import data_folder
from helpers.data.corpora import Document, load_gum

_BRACKET = re.compile(r"\((\d+)\)|\((\d+)|(\d+)\)")


class CorefAlignmentError(ValueError):
    """OntoGUM tokens do not line up with the dependency file's words."""


@dataclass(frozen=True)
class Mention:
    """A mention: word span ``[start, end]`` (inclusive, document word indices), chain id, head word."""

    chain: str
    start: int
    end: int
    head: int
    kind: str
    words: tuple[str, ...]
    head_word: str
    number: str | None = None
    gender: str | None = None
    person: str | None = None


@dataclass
class CorefDocument:
    """A document's words, its sentences (for the tree) and its mentions in order of head word."""

    doc_id: str
    words: list[str]
    mentions: list[Mention]


def read_ontogum(path: str | Path) -> tuple[list[str], list[tuple[int, int, str]]]:
    """Words and mention spans ``(start, end, chain)`` of an OntoGUM ``.conll`` file.

    Raises :class:`ValueError` naming the file and line on a malformed line or unbalanced bracket.
    """
    path = Path(path)
    words: list[str] = []
    open_spans: dict[str, list[int]] = {}
    spans: list[tuple[int, int, str]] = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip() or line.startswith("#"):
            continue
        cols = line.split("\t")
        if len(cols) < 3:
            raise ValueError(f"{path}:{number}: expected 3 tab-separated columns (index, word, coreference)")
        index = len(words)
        words.append(cols[1])
        mark = cols[-1].strip()
        if mark in ("_", "-", ""):
            continue
        for single, opening, closing in _BRACKET.findall(mark):
            if single:
                spans.append((index, index, single))
            elif opening:
                open_spans.setdefault(opening, []).append(index)
            else:
                if not open_spans.get(closing):
                    raise ValueError(f"{path}:{number}: closing bracket for entity {closing} that was never opened")
                spans.append((open_spans[closing].pop(), index, closing))
    left = [k for k, v in open_spans.items() if v]
    if left:
        raise ValueError(f"{path}: entities {left[:5]} opened but never closed")
    return words, sorted(spans)


def _features(sentence: Sentence, k: int) -> dict[str, str]:
    feats = sentence.feats[k] if sentence.feats else "_"
    return dict(f.split("=", 1) for f in feats.split("|") if "=" in f)


def mention_kind(upos: str) -> str:
    return "pronoun" if upos == "PRON" else ("proper" if upos == "PROPN" else "nominal")


def mention_person(upos: str, feats: dict[str, str]) -> str | None:
    """Grammatical person of a mention's head word: set for pronouns only (``None``: unknown, agrees with anything)."""
    return feats.get("Person") if upos == "PRON" else None


def build_document(doc: Document, ontogum_path: str | Path) -> CorefDocument:
    """Align OntoGUM mentions with the dependency trees of the same GUM document."""
    onto_words, spans = read_ontogum(ontogum_path)
    words, heads, where = [], [], []
    for s in doc.sentences:
        offset = len(words)
        for k, w in enumerate(s.words):
            words.append(w)
            heads.append(offset + s.heads[k] - 1 if s.heads[k] else -1)
            where.append((s, k))
    if len(onto_words) != len(words):
        raise CorefAlignmentError(f"{ontogum_path}: {len(onto_words)} tokens, but {doc.doc_id} has {len(words)} words")
    for i, (a, b) in enumerate(zip(onto_words, words)):
        if a and a != b:
            raise CorefAlignmentError(f"{ontogum_path}: token {i} is {a!r} but word {i} of {doc.doc_id} is {b!r}")
    mentions = []
    for start, end, chain in spans:
        inside = range(start, end + 1)
        outside = [i for i in inside if not start <= heads[i] <= end]
        head = outside[0] if outside else end
        sent, k = where[head]
        feats = _features(sent, k)
        mentions.append(Mention(chain, start, end, head, mention_kind(sent.upos[k]),
                                tuple(w.lower() for w in words[start : end + 1]), words[head].lower(),
                                feats.get("Number"), feats.get("Gender"), mention_person(sent.upos[k], feats)))
    mentions.sort(key=lambda m: (m.head, m.start, m.end))
    return CorefDocument(doc.doc_id, words, mentions)


def load_coref(split: str = "test", *, data_dir=None, cache_root=None) -> list[CorefDocument]:
    """GUM documents of a split with their OntoGUM mentions (documents without an OntoGUM file are left out)."""
    root = data_folder(data_dir) / "gum" / "ontogum"
    docs = []
    for doc in load_gum(split, data_dir=data_dir, cache_root=cache_root):
        path = root / f"{doc.doc_id}.conll"
        if path.is_file():
            docs.append(build_document(doc, path))
    if not docs:
        raise FileNotFoundError(f"{root}: no OntoGUM files for GUM {split}")
    return docs
