"""The ``norms`` command: its options and the JSON it writes."""
from __future__ import annotations

import argparse

from helpers.core.encoding import MAX_LENGTH
from helpers.norms.run import norms_json, run_norms
from helpers.pipeline.argtypes import check_corpora, max_length_int, positive_int
from helpers.pipeline.engine import Execution, add_execution_args
from helpers.pipeline.options import Command, capped_counts, load
from helpers.pipeline.segments import SEGMENTS


def _norms_args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--segments", type=positive_int, default=SEGMENTS,
                        help=f"segments to draw (default {SEGMENTS}, as the surface command)")
    parser.add_argument("--max-length", type=max_length_int, default=MAX_LENGTH, help="segment length limit in tokens")
    add_execution_args(parser)
    parser.set_defaults(check_inputs=lambda a: check_corpora(a, "gum:train"))  # segments come from GUM train


def cmd_norms(args: argparse.Namespace) -> dict:
    lm = load(args)
    report = run_norms(lm, n_segments=args.segments, seed=args.seed, max_length=args.max_length,
                       data_dir=args.data_dir, cache_root=args.cache_dir, progress=not args.quiet,
                       execution=Execution.from_args(args))
    out = norms_json(report)
    capped_counts({"segments": (args.segments, out["segments"])})  # said on standard error; the layout is fixed
    return out


COMMAND = Command("norms", "beyond the paper: attention weights against attention norms ||alpha f(x)|| per head", _norms_args, cmd_norms)
