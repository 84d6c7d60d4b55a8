"""The ``mixing`` command: the context-mixing maps (:mod:`helpers.mixing.maps`) scored with the paper's probes, per
method. Its options (their defaults: the record's settings, :mod:`helpers.mixing.section`) and its run: the
record's, whose report's JSON it writes."""
from __future__ import annotations

import argparse
from typing import Mapping

from helpers.mixing.maps import METHODS, check_methods
from helpers.pipeline.argtypes import IntRange, NameList, max_length_int, positive_int
from helpers.pipeline.options import Command, load, run_context

count_int = IntRange(0)  # a subset's size: 0 runs none
methods_list = NameList("--methods", check_methods)  # names of METHODS; an unknown one: one line naming them, exit 2


def _mixing_args(parser: argparse.ArgumentParser, defaults: Mapping) -> None:
    parser.add_argument("--methods", type=methods_list, default=tuple(defaults["methods"]), metavar="M1,M2",
                        help=f"comma-separated maps to score (default all: {','.join(METHODS)})")
    parser.add_argument("--max-sentences", type=positive_int, default=defaults["max_sentences"], metavar="N",
                        help=f"first N sentences of GUM dev and test (§4.2, §5's dev and test; default {defaults['max_sentences']})")
    parser.add_argument("--train-sentences", type=positive_int, default=defaults["train_sentences"], metavar="N",
                        help=f"first N sentences of GUM train (§5's probe; default {defaults['train_sentences']})")
    parser.add_argument("--max-documents", type=positive_int, default=defaults["max_documents"], metavar="N",
                        help="at most the first N documents of each coreference split (§4.3; default "
                             f"{defaults['max_documents'] or 'all'})")
    parser.add_argument("--min-mentions", type=positive_int, default=defaults["min_mentions"], metavar="N",
                        help="§4.3: each split's first documents only until their windows hold N evaluated mentions "
                             f"(default {defaults['min_mentions'] or 'none: every document up to --max-documents'})")
    parser.add_argument("--heads-sentences", type=count_int, default=defaults["heads_sentences"], metavar="N",
                        help="per-head value zeroing on the CPU: N sentences drawn at random from each of GUM dev and "
                             f"test (default {defaults['heads_sentences']}; on an accelerator: all)")
    parser.add_argument("--heads-documents", type=count_int, default=defaults["heads_documents"], metavar="N",
                        help="per-head value zeroing on the CPU: first N documents of each split "
                             f"(default {defaults['heads_documents']}; on an accelerator: all)")
    parser.add_argument("--seeds", type=positive_int, default=len(defaults["seeds"]), metavar="N",
                        help=f"probe seeds 0 .. N-1 (default {len(defaults['seeds'])})")
    parser.add_argument("--epochs", type=positive_int, default=defaults["epochs"], metavar="N",
                        help=f"probe epochs (default {defaults['epochs']})")
    parser.add_argument("--max-length", type=max_length_int, default=defaults["max_length"],
                        help="longer inputs are skipped and counted")


def cmd_mixing(args: argparse.Namespace, run) -> dict:
    lm = load(args)
    report = run(lm, run_context(args), methods=args.methods, max_sentences=args.max_sentences,
                 train_sentences=args.train_sentences, max_documents=args.max_documents,
                 heads_sentences=args.heads_sentences, heads_documents=args.heads_documents,
                 seeds=tuple(range(args.seeds)), epochs=args.epochs, max_length=args.max_length,
                 min_mentions=args.min_mentions)
    return report.to_json()


COMMAND = Command("mixing", "context-mixing maps (norms, rollout, value zeroing, ALTI) scored with the paper's "
                            "probes, per method", _mixing_args, cmd_mixing)
