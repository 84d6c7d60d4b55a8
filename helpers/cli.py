"""Command line: ``python -m helpers COMMAND ...`` runs each analysis headless and writes JSON.

Commands: ``info`` (model, data, cache), ``extract`` (attention maps into the cache),
``download`` (corpora at pinned versions), ``install-model``; one per paper section from its
``command.py``; all listed in one explicit table, :data:`COMMANDS`.
Every command takes ``--model``, ``--random-init``, ``--seed``, ``--data-dir``, ``--cache-dir``
and ``--device``; errors are printed as one line naming the argument, file or line at fault, with
exit status 2 (operating-system errors name the option and the file: :func:`describe_os_error`).
Options, the output path, the cache folder, the model, the device and the input files are checked
before any model loads (:func:`preflight`); ``--json -`` is standard output; a result that cannot be
written to ``--json`` is kept in the cache (``results/``) and the error line says where.
"""
from __future__ import annotations

import argparse
import functools
import os
import sys
import time
from pathlib import Path

from helpers import config, results
from helpers.compare import command as compare
from helpers.data.files import nan_to_null, strict_dumps, write_output, write_text
from helpers.pipeline import segments
from helpers.pipeline.argtypes import (
    STDOUT,
    check_no_link_loop,
    check_output_path,
    check_writable_folder,
    positive_int,
)
from helpers.pipeline.engine import Execution, add_execution_args
from helpers.pipeline.options import (
    Command,
    add_common,
    add_corpus_args,
    context,
    encode_corpus,
    load,
    with_counts,
)

# ------------------------------------------------------------------------------------ info


def _info_args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--no-model", action="store_true", help="do not load the model")


def cmd_info(args: argparse.Namespace) -> dict:
    from helpers.data.cache import cache_entries, cache_usage
    from helpers.data.corpora import GUM_SPLITS, gum_split_documents, verify

    out: dict = {}
    if not args.no_model:
        lm = load(args)
        out["model"] = {
            "name": lm.label, "source": lm.source, "origin": lm.origin, "layers": lm.n_layers, "heads": lm.n_heads,
            "max_positions": lm.max_positions, "tokenizer": type(lm.tokenizer).__name__,
            "token_types": lm.token_types, "fingerprint": lm.fingerprint()[:16], "causal": lm.causal,
        }
        if lm.causal:
            out["model"].update(kv_heads=lm.n_kv_heads, bos=lm.bos)
        if lm.dtype != "float32":  # float32 keeps the layout it always had
            out["model"]["dtype"] = lm.dtype
    try:
        root = config.data_dir(args.data_dir)
        check = verify(root)
        out["data"] = {
            "dir": str(root),
            "gum_documents": {s: len(gum_split_documents(s, data_dir=root)) for s in GUM_SPLITS},
            "ewt_dev": (root / "ud-english-ewt" / "en_ewt-ud-dev.conllu").is_file(),
            "pinned_files_ok": len(check["ok"]), "missing": len(check["missing"]),
            "checksum_mismatch": check["mismatch"][:20],
        }
    except (FileNotFoundError, config.DataNotFoundError) as err:
        out["data"] = {"error": str(err)}
    entries = cache_entries(args.cache_dir, remove_stale=True)
    out["cache"] = {
        "dir": str(config.cache_dir(args.cache_dir)),
        "entries": [{k: e.get(k) for k in ("key", "model", "level", "word_mode", "examples", "complete", "bytes")}
                    for e in entries],
        "bytes": sum(e["bytes"] for e in entries),
        "usage": cache_usage(args.cache_dir),  # bytes by kind; `prune` removes maps and probe batches
    }
    return out


def _extract_args(parser: argparse.ArgumentParser) -> None:
    add_corpus_args(parser)
    parser.add_argument("--level", choices=("word", "token"), default="word")
    parser.add_argument("--word-mode", choices=("mean", "first"), default="mean",
                        help="rows of split words: mean over tokens (paper) or first token (released code)")
    parser.add_argument("--segments", type=positive_int, default=segments.SEGMENTS,
                        help=f"segments to draw for --corpus segments (default {segments.SEGMENTS})")
    parser.add_argument("--batch-size", type=positive_int, default=32)
    parser.add_argument("--no-cache", action="store_true", help="compute without reading or writing the cache")
    add_execution_args(parser)


