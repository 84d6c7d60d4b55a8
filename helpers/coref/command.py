"""The ``coref`` command: its options (their defaults: the record's settings) and its run: the record's, on the
splits it names, whose report's JSON it writes."""
from __future__ import annotations

import argparse
from typing import Mapping

from helpers.data.corpora import COREFERENCE_OF
from helpers.pipeline.argtypes import max_length_int, positive_int
from helpers.pipeline.engine import add_execution_args, session
from helpers.pipeline.options import Command, context, load, run_context, with_counts


def _coref_args(parser: argparse.ArgumentParser, defaults: Mapping) -> None:
    parser.add_argument("--split", default="test", choices=("train", "dev", "test", "test2"), help="GUM split scored")
    parser.add_argument("--select-on", default="dev", choices=("train", "dev", "test", "test2"),
                        help="split on which the best head is chosen")
    parser.add_argument("--setting", default="truncated", choices=("truncated", "windows"),
                        help=f"truncated: first {defaults['max_length']} tokens of each document (paper); "
                             "windows: whole documents")
    parser.add_argument("--max-length", type=max_length_int, default=defaults["max_length"])
    parser.add_argument("--max-documents", type=positive_int, default=defaults["max_documents"], metavar="N",
                        help="only the first N documents of each split (default: all)")
    add_execution_args(parser)


def cmd_coref(args: argparse.Namespace, run) -> dict:
    lm = load(args)
    with session(context(args).execution) as execution:  # one cluster for both splits
        report = run(lm, run_context(args).replace(execution=execution), max_length=args.max_length,
                     max_documents=args.max_documents)
        out = report.to_json(split=args.split, select_on=args.select_on, setting=args.setting)
        dev = report.split_run(args.select_on, args.setting)
    counts = {f"max_documents:{args.split}": (args.max_documents, out["documents"]),
              f"max_documents:{args.select_on}": (args.max_documents, dev.n_documents)}
    return with_counts(out, counts)


def coref_reads(options: Mapping) -> tuple[str, ...]:
    """What ``coref`` reads: the OntoGUM documents of ``--split`` and ``--select-on``, in place of its record's dev and
    test."""
    return tuple(dict.fromkeys(COREFERENCE_OF + options[o] for o in ("split", "select_on")))


COMMAND = Command("coref", "antecedent selection by every head and three baselines (Table 2)", _coref_args, cmd_coref,
                  reads=coref_reads)
