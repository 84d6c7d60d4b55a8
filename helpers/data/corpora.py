"""The corpora: GUM documents with paragraphs and splits, UD English EWT, any UD file, and downloads.

All file and network I/O for corpora lives here. A corpus is named by a *spec*:

- ``"gum:train"``, ``"gum:dev"``, ``"gum:test"``, ``"gum:test2"`` (GENTLE, out of domain);
- ``"ewt:dev"`` (UD English EWT dev);
- a path to any ``.conllu`` file.

>>> from helpers.data.corpora import load_treebank, load_gum
>>> sentences = load_treebank("gum:test")                    # doctest: +SKIP
>>> docs = load_gum("dev")                                   # doctest: +SKIP
>>> docs[0].doc_id, len(docs[0].paragraphs)                  # doctest: +SKIP
('GUM_academic_exposure', 24)
"""
from __future__ import annotations

import hashlib
import json
import numbers
import os
import re
import tempfile
import urllib.request
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Literal

from helpers.context import cache_folder, data_folder
from helpers.core.encoding import printable
from helpers.data.conllu_io import Sentence, check_conllu_file, read_conllu

GumSplit = Literal["train", "dev", "test", "test2"]
GUM_SPLITS: tuple[str, ...] = ("train", "dev", "test", "test2")
# What a section's run reads (:attr:`helpers.section.Section.corpora`), one spec each: a treebank read sentence by
# sentence (``"gum:test"``, ``"ewt:dev"``), the segments drawn from a GUM split (``"segments:gum:train"``,
# :mod:`helpers.data.segments`) or a GUM split's documents with their OntoGUM coreference (``"ontogum:dev"``,
# :mod:`helpers.data.ontogum`).
SEGMENTS_OF, COREFERENCE_OF = "segments:", "ontogum:"
ReadKind = Literal["sentences", "segments", "coreference"]


def corpus_read(spec: str) -> tuple[ReadKind, str]:
    """``(kind, source)`` of a section's read ``spec``: ``("segments", "gum:train")`` for ``"segments:gum:train"``,
    ``("coreference", "dev")`` for ``"ontogum:dev"``, else ``("sentences", spec)``.

    >>> corpus_read("segments:gum:train"), corpus_read("ontogum:dev"), corpus_read("ewt:dev")
    (('segments', 'gum:train'), ('coreference', 'dev'), ('sentences', 'ewt:dev'))
    """
    for prefix, kind in ((SEGMENTS_OF, "segments"), (COREFERENCE_OF, "coreference")):
        if spec.startswith(prefix):
            return kind, spec.removeprefix(prefix)
    return "sentences", spec
MANIFEST = Path(__file__).with_name("data_manifest.json")


class EmptyCorpusError(ValueError):
    """A corpus spec resolved to no sentences."""


@dataclass(frozen=True)
class Document:
    """A document's sentences in order, grouped into paragraphs (each a list of sentences)."""

    doc_id: str
    sentences: tuple[Sentence, ...]

    @property
    def paragraphs(self) -> list[list[Sentence]]:
        paras: list[list[Sentence]] = []
        for sent in self.sentences:
            if sent.new_par or not paras:
                paras.append([])
            paras[-1].append(sent)
        return paras


def _gum_root(data_dir: str | os.PathLike | None) -> Path:
    gum = data_folder(data_dir) / "gum"
    if not (gum / "dep").is_dir():
        raise FileNotFoundError(
            f"{gum / 'dep'}: GUM dependency files not found. Run "
            "`python -m helpers download` or pass --data-dir pointing at a folder with gum/dep/."
        )
    return gum


def parse_splits(splits_md: Path) -> dict[str, list[str]]:
    """Read GUM's ``splits.md`` into ``{"dev": [doc ids], "test": [...], "test2": [...]}``."""
    if not splits_md.is_file():
        raise FileNotFoundError(f"{splits_md}: GUM split list not found")
    splits: dict[str, list[str]] = {}
    current = None
    for line in splits_md.read_text(encoding="utf-8").splitlines():
        heading = re.match(r"^#+\s*(\w+)\s*$", line)
        if heading:
            current = heading.group(1).lower()
            splits.setdefault(current, [])
            continue
        item = re.match(r"^\s*[*-]\s*(\S+)\s*$", line)
        if item and current is not None:
            splits[current].append(item.group(1))
    return splits


