"""The repository stands on its own: no tracked file sends the reader to the paper notes kept in a folder beside
it, which a reader of the published book, or anyone who clones the repository, does not have. Definitions live in
book/methods.md; chapters link it with {ref}, docstrings name its sections."""
from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
# The folder's path, put together here so that this file does not contain it (and so passes its own check).
NEEDLE = "/".join(("shared", "paper"))


def tracked_files(root: Path) -> list[str]:
    """The files git tracks in the repository at ``root`` (``git ls-files``), relative to it."""
    listed = subprocess.run(["git", "ls-files", "-z"], cwd=root, capture_output=True, check=True).stdout
    return [name for name in listed.decode("utf-8").split("\0") if name]


def files_containing(root: Path, needle: str = NEEDLE) -> list[str]:
    """The tracked files of the repository at ``root`` whose bytes contain ``needle``, in ``git ls-files`` order.
    A tracked file missing from the working tree (deleted, not yet committed) has nothing to say."""
    found = []
    for name in tracked_files(root):
        path = root / name
        if path.is_file() and needle.encode("utf-8") in path.read_bytes():
            found.append(name)
    return found


def test_no_tracked_file_points_outside_the_repository():
    if not (ROOT / ".git").exists():
        pytest.skip(f"{ROOT} is not a git checkout: there is no list of tracked files")
    found = files_containing(ROOT)
    assert not found, (f"these tracked files point to {NEEDLE!r}, which a reader of the book does not have: "
                       f"{', '.join(found)}. State the definition on book/methods.md and point there instead "
                       "(notebooks: {ref}`methods-<topic>`; docstrings: \"book/methods.md, §Name\").")


def _git(root: Path, *args: str) -> None:
    subprocess.run(["git", *args], cwd=root, capture_output=True, check=True)


def test_a_planted_pointer_is_found(tmp_path):
    """The scan finds a pointer in a tracked file, at any depth and in any kind of file, and only in tracked ones."""
    _git(tmp_path, "init", "-q")
    (tmp_path / "book").mkdir()
    (tmp_path / "book" / "page.md").write_text(f"Definitions: see ../{NEEDLE}/notes.md\n")
    (tmp_path / "module.py").write_text('"""Nothing outside the repository."""\n')
    (tmp_path / "chapter.ipynb").write_text('{"cells": [{"source": ["(`../' + NEEDLE + '/a.md`)"]}]}')
    (tmp_path / "untracked.md").write_text(f"../{NEEDLE}\n")
    _git(tmp_path, "add", "book/page.md", "module.py", "chapter.ipynb")
    assert files_containing(tmp_path) == ["book/page.md", "chapter.ipynb"]
    # the same files with the pointer gone: nothing is found
    (tmp_path / "book" / "page.md").write_text("Definitions: book/methods.md, §Segments\n")
    (tmp_path / "chapter.ipynb").write_text('{"cells": [{"source": ["{ref}`methods-mixing`"]}]}')
    assert files_containing(tmp_path) == []


def test_this_file_does_not_hold_the_needle_literally():
    """The check passes on this file because the needle is assembled, not because the file is left out."""
    assert NEEDLE.encode("utf-8") not in Path(__file__).read_bytes()
