"""Benchmark: ``python -m helpers claims --json`` on a device (a GPU, or the CPU), timed section by section, with the
GPU's utilisation and memory sampled while it runs; kept as ``results/claims_device-<device>-<date>.json``.

    python benchmarks/claims_device.py [--device cuda] [--model SPEC] [--random-init all] [--dtype bfloat16]
        [--segments N --max-sentences N --max-documents N --seeds N --epochs N --permutations N]
        [--compare-cpu CLAIMS.json] [--cache-dir DIR] [--sample-every 2] [--results DIR] [--no-record] [--out FILE]

The command runs in a process of its own: this script runs itself as ``--child`` around the CLI's own entry point
(``helpers.cli.main``, the same code as ``python -m helpers claims``), wrapping, for the length of that process only,
the model's load, the shared segment pass and each paper section's ``claims(report)`` (the sections' reports
compute their parts when their claims read them) to take each one's seconds, on the device's clock (a GPU's queued
work is waited for before each time is read). So ``sections_s`` adds up to the command's work: ``load`` (the model),
``segment_pass`` (one pass of the model over §3's segments for §3, §6 and the norms), ``run`` (the sections' runs
before their claims are read), then ``surface``, ``syntax``, ``coref``, ``probe``, ``cluster``, in the paper's
order; the rest of ``wall_s`` is the interpreter's start and imports.

Recorded keys: ``device`` (the GPU's name as torch reports it; on the CPU the processor's model name), ``model``,
``random_init`` (null or "all"), ``layers``, ``heads``, ``full_sizes`` (true when no size option shrank the run:
the book's sizes), ``sizes`` (the options given), ``dtype`` (null when not given), ``wall_s``, ``sections_s``,
``cpu_s`` (processor seconds of the command and its children), ``host_memory_peak_mib``, ``gpu_memory_peak_mib``
(torch's peak reserved memory in the command, null on the CPU), ``gpu_utilisation`` (``nvidia-smi`` samples, every
``--sample-every`` s: ``[[seconds, busy %, MiB used], ...]``, null without a GPU or nvidia-smi),
``gpu_utilisation_mean``, ``commit``, ``verdicts_equal_cpu`` (true/false against ``--compare-cpu``, a CPU
``claims --json`` of the same commit; null when not given) with ``value_differences`` (each claim whose value
differs: both values and the relative difference), ``exit_status``, and ``recorded`` (date, time, machine, command).
"""
from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
SIZE_OPTIONS = ("segments", "max_sentences", "max_documents", "seeds", "epochs", "permutations")


# ------------------------------------------------------------------------------ the child: the CLI, timed


def _child(timings: Path, argv: list[str]) -> int:
    """Run ``helpers.cli.main(argv)`` with each part of ``claims`` timed; write the times and the model's facts."""
    import helpers.results as results
    from helpers import cli

    seconds: dict[str, float] = {}
    seen: dict = {}

    def wait(lm) -> None:
        if lm is not None and lm.device.type == "cuda":
            import torch

            torch.cuda.synchronize(lm.device)

    def timed(name: str, function):
        def run(*args, **kwargs):
            start = time.perf_counter()
            try:
                return function(*args, **kwargs)
            finally:
                wait(seen.get("lm"))
                seconds[name] = round(seconds.get(name, 0.0) + time.perf_counter() - start, 2)
        return run

    load = results.load

    def timed_load(args):
        start = time.perf_counter()
        lm = load(args)
        seen.setdefault("lm", lm)
        wait(lm)
        seconds["load"] = round(seconds.get("load", 0.0) + time.perf_counter() - start, 2)
        return lm

    results.load = timed_load
    for name, part in (("shared_segment_pass", "segment_pass"), ("run_sections", "run")):
        if hasattr(results, name):  # a part the claims of this commit have
            setattr(results, name, timed(part, getattr(results, name)))
    for record in results.PAPER_SECTIONS:  # frozen records: wrapped for this process only
        object.__setattr__(record, "claims", timed(record.key, record.claims))
    status = cli.main(argv)
    lm = seen.get("lm")
    facts = {"sections_s": seconds, "exit_status": status}
    if lm is not None:
        facts.update(model=lm.name, label=lm.label, layers=lm.n_layers, heads=lm.n_heads, kv_heads=lm.n_kv_heads,
                     device_type=lm.device.type, random_init=lm.random_init or None)
        if lm.device.type == "cuda":
            import torch

            facts["device_name"] = torch.cuda.get_device_name(lm.device)
            facts["gpu_memory_peak_mib"] = round(torch.cuda.max_memory_reserved(lm.device) / 2 ** 20, 1)
    timings.write_text(json.dumps(facts, indent=1) + "\n")
    return status