def gum_split_documents(split: GumSplit, *, data_dir: str | os.PathLike | None = None) -> list[str]:
    """Document ids of a GUM split present on disk, in sorted order.

    ``train`` is every document not listed under dev, test or test2 (GUM's convention). Documents
    listed in ``splits.md`` but absent from ``gum/dep`` (the reddit texts, not distributed) are
    left out.
    """
    if not isinstance(split, str) or split not in GUM_SPLITS:
        raise ValueError(f"GUM split {printable(repr(split), limit=60)}: choose one of {', '.join(GUM_SPLITS)}")
    gum = _gum_root(data_dir)
    present = sorted(p.stem for p in (gum / "dep").glob("*.conllu"))
    listed = parse_splits(gum / "splits.md")
    if split == "train":
        held_out = {d for s in ("dev", "test", "test2") for d in listed.get(s, [])}
        return [d for d in present if d not in held_out]
    wanted = set(listed.get(split, []))
    return [d for d in present if d in wanted]


def load_gum(split: GumSplit = "test", *, data_dir: str | os.PathLike | None = None,
             cache_root: str | os.PathLike | None = None) -> list[Document]:
    """GUM documents of a split, each with its sentences and paragraphs (parsed trees kept in ``cache_root``)."""
    gum = _gum_root(data_dir)
    docs = []
    for doc_id in gum_split_documents(split, data_dir=data_dir):
        docs.append(Document(doc_id, _read(gum / "dep" / f"{doc_id}.conllu", doc_id, cache_root)))
    if not docs:
        raise EmptyCorpusError(f"GUM split {split!r} in {gum}: no documents found")
    return docs


@lru_cache(maxsize=1024)
def _read_cached(path: Path, doc_id: str | None, mtime_ns: int | None = None, cache_root: str | None = None,
                 max_sentences: int | None = None) -> tuple[Sentence, ...]:
    return tuple(_parse_with_disk_cache(path, doc_id, cache_root, max_sentences=max_sentences))


_ROW_TEXTS = ("words", "deprels", "upos", "xpos", "misc", "feats")  # per-word text columns of a parsed sentence
_ROW_FIELDS = frozenset((*_ROW_TEXTS, "heads", "sent_id", "doc_id", "new_par", "line", "metadata"))


def _block_starts(data: bytes) -> list[int]:
    """1-based first lines of the blank-line-separated blocks of a CoNLL-U file (as :func:`read_conllu` cuts them)."""
    starts, blank_before = [], True
    for number, line in enumerate(data.removeprefix(b"\xef\xbb\xbf").split(b"\n"), start=1):
        blank = not line.strip()
        if not blank and blank_before:
            starts.append(number)
        blank_before = blank
    return starts


def _rows_digest(rows) -> str:
    return hashlib.sha256(json.dumps(rows, ensure_ascii=False, sort_keys=True).encode("utf-8")).hexdigest()


