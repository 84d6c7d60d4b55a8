"""The ``pairs`` command: BLiMP's minimal pairs scored by the model, and the paper's heads removed (beyond the paper).
Its options (their defaults: the record's settings, :mod:`helpers.minimal_pairs.section`) and its run: the record's,
whose report's JSON it writes. The selection and the BLiMP files it reads are checked before the model loads (a
malformed line, an unknown paradigm or phenomenon, an empty selection: one line, exit status 2)."""
from __future__ import annotations

import argparse
from typing import Mapping

from helpers.minimal_pairs.run import ACCELERATOR_HEAD_PAIRS, HEAD_READS
from helpers.pipeline.argtypes import max_length_int, positive_int
from helpers.pipeline.engine import add_execution_args
from helpers.pipeline.options import Command, load, run_context


def names(text: str) -> tuple[str, ...]:
    """Comma-separated names (checked against the data before the model loads)."""
    return tuple(n.strip() for n in text.split(",") if n.strip())


def _pairs_args(parser: argparse.ArgumentParser, defaults: Mapping) -> None:
    parser.add_argument("--pairs", type=positive_int, default=None, metavar="N",
                        help=f"the first N pairs of each paradigm for the model's own grammar (default {defaults['pairs']} "
                             "on the CPU; on an accelerator: all 1,000)")
    parser.add_argument("--head-pairs", type=positive_int, default=None, metavar="N",
                        help=f"the first N of them for the heads removed (default {defaults['head_pairs']} on the CPU; on an "
                             f"accelerator: {ACCELERATOR_HEAD_PAIRS})")
    parser.add_argument("--paradigms", type=names, default=defaults["paradigms"], metavar="P1,P2",
                        help="BLiMP paradigms by name (UID), with those of --phenomena (default: all 67; --list names them)")
    parser.add_argument("--phenomena", type=names, default=defaults["phenomena"], metavar="T1,T2",
                        help="BLiMP phenomena by name (linguistics_term, e.g. determiner_noun_agreement), with the "
                             "paradigms of --paradigms")
    parser.add_argument("--draws", type=positive_int, default=defaults["draws"], metavar="N",
                        help=f"random control sets per group of the paper's heads: same-layer heads and other relations' "
                             f"heads (default {defaults['draws']}; a head of a 9-head layer has 8 others: all of them)")
    parser.add_argument("--no-heads", dest="heads", action="store_false",
                        help="the model's own grammar only: do not look up the paper's heads (§4.2, §4.3) nor remove them")
    parser.add_argument("--list", action="store_true", help="list the paradigms and their phenomena, load no model")
    parser.add_argument("--max-length", type=max_length_int, default=defaults["max_length"],
                        help="longest input of the §4.2 and §4.3 runs that choose the heads (longer ones are skipped)")
    add_execution_args(parser)
    parser.set_defaults(check_inputs=check_inputs)


def check_inputs(args: argparse.Namespace) -> None:
    """Before the model loads: the paradigms chosen exist and every line the run reads is a BLiMP pair; with the
    heads, the corpora the §4.2 and §4.3 runs read to choose them."""
    from helpers.data.blimp import load_pairs, select_paradigms
    from helpers.pipeline.argtypes import check_corpora

    if args.list:
        return
    chosen = select_paradigms(paradigms=args.paradigms, phenomena=args.phenomena, data_dir=args.data_dir)
    sizes = [n for n in (args.pairs, args.head_pairs) if n is not None]
    load_pairs(chosen, max_pairs=max(sizes) if len(sizes) == 2 else None, data_dir=args.data_dir)
    if args.heads:
        check_corpora(args, *HEAD_READS)


def cmd_pairs(args: argparse.Namespace, run) -> dict:
    if args.list:
        from helpers.data.blimp import phenomena_of

        return {"paradigms": phenomena_of(run_context(args).data_dir)}
    if args.no_bos:
        raise ValueError("--no-bos: a decoder scores BLiMP's sentences after its BOS token (lm-evaluation-harness's "
                         "convention, so that the first word is predicted too); run pairs without --no-bos")
    lm = load(args)
    # sizes given hold anywhere; none given: the record's on the CPU, every pair on an accelerator
    sizes = {k: v for k, v in (("pairs", args.pairs), ("head_pairs", args.head_pairs)) if v is not None}
    report = run(lm, run_context(args), **sizes, paradigms=args.paradigms, phenomena=args.phenomena, draws=args.draws,
                 heads=args.heads, seed=args.seed, max_length=args.max_length,
                 **({"everything": False} if sizes else {}))
    return report.to_json()


COMMAND = Command("pairs", "BLiMP's minimal pairs: the model's own grammar, then the paper's heads removed against "
                           "same-layer and other heads, and every head ranked (Warstadt et al. 2020)", _pairs_args,
                  cmd_pairs)
