"""Execute the book's notebooks two at a time into jupyter-book's execution cache, before ``jupyter-book build``.

    python scripts/execute_book.py [--jobs 2] [--book .]

jupyter-book executes the pages one after another, each in its own kernel; much of a page's time uses
one core (statistics in numpy, kernel start, reading caches), so on a 2-core machine half of it sits
idle. Here the pages run as a schedule of two slots: a page starts once the pages whose cached results it
reads are done (:data:`AFTER`; otherwise it would compute those results itself, twice), the longest
first, a page with long company on its share of the cores (:func:`threads_for`,
:func:`shared_kernel_environment`), and the Performance page, which times things, runs alone. Each page
is executed exactly as jupyter-book's ``cache`` mode executes it (``myst_nb``: the notebook's folder as
working directory, the timeout and ``allow_errors`` of ``_config.yml``) and stored in the same cache
(``_build/.jupyter_cache``), so ``jupyter-book build`` then finds every page executed and only renders.
The step is only an accelerator: a page that fails here is left out of the cache, and
``jupyter-book build`` executes it again and reports its error as usual. Already cached pages are skipped.
"""
from __future__ import annotations

import argparse
import functools
import importlib.util
import os
import sys
import time
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # this tree's helpers, whichever is installed
    sys.path.insert(0, str(ROOT))

COMPARE, GLANCE = "notebooks/08_compare", "notebooks/results_at_a_glance"
# Waits that no record's inputs say. Chapter 5 extracts the GUM and EWT maps (of more sentences) that the syntax
# chapter reads: it goes first, else both pages would extract the same maps at once.
# The ablation chapter's decoder reads the decoder's §3, §4.2 and §4.3 results that the attention-sinks chapter computes
# (its decoder beside the book's encoder, at the same sizes): it waits for that page; so does the minimal-pairs
# chapter, whose decoder reads the same §4.2 and §4.3 results.
SHARED_MAPS: dict[str, tuple[str, ...]] = {"notebooks/04_syntax": ("notebooks/05_probe",),
                                           "notebooks/11_ablation": ("notebooks/09_sinks",),
                                           "notebooks/12_minimal_pairs": ("notebooks/09_sinks",)}


def chapter_page(record) -> str:
    """The page of a section's chapter (``notebooks/03_surface``)."""
    return f"notebooks/{record.chapter}"


def after_pages(sections) -> dict[str, tuple[str, ...]]:
    """page -> the pages whose cached results it reads (run those first), from the section records: each
    section's chapter after the chapters of the sections its record reads (:attr:`~helpers.section.Section.inputs`),
    and after :data:`SHARED_MAPS`. The pages that are no section's: chapter 2 reads no section's results; the
    comparison (``08_compare``) runs every section again for its other models and reads the book model's from
    the chapters, so it waits for every section's chapter (it never runs beside one); "Results at a glance"
    reads the comparison's."""
    pages = {s.key: chapter_page(s) for s in sections}
    out: dict[str, tuple[str, ...]] = {"notebooks/02_attention_maps": ()}
    for s in sections:
        out[pages[s.key]] = tuple(pages[k] for k in s.inputs) + SHARED_MAPS.get(pages[s.key], ())
    out[COMPARE] = tuple(pages.values())
    out[GLANCE] = (COMPARE,)
    return out


def _after() -> dict[str, tuple[str, ...]]:
    from helpers.results import SECTIONS

    return after_pages(SECTIONS)


# page -> the pages whose cached results it reads (run those first). A page not listed here runs after
# every listed page, alone.
AFTER: dict[str, tuple[str, ...]] = _after()
ALONE = ("notebooks/performance",)  # it measures timings: nothing else runs beside it
# A page starting beside pages whose cost adds up to at least this fraction of its own runs on one thread
# (e.g. chapters 3 and 5 together); beside less (the comparison beside the short chapter 2), on every core.
SHARED_FRACTION = 0.5
UNTIMED_COST = 60  # seconds taken for a page that no recorded build timed


