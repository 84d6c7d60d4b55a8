"""The ``surface`` command: its options and the JSON it writes."""
from __future__ import annotations

import argparse

from helpers.pipeline.argtypes import check_corpora, positive_int
from helpers.pipeline.engine import Execution, add_execution_args
from helpers.pipeline.options import Command, load, with_counts
from helpers.pipeline.segments import (
    add_segment_args,
)
from helpers.surface.claims import claims
from helpers.surface.run import run_surface


def _surface_args(parser: argparse.ArgumentParser) -> None:
    add_segment_args(parser)
    parser.add_argument("--no-gradients", action="store_true", help="skip the masked-LM gradient analysis")
    parser.add_argument("--gradient-segments", type=positive_int, default=None,
                        help="use only the first N segments for gradients (default: all)")
    add_execution_args(parser)  # the statistics; the masked-LM head and the gradients run here
    parser.set_defaults(check_inputs=lambda a: check_corpora(a, "gum:train", *([] if a.no_gradients else ["gum:dev"])))


def cmd_surface(args: argparse.Namespace) -> dict:
    lm = load(args)
    report = run_surface(lm, n_segments=args.segments, seed=args.seed, max_length=args.max_length,
                         segments_from=args.segments_from, gradients=not args.no_gradients, gradient_segments=args.gradient_segments,
                         data_dir=args.data_dir, cache_root=args.cache_dir, progress=not args.quiet,
                         execution=Execution.from_args(args))
    drawn = len(report.batch.examples) + len(report.batch.skipped)
    counts = {"segments": (args.segments, drawn)}
    if report.gradients is not None and args.gradient_segments is not None:
        counts["gradient_segments"] = (args.gradient_segments, min(args.gradient_segments, len(report.batch.examples)))
    return with_counts({**report.to_json(), "claims": [c.to_json() for c in claims(report)]}, counts)


COMMAND = Command("surface", "paper §3: relative position, [CLS]/[SEP]/punctuation, entropy, gradients", _surface_args, cmd_surface)
