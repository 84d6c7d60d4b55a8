"""Shared by the benchmark scripts: write a result as JSON with the process's peak memory, and keep dated
*recorded* measurements (``--record``) that the book's Performance page shows with their date, machine
and command.

- ``RESULTS / "latest"``: each script's last output (not committed; the default ``--out``);
- ``RESULTS / "NAME-MODEL-DATE.json"``: recorded measurements (committed), written with ``--record``:
  the result plus ``recorded = {"date", "machine", "command", "commit"}`` (HEAD when it started;
  ``commit_at_end`` too if HEAD moved).
"""
import json
import os
import platform
import re
import resource
import subprocess
import sys
import time
from pathlib import Path

RESULTS = Path(__file__).parent / "results"
LATEST = RESULTS / "latest"


def peak_rss_mib() -> float:
    """Peak resident memory of this process so far, MiB (``ru_maxrss`` is KiB on Linux)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def measure(argv: list[str], env: dict, *, log: Path | None = None, cwd: str | os.PathLike | None = None) -> dict:
    """Run ``argv``: its wall time, exit status, ``peak_rss_bytes``, the peak resident memory of the largest
    process among it and the descendants it waited for (``os.wait4``), and ``cpu_seconds``, the processor time
    (user + system) of all of them together: over ``seconds`` times the cores, how busy it kept the machine.
    ``cwd``: the folder it runs in (``python -m`` imports from there first). Output goes to ``log`` when given;
    otherwise standard output is dropped and a failure's last line of standard error kept as ``error``."""
    start = time.perf_counter()
    if log is not None:
        with open(log, "w") as out:
            proc = subprocess.Popen(argv, env=env, stdout=out, stderr=subprocess.STDOUT, cwd=cwd)
            _, status, usage = os.wait4(proc.pid, 0)
        err = ""
    else:
        proc = subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, cwd=cwd)
        _, status, usage = os.wait4(proc.pid, 0)
        err = proc.stderr.read()
        proc.stderr.close()
    out = {"peak_rss_bytes": usage.ru_maxrss * 1024, "seconds": round(time.perf_counter() - start, 1),
           "cpu_seconds": round(usage.ru_utime + usage.ru_stime, 1), "exit_status": os.waitstatus_to_exitcode(status)}
    if out["exit_status"] != 0 and err.strip():
        out["error"] = err.strip().splitlines()[-1:]
    elif out["exit_status"] != 0:
        out["error"] = []
    return out


def elapsed(lm, start: float) -> float:
    """Seconds since ``start`` (``time.perf_counter``), once ``lm``'s device has finished its queued work (a GPU
    runs asynchronously: without the wait the last passes, or all of them, would not be counted)."""
    if lm.device.type == "cuda":
        import torch

        torch.cuda.synchronize(lm.device)
    return time.perf_counter() - start


def machine() -> dict:
    """What the measurement ran on: processor, cores, memory (and a GPU when torch sees one)."""
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    info = {"cpu": cpu, "cores": os.cpu_count(), "memory_gib": None, "python": platform.python_version()}
    try:
        info["memory_gib"] = round(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2 ** 30, 1)
    except (ValueError, OSError, AttributeError):
        pass
    try:
        import torch

        info["torch_threads"] = torch.get_num_threads()
        if torch.cuda.is_available():
            info["gpu"] = torch.cuda.get_device_name(0)
    except ImportError:
        pass
    try:
        info["load_average_at_start"] = [round(x, 2) for x in os.getloadavg()]
    except OSError:
        pass
    return info


def _commit() -> str | None:
    try:
        return subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=Path(__file__).parent, capture_output=True,
                              text=True, check=True).stdout.strip() or None
    except (OSError, subprocess.CalledProcessError):
        return None


COMMIT_AT_START = _commit()  # the code a benchmark measures: HEAD when it started, not a commit made while it ran


def run_device() -> str:
    """The device this run's models are loaded on: ``$BERT_ATTENTION_DEVICE`` (checked), else ``"cpu"``."""
    from helpers.config import requested_device

    return requested_device() or "cpu"


def device_record(name: str) -> str:
    """The name a measurement of this run is recorded under: ``name`` on the CPU; ``name_cuda`` (``_mps`` ...)
    when ``$BERT_ATTENTION_DEVICE`` puts the models on another device, so that GPU times are kept beside the
    CPU ones (``recorded(name)`` and the Performance page keep reading the CPU ones), never in their place."""
    import torch

    kind = torch.device(run_device()).type
    return name if kind == "cpu" else f"{name}_{kind}"


def record_path(name: str, model: str, results: Path | None = None) -> Path:
    """``benchmarks/results/NAME-MODEL-DATE.json`` for a recorded measurement (``model`` made file-safe); a second
    recording on the same day gets the time too (``NAME-MODEL-DATE-HHMMSS.json``) instead of replacing the first.
    :func:`recorded` tells the newest by the date and time inside."""
    safe = re.sub(r"[^A-Za-z0-9_.-]+", "_", Path(model).name if os.sep in model else model).strip("_") or "model"
    results = RESULTS if results is None else results
    path = results / f"{name}-{safe}-{time.strftime('%Y-%m-%d')}.json"
    if path.exists():
        stem, again = f"{path.stem}-{time.strftime('%H%M%S')}", 1
        path = path.with_name(f"{stem}.json")
        while path.exists():  # several in one second (tests)
            again += 1
            path = path.with_name(f"{stem}-{again}.json")
    return path


