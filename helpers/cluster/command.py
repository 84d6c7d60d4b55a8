"""The ``cluster`` command: its options (their defaults: the record's settings) and its run: the record's (handed
the reports of the sections it reads), whose report's JSON it writes."""
from __future__ import annotations

import argparse
from typing import Mapping

from helpers.pipeline.argtypes import positive_int
from helpers.pipeline.engine import add_execution_args, session
from helpers.pipeline.options import Command, context, load, run_context, with_counts
from helpers.pipeline.segments import add_segment_args


def _cluster_args(parser: argparse.ArgumentParser, defaults: Mapping) -> None:
    add_segment_args(parser, defaults)
    parser.add_argument("--permutations", type=positive_int, default=defaults["n_perm"],
                        help=f"permutations for the layer test (default {defaults['n_perm']})")
    parser.add_argument("--no-linguistic", action="store_false", dest="linguistic",
                        help="do not mark the syntax and coreference heads (they need GUM dev trees and OntoGUM)")
    add_execution_args(parser)  # the distances, surface statistics and linguistic heads; MDS runs here


def cmd_cluster(args: argparse.Namespace, run) -> dict:
    lm = load(args)
    with session(context(args).execution) as execution:  # one cluster for every step
        report = run(lm, run_context(args).replace(execution=execution), n_segments=args.segments, seed=args.seed,
                     max_length=args.max_length, segments_from=args.segments_from, n_perm=args.permutations)
        out = report.to_json(linguistic=args.linguistic)
    return with_counts(out, {"segments": (args.segments, out["segments"])})


COMMAND = Command("cluster", "Jensen-Shannon distances between heads, MDS, behaviours, layer test", _cluster_args, cmd_cluster)
