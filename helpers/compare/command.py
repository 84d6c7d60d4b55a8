"""The ``compare`` command: its options and the JSON it writes."""
from __future__ import annotations

import argparse

from helpers.compare.run import (
    COMPARE_ENV,
    DEFAULT_SPEC,
    SENTENCES_PER_DOCUMENT,
    compare,
    compare_json,
    coref_documents,
    default_specs,
    parse_spec,
    parse_specs,
)
from helpers.pipeline.options import Command, context, run_context


def check_specs(specs: list[str], *, cache_root=None, max_length: int | None = None, where: str = "--models") -> None:
    """Check every model SPEC before any analysis runs (an analysis of the first model can take hours, so the
    second must not fail only when it is reached): each model can be loaded (:func:`~helpers.core.models.check_model`:
    a folder that exists and is whole, an installed extra, a hub name known here) and takes ``max_length`` tokens.
    Raises naming the SPEC."""
    from helpers.core.models import check_model

    for spec in specs:
        name, random_init = parse_spec(spec)
        limit = check_model(None if name == DEFAULT_SPEC else name, cache_root=cache_root, label=f"{where} {spec}",
                            random_init=random_init)
        if max_length is not None and max_length > limit:
            raise ValueError(f"{where} {spec}: --max-length {max_length} exceeds this model's limit of {limit} positions")


def _check_compare_inputs(args: argparse.Namespace) -> None:
    from helpers.results import _check_claims_inputs

    if args.model or args.random_init:
        raise ValueError("compare: name the models with --models SPEC[,SPEC...] (random:SPEC for a random-init copy), "
                     "not --model/--random-init")
    ctx = context(args)
    where = "--models" if args.models is not None else f"${COMPARE_ENV}" if ctx.compare else "the default --models"
    args.models = parse_specs(args.models) if args.models is not None else default_specs(ctx)
    check_specs(args.models, cache_root=args.cache_dir, max_length=args.max_length, where=where)
    _check_claims_inputs(args)


def _compare_args(parser: argparse.ArgumentParser) -> None:
    from helpers import results as summary

    parser.add_argument("--models", default=None, metavar="SPEC[,SPEC...]",
                    help="models to compare: default (the offline default), a Hugging Face name, a local directory "
                         "or an installed extra (mpnet-base), each optionally prefixed with random: (random-init "
                         f"copy, seeded by --seed); default ${COMPARE_ENV}, else default,random:default and "
                         "mpnet-base when installed (with $BERT_ATTENTION_MODEL set: that model and its random: copy "
                         "first)")
    summary.add_size_args(
        parser,
        sentences_help=f"first N sentences of each treebank for {summary.SYNTAX.paper} and {summary.PROBE.paper}, and "
                       f"the first ceil(N / {SENTENCES_PER_DOCUMENT}) documents of each split for {summary.COREF.paper} "
                       "unless --max-documents is given (default: all, as the chapters)",
        documents_help=f"first N documents of each split for {summary.COREF.paper} (default: from --max-sentences, else all)")
    parser.set_defaults(check_inputs=_check_compare_inputs)


def cmd_compare(args: argparse.Namespace) -> dict:
    from helpers.results import size_options

    sizes = size_options(args)
    if args.max_documents is None:
        sizes["max_documents"] = coref_documents(args.max_sentences)
    return compare_json(compare(args.models, run_context(args), seed=args.seed, figures=False, **sizes))



COMMAND = Command("compare", "every claim of the paper side by side for several models (--models), from the cached results",
                  _compare_args, cmd_compare)
