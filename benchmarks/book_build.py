"""Benchmark: a cold build of the whole book against its compute floor, and a rebuild with nothing changed.

    python benchmarks/book_build.py [--model SPEC] [--small] [--jobs N] [--no-extras] [--record] [--keep DIR] [--no-floor]
                                    [--out FILE]

1. The floor (``benchmarks/book_floor.py`` in a process of its own, same model and configuration): the bare
   forward and backward passes over exactly the inputs the build reads.
2. A cold build: the book's sources (``_config.yml``, ``_toc.yml``, ``book/``, ``notebooks/``, ``benchmarks/``)
   copied to a fresh folder, built there as ``scripts/build_book.sh`` builds (``scripts/execute_book.py --jobs N``
   executes the pages N at a time into jupyter-book's cache, then ``jupyter-book build -W -n --keep-going``
   renders them; ``--jobs 1`` leaves the execution to jupyter-book, one page after another) into a fresh
   ``_build`` and an empty analysis cache (``BERT_ATTENTION_CACHE``; installed extras such as
   ``mpnet-base`` are linked in, they are installed models, not results). Its peak resident memory is
   the largest of the build's processes (``os.wait4`` of the build: the maximum over it and every
   process it waited for, the chapters' kernels and the comparison's per-model processes included); each
   page's execution time is read from jupyter-book's execution cache, and the analysis cache's size on disk
   by kind (``helpers.data.cache.cache_usage``: maps, spilled probe batches, results) after the build and at its
   peak during the build (:class:`common.CachePeak`: sampled every 1.5 s while the build runs; each kind's
   largest value, and the sample with the largest total).
3. A rebuild of the same folder with nothing changed.

Writes JSON with the per-page times (and each page's slowest cells and peak memory), the totals, the peak, the
floor and the ratio total / floor, and what scheduling alone could reach (:func:`helpers.plan.work_bounds`: the build's
processor time spread over the cores, against the floor);
``--record`` keeps it dated in ``benchmarks/results/`` for the Performance page. With
``BERT_ATTENTION_DEVICE=cuda`` in the environment the floor and every page load their models on the GPU
(the JSON's ``device``; the machine's GPU is in ``recorded.machine``), for the GPU times beside the CPU ones.
"""
from __future__ import annotations

import argparse
import json
import os
import shlex
import shutil
import sys
import tempfile
from pathlib import Path

from common import LATEST, CachePeak, device_record, machine, measure, run_device, save

ROOT = Path(__file__).resolve().parents[1]
SOURCES = ("_config.yml", "_toc.yml", "book", "notebooks", "benchmarks")
GIB = 2 ** 30


def run(argv: list[str], env: dict, log: Path) -> dict:
    """:func:`common.measure` of ``argv`` with its output in ``log``; the peak in GiB, and ``cpu_busy``: its
    processor time over its wall time times the cores it may use (1.0: every core busy throughout)."""
    done = measure(argv, env, log=log)
    cores = len(os.sched_getaffinity(0))
    return {"seconds": done["seconds"], "exit_status": done["exit_status"],
            "peak_rss_gib": round(done["peak_rss_bytes"] / GIB, 2), "cpu_seconds": done["cpu_seconds"],
            "cpu_busy": round(done["cpu_seconds"] / (max(done["seconds"], 1e-9) * cores), 2)}


SLOWEST_CELLS = 5  # kept per page in the JSON


def page_times(src: Path) -> tuple[dict[str, float], dict[str, list], dict[str, float], dict[str, float]]:
    """From jupyter-book's execution cache (jupyter-cache): the execution seconds of each executed page and,
    where ``execute_book.py`` recorded them (not for pages jupyter-book executed itself), each page's slowest
    cells, ``[[cell index, seconds, first line], ...]``, the peak resident memory of its kernel in GiB and
    the processor seconds of its kernel and the processes it waited for (above its seconds: several cores)."""
    from jupyter_cache import get_cache

    cache = get_cache(src / "_build" / ".jupyter_cache")
    pages, cells, peaks, cpu = {}, {}, {}, {}
    for record in cache.list_cache_records():
        page = Path(record.uri).relative_to(src).with_suffix("").as_posix()
        data = record.data or {}
        pages[page] = round(float(data.get("execution_seconds") or 0.0), 1)
        if data.get("cell_seconds"):
            cells[page] = sorted(data["cell_seconds"], key=lambda c: -c[1])[:SLOWEST_CELLS]
        if data.get("peak_rss_bytes"):
            peaks[page] = round(data["peak_rss_bytes"] / GIB, 2)
        if data.get("cpu_seconds") is not None:
            cpu[page] = round(float(data["cpu_seconds"]), 1)
    return tuple(dict(sorted(d.items())) for d in (pages, cells, peaks, cpu))


