"""Cache keys from the code: :func:`source_digest`, and a cached result recomputed when the code that
computes it changes (no version constant to bump)."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from helpers.digest import source_digest

PACKAGE = Path(__file__).resolve().parents[2] / "helpers"


def test_source_digest_follows_the_source(tmp_path, monkeypatch):
    import helpers.core.labels as labels
    import helpers.paper as paper

    assert source_digest(labels, paper) == source_digest("helpers.core.labels", "helpers.paper")
    assert source_digest(labels, paper) != source_digest(paper, labels) != source_digest(paper)
    assert len(source_digest(paper)) == 16
    (tmp_path / "thing.py").write_text("X = 1\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    import thing

    before = source_digest(thing)
    (tmp_path / "thing.py").write_text("X = 2\n")
    assert source_digest(thing) != before  # the file is read at each call
    with pytest.raises(ValueError):
        source_digest()
    with pytest.raises(ValueError, match="no Python source"):
        source_digest(sys)


NORM_RESULT = "return NormStats(self.weights / self.count, self.norms / self.count, spearman, self.count)"


def _norms_json(package_root: Path, model: Path, data: Path, cache: Path, out: Path) -> dict:
    """``python -m helpers norms`` run with the package found at ``package_root`` (a fresh interpreter)."""
    env = {**os.environ, "PYTHONPATH": str(package_root), "HF_HUB_OFFLINE": "1"}
    done = subprocess.run([sys.executable, "-m", "helpers", "norms", "--segments", "3", "--model", str(model),
                           "--data-dir", str(data), "--cache-dir", str(cache), "--json", str(out), "--quiet"],
                          cwd=package_root, env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    return json.loads(out.read_text())


def test_changed_norm_statistics_code_recomputes_the_cached_result(tiny_model_dir, fake_data, tmp_path):
    """A copy of the package computes and caches the norm statistics; its ``norms/stats.py`` is then changed
    (the weight shares halved): the same command with the same cache recomputes (stale numbers were served
    while the key carried only a hand-bumped version) and a third run, code unchanged, reads the cache."""
    copy = tmp_path / "copy"
    shutil.copytree(PACKAGE, copy / "helpers", ignore=shutil.ignore_patterns("__pycache__"))
    cache = tmp_path / "cache"
    first = _norms_json(copy, tiny_model_dir, fake_data, cache, tmp_path / "a.json")
    stats_py = copy / "helpers" / "norms" / "stats.py"
    source = stats_py.read_text()
    assert NORM_RESULT in source, "the test's edit no longer applies: update NORM_RESULT"
    stats_py.write_text(source.replace(NORM_RESULT, NORM_RESULT.replace("self.weights / self.count", "self.weights / self.count / 2")))
    second = _norms_json(copy, tiny_model_dir, fake_data, cache, tmp_path / "b.json")
    w1, w2 = first["layers"]["1"]["weights"]["other"], second["layers"]["1"]["weights"]["other"]
    # tolerance: the JSON keeps 6 decimals
    assert w2 == pytest.approx(w1 / 2, abs=2e-6), "stale norm statistics were served after the code changed"
    assert second["layers"]["1"]["norms"] == first["layers"]["1"]["norms"]
    stored = {f: f.stat().st_mtime_ns for f in cache.glob("artifacts/norm-stats-*.json")}
    assert len(stored) == 2  # one result per version of the code
    assert _norms_json(copy, tiny_model_dir, fake_data, cache, tmp_path / "c.json") == second
    assert {f: f.stat().st_mtime_ns for f in cache.glob("artifacts/norm-stats-*.json")} == stored  # read, not rewritten
