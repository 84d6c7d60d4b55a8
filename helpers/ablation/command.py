"""The ``ablate`` command: heads removed one at a time, by importance and all but one, and the sink tests (the no-op
and redirect tests), with the paper's heads among all heads. Its options (their defaults: the record's settings,
:mod:`helpers.ablation.section`) and its run: the record's, whose report's JSON it writes."""
from __future__ import annotations

import argparse
from typing import Mapping

from helpers.ablation.run import PARTS, check_parts
from helpers.pipeline.argtypes import NameList, max_length_int, positive_int
from helpers.pipeline.engine import add_execution_args
from helpers.pipeline.options import Command, load, run_context

parts_list = NameList("--parts", check_parts)  # names of PARTS; an unknown one: one line naming them, exit 2


def _ablate_args(parser: argparse.ArgumentParser, defaults: Mapping) -> None:
    parser.add_argument("--max-sentences", type=positive_int, default=None, metavar="N",
                        help="first N sentences of GUM test (of at least 5 words) for the single-head effects, importance, "
                             f"the pruning curve and the all-heads sink tests (default {defaults['max_sentences']} on "
                             "the CPU; on an accelerator: all)")
    parser.add_argument("--detail-sentences", type=positive_int, default=None, metavar="N",
                        help="the first N of them for all-but-one and the per-head sink tests (default "
                             f"{defaults['detail_sentences']} on the CPU; on an accelerator: all)")
    parser.add_argument("--parts", type=parts_list, default=tuple(defaults["parts"]), metavar="P1,P2",
                        help=f"the analyses to run (default all: {','.join(PARTS)})")
    parser.add_argument("--permutations", type=positive_int, default=defaults["n_perm"], metavar="N",
                        help=f"random head sets of the paper-heads test (default {defaults['n_perm']})")
    parser.add_argument("--no-paper-heads", dest="paper_heads", action="store_false",
                        help="do not look up the paper's heads (§3.1, §3.3, §4.2, §4.3: their chapters' runs)")
    parser.add_argument("--max-length", type=max_length_int, default=defaults["max_length"],
                        help="longer sentences are skipped")
    add_execution_args(parser)


def cmd_ablate(args: argparse.Namespace, run) -> dict:
    lm = load(args)
    # sizes given hold anywhere; none given: the record's on the CPU, every sentence on an accelerator
    sizes = {k: v for k, v in (("max_sentences", args.max_sentences), ("detail_sentences", args.detail_sentences))
             if v is not None}
    report = run(lm, run_context(args), **sizes, parts=args.parts, n_perm=args.permutations,
                 paper_heads=args.paper_heads, max_length=args.max_length, seed=args.seed,
                 **({"everything": False} if sizes else {}))
    return report.to_json()


COMMAND = Command("ablate", "heads removed one at a time, by importance and all but one; the sink no-op and redirect "
                            "tests; the paper's heads among them (Michel et al. 2019)", _ablate_args, cmd_ablate)
