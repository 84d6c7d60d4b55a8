"""scripts/execute_book.py: the order in which the book's pages are executed two at a time."""
import importlib.util
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
spec = importlib.util.spec_from_file_location("execute_book", ROOT / "scripts" / "execute_book.py")
execute_book = importlib.util.module_from_spec(spec)
spec.loader.exec_module(execute_book)


def write_page(path: Path, cells) -> Path:
    """A notebook of ``cells`` (nbformat cells) on the kernel "python3", written to ``path``."""
    import nbformat

    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nb.cells = list(cells)
    nbformat.write(nb, path)
    return path


def in_fresh_process(code: str, env=None) -> dict:
    """Run ``code`` (with ``execute_book`` imported) in a fresh Python process, as ``main`` runs each page in a
    fresh worker (``_execute`` sets that process's environment; its peak is that of what it waited for), and
    return the JSON of its last line of output."""
    import json
    import subprocess
    import sys

    script = f"import json, sys; sys.path.insert(0, {str(ROOT / 'scripts')!r}); import execute_book\n" + code
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120, env=env)
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_every_page_of_the_toc_has_a_place():
    """A new notebook must be placed (what it reads first, or alone): otherwise it would run last, alone."""
    pages = execute_book.toc_pages(ROOT)
    assert pages and all(p.startswith("notebooks/") for p in pages)
    assert sorted(pages) == sorted([*execute_book.AFTER, *execute_book.ALONE])
    assert all(dep in execute_book.AFTER for deps in execute_book.AFTER.values() for dep in deps)


def test_pages_run_after_what_they_read_and_the_timed_page_alone():
    pages = execute_book.toc_pages(ROOT)
    waves = execute_book.schedule(pages, set())
    wave_of = {page: k for k, wave in enumerate(waves) for page in wave}
    assert sorted(wave_of) == sorted(pages)
    for page, deps in execute_book.AFTER.items():
        assert all(wave_of[dep] < wave_of[page] for dep in deps), page
    for page in execute_book.ALONE:
        assert waves[wave_of[page]] == [page]
    # the comparison reads every chapter's cached results; the summary reads the comparison's
    chapters = [p for p in pages if p.split("/")[1][:2].isdigit() and p != "notebooks/08_compare"]
    assert all(wave_of[c] < wave_of["notebooks/08_compare"] for c in chapters if c != "notebooks/02_attention_maps")
    assert wave_of["notebooks/results_at_a_glance"] > wave_of["notebooks/08_compare"]


def test_cached_pages_are_not_scheduled_and_unknown_pages_go_last():
    pages = ["notebooks/03_surface", "notebooks/06_cluster", "notebooks/99_new"]
    waves = execute_book.schedule(pages, {"notebooks/03_surface"})
    assert waves == [["notebooks/06_cluster"], ["notebooks/99_new"]]
    assert not execute_book.ready_after("notebooks/99_new", pages, {"notebooks/03_surface"})
    assert execute_book.ready_after("notebooks/99_new", pages, {"notebooks/03_surface", "notebooks/06_cluster"})


def test_bad_options_name_themselves(tmp_path, capsys):
    import pytest

    for argv, expected in ((["--jobs", "0"], "--jobs 0"), (["--book", str(tmp_path)], "_config.yml or _toc.yml")):
        with pytest.raises(SystemExit) as exit_info:
            execute_book.main(argv)
        assert exit_info.value.code == 2 and expected in capsys.readouterr().err


def test_the_order_is_derived_from_the_section_records():
    """A section's chapter waits for the chapters of the sections its record reads (``Section.inputs``: their
    cached results; else it would compute them a second time, beside them) and for nothing else but the
    explained :data:`SHARED_MAPS`; the comparison waits for every section's chapter and the summary for the
    comparison. As built for the book:"""
    from helpers.results import SECTIONS, section

    after = execute_book.AFTER
    assert after == execute_book.after_pages(SECTIONS)
    for record in SECTIONS:
        page = execute_book.chapter_page(record)
        assert after[page] == tuple(f"notebooks/{section(k).chapter}" for k in record.inputs) + \
            execute_book.SHARED_MAPS.get(page, ()), record.key
    assert after["notebooks/06_cluster"] == ("notebooks/03_surface", "notebooks/04_syntax", "notebooks/04_coref")
    assert after["notebooks/04_syntax"] == ("notebooks/05_probe",)
    assert after[execute_book.COMPARE] == tuple(execute_book.chapter_page(s) for s in SECTIONS)
    assert after[execute_book.GLANCE] == (execute_book.COMPARE,)


