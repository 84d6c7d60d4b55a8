"""Command line: ``python -m helpers COMMAND ...`` runs each analysis headless and writes JSON.

Commands: ``info`` (model, data, cache), ``extract`` (attention maps into the cache),
``download`` (corpora at pinned versions). Chapters register more with :func:`command`.
Every command takes ``--model``, ``--random-init``, ``--seed``, ``--data-dir``, ``--cache-dir``
and ``--device``; errors are printed as one line naming the argument, file or line at fault, with
exit status 2.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import Callable

from . import config

Handler = Callable[[argparse.Namespace], dict]
_COMMANDS: dict[str, tuple[str, Callable[[argparse.ArgumentParser], None], Handler]] = {}


def command(name: str, help_text: str, arguments: Callable[[argparse.ArgumentParser], None]):
    """Register a sub-command: ``arguments`` adds its options, the decorated function returns the JSON."""
    def register(handler: Handler) -> Handler:
        _COMMANDS[name] = (help_text, arguments, handler)
        return handler
    return register


def add_common(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("model, data and cache")
    group.add_argument("--model", default=None, metavar="NAME",
                       help="Hugging Face name or local directory (default: the offline all-MiniLM-L6-v2)")
    group.add_argument("--random-init", nargs="?", const="paper", default=False, choices=("paper", "all"),
                       help="random weights in the model's architecture: the paper's control keeps the pre-trained word "
                            "and position embeddings (default); 'all' randomises every weight")
    group.add_argument("--seed", type=int, default=0, help="seed for random init and sampling (default 0)")
    group.add_argument("--data-dir", default=None, metavar="DIR",
                       help=f"corpora folder (default ${config.DATA_ENV}, else ../shared/data)")
    group.add_argument("--cache-dir", default=None, metavar="DIR",
                       help=f"cache of maps, parsed treebanks and results (default ${config.CACHE_ENV}, else ~/.cache/bert-attention)")
    group.add_argument("--device", default=None, help="torch device, e.g. cpu or cuda (default cpu)")
    group.add_argument("--json", default=None, metavar="OUT", help="write the result as JSON to OUT")
    group.add_argument("--quiet", action="store_true", help="no progress bars")


def load(args: argparse.Namespace):
    """The model named by the common options."""
    from .models import load_model

    return load_model(args.model, random_init=args.random_init, seed=args.seed, device=args.device)


def write_json(path: str | Path, payload: dict) -> None:
    """Write JSON atomically (a temporary file renamed into place)."""
    from .cache import _atomic_write

    _atomic_write(Path(path), lambda h: h.write((json.dumps(payload, indent=1) + "\n").encode()))


# ------------------------------------------------------------------------------------ info


def _info_args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--no-model", action="store_true", help="do not load the model")


@command("info", "model, its layers and heads, corpora found, cache contents", _info_args)
def cmd_info(args: argparse.Namespace) -> dict:
    from .cache import cache_entries
    from .corpora import GUM_SPLITS, gum_split_documents, verify

    out: dict = {}
    if not args.no_model:
        lm = load(args)
        out["model"] = {
            "name": lm.label, "source": lm.source, "layers": lm.n_layers, "heads": lm.n_heads,
            "max_positions": lm.max_positions, "tokenizer": type(lm.tokenizer).__name__,
            "token_types": lm.token_types, "fingerprint": lm.fingerprint()[:16],
        }
    try:
        root = config.data_dir(args.data_dir)
        check = verify(root)
        out["data"] = {
            "dir": str(root),
            "gum_documents": {s: len(gum_split_documents(s, root=root)) for s in GUM_SPLITS},
            "ewt_dev": (root / "ud-english-ewt" / "en_ewt-ud-dev.conllu").is_file(),
            "pinned_files_ok": len(check["ok"]), "missing": len(check["missing"]),
            "checksum_mismatch": check["mismatch"][:20],
        }
    except (FileNotFoundError, config.DataNotFoundError) as err:
        out["data"] = {"error": str(err)}
    entries = cache_entries(args.cache_dir)
    out["cache"] = {
        "dir": str(config.cache_dir(args.cache_dir)),
        "entries": [{k: e.get(k) for k in ("key", "model", "level", "word_mode", "examples", "complete", "bytes")}
                    for e in entries],
        "bytes": sum(e["bytes"] for e in entries),
    }
    return out


# --------------------------------------------------------------------------------- extract


def add_corpus_args(parser: argparse.ArgumentParser, *, default: str = "gum:test") -> None:
    parser.add_argument("--corpus", default=default,
                        help="gum:train|dev|test|test2, ewt:dev, segments, or a .conllu path (default %(default)s)")
    parser.add_argument("--conllu", default=None, metavar="FILE", help="a CoNLL-U file (overrides --corpus)")
    parser.add_argument("--max-sentences", type=int, default=None, metavar="N",
                        help="use only the first N sentences, in file order")
    parser.add_argument("--max-length", type=int, default=128,
                        help="longest input in tokens, special tokens included; longer ones are skipped and counted")


def _extract_args(parser: argparse.ArgumentParser) -> None:
    add_corpus_args(parser)
    parser.add_argument("--level", choices=("word", "token"), default="word")
    parser.add_argument("--word-mode", choices=("mean", "first"), default="mean",
                        help="rows of split words: mean over tokens (paper) or first token (released code)")
    parser.add_argument("--segments", type=int, default=1000, help="segments to draw for --corpus segments")
    parser.add_argument("--segment-source", default="gum:train", help="GUM split segments are drawn from")
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--no-cache", action="store_true", help="compute without reading or writing the cache")


def encode_corpus(args: argparse.Namespace, lm):
    """The :class:`EncodedBatch` and source-file digest for the corpus options."""
    from .corpora import corpus_files, file_digest, load_gum, load_treebank
    from .encoding import encode_words
    from .segments import encode_segments, paper_segments

    spec = args.conllu or args.corpus
    if spec == "segments":
        split = args.segment_source.removeprefix("gum:")
        docs = load_gum(split, root=args.data_dir)
        segs = paper_segments(docs, lm.tokenizer, n=args.segments, max_length=args.max_length, seed=args.seed)
        files = corpus_files(f"gum:{split}", root=args.data_dir)
        return encode_segments(lm.tokenizer, segs, max_length=args.max_length), file_digest(files), "token"
    sentences = load_treebank(spec, root=args.data_dir, max_sentences=args.max_sentences)
    batch = encode_words(lm.tokenizer, [s.words for s in sentences], max_length=args.max_length,
                         model_max=lm.max_positions)
    return batch, file_digest(corpus_files(spec, root=args.data_dir)), None


@command("extract", "extract attention maps of a corpus into the disk cache", _extract_args)
def cmd_extract(args: argparse.Namespace) -> dict:
    from .cache import extract

    lm = load(args)
    batch, digest, forced_level = encode_corpus(args, lm)
    level = forced_level or args.level
    start = time.perf_counter()
    store = extract(lm, batch, level=level, word_mode=args.word_mode, cache=not args.no_cache,
                    cache_root=args.cache_dir, source_digest=digest, batch_size=args.batch_size,
                    progress=not args.quiet)
    if args.no_cache:
        for _ in store:
            pass
    summary = store.summary()
    if batch.skipped:
        print(f"note: {len(batch.skipped)} input(s) longer than {batch.max_length} tokens were skipped "
              f"(indices {batch.skipped[:10]}{' ...' if len(batch.skipped) > 10 else ''})", file=sys.stderr)
    return {"model": lm.label, "corpus": args.conllu or args.corpus, **summary,
            "skipped_indices": batch.skipped, "seconds": round(time.perf_counter() - start, 3)}


# -------------------------------------------------------------------------------- download


def _download_args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--only", choices=("gum", "ewt"), default=None, help="fetch one corpus only")


@command("download", "fetch GUM and UD English EWT at pinned commits, verifying checksums", _download_args)
def cmd_download(args: argparse.Namespace) -> dict:
    from .corpora import download

    target = config.data_dir(args.data_dir, must_exist=False)
    counts = download(target, only=args.only, progress=not args.quiet)
    return {"data_dir": str(target), **counts}


# ------------------------------------------------------------------------------------ main


def build_parser() -> argparse.ArgumentParser:
    _register_chapter_commands()
    parser = argparse.ArgumentParser(
        prog="python -m helpers",
        description="Attention analysis of BERT-family models (Clark et al., 2019), headless, with JSON output.",
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name, (help_text, arguments, _) in _COMMANDS.items():
        p = sub.add_parser(name, help=help_text, description=help_text)
        arguments(p)
        add_common(p)
    return parser


# Modules whose import registers a chapter's command with :func:`command` (e.g. "helpers.surface").
CHAPTER_COMMAND_MODULES: tuple[str, ...] = ("helpers.segments_pipeline", "helpers.surface_pipeline", "helpers.syntax_pipeline", "helpers.cluster_pipeline",
                                             "helpers.coref_pipeline", "helpers.probe_pipeline")


def _register_chapter_commands() -> None:
    import importlib

    for module in CHAPTER_COMMAND_MODULES:
        importlib.import_module(module)


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    from .conllu_io import ConllError
    from .models import ModelNotAvailableError

    handler = _COMMANDS[args.command][2]
    previous_cache = os.environ.get(config.CACHE_ENV)
    if getattr(args, "cache_dir", None):  # every cache of this run (parsed treebanks too) goes there
        os.environ[config.CACHE_ENV] = str(config.cache_dir(args.cache_dir))
    try:
        result = handler(args)
    except KeyboardInterrupt:
        print("interrupted: finished cache shards are kept; run the same command again to resume",
              file=sys.stderr)
        return 130
    except (ConllError, ModelNotAvailableError, config.DataNotFoundError, FileNotFoundError, ValueError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    finally:
        if previous_cache is None:
            os.environ.pop(config.CACHE_ENV, None)
        else:
            os.environ[config.CACHE_ENV] = previous_cache
    if args.json:
        write_json(args.json, result)
        print(f"wrote {args.json}", file=sys.stderr)
    else:
        print(json.dumps(result, indent=1))
    return 0
