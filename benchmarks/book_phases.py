"""Benchmark: where a cold build's time goes, phase by phase, in the three chapters that cost the most.

    python benchmarks/book_phases.py [--model SPEC] [--small] [--pages surface,probe,coref] [--floor FILE]
                                     [--record] [--out FILE]

Runs the work of the chapters' first cells as the book does (``helpers.plan.chapter_segment_statistics``
then ``SECTION.run`` and ``SECTION.claims`` of §3; §5's and §4.3's records), one page after another, in
this process, into a fresh, empty cache (installed extras linked in, as ``book_build.py`` does), and times
each phase by wrapping the functions that do it (inclusive seconds; a phase inside another is indented):

- §3: the one pass over the segments (``segment_statistics``) and, inside it, the §3, §6 (JS distances) and
  norms accumulators' updates (the rest of the pass is the model's forward pass and its maps); the
  masked-LM head (inside it, the forward passes that collect its inputs: the rest is its fit) and the
  gradient pass;
- §5: reading and encoding the treebanks, the maps down the one route (the model's and its control's passes, or
  the cached maps, packed by the probes' accumulator; the model's evaluation treebanks' written for §4.2) and
  the trainings;
- §4.3: the heads' predictions (the windows' model pass) and the rest (reading OntoGUM, intervals).

``--floor FILE`` (a ``book_floor.py`` JSON of the same model) adds each page's floor: the seconds of the
bare passes it runs. Prints a table and writes JSON (``--record`` keeps it dated in ``benchmarks/results/``).
The chapters' kernels in a build run beside each other on one thread each; here each page has the
process's threads (``torch.get_num_threads()``, printed), so the figures are those of a page alone.
"""
from __future__ import annotations

import argparse
import functools
import json
import os
import sys
import tempfile
import time
from pathlib import Path

from common import LATEST, device_record, machine, run_device, save

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

PAGES = ("surface", "probe", "coref")  # the pages timed, in the order they run (keys of PAGE_PASSES)


class Phases:
    """Inclusive seconds per phase label, filled by :meth:`wrap`ped functions and methods."""

    def __init__(self):
        self.labels: list[str] = []  # in the order wrapped: a phase before the phases inside it
        self.seconds: dict[str, float] = {}
        self.calls: dict[str, int] = {}

    def wrap(self, owner, name: str, label: str) -> None:
        """Time every call of ``owner.name`` (a module's function or a class's method) under ``label``."""
        original = getattr(owner, name)
        self.labels.append(label)

        @functools.wraps(original)
        def timed(*args, **kwargs):
            start = time.perf_counter()
            try:
                return original(*args, **kwargs)
            finally:
                self.seconds[label] = self.seconds.get(label, 0.0) + time.perf_counter() - start
                self.calls[label] = self.calls.get(label, 0) + 1

        setattr(owner, name, timed)


def instrument(phases: Phases) -> None:
    """Wrap the functions named in the module docstring where the chapters' code looks them up."""
    import helpers.coref.run as coref_run
    import helpers.plan as plan
    import helpers.probe.run as probe_run
    import helpers.surface.mlm as mlm
    import helpers.surface.run as surface_run
    from helpers.cluster.stats import JSAccumulator
    from helpers.norms.stats import NormAccumulator
    from helpers.surface.stats import SurfaceAccumulator

    phases.wrap(plan, "segment_statistics", "surface: one pass over the segments")
    phases.wrap(SurfaceAccumulator, "update", "surface: . §3 statistics (accumulator)")
    phases.wrap(JSAccumulator, "update", "surface: . §6 JS distances (accumulator)")
    phases.wrap(NormAccumulator, "update", "surface: . norms statistics (accumulator)")
    phases.wrap(surface_run, "mlm_head", "surface: masked-LM head")
    phases.wrap(mlm, "_collect", "surface: . its inputs (forward passes)")
    phases.wrap(surface_run, "gradient_importance", "surface: gradient pass (forward + backward)")
    phases.wrap(probe_run, "encode_treebank", "probe: treebanks (read, encode)")
    phases.wrap(probe_run, "reduce_maps", "probe: the maps down the route (passes or cache, packed)")
    phases.wrap(probe_run, "train_all", "probe: trainings")
    phases.wrap(coref_run, "_predictions_of", "coref: the heads' predictions (the windows' model pass)")


# page -> (whose passes: the book's model or also its random-init control, which inputs) it runs
PAGE_PASSES = {"surface": (False, lambda name: "segments" in name),
               "probe": (True, lambda name: name.startswith(("gum:", "ewt:"))),
               "coref": (False, lambda name: name.startswith("coreference"))}


