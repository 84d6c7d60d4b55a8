"""The cache's size on disk by kind, and pruning its bulk (maps, spilled probe batches) while keeping results."""
import json
import os
import subprocess
import sys

import numpy as np
import pytest

from helpers.cli import main
from helpers.data.cache import cache_usage, cached_json, prune
from helpers.data.files import _HOST
from helpers.pipeline.extraction import extract_treebank
from tests.integration.test_probe_batches import random_treebank

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")


@pytest.fixture
def filled(tiny_lm, tmp_path):
    """A cache with two extractions of a toy treebank's maps, probe batches spilled beside one (as versions before
    the probes held their maps in memory left them), a cached result and an installed model; returns ``(cache,
    treebank)``."""
    cache, treebank = tmp_path / "cache", tmp_path / "train.conllu"
    random_treebank(treebank, 20, seed=3)
    extract(tiny_lm, treebank, cache)
    for suffix, size in ((".bin", 5000), (".json", 100)):
        next(cache.glob("*/meta.json")).with_name(f"probe-0123456789abcdef{suffix}").write_bytes(b"b" * size)
    cached_json("toy", {"n": 1}, lambda: {"answer": 42}, cache_root=cache)
    (cache / "models" / "extra").mkdir(parents=True)
    (cache / "models" / "extra" / "weights.bin").write_bytes(b"w" * 1000)
    return cache, treebank


def extract(lm, treebank, cache) -> None:
    """The toy treebank's word-level maps at two input lengths: two extractions."""
    for max_length in (60, 40):
        extract_treebank(lm, str(treebank), max_length=max_length, cache_root=cache, shard_size=8)


def by_hand(cache) -> dict:
    """The reference: every file's size, bucketed by where it lies and how it is named."""
    sizes = {"maps": 0, "probe_batches": 0, "results": 0, "models": 0}
    for path in cache.rglob("*"):
        if not path.is_file():
            continue
        top = path.relative_to(cache).parts[0]
        if top == "models":
            kind = "models"
        elif top in ("artifacts", "parsed", "results"):
            kind = "results"
        else:  # a folder named by an extraction's key
            kind = "probe_batches" if path.name.startswith("probe-") else "maps"
        sizes[kind] += path.stat().st_size
    return {**sizes, "total": sum(sizes.values())}


def shards(cache) -> dict:
    """Every shard's arrays, by ``key/shard-NNNNN.npz``."""
    out = {}
    for path in sorted(cache.glob("*/shard-*.npz")):
        with np.load(path) as archive:
            out[str(path.relative_to(cache))] = {k: archive[k] for k in archive.files}
    return out


def snapshot(cache) -> dict:
    return {str(p.relative_to(cache)): p.read_bytes() for p in sorted(cache.rglob("*")) if p.is_file()}


def test_usage_by_kind(filled, tmp_path):
    cache, _ = filled
    expected = by_hand(cache)
    assert expected["maps"] > 0 and expected["probe_batches"] > 0 and expected["results"] > 0
    assert cache_usage(cache) == expected
    os.symlink(tmp_path / "train.conllu", cache / "linked")  # a link is not followed, nor counted
    assert cache_usage(cache) == expected
    assert cache_usage(tmp_path / "none")["total"] == 0


def test_prune_keeps_results_and_the_maps_come_back(tiny_lm, filled):
    cache, treebank = filled
    before = by_hand(cache)
    maps_before = shards(cache)
    out = prune(cache)
    assert out["bytes_removed"] == before["maps"] + before["probe_batches"]
    assert len(out["extractions_pruned"]) == 2 and out["extractions_in_use"] == []
    after = by_hand(cache)
    assert after == {**before, "maps": 0, "probe_batches": 0,
                     "total": before["results"] + before["models"]}
    assert cached_json("toy", {"n": 1}, lambda: pytest.fail("the result was not kept"), cache_root=cache) == {"answer": 42}

    extract(tiny_lm, treebank, cache)
    again = shards(cache)
    assert sorted(again) == sorted(maps_before)  # the same keys and shards, computed again
    for name, arrays in again.items():  # holding the same maps
        assert arrays.keys() == maps_before[name].keys()
        for member, value in arrays.items():
            np.testing.assert_array_equal(value, maps_before[name][member])
    assert by_hand(cache)["probe_batches"] == 0  # spilled by an earlier version: not made again


def test_keep_maps_removes_the_spilled_batches_only(filled):
    cache, _ = filled
    before = by_hand(cache)
    out = prune(cache, keep_maps=True)
    assert out["bytes_removed"] == before["probe_batches"] and len(out["extractions_pruned"]) == 1
    assert by_hand(cache) == {**before, "probe_batches": 0, "total": before["total"] - before["probe_batches"]}


def test_dry_run_removes_nothing(filled):
    cache, _ = filled
    files = snapshot(cache)
    out = prune(cache, dry_run=True)
    assert snapshot(cache) == files
    assert out["bytes_removed"] == prune(cache)["bytes_removed"] > 0


def test_an_extraction_being_written_is_left_alone(filled):
    """A live writer's temporary file keeps its extraction whole; a killed writer's does not."""
    cache, _ = filled
    first, second = sorted(p.parent for p in cache.glob("*/meta.json"))
    live = first / f"shard-00009.npz.{_HOST}-{os.getpid()}.abc.tmp"
    live.write_bytes(b"x")
    dead_pid = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True,
                              text=True, check=True).stdout.strip()
    (second / f"shard-00009.npz.{_HOST}-{dead_pid}.abc.tmp").write_bytes(b"x")
    out = prune(cache)
    assert out["extractions_in_use"] == [first.name] and out["extractions_pruned"] == [second.name]
    assert first.is_dir() and live.is_file() and not second.exists()


def test_prune_command(filled, capsys):
    cache, _ = filled
    before = by_hand(cache)
    assert main(["prune", "--cache-dir", str(cache), "--dry-run", "--json", "-"]) == 0
    dry = json.loads(capsys.readouterr().out)
    assert dry["dry_run"] and dry["after"] == dry["before"] == before
    assert main(["info", "--no-model", "--cache-dir", str(cache)]) == 0
    assert json.loads(capsys.readouterr().out)["cache"]["usage"] == before

    assert main(["prune", "--cache-dir", str(cache), "--json", "-"]) == 0
    captured = capsys.readouterr()
    done = json.loads(captured.out)
    assert done["bytes_removed"] == before["maps"] + before["probe_batches"]
    assert done["after"] == by_hand(cache) and done["after"]["results"] == before["results"]
    assert f"{cache}: removed" in captured.err and "2 extraction(s)" in captured.err


def test_prune_of_a_file_is_a_clear_error(tmp_path, capsys):
    target = tmp_path / "cache"
    target.write_text("not a folder")
    assert main(["prune", "--cache-dir", str(target)]) == 2
    assert f"--cache-dir {target}: is a file, not a folder" in capsys.readouterr().err
