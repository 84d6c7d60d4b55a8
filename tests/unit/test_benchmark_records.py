"""benchmarks/common.py: a recorded measurement names the commit it measured."""
import json
import sys
from pathlib import Path

BENCHMARKS = str(Path(__file__).resolve().parents[2] / "benchmarks")
sys.path.insert(0, BENCHMARKS)  # removed again at once: benchmarks/distributed.py would shadow Dask's `distributed`
try:
    import common  # noqa: E402
finally:
    sys.path.remove(BENCHMARKS)


def test_record_names_the_commit_at_the_start(tmp_path, monkeypatch):
    """A commit made while a benchmark runs is not what it measured: the record keeps HEAD at the start,
    and says where HEAD was at the end when it moved."""
    monkeypatch.setattr(common, "RESULTS", tmp_path)
    monkeypatch.setattr(common, "COMMIT_AT_START", "aaaaaaa")
    monkeypatch.setattr(common, "_commit", lambda: "aaaaaaa")
    common.save({"x": 1, "peak_rss_mib": 1.0}, tmp_path / "out.json", record="bench", started={"cores": 2})
    (first,) = tmp_path.glob("bench-default-*.json")
    meta = json.loads(first.read_text())["recorded"]
    assert meta["commit"] == "aaaaaaa" and "commit_at_end" not in meta

    monkeypatch.setattr(common, "_commit", lambda: "bbbbbbb")  # HEAD moved during the run
    common.save({"x": 1, "peak_rss_mib": 1.0}, tmp_path / "out.json", record="bench", started={"cores": 2})
    (second,) = set(tmp_path.glob("bench-default-*.json")) - {first}  # the first recording of the day is kept
    meta = json.loads(second.read_text())["recorded"]
    assert meta["commit"] == "aaaaaaa" and meta["commit_at_end"] == "bbbbbbb"
    assert "commit_at_end" not in json.loads(first.read_text())["recorded"]


def test_the_cache_peak_keeps_the_largest_bytes_of_each_kind_seen_while_it_ran(tmp_path):
    """benchmarks/book_build.py records the analysis cache's peak during the build beside what is left at its
    end: bytes written and removed again between the start and the end count in the peak, not at the end."""
    cache = tmp_path / "cache"
    extraction = cache / "0123abcd"
    extraction.mkdir(parents=True)
    (extraction / "meta.json").write_text("{}")
    peak = common.CachePeak(cache, every=0.01)
    with peak:
        (extraction / "shard-00000.npz").write_bytes(b"x" * 5000)
        (extraction / "probe-1.bin").write_bytes(b"y" * 3000)
        peak.sample()  # the thread samples too; this sample makes the peak certain
        (extraction / "shard-00000.npz").unlink()
        peak.sample()
        (extraction / "probe-1.bin").unlink()
    assert peak.peak["maps"] == 5000 + 2 and peak.peak["probe_batches"] == 3000
    assert peak.peak["total"] == 8002 and peak.peak_total_sample["total"] == 8002
    assert peak.samples >= 3
    assert common.CachePeak(cache).stop()["total"] == 2  # stopped before it started: one sample, what is left


def _benchmark(name: str):
    """A benchmark script as a module (its folder on sys.path only while it is imported, as for ``common``)."""
    sys.path.insert(0, BENCHMARKS)
    try:
        return __import__(name)
    finally:
        sys.path.remove(BENCHMARKS)


def test_the_probes_benchmarks_gold_heads_are_never_the_word_itself():
    """The probes mask a word as its own head (-1e9): a gold head there would add a constant to the loss that hides
    any difference between the batched and the naive epoch's losses, which the benchmark checks."""
    import numpy as np

    probes = _benchmark("probes")
    lengths = [1, 2, 5, 40] * 25
    data = probes.synthetic(lengths, 1, 2, 4)
    for n, gold in zip(lengths, data.heads):
        assert gold.shape == (n,) and gold.min() >= 0 and gold.max() <= n
        assert not np.any(gold == np.arange(1, n + 1))  # word i is candidate i + 1
    assert any(np.any(gold == 0) for gold in data.heads)  # ROOT is drawn too


def test_the_original_clustering_loop_timed_over_some_heads_computes_their_rows():
    """clustering.py --original-heads N times N iterations of the original loop (each the same work) and scales: the
    rows it computes are the full loop's."""
    import numpy as np

    clustering = _benchmark("clustering")
    rng = np.random.default_rng(0)
    attn = rng.random((2, 3, 5, 5))
    attn /= attn.sum(-1, keepdims=True)
    full, part = clustering.original_loop(attn), clustering.original_loop(attn, 2)
    assert np.array_equal(part[:2], full[:2]) and not part[2:].any()
