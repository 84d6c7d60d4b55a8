"""The ``syntax`` command: its options and the JSON it writes."""
from __future__ import annotations

import argparse

from helpers.core.encoding import MAX_LENGTH
from helpers.pipeline.argtypes import max_length_int, positive_int
from helpers.pipeline.engine import Execution, add_execution_args
from helpers.pipeline.options import Command, load, with_counts
from helpers.syntax.run import heads_json, run_heads


def _heads_args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--conllu", required=True, metavar="FILE",
                        help="a CoNLL-U file (or a corpus name: gum:dev, gum:test, ewt:dev ...)")
    parser.add_argument("--max-sentences", type=positive_int, default=None, metavar="N",
                        help="use only the first N sentences of the file, in order")
    parser.add_argument("--max-length", type=max_length_int, default=MAX_LENGTH,
                        help="sentences longer than this many tokens ([CLS] and [SEP] included) are skipped and counted")
    parser.add_argument("--word-mode", choices=("mean", "first"), default="mean",
                        help="attention from a split word: mean over its tokens (paper) or first token (released code)")
    add_execution_args(parser)


def cmd_heads(args: argparse.Namespace) -> dict:
    lm = load(args)
    run = run_heads(lm, args.conllu, max_sentences=args.max_sentences, max_length=args.max_length,
                    word_mode=args.word_mode, data_dir=args.data_dir, cache_root=args.cache_dir, progress=not args.quiet,
                    execution=Execution.from_args(args))
    out = heads_json(lm.label, run)
    return with_counts(out, {"max_sentences": (args.max_sentences, out["sentences_used"] + out["sentences_skipped"])})


COMMAND = Command("heads", "paper §4.2: every head as a dependency parser, best head per relation vs offset baseline", _heads_args, cmd_heads)