def cmd_extract(args: argparse.Namespace) -> dict:
    from helpers.pipeline.extraction import extract

    execution = Execution.from_args(args)
    if execution.distributed and args.no_cache:
        raise ValueError("--no-cache: a distributed engine hands shards over through the cache; "
                         "drop --no-cache or use --engine local")
    lm = load(args)
    batch, digest, forced_level = encode_corpus(args, lm)
    level = forced_level or args.level
    start = time.perf_counter()
    store = extract(lm, batch, level=level, word_mode=args.word_mode, cache=not args.no_cache,
                    cache_root=args.cache_dir, source_digest=digest, batch_size=args.batch_size,
                    progress=not args.quiet, execution=execution)
    if args.no_cache:
        for _ in store:
            pass
    summary = store.summary()
    if batch.skipped:
        print(f"note: {len(batch.skipped)} input(s) longer than {batch.max_length} tokens were skipped "
              f"(indices {batch.skipped[:10]}{' ...' if len(batch.skipped) > 10 else ''})", file=sys.stderr)
    drawn = len(batch.examples) + len(batch.skipped)
    asked = ("segments", args.segments) if forced_level else ("max_sentences", args.max_sentences)
    return with_counts({"model": lm.label, "corpus": args.conllu or args.corpus, **summary,
                        "skipped_indices": batch.skipped, "seconds": round(time.perf_counter() - start, 3)},
                       {asked[0]: (asked[1], drawn)})


# -------------------------------------------------------------------------------- download


def _download_args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--only", choices=("gum", "ewt", "blimp"), default=None, help="fetch one corpus only")


def cmd_download(args: argparse.Namespace) -> dict:
    from helpers.data.corpora import download

    target = config.data_dir(args.data_dir, must_exist=False)
    counts = download(target, only=args.only, progress=not args.quiet)
    return {"data_dir": str(target), **counts}


# --------------------------------------------------------------------------- install-model


def _install_model_args(parser: argparse.ArgumentParser) -> None:
    from helpers.core.model_extras import EXTRAS

    parser.add_argument("name", choices=sorted(EXTRAS), help="registered optional model")


def cmd_install_model(args: argparse.Namespace) -> dict:
    from helpers.core.model_extras import install_extra

    path = install_extra(args.name, cache_root=args.cache_dir, progress=not args.quiet)
    print(f"installed: use --model {args.name} (or --model {path})", file=sys.stderr)
    return {"name": args.name, "directory": str(path)}

# ------------------------------------------------------------------------------------ prune


def _prune_args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--keep-maps", action="store_true",
                        help="remove the spilled probe batches only, keep the attention maps")
    parser.add_argument("--dry-run", action="store_true", help="say what would be removed, remove nothing")


def cmd_prune(args: argparse.Namespace) -> dict:
    from helpers.data.cache import cache_usage, prune

    out = prune(args.cache_dir, keep_maps=args.keep_maps, dry_run=args.dry_run)
    out["after"] = out["before"] if args.dry_run else cache_usage(args.cache_dir)
    gb = lambda n: f"{n / 1e9:.2f} GB"  # noqa: E731
    verb = "would remove" if args.dry_run else "removed"
    print(f"{out['dir']}: {verb} {gb(out['bytes_removed'])} ({len(out['extractions_pruned'])} extraction(s)); "
          f"{gb(out['after']['total'])} left, of which results {gb(out['after']['results'])}"
          + (f"; {len(out['extractions_in_use'])} in use by a running analysis, kept" if out["extractions_in_use"] else ""),
          file=sys.stderr)
    return out


# ------------------------------------------------------------------------------- the table

# Every command, in the order of ``--help``: the general ones, then one per section (each section's record,
# in :data:`helpers.results.SECTIONS`), then the summaries built on the sections' claims.
COMMANDS: tuple[Command, ...] = (
    Command("info", "model, its layers and heads, corpora found, cache contents",
            _info_args, cmd_info),
    Command("extract", "extract attention maps of a corpus into the disk cache",
            _extract_args, cmd_extract),
    Command("download", "fetch GUM, UD English EWT and BLiMP at pinned commits, verifying checksums",
            _download_args, cmd_download),
    Command("install-model", "install an optional offline model (e.g. the 12 x 12 mpnet-base), print its directory",
            _install_model_args, cmd_install_model),
    Command("prune", "free the disk: remove cached attention maps and spilled probe batches, keep every result "
                     "(run it while no analysis reads the cache)",
            _prune_args, cmd_prune),
    segments.COMMAND,
    *(s.command for s in results.SECTIONS),
    results.COMMAND,
    compare.COMMAND,
)
SECTION_COMMANDS = {s.command.name: s for s in results.SECTIONS}  # a section's command: its record