def test_a_new_input_or_section_moves_the_order(monkeypatch):
    """Planted: a record that reads one more section waits for its chapter; a new section's chapter gets a place
    (and the comparison waits for it), with nothing typed in the script."""
    from dataclasses import replace

    from helpers.results import SECTIONS, section

    coref = replace(section("coref"), inputs=("surface",))
    new = replace(section("norms"), key="extra", chapter="09_extra", inputs=("coref",))
    records = tuple(coref if s.key == "coref" else s for s in SECTIONS) + (new,)
    after = execute_book.after_pages(records)
    assert after["notebooks/04_coref"] == ("notebooks/03_surface",)
    assert after["notebooks/09_extra"] == ("notebooks/04_coref",)
    assert "notebooks/09_extra" in after[execute_book.COMPARE]
    monkeypatch.setattr(execute_book, "AFTER", after)
    waves = execute_book.schedule([*after, "notebooks/performance"], set())
    wave_of = {page: k for k, wave in enumerate(waves) for page in wave}
    assert wave_of["notebooks/03_surface"] < wave_of["notebooks/04_coref"] < wave_of["notebooks/09_extra"]


def test_page_costs_are_the_newest_recorded_default_build():
    """The schedule's costs are read from the recorded default build, one for every page of the book (a page
    the recording lacks would be scheduled as :data:`UNTIMED_COST`). The newest by the date and time recorded
    inside (two recordings can share a date), as the benchmarks' own ``common.recorded`` finds it (tested in
    test_benchmark_records)."""
    import json

    spec = importlib.util.spec_from_file_location("benchmarks_common", ROOT / "benchmarks" / "common.py")
    common = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(common)
    results = ROOT / "benchmarks" / "results"
    newest = common.recorded("book_build", "default", results)
    stamps = [(r["recorded"]["date"], r["recorded"]["time"]) for r in
              (json.loads(p.read_text()) for p in results.glob("book_build-default-*.json"))]
    assert newest is not None and (newest["recorded"]["date"], newest["recorded"]["time"]) == max(stamps)
    assert execute_book.page_costs() == newest["pages"]
    untimed = set(execute_book.toc_pages(ROOT)) - set(execute_book.page_costs())
    # a page the recording lacks must be newer than the build it records (scheduled at UNTIMED_COST until the
    # next recording): its notebook is absent from the recorded commit
    commit = newest["recorded"].get("commit")
    for page in untimed:
        assert commit, f"{page}: not in the newest recorded build, which names no commit"
        known = subprocess.run(["git", "cat-file", "-e", f"{commit}:{page}.ipynb"], cwd=ROOT, capture_output=True)
        assert known.returncode != 0, f"{page} existed at {commit} but the build recorded there has no cost for it"
    assert execute_book.cost("notebooks/99_new") == execute_book.UNTIMED_COST


def test_page_costs_are_the_book_models_own_when_recorded(monkeypatch, tmp_path):
    """A book built for another model is scheduled by that model's newest recorded build, else by the default's."""
    import json

    from helpers.config import MODEL_ENV

    results = tmp_path / "results"
    results.mkdir()
    for name, model, pages in (("book_build-default-2026-01-01.json", "default", {"notebooks/03_surface": 100.0}),
                               ("book_build-smollm2-2026-01-01.json", "smollm2", {"notebooks/03_surface": 900.0})):
        (results / name).write_text(json.dumps({"model_spec": model, "pages": pages,
                                                "recorded": {"date": "2026-01-01", "time": "00:00:00"}}))
    monkeypatch.setenv(MODEL_ENV, "smollm2")
    assert execute_book.page_costs(results=results) == {"notebooks/03_surface": 900.0}
    assert execute_book.page_costs("mpnet-base", results) == {"notebooks/03_surface": 100.0}  # none of its own
    monkeypatch.delenv(MODEL_ENV)
    assert execute_book.page_costs(None, results) == {"notebooks/03_surface": 100.0}


def test_a_page_shares_the_cores_only_with_long_company():
    threads = execute_book.threads_for
    # chapters 3 and 5 together: one thread each on two cores
    assert threads("notebooks/05_probe", ["notebooks/03_surface"], jobs=2, cores=2) == 1
    assert threads("notebooks/03_surface", ["notebooks/05_probe"], jobs=2, cores=2) == 1
    # the comparison beside the short chapter 2 (done in seconds), or alone: every core
    assert threads("notebooks/08_compare", ["notebooks/02_attention_maps"], jobs=2, cores=2) is None
    assert threads("notebooks/08_compare", [], jobs=2, cores=2) is None
    assert threads("notebooks/05_probe", ["notebooks/03_surface"], jobs=1, cores=2) is None
    assert threads("notebooks/05_probe", ["notebooks/03_surface"], jobs=2, cores=8) == 4


