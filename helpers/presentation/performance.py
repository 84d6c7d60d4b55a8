"""The Performance page's tables: the benchmark scripts run at the page's sizes, their dated recordings read
(``benchmarks/``: scripts, not a package), and each table built from what they wrote.

>>> builds = {"default": recorded("book_build", "default")}          # doctest: +SKIP
>>> table(page_table(builds), name="tbl-performance-pages", caption="...")  # doctest: +SKIP
"""
from __future__ import annotations

import functools
import importlib.util
import json
import subprocess
import sys
import tempfile
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING

from helpers.config import PROJECT_ROOT
from helpers.plan import work_bounds

if TYPE_CHECKING:  # annotations only: importing this module stays cheap
    import pandas as pd

BENCHMARKS = PROJECT_ROOT / "benchmarks"  # the benchmark scripts, beside the package in the repository


@functools.cache
def benchmarks_common() -> ModuleType:
    """``benchmarks/common.py``, loaded from its path as ``scripts/execute_book.py`` loads it (its ``recorded``
    and ``recorded_note`` read the dated recordings in ``benchmarks/results/``). The folder is never put on
    ``sys.path``: its ``distributed.py`` would shadow Dask's ``distributed``."""
    path = BENCHMARKS / "common.py"
    if not path.is_file():
        raise FileNotFoundError(f"{path}: the benchmarks are not here; the Performance page runs in a clone of "
                                "the repository, beside its benchmarks/ folder")
    spec = importlib.util.spec_from_file_location("_benchmarks_common", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def recorded(name: str, model: str | None = None) -> dict | None:
    """The newest recorded measurement ``name`` of ``model`` (``benchmarks/common.py``'s ``recorded``), or ``None``."""
    return benchmarks_common().recorded(name, model)


def recorded_note(data: dict | None) -> str:
    """When, where and how a recorded measurement was taken (``benchmarks/common.py``'s ``recorded_note``)."""
    return benchmarks_common().recorded_note(data)


# The environment the page's benchmarks run in, over the kernel's: OpenMP's passive wait policy, a thread that waits for
# another sleeps instead of spinning. The page runs alone in a build, but a machine may be shared with other work: there
# the spinning of two torch threads waiting for each other burnt most of the page's processor time (extraction.py at
# 100 sentences beside other work on the 2-core machine, load average 7: 42 processor s spinning, 15 passive, 14 on
# one thread; its ratio to the bare forward pass 2.2 spinning, 1.05 passive). Alone it costs a little wall time.
BENCHMARK_ENVIRONMENT = {"OMP_WAIT_POLICY": "PASSIVE"}
# How a benchmark is started: the child sets those variables in its own environment before anything loads OpenMP,
# then runs the script as ``python SCRIPT ARGS`` would (its folder first on ``sys.path``); this process passes its own
# environment on unread.
LAUNCH = ("import os, runpy, sys; os.environ.update({!r}); sys.argv = sys.argv[1:]; "
          "sys.path.insert(0, os.path.dirname(os.path.abspath(sys.argv[0]))); runpy.run_path(sys.argv[0], run_name='__main__')")


def run_benchmark(script: str, *args: str) -> dict:
    """Run ``benchmarks/SCRIPT.py ARGS`` in a process of its own (this interpreter, with
    :data:`BENCHMARK_ENVIRONMENT`) and return the JSON it writes (to a temporary ``--out`` file, removed after). A
    failing script raises with the end of its standard error."""
    with tempfile.TemporaryDirectory(prefix=f"{script}-") as folder:
        out = Path(folder) / f"{script}.json"
        done = subprocess.run([sys.executable, "-c", LAUNCH.format(BENCHMARK_ENVIRONMENT), str(BENCHMARKS / f"{script}.py"),
                               *args, "--out", str(out)], capture_output=True, text=True)
        if done.returncode != 0:
            tail = "\n".join(done.stderr.strip().splitlines()[-5:])
            raise RuntimeError(f"benchmarks/{script}.py {' '.join(args)} failed (exit {done.returncode}); run it "
                               f"yourself to see why:\n{tail}")
        return json.loads(out.read_text())


# ------------------------------------------------------------------------- recorded builds


def packed_over_floor(build: dict) -> float | None:
    """A recorded build's processor time spread over the machine's cores, over the floor: the ratio no schedule
    of the same work reaches below (recorded since 2026-11-25 as ``ratio_packed_over_floor``; computed with
    :func:`helpers.plan.work_bounds` from the recorded processor time and cores for builds before). ``None``
    when the recording lacks either."""
    if build.get("ratio_packed_over_floor") is not None:
        return build["ratio_packed_over_floor"]
    cores = build.get("recorded", {}).get("machine", {}).get("cores")
    if not (build.get("cpu_seconds_cold_build") and build.get("seconds_floor") and cores):
        return None
    return work_bounds(build["cpu_seconds_cold_build"], build, cores)["ratio_packed_over_floor"]


def build_table(builds: dict[str, dict | None]) -> "pd.DataFrame":
    """One row per model of ``builds`` (model -> its recorded ``book_build`` or ``None``): the cold build and its
    floor in minutes, their ratio, :func:`packed_over_floor`, the pages at a time, the rebuild with nothing
    changed, the largest process, the analysis cache left on disk and at its peak during the build, how busy
    the cores were, and when and where
    it was recorded (fields a recording lacks are empty)."""
    import pandas as pd

    return pd.DataFrame([{
        "model": spec, "cold build (min)": round(b["seconds_cold_build"] / 60, 1) if b else None,
        "floor (min)": round(b["seconds_floor"] / 60, 1) if b and b.get("seconds_floor") else None,
        "build / floor": b.get("ratio_build_over_floor") if b else None,
        "processor time / cores / floor": packed_over_floor(b) if b else None,
        "pages at a time": b.get("jobs", 1) if b else None,
        "rebuild, nothing changed (s)": b["seconds_rebuild"] if b else None,
        "largest process (GiB)": b["peak_rss_gib"] if b else None,
        "analysis cache (GB)": round(b["cache_bytes_cold_build"]["total"] / 1e9, 1)
        if b and b.get("cache_bytes_cold_build") else None,  # on disk after the cold build (recorded since 2026-11-24)
        "analysis cache at its peak (GB)": round(b["cache_peak_bytes_cold_build"]["total"] / 1e9, 1)
        if b and b.get("cache_peak_bytes_cold_build") else None,  # sampled during the build (since 2026-11-27)
        "cores busy": f"{b['cpu_busy_cold_build']:.0%}" if b and b.get("cpu_busy_cold_build") is not None else None,
        "measurement": recorded_note(b),
    } for spec, b in builds.items()]).set_index("model")


def page_rows(spec: str, build: dict) -> list[dict]:
    """One row per page of a recorded cold build of model ``spec``: its seconds, its share of the build, its
    processor seconds (above its seconds where it used both cores), its kernel's peak memory and its slowest
    cell (where recorded: builds through scripts/execute_book.py since 2026-11-24)."""
    slowest = {page: cells[0] for page, cells in build.get("slowest_cells", {}).items()}
    return [{
        "model": spec, "page": page, "seconds": seconds,
        "share of the build": f"{seconds / build['seconds_cold_build']:.0%}",
        "processor s": build.get("page_cpu_seconds", {}).get(page),
        "peak (GiB)": build.get("page_peak_rss_gib", {}).get(page),
        "slowest cell": f"{slowest[page][1]:.0f} s: {slowest[page][2]}" if page in slowest else None,
    } for page, seconds in build["pages"].items()]


def page_table(builds: dict[str, dict | None]) -> "pd.DataFrame":
    """:func:`page_rows` of every recorded build of ``builds``, indexed by model and page, without the columns no
    recording has (a table with an empty ``seconds`` column when none is recorded)."""
    import pandas as pd

    if not any(builds.values()):
        return pd.DataFrame({"seconds": []})
    frames = [pd.DataFrame(page_rows(spec, b)) for spec, b in builds.items() if b]  # each build's columns typed alone
    return pd.concat(frames).set_index(["model", "page"]).dropna(axis=1, how="all")


def slowest_page(build: dict | None) -> str:
    """The page of a recorded build that took longest (the first of equals), or "not recorded yet"."""
    return max(build["pages"], key=build["pages"].get) if build else "not recorded yet"


# ------------------------------------------------------------------------- recorded phases and memory


def phase_rows(spec: str, phases: dict) -> list[dict]:
    """One row per page of a recorded ``book_phases.py`` run of model ``spec`` (its seconds and the floor of its
    bare passes), then one per phase inside it (inclusive seconds, a phase inside another marked "."), with
    its share of the page."""
    rows = []
    for page, total in phases["pages"].items():
        floor = (phases.get("floor") or {}).get(page)
        rows.append({"model": spec, "page": page, "phase": "the page's first cell", "seconds": total,
                     "share of the page": "100%", "floor of its passes (s)": floor})
        rows += [{"model": spec, "page": page, "phase": label.split(": ", 1)[1], "seconds": seconds,
                  "share of the page": f"{seconds / total:.0%}"}
                 for label, seconds in phases["phases"].items() if label.startswith(page + ": ")]
    return rows


def phase_table(phases: dict[str, dict | None]) -> "pd.DataFrame":
    """:func:`phase_rows` of every recorded run of ``phases`` (model -> its recorded ``book_phases`` or
    ``None``), indexed by model, page and phase (one row saying so when none is recorded)."""
    import pandas as pd

    rows = [row for spec, p in phases.items() if p for row in phase_rows(spec, p)]
    if not rows:
        return pd.DataFrame({"measurement": [recorded_note(None)]})
    return pd.DataFrame(rows).set_index(["model", "page", "phase"])


def memory_table(memory: dict[str, dict | None]) -> "pd.DataFrame":
    """One row per command of every recorded ``memory`` run of ``memory`` (model -> recording or ``None``): its
    peak, that over the floor process's, its seconds, the budget and whether it kept within it (one row
    saying so when none is recorded)."""
    import pandas as pd

    rows = [{"model": r["model"], "command": r["command"], "peak (GiB)": r["peak_rss_gib"], "× floor": r["ratio_to_floor"],
             "seconds": r["seconds"], "budget (GB)": r["budget_gb"], "within budget": "yes" if r["within_budget"] else "NO"}
            for m in memory.values() if m for r in m["rows"]]
    if not rows:
        return pd.DataFrame({"measurement": [recorded_note(None)]})
    return pd.DataFrame(rows).set_index(["model", "command"])


# ------------------------------------------------------------------------- measured in this build

PROBES = {"Distances + words": "distances+words", "Attn": "attn", "Attn + words": "attn+words"}  # row: the JSON's key


def probe_epoch_table(probes: dict) -> "pd.DataFrame":
    """One row per probe of ``benchmarks/probes.py``'s result: an epoch's seconds, that over making its batches
    alone, the same network in plain autograd and the speed-up over it (where measured), the forward passes alone
    and training over forward."""
    import pandas as pd

    rows = []
    for name, key in PROBES.items():
        r = probes[key]
        rows.append({"probe": name, "epoch (s)": r["seconds_epoch"], "epoch / making the batches": r["ratio_epoch_over_batches"],
                     "plain autograd (s)": r.get("seconds_epoch_plain_autograd"), "speed-up": r.get("speedup_over_plain"),
                     "forward only (s)": r["seconds_forward_only"], "training / forward": r["ratio_training_over_forward"]})
    return pd.DataFrame(rows).set_index("probe")


# ------------------------------------------------------------------------- recorded: the probes against the naive loop

PROBES_NAIVE_COMMAND = "python benchmarks/probes.py --skip-formulations --threads 1 --record"  # how it is recorded


def probe_naive_record(results: Path | None = None) -> dict | None:
    """The newest recorded ``benchmarks/probes.py`` run on the CPU with its trainings against the naive per-sentence
    loop (its ``device`` part, which the build does not run: ``--skip-naive``), of any shape, or ``None``."""
    return benchmarks_common().recorded("probes", None, results, having="device")


def probe_naive_note(record: dict | None) -> str:
    """What a :func:`probe_naive_record` measured and when, where and how it was recorded, in one sentence; when
    there is none, a sentence saying how to record one."""
    if not record or not record.get("device"):
        return f"not recorded yet: run `{PROBES_NAIVE_COMMAND}` and commit the file it writes in benchmarks/results/"
    threads = record.get("threads")
    return (f"{record.get('sentences'):,} sentences with the lengths of {record.get('corpus')}, {record.get('maps')} maps, "
            f"on {record['device'].get('name', 'cpu')}" + (f" with {threads} thread{'' if threads == 1 else 's'}"
                                                           if threads else "")
            + f", best of two epochs each, {recorded_note(record)}")


def probe_naive_table(record: dict | None) -> "pd.DataFrame":
    """One row per probe of a :func:`probe_naive_record`: the processor seconds of the batched training epoch, of the
    same epoch as a naive per-sentence loop and of the bare forward pass, batched over naive and over forward, the
    wall seconds of the batched and the naive epoch, and the peak memory (MiB; on the CPU the process's peak so far).
    Processor seconds, because a recording on a shared machine waits for a core: with one thread they are the
    epoch's work. One row saying how to record it when there is none."""
    import pandas as pd

    if not record or not record.get("device"):
        return pd.DataFrame({"measurement": [probe_naive_note(None)]})
    rows = []
    for name, key in PROBES.items():
        r = record["device"].get(key)
        if r is None:
            continue
        cpu = {how: r[how]["cpu_seconds"] for how in ("batched", "naive", "forward")}
        rows.append({"probe": name, "batched epoch (processor s)": cpu["batched"],
                     "naive per-sentence loop (processor s)": cpu["naive"], "forward only (processor s)": cpu["forward"],
                     "batched / naive": round(cpu["batched"] / cpu["naive"], 2),
                     "batched / forward": round(cpu["batched"] / cpu["forward"], 2),
                     "wall, batched / naive (s)": f"{r['batched']['seconds']:.2f} / {r['naive']['seconds']:.2f}",
                     "peak (MiB)": round(max(r[how]["peak_mib"] for how in ("batched", "naive", "forward")))})
    return pd.DataFrame(rows).set_index("probe")


# ------------------------------------------------------------------------- recorded claims on a device

DEVICE_SECTIONS = ("load", "segment_pass", "surface", "syntax", "coref", "probe", "cluster")  # columns, in run order


def device_records(results: Path | None = None) -> list[dict]:
    """Every ``claims_device-*.json`` recording (``benchmarks/claims_device.py``) in ``results`` (default
    ``benchmarks/results/``) that parses and names its device; for each device and kind of run (model, random init,
    the book's sizes or not), only the latest by the date and time it records (the file name breaks ties)."""
    latest: dict[tuple, tuple] = {}
    for path in sorted((BENCHMARKS / "results" if results is None else Path(results)).glob("claims_device-*.json")):
        try:
            data = json.loads(path.read_text())
        except (OSError, ValueError):
            continue
        if not isinstance(data, dict) or not data.get("device"):
            continue
        when = data.get("recorded") or {}
        order = (when.get("date", ""), when.get("time", ""), path.name)
        key = (data["device"], data.get("model"), data.get("random_init"), bool(data.get("full_sizes")))
        if key not in latest or order > latest[key][0]:
            latest[key] = (order, data)
    return [data for _, data in sorted(latest.values(), key=lambda v: (v[1]["device"], v[0]))]


def _verdicts(equal) -> str:
    return {True: "equal", False: "DIFFER"}.get(equal, "not compared")


def device_table(results: Path | None = None) -> "pd.DataFrame":
    """The latest ``claims`` recording of each device (:func:`device_records`): the device, the model (its shape and
    random init), the sizes, the wall time, the seconds of the load, the shared segment pass and each section,
    processor seconds, the GPU's peak memory and mean utilisation, whether the verdicts equal a CPU run's of the same
    commit, the commit and the date. One row saying so when nothing is recorded."""
    import pandas as pd

    records = device_records(results)
    if not records:
        return pd.DataFrame({"measurement": ["no device recording yet: run benchmarks/device_run.sh on a GPU machine "
                                             "(benchmarks/README.md)"]})
    rows = []
    for r in records:
        sections = r.get("sections_s") or {}
        init = f", random init ({r['random_init']})" if r.get("random_init") else ""
        rows.append({
            "device": r["device"], "model": f"{Path(str(r.get('model'))).name}{init}",
            "layers x heads": f"{r.get('layers')} x {r.get('heads')}",
            "sizes": "the book's" if r.get("full_sizes") else "reduced: " + ", ".join(
                f"{k.replace('_', ' ')} {v}" for k, v in (r.get("sizes") or {}).items()),
            "dtype": r.get("dtype") or "float32", "wall (s)": r.get("wall_s"),
            **{f"{s.replace('_', ' ')} (s)": sections.get(s) for s in DEVICE_SECTIONS},
            "processor (s)": r.get("cpu_s"), "GPU memory peak (MiB)": r.get("gpu_memory_peak_mib"),
            "GPU busy, mean (%)": r.get("gpu_utilisation_mean"),
            "verdicts vs CPU": _verdicts(r.get("verdicts_equal_cpu")),
            "commit": r.get("commit"), "date": (r.get("recorded") or {}).get("date"),
        })
    return pd.DataFrame(rows).set_index(["device", "model"])