# ------------------------------------------------------------------------------------ main


class _Parser(argparse.ArgumentParser):
    """Reports a bad command line in one line (``prog: error: argument --epochs: ...``), exit status 2."""

    def error(self, message: str):
        from helpers.core.encoding import printable

        self.exit(2, f"{self.prog}: error: {printable(message.replace(chr(10), ' '))} (see {self.prog} --help)\n")


def command_section(record) -> str:
    """What a section's command covers, from its record: ``paper §3``, or ``beyond the paper``."""
    return f"paper {record.paper}" if record.paper else "beyond the paper"


def _check_record_reads(record, args: argparse.Namespace) -> None:
    """A section command's corpus check: what its record reads with the options given
    (:meth:`helpers.section.Section.command_reads`)."""
    from helpers.pipeline.argtypes import check_corpora

    check_corpora(args, *record.command_reads(vars(args)))


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="python -m helpers",
        description="Attention analysis of transformer encoders and decoders (Clark et al., 2019), headless, with JSON output.",
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for cmd in COMMANDS:
        record = SECTION_COMMANDS.get(cmd.name)
        text = cmd.help if record is None else f"{command_section(record)}: {cmd.help}"
        p = sub.add_parser(cmd.name, help=text, description=text)
        if record is not None:  # a section's options default to its record's settings
            cmd.arguments(p, record.sizes.pick(small=False))
            if p.get_default("check_inputs") is None:  # the corpora its record reads with these options
                p.set_defaults(check_inputs=functools.partial(_check_record_reads, record))
        else:
            cmd.arguments(p)
        add_common(p)
    return parser




# Commands that never write the cache (``info`` only reads it; ``segments`` keeps parsed trees there when
# it can): a read-only cache folder is fine for them. ``extract --no-cache`` writes nothing either.
READ_ONLY_COMMANDS: tuple[str, ...] = ("info", "download", "segments")
# Commands whose inputs are words (``--max-length`` must fit the model); segment commands are checked on
# the segments they build (:func:`helpers.core.encoding.check_positions`).
WORD_LEVEL_COMMANDS: tuple[str, ...] = ("extract", "heads", "coref", "probe", "claims")


def cache_label(args: argparse.Namespace) -> str:
    """How the error lines name the cache folder: ``--cache-dir DIR``, ``$BERT_ATTENTION_CACHE=DIR`` or the default's path."""
    from helpers.core.encoding import printable

    if getattr(args, "cache_dir", None):
        return f"--cache-dir {printable(args.cache_dir)}"
    env = os.environ.get(config.CACHE_ENV)
    if env:
        return f"${config.CACHE_ENV}={printable(env)}"
    return f"the cache folder {config.cache_dir()} (choose another with --cache-dir)"


def check_cache(args: argparse.Namespace) -> None:
    """The cache folder is a folder, or can be made: checked before the model loads, so an unusable
    ``--cache-dir`` is named at once. A folder that exists but cannot be written (a lab's prebuilt cache,
    left read-only) is accepted here: a run whose results are all in it only reads it, and one that must
    add to it is refused before that work, where the cache finds the miss
    (:func:`helpers.data.files.require_writable`)."""
    cache = config.cache_dir(getattr(args, "cache_dir", None))
    where = cache_label(args)
    if cache.exists() and not cache.is_dir():
        raise NotADirectoryError(f"{where}: is {'a file' if cache.is_file() else 'a device, pipe or socket'}, not a folder")
    if args.command in READ_ONLY_COMMANDS or getattr(args, "no_cache", False) or cache.is_dir():
        return
    check_writable_folder(cache, where)  # a new cache folder: it must be possible to make it