def page_floor(floor: dict, page: str) -> float | None:
    """The seconds of the bare passes of ``floor`` (a book_floor.py JSON) that page ``page`` runs."""
    book = floor.get("model_spec", "default")
    control, reads = PAGE_PASSES[page]
    specs = (book, "random:" + book) if control else (book,)
    picked = [r["seconds"] for r in floor.get("passes", []) if r["spec"] in specs and reads(r["input"])]
    return round(sum(picked), 1) if picked else None


def run_pages(pages: list[str], phases: Phases) -> dict[str, float]:
    """Each page's first-cell work, as its chapter runs it; returns each page's total seconds."""
    import helpers
    from helpers.context import RunContext
    from helpers.plan import chapter_segment_statistics
    from helpers.results import section

    ctx = RunContext.from_env()
    lm = helpers.load_model()
    totals = {}
    for page in pages:
        start = time.perf_counter()
        if page == "surface":
            chapter_segment_statistics(lm, ctx)
        record = section(page)
        report = record.run(lm, ctx)
        record.claims(report)
        totals[page] = round(time.perf_counter() - start, 1)
        print(f"  {page}: {totals[page]:.1f} s", flush=True)
    return totals


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default=None, help="the book's model (default: $BERT_ATTENTION_MODEL, else the offline default)")
    parser.add_argument("--small", action="store_true", help="the tests' small configuration (BERT_ATTENTION_SMALL)")
    parser.add_argument("--pages", default=",".join(PAGES), help=f"comma-separated, of {', '.join(PAGES)} (default: all)")
    parser.add_argument("--floor", default=None, metavar="FILE", help="a book_floor.py JSON of the same model: each page's floor")
    parser.add_argument("--record", action="store_true", help="keep a dated recorded measurement in benchmarks/results/")
    parser.add_argument("--out", default=str(LATEST / "book_phases.json"))
    args = parser.parse_args()
    pages = [p.strip() for p in args.pages.split(",") if p.strip()]
    unknown = sorted(set(pages) - set(PAGES))
    if unknown or not pages:
        parser.error(f"--pages: {', '.join(unknown) or 'none given'}; choose from {', '.join(PAGES)}")
    if args.model:
        os.environ["BERT_ATTENTION_MODEL"] = args.model
    if args.small:
        os.environ["BERT_ATTENTION_SMALL"] = "1"
    from helpers.compare.run import book_spec
    from helpers.config import cache_dir
    from helpers.context import RunContext

    ctx = RunContext.from_env()  # the model and configuration the pages will run
    spec = book_spec(ctx)
    floor = None
    if args.floor:
        try:
            floor = json.loads(Path(args.floor).read_text())
        except (OSError, ValueError) as exc:
            parser.error(f"--floor {args.floor}: not a readable book_floor.py JSON ({exc})")
        if floor.get("model_spec") != spec or bool(floor.get("small")) != ctx.small:
            parser.error(f"--floor {args.floor}: measured for {floor.get('model_spec')!r}"
                         f"{' (small)' if floor.get('small') else ''}, not for {spec!r}{' (small)' if ctx.small else ''}")
    started = machine()
    with tempfile.TemporaryDirectory(prefix="book-phases-") as cache:
        extras = cache_dir() / "models"  # installed optional models: not results
        if extras.is_dir():
            os.symlink(extras, Path(cache) / "models")
        os.environ["BERT_ATTENTION_CACHE"] = cache
        import torch

        phases = Phases()
        instrument(phases)
        print(f"phases of {', '.join(pages)} for {spec} ({torch.get_num_threads()} threads, fresh cache) ...", flush=True)
        totals = run_pages(pages, phases)
    result = {"model_spec": spec, "small": ctx.small, "threads": torch.get_num_threads(), "device": run_device(),
              "pages": totals,
              "phases": {k: round(phases.seconds[k], 1) for k in phases.labels if k in phases.seconds},
              "calls": {k: phases.calls[k] for k in phases.labels if k in phases.calls}}
    if floor is not None:
        result["floor"] = {p: page_floor(floor, p) for p in pages}
        result["floor_from"] = str(args.floor)
    for page in pages:
        print(f"{page}: {totals[page]:.1f} s" + (f" (floor of its passes {result['floor'][page]} s)" if floor else ""))
        for label, seconds in result["phases"].items():
            if label.startswith(page + ":"):
                print(f"    {label.split(': ', 1)[1]:55s} {seconds:7.1f} s")
    save(result, args.out, record=device_record("book_phases") if args.record else None, model=result["model_spec"], started=started)


if __name__ == "__main__":
    main()
