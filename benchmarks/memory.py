"""Benchmark: peak resident memory (and time) of every analysis command, on its full default inputs.

    python benchmarks/memory.py [--models default,mpnet-base] [--commands surface,heads,coref,probe,cluster]
                                (coref is measured twice: the paper's truncated setting and --setting windows)
                                [--extract] [--cold] [--small] [--out benchmarks/results/memory.json]

Each command runs as ``python -m helpers COMMAND --model M`` in its own process; its peak resident set
size is read from the kernel when it exits (``os.wait4``). By default the analyses' cached results are
recomputed (``BERT_ATTENTION_REFRESH=1``) from the cached attention maps (kept:
``BERT_ATTENTION_KEEP_MAPS=1``), so the figure is the memory of the analysis itself; the maps are extracted first if they are missing (run once with ``--cold`` and an
empty ``--cache-dir`` to include extraction). ``--extract`` adds the extraction of GUM train without
the cache (the largest corpus, one forward pass per batch). ``--small`` runs each command once on
shrunken inputs, as the cache finds them (a check of the machinery in the tests' small configuration,
half the processes; not the budget). Two references are printed beside the
budgets: the peak of a process that only loads the model and runs one forward pass (the floor any
command pays) and the budget of issue #12 (probe: 3 GB for a 6 x 12 model, 4 GB for 12 x 12; the other
commands the same).
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from common import LATEST, machine, measure, save

ROOT = Path(__file__).resolve().parents[1]
COMMANDS = ("surface", "heads", "coref", "probe", "cluster")
REQUIRED_ARGS = {"heads": ["--conllu", "gum:test"]}  # the default input of the Heads chapter
# runs beside a command's default one: the chapter's heaviest setting (coreference over whole documents,
# the windows its claims rest on: long inputs, the largest maps per cache shard)
EXTRA_RUNS = {"coref": [("coref --setting windows", ["coref", "--setting", "windows"])]}
# --small: shrunken inputs (a quick check of the machinery, not the budget)
SMALL_ARGS = {"surface": ["--segments", "40", "--gradient-segments", "10"], "heads": ["--max-sentences", "100"],
              "coref": ["--max-documents", "4"], "probe": ["--max-sentences", "100", "--seeds", "1", "--epochs", "1"],
              "cluster": ["--segments", "40", "--permutations", "100"]}
GIB = 1024 ** 3


def budget_bytes(layers: int) -> int:
    """Issue #12's budget: below 3 GB for a 6-layer model, below 4 GB for a 12 x 12 (base-size) one."""
    return int((3 if layers <= 6 else 4) * 1e9)


FLOOR = """
import sys, torch
from helpers import encode_words, load_model
from helpers.core.extract import forward_attentions
lm = load_model(sys.argv[1])
forward_attentions(lm, encode_words(lm.tokenizer, [["A", "cat", "sat", "."]] * 32).examples)
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--models", default=os.environ.get("BERT_ATTENTION_MODEL") or "default",
                        help="comma-separated --model values (default: $BERT_ATTENTION_MODEL, else the offline default)")
    parser.add_argument("--commands", default=",".join(COMMANDS))
    parser.add_argument("--extract", action="store_true", help="also extract GUM train without the cache")
    parser.add_argument("--cold", action="store_true", help="do not recompute cached results (first-run figures "
                        "when --cache-dir is empty)")
    parser.add_argument("--cache-dir", default=None, help="cache to use (default: the user's)")
    parser.add_argument("--small", action="store_true", help="shrunken inputs (a quick check, not the budget)")
    parser.add_argument("--out", default=str(LATEST / "memory.json"))
    parser.add_argument("--record", action="store_true", help="also keep the result as a dated recorded measurement "
                        "(benchmarks/results/memory-MODELS-DATE.json), shown on the book's Performance page")
    args = parser.parse_args()
    started = machine()

    env = {**os.environ, "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    if args.cache_dir:
        env["BERT_ATTENTION_CACHE"] = args.cache_dir
    if not (args.cold or args.small):
        env["BERT_ATTENTION_KEEP_MAPS"] = "1"  # the recomputation reads the maps the warm-up run kept (issue #42:
        #                                         maps one pass reads are otherwise not written)
    helpers = [sys.executable, "-m", "helpers"]
    one_run = args.cold or args.small  # measure the first run as it comes, no warm-up run and no recomputation
    rows = []
    for model in args.models.split(","):
        info = json.loads(subprocess.run([*helpers, "info", "--model", model, "--quiet"], env=env, check=True,
                                         capture_output=True, text=True).stdout)["model"]
        floor = measure([sys.executable, "-c", FLOOR, model], env)
        budget = budget_bytes(info["layers"])
        print(f"{info['name']} ({info['layers']} x {info['heads']}): load + one forward pass "
              f"{floor['peak_rss_bytes'] / GIB:.2f} GiB; budget {budget / 1e9:.0f} GB")
        runs = [run for c in args.commands.split(",") if c
                for run in [(c, [c, *REQUIRED_ARGS.get(c, [])]), *EXTRA_RUNS.get(c, [])]]
        if args.extract:
            runs.append(("extract gum:train (no cache)", ["extract", "--corpus", "gum:train", "--no-cache"]))
        for name, command in runs:
            with tempfile.TemporaryDirectory() as tmp:
                argv = [*helpers, *command, "--model", model, "--quiet", "--json", str(Path(tmp) / "out.json"),
                        *(SMALL_ARGS.get(command[0], []) if args.small else [])]
                if not one_run and not name.startswith("extract"):
                    warm = subprocess.run(argv, env=env, capture_output=True, text=True)  # maps (and results) in the cache
                    if warm.returncode != 0:
                        raise SystemExit(f"{' '.join(argv)} failed: {warm.stderr.strip()[-500:]}")
                run_env = env if one_run else {**env, "BERT_ATTENTION_REFRESH": "1"}
                result = measure(argv, run_env)
            row = {"model": info["name"], "layers": info["layers"], "heads": info["heads"], "command": name, **result,
                   "peak_rss_gib": round(result["peak_rss_bytes"] / GIB, 2),
                   "floor_rss_gib": round(floor["peak_rss_bytes"] / GIB, 2),
                   "ratio_to_floor": round(result["peak_rss_bytes"] / floor["peak_rss_bytes"], 2),
                   "budget_gb": budget / 1e9, "within_budget": result["peak_rss_bytes"] < budget}
            rows.append(row)
            print(f"  {name:32s} peak {row['peak_rss_gib']:5.2f} GiB ({row['ratio_to_floor']:.1f}x the floor), "
                  f"{row['seconds']:7.1f} s, {'within' if row['within_budget'] else 'OVER'} the budget"
                  + (f", exit {row['exit_status']}: {row.get('error')}" if row["exit_status"] else ""))
    mode = ("cold" if args.cold else "one run each, as the cache found them" if args.small
            else "results recomputed from cached maps")
    save({"mode": mode, "small": args.small,
          "date": time.strftime("%Y-%m-%d"), "cpus": os.cpu_count(), "rows": rows}, args.out,
         record="memory" if args.record else None, model=args.models, started=started)


if __name__ == "__main__":
    main()