def check_model_option(args: argparse.Namespace) -> int | None:
    """The model of ``--model`` (or ``$BERT_ATTENTION_MODEL``, or the default) can be loaded: its folder
    is whole, or the hub name is known here. Returns its input limit in tokens (``None``: no model used)."""
    from helpers.context import model_for
    from helpers.core.models import MODEL_ENV, check_model

    if args.command in ("download", "install-model", "compare", "prune") or getattr(args, "no_model", False):
        return None
    name = model_for(args.model)  # --model, else $BERT_ATTENTION_MODEL, else None: the default
    option = "--model" if args.model else f"${MODEL_ENV}"
    return check_model(name, cache_root=args.cache_dir, option=option, random_init=args.random_init)


def check_dtype_option(args: argparse.Namespace) -> None:
    """``$BERT_ATTENTION_DTYPE`` names a dtype (``--dtype`` was checked by argparse); float16 weights on the CPU get a
    one-line note: they work, but the CPU's float16 matrix products are several times slower than float32's."""
    if not hasattr(args, "dtype"):
        return
    dtype = config.requested_dtype(args.dtype)
    device = config.requested_device(getattr(args, "device", None))
    if dtype == "float16" and (device is None or str(device).startswith("cpu")):
        print("note: --dtype float16 on the CPU is slow (its float16 matrix products are not vectorised); "
              "bfloat16 is the CPU's half precision", file=sys.stderr)


def check_max_length(args: argparse.Namespace, limit: int | None) -> None:
    """``--max-length`` fits the model's positions, for commands whose inputs are words (segment commands
    check the segments they build)."""
    spec = getattr(args, "conllu", None) or getattr(args, "corpus", None)
    max_length = getattr(args, "max_length", None)
    if (limit is not None and args.command in WORD_LEVEL_COMMANDS and spec != "segments" and max_length is not None
            and max_length > limit):
        raise ValueError(f"--max-length {max_length} exceeds the model's limit of {limit} positions")


def preflight(args: argparse.Namespace) -> None:
    """Everything that can be checked before a model loads (seconds) rather than after: where the result
    goes (``--json``), the cache folder, the model (its folder, or its hub name) and every input file the
    command reads (``--conllu``, ``--corpus``, ``--glove`` and what the command declares with
    ``set_defaults(check_inputs=...)``). Options and ``--device`` were checked by their argparse types already."""
    from helpers.core.encoding import printable
    from helpers.data.corpora import check_glove, load_gum, load_treebank

    for option, env in (("cache_dir", config.CACHE_ENV), ("data_dir", config.DATA_ENV)):
        value = getattr(args, option, None) or os.environ.get(env)
        if value:
            label = f"--{option.replace('_', '-')} {value}" if getattr(args, option, None) else f"${env}={value}"
            check_no_link_loop(value, printable(label))
    if getattr(args, "json", None) and args.json != STDOUT:
        check_output_path(args.json)
    if hasattr(args, "engine"):
        Execution.from_args(args)  # --engine, --workers and --address agree; Dask installed if asked for
    check_cache(args)
    with context(args).active():  # what the checks keep (parsed corpora, the code keys' memo) goes to --cache-dir
        check_dtype_option(args)
        limit = check_model_option(args)
        spec = getattr(args, "conllu", None) or getattr(args, "corpus", None)
        if spec == "segments":
            load_gum("train", data_dir=args.data_dir, cache_root=args.cache_dir)
        elif spec:
            load_treebank(spec, data_dir=args.data_dir, max_sentences=getattr(args, "max_sentences", None),
                          cache_root=args.cache_dir)
        glove = getattr(args, "glove", None)
        if glove:
            check_glove(glove)
        check_inputs = getattr(args, "check_inputs", None)
        if check_inputs is not None:
            check_inputs(args)
        check_max_length(args, limit)


def _save_in_cache(args: argparse.Namespace, text: str) -> Path:
    """Keep a result that could not be written where asked: ``<cache>/results/<command>-<time>-<pid>.json``."""
    stamp = time.strftime("%Y%m%d-%H%M%S")
    path = config.cache_dir(args.cache_dir) / "results" / f"{args.command}-{stamp}-{os.getpid()}.json"
    write_text(path, text)
    return path


