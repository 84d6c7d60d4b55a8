"""The ``heads`` command: its options (their defaults: the record's settings) and its run: the record's, on the
corpus it names, whose report's JSON it writes."""
from __future__ import annotations

import argparse
from typing import Mapping

from helpers.pipeline.argtypes import max_length_int, positive_int
from helpers.pipeline.engine import add_execution_args
from helpers.pipeline.options import Command, load, run_context, with_counts


def _heads_args(parser: argparse.ArgumentParser, defaults: Mapping) -> None:
    parser.add_argument("--conllu", required=True, metavar="FILE",
                        help="a CoNLL-U file (or a corpus name: gum:dev, gum:test, ewt:dev ...)")
    parser.add_argument("--max-sentences", type=positive_int, default=defaults["max_sentences"], metavar="N",
                        help="use only the first N sentences of the file, in order; the rest is not read (nor checked)")
    parser.add_argument("--max-length", type=max_length_int, default=defaults["max_length"],
                        help="sentences longer than this many tokens ([CLS] and [SEP] included) are skipped and counted")
    parser.add_argument("--word-mode", choices=("mean", "first"), default=defaults["word_mode"],
                        help="attention from a split word: mean over its tokens (paper) or first token (released code)")
    add_execution_args(parser)


def cmd_heads(args: argparse.Namespace, run) -> dict:
    lm = load(args)
    report = run(lm, run_context(args), max_sentences=args.max_sentences, max_length=args.max_length,
                 word_mode=args.word_mode)
    out = report.to_json(args.conllu)
    return with_counts(out, {"max_sentences": (args.max_sentences, out["sentences_used"] + out["sentences_skipped"])})


def heads_reads(options: Mapping) -> tuple[str, ...]:
    """What ``heads`` reads: the corpus or file of ``--conllu``, in place of its record's GUM test, GUM dev and EWT dev."""
    return (options["conllu"],)


COMMAND = Command("heads", "every head as a dependency parser, best head per relation vs offset baseline", _heads_args,
                  cmd_heads, reads=heads_reads)