@functools.cache
def page_costs(model: str | None = None, results: Path | None = None) -> dict[str, float]:
    """Cold seconds of each page on the 2-core machine, two at a time: the pages of the newest recorded build
    of the book's ``model`` (default ``$BERT_ATTENTION_MODEL``, else ``default``;
    ``benchmarks/results/book_build-MODEL-*.json``, found by the benchmarks' own ``common.recorded``), else of
    the default book, so a new ``book_build.py --record`` updates the schedule; empty when none is recorded.
    The longest ready page starts first: a decoder's pages weigh otherwise than an encoder's (SmolLM2's
    comparison runs a random-init 30 x 9 decoder). ``results``: the recordings' folder (default
    ``benchmarks/results``)."""
    from helpers.config import model_name

    spec = importlib.util.spec_from_file_location("_benchmarks_common", ROOT / "benchmarks" / "common.py")
    common = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(common)
    model = model or model_name() or "default"
    build = common.recorded("book_build", model, results) or common.recorded("book_build", "default", results) or {}
    return dict(build.get("pages", {}))


def cost(page: str) -> float:
    """:func:`page_costs` of ``page``, or :data:`UNTIMED_COST`."""
    return page_costs().get(page, UNTIMED_COST)


def toc_pages(book: Path) -> list[str]:
    """The notebooks of ``_toc.yml`` (paths without suffix, relative to the book), in the table's order."""
    def files(node):
        if isinstance(node, dict):
            if "file" in node:
                yield node["file"]
            for value in node.values():
                yield from files(value)
        elif isinstance(node, list):
            for item in node:
                yield from files(item)

    toc = yaml.safe_load((book / "_toc.yml").read_text())
    return [f for f in files(toc) if (book / f"{f}.ipynb").is_file()]


def execute_settings(book: Path) -> dict:
    """``timeout`` and ``allow_errors`` from ``_config.yml`` (jupyter-book's defaults where unset)."""
    execute = (yaml.safe_load((book / "_config.yml").read_text()) or {}).get("execute") or {}
    return {"timeout": execute.get("timeout", 30), "allow_errors": bool(execute.get("allow_errors", False)),
            "cache": execute.get("cache") or str(book / "_build" / ".jupyter_cache"),
            "mode": execute.get("execute_notebooks", "auto")}


def shared_kernel_environment(threads: int, environ) -> dict[str, str]:
    """The environment variables of a kernel started with ``threads`` intra-op threads beside other pages.

    Besides the thread counts, OpenMP's wait policy ``PASSIVE`` (unless ``environ`` sets one): a thread that
    reaches a barrier sleeps instead of spinning. The §3 page fits its masked-LM head and runs its gradient pass
    on :data:`helpers.core.threads.FIXED_THREADS` threads whatever the page's count (the same sums on every
    machine), so beside chapter 5 its kernel has more threads than its share of the cores, and a spinning thread
    burns the core the other page needs. Measured on the 2-core machine, §3 and §5 side by side on one thread
    each (``benchmarks/book_phases.py``): §3 405 -> 310 s (gradient pass 152 -> 88 s, masked-LM head 116 -> 89 s),
    §5 424 -> 369 s (its trainings 211 -> 163 s). The policy changes when a waiting thread sleeps, not how work
    is split between threads, so no result moves. A kernel with every core (alone) keeps the default, which
    was about 10 % faster there."""
    env = {"OMP_NUM_THREADS": str(threads), "MKL_NUM_THREADS": str(threads)}
    if not environ.get("OMP_WAIT_POLICY"):
        env["OMP_WAIT_POLICY"] = "PASSIVE"
    return env


