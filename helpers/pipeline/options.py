"""What every command shares: the :class:`Command` record the CLI's table lists, the common options
(model, data, cache, device, output), loading the model they name, and the corpus options.

Sections describe their command in ``helpers/<section>/command.py`` as ``COMMAND = Command(...)``;
:mod:`helpers.cli` lists them in one explicit table. Nothing here imports the CLI.
"""
from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass
from typing import Any, Callable, Mapping

from helpers import config
from helpers.context import RunContext
from helpers.core.encoding import MAX_LENGTH
from helpers.pipeline.argtypes import (
    device,
    max_length_int,
    positive_int,
    seed_int,
)

Handler = Callable[..., dict]


@dataclass(frozen=True)
class Command:
    """One sub-command: ``python -m helpers NAME``; ``arguments(parser)`` adds its options, ``handler(args)``
    returns the JSON.

    A section's command (the ``command`` of its record, :class:`helpers.section.Section`) is its record's run and
    nothing else: the CLI calls ``arguments(parser, defaults)`` with the record's settings in the full
    configuration (:meth:`helpers.section.Sizes.pick`: the options' defaults) and ``handler(args, run)``, where
    ``run(lm, ctx, **settings)`` is the record's run handed the reports of the sections it reads
    (:func:`helpers.results.run_section`); the handler loads the model, runs it in :func:`run_context` with the
    settings its options give and returns its report's ``to_json(...)``.

    ``reads(options) -> specs``, for a section's command whose options name the corpora it reads (``heads --conllu``,
    ``probe --train/--dev/--test``, ``coref --split/--select-on``): those corpora, as
    :func:`helpers.data.corpora.corpus_read` names them, from its parsed options (``vars(args)``); they replace its
    record's own corpora in its corpus check (:meth:`helpers.section.Section.command_reads`). ``None``: the command
    reads its record's corpora."""

    name: str
    help: str
    arguments: Callable[..., None]
    handler: Handler
    reads: Callable[[Mapping[str, Any]], tuple[str, ...]] | None = None