def test_a_page_is_executed_with_the_seconds_of_each_cell_and_without_their_timestamps(tmp_path):
    """Each cell's seconds and the kernel's peak memory travel beside the page's total (where a page's time
    and memory go, for the build benchmark), and the cached notebook carries no timing metadata (the notebook
    jupyter-book itself would cache). Run in a fresh process, as ``main`` runs each page: the peak is that
    of the processes the caller waited for, which in this test process would include earlier tests'."""
    import nbformat

    path = write_page(tmp_path / "page.ipynb", [
        nbformat.v4.new_markdown_cell("# t"), nbformat.v4.new_code_cell("x = 1"),
        nbformat.v4.new_code_cell("\n# a pause\nimport time; time.sleep(0.6)"),
        nbformat.v4.new_code_cell("# busy\nimport time\nt = time.process_time()\n"
                                  "while time.process_time() - t < 0.5:\n    pass")])
    out = in_fresh_process(
        f"nb, seconds, error, cells, peak, cpu = execute_book._execute({str(path)!r}, 60, False)\n"
        "print(json.dumps({'seconds': seconds, 'error': error, 'cells': cells, 'peak': peak, 'cpu': cpu,\n"
        "                  'timing_left': [c.metadata.get('execution') for c in nb.cells],\n"
        "                  'count': nb.cells[2].execution_count, 'outputs': nb.cells[2].outputs}))")
    assert out["error"] is None and out["seconds"] >= 0.6 and out["count"] == 2 and out["outputs"] == []
    cells = out["cells"]
    assert [c[0] for c in cells] == [1, 2, 3]
    assert cells[1][1] >= 0.6 > cells[0][1]
    assert cells[1][2] == "# a pause"
    assert out["timing_left"] == [None, None, None, None]
    assert 20 * 2 ** 20 < out["peak"] < 2 ** 30  # a bare kernel's resident memory: tens of MiB
    # the kernel's processor time: at least the busy cell's half second, not the pause's (a kernel's start
    # costs about a second of imports)
    assert 0.5 <= out["cpu"] < out["seconds"] + 10


def test_a_kernel_sharing_the_cores_waits_passively_unless_told_otherwise():
    env = execute_book.shared_kernel_environment
    assert env(1, {}) == {"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "OMP_WAIT_POLICY": "PASSIVE"}
    assert env(4, {"OMP_WAIT_POLICY": "ACTIVE"}) == {"OMP_NUM_THREADS": "4", "MKL_NUM_THREADS": "4"}


def test_a_shared_kernel_starts_with_its_threads_and_wait_policy(tmp_path):
    """The settings reach the kernel itself (its process reads them when OpenMP starts), and a page given every
    core keeps the environment it had. In a fresh process: ``_execute`` sets the worker's environment."""
    import os

    import nbformat

    path = write_page(tmp_path / "page.ipynb", [nbformat.v4.new_code_cell(
        "import os, json\nprint(json.dumps({k: os.environ.get(k) for k in ('OMP_NUM_THREADS', 'OMP_WAIT_POLICY')}))")])
    environ = {k: v for k, v in os.environ.items() if k not in ("OMP_NUM_THREADS", "OMP_WAIT_POLICY")}

    def kernel_env(threads):
        return in_fresh_process(f"nb = execute_book._execute({str(path)!r}, 60, False, {threads!r})[0]\n"
                                "print(nb.cells[0].outputs[0]['text'])", env=environ)

    assert kernel_env(1) == {"OMP_NUM_THREADS": "1", "OMP_WAIT_POLICY": "PASSIVE"}
    assert kernel_env(None) == {"OMP_NUM_THREADS": None, "OMP_WAIT_POLICY": None}


def test_the_build_stamp_names_every_setting_a_page_shows():
    """scripts/build_book.sh throws jupyter-book's execution cache away when the build is for another setting
    than the last: every variable that changes what a page shows is in its stamp (the book's model, the small
    configuration, and the comparison's models, which chapter 8 shows)."""
    from helpers import config

    stamp = next(line for line in (ROOT / "scripts" / "build_book.sh").read_text().splitlines()
                 if line.startswith("stamp="))
    for name in (config.MODEL_ENV, config.SMALL_ENV, config.COMPARE_ENV):
        assert "${" + name + ":-" in stamp, name
