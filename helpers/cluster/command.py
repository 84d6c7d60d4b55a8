"""The ``cluster`` command: its options and the JSON it writes."""
from __future__ import annotations

import argparse

from helpers.cluster.run import linguistic_heads, run_cluster
from helpers.cluster.stats import PERMUTATIONS
from helpers.pipeline.argtypes import check_corpora, positive_int
from helpers.pipeline.engine import add_execution_args, session
from helpers.pipeline.options import Command, context, load, with_counts
from helpers.pipeline.segments import (
    add_segment_args,
)


def _cluster_args(parser: argparse.ArgumentParser) -> None:
    add_segment_args(parser)
    parser.add_argument("--permutations", type=positive_int, default=PERMUTATIONS,
                        help=f"permutations for the layer test (default {PERMUTATIONS})")
    parser.add_argument("--no-linguistic", action="store_true",
                        help="do not mark the syntax and coreference heads (they need GUM dev trees and OntoGUM)")
    add_execution_args(parser)  # the distances, surface statistics and linguistic heads; MDS runs here
    parser.set_defaults(check_inputs=lambda a: check_corpora(a, "gum:train", *([] if a.no_linguistic else ["gum:dev"])))


def cmd_cluster(args: argparse.Namespace, inputs: dict) -> dict:
    """``inputs``: the records of the sections §6 reads (``surface``, ``syntax``, ``coref``; the CLI passes
    them), whose runs give the heads' behaviours and the linguistic heads."""
    lm = load(args)
    with session(context(args).execution) as execution:  # one cluster for every step
        ctx = context(args).replace(execution=execution, small=False)
        surface = inputs["surface"].run(lm, ctx, segments_from=args.segments_from)
        result = run_cluster(lm, surface.statistics, n_segments=args.segments, seed=args.seed, max_length=args.max_length,
                             segments_from=args.segments_from, data_dir=ctx.data_dir, cache_root=ctx.cache_dir,
                             n_perm=args.permutations, progress=ctx.progress, execution=execution)
        linguistic = {} if args.no_linguistic else linguistic_heads(inputs["syntax"].run(lm, ctx).specialised_heads(),
                                                                    inputs["coref"].run(lm, ctx).dev.best_head())
    out = result.to_json(linguistic)
    return with_counts(out, {"segments": (args.segments, out["segments"])})


COMMAND = Command("cluster", "paper §6: Jensen-Shannon distances between heads, MDS, behaviours, layer test", _cluster_args, cmd_cluster,
                  inputs=("surface", "syntax", "coref"))
