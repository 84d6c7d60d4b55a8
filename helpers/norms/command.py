"""The ``norms`` command: its options (their defaults: the record's settings) and its run: the record's, whose
report's JSON it writes."""
from __future__ import annotations

import argparse
from typing import Mapping

from helpers.pipeline.argtypes import max_length_int, positive_int
from helpers.pipeline.engine import add_execution_args
from helpers.pipeline.options import Command, capped_counts, load, run_context


def _norms_args(parser: argparse.ArgumentParser, defaults: Mapping) -> None:
    parser.add_argument("--segments", type=positive_int, default=defaults["n_segments"],
                        help=f"segments to draw (default {defaults['n_segments']}, as the surface command)")
    parser.add_argument("--max-length", type=max_length_int, default=defaults["max_length"],
                        help="segment length limit in tokens")
    add_execution_args(parser)


def cmd_norms(args: argparse.Namespace, run) -> dict:
    lm = load(args)
    report = run(lm, run_context(args), n_segments=args.segments, seed=args.seed, max_length=args.max_length)
    out = report.to_json()
    capped_counts({"segments": (args.segments, out["segments"])})  # said on standard error; the layout is fixed
    return out


COMMAND = Command("norms", "attention weights against attention norms ||alpha f(x)|| per head", _norms_args, cmd_norms)
