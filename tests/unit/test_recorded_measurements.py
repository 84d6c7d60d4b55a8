"""benchmarks/common.py: recorded measurements are kept, never replaced, and the newest is found by its date and time."""
import json
import sys
from pathlib import Path

BENCHMARKS = str(Path(__file__).resolve().parents[2] / "benchmarks")
sys.path.insert(0, BENCHMARKS)  # removed at once: benchmarks/distributed.py would shadow Dask's `distributed`
try:
    import common  # noqa: E402
finally:
    sys.path.remove(BENCHMARKS)


def write(path: Path, date: str, time: str, model: str = "default", value: int = 0) -> None:
    path.write_text(json.dumps({"value": value, "model_spec": model, "recorded": {"date": date, "time": time}}))


def test_a_second_recording_on_the_same_day_keeps_the_first(tmp_path, monkeypatch):
    monkeypatch.setattr(common.time, "strftime", lambda fmt: {"%Y-%m-%d": "2026-11-25", "%H%M%S": "031600"}[fmt])
    first = common.record_path("book_build", "default", tmp_path)
    assert first.name == "book_build-default-2026-11-25.json"
    first.write_text("{}")
    second = common.record_path("book_build", "default", tmp_path)
    assert second.name == "book_build-default-2026-11-25-031600.json" and second != first
    second.write_text("{}")
    assert common.record_path("book_build", "default", tmp_path).name == "book_build-default-2026-11-25-031600-2.json"


def test_the_newest_is_chosen_by_its_recorded_date_and_time_not_its_file_name(tmp_path):
    # the later recording of the day carries a name that sorts first: "...-25-0125" < "...-25."
    write(tmp_path / "book_build-default-2026-11-25.json", "2026-11-25", "01:25:25", value=1)
    write(tmp_path / "book_build-default-2026-11-25-0125.json", "2026-11-25", "03:40:00", value=2)
    write(tmp_path / "book_build-default-2026-11-24.json", "2026-11-24", "23:59:59", value=3)
    write(tmp_path / "book_build-mpnet-base-2026-11-26.json", "2026-11-26", "00:00:00", model="mpnet-base", value=4)
    (tmp_path / "book_build-default-broken.json").write_text("{not json")
    assert common.recorded("book_build", "default", tmp_path)["value"] == 2
    assert common.recorded("book_build", None, tmp_path)["value"] == 4
    assert common.recorded("book_floor", "default", tmp_path) is None


def test_having_passes_over_recordings_without_that_part(tmp_path):
    """A script run without one of its parts (benchmarks/probes.py --skip-naive) writes no key for it: ``having``
    finds the newest recording that has the part."""
    write(tmp_path / "probes-6x12-2026-11-27.json", "2026-11-27", "10:00:00", model="6x12", value=1)
    data = json.loads((tmp_path / "probes-6x12-2026-11-27.json").read_text())
    (tmp_path / "probes-6x12-2026-11-27.json").write_text(json.dumps({**data, "device": {"attn": {}}}))
    write(tmp_path / "probes-6x12-2026-11-28.json", "2026-11-28", "10:00:00", model="6x12", value=2)
    assert common.recorded("probes", None, tmp_path)["value"] == 2
    assert common.recorded("probes", None, tmp_path, having="device")["value"] == 1
    assert common.recorded("probes", "6x12", tmp_path, having="missing") is None
