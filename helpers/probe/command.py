"""The ``probe`` command: its options (their defaults: the record's settings) and its run: the record's, on the
treebanks it names, whose report's JSON it writes."""
from __future__ import annotations

import argparse
from typing import Mapping

from helpers.pipeline.argtypes import max_length_int, positive_int
from helpers.pipeline.options import Command, load, run_context, with_counts
from helpers.probe.run import probe_corpora


def _probe_args(parser: argparse.ArgumentParser, defaults: Mapping) -> None:
    parser.add_argument("--glove", default=defaults["glove"], metavar="FILE",
                        help="GloVe-format word vectors (default: the model's input embeddings)")
    parser.add_argument("--seeds", type=positive_int, default=len(defaults["seeds"]),
                        help="number of seeds (0, 1, ...), at least 1")
    parser.add_argument("--epochs", type=positive_int, default=defaults["epochs"])
    parser.add_argument("--max-sentences", type=positive_int, default=defaults["max_sentences"],
                        help="first N sentences of each corpus (for quick runs)")
    parser.add_argument("--max-length", type=max_length_int, default=defaults["max_length"],
                        help="longer sentences are skipped and counted")
    parser.add_argument("--train", default=None, metavar="CORPUS",
                        help="training treebank: a .conllu file or a corpus name such as gum:train (default gum:train)")
    parser.add_argument("--dev", default=None, metavar="CORPUS",
                        help="development treebank, for choosing the epoch (default gum:dev)")
    parser.add_argument("--test", action="append", default=None, metavar="CORPUS",
                        help="test treebank; repeat for several (default: gum:test and ewt:dev)")


def cmd_probe(args: argparse.Namespace, run) -> dict:
    lm = load(args)
    report = run(lm, run_context(args), seeds=tuple(range(args.seeds)), epochs=args.epochs, glove=args.glove,
                 max_sentences=args.max_sentences, max_length=args.max_length,
                 treebanks=probe_corpora(args.train, args.dev, args.test))
    out = report.to_json()
    return with_counts(out, {f"max_sentences:{name}": (args.max_sentences, used + out["skipped"].get(name, 0))
                             for name, used in out["sentences"].items()})


def probe_reads(options: Mapping) -> tuple[str, ...]:
    """What ``probe`` reads: the treebanks of ``--train``, ``--dev`` and ``--test`` (each left out: the record's)."""
    return tuple(probe_corpora(options["train"], options["dev"], options["test"]).values())


COMMAND = Command("probe", "attention probing classifiers, Table 3 (UAS without punctuation)", _probe_args, cmd_probe,
                  reads=probe_reads)