def add_common(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("model, data and cache")
    group.add_argument("--model", default=None, metavar="NAME",
                       help="Hugging Face name, local directory, .gguf file or installed extra (mpnet-base, smollm2; "
                            "default: the offline all-MiniLM-L6-v2)")
    group.add_argument("--random-init", nargs="?", const="paper", default=False, choices=("paper", "all"),
                       help="random weights in the model's architecture: the paper's control keeps the pre-trained word "
                            "and position embeddings (default); 'all' randomises every weight")
    group.add_argument("--seed", type=seed_int, default=0, help="seed for random init and sampling (default 0)")
    group.add_argument("--data-dir", default=None, metavar="DIR",
                       help=f"corpora folder (default ${config.DATA_ENV}, else ../shared/data)")
    group.add_argument("--cache-dir", default=None, metavar="DIR",
                       help=f"cache of maps, parsed treebanks and results (default ${config.CACHE_ENV}, else ~/.cache/bert-attention)")
    group.add_argument("--device", type=device, default=None,
                       help="torch device, e.g. cpu or cuda (default $BERT_ATTENTION_DEVICE, else cpu); checked before anything loads")
    group.add_argument("--dtype", choices=config.DTYPES, default=None,
                       help=f"the weights' dtype (default ${config.DTYPE_ENV}, else float32); maps and statistics stay "
                            "float32 (bfloat16 is the CPU's half precision: float16 is slow there)")
    if "--keep-maps" not in parser._option_string_actions:  # prune has its own (keep the maps, remove the batches)
        group.add_argument("--keep-maps", action="store_true", default=None,
                           help="keep every extracted map in the cache, also those one pass reads "
                                f"(default ${config.KEEP_MAPS_ENV})")
    group.add_argument("--json", default=None, metavar="OUT",
                       help="write the result as JSON to OUT ('-': standard output, as without --json)")
    group.add_argument("--quiet", action="store_true", help="no progress bars")
    group.add_argument("--no-bos", action="store_true", default=None,
                       help=f"a decoder's inputs without its BOS token, starting with the first word (default ${config.NO_BOS_ENV}, "
                            "else with BOS); encoders keep their [CLS]")


def capped_counts(counts: dict[str, tuple[int | None, int]]) -> dict[str, dict[str, int]]:
    """The counts that were capped, ``{name: {"asked": N, "produced": M}}`` with ``M < N``, each said on
    standard error in one line (``note: --segments 1000000000: only 1441 exist; all 1441 were used``).

    ``counts`` maps a count option's name (its ``dest``, e.g. ``"segments"``, ``"max_sentences"``; with
    ``":what"`` for one of several, ``"max_documents:dev"``) to ``(asked, produced)``; ``asked`` ``None``
    (no limit asked) is never capped."""
    capped = {}
    for name, (asked, produced) in counts.items():
        if asked is None or produced >= asked:
            continue
        option, _, what = name.partition(":")
        where = f" ({what})" if what else ""
        print(f"note: --{option.replace('_', '-')} {asked}{where}: only {produced} exist; all {produced} were used",
              file=sys.stderr)
        capped[name] = {"asked": int(asked), "produced": int(produced)}
    return capped


def with_counts(result: dict, counts: dict[str, tuple[int | None, int]]) -> dict:
    """``result`` with ``"counts"`` (:func:`capped_counts`) added when a count option asked for more than
    exists; unchanged otherwise, so the layout of an uncapped run is what it always was."""
    capped = capped_counts(counts)
    return {**result, "counts": capped} if capped else result


def load(args: argparse.Namespace):
    """The model named by the common options."""
    from helpers.core.models import load_model

    no_bos = getattr(args, "no_bos", None)
    lm = load_model(args.model, random_init=args.random_init, seed=args.seed, device=args.device,
                    cache_root=args.cache_dir, bos=False if no_bos else None, dtype=context(args).dtype)
    if no_bos and not lm.causal:
        raise ValueError(f"--no-bos: {lm.label} is an encoder, whose inputs keep their [CLS]; the option is for "
                         "decoders (causal language models)")
    return lm


def context(args: argparse.Namespace) -> RunContext:
    """The command's :class:`~helpers.context.RunContext`: its ``--data-dir``, ``--cache-dir``, ``--device``,
    ``--dtype``, ``--quiet`` and engine options, the rest from the environment. Built once per command: the CLI's ``main``
    keeps it on ``args`` (``args.context``). A command runs a section at the sizes it is given, never at the
    chapters' small configuration: it runs them in ``context(args).replace(small=False)``."""
    ctx = getattr(args, "context", None)
    if ctx is None:
        from helpers.pipeline.engine import Execution

        execution = Execution.from_args(args) if hasattr(args, "engine") else None
        ctx = RunContext.from_env(data_dir=args.data_dir, cache_dir=args.cache_dir, progress=not args.quiet,
                                  execution=execution, device=args.device, no_bos=getattr(args, "no_bos", None),
                                  keep_maps=getattr(args, "keep_maps", None), dtype=getattr(args, "dtype", None))
        args.context = ctx
    return ctx


def run_context(args: argparse.Namespace) -> RunContext:
    """The context a command runs sections in: :func:`context` in the full configuration (a command's sizes are
    its options, never the chapters' small ones)."""
    return context(args).replace(small=False)


# --------------------------------------------------------------------------------- extract


def add_corpus_args(parser: argparse.ArgumentParser, *, default: str = "gum:test") -> None:
    parser.add_argument("--corpus", default=default,
                        help="gum:train|dev|test|test2, ewt:dev, segments, or a .conllu path (default %(default)s)")
    parser.add_argument("--conllu", default=None, metavar="FILE", help="a CoNLL-U file (overrides --corpus)")
    parser.add_argument("--max-sentences", type=positive_int, default=None, metavar="N",
                        help="use only the first N sentences, in file order")
    parser.add_argument("--max-length", type=max_length_int, default=MAX_LENGTH,
                        help="longest input in tokens, special tokens included; longer ones are skipped and counted")


def encode_corpus(args: argparse.Namespace, lm):
    """The :class:`EncodedBatch` and source-file digest for the corpus options."""
    from helpers.core.encoding import check_positions, encode_words
    from helpers.data.corpora import corpus_files, file_digest, load_gum, load_treebank
    from helpers.data.segments import encode_segments, paper_segments

    spec = args.conllu or args.corpus
    if spec == "segments":
        split = "train"  # the paper's segments: drawn from GUM train (helpers.data.segments)
        docs = load_gum(split, data_dir=args.data_dir, cache_root=args.cache_dir)
        segs = paper_segments(docs, lm.tokenizer, n=args.segments, max_length=args.max_length, seed=args.seed)
        files = corpus_files(f"gum:{split}", data_dir=args.data_dir)
        batch = encode_segments(lm.tokenizer, segs, max_length=args.max_length)
        check_positions(batch, lm.max_positions)
        return batch, file_digest(files), "token"
    sentences = load_treebank(spec, data_dir=args.data_dir, max_sentences=args.max_sentences, cache_root=args.cache_dir)
    batch = encode_words(lm.tokenizer, [s.words for s in sentences], max_length=args.max_length,
                         model_max=lm.max_positions)
    return batch, file_digest(corpus_files(spec, data_dir=args.data_dir)), None