def parsed_entry_problem(entry, key: str, data: bytes, max_sentences: int | None = None) -> str | None:
    """Why a parsed-treebank cache entry cannot stand for the file whose bytes are ``data`` (its first
    ``max_sentences`` sentences; ``None``: all), or ``None``.

    The entry is ``{"key", "file", "digest", "sentences": [row, ...]}``: the key must be this file's,
    the digest that of the rows (damage), the rows must start at the file's first sentence blocks, one row
    per block (a foreign entry), and hold every block or at least the ``max_sentences`` first (an entry of a
    read cut short by ``max_sentences`` holds the blocks it read), and each row asked for must be a sentence whose
    HEAD column forms a tree (:func:`~helpers.data.conllu_io.tree_problem`), with one entry per word in every
    column."""
    from helpers.data.conllu_io import tree_problem

    if not isinstance(entry, dict) or entry.get("key") != key:
        return "not an entry of this file and this code (the key differs)"
    rows = entry.get("sentences")
    if not isinstance(rows, list) or entry.get("digest") != _rows_digest(rows):
        return "its sentences do not match their digest (damaged)"
    starts = _block_starts(data)
    if [row.get("line") if isinstance(row, dict) else None for row in rows] != starts[: len(rows)]:
        return "its sentences are not the file's sentence blocks"
    if len(rows) < len(starts) and (max_sentences is None or len(rows) < max_sentences):
        return f"it holds the first {len(rows)} of the file's {len(starts)} sentences, fewer than asked for"
    for row in rows[:max_sentences]:
        if set(row) != _ROW_FIELDS:
            return f"the sentence at line {row['line']} has fields {sorted(row)}"
        n = len(row["words"]) if isinstance(row["words"], list) else 0
        columns = [row[name] for name in _ROW_TEXTS]
        if not n or any(not isinstance(c, list) or len(c) != n or not all(isinstance(x, str) for x in c) for c in columns):
            return f"the sentence at line {row['line']} has damaged word columns"
        heads = row["heads"]
        if (not isinstance(heads, list) or len(heads) != n
                or not all(type(h) is int and 0 <= h <= n for h in heads)):
            return f"the sentence at line {row['line']} has a damaged HEAD column"
        problem = tree_problem(heads, row["deprels"])
        if problem:
            return f"the sentence at line {row['line']} is not a tree ({problem})"
        if (not isinstance(row["sent_id"], str) or not isinstance(row["doc_id"], str)
                or not isinstance(row["new_par"], bool) or not isinstance(row["metadata"], dict)):
            return f"the sentence at line {row['line']} has damaged metadata"
    return None


def _parse_with_disk_cache(path: Path, doc_id: str | None, cache_root: str | os.PathLike | None = None, *,
                           max_sentences: int | None = None) -> list[Sentence]:
    """:func:`read_conllu` (of the first ``max_sentences`` sentences; ``None``: all), with its result kept as JSON in
    the cache directory (``parsed/``), keyed by the file's bytes and the code that parses and checks it
    (:func:`helpers.digest.code_digest` of this module, which imports :func:`~helpers.data.conllu_io.read_conllu`):
    parsing GUM train takes ~6 s, reading it back ~0.5 s, and every chapter's kernel reads it. An entry is checked
    as it is read (:func:`parsed_entry_problem`: its key, its digest, one sentence per block of the file, every
    sentence asked for a tree); an unreadable, damaged or foreign entry is parsed again and rewritten; a cache that
    cannot be written is skipped. An entry holds the sentences of the read that wrote it (a prefix of the file's,
    when that read was cut short): a later call that asks for more parses the file again, as far as it asks, and
    rewrites the entry."""
    from helpers.data.files import atomic_write
    from helpers.digest import code_digest

    data = path.read_bytes()
    key = hashlib.sha256(f"{code_digest(_parse_with_disk_cache)}\0{doc_id}\0".encode() + data).hexdigest()[:32]
    stored = cache_folder(cache_root) / "parsed" / f"{key}.json"
    try:
        entry = json.loads(stored.read_text(encoding="utf-8"))
        if parsed_entry_problem(entry, key, data, max_sentences) is None:
            return [Sentence(**{**row, **{k: tuple(v) for k, v in row.items() if isinstance(v, list)}}, source=str(path))
                    for row in entry["sentences"][:max_sentences]]
    except (OSError, ValueError, TypeError):
        pass
    sentences = read_conllu(path, doc_id=doc_id, max_sentences=max_sentences)
    rows = [{k: v for k, v in vars(s).items() if k != "source"} for s in sentences]
    rows = json.loads(json.dumps(rows, ensure_ascii=False))  # as it will be read back (tuples as lists)
    entry = {"key": key, "file": path.name, "digest": _rows_digest(rows), "sentences": rows}
    try:
        atomic_write(stored, lambda h: h.write(json.dumps(entry, ensure_ascii=False).encode("utf-8")))
    except OSError:
        pass
    return sentences


