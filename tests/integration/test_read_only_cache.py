"""A cache that another user filled and left read-only (a lab's prebuilt cache): a run whose results are all
in it reads it and succeeds with the same JSON; a run that must add to it says so in one line, exit 2.

Root ignores file modes, so as root the cache is made read-only with a read-only bind mount; elsewhere with
``chmod``. Where neither is possible the test is skipped (it says why).
"""
from __future__ import annotations

import json
import os
import stat
import subprocess
from contextlib import contextmanager
from pathlib import Path

import pytest

from helpers.cli import main


@contextmanager
def read_only(folder: Path):
    """``folder`` (and everything under it) read-only for this process while the block runs."""
    if os.geteuid() != 0:
        modes = {p: p.stat().st_mode for p in [folder, *folder.rglob("*")]}
        for p, mode in modes.items():
            p.chmod(mode & ~(stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH))
        try:
            yield
        finally:
            for p, mode in modes.items():
                p.chmod(mode)
        return
    bind = subprocess.run(["mount", "--bind", str(folder), str(folder)], capture_output=True, text=True)
    if bind.returncode != 0:
        pytest.skip(f"root, and no read-only bind mount here ({bind.stderr.strip()})")
    try:
        ro = subprocess.run(["mount", "-o", "remount,bind,ro", str(folder)], capture_output=True, text=True)
        if ro.returncode != 0:
            pytest.skip(f"root, and no read-only remount here ({ro.stderr.strip()})")
        yield
    finally:
        subprocess.run(["umount", str(folder)], capture_output=True)


def _heads(model: Path, conllu: Path, cache: Path, out: Path, *extra: str) -> int:
    return main(["heads", "--conllu", str(conllu), "--model", str(model), "--max-length", "40", "--quiet",
                 "--cache-dir", str(cache), "--json", str(out), *extra])


def test_a_read_only_cache_serves_every_cached_result(tiny_model_dir, toy_conllu, tmp_path, capsys):
    cache = tmp_path / "lab-cache"
    assert _heads(tiny_model_dir, toy_conllu, cache, tmp_path / "first.json") == 0
    files_before = sorted(p.relative_to(cache) for p in cache.rglob("*"))
    capsys.readouterr()
    with read_only(cache):
        probe = cache / "write-test"
        with pytest.raises(OSError):
            probe.write_text("")  # the cache really is read-only for this process
        assert _heads(tiny_model_dir, toy_conllu, cache, tmp_path / "again.json") == 0, capsys.readouterr().err
        assert json.loads((tmp_path / "again.json").read_text()) == json.loads((tmp_path / "first.json").read_text())
        # a run that must compute something new (maps of another word mode) names the cache and why
        capsys.readouterr()
        assert _heads(tiny_model_dir, toy_conllu, cache, tmp_path / "new.json", "--word-mode", "first") == 2
        err = capsys.readouterr().err.strip()
        assert err.count("\n") == 0 and err.startswith("error: --cache-dir ")
        assert "cannot write" in err and str(cache) in err
        assert not (tmp_path / "new.json").exists()
    assert sorted(p.relative_to(cache) for p in cache.rglob("*")) == files_before  # nothing lost, nothing added