def _execute(path: str, timeout, allow_errors: bool, threads: int | None = None):
    """One notebook executed as myst_nb's cache mode does; returns ``(notebook, seconds, error text, cells,
    peak, cpu)``: ``cells`` from :func:`cell_seconds`, ``peak`` the largest resident memory in bytes of the
    processes this call waited for (the kernel and the processes it waited for; run each page in a fresh
    worker process, as :func:`main` does, for the page's own peak) and ``cpu`` their processor seconds (user +
    system; above ``seconds`` where the page used several cores). ``threads``: the kernel's intra-op threads
    (torch, BLAS), when set."""
    import os
    import resource

    import nbformat

    if threads:  # this worker runs this one page (a fresh worker per page): its environment is the kernel's
        os.environ.update(shared_kernel_environment(threads, os.environ))
    from jupyter_cache.executors.utils import single_nb_execution

    notebook = nbformat.read(path, as_version=4)
    result = single_nb_execution(notebook, cwd=str(Path(path).parent.resolve()), allow_errors=allow_errors,
                                 timeout=timeout, meta_override=True, record_timing=True)
    cells = cell_seconds(notebook)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    peak = children.ru_maxrss * 1024  # KiB on Linux
    cpu = round(children.ru_utime + children.ru_stime, 1)
    error = None if result.err is None else result.exc_string or repr(result.err)
    return notebook, result.time, error, cells, peak, cpu


def cell_seconds(notebook) -> list[list]:
    """``[[cell index, seconds, first line of its source], ...]`` for each executed code cell, read from the
    timing nbclient records (``record_timing``) and then removed from the cells, so that the cached notebook
    is the one jupyter-book itself would cache. Where a page's time goes, kept beside its total."""
    from datetime import datetime

    out = []
    for index, cell in enumerate(notebook.cells):
        timing = cell.get("metadata", {}).pop("execution", None)
        if cell.cell_type != "code" or not timing:
            continue
        begin = timing.get("iopub.execute_input") or timing.get("shell.execute_reply.started")
        end = timing.get("shell.execute_reply")
        if not (begin and end):
            continue
        seconds = (datetime.fromisoformat(end.replace("Z", "+00:00"))
                   - datetime.fromisoformat(begin.replace("Z", "+00:00"))).total_seconds()
        first = next((line.strip() for line in cell.source.splitlines() if line.strip()), "")
        out.append([index, round(seconds, 2), first[:80]])
    return out


def schedule(pages: list[str], done: set[str]) -> list[list[str]]:
    """Not used to run; the order in which pages become ready (for ``--dry-run``): lists of pages that may run
    together."""
    waves, finished = [], set(done)
    remaining = [p for p in pages if p not in done]
    while remaining:
        ready = [p for p in remaining if ready_after(p, pages, finished)]
        if not ready:
            ready = remaining[:1]
        waves.append(sorted(ready, key=lambda p: -cost(p)))
        finished.update(ready)
        remaining = [p for p in remaining if p not in finished]
    return waves


