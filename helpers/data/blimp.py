"""BLiMP, the Benchmark of Linguistic Minimal Pairs for English (Warstadt et al. 2020, TACL; CC BY 4.0): reading the
paradigms, choosing them by name, and the published results shipped with the data.

Under the corpora folder (:func:`helpers.context.data_folder`: ``--data-dir``, ``$BERT_ATTENTION_DATA``, else
``../shared/data``; ``python -m helpers download --only blimp`` fetches it there at the pinned commit, checksummed):

- ``blimp/data/<paradigm>.jsonl``: one paradigm a file (67 of them, 1,000 pairs each), one JSON object a line:
  ``sentence_good``, ``sentence_bad``, ``UID`` (the paradigm), ``linguistics_term`` (the phenomenon), ``field``,
  ``pairID``; where the two sentences share a prefix and differ in one word, ``one_prefix_method`` is true and
  ``one_prefix_prefix``, ``one_prefix_word_good``, ``one_prefix_word_bad`` give them;
- ``blimp/results/models_summary.jsonl``: the published accuracy of a 5-gram model, an LSTM, Transformer-XL and GPT-2
  on each paradigm (the corrected figures), with a summary row per phenomenon and one overall;
- ``blimp/results/human_validation_summary.csv``: the human agreement with each paradigm's labels.

The data are read as they are: ``linguistics_term`` takes 13 values (the two ``animate_subject_*`` paradigms are
``s-selection``, which the summary file counts under ``argument_structure``), and one paradigm's ``field`` is
spelt ``syntax/semantics`` where the others say ``syntax_semantics``.

>>> names = select_paradigms(paradigms=None, phenomena=["anaphor_agreement"])       # doctest: +SKIP
>>> pairs = load_pairs(names, max_pairs=10)                                         # doctest: +SKIP
>>> pairs[0]["sentence_good"], pairs[0]["UID"]                                      # doctest: +SKIP
("Katherine can't help herself.", 'anaphor_gender_agreement')
"""
from __future__ import annotations

import csv
import difflib
import json
import os
from functools import lru_cache
from pathlib import Path
from typing import Iterable, Sequence

from helpers.context import data_folder

BLIMP = "blimp"                   # its folder under the corpora folder
PHENOMENON = "linguistics_term"   # the field that names a pair's phenomenon
REQUIRED = ("sentence_good", "sentence_bad", "UID", PHENOMENON, "field", "pairID")
PREFIX_FIELDS = ("one_prefix_prefix", "one_prefix_word_good", "one_prefix_word_bad")
MODELS_SUMMARY = Path("results") / "models_summary.jsonl"
HUMAN_SUMMARY = Path("results") / "human_validation_summary.csv"
PUBLISHED_MODELS = {"ngram": "5-gram", "lstm": "LSTM", "txl": "Transformer-XL", "gpt2": "GPT-2 (large)"}
FETCH = "python -m helpers download --only blimp"


class BlimpError(ValueError):
    """A BLiMP file that cannot be read as BLiMP, or a selection of paradigms that names none: one line, naming the
    file and line or the argument, and what to do."""


def blimp_root(data_dir: str | os.PathLike | None = None) -> Path:
    """``<corpora folder>/blimp``, with its ``data/`` folder of paradigms (else ``FileNotFoundError`` saying how to get
    it)."""
    root = data_folder(data_dir) / BLIMP
    if not (root / "data").is_dir():
        raise FileNotFoundError(f"{root / 'data'}: BLiMP not found; run `{FETCH}` (pinned, checksummed) or pass "
                                "--data-dir pointing at a folder with blimp/data/")
    return root


def paradigm_files(data_dir: str | os.PathLike | None = None) -> dict[str, Path]:
    """``{paradigm: file}`` of every ``blimp/data/*.jsonl``, sorted by name."""
    files = {p.stem: p for p in sorted((blimp_root(data_dir) / "data").glob("*.jsonl"))}
    if not files:
        raise FileNotFoundError(f"{blimp_root(data_dir) / 'data'}: no paradigm (*.jsonl); run `{FETCH}`")
    return files


