"""Benchmark: the ``heads`` command on sentences no cache has seen, as a user runs it (a whole process), against a
whole process that only loads the model, reads the file and runs the bare forward pass with attentions.

    python benchmarks/heads_command.py [--sentences 300] [--repeats 3] [--baseline-tree DIR] [--data-dir DIR]

The CoNLL-U file is written at run time from the corpora (GUM train's first files, ``--sentences`` whole sentences
after the first 100; nothing of the corpora is committed). Each repeat runs the floor, then ``heads`` with an empty
cache (and, with ``--baseline-tree``, the same command from another checkout, e.g. an older commit's worktree), one
after the other; the best of the repeats is compared (the machine is shared: the best is the least disturbed).
Prints each process's wall and processor seconds and peak memory, and the ratios to the floor (issue 53's goal:
``heads`` within 1.25 of it). Writes benchmarks/results/latest/heads_command.json.
"""
from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
from pathlib import Path

from common import LATEST, machine, measure, save

ROOT = Path(__file__).resolve().parent.parent
FLOOR = """
import sys
from helpers import encode_words, load_model, load_treebank
from helpers.core.extract import bucket, forward_attentions
lm = load_model(None)
sentences = load_treebank(sys.argv[1], cache_root=sys.argv[2])
batch = encode_words(lm.tokenizer, [s.words for s in sentences], model_max=lm.max_positions)
for group in bucket(batch.examples, batch_size=32):
    forward_attentions(lm, group)
"""


def unseen_conllu(data_dir: Path, out: Path, *, sentences: int, skip: int = 100) -> Path:
    """``sentences`` whole sentences of GUM train's first files (after the first ``skip``), as one CoNLL-U file."""
    blocks: list[str] = []
    for path in sorted((data_dir / "gum" / "dep").glob("GUM_*.conllu")):
        if "reddit" in path.name:
            continue
        blocks += [b.strip("\n") for b in path.read_text(encoding="utf-8").split("\n\n") if b.strip()]
        if len(blocks) >= skip + sentences:
            break
    if len(blocks) < skip + sentences:
        sys.exit(f"--data-dir {data_dir}: fewer than {skip + sentences} sentences in gum/dep")
    out.write_text("\n\n".join(blocks[skip : skip + sentences]) + "\n\n", encoding="utf-8")
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sentences", type=int, default=300)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--baseline-tree", default=None, help="another checkout whose heads command runs beside")
    parser.add_argument("--data-dir", default=str(ROOT.parent / "shared" / "data"))
    parser.add_argument("--out", default=str(LATEST / "heads_command.json"))
    args = parser.parse_args()

    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        conllu = unseen_conllu(Path(args.data_dir), tmp / "unseen.conllu", sentences=args.sentences)
        (tmp / "floor.py").write_text(FLOOR)
        heads = ["-m", "helpers", "heads", "--conllu", str(conllu), "--max-sentences", str(args.sentences), "--quiet",
                 "--json", str(tmp / "heads.json")]
        runs = {"floor": (ROOT, [str(tmp / "floor.py"), str(conllu)]), "heads": (ROOT, heads)}
        if args.baseline_tree:
            runs["baseline heads"] = (Path(args.baseline_tree).resolve(), heads)
        got: dict[str, list[dict]] = {name: [] for name in runs}
        for repeat in range(args.repeats):
            for name, (tree, argv) in runs.items():
                cache = tmp / f"cache-{name.replace(' ', '-')}"
                shutil.rmtree(cache, ignore_errors=True)
                full = [sys.executable, *argv, *([str(cache)] if name == "floor" else ["--cache-dir", str(cache)])]
                env = {**os.environ, "PYTHONPATH": str(tree), "HF_HUB_OFFLINE": "1"}
                result = measure(full, env, cwd=tree)  # `python -m helpers` imports the tree it runs in first
                if result["exit_status"] != 0:
                    sys.exit(f"{name}: exit {result['exit_status']}: {result.get('error')}")
                got[name].append(result)
                print(f"{repeat + 1}/{args.repeats} {name:15s} wall {result['seconds']:6.1f} s  processor "
                      f"{result['cpu_seconds']:6.1f} s  peak {result['peak_rss_bytes'] / 2**20:6.0f} MiB", flush=True)

    best = {name: {"seconds": min(r["seconds"] for r in rs), "cpu_seconds": min(r["cpu_seconds"] for r in rs),
                   "peak_rss_mib": round(max(r["peak_rss_bytes"] for r in rs) / 2**20)} for name, rs in got.items()}
    result = {"sentences": args.sentences, "repeats": args.repeats, "machine": machine(), "runs": got, "best": best}
    for name in runs:
        if name == "floor":
            continue
        for what in ("seconds", "cpu_seconds"):
            ratio = best[name][what] / best["floor"][what]
            result[f"ratio_{name.replace(' ', '_')}_over_floor_{what}"] = round(ratio, 3)
        print(f"{name}: best wall {best[name]['seconds']:.1f} s / floor {best['floor']['seconds']:.1f} s = "
              f"{best[name]['seconds'] / best['floor']['seconds']:.2f} (goal <= 1.25); processor "
              f"{best[name]['cpu_seconds'] / best['floor']['cpu_seconds']:.2f}")
    save(result, args.out)


if __name__ == "__main__":
    main()
