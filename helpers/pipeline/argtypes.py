"""Command-line argument types and input checks, shared by :mod:`helpers.cli` and the chapter pipelines.

Each type checks one value and says what is wrong, so a bad option stops the command at once with
``error: argument --epochs: must be at least 1 (got 0)`` (exit status 2), before any model loads:

>>> import argparse
>>> parser = argparse.ArgumentParser()
>>> _ = parser.add_argument("--epochs", type=positive_int, default=3)
>>> parser.parse_args(["--epochs", "2"]).epochs
2

Every integer option of every command uses an :class:`IntRange` (a test enumerates the parsers and tries
values outside each range); the few float options check their own range (``sinks --epsilon``: a share, 0 to 1). A command whose inputs are not named
by ``--conllu`` or ``--corpus`` declares them with ``parser.set_defaults(check_inputs=...)`` (a section's command: its
record's reads, :meth:`helpers.section.Section.command_reads`); the
CLI calls that hook before loading the model (see :func:`check_corpora`).
"""
from __future__ import annotations

import argparse
import os


class IntRange:
    """An integer in ``[minimum, maximum]`` (``maximum=None``: no upper bound)."""

    def __init__(self, minimum: int, maximum: int | None = None):
        self.minimum, self.maximum = minimum, maximum
        self.__name__ = repr(self)

    def __repr__(self) -> str:
        return f"IntRange({self.minimum}, {self.maximum})"

    def __call__(self, text: str) -> int:
        try:
            value = int(str(text).strip())
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
        if value < self.minimum:
            raise argparse.ArgumentTypeError(f"must be at least {self.minimum} (got {value})")
        if self.maximum is not None and value > self.maximum:
            raise argparse.ArgumentTypeError(f"must be at most {self.maximum} (got {value})")
        return value


class NameList:
    """An option's comma-separated names (``--methods a,b``), checked by ``check(names) -> names``, whose
    ``ValueError`` (it names ``option`` and the choices) becomes argparse's one-line error without the option's name
    (argparse adds it)."""

    def __init__(self, option: str, check):
        self.option, self.check = option, check
        self.__name__ = repr(self)

    def __repr__(self) -> str:
        return f"NameList({self.option})"

    def __call__(self, text: str) -> tuple[str, ...]:
        try:
            return self.check([name.strip() for name in text.split(",") if name.strip()])
        except ValueError as err:
            raise argparse.ArgumentTypeError(str(err).removeprefix(f"{self.option} ")) from None


positive_int = IntRange(1)
"""Counts: sentences, segments, seeds, epochs, permutations, batch sizes."""

seed_int = IntRange(0, 2**32 - 1)
"""Random seeds (what NumPy, ``random`` and torch all accept)."""

max_length_int = IntRange(3)
"""Input length limits in tokens: two special tokens and at least one word."""


def device(text: str) -> str:
    """A torch device that exists on this machine (``cpu``, ``cuda``, ``cuda:1``, ``mps``):
    :func:`helpers.config.check_device`."""
    from helpers.config import check_device

    try:
        return check_device(text)
    except ValueError as err:
        raise argparse.ArgumentTypeError(str(err)) from None


STDOUT = "-"
"""``--json -``: the result goes to standard output (progress and notes stay on standard error)."""


def check_no_link_loop(path: str | os.PathLike, where: str) -> None:
    """Raise ``ValueError`` starting with ``where`` when ``path`` is (or passes through) a symbolic link loop,
    which ``Path.resolve`` would report as a bare ``RuntimeError``."""
    from pathlib import Path

    try:
        Path(path).expanduser().resolve()
    except (RuntimeError, OSError):
        raise ValueError(f"{where}: is a symbolic link in a loop (it never reaches a folder)") from None


def check_writable_folder(folder: str | os.PathLike, where: str) -> None:
    """Raise ``ValueError`` starting with ``where`` unless files can be written in ``folder``: it is a
    folder, or it can be created (tried where it would start, with a temporary folder removed at once),
    and a file can be created in it (a temporary file, removed at once)."""
    from pathlib import Path

    from helpers.data.files import nearest_existing, probe_write

    folder = Path(folder).expanduser()
    existing = nearest_existing(folder)
    if not existing.is_dir():
        raise ValueError(f"{where}: {existing} is {'a file' if existing.is_file() else 'not a folder'}, "
                         "so the folder cannot be made there; choose another folder")
    try:
        probe_write(folder)
    except OSError as err:
        raise ValueError(f"{where}: cannot write in {existing} ({err.strerror or err}); choose a folder you can "
                         "write") from None


def check_output_path(path: str | os.PathLike, option: str = "--json") -> None:
    """Raise ``ValueError`` naming ``option`` unless a file can be written at ``path``.

    Checks what a later write needs: ``path`` is not a directory, its folder is a folder (or can
    be created) and a file can be created there (tried with a temporary file, removed at once).
    """
    from pathlib import Path

    from helpers.data.files import input_file_problem, is_special_file, nearest_existing, probe_write

    target = Path(path).expanduser()
    if target.is_symlink():
        if "loop" in (input_file_problem(target) or ""):
            raise ValueError(f"{option} {path}: is a symbolic link in a loop; give a file name")
        target = Path(os.path.realpath(target))  # written through the link, as a shell's > would
    if target.is_dir():
        raise ValueError(f"{option} {path}: is a directory; give a file name, e.g. {target / 'result.json'}")
    if is_special_file(target):  # /dev/stdout, a pipe: written in place
        if not os.access(target, os.W_OK):
            raise ValueError(f"{option} {path}: cannot write there (permission denied)")
        return
    existing = nearest_existing(target.parent)
    if not existing.is_dir():
        raise ValueError(f"{option} {path}: {existing} is a file, not a folder")
    try:
        probe_write(target.parent)  # where the folder would be created, that is tried
    except OSError as err:
        raise ValueError(f"{option} {path}: cannot write in {existing} ({err.strerror or err})") from None


def check_corpora(args: argparse.Namespace, *specs: str) -> None:
    """Read every corpus ``spec`` (``gum:train``, ``ewt:dev``, a path ...; or a section's read as
    :func:`helpers.data.corpora.corpus_read` names it: ``segments:gum:train``, ``ontogum:dev``) the way the command
    will, so a missing or malformed file is reported before the model loads (parsed files stay cached in memory)."""
    from helpers.data.corpora import corpus_read, load_treebank
    from helpers.data.ontogum import load_coref

    checked = set()
    for spec in specs:
        kind, source = corpus_read(spec)
        if (kind == "coreference", source) in checked:  # a treebank read as sentences and as segments: once
            continue
        checked.add((kind == "coreference", source))
        if kind == "coreference":
            load_coref(source, data_dir=args.data_dir, cache_root=getattr(args, "cache_dir", None))
        else:
            load_treebank(source, data_dir=args.data_dir, max_sentences=getattr(args, "max_sentences", None),
                          cache_root=getattr(args, "cache_dir", None))
