"""The ``probe`` command: its options and the JSON it writes."""
from __future__ import annotations

import argparse

from helpers.core.encoding import MAX_LENGTH
from helpers.pipeline.argtypes import check_corpora, max_length_int, positive_int
from helpers.pipeline.options import Command, load, with_counts
from helpers.probe.run import probe_corpora, run_probes


def _probe_args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--glove", default=None, metavar="FILE", help="GloVe-format word vectors (default: the model's input embeddings)")
    parser.add_argument("--seeds", type=positive_int, default=3, help="number of seeds (0, 1, ...), at least 1")
    parser.add_argument("--epochs", type=positive_int, default=3)
    parser.add_argument("--max-sentences", type=positive_int, default=None, help="first N sentences of each corpus (for quick runs)")
    parser.add_argument("--max-length", type=max_length_int, default=MAX_LENGTH, help="longer sentences are skipped and counted")
    parser.add_argument("--train", default=None, metavar="CORPUS",
                        help="training treebank: a .conllu file or a corpus name such as gum:train (default gum:train)")
    parser.add_argument("--dev", default=None, metavar="CORPUS",
                        help="development treebank, for choosing the epoch (default gum:dev)")
    parser.add_argument("--test", action="append", default=None, metavar="CORPUS",
                        help="test treebank; repeat for several (default: gum:test and ewt:dev)")
    parser.set_defaults(check_inputs=lambda a: check_corpora(a, *probe_corpora(a.train, a.dev, a.test).values()))


def cmd_probe(args: argparse.Namespace) -> dict:
    lm = load(args)
    out = run_probes(lm, seeds=tuple(range(args.seeds)), epochs=args.epochs, glove_path=args.glove,
                     max_sentences=args.max_sentences, max_length=args.max_length, data_dir=args.data_dir,
                     cache_root=args.cache_dir, progress=not args.quiet,
                     corpora=probe_corpora(args.train, args.dev, args.test))
    return with_counts(out, {f"max_sentences:{name}": (args.max_sentences, used + out["skipped"].get(name, 0))
                             for name, used in out["sentences"].items()})


COMMAND = Command("probe", "paper §5: attention probing classifiers, Table 3 (UAS without punctuation)", _probe_args, cmd_probe)