# ------------------------------------------------------------------------------ the parent: run, sample, record


class GpuSampler:
    """``nvidia-smi``'s utilisation (%) and memory used (MiB) of GPU ``index`` every ``every`` seconds, in a thread:
    ``samples = [[seconds since start, busy %, MiB], ...]``; empty when nvidia-smi is missing or fails."""

    def __init__(self, every: float, index: int = 0):
        self.every, self.index, self.samples = every, index, []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="gpu-sampler", daemon=True)
        self.available = shutil.which("nvidia-smi") is not None

    def _run(self) -> None:
        start = time.perf_counter()
        while not self._stop.is_set():
            try:
                out = subprocess.run(["nvidia-smi", "--query-gpu=utilization.gpu,memory.used", "--format=csv,noheader,nounits",
                                      "-i", str(self.index)], capture_output=True, text=True, timeout=10).stdout
                busy, used = (float(x) for x in out.strip().splitlines()[0].split(","))
                self.samples.append([round(time.perf_counter() - start, 1), busy, used])
            except (OSError, ValueError, IndexError, subprocess.SubprocessError):
                pass
            self._stop.wait(self.every)

    def __enter__(self) -> "GpuSampler":
        if self.available:
            self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join()


def compare_claims(device: dict, cpu: dict) -> tuple[bool, dict]:
    """Whether every claim has the same verdict in both ``claims --json`` payloads (the same ids, in order), and
    ``{id: {"cpu", "device", "relative"}}`` of every claim whose value differs."""
    a = [(c["id"], c["verdict"]) for c in device["claims"]]
    b = [(c["id"], c["verdict"]) for c in cpu["claims"]]
    cpu_values = {c["id"]: c.get("value") for c in cpu["claims"]}
    moved = {}
    for claim in device["claims"]:
        x, y = claim.get("value"), cpu_values.get(claim["id"])
        if x != y:
            rel = abs(x - y) / max(abs(y), 1e-300) if isinstance(x, (int, float)) and isinstance(y, (int, float)) else None
            moved[claim["id"]] = {"cpu": y, "device": x, "relative": rel}
    return a == b, moved


def cpu_name() -> str:
    sys.path.insert(0, str(HERE))
    from common import machine

    return machine()["cpu"]