def _damaged(path: Path, line: int, what: str) -> BlimpError:
    return BlimpError(f"{path}:{line}: {what}; the file is not BLiMP as published (fetch it again: `{FETCH}`)")


def parse_line(text: str, path: Path, line: int) -> dict:
    """One pair from one line of ``path``: a JSON object with the :data:`REQUIRED` fields as strings (``pairID`` may be
    a whole number) and, where ``one_prefix_method`` is true, the :data:`PREFIX_FIELDS` as strings; its ``UID`` must be
    the file's paradigm. Anything else raises :class:`BlimpError` naming the file and line."""
    try:
        row = json.loads(text)
    except ValueError as err:
        raise _damaged(path, line, f"not a JSON object ({err.msg})") from None
    if not isinstance(row, dict):
        raise _damaged(path, line, f"not a JSON object but {type(row).__name__}")
    missing = [k for k in REQUIRED if k not in row]
    if missing:
        raise _damaged(path, line, f"no {', '.join(missing)}")
    bad = [k for k in REQUIRED if not isinstance(row[k], str) and not (k == "pairID" and type(row[k]) is int)]
    if bad:
        raise _damaged(path, line, f"{', '.join(bad)} not text")
    if not row["sentence_good"].strip() or not row["sentence_bad"].strip():
        raise _damaged(path, line, "an empty sentence")
    if row["UID"] != path.stem:
        raise _damaged(path, line, f"UID {row['UID']!r} in the file of paradigm {path.stem!r}")
    if row.get("one_prefix_method") is True:
        bad = [k for k in PREFIX_FIELDS if not isinstance(row.get(k), str) or not row[k].strip()]
        if bad:
            raise _damaged(path, line, f"one_prefix_method is true but {', '.join(bad)} missing or empty")
    return row


def read_paradigm(path: str | os.PathLike, *, max_pairs: int | None = None) -> list[dict]:
    """The pairs of one paradigm file, in file order, the first ``max_pairs`` (``None``: all); blank lines are
    skipped; only the lines needed are read and checked (:func:`parse_line`)."""
    path = Path(path)
    rows: list[dict] = []
    with open(path, encoding="utf-8") as handle:
        for number, text in enumerate(handle, start=1):
            if max_pairs is not None and len(rows) >= max_pairs:
                break
            if text.strip():
                rows.append(parse_line(text, path, number))
    if not rows:
        raise BlimpError(f"{path}: no pair in the file (fetch it again: `{FETCH}`)")
    return rows


@lru_cache(maxsize=8)
def _phenomena(folder: str, signature: tuple) -> dict[str, str]:
    return {name: read_paradigm(Path(folder) / f"{name}.jsonl", max_pairs=1)[0][PHENOMENON]
            for name, _ in signature}


def phenomena_of(data_dir: str | os.PathLike | None = None) -> dict[str, str]:
    """``{paradigm: phenomenon}`` (its first pair's ``linguistics_term``) of every paradigm, sorted by paradigm."""
    files = paradigm_files(data_dir)
    signature = tuple((name, path.stat().st_mtime_ns) for name, path in files.items())
    return dict(_phenomena(str(next(iter(files.values())).parent), signature))


def _unknown(option: str, name: str, known: Iterable[str], what: str) -> BlimpError:
    close = difflib.get_close_matches(name, list(known), n=3)
    hint = f"did you mean {', '.join(close)}?" if close else f"`python -m helpers pairs --list` lists them"
    return BlimpError(f"{option} {name}: no such BLiMP {what}; {hint}")


