"""Benchmark: the same ``heads`` run locally and on a local Dask cluster of 1 and 2 workers.

    python benchmarks/distributed.py [--model NAME] [--corpus gum:train] [--max-sentences N] [--workers 1,2]

Each configuration runs ``python -m helpers heads`` in a fresh process with a fresh, empty cache
(so every run extracts every shard), and is timed from start to exit. A sampler reads the resident
memory of the driver and of every descendant process (the Dask nannies and workers) every 0.2 s
and keeps the peaks: the driver's, the largest single worker's, and the whole tree's. The JSON of
every run is compared byte for byte with the local run's. Writes benchmarks/results/distributed.json.

Caveat to read the numbers by: a local Dask worker is one single-threaded process (Dask sets
``OMP_NUM_THREADS=1`` in workers), while the local engine's torch uses every core; on a machine
with C cores, N workers cannot beat C cores, and every worker loads its own copy of the model.
"""
from __future__ import annotations

import argparse
import os
import platform
import subprocess
import sys
import tempfile
import threading
import time
from datetime import datetime, timezone
from pathlib import Path

import psutil

from common import LATEST, save

ROOT = Path(__file__).resolve().parents[1]


def _sample(proc: psutil.Process, peaks: dict, stop: threading.Event) -> None:
    while not stop.is_set():
        try:
            driver = proc.memory_info().rss
            children = []
            for child in proc.children(recursive=True):
                try:
                    children.append(child.memory_info().rss)
                except psutil.Error:
                    pass
        except psutil.Error:
            break
        peaks["driver"] = max(peaks.get("driver", 0), driver)
        peaks["largest_child"] = max(peaks.get("largest_child", 0), max(children, default=0))
        peaks["tree"] = max(peaks.get("tree", 0), driver + sum(children))
        stop.wait(0.2)


def run_once(args: argparse.Namespace, extra: list[str], workdir: Path, name: str) -> dict:
    out = workdir / f"{name}.json"
    cmd = [sys.executable, "-m", "helpers", "heads", "--conllu", args.corpus, "--quiet", "--json", str(out),
           "--cache-dir", str(workdir / f"cache-{name}"), *extra]
    if args.model:
        cmd += ["--model", args.model]
    if args.max_sentences:
        cmd += ["--max-sentences", str(args.max_sentences)]
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONPATH": str(ROOT)}
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, env=env, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    peaks: dict = {}
    stop = threading.Event()
    sampler = threading.Thread(target=_sample, args=(psutil.Process(proc.pid), peaks, stop), daemon=True)
    sampler.start()
    _, err = proc.communicate()
    seconds = time.perf_counter() - start
    stop.set()
    sampler.join()
    if proc.returncode:
        raise SystemExit(f"{name}: exit {proc.returncode}: {err.decode()[-2000:]}")
    mib = 1 / 2**20
    return {"name": name, "args": extra, "seconds": round(seconds, 2),
            "peak_driver_mib": round(peaks.get("driver", 0) * mib, 1),
            "peak_largest_worker_mib": round(peaks.get("largest_child", 0) * mib, 1) if extra else None,
            "peak_total_mib": round(peaks.get("tree", 0) * mib, 1), "json": out.read_bytes()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default=None)
    parser.add_argument("--corpus", default="gum:train")
    parser.add_argument("--max-sentences", type=int, default=None)
    parser.add_argument("--workers", default="1,2", help="comma-separated cluster sizes")
    parser.add_argument("--out", default=str(LATEST / "distributed.json"))
    args = parser.parse_args()
    runs = []
    with tempfile.TemporaryDirectory() as tmp:
        configs = [("local", [])] + [(f"dask-{n}", ["--workers", str(n)]) for n in map(int, args.workers.split(","))]
        for name, extra in configs:
            result = run_once(args, extra, Path(tmp), name)
            print(f"{name:8s} {result['seconds']:8.1f} s   driver {result['peak_driver_mib']:7.0f} MiB   "
                  f"largest worker {result['peak_largest_worker_mib'] or 0:7.0f} MiB   "
                  f"all processes {result['peak_total_mib']:7.0f} MiB", flush=True)
            runs.append(result)
    local = runs[0]
    for run in runs:
        run["identical_json_to_local"] = run.pop("json") == local.get("json", None) if run is not local else True
    local.pop("json", None)
    base = {r["name"]: r["seconds"] for r in runs}
    ratios = {f"{a}/{b}": round(base[a] / base[b], 3) for a, b in
              [(r["name"], "local") for r in runs[1:]] + ([("dask-1", "dask-2")] if {"dask-1", "dask-2"} <= base.keys() else [])}
    for key, value in ratios.items():
        print(f"time {key}: {value:.2f}")
    result = {
        "corpus": args.corpus, "max_sentences": args.max_sentences, "model": args.model or "default",
        "date": datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "machine": {"cpus": os.cpu_count(), "platform": platform.platform(), "python": platform.python_version(),
                    "load_average_1min_at_end": round(os.getloadavg()[0], 2)},
        "runs": runs, "time_ratios": ratios,
    }
    save(result, args.out)


if __name__ == "__main__":
    main()