def _output(args: argparse.Namespace, result: dict) -> int:
    """Write ``result`` to ``--json`` (standard output for ``-`` or none); if that fails, keep it in the
    cache and say where."""
    text = strict_dumps(nan_to_null(result), indent=1) + "\n"
    if not args.json or args.json == STDOUT:
        sys.stdout.write(text)
        sys.stdout.flush()
        return 0
    try:
        write_output(args.json, text)
    except OSError as err:
        reason = f"cannot write --json {args.json} ({err.strerror or err})"
        try:
            saved = _save_in_cache(args, text)
        except OSError as cache_err:
            print(f"error: {reason}; nor in the cache ({cache_err.strerror or cache_err}): "
                  "the result follows on standard output", file=sys.stderr)
            sys.stdout.write(text)
            return 2
        print(f"error: {reason}; the result was saved to {saved}", file=sys.stderr)
        return 2
    print(f"wrote {args.json}", file=sys.stderr)
    return 0


# What to do about an operating-system error, by errno name.
_OS_HINTS = {
    "EFBIG": "a file-size limit (ulimit -f) stopped the write",
    "ENOSPC": "the disk is full",
    "EDQUOT": "the disk quota is used up",
    "EROFS": "the file system is read-only",
    "EACCES": "no permission",
    "EPERM": "no permission",
}


def _named_paths(args: argparse.Namespace) -> list[tuple[str, Path]]:
    """``(how an error names it, path)`` for every path option of ``args``, most specific first."""
    named: list[tuple[str, Path]] = []
    for option in ("json", "conllu", "glove", "train", "dev", "model", "test"):
        value = getattr(args, option, None)
        for item in value if isinstance(value, list) else [value]:
            if isinstance(item, str) and item and item != STDOUT:
                named.append((f"--{option} {item}", Path(item).expanduser().absolute()))
    named.append((cache_label(args), config.cache_dir(getattr(args, "cache_dir", None))))
    data = getattr(args, "data_dir", None) or os.environ.get(config.DATA_ENV)
    if data:
        label = f"--data-dir {data}" if getattr(args, "data_dir", None) else f"${config.DATA_ENV}={data}"
        named.append((label, Path(data).expanduser().absolute()))
    return named


def describe_os_error(err: OSError, args: argparse.Namespace) -> str:
    """One line for an operating-system error: the option whose path it concerns, the file, and why
    (``--cache-dir /c: cannot write /c/k/shard-00000.npz: File too large (a file-size limit ...)``).
    An ``OSError`` of our own (a message, no errno) is returned as it is."""
    import errno as errnos

    if err.errno is None:
        return str(err)
    reason = err.strerror or str(err)
    hint = _OS_HINTS.get(errnos.errorcode.get(err.errno, ""))
    reason = f"{reason} ({hint})" if hint else reason
    if not err.filename:
        return f"{reason}; the system named no file: this command writes to {cache_label(args)} and --json"
    path = Path(os.fsdecode(err.filename)).expanduser().absolute()
    for label, root in _named_paths(args):
        if path == root:
            return f"{label}: {reason}"
        if root in path.parents:
            return f"{label}: {path}: {reason}"
    return f"{path}: {reason}"


def main(argv: list[str] | None = None) -> int:
    """Run one command; returns the exit status (0, 2 for bad input or an unwritable output, 130 on Ctrl-C)."""
    from helpers.core.encoding import printable

    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as stop:  # a bad option (one line already printed), or --help
        return stop.code if isinstance(stop.code, int) else 0
    from helpers.ablation.interventions import NotMaskable
    from helpers.core.errors import ModelNotAvailableError
    from helpers.data.conllu_io import ConllError

    command = next(c for c in COMMANDS if c.name == args.command)
    try:
        preflight(args)
        ctx = context(args)  # the run's settings, read once (kept on args for the handler)
        with ctx.active():
            record = SECTION_COMMANDS.get(command.name)
            if record is not None:  # a section's command: its record's run, with the reports it reads
                result = results.run_command(record, args)
            else:
                result = command.handler(args)
    except KeyboardInterrupt:
        print("interrupted: finished cache shards are kept; run the same command again to resume",
              file=sys.stderr)
        return 130
    except (ConllError, ModelNotAvailableError, NotMaskable, config.DataNotFoundError, OSError, ValueError) as err:
        message = describe_os_error(err, args) if isinstance(err, OSError) else str(err)
        print("error: " + printable(" ".join(message.split("\n"))), file=sys.stderr)
        return 2
    return _output(args, result)
