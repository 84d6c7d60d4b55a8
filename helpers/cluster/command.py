"""The ``cluster`` command: its options and the JSON it writes."""
from __future__ import annotations

import argparse

from helpers.cluster.run import linguistic_heads, run_cluster
from helpers.pipeline.argtypes import check_corpora, positive_int
from helpers.pipeline.engine import Execution, add_execution_args, session
from helpers.pipeline.options import Command, load, with_counts
from helpers.pipeline.segments import (
    add_segment_args,
)


def _cluster_args(parser: argparse.ArgumentParser) -> None:
    add_segment_args(parser)
    parser.add_argument("--permutations", type=positive_int, default=1000, help="permutations for the layer test")
    parser.add_argument("--no-linguistic", action="store_true",
                        help="do not mark the syntax and coreference heads (they need GUM dev trees and OntoGUM)")
    add_execution_args(parser)  # the distances, surface statistics and linguistic heads; MDS runs here
    parser.set_defaults(check_inputs=lambda a: check_corpora(a, "gum:train", *([] if a.no_linguistic else ["gum:dev"])))


def cmd_cluster(args: argparse.Namespace) -> dict:
    lm = load(args)
    with session(Execution.from_args(args)) as execution:  # one cluster for every step
        result = run_cluster(lm, n_segments=args.segments, seed=args.seed, max_length=args.max_length,
                             segments_from=args.segments_from, data_dir=args.data_dir, cache_root=args.cache_dir,
                             n_perm=args.permutations, progress=not args.quiet, execution=execution)
        linguistic = {} if args.no_linguistic else linguistic_heads(lm, data_dir=args.data_dir, cache_root=args.cache_dir,
                                                                    execution=execution)
    out = result.to_json(linguistic)
    return with_counts(out, {"segments": (args.segments, out["segments"])})


COMMAND = Command("cluster", "paper §6: Jensen-Shannon distances between heads, MDS, behaviours, layer test", _cluster_args, cmd_cluster)