def copy_sources(src: Path) -> None:
    for name in SOURCES:
        path = ROOT / name
        if path.is_dir():
            shutil.copytree(path, src / name, ignore=shutil.ignore_patterns(".ipynb_checkpoints", "_build", "latest",
                                                                              "__pycache__"))
        else:
            shutil.copy(path, src / name)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default=os.environ.get("BERT_ATTENTION_MODEL") or None,
                        help="the book's model (default: $BERT_ATTENTION_MODEL, else the offline default)")
    parser.add_argument("--small", action="store_true", help="the tests' small configuration (BERT_ATTENTION_SMALL=1)")
    parser.add_argument("--keep", default=None, metavar="DIR", help="build in DIR and keep it (default: a temporary folder)")
    parser.add_argument("--no-floor", action="store_true", help="skip the floor (no ratio)")
    parser.add_argument("--no-extras", action="store_true",
                        help="leave the installed optional models (install-model) out, as on a fresh clone: the "
                             "comparison then runs the default model and its random-init control only")
    parser.add_argument("--jobs", type=int, default=2, help="pages executed at a time (default 2, as build_book.sh)")
    parser.add_argument("--record", action="store_true", help="keep a dated recorded measurement in benchmarks/results/")
    parser.add_argument("--out", default=str(LATEST / "book_build.json"))
    args = parser.parse_args()
    started = machine()
    spec = args.model or "default"

    env = {**os.environ, "HF_HUB_OFFLINE": "1", "BOOK_ASSETS_DIR": str(ROOT / ".book_assets"),
           "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    env.pop("BERT_ATTENTION_MODEL", None)
    if args.model and args.model != "default":
        env["BERT_ATTENTION_MODEL"] = args.model
    env["BERT_ATTENTION_SMALL"] = "1" if args.small else "0"
    env.pop("BERT_ATTENTION_REFRESH", None)

    work = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="book-build-"))
    if work.exists() and any(work.iterdir()):
        raise SystemExit(f"--keep {work}: must be a new or empty folder (the build must be cold)")
    src, cache = work / "book", work / "cache"
    src.mkdir(parents=True)
    cache.mkdir()
    copy_sources(src)
    from helpers.config import cache_dir
    from helpers.data.cache import cache_usage
    from helpers.plan import work_bounds

    extras = cache_dir() / "models"  # installed optional models (install-model): not results
    if extras.is_dir() and not args.no_extras:
        os.symlink(extras, cache / "models")
    env["BERT_ATTENTION_CACHE"] = str(cache)

    floor = None
    if not args.no_floor:
        print("measuring the floor (benchmarks/book_floor.py) ...", flush=True)
        out = work / "floor.json"
        done = run([sys.executable, str(ROOT / "benchmarks" / "book_floor.py"), *(["--model", spec] if args.model else []),
                    *(["--small"] if args.small else []), "--out", str(out)], env, work / "floor.log")
        if done["exit_status"] != 0:
            raise SystemExit(f"the floor failed: see {work / 'floor.log'}")
        floor = json.loads(out.read_text())
        print(f"floor: {floor['seconds_floor']:.1f} s", flush=True)

    jb = Path(sys.executable).with_name("jupyter-book")
    if not jb.exists():  # jupyter-book installed outside the interpreter's folder (pip --target, a user install)
        jb = Path(shutil.which("jupyter-book") or jb)
    argv = [str(jb), "build", str(src), "-W", "-n", "--keep-going"]
    execute = [sys.executable, str(ROOT / "scripts" / "execute_book.py"), "--book", str(src), "--jobs", str(args.jobs)]
    print(f"cold build of {spec} in {src} ({args.jobs} page(s) at a time) ...", flush=True)
    with CachePeak(cache) as peak:  # the analysis cache's bytes by kind, sampled while the build runs
        cold = run(["bash", "-c", f"{shlex.join(execute)} && {shlex.join(argv)}"] if args.jobs > 1 else argv, env,
                   work / "build.log")
    if cold["exit_status"] != 0:
        raise SystemExit(f"the build failed (exit {cold['exit_status']}): see {work / 'build.log'}")
    pages, cells, peaks, page_cpu = page_times(src)
    disk = cache_usage(cache)  # what the cold build left in its analysis cache (the linked extras not counted)
    print(f"cold build: {cold['seconds']:.0f} s (pages executed: {sum(pages.values()):.0f} s), "
          f"largest process {cold['peak_rss_gib']:.2f} GiB, processor time {cold['cpu_seconds']:.0f} s "
          f"({cold['cpu_busy']:.0%} of the cores' time)", flush=True)
    print(f"analysis cache on disk: {disk['total'] / 1e9:.1f} GB (maps {disk['maps'] / 1e9:.1f} GB, spilled probe "
          f"batches {disk['probe_batches'] / 1e9:.1f} GB, results {disk['results'] / 1e9:.2f} GB); at its peak during "
          f"the build {peak.peak['total'] / 1e9:.1f} GB (maps {peak.peak['maps'] / 1e9:.1f} GB, spilled probe batches "
          f"{peak.peak['probe_batches'] / 1e9:.1f} GB; {peak.samples} samples)", flush=True)
    for page, seconds in pages.items():
        slowest = "; ".join(f"{t:.0f} s {line}" for _, t, line in cells.get(page, [])[:2])
        print(f"  {page:36s} {seconds:8.1f} s {page_cpu.get(page, float('nan')):8.1f} cpu-s "
              f"{peaks.get(page, float('nan')):5.2f} GiB   {slowest}")
    rebuild = run(argv, env, work / "rebuild.log")
    print(f"rebuild with nothing changed: {rebuild['seconds']:.1f} s", flush=True)

    result = {"model": spec, "small": args.small, "device": run_device(), "jobs": args.jobs,
              "extras": not args.no_extras and extras.is_dir(),
              "pages": pages, "slowest_cells": cells, "page_peak_rss_gib": peaks,
              "seconds_pages": round(sum(pages.values()), 1),
              "seconds_cold_build": cold["seconds"], "peak_rss_gib": cold["peak_rss_gib"],
              "cpu_seconds_cold_build": cold["cpu_seconds"], "cpu_busy_cold_build": cold["cpu_busy"],
              "page_cpu_seconds": page_cpu,
              "cache_bytes_cold_build": disk,
              "cache_peak_bytes_cold_build": peak.peak, "cache_peak_total_sample_cold_build": peak.peak_total_sample,
              "cache_samples_cold_build": peak.samples, "cache_sample_seconds": peak.every,
              "seconds_rebuild": rebuild["seconds"], "rebuild_exit_status": rebuild["exit_status"],
              "seconds_floor": floor["seconds_floor"] if floor else None, "floor": floor,
              "ratio_build_over_floor": round(cold["seconds"] / floor["seconds_floor"], 2) if floor else None,
              **work_bounds(cold["cpu_seconds"], floor, len(os.sched_getaffinity(0))),
              "build_folder": str(work) if args.keep else None}
    if floor:
        print(f"ratio cold build / floor: {result['ratio_build_over_floor']:.2f}; the build's processor time spread "
              f"over the {result['cores']} cores: {result['seconds_packed']:.0f} s, {result['ratio_packed_over_floor']:.2f} x "
              f"the floor (no schedule of this work is faster)"
              + (f"; processor time / the floor's: {result['ratio_cpu_over_floor_cpu']:.2f}"
                 if result.get("ratio_cpu_over_floor_cpu") else ""))
    save(result, args.out, record=device_record("book_build") if args.record else None, model=spec, started=started)
    if not args.keep:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
