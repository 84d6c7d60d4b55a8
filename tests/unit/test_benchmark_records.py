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