def recorded(name: str, model: str | None = None, results: Path | None = None, *, having: str | None = None
             ) -> dict | None:
    """The newest recorded measurement ``name`` (of ``model``, when given; with the key ``having``, when given: a
    part some runs of a script leave out) by the date and time it records, or ``None``."""
    found = []
    for path in (RESULTS if results is None else results).glob(f"{name}-*.json"):
        try:
            data = json.loads(path.read_text())
        except (OSError, ValueError):
            continue
        if not isinstance(data, dict) or "recorded" not in data or (having is not None and not data.get(having)):
            continue
        if model is None or data.get("model_spec", data.get("model")) == model:
            found.append((data["recorded"].get("date", ""), data["recorded"].get("time", ""), path.name, data))
    return max(found, key=lambda f: f[:3])[3] if found else None


def save(result: dict, out: str | Path, *, record: str | None = None, model: str = "default",
         started: dict | None = None, name_by: str | None = None) -> None:
    """Write ``result`` as JSON to ``out``. Every benchmark's output carries its peak resident memory:
    ``peak_rss_mib`` (this process, which ran the measured work) is added when the result lacks it.
    With ``record`` (the benchmark's name) it is also kept as a dated recorded measurement
    (:func:`record_path`), with the date, the machine (``started``: :func:`machine` taken before the
    run, so the load average is the one it started under), the command and the commit; the file is named by
    ``name_by`` when given (a benchmark recorded per machine: ``NAME-MACHINE-DATE.json``), else by ``model``."""
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    if "peak_rss_mib" not in result:
        result = {**result, "peak_rss_mib": round(peak_rss_mib(), 1)}
        print(f"peak resident memory of this benchmark: {result['peak_rss_mib']:.0f} MiB")
    out.write_text(json.dumps(result, indent=1) + "\n")
    print(f"wrote {out}")
    if record:
        meta = {"date": time.strftime("%Y-%m-%d"), "time": time.strftime("%H:%M:%S"), "machine": started or machine(),
                "command": " ".join(["python", f"benchmarks/{Path(sys.argv[0]).name}", *sys.argv[1:]]), "commit": COMMIT_AT_START}
        at_end = _commit()
        if at_end != COMMIT_AT_START:
            meta["commit_at_end"] = at_end  # HEAD moved during the run: the files may have changed under it
        path = record_path(record, name_by or model)
        path.write_text(json.dumps({**result, "model_spec": model, "recorded": meta}, indent=1) + "\n")
        print(f"recorded {path}")


def recorded_note(data: dict | None) -> str:
    """One line saying when, where and how a recorded measurement was taken (for the Performance page)."""
    if not data:
        return "not recorded yet: run the benchmark script named above with --record"
    r = data["recorded"]
    m = r.get("machine", {})
    load = m.get("load_average_at_start")
    return (f"recorded {r.get('date')} on {m.get('cpu', '?')} ({m.get('cores', '?')} cores, {m.get('memory_gib', '?')} GiB"
            + (f", GPU {m['gpu']}" if m.get("gpu") else "") + (f", load average {load[0]:.1f} at the start" if load else "")
            + f") with `{r.get('command')}` at commit {r.get('commit') or '?'}")


class CachePeak:
    """The largest bytes on disk of an analysis cache by kind while a measured command runs: a thread that reads
    :func:`helpers.data.cache.cache_usage` every ``every`` seconds (and once more at :meth:`stop`) and keeps, for
    each kind and for the total, the largest value seen (each kind's own peak: they need not fall on one sample),
    and ``peak_total_sample``, the sample with the largest total.

    >>> with CachePeak(cache) as peak:                          # doctest: +SKIP
    ...     measure(argv, env)
    >>> peak.peak["total"]                                      # doctest: +SKIP
    """

    def __init__(self, cache: Path, *, every: float = 1.5):
        import threading

        self.cache, self.every = Path(cache), every
        self.peak: dict[str, int] = {}
        self.peak_total_sample: dict[str, int] = {}
        self.samples = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="cache-peak", daemon=True)

    def sample(self) -> dict[str, int]:
        from helpers.data.cache import cache_usage

        usage = cache_usage(self.cache)
        self.samples += 1
        for kind, size in usage.items():
            self.peak[kind] = max(self.peak.get(kind, 0), size)
        if usage["total"] >= self.peak_total_sample.get("total", -1):
            self.peak_total_sample = dict(usage)
        return usage

    def _run(self) -> None:
        while not self._stop.is_set():
            self.sample()
            self._stop.wait(self.every)

    def start(self) -> "CachePeak":
        self._thread.start()
        return self

    def stop(self) -> dict[str, int]:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join()
        self.sample()
        return self.peak

    def __enter__(self) -> "CachePeak":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()
