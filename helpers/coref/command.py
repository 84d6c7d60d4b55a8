"""The ``coref`` command: its options and the JSON it writes."""
from __future__ import annotations

import argparse

import numpy as np

from helpers import paper
from helpers.core.encoding import MAX_LENGTH
from helpers.core.labels import head_label
from helpers.coref.run import CANDIDATE_LABELS, CorefRun, load_coref, run_coref
from helpers.coref.stats import (
    MENTION_TYPES,
    CandidateSet,
)
from helpers.pipeline.argtypes import max_length_int, positive_int
from helpers.pipeline.engine import Execution, add_execution_args, session
from helpers.pipeline.options import Command, load, with_counts


def _coref_args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--split", default="test", choices=("train", "dev", "test", "test2"), help="GUM split scored")
    parser.add_argument("--select-on", default="dev", choices=("train", "dev", "test", "test2"),
                        help="split on which the best head is chosen")
    parser.add_argument("--setting", default="truncated", choices=("truncated", "windows"),
                        help=f"truncated: first {MAX_LENGTH} tokens of each document (paper); windows: whole documents")
    parser.add_argument("--max-length", type=max_length_int, default=MAX_LENGTH)
    parser.add_argument("--max-documents", type=positive_int, default=None, metavar="N",
                        help="only the first N documents of each split (default: all)")
    parser.set_defaults(check_inputs=lambda a: [load_coref(s, data_dir=a.data_dir, cache_root=a.cache_dir) for s in (a.split, a.select_on)])
    add_execution_args(parser)


def cmd_coref(args: argparse.Namespace) -> dict:
    lm = load(args)
    kw = dict(setting=args.setting, max_length=args.max_length, max_documents=args.max_documents,
              data_dir=args.data_dir, cache_root=args.cache_dir, progress=not args.quiet)
    with session(Execution.from_args(args)) as execution:  # one cluster for both splits
        test = run_coref(lm, args.split, execution=execution, **kw)
        dev = run_coref(lm, args.select_on, execution=execution, **kw)
    layer, head = dev.best_head()
    acc = test.accuracy()
    counts = {f"max_documents:{args.split}": (args.max_documents, test.n_documents),
              f"max_documents:{args.select_on}": (args.max_documents, dev.n_documents)}
    return with_counts({
        "model": lm.label, "split": args.split, "setting": args.setting, "documents": test.n_documents,
        "mentions": test.counts(),
        "per_head": {k: np.round(v, 4).tolist() for k, v in acc.items()},
        "baselines": test.baseline_accuracy(),
        "best_head": {"label": head_label(layer, head), "chosen_on": args.select_on,
                      "accuracy": {k: float(v[layer, head]) for k, v in acc.items()},
                      "interval_all": test.head_interval(layer, head)},
        "paper": {name: dict(zip(("all", *MENTION_TYPES), values)) for name, values in paper.TABLE2.items()},
        "candidates": CANDIDATE_LABELS["mentions"],
        "every_word_candidates": _candidates_json(dev, test, "words", args.select_on),
    }, counts)


def _candidates_json(dev: CorefRun, test: CorefRun, candidates: CandidateSet, select_on: str) -> dict:
    """Per-head accuracy and the dev-chosen head when every other word of the window is a candidate."""
    acc = test.accuracy(candidates)
    layer, head = dev.best_head(candidates)
    return {"candidates": CANDIDATE_LABELS[candidates], "per_head": {k: np.round(v, 4).tolist() for k, v in acc.items()},
            "best_head": {"label": head_label(layer, head), "chosen_on": select_on,
                          "accuracy": {k: float(v[layer, head]) for k, v in acc.items()},
                          "interval_all": test.head_interval(layer, head, candidates=candidates)}}


COMMAND = Command("coref", "paper §4.3: antecedent selection by every head and three baselines (Table 2)", _coref_args, cmd_coref)