def threads_for(page: str, company: list[str], *, jobs: int, cores: int) -> int | None:
    """The kernel threads of ``page`` started beside the running and ready pages ``company``: its share of the
    cores when they cost at least :data:`SHARED_FRACTION` of its own time (threads of two kernels waiting on
    each other at every operation are slower than one thread each), else ``None`` (every core: alone, or
    beside a short page)."""
    shared = jobs > 1 and sum(cost(p) for p in company) >= SHARED_FRACTION * cost(page)
    return max(1, cores // jobs) if shared else None


def ready_after(page: str, pages: list[str], finished: set[str]) -> bool:
    """True when every page that ``page`` reads from (among ``pages``) is finished."""
    needs = AFTER.get(page)
    if needs is None:  # unknown or alone: after every other page
        needs = tuple(p for p in pages if p != page and (p in AFTER or (page not in ALONE and p in ALONE)))
    return all(p in finished or p not in pages for p in needs)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--book", default=".", help="the book's folder (with _config.yml and _toc.yml)")
    parser.add_argument("--jobs", type=int, default=2, help="pages executed at a time (default 2: the machine's cores)")
    parser.add_argument("--dry-run", action="store_true", help="print the order and exit")
    args = parser.parse_args(argv)
    if args.jobs < 1:
        parser.error(f"--jobs {args.jobs}: at least 1 page at a time")
    book = Path(args.book).resolve()
    missing = [name for name in ("_config.yml", "_toc.yml") if not (book / name).is_file()]
    if missing:
        parser.error(f"--book {args.book}: no {' or '.join(missing)} there (the folder of the book's _config.yml)")
    settings = execute_settings(book)
    if settings["mode"] != "cache":
        print(f"execute_book: _config.yml executes in mode {settings['mode']!r}, not 'cache': nothing to do")
        return 0
    import nbformat
    from jupyter_cache import get_cache
    from jupyter_cache.base import CacheBundleIn

    cache_path = Path(settings["cache"])
    cache = get_cache(cache_path if cache_path.is_absolute() else book / cache_path)
    pages = toc_pages(book)
    done = set()
    for page in pages:
        try:
            cache.match_cache_notebook(nbformat.read(book / f"{page}.ipynb", as_version=4))
            done.add(page)
        except KeyError:
            pass
    if args.dry_run:
        for wave in schedule(pages, done):
            print(" | ".join(wave))
        return 0
    todo = [p for p in pages if p not in done]
    print(f"execute_book: {len(todo)} of {len(pages)} pages to execute, {args.jobs} at a time", flush=True)
    start, failed = time.perf_counter(), []
    cores = len(os.sched_getaffinity(0))
    finished = set(done)
    running: dict = {}
    # a fresh worker process for each page (spawned): its waited-for children are that page's kernel alone
    with ProcessPoolExecutor(max_workers=max(1, args.jobs), max_tasks_per_child=1) as pool:
        def submit(page: str, threads: int | None = None) -> None:
            todo.remove(page)
            running[pool.submit(_execute, str(book / f"{page}.ipynb"), settings["timeout"], settings["allow_errors"],
                                threads)] = page

        while todo or running:
            alone = any(p in ALONE for p in running.values())
            ready = sorted((p for p in todo if ready_after(p, pages, finished)), key=lambda p: -cost(p))
            while ready and len(running) < args.jobs and not alone:
                page = ready.pop(0)
                if page in ALONE and running:
                    break  # wait until the others finish
                threads = threads_for(page, [*running.values(), *ready], jobs=args.jobs, cores=cores)
                submit(page, threads)
                print(f"  start {page} ({time.perf_counter() - start:.0f} s{f', {threads} thread(s)' if threads else ''})",
                      flush=True)
                alone = page in ALONE
            if not running:  # nothing ready (a cycle or a failed dependency): run the next page anyway
                submit(todo[0])
                continue
            complete, _ = wait(running, return_when=FIRST_COMPLETED)
            for future in complete:
                page = running.pop(future)
                finished.add(page)
                try:
                    notebook, seconds, error, cells, peak, cpu = future.result()
                except Exception as exc:  # the executor itself failed: leave the page to jupyter-book
                    notebook, seconds, error, cells, peak, cpu = None, 0.0, repr(exc), [], 0, 0.0
                if error is not None:
                    failed.append(page)
                    print(f"  FAILED {page}: left to jupyter-book build, which reports the error\n{error[-2000:]}",
                          file=sys.stderr, flush=True)
                    continue
                record = cache.add_nb_to_project(str(book / f"{page}.ipynb"))
                cache.cache_notebook_bundle(CacheBundleIn(notebook, record.uri,
                                                          data={"execution_seconds": seconds, "cell_seconds": cells,
                                                                "peak_rss_bytes": peak, "cpu_seconds": cpu}),
                                            check_validity=False, overwrite=True)
                slowest = ", ".join(f"cell {i} {t:.0f} s" for i, t, _ in sorted(cells, key=lambda c: -c[1])[:3])
                print(f"  done  {page} in {seconds:.0f} s ({cpu:.0f} processor s), {peak / 2 ** 30:.2f} GiB "
                      f"({time.perf_counter() - start:.0f} s; "
                      f"slowest: {slowest})", flush=True)
    print(f"execute_book: {time.perf_counter() - start:.0f} s; {len(failed)} failed"
          + (f" ({', '.join(failed)})" if failed else ""), flush=True)
    return 0  # failures are reported by jupyter-book build, which executes those pages again


if __name__ == "__main__":
    sys.exit(main())