def main() -> None:
    if len(sys.argv) > 2 and sys.argv[1] == "--child":
        sys.exit(_child(Path(sys.argv[2]), sys.argv[4:] if sys.argv[3:4] == ["--"] else sys.argv[3:]))
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", default=None, help="passed to claims (default: claims' own, the CPU)")
    parser.add_argument("--model", default=None, help="passed to claims (default: the offline default)")
    parser.add_argument("--random-init", choices=("all",), default=None, help="passed to claims")
    parser.add_argument("--dtype", default=None, help="passed to claims only when given")
    for option in SIZE_OPTIONS:
        parser.add_argument(f"--{option.replace('_', '-')}", type=int, default=None, help="passed to claims")
    parser.add_argument("--cache-dir", default=None, help="passed to claims (default: a fresh folder, so the run is cold)")
    parser.add_argument("--compare-cpu", default=None, metavar="FILE",
                        help="a CPU claims --json of the same commit and sizes (or a CPU record of this script)")
    parser.add_argument("--sample-every", type=float, default=2.0, help="seconds between GPU samples (default 2)")
    parser.add_argument("--python", default=sys.executable, help="the interpreter that runs claims")
    parser.add_argument("--results", default=str(HERE / "results"), help="where the record goes")
    parser.add_argument("--no-record", action="store_true", help="write --out only")
    parser.add_argument("--out", default=str(HERE / "results" / "latest" / "claims_device.json"))
    args = parser.parse_args()
    sys.path.insert(0, str(HERE))
    from common import COMMIT_AT_START, machine, measure, record_path

    compare = json.loads(Path(args.compare_cpu).read_text()) if args.compare_cpu else None
    if compare is not None and isinstance(compare.get("claims"), dict):  # a record of this script: its payload
        compare = compare["claims"]
    if compare is not None and not isinstance(compare.get("claims"), list):
        parser.error(f"--compare-cpu {args.compare_cpu}: no claims in it; give a claims --json or a record of this script")
    started = machine()
    work = Path(tempfile.mkdtemp(prefix="claims-device-"))
    cache = args.cache_dir or str(work / "cache")
    claims_json, timings, log = work / "claims.json", work / "timings.json", work / "claims.log"
    argv = ["claims", "--json", str(claims_json), "--quiet", "--cache-dir", cache]
    for option in ("device", "model", "dtype"):
        if getattr(args, option):
            argv += [f"--{option}", getattr(args, option)]
    if args.random_init:
        argv += ["--random-init", args.random_init]
    sizes = {o: getattr(args, o) for o in SIZE_OPTIONS if getattr(args, o) is not None}
    for option, value in sizes.items():
        argv += [f"--{option.replace('_', '-')}", str(value)]
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    print(f"running: python -m helpers {' '.join(argv)}", flush=True)
    with GpuSampler(args.sample_every) as sampler:
        done = measure([args.python, str(Path(__file__).resolve()), "--child", str(timings), "--", *argv], env, log=log)
    facts = json.loads(timings.read_text()) if timings.is_file() else {}
    if done["exit_status"] != 0:
        print(log.read_text()[-3000:], file=sys.stderr)
    payload = json.loads(claims_json.read_text()) if claims_json.is_file() else None
    on_gpu = facts.get("device_type") == "cuda"
    samples = sampler.samples if on_gpu and sampler.samples else None
    equal, moved = compare_claims(payload, compare) if (payload and compare) else (None, None)
    result = {
        "device": facts.get("device_name") if on_gpu else started["cpu"],
        "device_type": facts.get("device_type"), "model": facts.get("model", args.model or "default"),
        "random_init": args.random_init, "dtype": args.dtype, "layers": facts.get("layers"), "heads": facts.get("heads"),
        "kv_heads": facts.get("kv_heads"), "full_sizes": not sizes, "sizes": sizes,
        "wall_s": done["seconds"], "sections_s": facts.get("sections_s"), "cpu_s": done["cpu_seconds"],
        "host_memory_peak_mib": round(done["peak_rss_bytes"] / 2 ** 20, 1),
        "gpu_memory_peak_mib": facts.get("gpu_memory_peak_mib"),
        "gpu_memory_used_peak_mib": max(s[2] for s in samples) if samples else None,
        "gpu_utilisation": samples, "gpu_utilisation_mean": round(sum(s[1] for s in samples) / len(samples), 1) if samples else None,
        "gpu_sample_every_s": args.sample_every if samples else None,
        "commit": COMMIT_AT_START, "verdicts_equal_cpu": equal, "value_differences": moved,
        "compared_with": args.compare_cpu, "exit_status": done["exit_status"], "error": done.get("error"),
        "claims": payload,
    }
    result["recorded"] = {"date": time.strftime("%Y-%m-%d"), "time": time.strftime("%H:%M:%S"), "machine": started,
                          "command": " ".join(["python", "benchmarks/claims_device.py", *sys.argv[1:]]),
                          "commit": COMMIT_AT_START}
    text = json.dumps(result, indent=1) + "\n"
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(text)
    print(f"wrote {args.out}: {result['device']}, {result['wall_s']} s wall, sections {result['sections_s']}, "
          f"verdicts equal to the CPU's: {equal}")
    if not args.no_record and done["exit_status"] == 0:
        path = record_path("claims_device", re.sub(r"\s+", "_", result["device"] or "unknown"), Path(args.results))
        path.write_text(text)
        print(f"recorded {path}")
    shutil.rmtree(work, ignore_errors=True)
    sys.exit(0 if done["exit_status"] == 0 else 1)


if __name__ == "__main__":
    main()