def _read(path: Path, doc_id: str | None = None, cache_root: str | os.PathLike | None = None,
          max_sentences: int | None = None) -> tuple[Sentence, ...]:
    return _read_cached(path, doc_id, path.stat().st_mtime_ns, None if cache_root is None else str(cache_root),
                        max_sentences)


def _corpus_spec(spec, caller: str) -> str:
    if not isinstance(spec, (str, os.PathLike)) or not os.fspath(spec):
        raise TypeError(f"{caller}: the corpus must be a name such as 'gum:test' or 'ewt:dev', or the path of a "
                        f".conllu file; got {printable(repr(spec), limit=60)}")
    return os.fspath(spec)


def corpus_files(spec: str, *, data_dir: str | os.PathLike | None = None) -> list[Path]:
    """The files a corpus spec reads (used to key caches on the data)."""
    spec = _corpus_spec(spec, "corpus_files")
    if spec.startswith("gum:"):
        gum = _gum_root(data_dir)
        return [gum / "dep" / f"{d}.conllu" for d in gum_split_documents(spec[4:], data_dir=data_dir)]
    if spec == "ewt:dev":
        path = data_folder(data_dir) / "ud-english-ewt" / "en_ewt-ud-dev.conllu"
        if not path.is_file():
            raise FileNotFoundError(f"{path}: UD English EWT dev not found; run `python -m helpers download`")
        return [path]
    path = Path(spec).expanduser()
    if path.suffix in (".conllu", ".conll") or path.exists() or path.is_symlink() or os.sep in spec:
        check_conllu_file(path, spec)
        return [path.resolve()]
    raise ValueError(
        f"corpus {printable(spec, limit=120)!r}: use gum:train, gum:dev, gum:test, gum:test2, ewt:dev or a path to a .conllu file"
    )


def check_glove(glove: str, option: str = "--glove") -> None:
    """Raise naming ``option`` unless the word-vector file ``glove`` is a regular file that can be read."""
    from helpers.data.files import input_file_problem

    path = Path(glove).expanduser()
    problem = input_file_problem(path)
    if problem:
        raise (FileNotFoundError if problem == "no such file" else OSError)(f"{option} {printable(glove)}: {problem}")
    with open(path, "rb") as handle:
        handle.read(1)


def load_treebank(
    spec: str, *, data_dir: str | os.PathLike | None = None, max_sentences: int | None = None,
    cache_root: str | os.PathLike | None = None,
) -> list[Sentence]:
    """Sentences of a corpus spec, in file order (GUM: documents sorted by id), at most ``max_sentences``.

    Only what ``max_sentences`` asks for is read: the files after the one that completes it are not opened, and
    that file is read (parsed and checked) only up to its last sentence needed, so a malformed sentence after
    them is no error (:func:`~helpers.data.conllu_io.read_conllu`).

    ``data_dir``: the corpora folder (default :func:`helpers.context.data_folder`'s: the context's); ``cache_root``:
    where parsed trees are kept (default :func:`helpers.context.cache_folder`'s)."""
    spec = _corpus_spec(spec, "load_treebank")
    if max_sentences is not None and (isinstance(max_sentences, bool) or not isinstance(max_sentences, numbers.Integral)):
        raise TypeError(f"max_sentences={printable(repr(max_sentences), limit=60)}: a whole number, or None for all")
    if max_sentences is not None and max_sentences < 1:
        raise ValueError(f"--max-sentences {max_sentences}: must be at least 1")
    sentences: list[Sentence] = []
    for path in corpus_files(spec, data_dir=data_dir):
        doc = path.stem if spec.startswith("gum:") else None
        left = None if max_sentences is None else int(max_sentences) - len(sentences)  # what this file must give
        sentences.extend(_read(path, doc, cache_root, left))
        if max_sentences is not None and len(sentences) >= max_sentences:
            break
    if not sentences:
        raise EmptyCorpusError(f"corpus {spec!r}: no sentences found")
    return sentences[:max_sentences] if max_sentences is not None else sentences