def select_paradigms(*, paradigms: Sequence[str] | None = None, phenomena: Sequence[str] | None = None,
                     data_dir: str | os.PathLike | None = None, paradigms_option: str = "--paradigms",
                     phenomena_option: str = "--phenomena") -> list[str]:
    """The paradigms chosen, sorted: those named in ``paradigms`` and those of the phenomena named in ``phenomena``
    (``linguistics_term`` values as the data spell them); neither given: all 67. An unknown name, or a selection
    that names nothing, raises :class:`BlimpError` naming the option."""
    table = phenomena_of(data_dir)
    if paradigms is None and phenomena is None:
        return list(table)
    chosen: set[str] = set()
    for name in paradigms or ():
        if name not in table:
            raise _unknown(paradigms_option, name, table, "paradigm")
        chosen.add(name)
    terms = set(table.values())
    for term in phenomena or ():
        if term not in terms:
            raise _unknown(phenomena_option, term, sorted(terms), "phenomenon (linguistics_term)")
        chosen.update(p for p, t in table.items() if t == term)
    if not chosen:
        given = [o for o, v in ((paradigms_option, paradigms), (phenomena_option, phenomena)) if v is not None]
        raise BlimpError(f"{' and '.join(given)}: the selection is empty; name at least one paradigm or phenomenon")
    return sorted(chosen)


def load_pairs(names: Sequence[str], *, max_pairs: int | None = None,
               data_dir: str | os.PathLike | None = None) -> list[dict]:
    """The pairs of the paradigms ``names`` (in that order), the first ``max_pairs`` of each (``None``: all), each as
    the file gives it (a dict)."""
    files = paradigm_files(data_dir)
    out: list[dict] = []
    for name in names:
        if name not in files:
            raise _unknown("paradigm", name, files, "paradigm")
        out.extend(read_paradigm(files[name], max_pairs=max_pairs))
    return out


def paradigm_paths(names: Sequence[str], data_dir: str | os.PathLike | None = None) -> list[Path]:
    """The files of the paradigms ``names`` (to key caches on the data)."""
    files = paradigm_files(data_dir)
    return [files[n] for n in names]


def published(data_dir: str | os.PathLike | None = None) -> dict:
    """The results published with the data: ``{"models": {paradigm: {model key: accuracy}}, "human": {paradigm:
    agreement}, "model_names": {key: name}, "files": [the two files]}`` (accuracies as shares, 0 to 1). Only the 67
    paradigms' rows are kept (the summary's per-phenomenon and overall rows are means of them, and the human file
    also holds two paradigms that are not in the data). A malformed row raises :class:`BlimpError` naming the file
    and line."""
    root = blimp_root(data_dir)
    models_path, human_path = root / MODELS_SUMMARY, root / HUMAN_SUMMARY
    for path in (models_path, human_path):
        if not path.is_file():
            raise FileNotFoundError(f"{path}: BLiMP's published results not found; run `{FETCH}`")
    models: dict[str, dict[str, float]] = {}
    with open(models_path, encoding="utf-8") as handle:
        for number, text in enumerate(handle, start=1):
            if not text.strip():
                continue
            try:
                row = json.loads(text)
                uid = row["UID"]
                scores = {k: float(row[k]) for k in PUBLISHED_MODELS}
            except (ValueError, KeyError, TypeError) as err:
                raise BlimpError(f"{models_path}:{number}: not a row of UID and {', '.join(PUBLISHED_MODELS)} "
                                 f"({type(err).__name__}: {err}); fetch it again: `{FETCH}`") from None
            if uid != "overall":
                models[uid] = scores
    human: dict[str, float] = {}
    with open(human_path, encoding="utf-8", newline="") as handle:
        for number, row in enumerate(csv.DictReader(handle), start=2):
            try:
                human[row["Condition"]] = float(row["total_mean"])
            except (KeyError, TypeError, ValueError) as err:
                raise BlimpError(f"{human_path}:{number}: not a row of Condition and total_mean "
                                 f"({type(err).__name__}: {err}); fetch it again: `{FETCH}`") from None
    return {"models": models, "human": human, "model_names": dict(PUBLISHED_MODELS),
            "files": [str(models_path), str(human_path)]}
