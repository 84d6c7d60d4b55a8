"""benchmarks/book_phases.py: its timing wrappers, the functions it wraps, and each page's floor."""
import sys
import types
from pathlib import Path

import pytest

BENCHMARKS = str(Path(__file__).resolve().parents[2] / "benchmarks")
sys.path.insert(0, BENCHMARKS)  # for its `from common import ...`; removed again at once: benchmarks/distributed.py
try:                             # would shadow Dask's `distributed` in every later test (and its spawned workers)
    import book_phases  # noqa: E402
finally:
    sys.path.remove(BENCHMARKS)


def test_wrapped_calls_are_timed_inclusively_and_still_return():
    module = types.SimpleNamespace(work=lambda x: x * 2)
    phases = book_phases.Phases()
    phases.wrap(module, "work", "page: work")
    assert module.work(3) == 6 and module.work(4) == 8
    assert phases.calls == {"page: work": 2} and phases.seconds["page: work"] >= 0
    module.fail = lambda: 1 / 0
    phases.wrap(module, "fail", "page: fail")
    with pytest.raises(ZeroDivisionError):
        module.fail()
    assert phases.calls["page: fail"] == 1  # timed even when it raises
    assert phases.labels == ["page: work", "page: fail"]


def test_every_phase_names_a_function_the_chapters_call(monkeypatch):
    """A renamed or moved function would leave its phase at zero: each wrapped name must exist (and be
    callable) where the chapters' code looks it up."""
    seen = []

    def check(self, owner, name, label):
        assert callable(getattr(owner, name)), f"{owner}.{name}"
        seen.append(label)

    monkeypatch.setattr(book_phases.Phases, "wrap", check)
    book_phases.instrument(book_phases.Phases())
    assert {label.split(":")[0] for label in seen} == set(book_phases.PAGES)


def test_page_floor_sums_the_passes_each_page_runs():
    rows = [("default", "segments", 1.0), ("default", "masked-LM segments (train)", 2.0), ("default", "gum:train", 4.0),
            ("random:default", "gum:dev", 8.0), ("default", "coreference dev (windows)", 16.0),
            ("random:default", "segments", 32.0), ("random:default", "coreference dev (windows)", 64.0)]
    floor = {"model_spec": "default", "passes": [{"spec": s, "input": i, "seconds": t} for s, i, t in rows]}
    assert book_phases.page_floor(floor, "surface") == 3.0   # the book model's segments only
    assert book_phases.page_floor(floor, "probe") == 12.0    # its treebanks and its control's
    assert book_phases.page_floor(floor, "coref") == 16.0
    assert book_phases.page_floor({"passes": []}, "coref") is None