def file_digest(paths: list[Path]) -> str:
    """SHA-256 over the names and bytes of files (the data part of cache keys)."""
    h = hashlib.sha256()
    for path in paths:
        h.update(Path(path).name.encode())
        h.update(Path(path).read_bytes())
    return h.hexdigest()


# --------------------------------------------------------------------------- downloads


def manifest() -> dict:
    """The pinned corpus files: upstream URL (at a fixed commit), SHA-256 and size of each."""
    return json.loads(MANIFEST.read_text(encoding="utf-8"))


def verify(data_dir: str | os.PathLike | None = None) -> dict[str, list[str]]:
    """Check the corpora on disk against the manifest: ``{"ok": [...], "missing": [...], "mismatch": [...]}``."""
    base = data_folder(data_dir, must_exist=False)
    report: dict[str, list[str]] = {"ok": [], "missing": [], "mismatch": []}
    for entry in manifest()["files"]:
        path = base / entry["path"]
        if not path.is_file():
            report["missing"].append(entry["path"])
        elif hashlib.sha256(path.read_bytes()).hexdigest() != entry["sha256"]:
            report["mismatch"].append(entry["path"])
        else:
            report["ok"].append(entry["path"])
    return report


# The corpora the manifest pins, each with the folder it is kept in under the corpora folder: GUM, UD English EWT and
# BLiMP (the minimal pairs of chapter 12, :mod:`helpers.data.blimp`).
CORPUS_FOLDERS = {"gum": "gum", "ewt": "ud-english-ewt", "blimp": "blimp"}


def download(
    target: str | os.PathLike, *, only: Literal["gum", "ewt", "blimp"] | None = None, progress: bool = True
) -> dict[str, int]:
    """Fetch the corpora (:data:`CORPUS_FOLDERS`; ``only``: one of them) from their public sources at the pinned
    commits and check every checksum.

    Files already present with the right checksum are kept. Each file is written atomically, so an
    interrupted download resumes where it stopped. Raises ``ValueError`` on a checksum mismatch
    (the bad download is not kept).
    """
    from tqdm.auto import tqdm

    target = Path(target).expanduser().resolve()
    info = manifest()
    entries = [
        e
        for e in info["files"]
        if only is None or e["path"].startswith(CORPUS_FOLDERS[only] + "/")
    ]
    counts = {"fetched": 0, "kept": 0, "optional_missing": 0}
    for entry in tqdm(entries, desc="corpora", disable=not progress):
        path = target / entry["path"]
        if path.is_file() and hashlib.sha256(path.read_bytes()).hexdigest() == entry["sha256"]:
            counts["kept"] += 1
            continue
        try:
            with urllib.request.urlopen(entry["url"], timeout=60) as response:
                payload = response.read()
        except OSError as err:
            if entry.get("optional"):
                counts["optional_missing"] += 1
                continue
            raise OSError(f"download of {entry['url']} failed: {err}") from err
        digest = hashlib.sha256(payload).hexdigest()
        if digest != entry["sha256"]:
            raise ValueError(
                f"{entry['url']}: checksum mismatch (got {digest[:12]}, want {entry['sha256'][:12]}); "
                "the upstream file changed or the download was corrupted. Nothing was written."
            )
        path.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=path.parent, delete=False) as tmp:
            tmp.write(payload)
        os.replace(tmp.name, path)
        counts["fetched"] += 1
    for name, corpus_dir in CORPUS_FOLDERS.items():
        if only in (None, name) and name in info["corpora"]:
            (target / corpus_dir).mkdir(parents=True, exist_ok=True)
            (target / corpus_dir / "COMMIT").write_text(info["corpora"][name]["commit"] + "\n")
    return counts
