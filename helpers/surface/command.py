"""The ``surface`` command: its options (their defaults: the record's settings) and its run: the record's, whose
report's JSON it writes."""
from __future__ import annotations

import argparse
from typing import Mapping

from helpers.pipeline.argtypes import positive_int
from helpers.pipeline.engine import add_execution_args
from helpers.pipeline.options import Command, load, run_context, with_counts
from helpers.pipeline.segments import add_segment_args


def _surface_args(parser: argparse.ArgumentParser, defaults: Mapping) -> None:
    add_segment_args(parser, defaults)
    parser.add_argument("--no-gradients", action="store_false", dest="gradients", default=defaults["gradients"],
                        help="skip the masked-LM gradient analysis")
    parser.add_argument("--gradient-segments", type=positive_int, default=defaults["gradient_segments"],
                        help="use only the first N segments for gradients (default: all)")
    add_execution_args(parser)  # the statistics; the masked-LM head and the gradients run here


def cmd_surface(args: argparse.Namespace, run) -> dict:
    lm = load(args)
    report = run(lm, run_context(args), n_segments=args.segments, seed=args.seed, max_length=args.max_length,
                 segments_from=args.segments_from, gradients=args.gradients, gradient_segments=args.gradient_segments)
    out = report.to_json()
    counts = {"segments": (args.segments, len(report.batch.examples) + len(report.batch.skipped))}
    if report.gradients is not None and args.gradient_segments is not None:
        counts["gradient_segments"] = (args.gradient_segments, min(args.gradient_segments, len(report.batch.examples)))
    return with_counts(out, counts)


COMMAND = Command("surface", "relative position, [CLS]/[SEP]/punctuation, entropy, gradients", _surface_args, cmd_surface)
